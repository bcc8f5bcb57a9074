"""What waits unread at the ingest socket, before any tick of it is decoded or tokenised (review376 #6: heartbeats
said `pending_tokens: 0` through an 80 s backlog, the burst waiting in the connections' kernel buffers).

ZeroMQ moves a connection's bytes into the PULL socket's small queue (32 messages) only as it is read, and says
nothing of the rest. On Linux the kernel does: /proc/net/tcp and tcp6 list each connection's receive queue (bytes
arrived, not read) and send queue (bytes written, not yet acknowledged by the peer). For the ingest port, the
bytes waiting are the receive queues of its accepted connections or, for a sender on this host, the send queue of
the sender's end of one where it is the larger (bytes received stay in it until acknowledged). What a sender's own
ZeroMQ queue holds (up to its SNDHWM), a sender's kernel buffers on another host, and the received part of a local
sender's send queue once acknowledged, are not seen: a lower bound. None where nothing can be read (not Linux, not
tcp://).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from connectors.tcp_endpoints import endpoint_host

PROC_TCP, PROC_TCP6 = Path("/proc/net/tcp"), Path("/proc/net/tcp6")
# the connections whose receive queues hold a feed's bytes: open ones, and those whose sender closed (a feed that
# exited leaves what it sent unread in them, read after it: review392 #1, ~14,000 messages left unsaid), whose
# queue counts the sender's FIN as a byte until it is read
ESTABLISHED, CLOSE_WAIT = "01", "08"
SHORT_FRAME_BYTES = 255  # ZMTP 3 frames a body up to this with a 2-byte header (flags, size), a longer one with 9


def wire_bytes(frames: list[bytes]) -> int:
    """The bytes a message of ``frames`` takes on a plain (not CURVE) ZMTP connection: what the kernel counts."""
    return sum(len(frame) + (2 if len(frame) <= SHORT_FRAME_BYTES else 9) for frame in frames)


def tcp_port(endpoint: str) -> int | None:
    """The port of a bound ``tcp://host:port`` endpoint; None for any other transport."""
    if not endpoint.startswith("tcp://"):
        return None
    try:
        return int(endpoint.rsplit(":", 1)[1])
    except ValueError:
        return None


def _tables(endpoint: str) -> tuple[Path, ...]:
    """The /proc tables that can list the connections to a bound ``tcp://`` endpoint: an IPv4 address's accepts
    IPv4 connections only, an IPv6 address's (IPv4-mapped ones included) are all in tcp6; a wildcard or a name,
    both. Each read walks every bucket of the host's TCP hash table, however few its sockets (~4 ms of CPU a table
    on a 2-core host of 262,144 buckets), and heartbeats and `stats` read them: one table where one will do."""
    try:  # (an IPv6 address is what the service binds with ZMQ_IPV6: connectors/tcp_endpoints.ipv6_for)
        version = ipaddress.ip_address(endpoint_host(endpoint) or "").version
    except ValueError:
        return PROC_TCP, PROC_TCP6
    return (PROC_TCP,) if version == 4 else (PROC_TCP6,)


def unread_bytes(endpoint: str) -> int | None:
    """Bytes this host's kernel holds for the connections to a bound ingest ``endpoint`` that its reader has not
    read yet; None for an endpoint that is not ``tcp://`` or when /proc/net/tcp cannot be read."""
    port = tcp_port(endpoint)
    if port is None:
        return None
    rows: list[tuple[str, str, int, int]] = []  # (local, remote, tx_queue, rx_queue) of the readable connections
    readable = False
    port_field = f":{port:04X} "  # an address's port, as /proc writes it (the queues' hex fields are 8 digits)
    for path in _tables(endpoint):
        try:
            lines = path.read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for line in lines:
            if port_field not in line:  # neither end is the ingest port: most of a busy host's sockets, not split
                continue
            fields = line.split()
            if len(fields) < 5 or fields[3] not in (ESTABLISHED, CLOSE_WAIT):
                continue
            tx, rx = fields[4].split(":")
            rx_bytes = int(rx, 16) if fields[3] == ESTABLISHED else max(0, int(rx, 16) - 1)  # (the FIN: 0 once read)
            rows.append((fields[1], fields[2], int(tx, 16), rx_bytes))
    if not readable:
        return None
    # a sender on this host: its end of an accepted connection is the row with the two addresses swapped. Its send
    # queue keeps the bytes the receiving end holds until their acknowledgment reaches it (a delayed ACK; on a loaded
    # host, long after: the sum then counted up to 19% more messages than were sent), so the two queues of one
    # connection may hold the same bytes: the larger is what it surely holds
    sent = {(remote, local): tx for local, remote, tx, _ in rows}
    return sum(max(rx, sent.get((local, remote), 0)) for local, remote, _, rx in rows
               if int(local.rsplit(":", 1)[1], 16) == port)
