"""Event times of a tabular tick file as polars expressions: the time column (or a date column and a time column)
in its unit, datetime text at its own UTC offset or naive in a zone, times of day after a date's midnight, each
row's UTC offset applied; a zone written after the time read in that zone. Why no row's time reads, and the option
that reads it: connectors/time_hints.py."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import polars as pl

from connectors.column_map import ColumnMap
from connectors.epoch_parts import epoch_parts_ns, is_epoch_parts
from connectors.datetime_text import (
    built_formats,
    chrono_text,
    date_readings,
    is_interval,
    start_format,
    two_way_date,
    two_way_refusal,
)
from connectors.header_zones import zone_after_time
from connectors.past_midnight import joined_within_day, past_day_end
from connectors.map_vocabulary import CLOCK_DIGIT_UNITS, COUNT_UNITS, DAY_CLOCK_UNITS, EXCEL_DAYS, UNITS
from connectors.ticks import TS_MAX
from connectors.time_units import EPOCH_2200_NS
from connectors.utc_offsets import (
    NAMED_OFFSETS,
    OFFSET_PATTERN,
    UTC_OFFSET,
    clock_name,
    format_reading_names,
    name_needing_tz,
    names_in_zone,
    names_read_in,
    numeric_offsets,
    tz_for_name,
    unknown_zone_name,
    zone_tail,
)



def _local(expr: pl.Expr, tz: str | None, second_pass: pl.Expr | None = None) -> pl.Expr:
    """Naive wall-clock datetimes -> instants in `tz` (None: UTC). A time skipped by the switch forward to summer
    time becomes null (missing_field). A time in the hour repeated when it ends is read at the earlier instant,
    or at the later one on the rows `second_pass` marks (connectors/repeated_hour.py tells them)."""
    if tz is None:
        return expr
    ambiguous = "earliest" if second_pass is None else \
        pl.when(second_pass).then(pl.lit("latest")).otherwise(pl.lit("earliest"))
    return expr.dt.replace_time_zone(tz, ambiguous=ambiguous, non_existent="null")


def wall_clock_ns(path: Path, cmap: ColumnMap, dtype: pl.DataType, first: str | None) -> pl.Expr | None:
    """The naive wall-clock times that `ts_expr` reads in the map's `tz`, as int ns (their digits read as UTC's);
    None when it reads none (no tz; counts after midnight, which are elapsed time, not a wall clock's; times that
    carry their offset, as a name the tz writes does: `names_read_in`). Clock digits are a wall clock's reading."""
    if cmap.tz is None or cmap.ts_unit in COUNT_UNITS or zone_reading(cmap, first):
        return None
    return ts_expr(path, replace(cmap, tz=None), dtype, first)


def zone_reading(cmap: ColumnMap, first: str | None) -> dict[str, str]:
    """The zone names the map's tz reads at the offsets it writes them for: the names several zones write (CST,
    IST) when the file's first time is written with one (`names_read_in`), and, when the format reads a name with
    `%Z`, every name the tz writes (Europe/London: GMT and BST, which no one offset is known for) when it writes the
    first time's (a tz that writes no EST, beside `9:30:00 PM EST`, is for naive times: not applied, as beside ISO
    times that carry their offset)."""
    reading = names_read_in(cmap.tz, first)
    if cmap.tz is not None and cmap.ts_format is not None and "%Z" in cmap.ts_format:
        written = names_in_zone(cmap.tz)
        tail = zone_tail(first or "")
        name = tail.group().strip().upper() if tail is not None else ""  # (a name no one offset has: no tail)
        reading = (written if name in written or name not in NAMED_OFFSETS else {}) | reading
    return reading


NAIVE_TZ_ONLY = ("for naive times: drop it (files of both kinds in one run: a replay list gives each file its "
                 "own map, `columns: {tz: ...}` on the naive ones; docs/replay.md)")


