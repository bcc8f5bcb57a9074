"""Datetime text and the formats that read it: ISO 8601 needs none; other text (`20240102 14:30:00.123`,
`02.01.2024 ...`, kdb+'s `2024-01-02D00:00:01`) is read by one of TIME_FORMATS (`time_formats`; a 12-hour clock's
`03/13/2024 11:50:00 AM` by the format built from its shape), or an example format is built from its shape for the
error that asks for one (`built_formats`). A date that reads as month/day and as day/month (`two_way_date`) is never
guessed: its readings (`date_readings`) are given in the refusal (`two_way_refusal`) unless later rows settle it
(connectors/date_readings.py). The formats are polars' (chrono's) strftime codes; a two-digit year (`%y`) is polars'
1970-2069 (00-69: 2000-2069, 70-99: 1970-1999).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import polars as pl

from connectors.utc_offsets import tail_format, zone_tail
from engine.quoting import quoted


# Datetime text that is not ISO 8601, in polars/chrono codes (`%.f`: an optional fraction of any length)
TIME_FORMATS = ("%Y%m%d %H:%M:%S%.f", "%Y%m%d %H%M%S%3f", "%Y%m%d %H%M%S", "%Y%m%d %H%M%S%.f", "%Y%m%d-%H:%M:%S%.f",
                "%d.%m.%Y %H:%M:%S%.f", "%Y.%m.%d %H:%M:%S%.f", "%Y/%m/%d %H:%M:%S%.f", "%m/%d/%Y %H:%M:%S%.f",
                "%d/%m/%Y %H:%M:%S%.f", "%d-%m-%Y %H:%M:%S%.f", "%m-%d-%Y %H:%M:%S%.f",  # dashes read two ways too
                "%d/%m/%y %H:%M:%S%.f", "%m/%d/%y %H:%M:%S%.f",  # two-digit years (IG's 08/03/24)
                "%d-%b-%Y %H:%M:%S%.f", "%d-%b-%y %H:%M:%S%.f",  # LSEG's legacy 02-Jan-2024, NSE's 04-Dec-26
                "%d.%m.%y %H:%M:%S%.f",  # German exports' 04.12.26
                # dashes with a two-digit year read three ways (`04-12-26`: 4 Dec, 12 Apr 2026 or 26 Dec 2004): never
                # guessed; the file's rows settle one (a field > 12 is a day, > 31 a year) or the read is refused
                "%d-%m-%y %H:%M:%S%.f", "%m-%d-%y %H:%M:%S%.f", "%y-%m-%d %H:%M:%S%.f",
                "%Y-%m-%dD%H:%M:%S%.f",  # kdb+'s timestamps (BitMEX's dumps: 2024-01-02D00:00:01.000000789)
                "%Y.%m.%dD%H:%M:%S%.f",  # ... and as q itself writes them (`save`, `0:`): 2019.02.04D09:30:00.26533
                "%m/%d/%Y %H:%M", "%d/%m/%Y %H:%M",  # minute bars without seconds (Bloomberg's 1/2/2024 09:30)
                # dates alone (settlements, daily bars: CME's 05/01/2020, Bloomberg's 1/16/2024), in the shapes above
                # that polars would guess day-first or not read: settled or refused by the same rules
                "%m/%d/%Y", "%d/%m/%Y", "%d-%m-%Y", "%m-%d-%Y", "%d/%m/%y", "%m/%d/%y", "%d-%b-%Y", "%d-%b-%y",
                "%d.%m.%y", "%d-%m-%y", "%m-%d-%y", "%y-%m-%d")
TWELVE_HOUR = re.compile(r"\d:\d\d(:\d\d([.,]\d+)?)?\s*[AaPp][Mm]$")  # `9:30:00 PM`, `11:50AM`: AM/PM ending it
ISO = re.compile(r"^\d{4}-\d\d-\d\d([T ]\d\d:\d\d(:\d\d([.,]\d+)?)?\s*(Z|[+-]\d\d(:?\d\d)?)?)?$", re.IGNORECASE)


def time_formats(text: str) -> list[str]:
    """The TIME_FORMATS that read `text` (empty for ISO 8601, which needs none, and for text no format reads), one
    per instant they read it as: `20260301 170100` is one instant by `%Y%m%d %H%M%S` and by `%Y%m%d %H%M%S%.f`,
    a single reading (the format with the optional fraction, which reads later rows that have one), while
    `03/01/2026 ...` reads as two days. A 12-hour clock, which none of them reads, gets those `built_formats`
    builds from its shape, by the same rules (`03/13/2024 11:50:00 AM`: one; `03/08/2024 ...`: two)."""
    text = _dot_fraction(text.strip())
    if ISO.match(text):
        return []
    if (tail := zone_tail(text)) is not None:  # `04.02.2019 09:00:00.071 GMT+0100`: the time's format, its offset's
        head = text[: tail.start()]  # (after AM/PM, `9:30:00 PM EST`, the space is the head's: kept in the format)
        return [f + head[len(head.rstrip()):] + tail_format(tail.group()) for f in time_formats(head)]
    by_instant: dict[Any, str] = {}
    for f in TIME_FORMATS:  # a reading must be a date of market data: `%Y` reads `08/03/24` as the year 8
        if (instant := _instant_read(text, f)) is not None and \
                (instant not in by_instant or "%.f" in f and "%.f" not in by_instant[instant]):
            by_instant[instant] = f
    if not by_instant and TWELVE_HOUR.search(text):
        # a 12-hour clock's formats are built from its shape, each date's order by the same rules: a first date that
        # reads one way (`03/13/2024 11:50:00 AM`) is read as readily as a two-way one that later rows settle
        return built_formats(text)
    return list(by_instant.values())


def _instant_read(text: str, fmt: str) -> Any:
    """The datetime a format reads from text, when it is a date of market data (1970..2200), else None."""
    instant = pl.Series([text]).str.to_datetime(fmt, strict=False, time_unit="ns").item()
    return instant if instant is not None and 1970 <= instant.year <= 2200 else None


# The shapes of a date and of a time of day as datetime text writes them, in strftime codes (a date that reads two
# ways has both): what a format built for a value (`built_formats`) is made of
DATE_SHAPES = ((r"\d{4}-\d\d-\d\d", ("%Y-%m-%d",)), (r"\d{4}\.\d\d\.\d\d", ("%Y.%m.%d",)),
               (r"\d{4}/\d\d?/\d\d?", ("%Y/%m/%d",)), (r"\d{8}", ("%Y%m%d",)),
               (r"\d\d?\.\d\d?\.\d{4}", ("%d.%m.%Y",)), (r"\d\d?/\d\d?/\d{4}", ("%m/%d/%Y", "%d/%m/%Y")),
               (r"\d\d?-\d\d?-\d{4}", ("%d-%m-%Y", "%m-%d-%Y")), (r"\d\d?/\d\d?/\d\d", ("%m/%d/%y", "%d/%m/%y")),
               (r"\d\d?-[A-Za-z]{3}-\d{4}", ("%d-%b-%Y",)), (r"\d\d?-[A-Za-z]{3}-\d\d", ("%d-%b-%y",)),
               (r"\d\d?\.\d\d?\.\d\d", ("%d.%m.%y",)), (r"\d\d?-\d\d?-\d\d", ("%d-%m-%y", "%m-%d-%y", "%y-%m-%d")))
CLOCK_SHAPES = ((r"\d\d?:\d\d:\d\d(\.\d+)?", "%H:%M:%S%.f"), (r"\d\d?:\d\d", "%H:%M"), (r"\d{9}", "%H%M%S%3f"),
                (r"\d{6}(\.\d+)?", "%H%M%S%.f"), (r"\d{4}", "%H%M"),  # `0930`: a minute bar's HHMM
                (r"\d\d?\.\d\d\.\d\d(\.\d+)?", "%H.%M.%S%.f"), (r"\d\d?\.\d\d", "%H.%M"))  # `09.30.00`: dotted clocks
# what comes between a date and its time of day: a space (two in Interactive Brokers' TWS bars, `20240102  09:30:00
# US/Eastern`), ISO's T, a dash, kdb+'s D, or a comma (`01/02/2024, 09:30`, a spreadsheet's locale text), written into
# the format as the value writes it
DATE_CLOCK_GAP = r",\s?| +|[T-]|D"


def built_formats(text: str) -> list[str]:
    """Formats built from the shape of datetime text (its date, its time of day, a 12-hour clock's AM/PM, and its
    offset or the word after it, as text), each one that reads it: the example an error gives for a value no
    TIME_FORMATS reads (`04.02.2019 09:00 CET` -> `%d.%m.%Y %H:%M CET`)."""
    text = _dot_fraction(text.strip())
    tail = zone_tail(text, after_clock=False)  # after AM/PM too: `9:00:00 PM GMT+0100`
    # the offset read as one where it reads so; as text only where it does not (`-2024` ending a date)
    for head, after in ([(text[: tail.start()], tail_format(tail.group()))] if tail else []) + [(text, "")]:
        found = []
        for (date_shape, date_codes), (clock_shape, clock_code) in itertools.product(DATE_SHAPES, CLOCK_SHAPES):
            shape = re.fullmatch(rf"{date_shape}(?P<gap>{DATE_CLOCK_GAP}){clock_shape}(?P<noon>\s*[AaPp][Mm])?"
                                 rf"(?P<rest>(\s.*)?)", head)
            if shape is not None:
                clock = clock_code.replace("%H", "%I") + shape["noon"][:-2] + "%p" if shape["noon"] else clock_code
                rest = shape["rest"].replace("%", "%%") + after
                found += [f"{date}{shape['gap']}{clock}{rest}" for date in date_codes]
        if reads := [f for f in dict.fromkeys(found) if _instant_read(text, f) is not None]:
            return reads
    return []


# a date whose day and month come in either order (`06/03/2024`, `4/14/2020`, `03-06-24`), which polars, asked to
# guess a format, reads day-first
DAY_MONTH = r"^(\d\d?)[/-](\d\d?)[/-]\d\d"


def two_way_date(text: str) -> bool:
    """Whether datetime text starts with a date that reads as month/day and as day/month (`06/03/2024`, `03-06-2024`):
    a guess would be wrong for half the world (a dotted `02.01.2024` is day first everywhere)."""
    if len(time_formats(text)) > 1:
        return True
    # the year's end need not be a word's: `01/02/2024T09:30` (a T after the date) reads two ways too
    found = re.match(DAY_MONTH + r"\d\d(?!\d)", text.strip())
    return bool(found) and int(found[1]) <= 12 and int(found[2]) <= 12


def day_month_date(text: str) -> bool:
    """Whether datetime text starts with a date of DAY_MONTH's shape, one reading or two."""
    return re.match(DAY_MONTH, text.strip()) is not None


