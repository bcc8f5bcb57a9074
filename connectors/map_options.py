"""The column map a user gives, read into a `ColumnMap`, or into a `Refine` of each file's detected layout when
the keys given only refine it (`--tz Europe/London`, `--columns stream=#RIC`): `--columns` text (`parse_inline`),
a map file (`load_map_file`), a preset name and the reading options together (`map_from_options`: the command
line and the config's replay section), and a replay entry's map (`as_column_map`). Each is checked here, so a
mistake is said before any file is read. What a map's keys are and mean is connectors/column_map.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from connectors.column_map import MAP_KEYS, ColumnMap, preset, unknown_keys
from connectors.hours_window import hours_text
from connectors.map_vocabulary import DAY_CLOCK_UNITS, DETECT, UNITS
from engine.quoting import quoted, quoted_words
from engine.text_files import read_text
from engine.yaml_files import safe_load_unique, yaml_error_line


def parse_inline(text: str) -> dict[str, Any]:
    """The command-line form `ts=time,price=px,size=qty,stream=symbol` as a dict for ColumnMap.from_dict.

    Keys are those of the YAML form; `stream=` here names the stream COLUMN (the common case on the command
    line), `stream_name=` a fixed stream. `names` lists columns with `|`: `names=time|px|qty`. A side_map
    or a keep filter needs the YAML form. A column whose name holds a comma is named inside double quotes
    (`price="Close, AAPL"`), or as it is when the comma sits inside brackets (pandas' MultiIndex names,
    `price=('Close', 'AAPL')`): see `inline_parts`.
    """
    out: dict[str, Any] = {}
    for part in inline_parts(text):
        key, eq, value = part.partition("=")
        key, value = key.strip(), _unquoted(value.strip())
        if not eq or not key or not value:
            raise ValueError(f"--columns: {quoted(part)} is not key=column; e.g. "
                             "ts=time,price=px,size=qty,stream=symbol (a column name with a comma: inside double "
                             "quotes, price=\"Close, AAPL\", or as it is inside brackets, price=('Close', 'AAPL'); or "
                             "the YAML form, --columns FILE.yaml)")
        if key in ("side_map", "keep"):
            raise ValueError(f"--columns: {key} needs the YAML form (--columns FILE.yaml)")
        key = {"stream": "stream_col", "stream_name": "stream"}.get(key, key)
        if key in out:
            raise ValueError(f"--columns: the {key} mapping is given twice")
        out[key] = tuple(n.strip() for n in value.split("|")) if key == "names" else value
    if unknown := sorted(k for k in out if k not in MAP_KEYS):
        raise ValueError(f"--columns: {unknown_keys(unknown, ['stream_name', *MAP_KEYS])}")
    return out


def inline_parts(text: str) -> list[str]:
    """The `key=column` parts of inline `--columns` text: split at each comma outside double quotes and outside
    brackets, so that a column's own comma (`"Close, AAPL"`, pandas' `('Close', 'AAPL')`) stays in its name."""
    parts, depth, quoted, start = [], 0, False, 0
    for i, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif not quoted and char in "([{":
            depth += 1
        elif not quoted and char in ")]}":
            depth = max(depth - 1, 0)
        elif char == "," and not quoted and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _unquoted(value: str) -> str:
    """A value written inside double quotes, without them (its name may hold commas and spaces)."""
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value


def load_map_file(path: Path) -> dict[str, Any]:
    """A column map in a YAML file: the mapping of ColumnMap.from_dict (safe_load; unknown keys rejected there)."""
    try:
        raw = safe_load_unique(read_text(path), text_words=True)  # names and cells: `yes` is the text
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {yaml_error_line(e)}") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read the column map: {e.strerror}") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f"{path}: a column map file is a mapping of key -> column (docs/replay.md), "
                         f"got {type(raw).__name__}")
    if unknown := sorted(str(k) for k in raw if k not in MAP_KEYS):
        raise ValueError(f"{path}: {unknown_keys(unknown, MAP_KEYS)}")
    return dict(raw)


# keys that refine a detected layout
REFINE_KEYS = ("names", "ts_unit", "ts_format", "tz", "date", "decimal", "bar_stamp", "bar_length")
READING_KEYS = ("price_offset", "hours", "price_format", "zero_bid")  # options of their own that refine it too


@dataclass(frozen=True)
class Refine:
    """Detect each file's layout (from `names` for a header-less CSV), then apply these keys to it. `across_files`:
    the keys were given for several files at once (a key of the other kind of ticks that names a column a file lacks
    is then left out for that file: connectors/detected_map.py)."""

    keys: dict[str, Any]
    across_files: bool = False

    def apply(self, detected: ColumnMap) -> ColumnMap:
        spec = detected.to_dict() | self.keys
        if "ts_unit" in self.keys and "ts_format" not in self.keys:  # a unit given replaces a guessed format
            spec.pop("ts_format", None)
        if "ts_format" in self.keys and "ts_unit" not in self.keys:  # a format given reads the column as datetime
            spec["ts_unit"] = "datetime"  # text, whatever unit detection guessed (review433 #7: "us" refused it)
        if self.keys.get("ts_unit") in UNITS and "tz" not in self.keys:  # epoch counts have no zone to guess
            spec.pop("tz", None)
        if "stream_col" in self.keys:  # a stream column given replaces a name the detection took
            spec.pop("stream", None)
        if "stream" in self.keys:
            spec.pop("stream_col", None)
        return ColumnMap.from_dict(spec)


def is_refinement(spec: Mapping[str, Any]) -> bool:
    """Keys that refine each file's detected layout: a map without a preset that names neither its time column
    nor any price column, or only its time column (`--tz Europe/London`, `--columns stream=#RIC`,
    `--columns "ts=Execution Date+Execution Time"`): the rest is detected."""
    prices = any(k in spec for k in ("price", "bid", "ask"))
    return bool(spec) and "preset" not in spec and not ("ts" in spec and prices)


def as_column_map(spec: ColumnMap | str | Mapping[str, Any] | None) -> ColumnMap | Refine | None:
    """A ColumnMap from a ColumnMap, a preset name or a dict; None means detect from the columns, and a dict of
    REFINE_KEYS only (`{"tz": "Europe/London"}`) detects them and then applies those keys. A dict is a map as a
    user writes it (the YAML replay list's, loaded in Python): naming ``ts`` without a unit reads the unit the
    column's first value shows, as on the command line."""
    if spec is None or isinstance(spec, (ColumnMap, Refine)):
        return spec
    if isinstance(spec, str):
        return preset(spec)
    if isinstance(spec, Mapping) and is_refinement(spec):
        if unknown := sorted(str(k) for k in spec if k not in MAP_KEYS):  # said now, not once a file is read
            raise ValueError(unknown_keys(unknown, MAP_KEYS))
        return Refine(_hours_joined(spec))
    return ColumnMap.from_dict(with_detected_unit(spec))


def map_from_options(preset_name: str | None = None, columns: str | Mapping[str, Any] | None = None,
                     detect: bool = False, **refinements: Any) -> dict[str, Any] | None:
    """The column map the command line (or the config's replay section) describes, in ColumnMap.from_dict form.

    `columns` is inline text (`ts=time,price=px`), a YAML file's path, or a dict; `preset_name` is the base it
    overrides; `refinements` (names, ts_unit, tz, date, ts_format, price_offset, hours, price_format, zero_bid;
    None = not given) override
    both. None: nothing given,
    detect each file's layout. With `detect` (the command line), refinements alone refine each detected layout
    (`--tz Etc/GMT+5`); without it they need a map. The map is checked here, so a mistake is reported before any
    file is read.
    """
    given = _hours_joined({k: v for k, v in refinements.items() if v is not None})
    if unknown := sorted(k for k in given if k not in MAP_KEYS):
        raise ValueError(f"unknown column-map option(s) {quoted_words(unknown)}")
    if isinstance(columns, str):
        is_file = columns.lower().endswith((".yaml", ".yml")) or Path(columns).is_file()
        columns = load_map_file(Path(columns)) if is_file else parse_inline(columns)
    spec = _hours_joined(columns or {})
    if preset_name is not None:
        spec = {"preset": preset_name, **spec}
    if detect and is_refinement(spec | given):  # checked on a stand-in map: a bad zone or unit is named now
        checked = spec | given
        unit = "datetime"  # a unit a zone or a day refines (a day: of times of day as text too)
        # the time keys only (names are the file's own; columns are checked against each file's map)
        timing = {k: v for k, v in checked.items()
                  if k in (*REFINE_KEYS, *READING_KEYS) and k != "names"}
        # a unit of times after midnight alone refines a file whose date column detection joins to its time
        # (`date+time`), so the stand-in has one; without --date a file of one time column is refused when read
        day_of_rows = timing.get("ts_unit") in DAY_CLOCK_UNITS and timing.get("date") is None
        ColumnMap.from_dict({"ts": "date+ts" if day_of_rows else "ts", "ts_unit": unit, "price": "price",
                             "size": "size"} | timing)
        return checked
    if not spec:
        if given:
            verb = "refines" if len(given) == 1 else "refine"
            raise ValueError(f"{', '.join(sorted(given))} {verb} a column map: give the columns too "
                             f"(--columns ts=...,price=... or --preset NAME)")
        return None
    spec = with_detected_unit(spec | given)
    ColumnMap.from_dict(spec)
    return spec


def _hours_joined(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A map's keys with `hours` given as a list of windows (a replay list's YAML, repeated --hours) as one text."""
    spec = dict(spec)
    if "hours" in spec:
        spec["hours"] = hours_text(spec["hours"])
    return spec


def with_detected_unit(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A map written by a user (command line, config, replay list) that names its time column and not its unit:
    ts_unit DETECT, read as the column's first value shows (a ColumnMap built in Python keeps ns)."""
    spec = dict(spec)
    if "ts" in spec and not {"preset", "ts_unit", "ts_format"} & set(spec):
        spec["ts_unit"] = DETECT
    return spec
