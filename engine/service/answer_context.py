"""What a session's window holds: the window a backtest or `serve` used, why it is that size, and how many ticks
its answers attended, so an answer can be recomputed outside flashtick (a fresh transformers forward over the
last `context_ticks` tick lines) and a window of a handful of ticks is said, not guessed.

The window's cause is decided in one place (engine/context_rolls.py window_cause: scheduler.window, the pool, the
model's max_position_embeddings or a Mistral model's sliding_window); `serve`'s start line and a backtest's
summary both say it. Below FEW_TICKS ticks of context an answer sees too little history to mean much: warned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from connectors.codec import TOKENS_PER_TICK
from connectors.text_codec import TextCodec
from connectors.text_templates import SAMPLE_FIELDS
from engine.context_rolls import window_cause
from engine.rust_paths import rust_path

FEW_TICKS = 32  # a context of fewer ticks than this is warned about


# a trade as a live feed prints it (a BTC trade of review350's file: 7 significant digits, an odd size, a gap)
TYPICAL_TRADE = {**SAMPLE_FIELDS, "price": 61234.57, "size": 0.00213, "gap_ms": "12.5"}


def tokens_per_tick(codec: Any) -> int:
    """About how many tokens one tick takes: a typical trade line of a text codec's template; a tick model's 4."""
    if isinstance(codec, TextCodec):
        return max(1, len(codec.tokenize(codec.render_values(TYPICAL_TRADE, codec.config.trade_template))))
    return TOKENS_PER_TICK


def few_ticks_warning(window: int, per_tick: int, measured: str = "", *, positions: int, explicit: bool,
                      text: bool) -> str | None:
    """The warning for a window that holds fewer than FEW_TICKS ticks of ``per_tick`` tokens, else None. Its advice
    is only what can widen it: a larger scheduler.window (``explicit``) or KV pool while the window is below the
    model's ``positions`` (never past them: a Mistral's sliding_window refuses it), shorter lines for a ``text``
    codec's templates, another model."""
    ticks = window // per_tick
    if ticks >= FEW_TICKS:
        return None
    advice = ["a model with more positions"]
    if window < positions:
        advice.append(f"a larger {'scheduler.window' if explicit else 'KV pool (kv.cells or kv.bytes)'} (up to the "
                      f"model's {positions} positions)")
    if text:
        advice.append("shorter lines (codec.trade_template, codec.quote_template)")
    return (f"warning: each session's window of {window} tokens holds about {ticks} ticks at about {per_tick} tokens "
            f"a tick{measured} (fewer just after a roll): answers see little history; "
            f"{', '.join(advice[:-1])}{' or ' if len(advice) > 1 else ''}{advice[-1]} holds more")


def backtest_context_lines(pipeline: Any, out: Path, explicit_window: bool) -> list[str]:
    """A backtest's window, its cause, and the context its answers attended (the answers file's context_tokens and
    context_ticks), with the warning for a window of few ticks; none for an answers file without those columns
    (a resumed run's file, written before they were)."""
    scheduler = pipeline.engine.scheduler
    window = scheduler.window
    cause = window_cause(pipeline.engine.blocks, window, explicit_window)
    table = pl.scan_parquet(rust_path(out))
    if "context_ticks" not in table.collect_schema().names():
        return [f"context: each session's window {window} tokens ({cause})"]
    spread = table.filter(pl.col("context_ticks").is_not_null()).select(
        *(getattr(pl.col(c), f)().alias(f"{c}_{f}") for c in ("context_ticks", "context_tokens")
          for f in ("min", "median", "max")), pl.len().alias("n")).collect().row(0, named=True)
    lines = [f"context: each session's window {window} tokens ({cause})"]
    if spread["n"]:
        lines[0] += (f"; answers attended {spread['context_ticks_min']} to {spread['context_ticks_max']} ticks "
                     f"(median {spread['context_ticks_median']:g}), {spread['context_tokens_min']} to "
                     f"{spread['context_tokens_max']} tokens: each answer's are its context_ticks and "
                     f"context_tokens in the answers file")
    measured = bool(spread["n"]) and spread["context_ticks_max"] > 0
    per_tick = (round(spread["context_tokens_max"] / spread["context_ticks_max"]) if measured
                else tokens_per_tick(pipeline.codec))
    if (warning := few_ticks_warning(window, max(per_tick, 1), " in these answers" if measured else "",
                                     positions=pipeline.engine.blocks.max_positions, explicit=explicit_window,
                                     text=isinstance(pipeline.codec, TextCodec))) is not None:
        lines.append(warning)
    return lines
