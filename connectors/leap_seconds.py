"""A leap second in a tick file, read where a user expects it: as the last instant of the second before it, in
file order. UTC times have no 61st second, so POSIX time (and the wire's int ns) cannot hold one; left alone, a
venue's `23:59:60.500` read as the next day's `00:00:00.500` (chrono rolls it over), sorted behind the ticks that
followed it, and `23:59:60.000` took the real midnight's time. Two ways a venue writes the leap second:

- as text, `23:59:60.x` (`in_leap_second`): each such row is read at `23:59:59.999999999` (the last ns of the
  second before; the last unit of a clock in ms or us);
- POSIX time, its clock stepping back 1 s and repeating `23:59:59.x` (`posix_repeats`): at one of the leap seconds
  UTC has had, the rows of a stream after that step back inside the second are read at the same last instant.

Either way those rows keep their file order (the replay's sort is stable) and come before the next day's first
tick; a note counts them and names the day. connectors/planning.py applies both. A clock that steps back a second
at any other time is no leap second's: `clock_step_back` names it so, with its row, in the note on rows out of
time order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

import polars as pl

from connectors.column_map import ColumnMap
from connectors.durations import duration_text
from connectors.local_times import time_column
from connectors.row_exprs import ROW
from connectors.row_order import is_newest_first
from connectors.tick_times import utc_text

# the days ending in a leap second (IERS Bulletin C; none since, none announced)
LEAP_DAYS = tuple(date.fromisoformat(d) for d in (
    "1972-06-30", "1972-12-31", "1973-12-31", "1974-12-31", "1975-12-31", "1976-12-31", "1977-12-31", "1978-12-31",
    "1979-12-31", "1981-06-30", "1982-06-30", "1983-06-30", "1985-06-30", "1987-12-31", "1989-12-31", "1990-12-31",
    "1992-06-30", "1993-06-30", "1994-06-30", "1995-12-31", "1997-06-30", "1998-12-31", "2005-12-31", "2008-12-31",
    "2012-06-30", "2015-06-30", "2016-12-31"))
# each leap second's end, the next day's midnight, in epoch seconds
LEAP_ENDS = tuple(int(datetime.combine(d + timedelta(days=1), datetime.min.time(), timezone.utc).timestamp())
                  for d in LEAP_DAYS)

# a time's seconds written 60 (`23:59:60`, `23:59:60.5Z`, `23:59:60,25`): not a `:600` of milliseconds
SIXTIETH_SECOND = r"\d:60(?:[.,]\d*)?(?:\D|$)"
SECOND_NS = 1_000_000_000


def sixtieth_second(cmap: ColumnMap, ts_type: pl.DataType) -> pl.Expr | None:
    """Whether each row's time is written in a 60th second (`23:59:60.x`); None when the times are not text."""
    if ts_type != pl.String or cmap.ts_unit != "datetime":
        return None
    return time_column(cmap).str.contains(SIXTIETH_SECOND).fill_null(False)


def in_leap_second(ts: pl.Expr, cmap: ColumnMap, sixtieth: pl.Expr) -> pl.Expr:
    """`ts` (int ns) with a 60th second's rows at the last ns of the second before: read, `23:59:60.5` rolled
    over to the next minute's `00.5`, so its fraction as written, and one ns, come off. (`ts` appears once: a
    parse of datetime text named three times in one expression is parsed three times.)"""
    fraction = time_column(cmap).str.extract(r"\d:60[.,](\d{1,9})", 1).str.pad_end(9, "0").cast(pl.Int64, strict=False)
    return (ts - pl.when(sixtieth).then(fraction.fill_null(0) + 1).otherwise(0)).alias("_ts")


def leap_text_notes(path: Path, facts: Mapping[str, Any]) -> list[str]:
    """The note on a file's rows written in a 60th second (the facts `leap_rows`, `leap_days`)."""
    if not facts.get("leap_rows"):
        return []
    days = ", ".join(map(str, facts["leap_days"][:3])) + (", ..." if len(facts["leap_days"]) > 3 else "")
    return [f"{path.name}: {facts['leap_rows']} row(s) stamped in a leap second (:60, on {days}): read at the last "
            f"instant of the second before it (:59.999999999), in file order, before the next second's rows (UTC "
            f"times, as POSIX time, have no 61st second)"]