def date_readings(text: str) -> list[str]:
    """The formats of a two-way date's readings, one each: TIME_FORMATS', else ones built from its shape (a 12-hour
    clock's `03/06/2026 9:30:00 PM`, `01/02/2024 09.30.00`); empty when none reads it (a refusal then proposes
    none: a common format given as an example read no row of such a file)."""
    return time_formats(text) or built_formats(text)


def two_way_refusal(where: str, first: str, readings: list[str], advice: str = "") -> str:
    """Why a date that reads two ways is not read: `where` (the file and its column), the date and its readings,
    and `advice`: the reading the file's other rows support, with why; else each reading, as the user knows which.
    With no readings (no format built here reads its time), it says so and proposes none."""
    if not readings:
        return (f"{where} holds {quoted(first, 40)}, a date that reads as month/day and as day/month, in text no "
                "format built here reads: give the one it is with --ts-format in strftime codes (%m/%d or %d/%m for "
                "the date, and the codes of its time of day; docs/replay.md)")
    options = " or ".join(f"--ts-format {quoted(f)}" for f in readings)
    return (f"{where} holds {quoted(first, 40)}, a date that reads more than one way "
            f"({' or '.join(quoted(f) for f in readings)}): give the one it is, {advice or options}")


# NinjaTrader's tick exports: `20240102 143000 2537700`, the fraction of the second in 100 ns after a space
SPACED_FRACTION = r"^(\d{8} \d{6}) (\d{1,9})$"
COMMA_FRACTION = r"(:\d\d),(\d)"  # 09:00:01,123: a decimal comma before the fraction, as European exports write it
# 09.00.01,123: the same after a dotted clock (Italian, Danish, Finnish Windows locales). The whole clock, and the
# fraction's end, so a two-digit-year date before a comma (`03.04.24,09:00`) is never taken for one
DOTTED_COMMA_FRACTION = r"(\d\d?\.\d\d\.\d\d),(\d+)(\s|$)"


