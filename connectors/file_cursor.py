"""One replay file read as its valid ticks in order: `FileCursor` holds one chunk of a file's rows in memory at a
time, validates each row into a tick (or counts it in the replay's RejectCounter, once the tick after it is
emitted), applies the stream selection and the time range as rows are read, and refuses a tick that goes back in
its stream's time. connectors/replay.py merges the cursors of all the files by event time.
"""

from __future__ import annotations

import math
from typing import Any

from connectors.archives import truncation_named
from connectors.rejected_rows import NOT_SELECTED, RejectCounter
from connectors.stream_selection import StreamSelection
from connectors.ticks import InvalidTick, Tick, validate
from connectors.time_range import TimeRange
from engine.quoting import quoted

class FileCursor:
    """One file's valid ticks in order, one chunk of `chunk_rows` rows in memory at a time. A tick before its
    stream's latest is rejected here as ts_backwards, as the engine would, but named by its row and the row that
    went ahead: a DBN file is read in its own order, never sorted, and one record stamped ahead of its
    neighbours makes the stream's next ticks go back. A rejected row is counted once the tick after it is
    emitted (`advance`), so a run stopped early (--max-ticks) counts only the rows before its stop, not the rest
    of the chunk read ahead."""

    def __init__(self, plan: Any, chunk_rows: int, rejects: RejectCounter,
                 selection: StreamSelection | None = None, time_range: TimeRange | None = None) -> None:
        self._plan = plan
        self._selection = selection
        self._range = time_range
        self.outside_rows = 0  # rows left out here by the time range (those its lazy query dropped are the plan's)
        self._last_outside = -1  # the last such row: a row of a trade and a quote counts once
        self._batches = plan.batches(chunk_rows)
        self._zero_bid_is_price = bool(getattr(plan, "zero_bid_is_price", False))  # the files' zero_bid reading
        self._rejects = rejects
        self._latest: dict[str, tuple[int, int]] = {}  # stream -> (ts, row) of its latest valid tick
        # streams whose price at or below zero was refused after a tick of theirs: cut (RejectCounter.cut) when
        # another tick of theirs follows, a stretch gone from their middle (zero_crossings.py)
        self._refused_below_zero: set[str] = set()
        # rejected rows not counted yet: (how many of the chunk's ticks come before it, reject, row)
        self._pending: list[tuple[int, InvalidTick, int]] = []
        self.ticks: list[Tick] = []
        # each tick's (stream, sequence number): numbers order a stream's own ticks (NO_SEQUENCE: its file has none)
        self.sequences: list[tuple[str, float | int]] = []
        self.rows: list[int] = []  # each tick's row, for a repeated sequence number said by its line
        self.pos = 0
        self.fill()

    @property
    def plan(self) -> Any:
        return self._plan

    def advance(self, pos: int) -> None:
        """Ticks up to `pos` of the chunk are emitted: count the rejected rows before the last of them."""
        self.pos = pos
        due = 0
        while due < len(self._pending) and self._pending[due][0] < pos:
            _, err, row = self._pending[due]
            self._rejects.add(err, self._plan, row)
            due += 1
        del self._pending[:due]

    def fill(self) -> bool:
        """Load the next chunk holding at least one valid tick; False once the file is exhausted (its rejected
        rows are then all counted). Rows rejected after the chunk's last tick wait for the next chunk's first."""
        self._pending = [(0, err, row) for _, err, row in self._pending]
        with truncation_named(self._plan.path, getattr(self._plan, "given_name", None)):
            return self._fill()

    def _fill(self) -> bool:
        below_zero = self._refused_below_zero
        for chunk in self._batches:
            ticks, sequences, rows = [], [], []
            for row, wire, *sequence in chunk:
                if self._range is not None and type(wire) is dict and type(ts := wire.get("ts")) is int \
                        and not self._range.holds(ts):  # before all else, as the lazy query's range drops rows
                    self.outside_rows += row != self._last_outside
                    self._last_outside = row
                    continue
                try:
                    stream = wire.stream if isinstance(wire, InvalidTick) else wire.get("stream")
                    if self._selection is not None:  # first: what else is wrong with the row is no matter
                        self._select(stream)
                    if isinstance(wire, InvalidTick):  # a row refused as it was read (a one-sided quote, ...)
                        raise wire
                    tick = validate(wire, zero_bid_is_price=self._zero_bid_is_price)
                    self._in_order(tick, row)
                    if below_zero and tick.stream in below_zero:
                        below_zero.discard(tick.stream)
                        self._rejects.cut.add(tick.stream)
                    ticks.append(tick)
                    sequences.append((tick.stream, sequence[0]) if sequence else NO_SEQUENCE)
                    rows.append(row)
                except InvalidTick as err:
                    self._pending.append((len(ticks), err, row))
                    if err.reason == "nonpositive_price" and err.stream in self._latest:
                        below_zero.add(err.stream)
            if ticks:
                self.ticks, self.sequences, self.rows, self.pos = ticks, sequences, rows, 0
                return True
        self.ticks, self.sequences, self.rows = [], [], []
        self.advance(1)  # read to its end, no tick after them: every row pending (each at 0) counts now
        self.pos = 0
        return False

    def _select(self, stream: Any) -> None:
        """A row of a stream the selection leaves out is filtered_out, whatever else is wrong with it."""
        if isinstance(stream, str) and not self._selection.matches(stream):
            raise InvalidTick("filtered_out", f"stream {quoted(stream)} {NOT_SELECTED} {self._selection.quoted()}",
                              stream)

    def _in_order(self, tick: Tick, row: int) -> None:
        latest = self._latest.get(tick.stream)
        if latest is None:  # a stream's first tick of this file: the counter says rejects by stream when several
            self._rejects.streams_read.add(tick.stream)
        if latest is not None and tick.ts < latest[0]:
            raise InvalidTick("ts_backwards", f"stream {quoted(tick.stream)}: ts {tick.ts} < previous {latest[0]}, "
                                              f"{(latest[0] - tick.ts) / 1e9:.1f} s later, of "
                                              f"{self._plan.where(latest[1])} (a row stamped ahead of its "
                                              f"neighbours sends the stream's next ones back)", tick.stream)
        self._latest[tick.stream] = (tick.ts, row)


# The (stream, sequence number) of a tick from a file without one: at equal times its ticks come first (then the
# sequenced ones, by stream, each stream's by its numbers), an order that holds across any mix of files
NO_SEQUENCE = ("", -math.inf)
