"""A replay's sequence numbers watched in replay order (a map's `sequence`, --sequence): a tick that repeats its
stream's sequence number at the same time and of the same kind is a recovery feed's resend (or the same line
captured twice, A and B) and is left out, counted; so is one that repeats a recent number with the same values at
a later time (a resend the feed restamped with the time it sent it again); a stream's number that jumps past the
next one is a gap, counted and said. A number read again at the same time with other values is no resend: kept,
counted and said (a number that restarts, as a block's `log_index` does, needs its outer number joined to it:
`block_number+log_index`, whose numbers are no count, so no gaps are looked for in them). connectors/replay.py
asks `SequenceWatch.repeat` once per tick it merges, so a backtest and `feed replay` (the one reader) leave out
the same ticks. Without a sequence column nothing is
guessed: two equal rows may be two trades."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from connectors.ticks import Tick, utc_text

# a sequence of two columns (`block_number+log_index`) is one number, the first shifted past the second's bits: up
# to 2**24 events a block, blocks up to 2**39 (connectors/row_exprs.py's sequence_key, this module's notes). Here,
# not in row_order.py, which imports polars: the service's config imports this module, and so every shard and CLI
# start would import polars (~0.25 s of CPU) for one number
INNER_BITS = 24

SHOWN = 3  # gaps named in the note, the first ones in replay order
# A restamped resend is looked for among the last RECENT to 2 x RECENT ticks taken (all streams together: memory
# stays bounded on an OPRA file's million streams) and within RESTAMPED_NS of its first reading: a recovery feed
# resends what a reconnect lost, minutes later at most, while a new session's numbers start again hours later, and
# a tick that reuses a number then with the same price and size by chance must not be left out.
RECENT = 100_000
RESTAMPED_NS = 3600 * 10**9


_LOW_64 = (1 << 64) - 1


class RecentTicks:
    """The ticks taken most recently (RECENT to 2 x RECENT, all streams together) by (stream, number, kind): where a
    resend restamped with a later time is looked for, by file replay's `sequence` (SequenceWatch) and by the live
    service's `seq` (connectors/tick_sequences.py) alike, so the two leave out the same resends.

    The live service pays this for every numbered tick, so each is kept in two ints, not as the tick (200,000 ticks
    held whole were ~82 MB): the hash of its (stream, number, kind), and its time shifted above a 64-bit hash of its
    values (two ticks alike in both by chance: ~1e-9 at 200,000 held). Two generations of up to RECENT: the older is
    dropped whole when the newer fills, where trimming one dict copied it on the ingest path (49-220 ms every
    100,000 numbered ticks, gc included)."""

    def __init__(self) -> None:
        self._newer: dict[int, int] = {}  # hash((stream, number, kind)) -> ts << 64 | hash of its values
        self._older: dict[int, int] = {}

    def _taken(self, tick: Tick, number: float | int) -> tuple[int, int] | None:
        """(ts, values' hash) of the recent tick of ``tick``'s stream and kind numbered ``number``, if kept."""
        key = hash((tick.stream, number, tick.kind))
        found = self._newer.get(key)
        if found is None and (found := self._older.get(key)) is None:
            return None
        return found >> 64, found & _LOW_64

    def taken_ts(self, tick: Tick, number: float | int) -> int | None:
        """The time of the recent tick of ``tick``'s stream and kind numbered ``number``; None when none is kept."""
        found = self._taken(tick, number)
        return None if found is None else found[0]

    def differs(self, tick: Tick, number: float | int) -> bool:
        """Whether a recent tick of ``tick``'s stream and kind numbered ``number`` said other values."""
        found = self._taken(tick, number)
        return found is not None and found[1] != hash(_values(tick)) & _LOW_64

    def restamped(self, tick: Tick, number: float | int) -> bool:
        """Whether ``tick`` says again, at its time or up to RESTAMPED_NS later, what a recent tick of its stream
        and kind numbered ``number`` said: a resend (restamped when later)."""
        found = self._taken(tick, number)
        return found is not None and 0 <= tick.ts - found[0] <= RESTAMPED_NS \
            and found[1] == hash(_values(tick)) & _LOW_64

    def remember(self, tick: Tick, number: float | int) -> None:
        """Keep a tick taken among the recent ones."""
        self._newer[hash((tick.stream, number, tick.kind))] = tick.ts << 64 | hash(_values(tick)) & _LOW_64
        if len(self._newer) >= RECENT:
            self._older, self._newer = self._newer, {}


@dataclass
class _Last:
    """A stream's last sequence number taken, its time and the kinds of tick taken with it (a row that holds a
    trade and the quote it met replays as both, under its one number)."""

    ts: int
    number: float | int
    kinds: set[str] = field(default_factory=set)


@dataclass
class SequenceWatch:
    """Per stream, in replay order: repeats left out and gaps in the numbers (see the module docstring)."""

    repeats: int = 0
    first_repeat: str = ""  # the first repeat, as a user finds it: its file and line, stream and number
    repeat_streams: set[str] = field(default_factory=set)
    gaps: int = 0
    missing: int = 0  # numbers skipped by the gaps, together
    first_gaps: list[str] = field(default_factory=list)
    gap_streams: set[str] = field(default_factory=set)
    restamped: int = 0  # of the repeats, those at a later time than the first reading
    composite: bool = False  # numbers of two columns joined (block_number+log_index): an order, not a count
    reused: int = 0  # ticks kept that repeat a number at its time with other values (a number that restarts)
    first_reused: str = ""
    _last: dict[str, _Last] = field(default_factory=dict)
    _recent: RecentTicks = field(default_factory=RecentTicks)

    def repeat(self, tick: Tick, number: float | int, plan: Any, row: int | None) -> bool:
        """Whether `tick`, numbered `number`, repeats its stream's last number at its time with a kind already
        taken, or a recent number of its stream with its kind and values at a later time (then it is counted and
        to be left out, the stream's last number unchanged); a number past the last one plus one counts a gap."""
        last = self._last.get(tick.stream)
        if last is not None and last.number == number and last.ts == tick.ts:
            if tick.kind not in last.kinds or self._recent.differs(tick, number):
                self._reuse(tick, number, plan, row, tick.kind in last.kinds)
                last.kinds.add(tick.kind)
                self._recent.remember(tick, number)
                return False
            return self._count(tick, number, plan, row)
        if self._recent.restamped(tick, number):  # (at its time, other numbers read between: a repeat, no restamp)
            self.restamped += tick.ts > self._recent.taken_ts(tick, number)
            return self._count(tick, number, plan, row)
        if not self.composite and last is not None and number > last.number + 1:  # a lower one later: a new session
            self.gaps += 1
            self.missing += number - last.number - 1
            self.gap_streams.add(tick.stream)
            if len(self.first_gaps) < SHOWN:
                self.first_gaps.append(f"{tick.stream} {int(last.number)} -> {int(number)} at {utc_text(tick.ts)}")
        self._last[tick.stream] = _Last(tick.ts, number, {tick.kind})
        self._recent.remember(tick, number)
        return False

    def _count(self, tick: Tick, number: float | int, plan: Any, row: int | None) -> bool:
        """Count a repeat, the first one named as a user finds it; True: it is left out."""
        self.repeats += 1
        self.repeat_streams.add(tick.stream)
        if not self.first_repeat:
            self.first_repeat = self._where(tick, number, plan, row)
        return True

    def _reuse(self, tick: Tick, number: float | int, plan: Any, row: int | None, taken: bool) -> None:
        """Count a number read again at its time with other values (`taken`: of a kind already taken), kept."""
        if taken:
            self.reused += 1
            self.first_reused = self.first_reused or self._where(tick, number, plan, row)

    def _where(self, tick: Tick, number: float | int, plan: Any, row: int | None) -> str:
        """A tick as a user finds it: its file and line, stream and number (a joined number as its two parts)."""
        where = plan.where(row) if row is not None and hasattr(plan, "where") else plan.path.name
        said = f"{int(number) >> INNER_BITS}+{int(number) & ((1 << INNER_BITS) - 1)}" if self.composite else \
            f"{int(number)}"
        return f"{where} ({tick.stream}, number {said})"

    def notes(self, column: str) -> list[str]:
        """What the watch found, said at the run's end; `column`: the sequence column(s) the files were read by."""
        notes = []
        if self.repeats:
            later = f" or, {self.restamped} of them, earlier with the same values (restamped)" if self.restamped else ""
            notes.append(f"{self.repeats} tick(s) of {len(self.repeat_streams)} stream(s) repeat a sequence number "
                         f"(column {column}) already read at the same time{later}, a recovery feed's resend or one "
                         f"line captured twice: left out, the first read kept (the first repeat: {self.first_repeat})")
        if self.reused:
            notes.append(f"{self.reused} tick(s) repeat a sequence number (column {column}) already read at the same "
                         f"time with other values: kept, as no resend says other values (the first: "
                         f"{self.first_reused}); a number that restarts, as a block's log_index does in every "
                         f"block, orders them within their time by that number alone, interleaving blocks: join its "
                         f"outer number, --sequence block_number+log_index (docs/replay.md, On-chain swaps)")
        if self.gaps:
            more = ", ..." if self.gaps > len(self.first_gaps) else ""
            notes.append(f"{self.gaps} gap(s) in the sequence numbers (column {column}) of {len(self.gap_streams)} "
                         f"stream(s), {int(self.missing)} number(s) missing ({'; '.join(self.first_gaps)}{more}): "
                         f"messages the feed lost, or numbers that count across instruments (TAQ's, an OPRA "
                         f"channel's), whose every stream has gaps")
        return notes


def _values(tick: Tick) -> tuple:
    """What a tick says besides its stream, time and kind: a resend restamped says it again."""
    return tick.price, tick.size, tick.side, tick.bid, tick.ask, tick.bid_size, tick.ask_size
