"""The `last_seqs` a heartbeat carries: {topic: last seq published}, so a loss at a topic's tail shows as a gap.

A subscriber past its high-water mark (or one reading slower than a stop lets it) loses the last answers of a
topic that then publishes nothing more: a gap shows only at the topic's next answer, which may never come (review376
#5: a slow subscriber held versions 94-175 as "latest" of streams that reached 200, with no gap at all). Each
heartbeat therefore carries the last seq of every topic published since the one before it, and, after each start,
of every topic the service holds, a page a heartbeat: the answers published in the stop's last moments that a slow
subscriber lost are named by the restarted service's first heartbeats. PUB keeps each subscriber's messages in
order, so a client that received every answer of a topic holds its `last_seqs` entry already; one that holds less
lost the rest and fetches it (`answers`, after its last seq).

A subscriber re-subscribes at its own pace (ZeroMQ retries every 100 ms; a loaded host takes longer), so it may
miss the first heartbeats: a sweep sent once, in heartbeat 1, was missed by 1 reconnecting subscriber in 3
(review444 #2). The sweep therefore goes round again, whole, while the round before it began within the start's
first SWEEP_REPEAT_S of heartbeats: a subscriber whose first heartbeat comes within them gets a whole round from it
on (with MOST_TOPICS_A_HEARTBEAT topics or fewer, each of those heartbeats names them all).
"""

from __future__ import annotations

import math
from collections.abc import Callable

# topics a heartbeat names at most (about 30 bytes each: 30 KiB); more wait for the next heartbeat, oldest first
MOST_TOPICS_A_HEARTBEAT = 1000
# the sweep begins again once a round is done while that round began before heartbeat SWEEP_REPEAT_S / heartbeat_s
# (10 at the default 1 s): every topic held is named, whole, from any of those heartbeats on
SWEEP_REPEAT_S = 10.0


class HeartbeatSeqs:
    """The topics published since the last heartbeat, and the sweep of every topic held since the start."""

    def __init__(self, topic_names: Callable[[], list[str]], last_seq: Callable[[str], int],
                 heartbeat_s: float) -> None:
        """``topic_names()``: every topic held, in name order, read at each round's start (a topic that begins later
        is published, and carried as such); ``last_seq(topic)``: its last seq, read when its page goes (the answer
        cache's ``topic_names`` and ``last_seq``); ``heartbeat_s``: the time between two heartbeats (limits')."""
        self._topic_names, self._last_seq = topic_names, last_seq
        self._published: dict[str, int] = {}  # topic -> its last seq published since the last heartbeat, in order
        self._sweep: list[str] = []  # the topics held at this round's start not carried yet, the next one last
        self._heartbeats = 0  # heartbeats taken since the start
        self.repeat_heartbeats = max(1, math.ceil(SWEEP_REPEAT_S / heartbeat_s))  # (SWEEP_REPEAT_S of them)
        self._round_began = 0  # the heartbeat that began the last round (0: none yet)

    def published(self, topic: str, seq: int) -> None:
        self._published.pop(topic, None)  # (to the end: the oldest waiting go first when there are too many)
        self._published[topic] = seq

    def take(self) -> dict[str, int]:
        """This heartbeat's `last_seqs`: the topics published since the last one (MOST_TOPICS_A_HEARTBEAT at most,
        the rest at the next), then a page of the sweep in the room left (a round begun at this heartbeat when the
        last is done and began before heartbeat ``repeat_heartbeats``: module docstring)."""
        self._heartbeats += 1
        carried: dict[str, int] = {}
        while self._published and len(carried) < MOST_TOPICS_A_HEARTBEAT:
            topic = next(iter(self._published))
            carried[topic] = self._published.pop(topic)
        room = MOST_TOPICS_A_HEARTBEAT - len(carried)
        if not self._sweep and room > 0 and self._round_began < self.repeat_heartbeats:
            # one sorted snapshot a round, not a sort of every topic at each heartbeat's page (popped from the end)
            self._sweep = self._topic_names()[::-1]
            self._round_began = self._heartbeats
        while self._sweep and room > 0:
            topic = self._sweep.pop()
            if topic not in carried and (seq := self._last_seq(topic)):
                carried[topic] = seq
                room -= 1
        return carried
