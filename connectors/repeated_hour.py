"""The hour a wall clock repeats when summer time ends (01:00-01:59 twice in New York on 2026-11-01): which of a
file's naive local times are its second pass, told by the file's order as pandas' `ambiguous='infer'` tells them,
and the notes that count them. connectors/event_time.py reads the rows found here at the later UTC offset.

One pass over the file converts every wall-clock time once, to find the few in a repeated hour; the order is read
on those rows alone, so the replay's own query stays a plain per-row one (no window over the whole file)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Callable, Sequence

import polars as pl

from connectors.pass_marks import SECOND


@dataclass(frozen=True)
class RepeatedHour:
    """A file's rows in an hour repeated when summer time ends, and which of them are its second pass."""

    tz: str
    second_rows: pl.Series  # the rows (their file row numbers) read at the second pass, the later UTC offset
    rows: int  # rows in a repeated hour
    untold: int  # of them, on a stream's day whose clock never stepped back there: read at the first pass
    days: tuple[date, ...]  # the days of those hours, in order
    marked: int = 0  # of them, the rows whose time's text says their pass (`(CET)`, `02:00B`)

    def notes(self, name: str) -> list[str]:
        days = ", ".join(map(str, self.days[:3])) + (", ..." if len(self.days) > 3 else "")
        hour = f"the hour repeated when summer time ends in {self.tz} ({days})"
        second = self.second_rows.len()
        notes = []
        if second and self.marked:
            notes.append(f"{name}: {self.marked} row(s) in {hour} say their pass by a mark (the zone's winter or "
                         f"summer name after the time, `(CET)`, `(CEST)`; `B` or `A` after the clock): {second} "
                         f"read at the second pass (the later UTC offset), {self.rows - second - self.untold} at the "
                         f"first")
        elif second:
            notes.append(f"{name}: its wall clock steps back inside {hour}: {second} row(s) after the step back "
                         f"read at the second pass (the later UTC offset), {self.rows - second - self.untold} before "
                         f"it at the first")
        if self.untold:
            notes.append(f"{name}: {self.untold} row(s) in {hour}, and no step back of the wall clock to tell "
                         f"which pass they are: read at the first pass (the earlier instant); a file holding both "
                         f"passes with no step back between them needs UTC offsets or epoch times")
        return notes


def repeated_hour(rows: pl.LazyFrame, wall_ns: pl.Expr | None, tz: str | None, streams: Sequence[str],
                  row: str, newest_first: Callable[[int, int], bool] | None = None,
                  marks: pl.Expr | None = None) -> RepeatedHour | None:
    """The rows of `rows` (a file's scan, `row` its row number) whose wall-clock time (`wall_ns`: naive times as
    int ns) falls in an hour `tz` repeats, and which are its second pass: per stream (streams interleave) and per
    day, once the wall clock steps back, in the order the replay reads the file, from one time of that hour to
    another by more than half the shift (30 min of New York's hour: a few ms of disorder never counts), that
    stream's times of the hour from there on are the second pass. That order is the file's, or its reverse where
    the replay reverses it, as `newest_first` (the replay's rule, of the steps back and forward between two times)
    says of the wall clock's steps outside such hours: read in file order, a newest-first file's clock jumps
    forward between the passes and never steps back. None: no row falls in such an hour (or there is no wall clock
    to read). `marks`: each row's pass where its time's text says it (connectors/pass_marks.py), which the order
    does not overrule. A series that writes each time of the hour exactly twice (ENTSO-E's hourly prices: `02:00`,
    then `02:00` again) steps into its second pass at the repeat, with no step back between them."""
    if wall_ns is None or tz is None:
        return None
    wall = pl.col("_wall").cast(pl.Datetime("ns"))
    # one conversion a row: null for a time repeated or skipped (those few are told apart below)
    unsure = wall.dt.replace_time_zone(tz, ambiguous="null", non_existent="null").is_null()
    found = rows.select(pl.col(row), *(pl.col(c).alias(f"_stream{i}") for i, c in enumerate(streams)),
                        wall_ns.alias("_wall"), (pl.lit(None) if marks is None else marks).alias("_mark")
                        ).filter(pl.col("_wall").is_not_null() & unsure).collect()
    earliest, latest = (wall.dt.replace_time_zone(tz, ambiguous=which, non_existent="null").dt.epoch("ns")
                        for which in ("earliest", "latest"))
    found = found.with_columns(_shift=latest - earliest).filter(pl.col("_shift") > 0)  # skipped times: null
    if not found.height:
        return None
    if newest_first is not None and newest_first(*_steps_outside(rows, wall_ns, unsure)):
        found = found.reverse()
    keys = [*(pl.col(f"_stream{i}") for i in range(len(streams))), wall.dt.date()]
    twice = (pl.len().over([*keys, "_wall"]) == 2).all().over(keys)  # each time of the hour written twice
    stepped_back = ((pl.col("_wall").shift(1) - pl.col("_wall") > pl.col("_shift") // 2)
                    | ((pl.col("_wall").shift(1) == pl.col("_wall")) & twice)).fill_null(False)
    found = found.with_columns(_second=(stepped_back.cum_sum() > 0).over(keys))
    marked = pl.col("_mark").is_not_null()
    found = found.with_columns(_second=pl.when(marked).then(pl.col("_mark") == SECOND).otherwise(pl.col("_second")),
                               _told=(pl.col("_second") | marked).any().over(keys))
    return RepeatedHour(tz, found.filter("_second")[row], found.height, int((~found["_told"]).sum()),
                        tuple(found.select(wall.dt.date().unique().sort()).to_series().to_list()),
                        int(found["_mark"].is_not_null().sum()))


def _steps_outside(rows: pl.LazyFrame, wall_ns: pl.Expr, unsure: pl.Expr) -> tuple[int, int]:
    """The wall clock's steps back and forward between the file's rows outside its repeated or skipped hours
    (which step either way whatever the file's order): how the replay tells a file newest first."""
    steps = pl.col("_wall").filter(pl.col("_wall").is_not_null() & ~unsure).diff()
    return rows.select(wall_ns.alias("_wall")).select(back=(steps < 0).sum(), forward=(steps > 0).sum()) \
        .collect().row(0)
