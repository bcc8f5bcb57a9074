"""How long a feed's send may wait while the engine pushes back: for as long as the engine reads this connection.

An engine behind its feed reads at its own pace, and the feed's send waits for room (back-pressure, ZeroMQ's
SNDHWM). ZeroMQ frees that room in batches (half the high-water mark at a time, behind the kernel's buffers), so a
send may wait many seconds while the engine reads all along: a time-out on one send ended a feed under a supervisor
exactly when the engine was slow, blaming a stopped service (review392 #2). The connection's own counter says
whether the engine reads: the bytes its end acknowledged (Linux's TCP_INFO), which grow only as the engine frees
its buffers by reading (once they are full). A send gives up once that count stood still for the time-out, and
where it cannot be read (not Linux, ipc://) once one send waited that long, as before.
"""

from __future__ import annotations

import socket
import sys

# struct tcp_info's tcpi_bytes_acked (Linux 4.1 and later): a u64 at this offset
BYTES_ACKED_AT, TCP_INFO_BYTES = 120, 136
WAIT_SAID_S = 5.0  # a send that has waited this long says so, and again at most every WAIT_SAID_EVERY_S
WAIT_SAID_EVERY_S = 30.0


def acked_bytes(fd: int | None) -> int | None:
    """The bytes the peer of the TCP connection ``fd`` has acknowledged; None where that cannot be read."""
    if fd is None or not hasattr(socket, "TCP_INFO"):
        return None
    try:  # (on a duplicate of ZeroMQ's descriptor: closing ours leaves its own open)
        with socket.fromfd(fd, socket.AF_INET, socket.SOCK_STREAM) as connection:
            info = connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_BYTES)
    except OSError:  # (not a TCP socket: ipc://; or closed meanwhile)
        return None
    if len(info) < BYTES_ACKED_AT + 8:
        return None
    return int.from_bytes(info[BYTES_ACKED_AT : BYTES_ACKED_AT + 8], sys.byteorder)


class SendWait:
    """One send's wait: when it began, when the engine was last seen reading, and when it was last said."""

    def __init__(self, fd: int | None, now: float) -> None:
        self.began = self.read_at = now
        self._acked = acked_bytes(fd)
        self._said_at: float | None = None

    @property
    def reads_seen(self) -> bool:
        """Whether the engine's reading can be seen on this connection (else only the time waited counts)."""
        return self._acked is not None

    def look(self, fd: int | None, now: float) -> None:
        """The connection ``fd`` looked at now: the engine read if its end acknowledged more bytes."""
        acked = acked_bytes(fd)
        if acked is not None and (self._acked is None or acked > self._acked):
            self.read_at = now
        self._acked = acked if acked is not None else self._acked

    def idle_s(self, now: float) -> float:
        """How long the engine has read nothing of this connection (how long the send waited, where unseen)."""
        return now - (self.read_at if self.reads_seen else self.began)

    def note(self, now: float, endpoint: str, timeout_s: float | None) -> str | None:
        """What to say of a wait of WAIT_SAID_S and more, at most every WAIT_SAID_EVERY_S; None when not due."""
        waited = now - self.began
        if waited < WAIT_SAID_S or (self._said_at is not None and now - self._said_at < WAIT_SAID_EVERY_S):
            return None
        self._said_at = now
        if timeout_s is None:
            until = "waiting for as long as it takes (no send time-out)"
        elif self.reads_seen:
            until = f"waiting while it reads (giving up once it reads nothing for {timeout_s:g} s)"
        else:
            until = f"giving up once one message waits {timeout_s:g} s (its reading cannot be seen here)"
        return (f"the engine at {endpoint} reads slower than this feed sends (back-pressure): this message has "
                f"waited {waited:.0f} s; {until}")
