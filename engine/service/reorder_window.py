"""`ingest.reorder_window_ms`: live ticks held per stream for a window of wall time and released in event-time order,
so a tick late by less than the window is placed among its stream's ticks, as file replay sorts a file's rows,
rather than refused as `ts_backwards` (review323 #3, #7). Raw ticks and pre-tokenized items are held alike, in one
order per stream: a stream fed both forms (or by two connectors) keeps its event-time order across them, and an item
released goes through its own form's ingest path.

A tick is held from when it is read. At each turn of the server's loop a stream whose oldest held tick has been held
the whole window releases every held tick stamped no later than the newest of those held that long, in `ts` order
(ties in the order read): a late tick read up to the window after a newer one goes out before it. What is released
keeps the tick groups the feed sent (review383 #1): each held tick remembers the message it came in, and the
released ticks are cut, in `ts` order, where one message's ticks end and no other message's are still to come, so an
in-order feed's messages are its stream's groups as they would be unheld (a `feed replay`'s event-time batches, the
groups its backtest answers at), and one feed's messages whose ticks interleave in time (a late tick) or share a
time make one group together, as the backtest's sort puts them in one batch; two feeds (tags) of one stream go out
in runs of one feed at a time (a group's rejections go to one topic, its numbers to one feed's `seq`). Each group
goes through the ordinary ingest path as one message, so every check, the tick log, the counters and the triggers
are the same as for ticks sent on time, however many groups one turn of the loop releases; a tick later than the
window still meets the ordering guard there. `reorder_max_ticks` bounds the memory: a tick held past it releases its
own stream's held ticks at once (in order). Nothing held is in the tick log yet: a stop releases every held tick
first (stop_drain.py), and so does a feed placing itself with `streams` (it must read what the engine holds).

A raw tick without `seq` read after a newer one of its stream that is an exact copy of one held from an earlier
message is a resend of its feed (a venue reconnect's snapshot), not a late tick: it is refused as `ts_backwards`, as
it would be unheld, rather than placed beside its original and taken twice (review431 #3). A numbered one is held,
its `seq` drops it as a duplicate when released.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, NamedTuple


class HeldTick(NamedTuple):
    ts: int
    order: int  # read order, the tie-break: equal stamps go out as they came
    read_ns: int
    obj: dict[str, Any]  # the wire tick map as read (after ingest.rename)
    tag: str | None  # the topic its message came under on a feed (its rejections go back there)
    index: int  # its index in the message it came in: a rejection names that, as it would have unheld
    message: int  # the message it came in (numbered as read): its tick group, released
    tokenized: bool = False  # a pre-tokenized item (its map as read), released through the tokenized path


class Release(NamedTuple):
    """Held ticks of one stream going to the engine together, one tick group, in event-time order, all read under
    one tag and all of one wire form (raw ticks, or ``tokenized`` items)."""

    stream: str
    tag: str | None
    ticks: list[HeldTick]
    tokenized: bool = False


class ReorderWindow:
    """The held ticks, per stream, in read order."""

    def __init__(self, window_ns: int, max_ticks: int) -> None:
        self.window_ns = window_ns
        self.max_ticks = max_ticks
        self._held: dict[str, list[HeldTick]] = {}
        self._count = 0
        self._order = 0
        self._messages = 0
        self.placed = 0  # ticks read after a newer one of their stream and released before it (late, placed)
        self.released_early = 0  # ticks released before their window was up (reorder_max_ticks reached)

    def __len__(self) -> int:
        return self._count

    def next_message(self) -> int:
        """The number of a message read now, whose ticks are held with it (hold's ``message``)."""
        self._messages += 1
        return self._messages

    def hold(self, stream: str, ts: int, obj: dict[str, Any], tag: str | None, index: int, now_ns: int,
             message: int, tokenized: bool = False) -> list[Release]:
        """Hold one tick of ``message`` (next_message's; ``tokenized``: a pre-tokenized item); what the bound makes
        go at once (its stream's held ticks, it among them), else []."""
        held = self._held.setdefault(stream, [])
        if any(t.ts > ts for t in held):
            self.placed += 1
        self._order += 1
        held.append(HeldTick(ts, self._order, now_ns, obj, tag, index, message, tokenized))
        self._count += 1
        if self._count <= self.max_ticks:
            return []
        self.released_early += len(held)
        return self._release(stream, len(held))

    def resent_behind(self, stream: str, ts: int, obj: dict[str, Any], message: int) -> int | None:
        """The newest held ts of ``stream`` when ``obj`` (a raw tick without `seq`, of ``message``) is stamped before
        it and copies a tick held from an earlier message (a resend: the module docstring); None otherwise."""
        held = self._held.get(stream, ())
        newest = max((t.ts for t in held), default=ts)
        if newest > ts and any(t.ts == ts and t.message != message and not t.tokenized and t.obj == obj
                               for t in held):
            return newest
        return None

    def due(self, now_ns: int) -> list[Release]:
        """What has been held the whole window by ``now_ns``, with every tick it must not pass."""
        out: list[Release] = []
        for stream in [s for s, held in self._held.items() if held[0].read_ns + self.window_ns <= now_ns]:
            held = self._held[stream]
            waited = next((i for i, t in enumerate(held) if t.read_ns + self.window_ns > now_ns), len(held))
            out += self._release(stream, waited)
        return out

    def flush(self) -> list[Release]:
        """Every held tick, in order (a stop, or a feed placing itself)."""
        out: list[Release] = []
        for stream in list(self._held):
            out += self._release(stream, len(self._held[stream]))
        return out

    def next_due_ns(self) -> int | None:
        """When the next stream's window is up (the loop waits no longer for messages); None when none is held."""
        oldest = min((held[0].read_ns for held in self._held.values()), default=None)
        return None if oldest is None else oldest + self.window_ns

    def _release(self, stream: str, waited: int) -> list[Release]:
        """The first ``waited`` ticks held (read order) and every held tick stamped no later than the newest of
        them, sorted; the rest stays held. Cut into the feed's tick groups (the module docstring), and where the
        tag or the wire form changes (a release's rejections go to one topic, through one form's path)."""
        held = self._held.pop(stream)
        cut = max(t.ts for t in held[:waited])
        going = sorted((t for t in held if t.ts <= cut), key=lambda t: (t.ts, t.order))
        kept = [t for t in held if t.ts > cut]
        if kept:
            self._held[stream] = kept
        self._count -= len(going)
        left = Counter(t.message for t in going)  # each message's ticks not placed in a group yet
        releases: list[Release] = []
        unfinished: set[int] = set()  # the open group's messages with ticks still to come: it cannot end yet
        for tick in going:
            # a group goes on while one of its messages has ticks to come, or at its last tick's `ts` (two messages
            # at one time are in one batch of the backtest's too); one feed (tag) and one wire form a group
            if releases and (releases[-1].tag, releases[-1].tokenized) == (tick.tag, tick.tokenized) \
                    and (unfinished or tick.ts == releases[-1].ticks[-1].ts):
                releases[-1].ticks.append(tick)
            else:
                releases.append(Release(stream, tick.tag, [tick], tick.tokenized))
                unfinished = set()
            left[tick.message] -= 1
            if left[tick.message]:
                unfinished.add(tick.message)
            else:
                unfinished.discard(tick.message)
        return releases
