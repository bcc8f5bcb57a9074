"""A night session written as times of day beside one date (`--date file_name`, `--date 2024-04-04`): Osaka's
16:30 to 06:00, exported as `NK225M2406_night_20240404.csv`. The date is the session's trading date, the day it
opens: its rows after midnight are the next calendar day's (review375 #2: they were put on the date itself, before
the 16:30 open, and the session replayed sorted, its morning first, with a note blaming the file's order).

Which rows are after midnight: with an `hours` window across midnight on the file's clock (`16:30-06:00`,
`16:30-30:00`), those before its end; else those after the time of day wraps, per stream in file order: a step
back of WRAP_HOURS or more (23:59 to 00:00) starts the next day (a second wrap the day after that). A file
written newest first never steps back so far (its clock runs back a little at a time) and is read as before.
The rows are found by one pass over the file, so the replay's own query stays a plain per-row one."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import polars as pl

from connectors.column_map import ColumnMap
from connectors.hours_window import Hours
from connectors.map_vocabulary import CLOCK_DIGIT_UNITS
from connectors.row_exprs import ROW

DAY_NS = 86_400 * 10**9
WRAP_HOURS = 12  # a step back this long is the clock passing midnight, not rows a little out of order
WRAP_NS = WRAP_HOURS * 3600 * 10**9


def nights_on_next_day(path: Path, cmap: ColumnMap, rows: pl.LazyFrame, ts: pl.Expr, wall: pl.Expr | None,
                       stream: pl.Expr, where: Callable[[int], str]) -> tuple[pl.Expr, list[str]]:
    """`ts` with the rows after midnight of a one-date file of times of day read on the next day, and the note
    that says so; `ts` unchanged (no note) for any other file. `wall`: the naive wall-clock times in the map's tz
    as int ns (None: no tz, `ts` is that clock as UTC's); `stream`: each row's stream as the replay reads it;
    `where`: a row number as the user finds it in the file (`line 242`)."""
    if cmap.date is None or len(cmap.ts_columns) != 1 or cmap.ts_unit not in ("datetime", *CLOCK_DIGIT_UNITS):
        return ts, []
    clock = (ts if wall is None else wall) % DAY_NS  # the time of day on the file's clock
    night_end = _night_end(cmap)
    if night_end is not None:
        days = (clock < night_end).cast(pl.Int64).fill_null(0)
        why = (f"before {_clock_text(night_end)}, the end of the hours window across midnight "
               f"({cmap.hours})")
    else:
        days, why = _wraps(rows, clock, stream)
        if days is None:
            return ts, []
    moved, first = rows.select((days > 0).sum(), pl.col(ROW).filter(days > 0).first()).collect().row(0)
    if not moved:
        return ts, []
    if wall is None:
        later = ts + days * DAY_NS
    else:  # the next day's wall clock in the zone: its own UTC offset (a summer-time change overnight)
        later = (wall + days * DAY_NS).cast(pl.Datetime("ns")).dt.replace_time_zone(
            cmap.tz, ambiguous="earliest", non_existent="null").dt.epoch("ns")
    ts = pl.when(days > 0).then(later).otherwise(ts).alias("_ts")
    return ts, [f"{path.name}: its times of day run past midnight, so its date {cmap.date} is the day the session "
                f"opens: {moved} row(s) {why}, the first at {where(first)}, are read on the next calendar "
                f"day (a date written for the morning instead, as an exchange's trade date is: give --date the day "
                f"before)"]


def _night_end(cmap: ColumnMap) -> int | None:
    """The end, in ns of the day, of the map's `hours` window across midnight on the file's own clock (the map's
    tz, or none named); None without one."""
    if cmap.hours is None:
        return None
    hours = Hours.parse(cmap.hours)
    if hours.zone not in (None, cmap.tz):  # a window on another clock says nothing of this file's midnight
        return None
    ends = [end for start, end in hours.windows if start > end]
    return max(ends) * 10**9 if ends else None


def _wraps(rows: pl.LazyFrame, clock: pl.Expr, stream: pl.Expr) -> tuple[pl.Expr | None, str]:
    """Per row, how many times its stream's time of day wrapped past midnight before it, in file order (the steps
    back of WRAP_HOURS or more), as an expression of the row number; None when no stream's clock wraps."""
    scan = rows.select(pl.col(ROW), stream.cast(pl.String).alias("_stream"), clock.alias("_clock"))
    back = (pl.col("_clock").forward_fill().shift(1) - pl.col("_clock") >= WRAP_NS).fill_null(False)
    wraps = scan.with_columns(_back=back.over("_stream")).filter("_back").select(
        "_stream", ROW, pl.col(ROW).cum_count().over("_stream").alias("_nth")).collect()
    if not wraps.height:
        return None, ""
    days = pl.lit(0, dtype=pl.Int64)
    for nth in range(1, int(wraps["_nth"].max()) + 1):  # (a file of one night: one wrap a stream)
        at = wraps.filter(pl.col("_nth") == nth)
        from_row = stream.cast(pl.String).replace_strict(at["_stream"], at[ROW], default=None, return_dtype=pl.Int64)
        days = days + (pl.col(ROW) >= from_row).fill_null(False).cast(pl.Int64)
    return days, "after the clock wraps (23:59 to 00:00)"


def _clock_text(ns: int) -> str:
    seconds = ns // 10**9
    return f"{seconds // 3600 % 24:02d}:{seconds // 60 % 60:02d}" + (f":{seconds % 60:02d}" if seconds % 60 else "")
