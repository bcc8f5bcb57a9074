"""Whether the built-in model is scored on the data it was trained on: the shared BTCUSDT and EURUSD sets
(engine/service/datasets.py's default sets, whose first 80% of ticks it trained and was calibrated on: docs/model.md).
A trained checkpoint's backtest of its own files says its scores are not out of sample (checkpoint_notes.py); the
built-in model's of those sets said nothing (review349 #5). Known by the sets' folders, as the data README names them:
the built-in model keeps no record of its training files' paths, which differ from machine to machine. A copy of
those ticks elsewhere (the first rows of the EURUSD set, review400 #5) is known by its stream's name and times: its
scored ticks inside the span the model trained on get a caution naming that span (`builtin_span_caution`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

from connectors.cautions import Caution
from engine.service.output_paths import files_read

# the folders of the sets the built-in model trained on (datasets.py's loaders) -> the stream it trained on
TRAINED_SETS = {"binance-btcusdt-spot": "BTCUSDT", "dukascopy-eurusd": "EURUSD"}
# the fraction of each set's ticks it trained and was calibrated on: 1 - datasets.HELDOUT_FRACTION (not imported:
# the CLI imports this module at start, and datasets.py imports polars; test_model_identity checks the two agree)
SEEN_END = 0.8
# each set's stream -> the event times (ns, UTC) of the first and the last tick the built-in model trained and was
# calibrated on: ticks [0, SEEN_END) of datasets.load_real's set, as TRAINING.md counts them (BTCUSDT's on the
# collector's receive clock, as the set is read); tests/test_datasets.py checks them against the shared data
TRAINED_SPANS = {"BTCUSDT": (1_723_161_254_087_891_268, 1_723_161_784_855_384_692),
                 "EURUSD": (1_549_238_400_994_000_000, 1_549_376_964_196_000_000)}


def builtin_in_sample_note(files: list[Path | str], scored_from: float | None, fix: str) -> str | None:
    """Why the built-in model's scores of ``files`` are not out of sample, if they are not: a file of a set it trained
    on, scored from ``scored_from`` (the fraction of each stream's ticks the scored part starts at; None: all)
    before SEEN_END. ``fix``: what scores later ticks (`give --test-from 0.8 or later`)."""
    seen = sorted({str(path) for given in files for path in files_read(given)
                   if path.resolve().parent.name in TRAINED_SETS})
    if not seen or (scored_from is not None and scored_from >= SEEN_END - 1e-9):
        return None
    sets = sorted({TRAINED_SETS[Path(path).resolve().parent.name] for path in seen})
    scored = "every answer was scored" if scored_from is None else f"the scored part starts at {scored_from:.0%}"
    return (f"the built-in model was trained and calibrated on the first {SEEN_END:.0%} of the ticks of the shared "
            f"{' and '.join(sets)} set{'s' * (len(sets) > 1)} ({', '.join(seen)} among them), and {scored}: the "
            f"scores below are not out of sample ({fix}; a file of part of a set, trades without quotes, counts its "
            f"ticks otherwise than the set it trained on: leave a margin)")


def instrument_key(stream: str) -> str:
    """A stream's name as the spans trained on are matched by: `EUR/USD`, `eur-usd` and `EURUSD` are one
    instrument's ticks."""
    return re.sub(r"[^A-Z0-9]", "", stream.upper())


def builtin_span_caution(scored: Mapping[str, tuple[int, int]]) -> Caution | None:
    """A caution when a stream named as a set the built-in model trained on (`EUR/USD` is EURUSD) is scored on ticks
    inside that set's training span; ``scored``: stream -> its first and last scored tick's time (ns). None when no
    stream is: its scores may be zero-shot."""
    from connectors.tick_times import utc_text  # (not at the top: this module is imported at the CLI's start)

    inside = []
    for stream, (first, last) in sorted(scored.items()):
        name = instrument_key(stream)
        if name in TRAINED_SPANS and first <= TRAINED_SPANS[name][1] and last >= TRAINED_SPANS[name][0]:
            start, end = TRAINED_SPANS[name]
            inside.append(f"stream {stream}, scored from {utc_text(first)} to {utc_text(last)}, within the "
                          f"{name} ticks it trained and was calibrated on, {utc_text(start)} to {utc_text(end)} (the "
                          f"shared {name} set's first {SEEN_END:.0%}, engine/models/builtin/TRAINING.md)")
    if not inside:
        return None
    return Caution(f"the built-in model was scored on ticks it trained on: {'; '.join(inside)}: its scores are "
                   f"in-sample, not zero-shot skill (score only later ticks, --test-from a time after that span's "
                   f"end, or data the model never saw)")