# An interval's time, as ENTSO-E's MTU column writes one (`01.01.2024 00:00 - 01.01.2024 00:15`, also with seconds
# and `/` dates): read as its start, the time its price is for. The end is a date and a clock too, so neither an
# ISO time's offset (`09:30:00-05:00`) nor a dash between a date and its clock is taken for one
_STAMP = r"\d[\d./-]*\d[ T]\d\d?:\d\d(?::\d\d(?:[.,]\d+)?)?"
# the day clocks go back marks the repeated hour's passes (connectors/pass_marks.py): `02:00B - 03:00B` (A, B
# after each clock), or the zone after the interval, `(CEST)` then `(CET)`; read as the start, the marks left out
INTERVAL = rf"^({_STAMP})[AB]?\s*-\s*{_STAMP}[AB]?(?:\s*\([A-Z]{{3,5}}\))?$"


# q's timespan of less than a day (`0D09:30:00.265336495`, an RDB's or tickerplant's `time`), alone or after its
# date column's text: the time of day it is, which chrono reads (review324 #3)
Q_TIMESPAN = r"(^|\s)0D(\d\d:\d\d)"


def _dot_fraction(text: str) -> str:
    """A fraction of a second as chrono reads it: 09:00:01,123 and 09.00.01,123 (a decimal comma) and NinjaTrader's
    `20240102 143000 2537700` (a fraction after a space) with a dot; an interval (INTERVAL) as its start; a q
    timespan (Q_TIMESPAN) as its time of day."""
    text = re.sub(Q_TIMESPAN, r"\1\2", re.sub(INTERVAL, r"\1", text))
    text = re.sub(DOTTED_COMMA_FRACTION, r"\1.\2\3", re.sub(COMMA_FRACTION, r"\1.\2", text))
    return re.sub(SPACED_FRACTION, r"\1.\2", text)


