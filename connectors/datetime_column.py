"""A column of datetime text read as int ns: ISO 8601 or a `ts_format`, at the UTC offset it carries, naive in
the map's zone, a zone's name read as the offset it names (or refused when it names none), times of day on the
given date, epoch text read by `%s`. Split from connectors/event_time.py, which reads every kind of time column
and hands datetime text here."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import polars as pl

from connectors.column_map import ColumnMap
from connectors.datetime_text import (
    built_formats,
    chrono_text,
    date_readings,
    is_interval,
    start_format,
    two_way_date,
    two_way_refusal,
)
from connectors.local_times import local_instants, time_column
from connectors.map_vocabulary import UNITS
from connectors.past_midnight import joined_within_day, past_day_end
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
from engine.quoting import quoted


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


# a time of day, no date: `09:00:00.123`, or q's timespan of one (`0D09:30:00.123456789`: chrono_text drops the 0D)
DATED = re.compile(r"^\d{4}[-./]?\d\d[-./]?\d\d|^\d\d?[-./]\d\d?[-./]\d{2,4}")  # a date first: `2019.02.04D09:30`
CLOCK_ONLY = re.compile(r"^(0D)?\d{1,2}:\d\d(:\d\d([.,]\d+)?)?$")


# Taiwan's Minguo (ROC) calendar, as TWSE's and TPEx's exports write dates: year 113 is 2024 (1911 + 113)
MINGUO_DATE = re.compile(r"^\s*(1\d\d)([/.-])\d\d?\2\d\d?(?!\d)")
MINGUO_YEAR_ZERO = 1911


def minguo_refusal(path: Path, cmap: ColumnMap, first: str) -> str | None:
    """Why a column of Minguo dates (`113/12/02 09:00:02`) is not read, with what reads it; None for other text.
    No strftime code adds 1911 to a year: `%Y` reads 113 as the year 113 (review433 #11: refused as no ISO 8601,
    with a format to give, or read with one as times before 1970, every row rejected)."""
    if (found := MINGUO_DATE.match(first)) is None:
        return None
    year = int(found[1]) + MINGUO_YEAR_ZERO
    return (f"{path}: column {quoted(cmap.ts)} holds {quoted(first, 40)}, a date of Taiwan's Minguo (ROC) calendar "
            f"(year {found[1]} is {year}), which no strftime code reads (none adds {MINGUO_YEAR_ZERO} to a year): "
            f"write its year as {year} first (pandas: str(int(year) + {MINGUO_YEAR_ZERO})), then replay it (its "
            f"format, e.g. --ts-format '%Y{found[2]}%m{found[2]}%d %H:%M:%S', and --tz Asia/Taipei)")


def datetime_text_ns(path: Path, cmap: ColumnMap, first: str | None, second_pass: pl.Expr | None,
                     time_unit: str = "ns") -> pl.Expr:
    """Datetime text -> int ns: ISO 8601 (or `ts_format`) with a UTC offset at that offset, naive in `tz`; null for
    a time int64 ns do not hold (`datetime_unwrapped`). `time_unit` "us": the same times in us, which hold those too."""
    # 09:00:01,123 (a decimal comma, as European exports write it) reads as 09:00:01.123, and so does NinjaTrader's
    # `20240102 143000 2537700`
    # (a DATE+TIME's `25:30:00` as `01:30:00`, a day added once read)
    if first is not None and (minguo := minguo_refusal(path, cmap, first)) is not None:
        raise ValueError(minguo)
    text = chrono_text((time_column(cmap) if len(cmap.ts_columns) == 1 else joined_within_day(cmap))
                       .str.strip_chars(), is_interval(first))
    # the text's decimal comma before a fraction reads as a point (above): so does the format's (`%S,%3f`)
    fmt = re.sub(r"%S,%(\d?)f", r"%S.%\1f", start_format(cmap.ts_format)) if cmap.ts_format else None
    if fmt is not None:  # a q timespan's `0D` is dropped from the text (chrono_text): from a format that wrote it too
        fmt = re.sub(r"(^|\s)0D%H", r"\1%H", fmt)
    if fmt is not None and EPOCH_CODE in fmt:  # an epoch count is an instant: no zone, no clock of one day
        return _epoch_text(text, fmt)
    # a name other zones write too (CST) is read as the zone tz names writes it (Asia/Shanghai: +08:00)
    reading = zone_reading(cmap, first)
    if (fmt is None or "%Z" in fmt) and first is not None and (name := name_needing_tz(first)) not in (None, *reading):
        given = f" (--tz {cmap.tz} writes no {name})" if cmap.tz else ""
        raise ValueError(f"{path}: column {quoted(cmap.ts)} holds {quoted(first, 40)}, a time written with {name}, "
                         f"which three zones write for other offsets{given}: give the zone, {tz_for_name(name)}")
    if fmt is not None and "%Z" in fmt:  # polars reads a zone's name and drops it: read the offset it names
        _named_offsets_only(path, cmap, first, reading)
        fmt, text = format_reading_names(fmt), numeric_offsets(text, reading)
    if first is not None and CLOCK_ONLY.match(first):  # one file a day, its date in its name or given
        if cmap.date is None:
            raise ValueError(f"{path}: column {quoted(cmap.ts)} holds {quoted(first, 40)}, a time of day without a "
                             "date: give the day with --date file_name (the one date each file's name, or else its "
                             "folder, holds: date=YYYY-MM-DD/, YYYY-MM-DD/, a kdb+ HDB's YYYY.MM.DD/) or, when every "
                             "file given is of that one day, --date YYYY-MM-DD, and --tz ZONE for local times")
        text = pl.concat_str([pl.lit(cmap.date), text], separator=" ")
        fmt = f"%Y-%m-%d {fmt}" if fmt else "%Y-%m-%d %H:%M:%S%.f" if first.count(":") == 2 else "%Y-%m-%d %H:%M"
    elif cmap.date is not None:
        # a date and time needs no date given; a clock past a day (a timespan of days) is no time of one day
        why = "which holds its own date: drop date" if first and DATED.match(first.strip()) else \
            "which is no time of day (HH:MM:SS, under 48 hours): give its format with --ts-format, or a column of " \
            "times of one day"
        raise ValueError(f"{path}: date {quoted(cmap.date)} gives the day of times of day, but column "
                         f"{quoted(cmap.ts)} holds {quoted(first or '', 40)}, {why}")
    if fmt is None and first is not None and two_way_date(first):  # polars would guess day-first
        raise ValueError(two_way_refusal(f"{path}: column {quoted(cmap.ts)}", first, date_readings(first)))
    aware = any(code in fmt for code in ("%z", "%:z", "%#z")) if fmt else bool(first and UTC_OFFSET.search(first))
    # without a format, each row is read by its own kind: the kind a file's times are (`first`: planning finds a
    # time with an offset wherever it is) never reads the other kind's rows, which become null (missing_field,
    # named), whichever kind the first row is; polars would stop the whole file on a naive parse of an offset
    offset_row = text.str.contains(OFFSET_PATTERN)
    if not aware:
        naive = datetime_unwrapped(text if fmt else pl.when(~offset_row).then(text), fmt, time_unit)
        if len(cmap.ts_columns) == 2:  # `25:30:00` read as 01:30 of the day after its date
            naive = pl.when(past_day_end(cmap)).then(naive + pl.duration(days=1, time_unit=time_unit)).otherwise(naive)
        return local_instants(naive, cmap.tz, second_pass).dt.epoch(time_unit)
    if cmap.tz is not None and not reading:
        raise ValueError(f"{path}: ts column {quoted(cmap.ts)} carries its UTC offset ({quoted(first)}); "
                         f"tz={quoted(cmap.tz)} is {NAIVE_TZ_ONLY}")
    if not fmt:
        text = pl.when(offset_row).then(numeric_offsets(text, reading))
    return datetime_unwrapped(text, fmt, time_unit, "UTC").dt.epoch(time_unit)


def datetime_unwrapped(text: pl.Expr, fmt: str | None, time_unit: str, time_zone: str | None = None) -> pl.Expr:
    """Datetime text parsed at `time_unit`; at ns, null for a time int64 ns do not hold (from 1677 to 2262, the
    last us at each end aside): polars wraps such a time into another (2300-01-01 read as 1715-06-13, before 1980,
    and 1600-01-01 as 2184: review411 #1), so the text is parsed at us too, whose range holds it; the row is then
    rejected as ts_out_of_range (event_time.beyond_int64_s)."""
    if time_unit != "ns":
        return text.str.to_datetime(fmt, time_unit=time_unit, time_zone=time_zone, strict=False)

    def unwrapped(batch: pl.Series) -> pl.Series:
        # both readings of a batch of the text, which the expression gives once: as two expressions, each would
        # prepare the text again (its offsets, its decimal comma), which takes longer than the parse; read as
        # expressions, as before (a Series' reading refuses a format it cannot guess, an expression's is null)
        frame = batch.to_frame("text")
        ns = pl.col("text").str.to_datetime(fmt, time_unit="ns", time_zone=time_zone, strict=False)
        if fmt is None and _years_held(batch):  # (the usual file: one parse, not two, ~2.2x faster)
            return frame.select(ns).to_series()
        us = pl.col("text").str.to_datetime(fmt, time_unit="us", time_zone=time_zone, strict=False).dt.epoch("us")
        return frame.select(pl.when(us.abs() < TS_MAX // 1000).then(ns)).to_series()

    return text.map_batches(unwrapped, return_dtype=pl.Datetime("ns", time_zone), is_elementwise=True)


def _years_held(text: pl.Series) -> bool:
    """Whether every row of ISO 8601 ``text`` (null aside) begins with a year int64 ns hold wholly, 1678 to 2261:
    then its ns reading never wraps and needs no us reading beside it. False where any row begins otherwise."""
    years = text.str.slice(0, 4).cast(pl.Int32, strict=False)
    return not (years.is_null() & text.is_not_null() | (years < 1678) | (years > 2261)).any()


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
    raise ValueError(f"{path}: --ts-format {quoted(cmap.ts_format)} reads {quoted(name)} (in {quoted(first, 40)}) "
                     f"with %Z, which names {why}: a zone's name is not applied, so its times would be read as UTC. "
                     f"Write it as text in the format ({quoted(as_text)}) and give its zone with {zone}")


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
