"""A feed placed by `streams` (``drain: true``) takes no tick twice, whatever arrives late.

A `feed replay` killed and run again places itself after what the engine holds: the placing `streams` reads what is
queued on ingest first (IngestReading._read_before_placing). But what the killed feed sent may still be in the
kernels' socket buffers or in ZeroMQ's I/O thread when the reply goes (a loaded machine leaves it there for as long
as it likes): read after the reply, its ticks were taken, and the new feed, placed before them, sent them again,
those stamped at a stream's last `ts` taken twice (review234 #2, seen at load 30 to 80). No wait closes that race
(only the end of the dead feed's connection says its last byte came, and the engine cannot tell a dead feed's
connection from a live one until then), so the engine keeps where it placed the feed and sorts out what comes
late, by the feeds' message tags (FeedClient ``tag``; the placed feed's is the one the placing reply gives it):

* the placed feed's first ticks of a stream that took ticks after the placement (the dead feed's tail, read late)
  are those same ticks sent again: the first that many are left out, counted in ``placing_duplicates``;
* a tick from a feed read before the placement, of a stream the placed feed has begun sending, came after the
  ticks it would have been placed after: left out too (the placed feed sends it), counted the same way.

Both read the two feeds as one publisher of the stream, the one the docs allow (docs/wire-protocol.md): a second
live publisher of the same stream that began before the placement has its later ticks of it left out, counted per
feed and stream (``superseded``), which `streams` says, so that feed can tell its ticks went to no one (review411
#10: it waited 30 s for them and called them lost). The placed feed's own ticks left out as sent twice are counted
per feed and stream too (``sent_twice``), and said by `streams` alike: where the ticks taken after its placement were
a live feed's of the same stream, not a dead one's tail, they are its ticks lost, and its summary says them
(review430 #11: 1,101 quotes counted in no feed's summary).
"""

from __future__ import annotations

import secrets
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgpack

MAX_PLACEMENTS = 16  # placements watched at once (feeds placed in the last PLACEMENT_WATCH_S), the oldest dropped
MAX_TAGS_KEPT = 1024  # tags of the feeds read lately, the ones a placement reads as before it
# How long a placement is watched: what a dead feed left in flight is what the kernels' buffers and ZeroMQ's queues
# held when it died, read in seconds; minutes leave room for a loaded machine, and then the messages of the feeds
# it concerns stop being read twice (their stream names, streams_read: about a quarter of a 256-tick message's read)
PLACEMENT_WATCH_S = 300.0


@dataclass
class Placement:
    """One feed's placement: each stream's tick count in the reply that placed it (a stream absent held none, when
    ``complete``; unknown otherwise), the feeds read before it, and per stream what it has begun sending."""

    at: dict[str, int]
    complete: bool
    earlier: frozenset[str]
    until: float  # monotonic time the watch ends
    to_skip: dict[str, int] = field(default_factory=dict)  # stream -> the placed feed's ticks of it still to leave out
    # stream -> feed read before (its tag) -> its ticks of the stream left out, this feed sending the stream
    superseded: dict[str, Counter[str]] = field(default_factory=dict)
    sent_twice: Counter[str] = field(default_factory=Counter)  # stream -> the placed feed's ticks of it left out so


