"""Times of day written as clock digits: KRX's `090001418` (09:00:01.418) and `090005` (09:00:05), as Chinese and
Taiwanese exchange exports write them too, beside a date column. Read as a count after midnight (90,001,418 us:
00:01:30) every time was wrong and a session was squeezed into seconds (review 231, finding 1).

A count after midnight and a clock's digits differ in one way: counts run through every number, a clock's digits
skip those whose minutes or seconds pass 59 (the seconds place of a count is 60..99 two times in five). So a
sample is read as a clock when every value is a valid HHMMSS[fff...] and, had it been counts, so many values
missing every invalid number would be past belief; when neither reading can be told (a sample within one minute)
the file is refused, naming both readings and the unit that gives each, unless the count puts the day past its first
minutes (digits that are counts of hours, read as before, with a note naming the clock's reading)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import polars as pl

from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.file_scans import SAMPLE_ROWS, is_csv, scan_file
from connectors.map_vocabulary import (
    CLOCK_DIGIT_UNITS, CLOCK_FRACTION_DIGITS, COUNT_UNIT_WORDS, COUNT_UNITS, DATE_FROM_NAME, DAY_CLOCK_UNITS, UNITS)
from connectors.past_midnight import DAY_NS, counted_past_midnight
from connectors.shell_words import shell_word
from engine.quoting import quoted

# a count that puts every time in the first minutes after midnight: what clock digits read as the count of the
# finest unit that holds them come to (235959999 us: 236 s), no trading day's
SQUEEZED_NS = 240 * 10**9
UNBELIEVABLE = 1e-6  # the chance, for counts, of every sampled second missing every number a clock skips


class Sample(NamedTuple):
    """The whole seconds (HHMMSS) of a time column's sampled values, read as clock digits of `unit`."""
    unit: str
    first: str  # the first value, as written
    least: int  # least and most HHMMSS
    most: int
    distinct: int  # distinct HHMMSS
    largest: int  # the largest value, as a number
    valid: bool  # every HHMMSS a clock's (hour < 24, minutes and seconds < 60)
    shortest: int  # digits of the shortest value, as written


