"""Which streams are behind: each stream's backlog (ticks and tokens waiting for a forward, and how long the oldest
has waited) in `streams`, the longest-waiting few in `stats` and /metrics (review285 #1: `lag_s` said that data
waited, not that the five busiest names were minutes later than the rest)."""

from __future__ import annotations

import functools
import socket

import zmq

from conftest import tiny_tick_checkpoint
from connectors.ticks import encode, trade
from engine.service.config import ServiceConfig
from engine.service.heartbeat import _longest_waiting, where_the_backlog_is
from engine.service.metrics_text import render
from engine.service.pipeline import LONGEST_WAITING_SAID, TickPipeline
from engine.service.unread_clock import MARK_EVERY_S, UnreadClock, unread_wait_s
from engine.service.unread_ingest import unread_bytes, wire_bytes
from test_service_limits import wait_for

T0 = 1_700_000_000_000_000_000
TCP_CLOSE_WAIT = 8  # (tcp_info's state: the peer closed, what it sent still unread)


def test_streams_stats_and_metrics_say_what_of_each_stream_waits(tmp_path) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "model", seed=1)
    pipeline = TickPipeline(ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "log": {"enabled": False}}))
    # a busy stream's 300 ticks first, then 8 quiet streams' one each: nothing computed yet
    for m in range(30):
        assert pipeline.ingest_message(encode([trade("HOT", T0 + m * 10 + k, 100.0 + k * 0.01, 1.0)
                                               for k in range(10)])) == []
    quiet = [f"Q{j}" for j in range(8)]
    for j, name in enumerate(quiet):
        assert pipeline.ingest_message(encode(trade(name, T0 + 10_000 + j, 50.0, 1.0))) == []
    hot = pipeline.backlog_of("HOT")
    assert hot["waiting_ticks"] == 300 and hot["waiting_tokens"] == pipeline.engine.scheduler.pending_tokens_of("HOT")
    assert hot["waiting_tokens"] >= 300 and hot["waiting_s"] >= 0.0
    assert pipeline.backlog_of("Q3")["waiting_ticks"] == 1
    assert pipeline.backlog_of("NEVER.SEEN") == {}  # (not held: `streams` says nil, as for the context)
    longest = pipeline.stats()["longest_waiting"]
    assert list(longest) == ["HOT", *quiet[: LONGEST_WAITING_SAID - 1]]  # the oldest waiting data first
    assert longest["HOT"]["waiting_ticks"] == 300
    text = render({**pipeline.stats(), "stats_time": 0.0})
    assert 'flashtick_stream_waiting_ticks{stream="HOT"} 300' in text
    assert text.count("flashtick_stream_waiting_seconds{") == LONGEST_WAITING_SAID
    said = _longest_waiting(longest)  # (the log's behind line ends with it)
    assert said.startswith("; waiting longest: HOT ") and "(300 ticks)" in said
    pipeline.run_until_idle()
    assert pipeline.backlog_of("HOT") == {"waiting_ticks": 0, "waiting_tokens": 0, "waiting_s": 0.0}
    assert pipeline.stats()["longest_waiting"] == {}
    text = render({**pipeline.stats(), "stats_time": 0.0})
    assert "# TYPE flashtick_stream_waiting_seconds gauge" in text and "flashtick_stream_waiting_seconds{" not in text


def test_the_behind_line_says_where_the_backlog_waits() -> None:
    """Review379 #12: `behind: 0 tokens wait for a forward ..., the oldest data for 5.7 s` while the backlog was
    unread at the ingest socket, where accepted tokens are not counted yet. The line says it, with the socket's
    unread messages and bytes (stats' unread_*), beside the accepted tokens, or that it cannot see them."""
    assert where_the_backlog_is(0, 1200, 96_000) == ("the backlog waits unread: about 1,200 messages, 96,000 bytes "
                                                      "unread at the ingest socket (read at the engine's pace)")
    assert where_the_backlog_is(5000, 3, 240).startswith("besides them, about 3 messages, 240 bytes unread at")
    assert where_the_backlog_is(5000, 0, 0) == "nothing waits unread at the ingest socket"
    assert "the backlog is in the socket's small queue or the senders' own queues" in where_the_backlog_is(0, 0, 0)
    assert "not seen here" in where_the_backlog_is(0, None, None)


