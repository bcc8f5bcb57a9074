"""Times a file's plan reads that look misread, said as cautions (repeated at a run's end) by every command that
reads files: every tick at one time, every tick on a whole minute with several of a stream's to each (a clock a
spreadsheet cut to the minute), or times before 1980 (a unit misread: dates read as epoch seconds put every
tick in 1970), and an exchange trade date joined to a time of day as if it were the calendar date (the evening
session from 17:00 CT carries the next business day's date, so its rows sort a day late)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.map_vocabulary import DAY_CLOCK_UNITS, EXCEL_DAYS, UNITS
from connectors.past_midnight import names_a_trade_date
from connectors.ticks import utc_text
from engine.quoting import quoted

EPOCH_1980_NS = 315_532_800 * 10**9
HOUR_NS, DAY_NS = 3_600 * 10**9, 86_400 * 10**9
SESSION_DATE_SLACK_NS = 10**9  # a step back of 24 h and up to a second: a trade date's, not two sources'
MINUTE_NS = 60 * 10**9
# a tick file cut to the minute (a spreadsheet's `dd.mm.yyyy hh:mm` display format saved back): every time on a
# whole minute, at least this many rows, and this share of them at the stream and time of the row before (a bar
# file, a stream's row a minute, has none)
MINUTE_ROWS = 20
MINUTE_SHARED = 0.05


def time_facts(cmap: ColumnMap, factor: int) -> list[pl.Expr]:
    """What the plan's one pass over the file (its `_ts` in units of `factor` ns, `_stream`, file order) counts for
    `time_cautions`: its timed rows, and, when a date column is joined to the time, the steps back of 12 to 24 h
    between rows of one date (a trade date's evening rows before the next day session's), those of them inside one
    stream, and the steps back of over an hour; the rows on a whole minute, and those at the stream and time of the
    row before."""
    ts = pl.col("_ts")
    facts = [ts.is_not_null().sum().alias("timed_rows")]
    if factor < MINUTE_NS and MINUTE_NS % factor == 0:  # (a count of days or minutes is on whole minutes anyway)
        repeats = (ts.diff() == 0) & pl.col("_stream").eq_missing(pl.col("_stream").shift(1))
        facts += [(ts % (MINUTE_NS // factor) == 0).sum().alias("minute_rows"), repeats.sum().alias("repeat_rows")]
    if len(cmap.ts_columns) == 2:
        back = -ts.diff()
        same_date = pl.col(cmap.ts_columns[0]) == pl.col(cmap.ts_columns[0]).shift(1)
        day_late = (back > 12 * HOUR_NS // factor) & (back <= (DAY_NS + SESSION_DATE_SLACK_NS) // factor) & same_date
        same_stream = pl.col("_stream") == pl.col("_stream").shift(1)
        facts += [day_late.sum().alias("day_late_steps"), (back > HOUR_NS // factor).sum().alias("long_back_steps"),
                  (day_late & same_stream).sum().alias("day_late_in_a_stream")]
    return facts


def _reading(cmap: ColumnMap) -> str:
    """How the time column was read, for a caution: its column(s) and unit."""
    unit = (f"{cmap.ts_unit} since the epoch" if cmap.ts_unit in UNITS else
            f"{cmap.ts_unit} of each row's day in {quoted(cmap.ts_columns[0])}" if cmap.ts_unit in DAY_CLOCK_UNITS else
            "spreadsheet serial dates" if cmap.ts_unit == EXCEL_DAYS else cmap.ts_unit)
    return f"column {quoted(cmap.ts)} read as {unit}"


def time_cautions(path: Path, cmap: ColumnMap, facts: dict[str, Any], first_ns: Any, last_ns: Any,
                  unit_said: bool) -> list[str]:
    """Cautions on a file's times (`first_ns`, `last_ns`: its earliest and latest, in ns): all one time over
    several rows of a stream, every time on a whole minute with ticks sharing them, or times before 1980 (unless
    `unit_said`: a note already names the unit that reads them). One row per stream at one time is a snapshot of a
    market (Polygon's grouped daily bars, a close file of 300 tickers), not a misread time (review sp28)."""
    if type(first_ns) is not int or type(last_ns) is not int:
        return []
    out = []
    if first_ns == last_ns and facts["timed_rows"] > max(1, facts.get("streams") or 0):
        out.append(Caution(f"{path.name}: every one of its {facts['timed_rows']} timed rows has the same time, "
                           f"{utc_text(first_ns)} ({_reading(cmap)}): if its ticks did not all happen at once, the "
                           f"time is misread (another column, or --ts-unit; docs/replay.md)"))
    timed, shared = facts["timed_rows"], facts.get("repeat_rows") or 0
    if facts.get("minute_rows") == timed >= MINUTE_ROWS and shared >= MINUTE_SHARED * timed:
        out.append(Caution(f"{path.name}: every one of its {timed:,} timed rows is on a whole minute, {shared:,} of "
                           f"them at the minute of the row of their stream before ({_reading(cmap)}): a clock "
                           f"cut to the minute, as a spreadsheet saves times shown as `dd.mm.yyyy hh:mm` "
                           f"(its seconds and their fractions dropped)? A minute's ticks then replay at one time, "
                           f"their gaps read as none or a minute, where the model and `interval` triggers read "
                           f"tick timing: export the times with their seconds (in Excel, format the cells as "
                           f"`dd.mm.yyyy hh:mm:ss,000` before saving; docs/replay.md)"))
    if first_ns < EPOCH_1980_NS and not unit_said:
        out.append(Caution(f"{path.name}: its times start at {utc_text(first_ns)}, before 1980 ({_reading(cmap)}): "
                           f"unless the data is that old, the time's column or unit is misread (dates or times of "
                           f"day read as epoch units?): --columns ts=... --ts-unit ... (docs/replay.md)"))
    return out


def trade_date_caution(path: Path, cmap: ColumnMap, facts: dict[str, Any]) -> list[str]:
    """A caution when a date column joined to a time of day steps back 12 to 24 h within one date, and all the
    file's steps back of over an hour are such: the date is an exchange trade (session) date, whose evening rows
    carry the next day's date and sort a day late, not the calendar date. Not when every such step goes to
    another stream: a file of a round-the-clock market sorted by stream steps back from 23:59 to 00:00 there. A
    column already named or mapped as a trade date is not told to be named so (review411 #13): its evening rows
    were not told apart (no daily pause before an evening open)."""
    steps = facts.get("day_late_steps") or 0
    if not steps or steps != facts.get("long_back_steps") or not facts.get("day_late_in_a_stream"):
        return []
    date, clock = cmap.ts_columns
    give = "Give a calendar date column, or a full timestamp column (--columns ts=...; docs/replay.md#trade-dates)"
    fix = (f"Its name or the map says it is a trade date, but its times of day show no daily pause (30 min or more, "
           f"in the afternoon or evening) before an evening open, which tells the evening rows: read as written. "
           f"{give}" if names_a_trade_date(date) or cmap.trade_date == date else
           f"{give}, or say it is a trade date, read with its evening rows on the day before: --columns "
           f"...,trade_date={date} (or name the column 'Trade Date' in the file's header)")
    return [Caution(
        f"{path.name}: {steps} time(s) in file order step back by 12 to 24 h between rows of one {quoted(date)}: "
        f"that column looks like an exchange trade (session) date, not the calendar date. A futures evening "
        f"session (from 17:00 CT at CME) carries the next business day's date, so its rows, joined to {quoted(clock)}, "
        f"are stamped a day late and sort after that day's day session. {fix}")]