def ts_expr(path: Path, cmap: ColumnMap, dtype: pl.DataType, first: str | None,
            second_pass: pl.Expr | None = None) -> pl.Expr:
    """The event-time column as int ns (datetimes, times of day) or raw numbers in ts_unit (scaled exactly
    in Python). `first` is the column's first value as text: whether datetime text carries a UTC offset.
    `second_pass`: the rows whose naive time in a repeated hour is read at the later instant (`_local`)."""
    col = time_column(cmap)
    if is_epoch_parts(cmap):  # `ssboe+usecs`: epoch seconds and the part of a second (connectors/epoch_parts.py)
        return epoch_parts_ns(cmap)
    if cmap.ts_unit == "datetime":
        if cmap.date is not None and dtype != pl.String:
            raise ValueError(f"{path}: ts column {cmap.ts!r} is {dtype}, which holds its own date: drop date "
                             f"{cmap.date!r} (it gives the day of times of day)")
        if isinstance(dtype, pl.Datetime):
            if dtype.time_zone is not None and cmap.tz is not None:
                raise ValueError(f"{path}: ts column {cmap.ts!r} already carries time zone {dtype.time_zone!r}; "
                                 f"tz={cmap.tz!r} is {NAIVE_TZ_ONLY}")
            return _local(col, cmap.tz, second_pass).dt.epoch("ns")
        if dtype == pl.Date:
            return _local(col.cast(pl.Datetime("ns")), cmap.tz, second_pass).dt.epoch("ns")
        if dtype == pl.String:
            return _datetime_text(path, cmap, first, second_pass)
        raise ValueError(f"{path}: ts column {cmap.ts!r} is {dtype}, not a datetime; set ts_unit to ns/us/ms/s")
    if len(cmap.ts_columns) > 1 and cmap.ts_unit in DAY_CLOCK_UNITS:  # DATE+TIME: each row's day, its own
        day, clock = (pl.col(c) for c in cmap.ts_columns)
        return after_midnight(cmap, row_day(day), clock.cast(pl.Float64, strict=False), second_pass)
    if dtype == pl.String and cmap.ts_unit in DECIMAL_TEXT_UNITS:
        return _decimal_text_ns(col, cmap.ts_unit)
    if dtype == pl.String and cmap.ts_unit in WHOLE_TEXT_UNITS:
        return _whole_count(col)
    if isinstance(dtype, pl.Decimal) and cmap.ts_unit in UNITS:  # Snowflake's NUMBER(20,6) seconds: exact, as text
        return _decimal_count_ns(col, dtype, UNITS[cmap.ts_unit])
    if not (dtype.is_integer() or dtype.is_float() or isinstance(dtype, pl.Decimal)):
        hint = "; set ts_unit='datetime'" if isinstance(dtype, pl.Datetime) or dtype in (pl.Date, pl.String) else ""
        raise ValueError(f"{path}: ts column {cmap.ts!r} is {dtype}, not a number of {cmap.ts_unit}{hint}")
    if cmap.ts_unit == EXCEL_DAYS:  # to the millisecond, the finest a spreadsheet's time holds (1e-8 day: 0.9 ms)
        offset = ((col.cast(pl.Float64) - EXCEL_EPOCH_DAYS) * 86_400e3).round().cast(pl.Int64, strict=False) * 10**6
        return _local(pl.lit(0).cast(pl.Datetime("ns")) + pl.duration(nanoseconds=offset, time_unit="ns"),
                      cmap.tz, second_pass).dt.epoch("ns")
    if cmap.ts_unit in DAY_CLOCK_UNITS:
        return after_midnight(cmap, pl.lit(cmap.date).str.to_date(), col.cast(pl.Float64), second_pass)
    return col


def after_midnight(cmap: ColumnMap, day: pl.Expr, clock: pl.Expr, second_pass: pl.Expr | None = None) -> pl.Expr:
    """A time counted from midnight of `day` (a date) in the map's DAY_CLOCK_UNITS unit -> int ns, in `tz`: the
    time elapsed since that midnight, as ITCH's and LOBSTER's counts are, not a wall-clock reading, so a day
    summer time starts or ends has 23 or 25 hours of them, with no skipped time and none twice. Clock digits are
    a wall clock's reading: its repeated hour read as text times' is (`second_pass`, `_local`)."""
    if cmap.ts_unit in CLOCK_DIGIT_UNITS:  # a wall clock's reading: local time of that day, as text times are
        naive = day.cast(pl.Datetime("ns")).dt.epoch("ns") + clock_digits_ns(clock, CLOCK_DIGIT_UNITS[cmap.ts_unit])
        return _local(naive.cast(pl.Datetime("ns")), cmap.tz, second_pass).dt.epoch("ns")
    midnight = _local(day.cast(pl.Datetime("ns")), cmap.tz).dt.epoch("ns")
    # float seconds of a day (< 86400) hold ns to well under 1 ns, so the rounding is exact enough
    offset = (clock * DAY_CLOCK_UNITS[cmap.ts_unit]).round().cast(pl.Int64, strict=False)
    # a time past the day (and a half: a session may run past midnight) is no time of this day: null, so
    # a file of another unit reads as no time at all (time_hint), not as weeks after the date
    offset = pl.when((offset >= 0) & (offset < DAY_CLOCK_LIMIT_NS)).then(offset)
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
        raise ValueError(f"{path}: its times ({first[:40]!r}) carry their own UTC offset; utc_offset "
                         f"({cmap.utc_offset!r}) is for wall-clock times without one: drop it")
    text = pl.col(cmap.utc_offset).cast(pl.String).str.strip_chars()
    # `+05:30` / `-0400` (an offset as ISO writes it, India's half hour): hours and minutes, not a number of hours
    clock = text.str.extract_groups(r"^([+-]?)(\d{1,2}):?(\d\d)$")
    sign = pl.when(clock.struct.field("1") == "-").then(-1.0).otherwise(1.0)
    hours = pl.when(text.str.contains(r"^[+-]?\d{1,2}:\d\d$|^[+-]\d{4}$")).then(
        sign * (clock.struct.field("2").cast(pl.Float64) + clock.struct.field("3").cast(pl.Float64) / 60)
    ).otherwise(text.cast(pl.Float64, strict=False))
    return ts_ns - (hours * 3_600_000_000_000).round().cast(pl.Int64)  # a row without an offset has no time


