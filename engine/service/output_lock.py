"""One writer per output: an exclusive flock on a lock file, the holder's pid written inside, so a second run on
the same output is refused at once naming the first (`backtest`'s OUT.parts/lock, `train`'s --out/.lock).

The kernel drops a flock when its process ends, so a lock file left by a run that is gone (kill -9) never blocks.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple


class OutputInUse(FileExistsError):
    """Another running process, or another thread's run in this one, holds the output's lock."""


class LockHolder(NamedTuple):
    """The run holding an output's lock, as a refusal names it."""

    pid: str  # " (pid N)"; "" when its pid cannot be read
    stop: str  # how to stop it: "kill -TERM N"; "SIGTERM" when its pid cannot be read
    # another thread's run in this very process (a notebook's two run_backtest calls): a signal would stop both
    this_process: bool


def take_lock(path: Path, refusal: Callable[[LockHolder], str]) -> int | None:
    """This process's exclusive lock on the file ``path``, its pid written inside: the open descriptor, which holds
    the lock until closed (a flock is an open file's: another thread opening it here is refused as another process
    is). OutputInUse while another run holds it, its text ``refusal(holder)``; None when the folder went away
    meanwhile, or the file was replaced before it was locked (the holder finished and removed it): the caller
    takes it again."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 64).decode(errors="replace").strip()
        os.close(fd)
        pid, stop = (f" (pid {holder})", f"kill -TERM {holder}") if holder.isdigit() else ("", "SIGTERM")
        raise OutputInUse(refusal(LockHolder(pid, stop, holder == str(os.getpid())))) from None
    try:  # the lock is on the file we opened: if the holder removed it before we locked, it is no one's
        still_there = os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        still_there = False
    if not still_there:
        os.close(fd)
        return None
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
    except OSError:  # a disk with no byte free: the lock is given back and its file removed, not left behind
        path.unlink(missing_ok=True)
        os.close(fd)
        raise
    return fd
