"""A long command's progress through its phases (`flashtick train`: reading, training, calibrating, scoring), as
the other commands show theirs: on a terminal a bar per phase; on a pipe or a log file a line as each phase begins
and one every PROGRESS_EVERY_S while it runs; nothing under --quiet or --json. A run of `train --max-minutes 2`
was silent for 4.5 minutes after its training had ended (review325 #10): each phase now says itself.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

PROGRESS_EVERY_S = 10.0  # a line this often on a pipe, as the replay's notes on a slow read come


class PhaseProgress:
    """One phase's count of its units done out of ``total``: tqdm's `update`, `set_postfix_str` and `close`, so
    the training loop's bar is one of these."""

    def __init__(self, what: str, total: int, unit: str, mode: str, write: Callable[[str], None],
                 now: Callable[[], float] = time.monotonic) -> None:
        """``mode``: "bar" (a terminal), "lines" (a pipe) or "quiet"; ``write``: where a line goes."""
        self.what, self.total, self.unit, self.done = what, total, unit, 0
        self._write, self._now, self._postfix = write, now, ""
        self._started = self._said = now()
        self._bar: Any = None
        if mode == "bar":
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=what, unit=f" {unit}", file=sys.stderr)
        elif mode == "lines":
            write(f"{what}: {total:,} {unit}")
        self._lines = mode == "lines"

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._lines and (at := self._now()) - self._said >= PROGRESS_EVERY_S:
            self._said = at
            self._write(f"{self.what}: {self.done:,} of {self.total:,} {self.unit} ({at - self._started:.0f} s)"
                        f"{self._postfix}")

    def set_postfix_str(self, text: str) -> None:
        self._postfix = f", {text}" if text else ""
        if self._bar is not None:
            self._bar.set_postfix_str(text)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def phase_mode(quiet: bool, json: bool, interactive: bool) -> str:
    """How a command with --quiet and --json shows its phases on stderr (``interactive``: a terminal)."""
    return "quiet" if quiet or json else "bar" if interactive else "lines"