CLOCK_ONLY = re.compile(r"^\d{1,2}:\d\d(:\d\d([.,]\d+)?)?$")  # a time of day, no date: `09:00:00.123`


def _datetime_text(path: Path, cmap: ColumnMap, first: str | None, second_pass: pl.Expr | None) -> pl.Expr:
    """Datetime text -> int ns: ISO 8601 (or `ts_format`) with a UTC offset at that offset, naive in `tz`."""
    # 09:00:01,123 (a decimal comma, as European exports write it) reads as 09:00:01.123, and so does NinjaTrader's
    # `20240102 143000 2537700`
    # (a DATE+TIME's `25:30:00` as `01:30:00`, a day added once read)
    text = chrono_text((time_column(cmap) if len(cmap.ts_columns) == 1 else joined_within_day(cmap))
                       .str.strip_chars(), is_interval(first))
    # the text's decimal comma before a fraction reads as a point (above): so does the format's (`%S,%3f`)
    fmt = re.sub(r"%S,%(\d?)f", r"%S.%\1f", start_format(cmap.ts_format)) if cmap.ts_format else None
    if fmt is not None and EPOCH_CODE in fmt:  # an epoch count is an instant: no zone, no clock of one day
        return _epoch_text(text, fmt)
    # a name other zones write too (CST) is read as the zone tz names writes it (Asia/Shanghai: +08:00)
    reading = zone_reading(cmap, first)
    if (fmt is None or "%Z" in fmt) and first is not None and (name := name_needing_tz(first)) not in (None, *reading):
        given = f" (--tz {cmap.tz} writes no {name})" if cmap.tz else ""
        raise ValueError(f"{path}: column {cmap.ts!r} holds {first[:40]!r}, a time written with {name}, which "
                         f"three zones write for other offsets{given}: give the zone, {tz_for_name(name)}")
    if fmt is not None and "%Z" in fmt:  # polars reads a zone's name and drops it: read the offset it names
        _named_offsets_only(path, cmap, first, reading)
        fmt, text = format_reading_names(fmt), numeric_offsets(text, reading)
    if first is not None and CLOCK_ONLY.match(first):  # one file a day, its date in its name or given
        if cmap.date is None:
            raise ValueError(f"{path}: column {cmap.ts!r} holds {first[:40]!r}, a time of day without a date: give "
                             f"the day with --date file_name (the one date each file's name, or else its folder, "
                             f"holds: date=YYYY-MM-DD/, YYYY-MM-DD/) or, when every file given is of that one day, "
                             f"--date YYYY-MM-DD, "
                             f"and --tz ZONE for local times")
        text = pl.concat_str([pl.lit(cmap.date), text], separator=" ")
        fmt = f"%Y-%m-%d {fmt}" if fmt else "%Y-%m-%d %H:%M:%S%.f" if first.count(":") == 2 else "%Y-%m-%d %H:%M"
    elif cmap.date is not None:
        raise ValueError(f"{path}: date {cmap.date!r} gives the day of times of day, but column {cmap.ts!r} holds "
                         f"{(first or '')[:40]!r}, which is no time of day alone: drop date")
    if fmt is None and first is not None and two_way_date(first):  # polars would guess day-first
        raise ValueError(two_way_refusal(f"{path}: column {cmap.ts!r}", first, date_readings(first)))
    aware = any(code in fmt for code in ("%z", "%:z", "%#z")) if fmt else bool(first and UTC_OFFSET.search(first))
    # without a format, each row is read by its own kind: the kind a file's times are (`first`: planning finds a
    # time with an offset wherever it is) never reads the other kind's rows, which become null (missing_field,
    # named), whichever kind the first row is; polars would stop the whole file on a naive parse of an offset
    offset_row = text.str.contains(OFFSET_PATTERN)
    if not aware:
        naive = (text if fmt else pl.when(~offset_row).then(text)).str.to_datetime(fmt, time_unit="ns", strict=False)
        if len(cmap.ts_columns) == 2:  # `25:30:00` read as 01:30 of the day after its date
            naive = pl.when(past_day_end(cmap)).then(naive + pl.duration(days=1, time_unit="ns")).otherwise(naive)
        return _local(naive, cmap.tz, second_pass).dt.epoch("ns")
    if cmap.tz is not None and not reading:
        raise ValueError(f"{path}: ts column {cmap.ts!r} carries its UTC offset ({first!r}); tz={cmap.tz!r} is "
                         f"{NAIVE_TZ_ONLY}")
    if not fmt:
        text = pl.when(offset_row).then(numeric_offsets(text, reading))
    return text.str.to_datetime(fmt, time_unit="ns", time_zone="UTC", strict=False).dt.epoch("ns")


