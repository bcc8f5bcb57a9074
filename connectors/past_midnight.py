"""Times of day written past 24:00: an exchange whose session crosses midnight may count a night session's times
on from the midnight it opened after (JPX's night session to `30:00`, `25:30:00` for 01:30 the next morning; a
count after midnight of 91,800,000 ms). Beside a calendar date such a time is on the day after; beside a trade
date it is on the trade date itself, counted from the midnight before it (connectors/session_dates.py).
"""

from __future__ import annotations

import polars as pl

from connectors.column_map import ColumnMap
from connectors.map_vocabulary import COUNT_UNITS, DAY_CLOCK_UNITS

DAY_NS = 86_400 * 10**9
HOUR = r"^(\d{1,2}):"  # a time of day's hour as text writes it: `25:30:00`, `9:30`


def past_day_end(cmap: ColumnMap) -> pl.Expr:
    """Per row of a DATE+TIME map, whether its time of day is written at 24:00 or later (text `24:00:00` to
    `47:59:59`, or a count after midnight of a day or more); false for any other map."""
    if len(cmap.ts_columns) != 2:
        return pl.lit(False)
    clock = pl.col(cmap.ts_columns[1])
    if cmap.ts_unit in COUNT_UNITS:
        counted = clock.cast(pl.Float64, strict=False) * DAY_CLOCK_UNITS[cmap.ts_unit]
        return (counted >= DAY_NS).fill_null(False)
    if cmap.ts_unit == "datetime":
        hour = clock.cast(pl.String).str.strip_chars().str.extract(HOUR, 1).cast(pl.Int64, strict=False)
        return hour.is_between(24, 47).fill_null(False)
    return pl.lit(False)


def within_day(time: pl.Expr) -> pl.Expr:
    """A time of day's text with an hour past 24 brought into the day (`25:30:00` -> `01:30:00`): the day after
    is added once it is read (`past_day_end`)."""
    text = time.cast(pl.String).str.strip_chars()
    hour = text.str.extract(HOUR, 1).cast(pl.Int64, strict=False)
    wrapped = pl.concat_str([(hour - 24).cast(pl.String).str.zfill(2), text.str.replace(HOUR, ":")])
    return pl.when(hour.is_between(24, 47)).then(wrapped).otherwise(text)


def joined_within_day(cmap: ColumnMap) -> pl.Expr:
    """A DATE+TIME map's columns joined as text (as `local_times.time_column` joins them), a time past 24:00 brought
    into the day (`within_day`)."""
    date, time = cmap.ts_columns
    return pl.concat_str([pl.col(date).cast(pl.String).str.strip_chars(), within_day(pl.col(time))], separator=" ")