class PlacedFeeds:
    """The placements of the feeds that said their tag, and the ticks left out of them and of the feeds before."""

    def __init__(self) -> None:
        self._tags: OrderedDict[str, None] = OrderedDict()  # feeds' tags read, the most recent last
        self._placements: OrderedDict[str, Placement] = OrderedDict()  # placed feed's tag -> its placement

    def read(self, tag: str) -> None:
        """A message of the feed tagged ``tag`` was read."""
        self._tags[tag] = None
        self._tags.move_to_end(tag)
        if len(self._tags) > MAX_TAGS_KEPT:
            self._tags.popitem(last=False)

    def place(self, held: Mapping[str, dict[str, Any] | None], complete: bool) -> str:
        """A feed placed by a `streams` reply of ``held`` (every stream when ``complete``): the tag its messages are
        to carry (new: no feed read before carries it), under which the placement is kept."""
        tag = f"feed/placed.{secrets.token_hex(6)}"
        self._placements[tag] = Placement({name: entry["ticks"] for name, entry in held.items() if entry}, complete,
                                          frozenset(t for t in self._tags if t != tag),
                                          time.monotonic() + PLACEMENT_WATCH_S)
        if len(self._placements) > MAX_PLACEMENTS:
            self._placements.popitem(last=False)
        return tag

    def watches(self, tag: str | None) -> bool:
        """Whether the messages of the feed tagged ``tag`` are looked through (it, or a feed before it, was placed)."""
        if tag is None or not self._placements:
            return False
        now = time.monotonic()
        while self._placements and next(iter(self._placements.values())).until < now:
            self._placements.popitem(last=False)
        return any(tag == placed or tag in p.earlier for placed, p in self._placements.items())

    def kept(self, tag: str, streams: list[str | None], ticks_of: Callable[[str], int]) -> list[bool] | None:
        """Per item of a message of the feed tagged ``tag`` (``streams``: each one's stream, None where it names
        none), whether it goes on (False: a tick left out, counted); None when all do. ``ticks_of``: the engine's
        tick count of a stream now."""
        keep = [stream is None or not self._left_out(tag, stream, ticks_of) for stream in streams]
        return None if all(keep) else keep

    def _left_out(self, tag: str, stream: str, ticks_of: Callable[[str], int]) -> bool:
        # a feed read before a placement: superseded on the streams the placed feed has begun sending
        superseding = next((p for p in self._placements.values() if tag in p.earlier and stream in p.to_skip), None)
        if superseding is not None:
            superseding.superseded.setdefault(stream, Counter())[tag] += 1
            return True
        placed = self._placements.get(tag)
        if placed is None:
            return False
        if stream not in placed.to_skip:  # its first tick of the stream: what the stream took since the placement
            base = placed.at.get(stream, 0 if placed.complete else None)
            placed.to_skip[stream] = 0 if base is None else max(0, ticks_of(stream) - base)
        if placed.to_skip[stream]:
            placed.to_skip[stream] -= 1
            placed.sent_twice[stream] += 1
            return True
        return False


    def superseded(self, stream: str) -> dict[str, dict[str, Any]]:
        """Each feed read before a placement whose ticks of ``stream`` were left out since, the placed feed sending
        the stream: its tag -> {by: the placed feed's tag, ticks: how many}; {} when none (or no longer watched)."""
        return {tag: {"by": placed, "ticks": n} for placed, p in self._placements.items()
                for tag, n in p.superseded.get(stream, {}).items()}

    def sent_twice(self, stream: str) -> dict[str, int]:
        """Each placed feed whose first ticks of ``stream`` were left out as sent twice (as many as the stream took
        after its placement): its tag -> how many; {} when none (or no longer watched)."""
        return {placed: p.sent_twice[stream] for placed, p in self._placements.items() if p.sent_twice[stream]}


def streams_read(payload: bytes, renamed: Callable[[str], str]) -> list[str | None] | None:
    """Each item's stream (renamed) of a raw-tick message, None where it names none; None for a message that is no
    msgpack map or list (the pipeline says why). A plain read, in C: a watched feed's messages are read twice only
    where a tick of them is left out (the pipeline's own read checks every key)."""
    try:
        obj = msgpack.unpackb(payload, raw=False, strict_map_key=False, unicode_errors="surrogateescape")
    except Exception:  # (any malformed message: the pipeline's read refuses it, saying why)
        return None
    items = [obj] if isinstance(obj, dict) else obj if isinstance(obj, list) else None
    if items is None:
        return None
    streams = [item.get("stream") if isinstance(item, dict) else None for item in items]
    return [renamed(name) if type(name) is str else None for name in streams]
