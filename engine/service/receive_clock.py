"""When a tick reached the service, for `lag_s`: a feed stamped with the wall clock says it by its own `ts`.

ZeroMQ does not say when a message arrived, and a burst the engine cannot take at once waits mostly upstream of
the ingest socket's small queue (the connection's kernel buffers, the sender's queue), which refills from them as
fast as it is read: reading at the engine's pace, each message is read just before it is computed, so how long it
waited before its read was nowhere (review243 #1: heartbeats said `lag_s` 0 while answers were 17 s old). For a
stream whose ticks are stamped with the wall clock, the tick's `ts` tells: the smallest (read time - ts) its ticks
had is its wire and clock offset, and what a tick has more than that is how long it waited before its read.
A stream stamped otherwise (a replay of old data, the synthetic feed) is read as arriving when read.

The smallest is taken over a recent window of read time, not the stream's whole life (review411 #4: one tick stamped
9 s ahead, within limits.max_ts_ahead_s, made every later answer of its stream read 9 s too old and carry
`clock_ahead` for good, across restarts). Two buckets of OFFSET_WINDOW_S each: this window's smallest and the last
one's, so a stray stamp is forgotten once two windows with ticks have passed it (a quiet stream keeps its offset
however long it is quiet). The trade-off: a backlog that waits upstream longer than one window reads, past that, as
clock offset rather than lag (its `lag_s` too short by the excess); one window of 5 minutes keeps a backlog of
minutes reading as lag, as review243 #1 wants, and forgets a stray stamp within 5 to 10 minutes.
"""

from __future__ import annotations

# a stream whose smallest (read time - ts) is within this of 0 is taken for stamped with the wall clock (a host's
# clock skew and the wire included); a replay's or the synthetic feed's are hours to years off
WALL_CLOCK_S = 60.0
# the read time a bucket of the recent minimum spans (the module docstring: how long a stray stamp is kept, how long a
# backlog waiting upstream still reads as lag)
OFFSET_WINDOW_S = 300.0


class RecentMinimum:
    """A stream's smallest (read time - ts) in two buckets of read time: this window's and the last one's."""

    __slots__ = ("window", "current", "previous")

    def __init__(self, window: int, offset: int) -> None:
        self.window = window  # read time // OFFSET_WINDOW_S of the current bucket
        self.current = offset
        self.previous: int | None = None

    @property
    def offset(self) -> int:
        return self.current if self.previous is None else min(self.current, self.previous)

    def add(self, window: int, offset: int) -> None:
        """A tick read in ``window`` with ``offset``: a later window starts a bucket, the last one's kept beside it
        (the next window with ticks, whatever the silence between, is the one after it)."""
        if window > self.window:
            self.window, self.current, self.previous = window, offset, self.current
        else:
            self.current = min(self.current, offset)


class ReceiveClock:
    """Per stream, the smallest (read time - ts) its accepted ticks had lately (RecentMinimum): its offset to this
    machine's clock."""

    def __init__(self, window_s: float = OFFSET_WINDOW_S) -> None:
        self.window_ns = round(window_s * 1e9)
        self._offsets: dict[str, RecentMinimum] = {}

    def received_ns(self, stream: str, ts: int, read_ns: int) -> int | None:
        """When a tick of ``stream`` stamped ``ts`` and read at ``read_ns`` reached the service: ``read_ns`` less
        the wait its `ts` shows, for a stream stamped with the wall clock; None for any other (not dated)."""
        offset = min(self._offset(stream, read_ns - ts), read_ns - ts)
        if abs(offset) > WALL_CLOCK_S * 1e9:
            return None
        return min(read_ns, ts + offset)

    def arrived_ns(self, stream: str, ts: int, read_ns: int, idle_at_ns: int | None) -> int | None:
        """``received_ns``, no earlier than ``idle_at_ns``: when the server last found the engine idle with nothing
        waiting on ingest, so what its `ts` dates earlier waited upstream of the feed, not of this service (a late
        print of a venue the engine keeps up with arrived when read). When a tick reached the service, for its lag
        (tick_ingest.py) and for how long its stream has been quiet (`streams`' idle_s: review380 #3)."""
        received = self.received_ns(stream, ts, read_ns)
        if received is None or idle_at_ns is None:
            return received
        return min(read_ns, max(received, idle_at_ns))

    def accepted(self, stream: str, ts: int, read_ns: int) -> None:
        """A tick of ``stream`` the engine took: its offset kept (only for streams held: a flood of refused names
        costs nothing)."""
        held, window = self._offsets.get(stream), read_ns // self.window_ns
        if held is None:
            self._offsets[stream] = RecentMinimum(window, read_ns - ts)
        else:
            held.add(window, read_ns - ts)

    def offset_ns(self, stream: str) -> int | None:
        """``stream``'s offset (the smallest read time - ts of its recent accepted ticks: the wire's latency plus how
        far its clock runs behind this machine's, negative when it runs ahead), for a stream stamped with the wall
        clock or ahead of it by any amount (review351 #5: a clock minutes ahead, a broken NTP, was said nowhere,
        where 3 s ahead was; limits.max_ts_ahead_s bounds it); None for a stream of old data (a replay), or one not
        held. (`received_ns` keeps to WALL_CLOCK_S both ways: one tick stamped an hour ahead must not date every
        later tick of its stream an hour back.)"""
        offset = self._offset(stream, None)
        return None if offset is None or offset > WALL_CLOCK_S * 1e9 else offset

    def most_ahead(self, threshold_ns: int, n: int) -> dict[str, int]:
        """The ``n`` streams whose clocks run furthest ahead of this machine's, past ``threshold_ns``: name ->
        offset (ns, negative), furthest first (O(streams): for `health`, not the ingest path)."""
        ahead = [(held.offset, stream) for stream, held in self._offsets.items() if held.offset < -threshold_ns]
        return {stream: offset for offset, stream in sorted(ahead)[:n]}

    def offsets(self) -> dict[str, int]:
        """Every stream's offset (ns), to keep across a restart (clock_offsets.py)."""
        return {stream: held.offset for stream, held in self._offsets.items()}

    def restore(self, offsets: dict[str, int]) -> None:
        """Offsets kept at the last clean stop, each as the bucket of a window before any tick read now: a stream's
        next ticks lower it as ever, and it is forgotten as a stray stamp is, two windows with ticks on (a stream
        that ticked already keeps the offset it learnt since)."""
        for stream, offset in offsets.items():
            self._offsets.setdefault(stream, RecentMinimum(-1, offset))

    def _offset(self, stream: str, default: int | None) -> int | None:
        held = self._offsets.get(stream)
        return default if held is None else held.offset

    def drop(self, stream: str) -> None:
        """A stream expired or forgotten: its next ticks may come from another clock."""
        self._offsets.pop(stream, None)