def _named_offsets_only(path: Path, cmap: ColumnMap, first: str | None, reading: dict[str, str]) -> None:
    """Refuses a format whose `%Z` would read a zone name that names no one UTC offset (BST, ET), nor one the tz
    writes (`reading`): polars would drop it and read the time as UTC."""
    if first is None or (name := unknown_zone_name(first, reading)) is None:
        return
    clock = clock_name(first)
    # built from the value, as text: the format's own letters beside %Z (`C%Z` of `CEST`) would be written twice
    as_text = next(iter(built_formats(first)), cmap.ts_format.replace("%Z", name))
    zone = f"--tz {clock[1]}" if clock else tz_for_name(name, naive_time(first, as_text))
    why = (f"the clock of {clock[1]}, {clock[0][0]}ST or {clock[0][0]}DT by the date" if clock else
           "no one UTC offset known here")
    raise ValueError(f"{path}: --ts-format {cmap.ts_format!r} reads {name!r} (in {first[:40]!r}) with %Z, which names "
                     f"{why}: a zone's name is not applied, so its times would be read as UTC. Write it as text in "
                     f"the format ({as_text!r}) and give its zone with {zone}")


def naive_time(text: str, fmt: str) -> datetime | None:
    """`text` read by `fmt` as a naive datetime (its date, to tell which name a zone's clock writes then), else None."""
    read = pl.Series([text.strip()]).str.to_datetime(fmt, time_unit="us", strict=False)[0]
    return read.replace(tzinfo=None) if isinstance(read, datetime) else None


EPOCH_CODE = "%s"  # strftime's epoch seconds
EPOCH_WITH_UNIT = re.compile(r"^%s(ms|us|ns)$")  # `1723161255342ms`: a count in the unit its suffix names