def leap_text_facts(sixtieth: pl.Expr) -> dict[str, pl.Expr]:
    """What the file's one pass counts of its 60th seconds (for `leap_text_notes`), `_ts` read as above."""
    when = pl.col("_ts").filter(sixtieth)
    return {"leap_rows": sixtieth.sum(),
            "leap_days": when.cast(pl.Datetime("ns")).dt.date().unique().sort().implode()}


@dataclass(frozen=True)
class PosixRepeats:
    """Rows after a stream's clock stepped back 1 s inside a leap second (its second pass of 23:59:59)."""

    rows: pl.Series  # their file row numbers
    days: tuple[date, ...]

    def ts(self, ts: pl.Expr, factor: int) -> pl.Expr:
        """`ts` (in units of `factor` ns) with those rows at the last unit of their second."""
        per_second = SECOND_NS // factor
        last = (ts // per_second + 1) * per_second - 1
        return pl.when(pl.col(ROW).is_in(self.rows.implode())).then(last).otherwise(ts).alias("_ts")

    def notes(self, path: Path, factor: int) -> list[str]:
        days = ", ".join(map(str, self.days))
        last = "23:59:59." + "9" * (9 - len(str(factor)) + 1)  # the clock's last unit: .999 in ms
        return [f"{path.name}: its clock steps back 1 s in the leap second ending {days}, repeating 23:59:59 as "
                f"POSIX time does: the {self.rows.len()} row(s) after the step back, the leap second's, read at "
                f"the last instant of that second ({last} UTC), in file order"]


def posix_repeats(rows: pl.LazyFrame, ts: pl.Expr, stream: pl.Expr, facts: Mapping[str, Any],
                  factor: int) -> PosixRepeats | None:
    """The rows of a file not in time order that repeat 23:59:59 after a leap second's step back: per stream, in
    file order, inside the last second of a day ending in a leap second, those after a step back of more than
    half a second (a few ms of disorder never counts). None: the file holds no such second, or no step back."""
    per_second = SECOND_NS // factor if factor <= SECOND_NS else 0
    numbers = all(isinstance(t, (int, float)) for t in (facts["min_ts"], facts["max_ts"]))
    # (a file newest first steps back everywhere: its steps inside the second are no clock's)
    if not facts["unsorted"] or not per_second or not numbers or \
            is_newest_first(facts["back_rows"], facts["forward_rows"]):
        return None
    ends = [end * per_second for end in LEAP_ENDS if facts["min_ts"] < end * per_second and
            facts["max_ts"] >= (end - 1) * per_second]
    if not ends:
        return None
    inside = pl.any_horizontal([(pl.col("_ts") >= end - per_second) & (pl.col("_ts") < end) for end in ends])
    found = rows.select(pl.col(ROW), stream.alias("_stream"), ts.alias("_ts")).filter(inside).collect()
    stepped_back = (pl.col("_ts").shift(1) - pl.col("_ts") > per_second // 2).fill_null(False)
    found = found.with_columns(_end=pl.col("_ts") // per_second)  # the second (epoch s): one per leap second
    found = found.filter((stepped_back.cum_sum() > 0).over("_stream", "_end"))
    if not found.height:
        return None
    days = sorted({datetime.fromtimestamp(int(second), timezone.utc).date() for second in found["_end"].unique()})
    return PosixRepeats(found[ROW], tuple(days))


def clock_step_back(facts: Mapping[str, Any], factor: int, where: Callable[[int], str]) -> str | None:
    """Why a file is not in time order when its clock stepped back once by about a second (more than half, at
    most one) and not in a leap second (`posix_repeats` reads those): `the clock stepped back 750 ms at
    2024-03-05T14:22:07.5Z (line 32: 14:22:06.75), not at a leap second: a clock correction?`, with the row
    (`where`: a file row number as the file shows it); None otherwise (the generic cause is said)."""
    back, at = facts.get("largest_back"), facts.get("first_back_ts")
    if facts.get("back_rows") != 1 or not isinstance(back, int) or not isinstance(at, int) or factor > SECOND_NS:
        return None
    back_ns, to_ns = back * factor, at * factor
    from_ns = to_ns + back_ns
    if not SECOND_NS // 2 < back_ns <= SECOND_NS or (from_ns // SECOND_NS + 1) in LEAP_ENDS:
        return None
    row = where(facts["first_back_row"])
    return (f"the clock stepped back {duration_text(back_ns)} at {utc_text(from_ns)} ({row}: {utc_text(to_ns)}), "
            f"not at a leap second: a clock correction?")
