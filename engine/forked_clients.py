"""Clients used in a fork()ed child (review421 #1): multiprocessing's default start method on Linux forks, and a
child given the parent's ControlClient or AnswerSubscriber got a copy of sockets whose ZeroMQ I/O thread exists
only in the parent: a `recv` or `call` hung past its time-out, a send went nowhere. Each client notes the process
that made it and refuses to be used in another, with the fix in the error. Here in the engine's core, below the
connectors, so that every client of the package (the feed's too) can share it."""

from __future__ import annotations

import os


class UsedAfterFork(RuntimeError):
    """A client was used in a process forked from the one that made it: its sockets do not work there."""


class CreatingProcess:
    """The process a client was made in; ``check`` raises UsedAfterFork in any other (a fork()ed child)."""

    __slots__ = ("pid", "what")

    def __init__(self, what: str) -> None:
        self.pid = os.getpid()
        self.what = what

    @property
    def forked(self) -> bool:
        return os.getpid() != self.pid

    def check(self) -> None:
        if self.forked:
            raise UsedAfterFork(
                f"{self.what} was made in process {self.pid} and is used in process {os.getpid()}, forked from it "
                f"(multiprocessing's default start method on Linux): ZeroMQ sockets do not work across fork(), so it "
                f"would hang or send nowhere. Make the client in the process that uses it (in the child's target "
                f"function), or start children with multiprocessing.get_context('spawn')")
