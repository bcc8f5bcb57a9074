"""An exchange trade (session) date joined to a time of day: a futures export's `Trade Date` carries the date of
the session a row belongs to, and a session that opens in the evening (17:00 CT at CME, 17:00 JST at JPX's night
session) carries the NEXT business day's date. Its evening rows, joined as they are written, land a day late.

Read right here: when the date column's name says it is a trade date (`Trade Date`, `TradeDate`, `tradingDay`,
`session_date`) and the file's times of day run through midnight and pause once in the afternoon or evening (the
daily break before the evening open), the rows at or after that open are read on the calendar day before their
trade date, whatever the file's row order (sorted by trade date then time, or evening first). A file whose dated
evening rows fall on a Saturday or a Sunday holds calendar dates under that name (no trade date is a weekend's at
these exchanges): it is read as written, said in a note. An evening whose trade date skips a holiday mid-week (a
Wednesday evening carrying Friday's date) is a day late still, and a Friday night session carrying Monday's
date (JPX's) is read on the Sunday: only the exchange's calendar knows them (docs/replay.md#trade-dates). The open
is found over the whole file (one for all its streams), and the note names it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import polars as pl

from connectors.column_map import ColumnMap

MINUTE_NS, DAY_NS = 60 * 10**9, 86_400 * 10**9
TRADE_DATE_NAMES = frozenset({"tradedate", "tradingday", "tradingdate", "sessiondate"})
BREAK_MINUTES = 30  # the least pause of the times of day taken for a daily break (CME's is 60 min, JPX's 75)
EVENING_FROM_MINUTE = 12 * 60  # the break before the evening open starts after noon (JPX's 06:00-08:45 is not it)
SATURDAY, SUNDAY = 5, 6  # weekdays, Monday 0; epoch day 0 (1970-01-01) was a Thursday (3)


class SessionOpen(NamedTuple):
    """The evening open found in a trade-date file's times of day, and the break before it, in minutes."""
    open_minute: int
    break_from: int


def names_a_trade_date(column: str) -> bool:
    """Whether a column's name says it holds exchange trade (session) dates: `Trade Date`, `TradeDate`, `trade_date`,
    `tradingDay` (Barchart's), `session_date`."""
    return re.sub(r"[^a-z]", "", column.lower()) in TRADE_DATE_NAMES


def session_open(minutes: list[int]) -> SessionOpen | None:
    """The evening open of sessions that run through midnight, from the distinct minutes of the day a file's rows
    are at (sorted): the end of the longest pause of at least BREAK_MINUTES in the afternoon or evening (a sparse
    day session's gaps before noon are not it), when the times run through midnight (no such pause across it).
    None: the file's sessions do not cross midnight."""
    if len(minutes) < 2 or minutes[0] + 24 * 60 - minutes[-1] >= BREAK_MINUTES:
        return None
    pauses = [(after - before, before, after) for before, after in zip(minutes, minutes[1:])
              if after - before >= BREAK_MINUTES and before >= EVENING_FROM_MINUTE]
    if not pauses:
        return None
    _, before, after = max(pauses)
    return SessionOpen(after, before)


def clock_text(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def trade_date_evenings(path: Path, cmap: ColumnMap, rows: pl.LazyFrame, ts: pl.Expr,
                        wall: pl.Expr | None) -> tuple[pl.Expr, list[str], bool]:
    """`ts` (a `_ts` expression) with the evening rows of a trade-date file read on the calendar day before their
    trade date, the note that says so, and whether they were; `ts` unchanged otherwise. `wall`: the naive
    wall-clock times in the map's tz as int ns (None: the times are UTC's, `ts` itself)."""
    if (len(cmap.ts_columns) != 2 or cmap.ts_unit != "datetime" or cmap.utc_offset is not None
            or not names_a_trade_date(cmap.ts_columns[0])):
        return ts, [], False
    clock = ts if wall is None else wall
    minute = (clock % DAY_NS) // MINUTE_NS
    found = rows.select(minute.alias("_minute")).drop_nulls().unique().sort("_minute").collect()
    opened = session_open(found["_minute"].to_list())
    if opened is None:
        return ts, [], False
    date, time, at = cmap.ts_columns[0], cmap.ts_columns[1], clock_text(opened.open_minute)
    evening = minute >= opened.open_minute
    weekday = (clock // DAY_NS + 3) % 7
    weekend, count = rows.select((evening & weekday.is_in([SATURDAY, SUNDAY])).sum(), evening.sum().alias("n")
                                 ).collect().row(0)
    if weekend:
        return ts, [f"{path.name}: column {date!r} is named as a trade date, but {weekend} of its rows at or after "
                    f"{at} (the evening open, after the pause from {clock_text(opened.break_from)}) fall on a "
                    f"Saturday or a Sunday, which is no trade date: read as calendar dates, as written"], False
    if wall is None:
        earlier = ts - DAY_NS
    else:  # the day before's wall clock, in the zone: its own UTC offset (a summer-time change between the two)
        earlier = (wall - DAY_NS).cast(pl.Datetime("ns")).dt.replace_time_zone(
            cmap.tz, ambiguous="earliest", non_existent="null").dt.epoch("ns")
    shifted = pl.when(evening).then(earlier).otherwise(ts).alias("_ts")
    return shifted, [f"{path.name}: column {date!r} is an exchange trade (session) date: its {count} row(s) at or "
                     f"after {at} in {time!r} (the evening open, after the daily pause from "
                     f"{clock_text(opened.break_from)}) are its evening session, read on the calendar day before "
                     f"their trade date (docs/replay.md#trade-dates)"], True
