"""How far a start has read a log, said as its phase (`health`'s `phase`, `/readyz`'s): `reading the answer log:
12,582,912 of 67,180,669 bytes`. A restart on a big data directory spends most of its time reading its logs (review380
#6: a 3,000-name scanner's 67 MB answer log read for ~50 s while `/readyz` said "loading the model"), so a supervisor
sees which phase and how far, not a start that seems hung."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from engine.service.log_format import HEADER, segments

SAY_EVERY_S = 0.5  # the phase text is rewritten at most this often (a str assignment another thread reads)
CHECK_EVERY = 1024  # records between looks at the clock


class LogReadProgress:
    """``what`` (the phase's name) with the bytes of the log read so far out of its segments' total, told to
    ``say`` (StartingReplies.said) when it starts and then at most every SAY_EVERY_S."""

    def __init__(self, what: str, directory: Path, prefix: str, say: Callable[[str], None]) -> None:
        self.what, self._say = what, say
        self.total = sum(_size(path) for _, path in segments(Path(directory), prefix))
        self.done = 0
        self._records = 0
        self._next_at = time.monotonic() + SAY_EVERY_S
        say(self.text)

    @property
    def text(self) -> str:
        return f"{self.what}: {min(self.done, self.total):,} of {self.total:,} bytes"

    def read(self, payload_bytes: int) -> None:
        """One record read (its payload's length: the header is counted here)."""
        self.done += HEADER.size + payload_bytes
        self._records += 1
        if self._records % CHECK_EVERY == 0 and (now := time.monotonic()) >= self._next_at:
            self._next_at = now + SAY_EVERY_S
            self._say(self.text)


    def finished(self) -> None:
        """The whole log read: said so (its last figure, all of it), before the next phase's."""
        self.done = max(self.done, self.total)
        self._say(self.text)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:  # (dropped by retention between the listing and the look)
        return 0
