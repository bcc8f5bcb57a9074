"""Ctrl-C in a backtest called from Python (a notebook's interrupt is a SIGINT): the run stops at the next event-time
batch boundary after a checkpoint and raises BacktestInterrupted, as `flashtick backtest` does under a Ctrl-C, not
a KeyboardInterrupt from deep inside the loop with the work since the last checkpoint lost (review354 #7).

Taken only where Python's own handler has it (the main thread, SIGINT's handler `default_int_handler`: a plain
script's, and a Jupyter kernel's while a cell runs), and only once the replay begins (before it there is nothing to
keep: a KeyboardInterrupt ends the call at once). A handler someone else set (the CLI's own, cmd_backtest.py; a
host application's) is theirs and left alone. A second Ctrl-C raises KeyboardInterrupt where the run is, as at the
terminal; what the checkpoint holds is whole either way. Python's handler is put back when the run returns.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType


class CtrlCStop:
    """A stop request made by the first SIGINT once ``arm``ed: ``requested`` is what the run's `stop` polls."""

    def __init__(self, note: Callable[[str], None]) -> None:
        self.requested = False
        self._note = note
        self._armed = False

    def arm(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
            return
        signal.signal(signal.SIGINT, self._first)
        self._armed = True

    def _first(self, _signum: int, _frame: FrameType | None) -> None:
        self.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)  # the second: KeyboardInterrupt, where it is
        self._note("Ctrl-C: stopping at the next batch boundary, after a checkpoint (again to abort now)")

    def disarm(self) -> None:
        """Python's handler back (from ours, not from one the caller set meanwhile)."""
        if self._armed and signal.getsignal(signal.SIGINT) == self._first:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self._armed = False