def _epoch_text(text: pl.Expr, fmt: str) -> pl.Expr:
    """Epoch text read by a format with `%s` -> int ns, null outside 1970..2200. `%sms`, `%sus`, `%sns` read the
    digits as a count of that unit: chrono's `%s` would read them as seconds, and seconds x 1e9 wrapped int64 into
    year-2211 times that passed every check. Any other `%s` format is read in us too, whose range holds any such
    count unwrapped: a time it puts outside 1970..2200 is null (a rejected row, named), never a wrapped one."""
    if unit := EPOCH_WITH_UNIT.match(fmt):
        count = text.str.strip_suffix(unit[1]).cast(pl.Int64, strict=False)
        per_count = UNITS[unit[1]]
        return pl.when((count >= 0) & (count < EPOCH_2200_NS // per_count)).then(count * per_count)
    ns = text.str.to_datetime(fmt, time_unit="ns", strict=False).dt.epoch("ns")
    us = text.str.to_datetime(fmt, time_unit="us", strict=False).dt.epoch("us")
    return pl.when((us >= 0) & (us < EPOCH_2200_NS // 1000)).then(ns)


def time_column(cmap: ColumnMap) -> pl.Expr:
    """The time column, or the text of date and time columns joined by a space (`ts: Date+Time`)."""
    if len(cmap.ts_columns) == 1:
        return pl.col(cmap.ts)
    return pl.concat_str([pl.col(c).cast(pl.String).str.strip_chars() for c in cmap.ts_columns], separator=" ")


DAY_CLOCK_LIMIT_NS = 36 * 3600 * 10**9
EXCEL_EPOCH_DAYS = 25569.0  # 1970-01-01 as a spreadsheet's serial date (day 0: 1899-12-30)


DECIMAL_COMMA_SECONDS = r"^[+-]?\d+,\d+$"  # `1733312345,123`: one comma, no grouping: a decimal comma


WHOLE_TEXT_UNITS = ("ms", "us", "ns")  # counts a CSV reads as text when written with a point (`.000`: row_exprs.py)
# units whose decimal text is read exactly to the ns (`_decimal_text_ns`): a fraction of a s, ms or us is a finer
# clock's digits (Gate.io's create_time_ms "1548000000123.456"); a fraction of a ns is no clock's (`_whole_count`)
DECIMAL_TEXT_UNITS = ("s", "ms", "us")


def _whole_count(text: pl.Expr) -> pl.Expr:
    """A whole count of ns written as text, a trailing `.000` included -> that integer, read as any epoch column
    is. A fraction of a ns, or text that is no number, becomes null (missing_field): no clock writes one."""
    return text.str.strip_chars().str.replace(r"\.0*$", "").cast(pl.Int64, strict=False)


def fraction_of_unit(text: str, unit: str) -> str | None:
    """Why a count of ns written as decimal text does not read (`_whole_count`): its fraction of a ns is not zero
    ("1723161255342000000.5"), which no clock writes; None for other text and units (`_decimal_text_ns`)."""
    if unit in DECIMAL_TEXT_UNITS or unit not in WHOLE_TEXT_UNITS or \
            re.fullmatch(r"\s*[+-]?\d+\.\d*[1-9]\d*\s*", text) is None:
        return None
    return f"a fraction of a {unit} after the point, which a count of {unit} never holds (only a .000 tail is read)"


def _decimal_count_ns(col: pl.Expr, dtype: pl.Decimal, ns_per_unit: int) -> pl.Expr:
    """A DECIMAL count of a unit (Snowflake's NUMBER(20,6), Spark's decimal(20,6) epoch seconds) -> int ns, exactly,
    as the same digits written as text are (`_decimal_text_ns`): refused as "not a number of s" before (review284
    #4). Digits past the ns are rounded; a time past int64 ns is null (ts_out_of_range's missing_field)."""
    exact = col.cast(pl.Decimal(38, min(dtype.scale or 0, 9))) * ns_per_unit
    return exact.round(0).cast(pl.Int64, strict=False)


def _decimal_text_ns(text: pl.Expr, unit: str) -> pl.Expr:
    """Decimal s, ms or us written as text ("1717236000.25" s, Gate.io's "1548000000123.456" ms, or with a decimal
    comma as European exports write it, "1717236000,25": epoch counts are never grouped) -> int ns, exactly: as a
    float the same value is off by up to ~100 ns. Digits past the ns are dropped. Text that is not plain decimal
    (exponents, words, grouping marks) becomes null (missing_field)."""
    per_unit = UNITS[unit]
    digits = len(str(per_unit)) - 1  # the fraction's digits that are ns: 9 of a s, 6 of a ms, 3 of a us
    text = text.str.strip_chars()
    text = pl.when(text.str.contains(DECIMAL_COMMA_SECONDS)).then(text.str.replace(",", ".", literal=True)) \
        .otherwise(text)
    negative = text.str.starts_with("-")
    parts = text.str.strip_chars_start("+-").str.split_exact(".", 1)
    whole = parts.struct.field("field_0").cast(pl.Int64, strict=False)
    fraction = parts.struct.field("field_1").fill_null("0").str.pad_end(digits, "0").str.slice(0, digits)
    fraction = pl.when(fraction.str.contains(rf"^\d{{{digits}}}$")).then(fraction.cast(pl.Int64, strict=False))
    # a whole count past int64 nanoseconds (a column of ms read as s) is null, not wrapped to some other time
    whole = pl.when(whole < TS_MAX // per_unit).then(whole)
    magnitude = whole * per_unit + fraction
    return pl.when(negative).then(-magnitude).otherwise(magnitude)


def ts_in_ns(cmap: ColumnMap, dtype: pl.DataType) -> bool:
    """Whether ts_expr already gives int ns (else raw numbers in ts_unit, scaled in Python)."""
    return cmap.ts_unit in ("datetime", *DAY_CLOCK_UNITS, EXCEL_DAYS) or \
        (cmap.ts_unit in DECIMAL_TEXT_UNITS and dtype == pl.String) \
        or is_epoch_parts(cmap) or (isinstance(dtype, pl.Decimal) and cmap.ts_unit in UNITS)


# (unit, its ns, the least count shown in it): 90 s reads `90 s`, not `1.5 min`
DURATION_UNITS = (("days", 86_400e9, 2), ("h", 3_600e9, 2), ("min", 60e9, 2), ("s", 1e9, 1), ("ms", 1e6, 1),
                  ("us", 1e3, 1), ("ns", 1, 0))


def duration_text(ns: float) -> str:
    """A span of time in the unit that reads best, to 3 significant digits: 3 ms, 1.5 s, 42 min, 2 h, 3 days.
    The unit is chosen by the rounded count, so 999.9999 ms reads `1 s`, never `1e+03 ms`; a count past 999 of
    the largest unit is written out (`1500 days`)."""
    for unit, size, least in DURATION_UNITS:
        shown = float(f"{ns / size:.3g}")
        if abs(shown) >= least:
            return f"{shown:.3g} {unit}" if abs(shown) < 1000 else f"{shown:.0f} {unit}"
    raise AssertionError("unreachable: every count is at least 0 ns")


def scaled_ts(raw: Any, factor: int) -> Any:
    if isinstance(raw, float):  # a non-finite float stays a float and is rejected as ts_not_int
        # a float's shortest decimal (repr) is the digits its writer had: float64 epoch seconds 1723161254.087896 are
        # ...896000 ns, as the same text reads, not the binary value's ...896064 (review284 #7)
        return round(Decimal(repr(raw)) * factor) if math.isfinite(raw) else raw
    return raw * factor  # exact for ints of any size: an overflow is rejected as ts_out_of_range


def time_with_zone(text: str | None) -> tuple[tuple[str, str], list[str]] | None:
    """Datetime text written with its zone after the time (`01/15/2024 03:30:00 PM ET`, `... America/New_York`):
    (the name as written and its IANA zone, the formats built from the text that read it, the name as text); None
    for any other text. A header-less file's time column is found by it as a header's is read by it."""
    found = zone_after_time(text) if text is not None else None
    formats = built_formats(text) if found is not None else []
    return (found, formats) if formats else None


def zone_in_times(path: Path, cmap: ColumnMap, first: str | None, full_map: bool) -> tuple[ColumnMap, list[str]]:
    """A map whose datetime text is written with its zone after the time (`09:30:00.123 AM ET`, `04:00:00 PM
    America/New_York`, `zone_after_time`), read in that zone as --tz would read it (summer time included), the name
    read as text by the format built from the first time; with a note. A tz given for every file (--tz) is for
    naive times: not applied, said, as beside times that carry their offset; a map given in full that names another
    zone is refused (the same rule). The map as it is when the first time is written otherwise, or its date reads
    two ways (refused as before, naming the --tz)."""
    zoned = time_with_zone(first) if cmap.ts_unit == "datetime" else None
    if zoned is None:
        return cmap, []
    (word, zone), formats = zoned
    # a format that reads the name as text: given, or settled by the file's later rows (`03/06/2026 ... PM ET`
    # then `03/16/...`), which read the times as UTC, the name dropped, when only a format built here was zoned
    fmt = cmap.ts_format if cmap.ts_format and cmap.ts_format.rstrip().endswith(word) else \
        None if cmap.ts_format or len(formats) != 1 else formats[0]
    if fmt is None:
        return cmap, []
    named = f"their zone, {zone}" if word == zone else f"{word}, the clock of {zone}"
    notes = [f"{path.name}: its times are written with {named}: read in that zone, summer time included "
             f"(--ts-format {fmt!r} --tz {zone})"]
    if cmap.tz is not None and cmap.tz != zone:
        if full_map:
            raise ValueError(f"{path}: ts column {cmap.ts!r} carries its zone ({first[:48]!r}: {zone}); "
                             f"tz={cmap.tz!r} is {NAIVE_TZ_ONLY}")
        notes.insert(0, f"{path.name}: its times carry their own zone, so --tz {cmap.tz} (for naive times) is not "
                        f"applied to it")
    return replace(cmap, ts_format=fmt, tz=zone), notes
