"""A fine-tune's lineage: the models its weights descend from (its `--base`, that base's base, ... down to the
built-in model or a from-scratch start) and the ticks each trained on. `flashtick train --base` copies its base's
record into the checkpoint's evaluation.json (`trained_on.base`), whole, so it holds when the base's folder moves or
goes; `train` (its own test part), `evaluate` and `backtest --model` read it: a fine-tune scored on ticks a model it
descends from trained on is not out of sample, even when no step changed its weights (review443 #1: only the base
itself was told so).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from connectors.cautions import Caution
from engine.service.builtin_in_sample import SEEN_END, TRAINED_SPANS, instrument_key
from engine.service.market_caveat import MODEL_CARD
from engine.service.reading_record import checkpoint_evaluation


def base_record(base: Path | str | None, followed: frozenset[Path] = frozenset()) -> dict[str, Any] | None:
    """What a fine-tune records of its ``base`` (None: from scratch, nothing): its folder, resolved, and each stream it
    trained and validated on with the event times (ns) of its first and last such tick (`stream_starts`, `streams`,
    as its own evaluation.json has them), its own base's record inside (`base`). The built-in model's are its
    shared sets' spans (builtin_in_sample.TRAINED_SPANS); a base that kept none (a checkpoint from before they
    were kept, another tool's) records its folder alone, as does one among ``followed``, the checkpoints whose base
    it is (two old cards naming each other after an --overwrite)."""
    if base is None:
        return None
    from engine.models import BUILTIN_MODEL_DIR

    folder = Path(base).resolve()
    if folder == BUILTIN_MODEL_DIR.resolve():
        return {"model": str(folder), "builtin": True,
                "stream_starts": {name: start for name, (start, _) in TRAINED_SPANS.items()},
                "streams": {name: end for name, (_, end) in TRAINED_SPANS.items()}}
    trained = {} if folder in followed else checkpoint_lineage(folder, followed) or {}
    return {"model": str(folder), **{key: trained.get(key) for key in ("stream_starts", "streams", "base")}}


# the model card's line naming the base (finetune_card.py): `- Base: DIR (its answer heads not kept: ...); 2.43M
# parameters; ...`, `- Base: from scratch; ...`
CARD_BASE = re.compile(r"^- Base: (.+?)(?: \(its answer heads not kept[^)]*\))?; [\d.]+M parameters", re.M)


def checkpoint_lineage(model_dir: Path | str, followed: frozenset[Path] = frozenset()) -> dict[str, Any] | None:
    """A checkpoint's `trained_on` (its evaluation.json's; None: it has none) with its base's record. A checkpoint
    written before the base was recorded (no `base` key) gets the record of the folder its model card's `- Base:`
    line names, read now: the built-in model's spans are known whatever its path was; a folder given relative to
    where `train` ran is looked for beside the checkpoint, and one not found records nothing (no caution).
    ``followed``: as base_record's."""
    trained_on = (checkpoint_evaluation(model_dir) or {}).get("trained_on")
    if not isinstance(trained_on, dict) or "base" in trained_on:
        return trained_on
    try:
        named = CARD_BASE.search((Path(model_dir) / MODEL_CARD).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        named = None
    if named is None or named[1] == "from scratch":
        return trained_on | {"base": None}
    base = Path(named[1])
    if base.parts[-3:] == ("engine", "models", "builtin"):  # (another install's, or this one's before a move)
        from engine.models import BUILTIN_MODEL_DIR

        base = BUILTIN_MODEL_DIR
    return trained_on | {"base": base_record(base if base.is_absolute() else Path(model_dir).parent / base,
                                             followed | {Path(model_dir).resolve()})}


def lineage_caution(trained_on: Mapping[str, Any] | None, scored: Mapping[str, tuple[int, int]], what: str,
                    fix: str) -> Caution | None:
    """A caution when a stream of ``scored`` (stream -> the event times, ns, of its first and last scored tick) was
    scored inside the ticks a model this checkpoint descends from trained and validated on (``trained_on``: its
    evaluation.json's, whose `base` holds them); None when none was (or the checkpoint records no base). Streams
    are matched as instruments (`EUR/USD` is EURUSD: builtin_in_sample.instrument_key). ``what``: the scored
    part in words (`the test slice`); ``fix``: how to score only later ticks."""
    from connectors.tick_times import utc_text  # (not at the top: backtest_in_sample is imported at the CLI's start)

    base, generation = (trained_on or {}).get("base"), 0
    while isinstance(base, Mapping):
        starts, ends = _by_instrument(base.get("stream_starts")), _by_instrument(base.get("streams"))
        inside = [(stream, first, last, starts.get(key, first), ends[key]) for stream, (first, last) in
                  sorted(scored.items()) if (key := instrument_key(stream)) in ends
                  and first <= ends[key] and last >= starts.get(key, last)]
        if inside:
            stream, first, last, start, end = inside[0]
            who = "the built-in model" if base.get("builtin") else base.get("model")
            shared = f", the shared set's first {SEEN_END:.0%}" if base.get("builtin") else ""
            relation = "its base" + "'s base" * generation
            more = f"; so for {len(inside) - 1} more stream{'s' * (len(inside) > 2)}" if len(inside) > 1 else ""
            return Caution(
                f"this model's weights descend from {who} ({relation}), which trained and "
                f"was validated on stream {stream}'s ticks from {utc_text(start)} to {utc_text(end)} (UTC event "
                f"times{shared}), and {what} of {stream} runs from {utc_text(first)} to {utc_text(last)}, inside "
                f"them{more}: fine-tuning starts from what those ticks taught, so the scores are not out of sample "
                f"({fix})")
        base, generation = base.get("base"), generation + 1
    return None


def _by_instrument(recorded: Any) -> dict[str, int]:
    """A recorded stream -> event time (ns) map keyed by instrument_key; {} where none was kept."""
    return {instrument_key(str(name)): int(ts) for name, ts in recorded.items()} if isinstance(recorded, dict) else {}
