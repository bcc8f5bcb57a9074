"""Event times of a tabular tick file as polars expressions: the time column (or a date column and a time column)
in its unit, datetime text at its own UTC offset or naive in a zone, times of day after a date's midnight, each
row's UTC offset applied. Beside it: datetime text (connectors/datetime_column.py), epoch counts read exactly
(connectors/epoch_counts.py), the time column and a zone's instants (connectors/local_times.py), a zone written
after the time (connectors/written_zones.py). Why no row's time reads, and the option that reads it:
connectors/time_hints.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl

from connectors.column_map import ColumnMap
from connectors.datetime_column import EPOCH_CODE, NAIVE_TZ_ONLY, datetime_text_ns, zone_reading
from connectors.epoch_counts import (
    DECIMAL_TEXT_UNITS, WHOLE_TEXT_UNITS, count_text, decimal_count_ns, decimal_text_ns, whole_count,
)
from connectors.epoch_parts import epoch_parts_ns, is_epoch_parts
from connectors.local_times import local_instants, time_column
from connectors.map_vocabulary import CLOCK_DIGIT_UNITS, COUNT_UNITS, DAY_CLOCK_UNITS, EXCEL_DAYS, NS_SINCE_2000, UNITS
from connectors.past_midnight import DAY_NS, counted_past_midnight
from connectors.tick_times import Q_EPOCH_NS, TS_MAX
from connectors.utc_offsets import UTC_OFFSET
from engine.quoting import quoted


def wall_clock_ns(path: Path, cmap: ColumnMap, dtype: pl.DataType, first: str | None) -> pl.Expr | None:
    """The naive wall-clock times that `ts_expr` reads in the map's `tz`, as int ns (their digits read as UTC's);
    None when it reads none (no tz; counts after midnight, which are elapsed time, not a wall clock's; times that
    carry their offset, as a name the tz writes does: `names_read_in`). Clock digits are a wall clock's reading."""
    if cmap.tz is None or cmap.ts_unit in COUNT_UNITS or zone_reading(cmap, first):
        return None
    return ts_expr(path, replace(cmap, tz=None), dtype, first)


def ts_expr(path: Path, cmap: ColumnMap, dtype: pl.DataType, first: str | None,
            second_pass: pl.Expr | None = None) -> pl.Expr:
    """The event-time column as int ns (datetimes, times of day) or raw numbers in ts_unit (scaled exactly
    in Python). `first` is the column's first value as text: whether datetime text carries a UTC offset.
    `second_pass`: the rows whose naive time in a repeated hour is read at the later instant (`local_instants`)."""
    col = time_column(cmap)
    if is_epoch_parts(cmap):  # `ssboe+usecs`: epoch seconds and the part of a second (connectors/epoch_parts.py)
        return epoch_parts_ns(cmap)
    if cmap.ts_unit == "datetime":
        if cmap.date is not None and dtype != pl.String:
            raise ValueError(f"{path}: ts column {quoted(cmap.ts)} is {dtype}, which holds its own date: drop date "
                             f"{quoted(cmap.date)} (it gives the day of times of day)")
        if isinstance(dtype, pl.Datetime):
            if dtype.time_zone is not None and cmap.tz is not None:
                raise ValueError(f"{path}: ts column {quoted(cmap.ts)} already carries time zone "
                                 f"{quoted(dtype.time_zone)}; tz={quoted(cmap.tz)} is {NAIVE_TZ_ONLY}")
            return local_instants(col, cmap.tz, second_pass).dt.epoch("ns")
        if dtype == pl.Date:  # (through us: a date past 2262 is null at ns, where a cast to ns stops the file)
            return local_instants(col.cast(pl.Datetime("us")), cmap.tz, second_pass).dt.epoch("ns")
        if dtype == pl.String:
            return datetime_text_ns(path, cmap, first, second_pass)
        raise ValueError(f"{path}: ts column {quoted(cmap.ts)} is {dtype}, not a datetime; set ts_unit to ns/us/ms/s")
    if len(cmap.ts_columns) > 1 and cmap.ts_unit in DAY_CLOCK_UNITS:  # DATE+TIME: each row's day, its own
        day, clock = (pl.col(c) for c in cmap.ts_columns)
        return after_midnight(cmap, row_day(day), clock.cast(pl.Float64, strict=False), second_pass)
    if dtype == pl.String and cmap.ts_unit in DECIMAL_TEXT_UNITS:
        return decimal_text_ns(col, cmap.ts_unit)
    if dtype == pl.String and cmap.ts_unit in WHOLE_TEXT_UNITS:
        return whole_count(col)
    if isinstance(dtype, pl.Decimal) and cmap.ts_unit in UNITS:  # Snowflake's NUMBER(20,6) seconds: exact, as text
        return decimal_count_ns(col, dtype, UNITS[cmap.ts_unit])
    if not (dtype.is_integer() or dtype.is_float() or isinstance(dtype, pl.Decimal)):
        hint = "; set ts_unit='datetime'" if isinstance(dtype, pl.Datetime) or dtype in (pl.Date, pl.String) else ""
        raise ValueError(f"{path}: ts column {quoted(cmap.ts)} is {dtype}, not a number of {cmap.ts_unit}{hint}")
    if cmap.ts_unit == NS_SINCE_2000:  # q's timestamp as its long: a wall clock's reading, as q's own are
        naive = (col.cast(pl.Int64, strict=False) + Q_EPOCH_NS).cast(pl.Datetime("ns"))
        return local_instants(naive, cmap.tz, second_pass).dt.epoch("ns")
    if cmap.ts_unit == EXCEL_DAYS:  # to the millisecond, the finest a spreadsheet's time holds (1e-8 day: 0.9 ms)
        offset = ((col.cast(pl.Float64) - EXCEL_EPOCH_DAYS) * 86_400e3).round().cast(pl.Int64, strict=False) * 10**6
        return local_instants(pl.lit(0).cast(pl.Datetime("ns")) + pl.duration(nanoseconds=offset, time_unit="ns"),
                      cmap.tz, second_pass).dt.epoch("ns")
    if cmap.ts_unit in DAY_CLOCK_UNITS:
        return after_midnight(cmap, pl.lit(cmap.date).str.to_date(), col.cast(pl.Float64), second_pass)
    return col