def test_the_unread_backlog_reads_only_the_kernel_table_that_can_list_the_ingest_connections() -> None:
    """Each read of /proc/net/tcp or tcp6 walks the host's whole TCP hash table (~4 ms of CPU a table on a 2-core
    host, however few its sockets), and every heartbeat and `stats` read both: an IPv4 ingest address's
    connections are all in tcp, an IPv6 one's in tcp6; a wildcard or a name may be in either; ipc:// has none."""
    from engine.service.unread_ingest import PROC_TCP, PROC_TCP6, _tables, unread_bytes

    assert _tables("tcp://127.0.0.1:5555") == (PROC_TCP,)
    assert _tables("tcp://[::1]:5555") == (PROC_TCP6,)
    assert _tables("tcp://*:5555") == _tables("tcp://localhost:5555") == (PROC_TCP, PROC_TCP6)
    assert unread_bytes("ipc:///tmp/ingest") is None and unread_bytes("tcp://127.0.0.1:0x") is None


def test_a_read_that_empties_the_ingest_queue_keeps_the_wait_of_what_the_kernel_still_holds() -> None:
    """Review392 #1: ZeroMQ's queue (32 messages) refills from the connection's kernel buffers as it is read, so a read
    that emptied it started the unread clock again while 20,000 messages waited behind it, and ticks unread for
    19-34 s were weighed as fresh. While the socket holds messages at every poll the kernel's view is marked: what
    had arrived by the mark bounds the wait until it is read past. Real sockets; the clock is given its times."""
    pull = zmq.Context.instance().socket(zmq.PULL)
    pull.rcvhwm, pull.linger = 32, 0
    endpoint = f"tcp://127.0.0.1:{pull.bind_to_random_port('tcp://127.0.0.1')}"
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.sndhwm, push.linger = 100_000, 0
    push.connect(endpoint)
    frame = b"x" * 200
    try:
        for _ in range(5000):
            push.send(frame)
        wait_for(lambda: (unread_bytes(endpoint) or 0) > 1000 * wire_bytes([frame]))  # the burst waits unread
        clock = UnreadClock(0.0, functools.partial(unread_bytes, endpoint))
        clock.found(1.0)  # a poll finds messages: they came after the socket was last found empty (0.0)
        clock.found(1.0 + MARK_EVERY_S)  # ... and again: the kernel's view is marked
        for _ in range(32):  # the queue read to its end, as a read that outruns ZeroMQ's I/O thread finds it
            clock.read(wire_bytes([pull.recv()]))
        clock.emptied(2.0)
        assert clock.waiting_since() == 1.0 + MARK_EVERY_S  # the marked bytes are not read: they waited since then
        assert unread_wait_s([clock], 3.0) == 3.0 - (1.0 + MARK_EVERY_S)
        for _ in range(5000 - 32):  # read past the mark: nothing bounds the wait but the socket's own clock
            clock.read(wire_bytes([pull.recv()]))
        assert clock.waiting_since() is None and unread_wait_s([clock], 3.0) == 0.0
    finally:
        push.close()
        pull.close()


def test_the_unread_backlog_counts_what_a_closed_sender_left_unread() -> None:
    """A feed that exited leaves what it sent in its connection's receive queue (CLOSE_WAIT), read after it: review392
    #1's ~14,000 messages were read for a minute after its feed died while `unread_messages` said about 100."""
    listener = socket.create_server(("127.0.0.1", 0))
    endpoint = f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    sender = socket.create_connection(listener.getsockname())
    receiver, _ = listener.accept()
    try:
        sender.sendall(b"x" * 1000)
        sender.close()
        wait_for(lambda: receiver.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_CLOSE_WAIT)
        assert unread_bytes(endpoint) == 1000
    finally:
        receiver.close()
        listener.close()