def _sample(path: Path, names: Sequence[str] | None, dialect: Dialect | None, column: str) -> Sample | None:
    """The column's sampled values as clock digits, when all are 1 to 15 digits; None otherwise."""
    scan = scan_file(path, names, dialect, {column: pl.String} if is_csv(path) else None).head(SAMPLE_ROWS)
    text = pl.col(column).cast(pl.String).str.strip_chars()
    values = scan.select(text.filter(text.is_not_null() & (text != "")).alias("t")).collect()["t"]
    if values.is_empty() or not values.str.contains(r"^\d{1,15}$").all():
        return None
    longest = int(values.str.len_chars().max())
    # the fewest digits that hold the longest value: a leading zero may be left out
    unit = next(u for u, digits in CLOCK_FRACTION_DIGITS.items() if longest <= 6 + digits)
    whole = values.cast(pl.Int64) // 10 ** CLOCK_FRACTION_DIGITS[unit]
    valid = bool(((whole // 10_000 < 24) & (whole // 100 % 100 < 60) & (whole % 100 < 60)).all())
    return Sample(unit, values[0], int(whole.min()), int(whole.max()), whole.n_unique(),
                  int(values.cast(pl.Int64).max()), valid, int(values.str.len_chars().min()))


def clock_reading(path: Path, names: Sequence[str] | None, dialect: Dialect | None, column: str) -> Sample | None:
    """The column's sample when every sampled value is a wall clock's digits (HHMMSS, then 0, 3, 6 or 9 digits of
    the second: its unit), as NYSE's `Time` is told (`lone_clock_digits`); None otherwise."""
    sample = _sample(path, names, dialect, column)
    return sample if sample is not None and sample.valid else None


def digits_said(sample: Sample) -> str:
    """`HHMMSSfffffffff (93000025654309 is 09:30:00.025654309)`: what a note says of a sample of clock digits."""
    return (f"HHMMSS{'f' * CLOCK_FRACTION_DIGITS[sample.unit]} ({sample.first} is "
            f"{_as_clock(int(sample.first), sample.unit)})")


def _clocks_up_to(hhmmss: int) -> int:
    """How many of 0..hhmmss are a clock's HHMMSS."""
    hour, minute, second = hhmmss // 10_000, hhmmss // 100 % 100, hhmmss % 100
    if hhmmss < 0:
        return 0
    if hour >= 24:
        return 24 * 3600
    return hour * 3600 + (60 * 60 if minute >= 60 else minute * 60 + min(second + 1, 60))


def _counts_unlikely(sample: Sample) -> bool:
    """Whether counts over the sample's range would, past belief, all have missed the numbers a clock skips."""
    skipped = 1 - (_clocks_up_to(sample.most) - _clocks_up_to(sample.least - 1)) / (sample.most - sample.least + 1)
    return skipped > 0 and (1 - skipped) ** sample.distinct < UNBELIEVABLE


def _clock_text(ns: int) -> str:
    """ns after midnight as HH:MM:SS.fffffffff, trailing zeros of the second dropped."""
    seconds, part = divmod(ns, 10**9)
    fraction = f".{part:09d}".rstrip("0").rstrip(".")
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{fraction}"


def _as_clock(value: int, unit: str) -> str:
    digits = CLOCK_FRACTION_DIGITS[unit]
    whole, part = divmod(value, 10**digits)
    hour, minute, second = whole // 10_000, whole // 100 % 100, whole % 100
    return _clock_text(((hour * 60 + minute) * 60 + second) * 10**9 + part * CLOCK_DIGIT_UNITS[unit])


def clock_digits(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                 dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """The map, and a note, with its DATE+TIME read as a wall clock's digits (`hhmmss_ms`...) when its time, taken
    for a count after midnight, holds clock digits as the sample shows; a ValueError naming both readings when
    the sample cannot tell them apart. Any other map is returned as it is."""
    if len(cmap.ts_columns) != 2 or cmap.ts_unit not in COUNT_UNITS or cmap.ts_columns[1] not in schema:
        return cmap, []
    date, time = cmap.ts_columns
    if set(normal_name(time).split("_")) & set(COUNT_UNIT_WORDS):  # `time_ms`, `ts_ns_et`: its name says it counts
        return cmap, []
    sample = _sample(path, names, dialect, time)
    if sample is None or not sample.valid:
        return cmap, []
    clock = _as_clock(int(sample.first), sample.unit)
    count = _clock_text(int(sample.first) * DAY_CLOCK_UNITS[cmap.ts_unit])
    if _counts_unlikely(sample):
        return replace(cmap, ts_unit=sample.unit), [
            f"{path.name}: column {quoted(time)} holds a wall clock's digits, "
            f"HHMMSS{'f' * CLOCK_FRACTION_DIGITS[sample.unit]} "
            f"({sample.first} is {clock}), not a count after midnight (no minute or second of its values passes 59): "
            f"read as ts_unit {sample.unit} of each row's day in {quoted(date)} (--ts-unit {cmap.ts_unit} reads "
            f"{sample.first} as {count}, a count)"]
    joined = shell_word(f"ts={date}+{time}")
    if sample.largest * DAY_CLOCK_UNITS[cmap.ts_unit] >= SQUEEZED_NS:  # a count of hours, as detected before
        return cmap, [f"{path.name}: column {quoted(time)} read as a count after midnight ({sample.first} is "
                      f"{count}); its values are also a wall clock's digits ({sample.first} is {clock}: --columns "
                      f"{joined} --ts-unit {sample.unit} reads them so)"]
    raise ValueError(f"{path}: column {quoted(time)} reads two ways and its first rows do not tell which: as a wall "
                     f"clock's digits ({sample.first} is {clock}: --columns {joined} --ts-unit {sample.unit}) or "
                     f"as a count after midnight ({sample.first} is {count}: --columns {joined} --ts-unit "
                     f"{cmap.ts_unit}); give the one that is right (docs/replay.md)")


# NYSE Daily TAQ's `Time`: HHMMSS and nine digits of the second, 15 digits as written (`040125562680053`), the day
# in the file's name alone. As a number it is no present-day time in any epoch unit (its most, 235959999999999, is
# under 1990's epoch us and past 2200's epoch ms), so the epoch reading detection gave it rejected every row.
NS_CLOCK_DIGITS = 6 + CLOCK_FRACTION_DIGITS["hhmmss_ns"]


def lone_clock_digits(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                      dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """The map, and a note, with its one time column read as `hhmmss_ns` clock digits (the day: the date given,
    else the one the file's name holds, `date: file_name`) when the column, detected as an epoch count, holds
    HHMMSSxxxxxxxxx on every sampled row: 15 digits as written in a CSV, a Parquet copy's integers of 14 or 15
    (its leading zero lost; fewer digits, before 01:00, could be epoch milliseconds).
    Any other map is returned as it is."""
    if len(cmap.ts_columns) != 1 or cmap.ts_unit not in UNITS or cmap.ts not in schema:
        return cmap, []
    # the first value first: an epoch count's 13 or 19 digits (the common case) costs no scan of the sample
    head = scan_file(path, names, dialect, {cmap.ts: pl.String} if is_csv(path) else None).head(1)
    first = head.select(pl.col(cmap.ts).cast(pl.String).str.strip_chars()).collect()[cmap.ts]
    if first.is_empty() or first[0] is None or len(first[0]) not in (NS_CLOCK_DIGITS - 1, NS_CLOCK_DIGITS):
        return cmap, []
    sample = _sample(path, names, dialect, cmap.ts)
    if sample is None or not sample.valid or sample.unit != "hhmmss_ns":
        return cmap, []
    if sample.shortest < (NS_CLOCK_DIGITS if is_csv(path) else NS_CLOCK_DIGITS - 1):
        return cmap, []
    clock = _as_clock(int(sample.first), sample.unit)
    return replace(cmap, ts_unit=sample.unit, date=cmap.date or DATE_FROM_NAME), [
        f"{path.name}: column {quoted(cmap.ts)} holds a clock's digits on every sampled row, HHMMSS and nine "
        f"digits of the second ({sample.first} is {clock}, as NYSE's Daily TAQ files write it), no time since the "
        f"epoch in any unit: read as ts_unit {sample.unit} of the day its name holds, else --date YYYY-MM-DD "
        f"(--ts-unit says otherwise)"]


EPOCH_1990_NS = 631_152_000 * 10**9  # a present-day epoch count is past it (name_dates' FIRST_YEAR)


def dated_clock_digits(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                       dialect: Dialect | None, day: str | None) -> tuple[ColumnMap, list[str]]:
    """The map, and a note, with its one time column read as clock digits (`90016599`: 09:00:16.599, hhmmss_ms)
    of `day` (a date given, or `file_name` when the file's name holds one) when the column, detected as an epoch
    count, holds no present-day epoch time (90016599 s is 1972-11-07) and its sampled values are a clock's past
    belief for counts (no minute or second passes 59). review375 #6: Asian vendors' clocks so read ran from 1972,
    exit 0. Any other map (no day to read them on) is returned as it is."""
    if day is None or len(cmap.ts_columns) != 1 or cmap.ts_unit not in UNITS or cmap.ts not in schema:
        return cmap, []
    sample = _sample(path, names, dialect, cmap.ts)
    if sample is None or not sample.valid or sample.largest * UNITS[cmap.ts_unit] >= EPOCH_1990_NS \
            or not _counts_unlikely(sample):
        return cmap, []
    clock = _as_clock(int(sample.first), sample.unit)
    said = f"the day given, {day}" if day != DATE_FROM_NAME else "the day its name holds"
    return replace(cmap, ts_unit=sample.unit, date=cmap.date or day), [
        f"{path.name}: column {quoted(cmap.ts)} holds a wall clock's digits, HHMMSS"
        f"{'f' * CLOCK_FRACTION_DIGITS[sample.unit]} ({sample.first} is {clock}; no minute or second of its values "
        f"passes 59), not epoch {cmap.ts_unit} (which put {sample.first} in {_epoch_year(sample, cmap.ts_unit)}): "
        f"read as ts_unit {sample.unit} of {said} (--ts-unit says otherwise)"]


def _epoch_year(sample: Sample, unit: str) -> int:
    return 1970 + int(int(sample.first) * UNITS[unit] // (365.2425 * 86_400 * 10**9))


def counts_within_the_day(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                          dialect: Dialect | None) -> None:
    """A count after midnight (`..._after_midnight`) of a day or more on a sampled row is refused, with the
    readings that put it within the day, unless the map counts on past 24:00 (`counted_past_midnight`): beside an
    exchange trade date, or alone in a file of one day whose count starts within it (a session captured across
    midnight). Read, such a count put the tick on the next day: review390 #2, TAQ's clock digits 93000025654309 as
    ns after midnight, which the refusal of a date column had proposed, were 25.8 h, no word said."""
    time = cmap.ts_columns[-1]
    alone = len(cmap.ts_columns) == 1
    if cmap.ts_unit not in COUNT_UNITS or time not in schema or counted_past_midnight(cmap) and not alone:
        return
    scan = scan_file(path, names, dialect, {time: pl.String} if is_csv(path) else None).head(SAMPLE_ROWS)
    counts = pl.col(time).cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)
    least, largest = scan.select(counts.min(), counts.max().alias("most")).collect().row(0)
    day = DAY_NS / DAY_CLOCK_UNITS[cmap.ts_unit]  # a day in the unit
    if largest is None or largest < day or alone and least < day:
        return
    clock = _clock_text(round(largest * DAY_CLOCK_UNITS[cmap.ts_unit]))
    past = f"{largest:.15g} {cmap.ts_unit.removesuffix('_after_midnight')} after midnight is {clock}, past its day"
    joined = shell_word(f"ts={'+'.join(cmap.ts_columns)}")
    fixes = [f"its values as a wall clock's digits, {digits_said(digits)}: --columns {joined} --ts-unit "
             f"{digits.unit}" for digits in [clock_reading(path, names, dialect, time)] if digits is not None]
    fixes += [f"a finer count: --ts-unit {unit}" for unit in COUNT_UNITS
              if largest * DAY_CLOCK_UNITS[unit] < DAY_NS][:1]
    if not alone and least < day:  # a session across midnight, written under its trade date
        fixes.append(f"a date column of exchange trade dates, whose night session is counted on past 24:00: "
                     f"--columns {joined},trade_date={cmap.ts_columns[0]}")
    raise ValueError(f"{path}: column {quoted(time)} is read as {cmap.ts_unit}, but {past} (a day's count ends at "
                     f"24:00, so the tick would be read on the next day); give the reading that is right: "
                     f"{'; '.join(fixes) or 'the unit the column counts'} (docs/replay.md)")
