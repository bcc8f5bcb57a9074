"""The unit a time column counts in, read from its type and its first value: datetimes; seconds, ms, us or ns
since the epoch by the number's magnitude (`epoch_unit`), a present-day time being 1990..2200; spreadsheet serial
dates; or, beside a date column, a time of day in the unit that keeps it within one day (`day_clock_unit`).
`detected_unit` settles it for layout detection; a note says when a given unit makes no present-day time.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.datetime_text import time_formats
from connectors.field_names import normal_name
from connectors.map_vocabulary import COUNT_UNITS, DAY_CLOCK_UNITS, EXCEL_DAYS, NS_SINCE_2000, UNITS, joined_columns
from connectors.number_separators import COMMA_GROUPED
from connectors.tick_times import Q_EPOCH_NS, q_epoch_reading, utc_text
from engine.quoting import quoted

# a present-day time, in ns since the epoch: 1990..2200 (a date of market data)
EPOCH_1990_NS, EPOCH_2200_NS = 631_152_000 * 10**9, 7_258_118_400 * 10**9
EPOCH_1980_NS = 315_532_800 * 10**9


def is_epoch(text: str) -> str | None:
    """The epoch unit in which an integer is a present-day time (1990..2200), else None; decimal seconds
    (Kraken's `1704153601.4989`) are "s" when their whole seconds are."""
    if seconds := re.match(r"^(\d{9,11})\.\d+$", text):
        return "s" if is_epoch(seconds[1]) == "s" else None
    if not re.match(r"^\d{9,19}$", text):
        return None
    value = int(text)
    unit = epoch_unit(value)
    return unit if EPOCH_1990_NS <= value * UNITS[unit] < EPOCH_2200_NS else None


def epoch_note(path: Path, cmap: ColumnMap, first_ns: Any) -> list[str]:
    """A note when the first time, read in the map's epoch unit, is not a date of market data (1990..2200), naming
    the unit that makes it one; a warning when ns since q's epoch (2000-01-01) make it one while the 1970 reading is
    before 2000 (a kdb+ timestamp's long: 2024's ticks read as 1994's, which is in 1990..2200)."""
    if not isinstance(first_ns, int):
        return []
    raw = first_ns // UNITS[cmap.ts_unit]
    if cmap.ts_unit == "ns" and q_epoch_reading(first_ns):
        return [Caution(f"{path.name}: the first time, {raw} ns since 1970, is {utc_text(first_ns)}, but as ns since "
                        f"2000-01-01 (q's epoch: a kdb+ timestamp written as a long, as pykx and arrowkdb write "
                        f"its raw value) it is {utc_text(first_ns + Q_EPOCH_NS)}: if column {quoted(cmap.ts)} counts "
                        f"from 2000, give --ts-unit {NS_SINCE_2000} (and --tz for local times)")]
    if EPOCH_1990_NS <= first_ns < EPOCH_2200_NS:
        return []
    if epoch_unit(raw) == cmap.ts_unit:  # no unit makes it a present-day time: said all the same
        if first_ns < EPOCH_1980_NS:  # (the warning on times before 1980 says it: connectors/misread_times.py)
            return []
        return [f"{path.name}: the first time, {raw} {cmap.ts_unit} since the epoch ({utc_text(first_ns)}), is not "
                f"in 1990..2200, in any epoch unit: check column {quoted(cmap.ts)} is the time"]
    return [f"{path.name}: the first time, {raw} {cmap.ts_unit} since the epoch, is not in 1990..2200: "
            f"if column {quoted(cmap.ts)} counts {epoch_unit(raw)}, give --ts-unit {epoch_unit(raw)}"]


def epoch_unit(value: float) -> str:
    """The epoch unit a present-day time has at this magnitude: ~1.7e9 s, 1.7e12 ms, 1.7e15 us, 1.7e18 ns."""
    magnitude = abs(value)
    return "s" if magnitude < 1e11 else "ms" if magnitude < 1e14 else "us" if magnitude < 1e17 else "ns"


EXCEL_1970, EXCEL_2100 = 25569, 73051  # 1970-01-01 and 2100-01-01 as spreadsheet serial dates

# a time column's name that says its unit (`TIME_NS`, `ts_us`, `time_ms`), for a time of day
UNIT_IN_NAME = re.compile(r"(?:^|_)(ns|us|ms)$")


def day_clock_unit(column: str, value: Any) -> str | None:
    """The unit in which a number is a time of one day, when a date column beside it gives the day: the unit its
    name says (`TIME_NS`: ns), else the coarsest in which it is under 86,400 s. None when it is none."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    if isinstance(value, bool) or not 0 <= number or \
            EPOCH_1990_NS <= number * UNITS[epoch_unit(number)] < EPOCH_2200_NS:  # a present-day epoch time
        return None
    if named := UNIT_IN_NAME.search(normal_name(column)):
        unit = f"{named[1]}_after_midnight"
        return unit if number * DAY_CLOCK_UNITS[unit] < 86_400 * 10**9 else None
    return next((u for u in COUNT_UNITS if number * DAY_CLOCK_UNITS[u] < 86_400 * 10**9), None)


def _comma_serial(text: str) -> bool:
    """Whether a time cell is a spreadsheet serial date written with a decimal comma (`45512,9960109028`)."""
    return bool(re.match(r"^\d{5},\d+$", text.strip())) and \
        EXCEL_1970 <= float(text.strip().replace(",", ".")) < EXCEL_2100


def _comma_epoch_seconds(text: str) -> bool:
    """Whether a time cell is present-day epoch seconds written with a decimal comma (`1733312345,123`): one comma,
    no grouping (whole seconds are never grouped)."""
    if not re.match(r"^\d+,\d+$", text := text.strip()) or re.match(COMMA_GROUPED, text):
        return False
    return epoch_unit(number := float(text.replace(",", "."))) == "s" and \
        EPOCH_1990_NS <= number * UNITS["s"] < EPOCH_2200_NS


def detected_unit(ts: str, dtype: pl.DataType | None, first: Callable[..., Any] | None) -> tuple[str, str | None]:
    """The unit (and datetime format) a time column's type and first value show: datetime for dates and text,
    else the epoch unit of the number's magnitude (a column named `ts` of no present-day time: the wire layout's
    ns). Date and time columns joined (`DATE+TIME_NS`) whose time is a number: that number's unit after midnight
    (`day_clock_unit`)."""
    if isinstance(dtype, (pl.Datetime, pl.Date)):
        return "datetime", None
    columns = joined_columns(ts)
    if len(columns) == 2 and first is not None and (unit := day_clock_unit(columns[1], first(columns[1]))):
        return unit, None
    value = first(columns if len(columns) > 1 else ts) if first is not None else None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            if _comma_serial(value):  # `45512,9960109028`: a decimal-comma file's serial date, read with its comma
                return EXCEL_DAYS, None
            if _comma_epoch_seconds(value):  # `1733312345,123`: as the decimal-comma file's prices are read
                return "s", None
            formats = time_formats(value)
            return "datetime", formats[0] if len(formats) == 1 else None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "ns", None
    if EXCEL_1970 <= value < EXCEL_2100:  # as epoch seconds a time on 1970-01-01: a spreadsheet's serial date
        return EXCEL_DAYS, None
    unit = epoch_unit(value)
    # a column named `ts` counts by its magnitude too (OKX's API writes ms there, exports s), but the wire layout's
    # ns stay ns: small numbers that are no present-day time as seconds (a test's counts from 0) are read as ns
    seconds_now = unit == "s" and EPOCH_1990_NS <= value * UNITS["s"] < EPOCH_2200_NS
    return ("ns" if ts == "ts" and unit not in ("ms", "us") and not seconds_now else unit), None
