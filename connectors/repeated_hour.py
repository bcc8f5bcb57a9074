"""The hour a wall clock repeats when summer time ends (01:00-01:59 twice in New York on 2026-11-01): which of a
file's naive local times are its second pass, told by the file's order as pandas' `ambiguous='infer'` tells them,
and the notes that count them. connectors/event_time.py reads the rows found here at the later UTC offset.

One pass over the file converts every wall-clock time once, to find the few in a repeated hour; the order is read
on those rows alone, so the replay's own query stays a plain per-row one (no window over the whole file)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Callable, NamedTuple, Sequence

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
    across_streams: bool = False  # told across the file's streams (in time order across them), not each by its own

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
            across = " (its streams in time order: the step back of any stream tells every stream's pass)" \
                if self.across_streams else ""
            notes.append(f"{name}: its wall clock steps back inside {hour}{across}: {second} row(s) after the step "
                         f"back read at the second pass (the later UTC offset), {self.rows - second - self.untold} "
                         f"before it at the first")
        if self.untold:
            notes.append(f"{name}: {self.untold} row(s) in {hour}, and no step back of the wall clock to tell "
                         f"which pass they are: read at the first pass (the earlier instant); a file holding both "
                         f"passes with no step back between them needs UTC offsets or epoch times")
        return notes


def repeated_hour(rows: pl.LazyFrame, wall_ns: pl.Expr | None, tz: str | None, streams: Sequence[str],
                  row: str, newest_first: Callable[[int, int], bool] | None = None,
                  marks: pl.Expr | None = None) -> RepeatedHour | None:
    """The rows of `rows` (a file's scan, `row` its row number) whose wall-clock time (`wall_ns`: naive times as
    int ns) falls in an hour `tz` repeats, and which are its second pass: per day, once the wall clock steps back,
    in the order the replay reads the file, from one time of that hour to another by more than half the shift (30
    min of New York's hour: a few ms of disorder never counts), the times of the hour from there on are the second
    pass, but for a first-pass row written late across the step (`_second_pass`). In a file in time order across
    its streams (its clock steps back that far no more often than once a day of such an hour: a day's file of many
    symbols) a step back of any stream tells every stream's pass, a quiet stream's print after it included; in any
    other (streams one after another, or merged out of order) each stream's own clock tells its pass. That order is
    the file's, or its reverse where the replay reverses it, as `newest_first` (the replay's rule, of the steps back
    and forward between two times) says of the wall clock's steps outside such hours: read in file order, a
    newest-first file's clock jumps forward between the passes and never steps back. None: no row falls in such an
    hour (or there is no wall clock to read). `marks`: each row's pass where its time's text says it
    (connectors/pass_marks.py), which the order does not overrule. A series that writes each time of the hour
    exactly twice (ENTSO-E's hourly prices: `02:00`, then `02:00` again) steps into its second pass at the repeat,
    with no step back between them."""
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
    days = tuple(found.select(wall.dt.date().unique().sort()).to_series().to_list())
    steps = _steps(rows, wall_ns, unsure, found["_shift"].min() // 2)
    replayed_reversed = newest_first is not None and newest_first(steps.back, steps.forward)
    found = found.reverse() if replayed_reversed else found
    across_streams = bool(streams) and (steps.long_forward if replayed_reversed else steps.long_back) <= len(days)
    stream_keys = [*(pl.col(f"_stream{i}") for i in range(len(streams))), wall.dt.date()]
    keys = [wall.dt.date()] if across_streams else stream_keys  # the rows one step back tells the pass of
    twice = (pl.len().over([*stream_keys, "_wall"]) == 2).all().over(stream_keys)  # each time written twice
    back = (pl.col("_wall").shift(1) - pl.col("_wall") > pl.col("_shift") // 2).fill_null(False)
    repeat = ((pl.col("_wall").shift(1) == pl.col("_wall")) & twice).fill_null(False)  # (a stream's own repeat)
    forward = (pl.col("_wall") - pl.col("_wall").shift(1) > pl.col("_shift") // 2).fill_null(False)
    found = found.with_columns(_step=back.over(keys) | repeat.over(stream_keys), _jump=forward.over(keys))
    found = found.with_columns(_second=_second_pass().over(keys))
    marked = pl.col("_mark").is_not_null()
    found = found.with_columns(_second=pl.when(marked).then(pl.col("_mark") == SECOND).otherwise(pl.col("_second")),
                               _told=(pl.col("_second") | marked).any().over(keys))
    return RepeatedHour(tz, found.filter("_second")[row], found.height, int((~found["_told"]).sum()), days,
                        int(found["_mark"].is_not_null().sum()),
                        across_streams and found.select(stream_keys[:-1]).n_unique() > 1)


def _second_pass() -> pl.Expr:
    """Per row of a day's (a stream's day's) rows in a repeated hour, in replay order: whether it is of the second
    pass. From the first step back on, every row is, but for a first-pass row written late across the step: one
    that jumps forward by more than half the shift after it, up to the next step back (02:59:59 CEST, 02:00:00
    CET, then 02:59:59.999 CEST 1 ms late and 02:00:01 CET: review411 #7). Without a step back after it a forward
    jump is a quiet second pass's gap, and stays there."""
    steps = pl.col("_step").cum_sum()
    jumps = (pl.col("_jump") & (steps > 0)).cum_sum()  # forward jumps since the first step back
    late = (jumps >= steps) & (pl.col("_step").sum() > steps)  # more jumps than steps back since, and one to come
    return (steps > 0) & ~late


class _Steps(NamedTuple):
    """The wall clock's steps between a file's rows, in file order."""

    back: int  # steps back between rows outside repeated or skipped hours (which step either way whatever the
    forward: int  # file's order), and forward: how the replay tells a file newest first (row_order.is_newest_first)
    long_back: int  # steps back by more than half a summer time shift between any two rows, and forward: a file in
    long_forward: int  # time order takes them only where its clock goes back (newest first: forward)


def _steps(rows: pl.LazyFrame, wall_ns: pl.Expr, unsure: pl.Expr, half_shift: int) -> _Steps:
    outside = pl.col("_wall").filter(pl.col("_wall").is_not_null() & ~unsure).diff()
    every = pl.col("_wall").drop_nulls().diff()
    return _Steps(*rows.select(wall_ns.alias("_wall")).select(
        back=(outside < 0).sum(), forward=(outside > 0).sum(), long_back=(every < -half_shift).sum(),
        long_forward=(every > half_shift).sum()).collect().row(0))
