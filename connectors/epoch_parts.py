"""An epoch time written as two columns: whole seconds since the epoch and the part of a second beside them, as
Rithmic's R|Protocol stamps a trade (`ssboe`, `usecs`), and CQG's and TT's APIs alike. A map joins them as
`ts=SECONDS+PART` with `ts_unit` the unit the part counts in (ms, us or ns); without one, the part's name says it
(`usecs`: us, `nsecs`: ns, `msecs`: ms; CoinDesk's `TIMESTAMP_NS`: ns). A joined time is otherwise a date and a
time of day: a first column of epoch seconds is never read as a date (every tick in another century)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import polars as pl

from connectors.column_map import ColumnMap
from connectors.map_vocabulary import DAY_CLOCK_UNITS, DETECT, UNITS
from connectors.shell_words import columns_option
from connectors.ticks import utc_text
from connectors.time_units import EPOCH_1990_NS, EPOCH_2200_NS, epoch_unit
from engine.quoting import quoted

PART_UNITS = ("ms", "us", "ns")  # the units a part of a second counts in
# a part's name that says its unit: Rithmic's usecs, nsecs; millis, micros, nanos; `_us`, `_ms`, `_ns`
PART_NAMES = {"ms": re.compile(r"(^|_)(msecs?|millis?|milliseconds?|ms)$"),
              "us": re.compile(r"(^|_)(usecs?|micros?|microseconds?|us)$"),
              "ns": re.compile(r"(^|_)(nsecs?|nanos?|nanoseconds?|ns)$")}


def is_epoch_parts(cmap: ColumnMap) -> bool:
    """Whether the map reads its time as epoch seconds beside a part of a second (`ts=ssboe+usecs`, ts_unit us)."""
    return len(cmap.ts_columns) == 2 and cmap.ts_unit in PART_UNITS


def epoch_parts_ns(cmap: ColumnMap) -> pl.Expr:
    """The two columns as int ns since the epoch: seconds x 1e9 + the part in its unit; null (the row rejected as
    missing_field) where either is no whole number, or the part is a second or more."""
    seconds, part = (pl.col(c).cast(pl.String).str.strip_chars().cast(pl.Int64, strict=False)
                     for c in cmap.ts_columns)
    per = UNITS[cmap.ts_unit]
    return pl.when((part >= 0) & (part < 10**9 // per) & (seconds >= 0)).then(seconds * 10**9 + part * per)


def epoch_parts_map(path: Path, cmap: ColumnMap, first: Callable[[str], Any]) -> tuple[ColumnMap, list[str]]:
    """The map, with the part's unit and a note, when its joined time's first column holds present-day epoch
    seconds (`first`: a column's first value as text); unchanged when it holds no such count (a date). Refused
    when the first column counts in another unit, or the part's unit is neither given nor named."""
    if len(cmap.ts_columns) != 2:
        return cmap, []
    seconds, part = cmap.ts_columns
    try:
        value = float(first(seconds) or "nan")
    except ValueError:
        value = float("nan")
    unit = epoch_unit(value) if value == value else "s"
    if value != value or not EPOCH_1990_NS <= value * UNITS[unit] < EPOCH_2200_NS:
        if cmap.ts_unit in PART_UNITS:  # a date (YYYYMMDD 20240603 is no present-day count), or no number
            raise ValueError(f"{path}: ts {quoted(cmap.ts)} joins date and time columns, and ts_unit {cmap.ts_unit} "
                             f"reads them as epoch seconds and the part of a second, but column {quoted(seconds)} "
                             f"holds {quoted(first(seconds))}, no count of seconds since the epoch: ts_unit datetime "
                             f"reads a date and a time of day as text, {', '.join(DAY_CLOCK_UNITS)} a number after "
                             "midnight")
        return cmap, []
    at = utc_text(int(value * UNITS[unit]))
    said = f"column {quoted(seconds)} holds {first(seconds)}, a count of {unit} since the epoch ({at})"
    if unit != "s":
        raise ValueError(f"{path}: ts {quoted(cmap.ts)}: {said}, a whole time already: give "
                         f"{columns_option(f'ts={seconds}')} --ts-unit {unit} (docs/replay.md)")
    if cmap.ts_unit in PART_UNITS:
        return cmap, []  # the unit given reads it
    named = next((u for u, name in PART_NAMES.items() if name.search(re.sub(r"[^a-z0-9]+", "_", part.lower()))),
                 None)
    # a unit detected from the part's name as a time of day (`TIMESTAMP_NS`: ns_after_midnight), or datetime (a
    # joined map's default), cannot read epoch seconds: the part's named unit can
    readable = (DETECT, "datetime", *(f"{u}_after_midnight" for u in PART_UNITS))
    if cmap.ts_unit not in readable or named is None:
        given = "" if cmap.ts_unit in readable else f" (--ts-unit {cmap.ts_unit} reads a date and a time of day)"
        raise ValueError(f"{path}: ts {quoted(cmap.ts)}: {said}, not a date{given}: give the unit {quoted(part)} "
                         "counts within each second, --ts-unit ms or us, to read the two as one time (a part in ns: "
                         "--ts-unit ns, read so when the part's name says ns, as `nsecs` or `TIMESTAMP_NS` do; "
                         "docs/replay.md)")
    return replace(cmap, ts_unit=named), [
        f"{path.name}: {said}, and column {quoted(part)} the {named} of each second, as its name says: read as one "
        "time (--ts-unit ms, us or ns says otherwise)"]