def beyond_int64_s(path: Path, cmap: ColumnMap, dtype: pl.DataType, first: str | None) -> pl.Expr | None:
    """The instant, in s since the epoch, of each row whose time int64 ns do not hold (past 2262, before 1677), which
    `ts_expr` reads as null so that no such time wraps into another; null on other rows. One rule for every form
    read to ns here (epoch counts as text or DECIMAL, date-time text, Parquet datetimes and dates): its us, whose
    range holds such times, past int64 ns's. FilePlan rejects such a row as ts_out_of_range, in check_ts's words
    for a count scaled in Python (review411 #1, #5: they were missing_field, or wrapped). None for the forms that
    lose none."""
    col = time_column(cmap)
    if is_epoch_parts(cmap) or cmap.ts_unit not in ("datetime", *UNITS):
        return None
    if isinstance(dtype, pl.Datetime) or dtype == pl.Date:
        us = col.cast(pl.Datetime("us")).dt.epoch("us")
    elif dtype == pl.String and cmap.ts_unit == "datetime" and EPOCH_CODE not in (cmap.ts_format or ""):
        us = datetime_text_ns(path, cmap, first, None, "us")
    elif cmap.ts_unit in UNITS and (dtype == pl.String or isinstance(dtype, pl.Decimal)):  # (others: in Python)
        number = count_text(col) if dtype == pl.String else col
        us = number.cast(pl.Float64, strict=False) * (UNITS[cmap.ts_unit] / 1000)
    else:
        return None
    return pl.when(us.abs() >= TS_MAX // 1000).then(us / 10**6)


def after_midnight(cmap: ColumnMap, day: pl.Expr, clock: pl.Expr, second_pass: pl.Expr | None = None) -> pl.Expr:
    """A time counted from midnight of `day` (a date) in the map's DAY_CLOCK_UNITS unit -> int ns, in `tz`: the
    time elapsed since that midnight, as ITCH's and LOBSTER's counts are, not a wall-clock reading, so a day
    summer time starts or ends has 23 or 25 hours of them, with no skipped time and none twice. Clock digits are
    a wall clock's reading: its repeated hour read as text times' is (`second_pass`, `local_instants`)."""
    if cmap.ts_unit in CLOCK_DIGIT_UNITS:  # a wall clock's reading: local time of that day, as text times are
        naive = day.cast(pl.Datetime("ns")).dt.epoch("ns") + clock_digits_ns(clock, CLOCK_DIGIT_UNITS[cmap.ts_unit])
        return local_instants(naive.cast(pl.Datetime("ns")), cmap.tz, second_pass).dt.epoch("ns")
    midnight = local_instants(day.cast(pl.Datetime("ns")), cmap.tz).dt.epoch("ns")
    # float seconds of a day (< 86400) hold ns to well under 1 ns, so the rounding is exact enough
    offset = (clock * DAY_CLOCK_UNITS[cmap.ts_unit]).round().cast(pl.Int64, strict=False)
    # a time past the day is no time of this day: null, so a file of another unit reads as no time at all
    # (time_hint), not as hours or weeks after the date; beside a trade date, a night session counted on from the
    # midnight before runs to a day and a half
    limit = DAY_CLOCK_LIMIT_NS if counted_past_midnight(cmap) else DAY_NS
    offset = pl.when((offset >= 0) & (offset < limit)).then(offset)
    return midnight + offset


def clock_digits_ns(clock: pl.Expr, ns_per_digit: int) -> pl.Expr:
    """HHMMSS[fff...] digits (a number, its leading zero left out or not) -> ns after midnight; null where the
    hour, minute or second is out of range (no clock's reading)."""
    digits = clock.round().cast(pl.Int64, strict=False)
    per_second = 10**9 // ns_per_digit
    whole, part = digits // per_second, digits % per_second
    hour, minute, second = whole // 10_000, whole // 100 % 100, whole % 100
    ns = ((hour * 60 + minute) * 60 + second) * 10**9 + part * ns_per_digit
    return pl.when((hour < 24) & (minute < 60) & (second < 60) & (digits >= 0)).then(ns)


def row_day(column: pl.Expr) -> pl.Expr:
    """A date column as dates: a date or datetime type, ISO text (`2026-03-06`), or YYYYMMDD as text or a number
    (TAQ's `20260306`); anything else is null (missing_field)."""
    text = column.cast(pl.String).str.strip_chars()
    return pl.coalesce(text.str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False),
                       text.str.slice(0, 8).str.to_date("%Y%m%d", strict=False))


