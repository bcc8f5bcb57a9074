"""A client's connection monitor must never block ZeroMQ's I/O thread.

libzmq sends monitor events from its I/O thread with a blocking send: a monitor nobody reads fills its queue
(a client whose service is down reports a retried connection every reconnect interval) and then blocks that
thread for good, and with it every socket of the context. A CI run hung that way: a demo's own server, feed
and subscriber, in a test process holding an idle client from an earlier test, never connected.
"""

from __future__ import annotations

import socket
import time

import zmq

from connectors.handshake import HandshakeMonitor


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_idle_clients_unread_monitor_does_not_freeze_the_context() -> None:
    context = zmq.Context()  # its own: were the I/O thread blocked, the rest of this process's sockets stay well
    idle = context.socket(zmq.DEALER)
    idle.linger = 0
    idle.reconnect_ivl = 1  # ms: a refused connection retried (and reported) a thousand times a second
    monitor = HandshakeMonitor(idle, curve=False)
    idle.connect(f"tcp://127.0.0.1:{_closed_port()}")
    # past the monitor queue's 1,000 messages, never read by the idle client: the drain has counted more than that
    # (without a drain nothing is counted, and after 3 s, ~3,000 retries, the context would be blocked)
    deadline = time.monotonic() + 3
    while monitor.connect_retries <= 1_000 and time.monotonic() < deadline:
        time.sleep(0.05)
    pull = context.socket(zmq.PULL)
    push = context.socket(zmq.PUSH)
    for sock in (pull, push):
        sock.linger = 0
    push.connect(f"tcp://127.0.0.1:{pull.bind_to_random_port('tcp://127.0.0.1')}")
    push.send(b"tick")
    delivered = pull.poll(5000)
    # before the fix the context's I/O thread was blocked: leave it, closing it would hang this test
    assert delivered, "a new connection in the same context never completed: the I/O thread is blocked"
    assert pull.recv() == b"tick"
    assert monitor.connect_retries > 100  # taken by the process's drain: the idle client made no call
    monitor.close()
    for sock in (idle, pull, push):
        sock.close()
    context.term()
