"""A spell of ticks refused because a log of the data directory could not be written (a full disk, a file size
limit): counted while it lasts and said in one line once a tick is accepted again, as `behind` has `caught up`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from engine.disk_full import free_bytes

# free space under which a write that fit is taken for one that used a full disk's last bytes, not for room again:
# on a full disk a record smaller than the one refused often fits (review412 #4: "writable again after 0.0 s" a
# millisecond after a short write, with 0 KiB free, and ticks refused again at once)
ROOM_BYTES = 64 << 10
ROOM_CHECK_S = 1.0  # the free space looked at most this often while a spell lasts (a statvfs is ~13 us a tick)


class RefusalSpell:
    """A stretch of ticks refused because a log could not be written (a full disk, a file size limit): once a tick
    is accepted again the log says for how long and how many were refused, as `behind` has `caught up`."""

    def __init__(self, root: Path) -> None:
        self.root = root  # the data directory: its file system's free space tells a disk with room again
        self.since: float | None = None  # monotonic time of the first refusal of the spell
        self.ticks = 0
        self.logs: list[str] = []  # which logs refused, in order ("tick log", "answer log")
        self._room_checked = -ROOM_CHECK_S  # monotonic time the free space was last looked at

    def refused(self, log: str, ticks: int) -> None:
        if self.since is None:
            self.since = time.monotonic()
        self.ticks += ticks
        if log not in self.logs:
            self.logs.append(log)

    def accepted(self) -> None:
        if self.since is None or (now := time.monotonic()) - self._room_checked < ROOM_CHECK_S:
            return
        self._room_checked = now
        free = free_bytes(self.root)
        if free is not None and free < ROOM_BYTES:  # still full: the spell goes on, and its end is said later
            return
        logs = " and the ".join(self.logs)
        print(f"flashtick: the {logs} {'are' if len(self.logs) > 1 else 'is'} writable again after "
              f"{time.monotonic() - self.since:.1f} s; {self.ticks} ticks were refused meanwhile (log_unavailable: "
              f"lost unless their senders send them again)", file=sys.stderr, flush=True)
        self.since, self.ticks, self.logs = None, 0, []
