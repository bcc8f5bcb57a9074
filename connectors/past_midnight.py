"""Times of day written past 24:00: an exchange whose session crosses midnight may count a night session's times
on from the midnight it opened after (JPX's night session to `30:00`, `25:30:00` for 01:30 the next morning; a
count after midnight of 91,800,000 ms). Beside a calendar date such a time is on the day after; beside a trade
date it is on the trade date itself, counted from the midnight before it (connectors/session_dates.py).
"""

from __future__ import annotations

import re

import polars as pl

from connectors.column_map import ColumnMap
from connectors.map_vocabulary import COUNT_UNITS, DAY_CLOCK_UNITS

DAY_NS = 86_400 * 10**9
HOUR = r"^(\d{1,2}):"  # a time of day's hour as text writes it: `25:30:00`, `9:30`


TRADE_DATE_NAMES = frozenset({"tradedate", "tradingday", "tradingdate", "sessiondate"})


def names_a_trade_date(column: str) -> bool:
    """Whether a column's name says it holds exchange trade (session) dates: `Trade Date`, `TradeDate`, `trade_date`,
    `tradingDay` (Barchart's), `session_date`."""
    return re.sub(r"[^a-z]", "", column.lower()) in TRADE_DATE_NAMES


def counted_past_midnight(cmap: ColumnMap) -> bool:
    """Whether a map's times of day may run past 24:00: beside an exchange trade date (a column so named, or the
    map's `trade_date`), whose night session is counted on from the midnight before it, or alone with the day of the
    file's one session (`date`: IQFeed's Level 1 captured from the evening counts on into the next day). Beside a
    calendar date, a day's count ends at 24:00: a larger one is another reading of the column (review390 #2: TAQ's
    clock digits 93000025654309 as ns after midnight were 25.8 h, read as 06:50 of the next day)."""
    date = cmap.ts_columns[0]
    return len(cmap.ts_columns) == 1 or cmap.trade_date == date or names_a_trade_date(date)


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
