"""Since when the messages an ingest socket holds unread have waited: the pipeline's ``ingest_unread_s``, which
`lag_s`, `behind` and `when_behind: shed` read (a tick read off the queue, its ts not dating it, waited that long:
lag_check.py).

ZeroMQ says neither when a message arrived nor how many wait, and the engine reads at its own pace: under load a
burst waits unread, mostly in the connection's kernel buffers, and is read just before it is computed. Two bounds
are kept (review392 #1: ticks that had waited 19-34 s unread were accepted under `max_lag_s: 2`):
* what a turn of the loop finds on a socket came after the socket was last found empty (a poll after a forward
  that found nothing, a read that emptied it): its wait counts from there, told to the pipeline before the read
  (counted from the turn that found it, and told after it, a burst read after a forward was weighed without that
  forward's worth of wait). A read that empties the socket's small queue (32 messages) says little, though: ZeroMQ
  refills it from the kernel's buffers as it is read, and a reader that outruns ZeroMQ's I/O thread finds it empty
  with thousands of messages behind (20,000, in the review's run, the clock saying 2 s);
* so while a socket holds messages at every poll, the kernel is asked (unread_ingest.py: ~5 ms of CPU, at most
  every MARK_EVERY_S) how many bytes wait: every byte up to those read so far plus those had arrived by then, so
  until the reading passes that mark, the message read next waited at least since the mark.
The wait is the longer of the two. Messages dated by their ticks' ts (a stream stamped with the wall clock:
receive_clock.py) say their own wait: what waits behind the newest of them came no earlier.
"""

from __future__ import annotations

from collections import deque
from typing import Callable

MARK_EVERY_S = 0.25  # the kernel's unread bytes looked up at most this often a socket, while it holds messages
MARKS_KEPT = 256  # marks not yet read past (a minute's backlog at MARK_EVERY_S; past it the oldest still bounds)


class UnreadClock:
    """One ingest socket's: since when (time.time()) its oldest unread message has waited. ``kernel_view``: the
    bytes this host's kernel holds unread for the socket's connections (None: not to be seen)."""

    def __init__(self, now: float, kernel_view: Callable[[], int | None] | None = None) -> None:
        self.since: float | None = None  # None: nothing found unread since the socket was last found empty
        self._empty_at = now
        self._kernel_view = kernel_view
        self._held_since: float | None = None  # the first poll that found messages since one found none
        self._marked_at = float("-inf")
        self._marks: deque[tuple[float, int]] = deque()  # (time, bytes that had arrived by then), oldest first
        self.read_bytes = 0  # wire bytes read off the socket (unread_ingest.wire_bytes)

    def found(self, now: float) -> None:
        """Messages found on the socket at a poll: they came after it was last found empty; the kernel's view
        marked when it has held messages at every poll for MARK_EVERY_S."""
        if self.since is None:
            self.since = self._empty_at
        if self._held_since is None:
            self._held_since = now
        if self._kernel_view is not None and now - max(self._held_since, self._marked_at) >= MARK_EVERY_S:
            self._marked_at = now
            unread = self._kernel_view()
            if unread and len(self._marks) < MARKS_KEPT:
                self._marks.append((now, self.read_bytes + unread))

    def read(self, wire_bytes: int) -> None:
        """A message read off the socket: the marks it reads past no longer bound the wait."""
        self.read_bytes += wire_bytes
        while self._marks and self._marks[0][1] <= self.read_bytes:
            self._marks.popleft()

    def emptied(self, now: float) -> None:
        """The socket's queue read to its end (what the kernel may hold behind it is the marks')."""
        self.since, self._empty_at = None, now

    def found_empty(self, now: float) -> None:
        """A poll after a forward found nothing: ZeroMQ had the forward's while to refill the queue."""
        self.emptied(now)
        self._held_since = None
        self._marks.clear()

    def dated(self, received_s: float) -> None:
        """The newest message read was dated by its ticks' ts: it reached the service at ``received_s``, and what
        waits behind it came no earlier (until a turn finds the socket empty after a forward)."""
        self.since = received_s

    def waiting_since(self) -> float | None:
        """Since when the message read next has waited, at the longer of the two bounds; None when none waits."""
        marked = self._marks[0][0] if self._marks else None
        return marked if self.since is None else self.since if marked is None else min(self.since, marked)


def unread_wait_s(clocks: list[UnreadClock], now: float) -> float:
    """How long the oldest message unread on any of the sockets' ``clocks`` has waited; 0 when none waits."""
    waiting = [since for clock in clocks if (since := clock.waiting_since()) is not None]
    return max(0.0, now - min(waiting)) if waiting else 0.0