def start_format(fmt: str) -> str:
    """A format given for a whole interval (`%d.%m.%Y %H:%M - %d.%m.%Y %H:%M`, its codes on both sides of the dash)
    as the format of its start, which is what is read of an interval (INTERVAL): chrono, given both, kept the end."""
    halves = [(fmt[:at].strip(), fmt[at + 1:].strip()) for at, char in enumerate(fmt) if char == "-"]
    return next((start for start, end in halves if start == end and "%" in start), fmt)


def interval_said(text: str | None) -> str:
    """What a time column's note adds when its first value is an interval (INTERVAL): that each is read as its
    start; '' for any other value."""
    if not is_interval(text):
        return ""
    return f", each interval ({quoted(text.strip(), 40)}) at its start"


def chrono_text(text: pl.Expr, intervals: bool = True) -> pl.Expr:
    """A column of datetime text as chrono reads it (`_dot_fraction` of each value): every read of a time column,
    and every trial of a format on it, sees the same text. ``intervals=False`` for a column whose first value is no
    interval (`is_interval`): the interval's regex doubled the cost of this on 1M ISO times (0.27 -> 0.57 s)."""
    if intervals:
        text = text.str.replace(INTERVAL, "${1}")
    return text.str.replace(COMMA_FRACTION, "${1}.${2}").str.replace(DOTTED_COMMA_FRACTION, "${1}.${2}${3}") \
        .str.replace(SPACED_FRACTION, "${1}.${2}").str.replace(Q_TIMESPAN, "${1}${2}")


def is_interval(text: str | None) -> bool:
    """Whether datetime text is an interval (INTERVAL: `01.01.2024 00:00 - 01.01.2024 00:15`)."""
    return text is not None and re.match(INTERVAL, text.strip()) is not None


def is_iso_time(cell: str) -> bool:
    """Whether a cell is ISO 8601, maybe with its UTC offset written as a name or after one (`... 09:30:00 EST`,
    `... UTC`, `... GMT+0100`), as a headered file's times are read (ISO itself takes only `Z` and numbers)."""
    text = _dot_fraction(cell.strip())
    tail = zone_tail(text)
    return bool(ISO.match(text if tail is None else text[: tail.start()]))
