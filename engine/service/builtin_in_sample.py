"""Whether the built-in model is scored on the data it was trained on: the shared BTCUSDT and EURUSD sets
(engine/service/datasets.py's default sets, whose first 80% of ticks it trained and was calibrated on: docs/model.md).
A trained checkpoint's backtest of its own files says its scores are not out of sample (checkpoint_notes.py); the
built-in model's of those sets said nothing (review349 #5). Known by the sets' folders, as the data README names them:
the built-in model keeps no record of its training files' paths, which differ from machine to machine."""

from __future__ import annotations

from pathlib import Path

from engine.service.output_paths import files_read

# the folders of the sets the built-in model trained on (datasets.py's loaders) -> the stream it trained on
TRAINED_SETS = {"binance-btcusdt-spot": "BTCUSDT", "dukascopy-eurusd": "EURUSD"}
# the fraction of each set's ticks it trained and was calibrated on: 1 - datasets.HELDOUT_FRACTION (not imported:
# the CLI imports this module at start, and datasets.py imports polars; test_model_identity checks the two agree)
SEEN_END = 0.8


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