def apply_utc_offset(path: Path, cmap: ColumnMap, ts_ns: pl.Expr, first: str | None) -> pl.Expr:
    """Wall-clock times at each row's UTC offset (`utc_offset`: hours, `+5.5`, or `+05:30`) -> UTC: time - offset."""
    if cmap.utc_offset is None:
        return ts_ns
    if first is not None and UTC_OFFSET.search(first):
        raise ValueError(f"{path}: its times ({quoted(first, 40)}) carry their own UTC offset; utc_offset "
                         f"({quoted(cmap.utc_offset)}) is for wall-clock times without one: drop it")
    hours = offset_hours(pl.col(cmap.utc_offset))
    return ts_ns - (hours * 3_600_000_000_000).round().cast(pl.Int64)  # a row without an offset has no time


def offset_hours(cells: pl.Expr) -> pl.Expr:
    """A `utc_offset` column's hours: `1`, `+5.5`, `1,0` (a decimal comma, as a German Excel save writes it beside
    `+01:00` in one column: review440 #11), `+05:30`, `-0400`; null where a cell is empty or none of these."""
    text = cells.cast(pl.String).str.strip_chars()
    # `+05:30` / `-0400` (an offset as ISO writes it, India's half hour): hours and minutes, not a number of hours
    clock = text.str.extract_groups(r"^([+-]?)(\d{1,2}):?(\d\d)$")
    sign = pl.when(clock.struct.field("1") == "-").then(-1.0).otherwise(1.0)
    number = text.str.replace(r"^([+-]?\d{1,2}),(\d+)$", "$1.$2")  # (an offset's hours are never grouped by 1000)
    return pl.when(text.str.contains(r"^[+-]?\d{1,2}:\d\d$|^[+-]\d{4}$")).then(
        sign * (clock.struct.field("2").cast(pl.Float64) + clock.struct.field("3").cast(pl.Float64) / 60)
    ).otherwise(number.cast(pl.Float64, strict=False))


DAY_CLOCK_LIMIT_NS = 36 * 3600 * 10**9
EXCEL_EPOCH_DAYS = 25569.0  # 1970-01-01 as a spreadsheet's serial date (day 0: 1899-12-30)


def ts_in_ns(cmap: ColumnMap, dtype: pl.DataType) -> bool:
    """Whether ts_expr already gives int ns (else raw numbers in ts_unit, scaled in Python)."""
    return cmap.ts_unit in ("datetime", *DAY_CLOCK_UNITS, EXCEL_DAYS, NS_SINCE_2000) or \
        (cmap.ts_unit in DECIMAL_TEXT_UNITS and dtype == pl.String) \
        or is_epoch_parts(cmap) or (isinstance(dtype, pl.Decimal) and cmap.ts_unit in UNITS)


