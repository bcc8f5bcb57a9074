"""An exchange trade (session) date joined to a time of day: a futures export's `Trade Date` carries the date of
the session a row belongs to, and a session that opens in the evening (17:00 CT at CME, 17:00 JST at JPX's night
session) carries the NEXT business day's date. Its evening rows, joined as they are written, land a day late.

Read right here: when the date column's name says it is a trade date (`Trade Date`, `TradeDate`, `tradingDay`,
`session_date`), or the map's `trade_date` key does, and the file's times of day run through midnight and pause
once in the afternoon or evening (the daily break before the evening open), the rows at or after that open are
read on the calendar day before their trade date, whatever the file's row order (sorted by trade date then time,
or evening first). A file whose dated evening rows fall on a Saturday or a Sunday holds calendar dates under that
name (no trade date is a weekend's at these exchanges): it is read as written, said in a note. An evening whose
trade date skips a holiday mid-week (a Wednesday evening carrying Friday's date) is told by the file's order where it
is written as it ran: its session's rows pass two midnights or more, each read back from the trade date by the
midnights still to come (the Wednesday evening on the Wednesday); sorted by time of day, only the exchange's
calendar knows it, and it is read a day late. Such a session is left out of the search for the open, which its
hours may cover. Read in Asia/Tokyo, Asia/Seoul or Asia/Singapore (JPX, KRX, SGX: no Sunday session,
a night session booked to the next business day), an evening is the business day before:
a Friday night session carrying Monday's date is read on the Friday, its rows after midnight (before the night's
morning close) on the Saturday; elsewhere a Monday's evening is the Sunday's, as CME's week opens
(docs/replay.md#trade-dates). The open is found per stream, from its own times (products of one file may pause at
different hours), and the note names it.

A date column under the bare name `Date` is read so too when its rows say it: within each date (and stream), in
file order, the evening rows come first and the clock wraps once to the morning, which no calendar date does (its
times ascend within the date). Sorted by date then time of day, a trade date cannot be told from a calendar date:
read as written (connectors/misread_times.py cautions where the file's order hints at it)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import polars as pl

from connectors.column_map import ColumnMap
from connectors.event_time import after_midnight, row_day
from connectors.file_scans import SAMPLE_ROWS
from connectors.map_vocabulary import COUNT_UNITS, DAY_CLOCK_UNITS
from connectors.past_midnight import names_a_trade_date, past_day_end
from engine.quoting import quoted

MINUTE_NS, DAY_NS = 60 * 10**9, 86_400 * 10**9
# a step back of more than this between two rows of one trade date (and stream), in file order, is its clock passing
# midnight: rows a little out of order step back by less
MIDNIGHT_STEP_NS = DAY_NS // 2
BREAK_MINUTES = 30  # the least pause of the times of day taken for a daily break (CME's is 60 min, JPX's 75)
EVENING_FROM_MINUTE = 12 * 60  # the break before the evening open starts after noon (JPX's 06:00-08:45 is not it)
MONDAY, SATURDAY, SUNDAY = 0, 5, 6  # weekdays, Monday 0; epoch day 0 (1970-01-01) was a Thursday (3)
# zones of exchanges without a Sunday session, whose night session belongs to the NEXT business day: Monday's trade
# date's night session opens on the Friday before (JPX/OSE's 17:00 JST, its rows after midnight on the Saturday).
# KRX's own night market (from June 2025, 18:00-06:00 KST) is the next trading day's, settled with it, and SGX's
# "T+1 session" (from 16:30-18:15 SGT to 05:15 or later) is booked to the next business day by name: both write
# the next business day as a night row's trade date, a Friday night's the Monday. (Eurex's KOSPI 200 daily futures,
# before KRX's own night market, carry Eurex's own date: no such file is known here by its zone.)
# CME's week opens on Sunday evening, which is Monday's trade date's evening: the day before, elsewhere
NIGHT_SESSIONS = {"Asia/Tokyo": "JPX's night session", "Japan": "JPX's night session",
                  "Asia/Seoul": "KRX's night session", "ROK": "KRX's night session",
                  "Asia/Singapore": "SGX's T+1 session", "Singapore": "SGX's T+1 session"}
NIGHT_SESSION_ZONES = frozenset(NIGHT_SESSIONS)
# SGX pauses 20-25 min between its T and T+1 sessions (Nikkei 225 14:30-14:55, FTSE China A50 16:35-17:00 SGT,
# USD/CNH 19:55-20:15): shorter than BREAK_MINUTES, so its zone takes a shorter least pause
LEAST_BREAK_MINUTES = {"Asia/Singapore": 15, "Singapore": 15}


class SessionOpen(NamedTuple):
    """The evening open found in a trade-date file's times of day, and the break before it, in minutes; the night
    session's morning close where the times pause before noon (JPX's 06:00), else None."""
    open_minute: int
    break_from: int
    night_close: int | None = None


def session_open(minutes: list[int], least_break: int = BREAK_MINUTES) -> SessionOpen | None:
    """The evening open of sessions that run through midnight, from the distinct minutes of the day a file's rows
    are at (sorted): the end of the longest pause of at least BREAK_MINUTES in the afternoon or evening (a sparse
    day session's gaps before noon are not it), when the times run through midnight (no such pause across it); with
    no such pause, the longest that ends in the afternoon or evening: a file of night sessions alone (JPX's 17:00 to
    06:00, a CME evening's export) pauses from its morning close to its evening open. None: the file's sessions do
    not cross midnight. ``least_break``: the least pause taken for the daily break (LEAST_BREAK_MINUTES)."""
    if len(minutes) < 2 or minutes[0] + 24 * 60 - minutes[-1] >= least_break:
        return None
    gaps = [(after - before, before, after) for before, after in zip(minutes, minutes[1:])
            if after - before >= least_break]
    # a night session's file holds no day session: its one pause runs from the morning close to the evening open
    pauses = [gap for gap in gaps if gap[1] >= EVENING_FROM_MINUTE] or \
        [gap for gap in gaps if gap[2] >= EVENING_FROM_MINUTE]
    if not pauses:
        return None
    _, before, after = max(pauses)
    # the morning close: the pause before noon (JPX's 06:00-08:45), or, a file of night sessions alone, the one above
    mornings = [gap for gap in gaps if gap[2] < EVENING_FROM_MINUTE]
    close = before if before < EVENING_FROM_MINUTE else max(mornings)[1] if mornings else None
    return SessionOpen(after, before, close)


def clock_text(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


class StreamOpens(NamedTuple):
    """Each stream's evening open (none for a stream whose times do not run through midnight, when the file's
    times together show no open either)."""
    opens: dict[str, SessionOpen]
    streams: int  # the file's streams, with an open or not
    # where a stream too thin to show its own open took it: another stream's name, or the whole file's times
    lent: dict[str, str]

    def evening(self, stream: pl.Expr, minute: pl.Expr) -> pl.Expr:
        """Whether a row is at or after its stream's evening open (null, not true, for a stream without one)."""
        minutes = {opened.open_minute for opened in self.opens.values()}
        if len(minutes) == 1 and len(self.opens) == self.streams:  # one open for the whole file: no lookup
            return minute >= minutes.pop()
        keys = list(self.opens)
        return minute >= stream.replace_strict(keys, [self.opens[k].open_minute for k in keys], default=None,
                                               return_dtype=pl.Int64)

    def night_morning(self, stream: pl.Expr, minute: pl.Expr) -> pl.Expr:
        """Whether a row is after midnight and at or before its stream's night session's morning close (false without
        one)."""
        keys = [k for k, opened in self.opens.items() if opened.night_close is not None]
        if not keys:
            return pl.lit(False)
        close = stream.replace_strict(keys, [self.opens[k].night_close for k in keys], default=None,
                                      return_dtype=pl.Int64)
        return (minute <= close).fill_null(False)  # (the close: the last minute before the pause)

    def said(self, time: str) -> str:
        """The open(s) for a note: `17:00 in "Time" (the evening open, after the daily pause from 16:00)`, or each
        stream's, a few named; a stream's open taken from another is said borrowed, and from where."""
        by_open: dict[SessionOpen, list[str]] = {}
        for stream, opened in self.opens.items():
            by_open.setdefault(opened, []).append(stream)
        if len(by_open) == 1 and len(self.opens) == self.streams:
            opened, names = next(iter(by_open.items()))
            return (f"{clock_text(opened.open_minute)} in {quoted(time)} (the evening open, after the daily pause from "
                    f"{clock_text(opened.break_from)}{self._borrowed(names)})")
        each = "; ".join(f"{clock_text(o.open_minute)} for {', '.join(self._listed(names)[:3])}"
                         f"{', ...' if len(names) > 3 else ''} (after the pause from {clock_text(o.break_from)}"
                         f"{self._borrowed(names)})" for o, names in sorted(by_open.items())[:4])
        without = self.streams - len(self.opens)
        whose = "each stream's own" if not self.lent else "each stream's own, or one it borrowed"
        return (f"their stream's evening open in {quoted(time)} ({whose}, after its daily pause: {each}"
                f"{'; ...' if len(by_open) > 4 else ''}"
                f"{f'; {without} stream(s) whose times do not run through midnight: as written' if without else ''})")

    def _listed(self, names: list[str]) -> list[str]:
        """Streams of one open, those that show it themselves first."""
        return sorted(names, key=lambda name: (name in self.lent, name))

    def _borrowed(self, names: list[str]) -> str:
        """`; ESH7's borrowed from ESZ6` for the streams of `names` whose open is another's (a few named): listed
        beside the streams that show it, a borrowed open read as the stream's own."""
        lent = [name for name in self._listed(names) if name in self.lent]
        return "".join(f"; {name}'s borrowed from {self.lent[name]}" for name in lent[:3]) + \
            (f"; {len(lent) - 3} more borrowed" if len(lent) > 3 else "")


# a futures contract's name: its product root, a month code and the year's last one or two digits, maybe a venue
# after it (`ESM4`, `BRNQ24`, `6EZ4`, `CL Z4`, `ESU4.CME`); the root with the venue is the product's, whatever its month
_CONTRACT = re.compile(r"^([A-Z0-9][A-Z0-9]{0,3}) ?[FGHJKMNQUVXZ]\d{1,2}(\W.*)?$")


def product_of(stream: str) -> str | None:
    """A futures contract's product (root and venue: `ES` of `ESM4`, `ES.CME` of `ESU4.CME`), else None."""
    match = _CONTRACT.match(stream)
    return None if match is None else match.group(1) + (match.group(2) or "")


def stream_opens(rows: pl.LazyFrame, stream: pl.Expr, minute: pl.Expr,
                 least_break: int = BREAK_MINUTES) -> StreamOpens:
    """Each stream's evening open, from its own times of day: products of one file may pause at different hours
    (CME's equity index futures at 16:00 CT, its grains at 13:20; two venues), and one stream's rows in another's
    pause would hide it, were the open found over the whole file. A stream too thin to show its own (a back month's
    few trades) takes its product's (another month of the same root and venue), else the one found over the whole
    file, as every stream did before; a contract with neither (two products, each trading in the other's pause,
    show no file-wide open) takes the earliest open of the file's streams."""
    found = (rows.select(stream.alias("_stream"), minute.alias("_minute")).drop_nulls().unique()
             .group_by("_stream").agg(pl.col("_minute").sort()).collect())
    whole = session_open(sorted({m for minutes in found["_minute"] for m in minutes}), least_break)
    own = {name: opened for name, minutes in found.iter_rows()
           if (opened := session_open(minutes, least_break)) is not None}
    by_product: dict[str, tuple[SessionOpen, str]] = {}  # the earliest open of each product, and whose it is
    for name, opened in sorted(own.items(), key=lambda item: item[1]):
        by_product.setdefault(product_of(str(name)) or str(name), (opened, str(name)))
    earliest = min(((opened, str(name)) for name, opened in own.items()), default=None)
    whole_lent = (whole, "the whole file's times") if whole is not None else None
    opens, lent = dict(own), {}
    for name in found["_stream"]:
        product = product_of(str(name))
        if name not in own and (took := by_product.get(product or "") or whole_lent or
                                (earliest if product is not None else None)) is not None:
            opens[name], lent[name] = took
    return StreamOpens(opens, found.height, lent)


class EveningsMoved(NamedTuple):
    """What moving a trade date's evening rows to the day before did to the file's order: `back_rows`, the rows
    earlier than the row before them that are a moved evening's first (a file written by trade date, day session
    first); `others`: the streams of the file's other such rows (a thin back month written out of place), which the
    move did not cause. The not-in-time-order note blames each on its own cause (connectors/row_order.py)."""
    back_rows: int
    others: list[str]


def trade_date_evenings(path: Path, cmap: ColumnMap, rows: pl.LazyFrame, ts: pl.Expr, wall: pl.Expr | None,
                        stream: pl.Expr) -> tuple[pl.Expr, list[str], EveningsMoved | None]:
    """`ts` (a `_ts` expression) with the evening rows of a trade-date file read on the calendar day before their
    trade date, the note that says so, and which rows out of time order that made (`EveningsMoved`; None: not
    moved); `ts` unchanged otherwise. `wall`: the naive
    wall-clock times in the map's tz as int ns (None: the times are UTC's, `ts` itself); `stream`: each row's
    stream name as the replay reads it (a literal for a file of one stream), whose own times find its open."""
    counted = cmap.ts_unit in COUNT_UNITS  # a count after midnight (`ms_after_midnight`): elapsed time, no clock
    if len(cmap.ts_columns) != 2 or cmap.ts_unit not in ("datetime", *COUNT_UNITS) or cmap.utc_offset is not None:
        return ts, [], None
    # a map's `trade_date: COLUMN` says what the name `Trade Date` says (ColumnMap holds it to ts's date column)
    by_name = names_a_trade_date(cmap.ts_columns[0])
    named = by_name or cmap.trade_date == cmap.ts_columns[0]
    bare = names_a_bare_date(cmap.ts_columns[0]) and not counted  # (a count's order is not told, only its name)
    if not named and not bare:
        return ts, [], None
    # the date's own clock (its digits as UTC's): a count's from the date's midnight, past 24:00 as written
    clock = counted_clock(cmap) if counted else ts if wall is None else wall
    past = past_day_end(cmap)  # `25:30:00` beside a trade date: counted from the midnight before it, as evenings
    minute = (clock % DAY_NS) // MINUTE_NS
    date, time = cmap.ts_columns
    # a bare `Date` (TAQ's, every bar export's) is told by the file's first rows before the whole file is read
    sample = rows.head(SAMPLE_ROWS) if bare else rows
    session = [stream, pl.col(date)]
    long = LongSessions.of(sample, clock, session)
    least_break = LEAST_BREAK_MINUTES.get(cmap.tz or "", BREAK_MINUTES)
    # a session past two midnights (a holiday's) may trade through the daily pause: the open is found without it
    opens = stream_opens(long.others(sample), stream, minute, least_break)
    if not opens.opens:
        return ts, [], None
    evening = opens.evening(stream, minute) | past
    if bare:
        if not wraps_at_the_open(sample, clock, evening, session):
            return ts, [], None  # a calendar date (times ascending within each date), or nothing tells
        long = LongSessions.of(rows, clock, session)  # a trade date: every stream's open and session, from all rows
        opens = stream_opens(long.others(rows), stream, minute, least_break)
        evening = opens.evening(stream, minute) | past
    at = opens.said(time)
    weekday = (clock // DAY_NS - past.cast(pl.Int64) + 3) % 7  # the date written's: a row past 24:00 is on it
    weekend, count, past_rows = rows.select((evening & weekday.is_in([SATURDAY, SUNDAY])).sum(),
                                            (evening & ~long.rows).sum().alias("n"),
                                            past.sum().alias("past")).collect().row(0)
    if weekend:
        said = "named" if by_name else "mapped (trade_date)" if named else "ordered"
        return ts, [f"{path.name}: column {quoted(date)} is {said} as a trade date, but {weekend} of its rows at or "
                    f"after {at} fall on a Saturday or a Sunday, which is no trade date: read as calendar dates, as "
                    f"written"], None
    night = cmap.tz in NIGHT_SESSION_ZONES  # Monday's night session on the Friday before (JPX's)
    days_back = long.days_back(
        night_days_back(opens, stream, minute, evening, weekday) if night else evening.cast(pl.Int64))
    if counted:  # from the midnight before, at that day's offset
        day, counts = (pl.col(c) for c in cmap.ts_columns)
        earlier = after_midnight(cmap, row_day(day) - pl.duration(days=days_back),
                                 counts.cast(pl.Float64, strict=False))
    elif wall is None:
        earlier = ts - days_back * DAY_NS
    else:  # the day before's wall clock, in the zone: its own UTC offset (a summer-time change between the two)
        earlier = (wall - days_back * DAY_NS).cast(pl.Datetime("ns")).dt.replace_time_zone(
            cmap.tz, ambiguous="earliest", non_existent="null").dt.epoch("ns")
    moving = (days_back > 0).fill_null(False)
    shifted = pl.when(moving).then(earlier).otherwise(ts).alias("_ts")
    # a step back onto an evening's first row is the move's (day session written first); any other is not
    back = (shifted.forward_fill().diff() < 0).fill_null(False)
    moved = back & moving & ~moving.shift(1).fill_null(False)
    moved_back, others, mondays = rows.select(
        moved.sum().alias("moved"), stream.cast(pl.String).filter(back & ~moved).unique(maintain_order=True).head(3)
        .implode().alias("others"), (evening & (weekday == MONDAY)).sum().alias("mondays")).collect().row(0)
    why = ("is an exchange trade (session) date" if named else
           "holds exchange trade (session) dates, not calendar dates: within a date its times run from the evening "
           "open through midnight to the day session, in file order")
    past_said = f" ({past_rows} of them written past 24:00, counted from that day's midnight)" if past_rows else ""
    if night:
        read_on = (f"read on the business day before their trade date: a Monday's night session on the Friday "
                   f"before, its rows after midnight on the Saturday ({cmap.tz}: {NIGHT_SESSIONS[cmap.tz]} belongs "
                   f"to the next business day; holidays are not known: a session before one is read late)")
    else:
        monday = (f"; {mondays} of them carry a Monday's date and are read on the Sunday, as CME's week opens; an "
                  f"exchange whose Monday night session is the Friday's is read so in its zone: --tz Asia/Tokyo "
                  f"(JPX), Asia/Seoul (KRX), Asia/Singapore (SGX)"
                  if mondays else "")
        read_on = f"read on the calendar day before their trade date{monday}"
    return shifted, [f"{path.name}: column {quoted(date)} {why}: its {count} row(s) at or after {at} are its evening "
                     f"session{past_said}, {read_on}{long.said()} (docs/replay.md#trade-dates)"], \
        EveningsMoved(int(moved_back), list(others))


class LongSessions(NamedTuple):
    """The sessions of a trade-date file whose rows, in file order, pass two midnights or more: a trade date that
    skips an exchange holiday, written as it ran (CME's Wednesday evening opening Friday's trade date over 4 July
    or Thanksgiving, through the Thursday, halted or not). Each row of one is read back from its trade date by the
    midnights its session passes after it: the Wednesday evening on the Wednesday (two before the Friday), the
    Thursday on the Thursday, whatever the daily open says. `rows`: whether a row is in one; `dates`: their trade
    dates, in file order (a few said)."""
    rows: pl.Expr
    passed: pl.Expr  # the midnights its session passed before a row
    midnights: pl.Expr  # the midnights its session passes in all
    dates: list[str]

    @staticmethod
    def of(rows: pl.LazyFrame, clock: pl.Expr, session: list[pl.Expr]) -> LongSessions:
        """Those of ``rows``, a session being one trade date of one stream (``session``), its rows' ``clock`` the
        date's wall clock (a step back of over half a day between two of them is a midnight passed)."""
        midnight = (clock.diff() < -MIDNIGHT_STEP_NS).fill_null(False)
        midnights = midnight.sum().over(session)
        dates = rows.select(session[-1].filter(midnights >= 2).unique(maintain_order=True).head(4)
                            .cast(pl.String)).collect().to_series().to_list()
        return LongSessions((midnights >= 2).fill_null(False) if dates else pl.lit(False),
                            midnight.cast(pl.Int64).cum_sum().over(session), midnights.cast(pl.Int64), dates)

    def others(self, rows: pl.LazyFrame) -> pl.LazyFrame:
        """``rows`` without those of long sessions (all of them, where there are none)."""
        return rows.filter(~self.rows) if self.dates else rows

    def days_back(self, by_open: pl.Expr) -> pl.Expr:
        """Days before its trade date each row is at: a long session's by the midnights still to come, any other
        row's as its open says (``by_open``)."""
        return pl.when(self.rows).then(self.midnights - self.passed).otherwise(by_open) if self.dates else by_open

    def said(self) -> str:
        if not self.dates:
            return ""
        dates = ", ".join(self.dates[:3]) + (", ..." if len(self.dates) > 3 else "")
        return (f"; the session(s) of trade date {dates} pass two midnights or more in file order (a trade date that "
                f"skips an exchange holiday): their rows are read on the days they ran, back from the trade date by "
                f"the midnights still to come, their first evening on the day it opened")


def night_days_back(opens: StreamOpens, stream: pl.Expr, minute: pl.Expr, evening: pl.Expr,
                    weekday: pl.Expr) -> pl.Expr:
    """Days before its trade date a row of an exchange without a Sunday session is at: an evening's row the
    business day before (3 days from a Monday, else 1), a Monday night session's rows after midnight the Saturday
    (2 days); others 0."""
    monday = weekday == MONDAY
    morning = opens.night_morning(stream, minute) & ~evening.fill_null(False)
    return (pl.when(evening & monday).then(3).when(evening).then(1).when(morning & monday).then(2)
            .otherwise(0).cast(pl.Int64))


def counted_clock(cmap: ColumnMap) -> pl.Expr:
    """A DATE+COUNT map's rows as the date's midnight plus the count, int ns (no zone: a clock's digits), so
    that their minute of the day and their weekday are the date's own."""
    day, count = (pl.col(c) for c in cmap.ts_columns)
    midnight = row_day(day).cast(pl.Datetime("ns")).dt.epoch("ns")
    return midnight + (count.cast(pl.Float64, strict=False) * DAY_CLOCK_UNITS[cmap.ts_unit]).round().cast(pl.Int64)


def names_a_bare_date(column: str) -> bool:
    """`Date`, `date`: a name that says nothing of which date, calendar or trade."""
    return re.sub(r"[^a-z]", "", column.lower()) == "date"


def wraps_at_the_open(rows: pl.LazyFrame, clock: pl.Expr, evening: pl.Expr, group: list[pl.Expr]) -> bool:
    """Whether a date column's rows, in file order, are a trade date's: within one date (and stream) the evening
    rows come first and the clock wraps once to the morning (DataMine's order, or by date then session time), at
    least once in the file, and never steps back otherwise nor goes from a morning row to an evening one (a
    calendar date's order, times ascending within it; a newest-first export steps back throughout), among the
    streams that have an open (a thin stream with none is no evidence either way). `rows`: the
    file's first SAMPLE_ROWS (some days of a busy future): windows over a whole file cost more than reading it."""
    before = evening.shift(1).over(group)
    # a stream without an open (too thin to show one, and none to take) tells nothing: its steps back are not counted
    back = ((clock.diff().over(group) < 0) & evening.is_not_null()).sum()
    wraps, steps, unwraps = rows.select(
        (before & ~evening).sum().alias("wraps"), back.alias("steps"), (~before & evening).sum().alias("unwraps"),
    ).collect().row(0)
    return bool(wraps) and wraps == steps and not unwraps
