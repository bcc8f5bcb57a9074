"""The reading options a checkpoint was trained on: `flashtick train` records --price-offset, --price-format,
--zero-bid and --sequence in its evaluation.json (`trained_on.reading`, beside the files and the split), as they
change the ticks the model learnt from: the prices (an offset of 50 lifts CL's -37.63 to 12.37; unshifted, those
rows are refused) and the order of ticks of equal times (a vendor's sequence numbers, not the file's order: other
moves between them, so other tokens; rows without a number refused). `evaluate` reads its files with them unless
given its own; `backtest --model` and `serve --model` say when theirs differ."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from connectors.column_map import checked_price_offset, shown_offset

READING_OPTIONS = {"price_offset": "--price-offset", "price_format": "--price-format",
                   "zero_bid": "--zero-bid", "sequence": "--sequence"}  # map key -> option
# what reading a file otherwise than in training changes, per key
_READ_OTHERWISE = {"price_offset": "prices", "price_format": "prices", "zero_bid": "prices",
                   "sequence": "the order of ticks of equal times"}


def reading_of(columns: Mapping[str, Any] | None) -> dict[str, str]:
    """A column map's reading options (map_from_options's keys) as the command line writes them; none: {}."""
    reading = {}
    offset = checked_price_offset((columns or {}).get("price_offset"))
    if offset is not None:
        reading["price_offset"] = shown_offset(offset)
    if (price_format := (columns or {}).get("price_format")) is not None:
        reading["price_format"] = str(price_format)
    if (columns or {}).get("zero_bid") == "price":  # (no_bid is the default: recorded as nothing)
        reading["zero_bid"] = "price"
    if (sequence := (columns or {}).get("sequence")) is not None:  # (none: the files' own order)
        reading["sequence"] = str(sequence)
    return reading


def recorded_reading(model_dir: Path | str | None) -> dict[str, str] | None:
    """What a checkpoint of `flashtick train` was read with; None when it does not say (the built-in model, another
    checkpoint, one trained before this was recorded), so that nothing is assumed of it."""
    if model_dir is None:
        return None
    try:
        reading = json.loads((Path(model_dir) / "evaluation.json").read_text())["trained_on"]["reading"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {k: str(v) for k, v in reading.items() if k in READING_OPTIONS} if isinstance(reading, dict) else None


def shown(reading: Mapping[str, str], keys: Any = READING_OPTIONS) -> str:
    return ", ".join(f"{READING_OPTIONS[k]} {reading[k]}" if k in reading else f"no {READING_OPTIONS[k]}"
                     for k in keys)


def reading_mismatch(recorded: Mapping[str, str] | None, given: Mapping[str, str]) -> str | None:
    """What differs between the options a checkpoint was trained on and those reading the files now, or None."""
    if recorded is None or not (differ := [k for k in READING_OPTIONS if recorded.get(k) != given.get(k)]):
        return None
    changed = " and ".join(dict.fromkeys(_READ_OTHERWISE[k] for k in differ))
    return (f"this model was trained on files read with {shown(recorded, differ)}; these files are read with "
            f"{shown(given, differ)}: {changed} read otherwise than in training (rows refused, levels shifted, "
            f"ticks reordered) make answers and scores that do not compare with its training's (docs/model.md)")
