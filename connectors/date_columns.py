"""A date column taken for the time. An integer column of YYYYMMDD dates (`trade_date` 20240603), or a column
whose name says it holds dates, is no count of epoch units: read as seconds, 20240603 puts every tick on
1970-08-23. Detection pairs such a column with an integer time of day beside it (`DATE+TIME` in that time's
`..._after_midnight` unit, said in a note); without one the file is refused, naming the map that reads it. Dates
alone as text beside times of day as text (`Datum;Zeit`, `Date;Heure`: `clock_beside`) are joined by detection, and
named where a map reads the date alone (`clock_left_out`)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.column_names import bar_values, holds_bars
from connectors.csv_dialect import DATE_LIKE, Dialect
from connectors.datetime_text import date_readings
from connectors.field_names import normal_name
from connectors.file_scans import SAMPLE_ROWS, first_text, is_csv, scan_file
from connectors.clock_digits import clock_reading, digits_said
from connectors.map_vocabulary import CLOCK_DIGIT_UNITS, COUNT_UNIT_WORDS, COUNT_UNITS, DAY_CLOCK_UNITS, UNITS
from connectors.time_units import EPOCH_1990_NS, EPOCH_2200_NS, epoch_unit
from connectors.shell_words import columns_option
from engine.quoting import quoted

FIRST_DATE, LAST_DATE = 19000101, 21001231  # YYYYMMDD integers a date column holds
DAY_NS = 86_400 * 10**9


class Numbers(NamedTuple):
    """What the first SAMPLE_ROWS values of a column show, when they are all whole numbers."""
    first: int
    least: int
    most: int
    dates: bool  # every value a YYYYMMDD date


def names_a_date(column: str) -> bool:
    """Whether a column's name says it holds dates: `date`, `trade_date`, `Trade Date`, `TradeDate`, `DATES`
    (not `update_id`)."""
    words = normal_name("".join(f"_{c}" if c.isupper() and i and column[i - 1].islower() else c
                                for i, c in enumerate(column))).split("_")
    return any(word in ("date", "dates") or word.endswith("date") and word != "update" for word in words)


def whole_numbers(path: Path, names: Sequence[str] | None, dialect: Dialect | None, column: str) -> Numbers | None:
    """The column's first SAMPLE_ROWS non-empty values, when all are whole numbers; None otherwise."""
    scan = scan_file(path, names, dialect, {column: pl.String} if is_csv(path) else None).head(SAMPLE_ROWS)
    text = pl.col(column).cast(pl.String).str.strip_chars()
    value = text.cast(pl.Float64, strict=False)
    given = text.is_not_null() & (text != "")
    facts = scan.select(
        unread=(given & (value.is_null() | value.is_nan() | (value != value.floor()))).sum(),
        first=value.filter(given).first(), least=value.min(), most=value.max(),
        dates=(value.is_between(FIRST_DATE, LAST_DATE) & ((value // 100 % 100).is_between(1, 12))
               & ((value % 100).is_between(1, 31))).filter(given).all()).collect().row(0, named=True)
    if facts["unread"] or facts["first"] is None:
        return None
    return Numbers(int(facts["first"]), int(facts["least"]), int(facts["most"]), bool(facts["dates"]))


def _clock_unit(column: str, numbers: Numbers) -> str | None:
    """The `..._after_midnight` unit in which a column's values are times of one day: the one its name says
    (`ts_ns_et`: ns), else the coarsest in which its largest is under a day. None when none is."""
    if numbers.least < 0 or numbers.most <= 0:
        return None
    named = [COUNT_UNIT_WORDS[word] for word in normal_name(column).split("_") if word in COUNT_UNIT_WORDS]
    for unit in named[:1] or COUNT_UNITS:
        if numbers.most * DAY_CLOCK_UNITS[unit] < DAY_NS:
            return unit
    return None


def _time_of_day_beside(path: Path, names: Sequence[str] | None, dialect: Dialect | None,
                        schema: Mapping[str, Any], cmap: ColumnMap, date: str) -> tuple[str, str] | None:
    """(column, unit) of the integer column next to the date column (after it, else before it) that holds times of
    one day, and that the map reads as nothing else; None when neither does. Times of one day: counts after
    midnight, else a wall clock's digits too large for any count (TAQ's `TIME_M` 93000025654309, HHMMSS and nine
    digits of the second: 25.8 h as ns), read as NYSE's `Time` is (`clock_reading`)."""
    columns = list(schema)
    where = columns.index(date)
    used = set(cmap.source_columns())
    # a bar's open is a price, never a clock, even when whole and under 86,400 (review430 #2: IB's `date,open`)
    prices = bar_values({normal_name(c) for c in columns})
    for column in (columns[i] for i in (where + 1, where - 1) if 0 <= i < len(columns)):
        dtype = schema[column]
        if column in used or normal_name(column) in prices or not (dtype.is_numeric() or dtype == pl.String):
            continue
        numbers = whole_numbers(path, names, dialect, column)
        if numbers is None or numbers.dates:
            continue
        if unit := _clock_unit(column, numbers):
            return column, unit
        counts = set(normal_name(column).split("_")) & set(COUNT_UNIT_WORDS)  # `time_ns`: its name says a count
        if not counts and (digits := clock_reading(path, names, dialect, column)) is not None:
            return column, digits.unit
    return None


def date_read_as_epoch(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                       dialect: Dialect | None, may_pair: bool) -> tuple[ColumnMap, list[str]]:
    """The map, and a note, when its one time column, read in an epoch unit, holds YYYYMMDD dates or is named as
    a date (and its values are no present-day epoch time): joined to the integer time of day beside it when
    `may_pair` (a detected layout), else (or with no such column) refused, naming the map that reads it."""
    if len(cmap.ts_columns) != 1 or cmap.ts_unit not in UNITS or cmap.ts not in schema:
        return cmap, []
    date = cmap.ts
    written = first_text(path, names, dialect, date) or "nan"
    try:
        first = float(written)
    except ValueError:
        return cmap, []
    if EPOCH_1990_NS <= first * UNITS[epoch_unit(first)] < EPOCH_2200_NS:
        return cmap, []  # a present-day epoch time, as most are: no need to scan the column
    numbers = whole_numbers(path, names, dialect, date)
    if numbers is None:
        return cmap, []
    if (digits := datetime_digits(numbers)) is not None:
        return _datetime_digits_read(path, cmap, written.strip(), digits, may_pair)
    present_day = EPOCH_1990_NS <= numbers.first * UNITS[epoch_unit(numbers.first)] < EPOCH_2200_NS
    if not numbers.dates and (present_day or not names_a_date(date)):
        return cmap, []
    held = (f"holds dates (YYYYMMDD, {numbers.first} first)" if numbers.dates
            else f"is named as a date ({numbers.first} first)")
    as_epoch = f"read as {cmap.ts_unit} since the epoch, every tick would fall in 1970"
    clock = _time_of_day_beside(path, names, dialect, schema, cmap, date)
    if clock is not None and may_pair:
        joined = replace(cmap, ts=f"{date}+{clock[0]}", ts_unit=clock[1], date=None)
        digits = clock_reading(path, names, dialect, clock[0]) if clock[1] in CLOCK_DIGIT_UNITS else None
        values = (f"a wall clock's digits, {digits_said(digits)}, too large for a count after midnight, read as "
                  f"{clock[1]}" if digits is not None else f"times of one day in {clock[1]}")
        return joined, [Caution(
            f"{path.name}: column {quoted(date)} {held}, not a time since the epoch ({as_epoch}): read joined to "
            f"{quoted(clock[0])}, the integer column beside it, whose values are {values} "
            f"({columns_option(f'ts={date}+{clock[0]}')} --ts-unit ... says otherwise)")]
    if clock is None and may_pair and numbers.dates and holds_bars({normal_name(c) for c in schema}):
        # a bar a day with no time beside its date (Interactive Brokers' daily bars, `20240102`): read as the
        # bar's day, as Yahoo's `2024-01-02` is
        return replace(cmap, ts_unit="datetime", ts_format="%Y%m%d"), [
            f"{path.name}: column {quoted(date)} {held}, and its rows are bars with no time of day beside them: "
            f"read as each bar's day (--ts-unit datetime --ts-format %Y%m%d), not a time since the epoch ({as_epoch})"]
    others = ", ".join(u for u in COUNT_UNITS if u != "ns_after_midnight")
    read_by = (f"{columns_option(f'ts={date}+{clock[0]}')} --ts-unit {clock[1]}" if clock is not None else
               f"the column of times of day beside it, {columns_option(f'ts={date}+TIME')} --ts-unit "
               f"ns_after_midnight (or {others}: the unit TIME counts after midnight; hhmmss, hhmmss_ms, hhmmss_us "
               f"or hhmmss_ns where it writes a clock's digits, TAQ's 093000025654309 hhmmss_ns), or a full "
               f"timestamp column, --columns ts=COLUMN")
    alone = ("; dates alone (a row a day, as settlements): --ts-unit datetime --ts-format %Y%m%d"
             if numbers.dates else "")
    raise ValueError(f"{path}: column {quoted(date)} {held}, not a time since the epoch ({as_epoch}). Give {read_by}"
                     f"{alone}; --ts-unit {cmap.ts_unit} reads it as epoch {cmap.ts_unit} all the same "
                     f"(docs/replay.md)")


# A date and its wall clock as one number (Chinese vendors' `datetime` 20241202093003000, YYYYMMDDHHMMSSmmm), by its
# digits: the format that reads each width, its letters as a note writes them
DATETIME_DIGITS = {12: ("%Y%m%d%H%M", "YYYYMMDDHHMM"), 14: ("%Y%m%d%H%M%S", "YYYYMMDDHHMMSS"),
                   17: ("%Y%m%d%H%M%S%3f", "YYYYMMDDHHMMSSmmm")}


def datetime_digits(numbers: Numbers) -> tuple[str, str] | None:
    """(format, letters) when a column's whole numbers are all of one DATETIME_DIGITS width whose first 8 digits,
    in its least and its most, are YYYYMMDD dates: dates and wall clocks written as one number, no epoch count
    (read as us, 20241202093003000 is in 2611); None otherwise. (Their float64 values, past 2**53, may be off in
    their last digits: only their dates are read here.)"""
    width = len(str(numbers.least))
    if width not in DATETIME_DIGITS or len(str(numbers.most)) != width:
        return None
    days = [value // 10 ** (width - 8) for value in (numbers.least, numbers.most)]
    if not all(FIRST_DATE <= day <= LAST_DATE and 1 <= day // 100 % 100 <= 12 and 1 <= day % 100 <= 31
               for day in days):
        return None
    return DATETIME_DIGITS[width]


def _datetime_digits_read(path: Path, cmap: ColumnMap, first: str, digits: tuple[str, str],
                          may_pair: bool) -> tuple[ColumnMap, list[str]]:
    """A detected layout's time column of dates and clocks as one number, read as the wall clock it writes (as
    clock digits beside a date are), with a note; a map that named the column is refused, naming the options that
    read it (review433 #7: read as epoch us, every row was rejected, and neither message named the fix)."""
    ts_format, letters = digits
    read_by = f"--ts-unit datetime --ts-format {ts_format}"
    held = (f"column {quoted(cmap.ts)} holds a date and a wall clock's digits as one number, {letters} "
            f"({first}), not a count since the epoch")
    if not may_pair:
        raise ValueError(f"{path}: {held}: read as epoch {cmap.ts_unit}, no tick would fall on its date. Give "
                         f"{read_by} (docs/replay.md)")
    return replace(cmap, ts_unit="datetime", ts_format=ts_format), [
        f"{path.name}: {held}: read as {read_by}, in the zone --tz gives (--ts-unit says otherwise)"]


# a time of day written alone, as a spreadsheet's time column holds it: `09:00:00,250`, `9:30`, a dotted `09.00.00`;
# q's timespan of one: `0D09:30:00.265336495`
CLOCK_TEXT = re.compile(r"^(0D)?\d{1,2}:\d\d(:\d\d([.,]\d+)?)?$|^\d{1,2}\.\d\d\.\d\d([.,]\d+)?$")


def clock_beside(names: Sequence[str], date: str, first: Callable[[str], Any]) -> str | None:
    """The column right after `date` when `date`'s first value is a date alone (`03.04.2024`, `03/04/2024`) and
    that column's is a time of day alone (`09:00:00,250`): the two halves of one time, as Excel exports write them
    whatever the header's language (`Datum;Zeit`, `Date;Heure`, `Data;Ora`); None otherwise."""
    where = list(names).index(date) if date in names else len(names)
    if where + 1 >= len(names):
        return None
    day, clock = first(date), first(names[where + 1])
    if not (isinstance(day, str) and isinstance(clock, str)):
        return None
    return names[where + 1] if DATE_LIKE.fullmatch(day.strip()) and CLOCK_TEXT.match(clock.strip()) else None


def clock_left_out(names: Sequence[str], cmap: ColumnMap, first: Callable[[str], Any]) -> str:
    """A clause for what is said of a time column read as dates alone (a two-way date's refusal, or a caution)
    when the column after it holds the times of day (`clock_beside`): that column, and the map and formats that read
    both; "" otherwise. A format of the date alone, as a refusal proposed for `Date;Heure`, read every tick at its
    day's midnight, said only as "another column" (review259 #5)."""
    if len(cmap.ts_columns) != 1 or (clock := clock_beside(names, cmap.ts, first)) is None:
        return ""
    day, time = first(cmap.ts).strip(), first(clock).strip()
    readings = date_readings(f"{day} {time}")  # the date's order given, where a format was: that one alone
    readings = [f for f in readings if cmap.ts_format and f.startswith(f"{cmap.ts_format} ")] or readings
    formats = " or ".join(f"--ts-format {quoted(f)}" for f in readings)
    return (f"; {quoted(clock)}, the column after it, holds the times of day ({quoted(time)}), which the date alone "
            f"leaves out (every tick at its day's midnight): {columns_option(f'ts={cmap.ts}+{clock}')}"
            f"{' with ' + formats if formats else ''} reads both")
