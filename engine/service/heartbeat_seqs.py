"""The `last_seqs` a heartbeat carries: {topic: last seq published}, so a loss at a topic's tail shows as a gap.

A subscriber past its high-water mark (or one reading slower than a stop lets it) loses the last answers of a
topic that then publishes nothing more: a gap shows only at the topic's next answer, which may never come (review376
#5: a slow subscriber held versions 94-175 as "latest" of streams that reached 200, with no gap at all). Each
heartbeat therefore carries the last seq of every topic published since the one before it, and, after each start,
of every topic the service holds, a page a heartbeat, until each has been carried once: the answers published in
the stop's last moments that a slow subscriber lost are named by the restarted service's first heartbeats. PUB
keeps each subscriber's messages in order, so a client that received every answer of a topic holds its `last_seqs`
entry already; one that holds less lost the rest and fetches it (`answers`, after its last seq).
"""

from __future__ import annotations

from collections.abc import Callable

# topics a heartbeat names at most (about 30 bytes each: 30 KiB); more wait for the next heartbeat, oldest first
MOST_TOPICS_A_HEARTBEAT = 1000


class HeartbeatSeqs:
    """The topics published since the last heartbeat, and the sweep of every topic held since the start."""

    def __init__(self, topic_names: Callable[[], list[str]], last_seq: Callable[[str], int]) -> None:
        """``topic_names()``: every topic held, in name order, read once at the sweep's start (a topic that begins
        later is published, and carried as such); ``last_seq(topic)``: its last seq, read when its page goes (the
        answer cache's ``topic_names`` and ``last_seq``)."""
        self._topic_names, self._last_seq = topic_names, last_seq
        self._published: dict[str, int] = {}  # topic -> its last seq published since the last heartbeat, in order
        self._sweep: list[str] | None = None  # the topics held at the sweep's start, those not carried yet
        self._swept = False  # every topic held at the start has been carried once

    def published(self, topic: str, seq: int) -> None:
        self._published.pop(topic, None)  # (to the end: the oldest waiting go first when there are too many)
        self._published[topic] = seq

    def take(self) -> dict[str, int]:
        """This heartbeat's `last_seqs`: the topics published since the last one (MOST_TOPICS_A_HEARTBEAT at most,
        the rest at the next), then a page of the sweep in the room left."""
        carried: dict[str, int] = {}
        while self._published and len(carried) < MOST_TOPICS_A_HEARTBEAT:
            topic = next(iter(self._published))
            carried[topic] = self._published.pop(topic)
        room = MOST_TOPICS_A_HEARTBEAT - len(carried)
        if not self._swept and room > 0:
            if self._sweep is None:  # one sorted snapshot, not a sort of every topic at each heartbeat's page
                self._sweep = self._topic_names()[::-1]  # (popped from the end: name order)
            while self._sweep and room > 0:
                topic = self._sweep.pop()
                if topic not in carried and (seq := self._last_seq(topic)):
                    carried[topic] = seq
                    room -= 1
            self._swept = not self._sweep
        return carried
