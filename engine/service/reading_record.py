"""The reading options a checkpoint was trained on: `flashtick train` records them in its evaluation.json
(`trained_on.reading`, beside the files), as they change the ticks the model learnt from:
* the prices and their order: --price-offset, --price-format, --zero-bid and --sequence (an offset of 50 lifts CL's
  -37.63 to 12.37; unshifted, those rows are refused; a vendor's sequence numbers order ticks of equal times);
* the files' layout and the rows kept: --tz, --hours, --ts-unit, --ts-format, --date, --csv-names, --columns (the
  column map's other keys, a --preset's name among them) and --streams (ET times read as UTC put every trade hours
  away from the quotes it printed against);
* the split: --split and --gap, where not the default 70/15/15 (evaluate's test part is training's);
* the labels: --session-gap (a label horizon across a pause that long or longer in event time left unlabelled).
`evaluate` and `backtest --model` read any file with the first (and evaluate with the split) unless given their
own, and with the second when their files are the training files (checkpoint_notes.trained_options, the one rule,
`feed replay`'s too); otherwise a run whose reading differs says so, and `serve --model` says them at its start.
A --session-gap is never taken: `evaluate` and `backtest` score with their own (none unless given, or the config's
answers.session_gap_s), and say when it differs from training's."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Mapping

from connectors.labels import session_gap_text
from connectors.map_vocabulary import DETECT
from connectors.price_offsets import PriceOffset, checked_price_offset, shown_offset
from engine.text_files import read_text

PRICE_OPTIONS = {"price_offset": "--price-offset", "price_format": "--price-format",
                 "zero_bid": "--zero-bid", "sequence": "--sequence"}  # map key -> option
LAYOUT_OPTIONS = {"tz": "--tz", "hours": "--hours", "ts_unit": "--ts-unit", "ts_format": "--ts-format",
                  "date": "--date", "names": "--csv-names", "columns": "--columns", "streams": "--streams"}
SPLIT_OPTIONS = {"split": "--split", "gap": "--gap"}
LABEL_OPTIONS = {"session_gap": "--session-gap"}  # which points are labelled: trained on, scored
READING_OPTIONS = PRICE_OPTIONS | LAYOUT_OPTIONS | SPLIT_OPTIONS | LABEL_OPTIONS
FILE_READING = PRICE_OPTIONS | LAYOUT_OPTIONS  # what reads the files (backtest and serve have no split)
# what selects among the ticks read, not how each is read: other streams, parts or labelled points are a choice,
# said plainly
SELECTING = ("streams", "split", "gap", "session_gap")
DEFAULT_SPLIT = "70/15/15"
# what reading a file otherwise than in training changes, per key
_READ_OTHERWISE = {"price_offset": "prices", "price_format": "prices", "zero_bid": "prices",
                   "sequence": "the order of ticks of equal times", "tz": "times", "ts_unit": "times",
                   "ts_format": "times", "date": "times", "names": "the columns", "columns": "the columns",
                   "hours": "the rows kept"}


def reading_of(columns: Mapping[str, Any] | None, streams: Any = None, split: str | None = None,
               gap: int = 0, session_gap_ns: int | None = None) -> dict[str, str]:
    """A column map's reading options (map_from_options's keys), the --streams read, the split and the session
    gap, as the command line writes them (the column map's other keys as one JSON text); none: {}."""
    columns = dict(columns or {})
    reading = {}
    offset = checked_price_offset(columns.pop("price_offset", None))
    if offset is not None:
        reading["price_offset"] = shown_offset(offset)
    if (price_format := columns.pop("price_format", None)) is not None:
        reading["price_format"] = str(price_format)
    if columns.pop("zero_bid", None) == "price":  # (no_bid is the default: recorded as nothing)
        reading["zero_bid"] = "price"
    if (sequence := columns.pop("sequence", None)) is not None:  # (none: the files' own order)
        reading["sequence"] = str(sequence)
    if columns.get("ts_unit") == DETECT:  # what a map naming its time column reads anyway
        del columns["ts_unit"]
    for key in ("tz", "hours", "ts_unit", "ts_format", "date"):
        if (value := columns.pop(key, None)) is not None:
            reading[key] = str(value)
    if (names := columns.pop("names", None)) is not None:
        reading["names"] = ",".join(names) if isinstance(names, (list, tuple)) else str(names)
    if columns:
        reading["columns"] = json.dumps(columns, sort_keys=True, default=str)
    if streams:
        reading["streams"] = json.dumps(list(streams))
    if split is not None and split != DEFAULT_SPLIT:
        reading["split"] = split
    if gap:
        reading["gap"] = str(gap)
    if session_gap_ns is not None:
        reading["session_gap"] = session_gap_text(session_gap_ns)
    return reading


def checkpoint_evaluation(model_dir: Path | str) -> dict[str, Any] | None:
    """The evaluation.json a checkpoint `flashtick train` wrote (what it was trained on, and where), or None."""
    try:
        return json.loads(read_text(Path(model_dir) / "evaluation.json"))
    except (OSError, ValueError):
        return None


def recorded_reading(model_dir: Path | str | None) -> dict[str, str] | None:
    """What a checkpoint of `flashtick train` was read with; None when it does not say (the built-in model, another
    checkpoint, one trained before this was recorded), so that nothing is assumed of it."""
    if model_dir is None:
        return None
    try:
        trained_on = (checkpoint_evaluation(model_dir) or {})["trained_on"]
        reading = trained_on["reading"]
    except (KeyError, TypeError):
        return None
    if not isinstance(reading, dict):
        return None
    recorded = {k: str(v) for k, v in reading.items() if k in READING_OPTIONS}
    if "price_offset" in recorded:
        recorded["price_offset"] = _offset_of_trained_streams(recorded["price_offset"], trained_on.get("streams"))
    return recorded


def _offset_of_trained_streams(offset: str, streams: Any) -> str:
    """A bare --price-offset (`500`) was about the instruments the model was trained on, not about every stream a
    later run reads (review315 #3: ES at 4800 read as 5300): it is recorded per stream trained on (`DEQH=500`), so
    serve's ingest, evaluate and feed replay shift those streams alone. One already per stream stays as given; a
    checkpoint that kept no stream names (or one whose names the inline form cannot write) keeps its bare offset."""
    names = [str(name) for name in streams] if isinstance(streams, dict) else []
    if not names or "=" in offset or any(set(name) & set("|=*?[") for name in names):
        return offset
    try:
        return shown_offset({name: float(offset) for name in sorted(names)})
    except ValueError:  # (not a number: checked_price_offset says so where it is read)
        return offset


def option_value(key: str, value: str) -> Any:
    """A recorded value as the command line's option takes it (argparse's attribute)."""
    if key == "columns" or key == "streams":
        return json.loads(value)
    if key == "price_offset":
        return [value]
    return int(value) if key == "gap" else value


def _shown_value(key: str, value: str) -> str:
    if key == "streams":
        return " ".join(shlex.quote(pattern) for pattern in json.loads(value))
    if key == "columns":  # inline where it can be, as --columns takes it
        spec = json.loads(value)
        if all(isinstance(v, (str, int, float)) for v in spec.values()):
            return shlex.quote(",".join(f"{k}={v}" for k, v in spec.items()))
    return shlex.quote(value)


def shown(reading: Mapping[str, str], keys: Any = READING_OPTIONS) -> str:
    return ", ".join(f"{READING_OPTIONS[k]} {_shown_value(k, reading[k])}" if k in reading else _unset(k) for k in keys)


def _unset(key: str) -> str:
    """A reading option not recorded, in words: a split not recorded is the default one, not none."""
    return f"--split {DEFAULT_SPLIT} (the default)" if key == "split" else f"no {READING_OPTIONS[key]}"


def reading_mismatch(recorded: Mapping[str, str] | None, given: Mapping[str, str],
                     keys: Any = FILE_READING) -> str | None:
    """What differs among `keys` between the options a checkpoint was trained on and those reading the files now,
    or None. Streams and parts selected otherwise are said plainly: scoring other ones is a choice."""
    if recorded is None or not (differ := [k for k in keys if recorded.get(k) != given.get(k)]):
        return None
    read = [k for k in differ if k not in SELECTING]
    selected = [k for k in differ if k in SELECTING]
    said = []
    if read:
        changed = " and ".join(dict.fromkeys(_READ_OTHERWISE[k] for k in read))
        said.append(f"this model was trained on files read with {shown(recorded, read)}; these files are read with "
                    f"{shown(given, read)}: {changed} read otherwise than in training (rows refused, times or "
                    f"levels shifted, ticks reordered) make answers and scores that do not compare with its "
                    f"training's (docs/model.md)")
    if selected:
        said.append(f"this model was trained with {shown(recorded, selected)}; this run takes "
                    f"{shown(given, selected)}")
    return "; ".join(said)


INGEST_PRICE_OFFSET = "ingest_price_offset"  # meta.json's key for it, as `health` says it: `10`, or `NAME=10|B=1`


def ingest_price_offset(model_path: str | None) -> PriceOffset | None:
    """The --price-offset a checkpoint's training read prices with (a number, or stream -> number), which a service
    serving it adds to every wire tick at ingest (connectors.encoder.StreamEncoders); None for none."""
    return checked_price_offset((recorded_reading(model_path) or {}).get("price_offset"))
