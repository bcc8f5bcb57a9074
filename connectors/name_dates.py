"""The day a tick file's name (or a folder above it) holds, for a file whose times are times of day and whose map
says `date: file_name` (`date_of`): an ISO date (`AAPL_2012-06-21_...`, a Hive `date=2026-09-01/`), q's dotted
one (`2019.02.04/`), or, where a name holds none, a compact YYYYMMDD as NYSE names its Daily TAQ files
(`EQY_US_ALL_TRADE_20240308`), IB and most US vendors theirs. Eight digits are a date only when no other reading of
them is one (DDMMYYYY, MMDDYYYY), so `20101990` (2010-10-19 or 20.10.1990) names no day. Every day taken is said
in a note."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date as Date
from pathlib import Path

from connectors.column_map import ColumnMap
from connectors.file_suffixes import file_stem
from connectors.map_vocabulary import CLOCK_FRACTION_DIGITS, DATE_FROM_NAME, DAY_CLOCK_UNITS
from engine.quoting import quoted

FIRST_YEAR, LAST_YEAR = 1990, 2200  # the years a name's date may be: the span epoch times are read in
# what each time-of-day unit counts, for the error that names it (hhmmss*: a clock's digits, not a count)
UNIT_WORDS = {"seconds_after_midnight": "seconds after midnight", "ms_after_midnight": "milliseconds after midnight",
              "us_after_midnight": "microseconds after midnight", "ns_after_midnight": "nanoseconds after midnight"}


def _iso_dates(text: str) -> set[str]:
    """The valid ISO dates (YYYY-MM-DD) a name holds, not inside longer runs of digits; q's dotted ones too
    (`2019.02.04`: how a kdb+ HDB names its date partitions, review324 #7)."""
    found = set()
    for date in (m.group() for m in re.finditer(r"(?<!\d)\d{4}([-.])\d\d\1\d\d(?!\d)", text)):
        try:
            found.add(Date.fromisoformat(date.replace(".", "-")).isoformat())
        except ValueError:
            pass
    return found


def _day(year: str, month: str, day: str) -> Date | None:
    """The date, when it is one of FIRST_YEAR..LAST_YEAR; None otherwise."""
    try:
        date = Date(int(year), int(month), int(day))
    except ValueError:
        return None
    return date if FIRST_YEAR <= date.year <= LAST_YEAR else None


def compact_dates(text: str) -> set[str]:
    """The YYYYMMDD dates a name holds as runs of exactly eight digits, each read only when neither DDMMYYYY nor
    MMDDYYYY also reads it as a date of FIRST_YEAR..LAST_YEAR (an ambiguous run names no day)."""
    found = set()
    for digits in (m.group() for m in re.finditer(r"(?<!\d)\d{8}(?!\d)", text)):
        day = _day(digits[:4], digits[4:6], digits[6:])
        if day is not None and _day(digits[4:], digits[2:4], digits[:2]) is None \
                and _day(digits[4:], digits[:2], digits[2:4]) is None:
            found.add(day.isoformat())
    return found


def _dates(name: str) -> set[str]:
    """The dates a name holds: its ISO ones, else its compact ones."""
    return _iso_dates(name) or compact_dates(name)


def _folder_date(path: Path) -> tuple[str, str] | None:
    """(the date, the folder's name) of the nearest folder above a file whose name holds one date: a Hive
    partition (`date=2026-09-01/`) or a day's folder (`ES/2026-09-01/trades.csv`, `20240308/`)."""
    for folder in path.parents:
        if len(dates := _dates(folder.name)) == 1:
            return dates.pop(), folder.name
    return None


def named_day(path: Path) -> str | None:
    """`file_name` when the file's name (else a folder above it) holds one date, as `date_of` would take it;
    None when it holds none or several."""
    found = _dates(file_stem(path))
    return DATE_FROM_NAME if len(found) == 1 or not found and _folder_date(path) is not None else None


def times_said(unit: str | None) -> str:
    """What a time-of-day unit's times are, in words: `hhmmss_ns` is a clock's digits, not seconds after midnight."""
    if unit in CLOCK_FRACTION_DIGITS:
        fraction = CLOCK_FRACTION_DIGITS[unit]
        return f"a clock's digits, HHMMSS{'x' * fraction} (ts_unit {unit})"
    return f"{UNIT_WORDS[unit]} (ts_unit {unit})" if unit in UNIT_WORDS else "times of day"


def date_of(path: Path, cmap: ColumnMap) -> tuple[ColumnMap, list[str]]:
    """A map whose `date` is "file_name" takes the one date (YYYY-MM-DD, else YYYYMMDD) the file's name holds, else
    (none in its name) the one of the nearest folder above it that holds one (a day folder's, a Hive `date=`
    partition's), with a note."""
    if cmap.date != DATE_FROM_NAME:
        return cmap, []
    found = _dates(file_stem(path))
    in_folder = _folder_date(path) if not found else None
    if len(found) != 1 and in_folder is None:
        held = f"several dates ({', '.join(sorted(found))})" if found else \
            "no date (YYYY-MM-DD, q's YYYY.MM.DD or YYYYMMDD), nor does a folder above it (date=YYYY-MM-DD/, " \
            "YYYY-MM-DD/, YYYYMMDD/ or an HDB's YYYY.MM.DD/)"
        # (one --date stamps every file given with that day: for files of several days, each must say its own)
        unit = f"--ts-unit {cmap.ts_unit} " if cmap.ts_unit in DAY_CLOCK_UNITS else ""  # (text: no unit to say)
        given = f"{unit}--date YYYY-MM-DD --tz {cmap.tz or 'ZONE'}"  # the whole reading, said
        raise ValueError(f"{path}: its times are {times_said(cmap.ts_unit)} and the day is not given; its name "
                         f"holds {held}: name each day's file or folder with its date, or give the day with --date "
                         f"YYYY-MM-DD when every file given is of that one day ({given})")
    day, source = (found.pop(), "the file name") if in_folder is None else \
        (in_folder[0], f"its folder {quoted(in_folder[1])}")
    zone = f", times in {cmap.tz}" if cmap.tz else ""
    return replace(cmap, date=day), [f"{path.name}: the day is {day}, from {source}{zone} (--date and --tz "
                                     f"give others)"]
