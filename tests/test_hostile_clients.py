"""Clients that try to make the service hold memory, threads or descriptors for them: subscribers that send
subscriptions by the megabyte, control clients that never read their replies, HTTP clients that open connections
and say nothing. Real sockets on 127.0.0.1, real servers on a tiny model."""

from __future__ import annotations

import socket
import time
import urllib.request

import msgpack
import pytest
import zmq

from conftest import serving
from engine.service import metrics as metrics_module
from engine.service.client import ControlClient
from engine.service.config import ServiceConfig
from engine.service.metrics import METRICS_MAX_CONNECTIONS, start_metrics_server
from test_answer_context import wait_for
from test_server import checkpoint  # noqa: F401  (the model fixture)


def _closed_by_the_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (read until then, at most 120 s: only a hang fails)."""
    sock.settimeout(120)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _scrape(port: int) -> str | None:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    except OSError:  # (refused while the cap's connections are still open)
        return None


def _open_by_the_server(sock: socket.socket) -> bool:
    """Whether the server has not closed ``sock`` (it sent nothing on it: a read finds nothing to take)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.settimeout(10)


def test_a_scrape_gets_in_while_the_cap_of_connections_trickle_their_requests(monkeypatch) -> None:
    """Review 115 (finding 12): 16 connections sending a byte every 2 s each held their slot for as long as they
    trickled (the time-out was per read), and every scrape meanwhile was closed unread. Past the cap, the oldest
    connection still sending its request is now closed to make room, and the scrape is answered."""
    monkeypatch.setattr(metrics_module, "METRICS_REQUEST_TIMEOUT_S", 600.0)  # only room-making can close them here
    server = start_metrics_server("127.0.0.1", 0, lambda: {"ticks_in": 1})
    tricklers: list[socket.socket] = []
    try:
        for _ in range(METRICS_MAX_CONNECTIONS):
            sock = socket.create_connection(("127.0.0.1", server.server_port), timeout=10)
            sock.sendall(b"GET /metr")  # a request line never finished
            tricklers.append(sock)
        for sock in tricklers:
            sock.sendall(b"i")  # ... and still coming
        body = _scrape(server.server_port)
        assert body is not None and "flashtick_ticks_in_total 1" in body
        assert "flashtick_metrics_connections_evicted_total 1" in body, body
        assert "flashtick_metrics_connections_refused_total 0" in body
        assert _closed_by_the_server(tricklers[0])  # the oldest made room
        assert all(_open_by_the_server(sock) for sock in tricklers[1:])
    finally:
        for sock in tricklers:
            sock.close()
        server.shutdown()
        server.server_close()


def test_a_request_sent_a_byte_at_a_time_is_closed_at_its_deadline_not_kept_by_each_byte(monkeypatch) -> None:
    """The time-out was per read: a byte more often than it kept the connection (and its thread) for ever."""
    monkeypatch.setattr(metrics_module, "METRICS_REQUEST_TIMEOUT_S", 1.0)
    server = start_metrics_server("127.0.0.1", 0, lambda: {"ticks_in": 1})
    try:
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as sock:
            deadline = time.monotonic() + 120  # only a hang fails
            closed = False
            while not closed and time.monotonic() < deadline:
                try:
                    sock.sendall(b"G")
                except OSError:  # (reset by the server's close)
                    closed = True
                    break
                sock.settimeout(0.2)  # a byte each 0.2 s, far within the 1 s each read was allowed
                try:
                    closed = sock.recv(1) == b""
                except TimeoutError:
                    pass
                except ConnectionResetError:
                    closed = True
            assert closed
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("sent", [b"", b"GET /metr"])
def test_an_idle_or_unfinished_metrics_connection_is_closed_by_the_server(monkeypatch, sent: bytes) -> None:
    monkeypatch.setattr(metrics_module, "METRICS_REQUEST_TIMEOUT_S", 1.0)
    server = start_metrics_server("127.0.0.1", 0, lambda: {"ticks_in": 1})
    try:
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as sock:
            sock.sendall(sent)
            assert _closed_by_the_server(sock)
        assert "flashtick_ticks_in_total 1" in (_scrape(server.server_port) or "")
    finally:
        server.shutdown()
        server.server_close()


# -- control: a client that never reads its replies -----------------------------------------------------------------

CONTROL_QUEUE_BYTES = 1 << 20


@pytest.fixture(scope="module")
def service(checkpoint):
    """A real server on ephemeral ports (a module's tests share it: each leaves it as it found it)."""
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 2048, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "limits": {"heartbeat_s": 0.2, "control_queue_bytes": CONTROL_QUEUE_BYTES}})
    with serving(config) as server:
        yield server


def _stats(server) -> dict:
    with ControlClient(server.endpoints["control"], timeout_s=60) as control:
        return control.call("stats")["stats"]


def test_replies_a_control_client_never_reads_are_bounded_and_counted(service) -> None:
    before = _stats(service)
    silent = zmq.Context.instance().socket(zmq.DEALER)
    silent.linger = 0
    silent.rcvhwm = 1
    silent.rcvbuf = 4096  # (the kernel's buffers hold little of what it does not read)
    silent.connect(service.endpoints["control"])
    sent, id_bytes = 300, 60_000  # each reply echoes its 60 kB id: 18 MB if all were held for this client
    try:
        for i in range(sent):
            silent.send(msgpack.packb({"op": "health", "id": f"{i:06d}" + "x" * id_bytes}))
        # every request is answered or dropped: the replies held for this client are bounded (16 in ZeroMQ's queue,
        # control_queue_bytes in the service's, and what the kernel's socket buffers took), the rest counted
        polls = [before]

        def all_read() -> bool:  # (each `stats` call is a request too)
            polls.append(_stats(service))
            return polls[-1]["control_requests"] - before["control_requests"] - (len(polls) - 1) >= sent

        wait_for(all_read)
        dropped = polls[-1]["control_replies_dropped"] - before["control_replies_dropped"]
        assert dropped > sent // 2, dropped
        with ControlClient(service.endpoints["control"], timeout_s=60) as other:  # another client is served
            assert other.call("health")["status"] == "serving"
        received = 0
        while received + dropped < sent and silent.poll(60_000):  # what was queued for it comes once it reads
            silent.recv()
            received += 1
        assert received + dropped == sent
        assert not silent.poll(0)
    finally:
        silent.close()


def test_a_client_that_pipelines_many_requests_and_reads_gets_every_reply(service) -> None:
    """A burst of replies can outrun ZeroMQ's I/O thread (its queue of 16): they wait, none is dropped."""
    dropped_before = _stats(service)["control_replies_dropped"]
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.linger = 0
    dealer.connect(service.endpoints["control"])
    sent = 500
    try:
        for i in range(sent):
            dealer.send(msgpack.packb({"op": "health", "id": i}))
        ids = []
        while len(ids) < sent and dealer.poll(60_000):
            ids.append(msgpack.unpackb(dealer.recv())["id"])
    finally:
        dealer.close()
    assert ids == list(range(sent))  # all of them, in order
    assert _stats(service)["control_replies_dropped"] == dropped_before


def test_large_frames_before_a_control_request_are_not_echoed(service) -> None:
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.linger = 0
    dealer.connect(service.endpoints["control"])
    try:
        dealer.send_multipart([b"x" * 100_000, msgpack.packb({"op": "health"})])
        assert dealer.poll(60_000)
        frames = dealer.recv_multipart()
        dealer.send_multipart([b""] * 5 + [msgpack.packb({"op": "health"})])
        assert dealer.poll(60_000)
        many = dealer.recv_multipart()
        dealer.send_multipart([b"", b"proxy-7", msgpack.packb({"op": "health"})])  # a few small ones come back
        assert dealer.poll(60_000)
        routed = dealer.recv_multipart()
    finally:
        dealer.close()
    assert len(frames) == 1 and msgpack.unpackb(frames[0])["reason"] == "bad_request"
    assert "100000 bytes" in msgpack.unpackb(frames[0])["error"]
    assert many[:-1] == [b""] and "5 frames before it" in msgpack.unpackb(many[-1])["error"]  # (as to a REQ client)
    assert routed[:2] == [b"", b"proxy-7"] and msgpack.unpackb(routed[2])["status"] == "serving"


def test_a_request_refused_for_the_frames_before_it_still_gets_its_id_back(service) -> None:
    """Review261 #1: a readable request with an `id`, refused for the frames before it (more than 4, or one over 256
    bytes), got its error without the `id`, so a client matching replies by `id` never matched it; and a REQ client
    that added a frame got no reply at all (its empty delimiter was not echoed: REQ drops such a reply)."""
    context = zmq.Context.instance()
    dealer, req = context.socket(zmq.DEALER), context.socket(zmq.REQ)
    replies = []
    try:
        for sock in (dealer, req):
            sock.linger = 0
            sock.connect(service.endpoints["control"])
        for sock, before in ((dealer, [b"a", b"b", b"c", b"d", b"e"]), (dealer, [b"x" * 300]),
                             (req, [b"x" * 300]), (req, [b"a", b"b", b"c", b"d"])):
            sock.send_multipart([*before, msgpack.packb({"op": "health", "id": len(replies)})])
            assert sock.poll(60_000)
            replies.append(sock.recv_multipart())
        dealer.send_multipart([b"x" * 300, b"\xc1"])  # not msgpack: no id to read, the frames' error all the same
        assert dealer.poll(60_000)
        unreadable = msgpack.unpackb(dealer.recv())
    finally:
        dealer.close()
        req.close()
    assert [len(frames) for frames in replies] == [1, 1, 1, 1]  # (REQ takes its delimiter off)
    refused = [msgpack.unpackb(frames[0]) for frames in replies]
    assert [reply["id"] for reply in refused] == [0, 1, 2, 3]
    assert all(reply["ok"] is False and reply["reason"] == "bad_request" for reply in refused)
    assert "5 frames before it" in refused[0]["error"] and "300 bytes, over 256" in refused[1]["error"]
    assert "300 bytes, over 256" in refused[2]["error"] and "5 frames before it" in refused[3]["error"]
    assert "id" not in unreadable and "300 bytes, over 256" in unreadable["error"]


# -- answers: subscriptions ------------------------------------------------------------------------------------------

def _subscriber(server, *topics: bytes, reconnect: bool = True) -> zmq.Socket:
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.linger = 0
    if not reconnect:
        sub.reconnect_ivl = -1  # (so a connection the server drops stays dropped)
    for topic in topics:
        sub.setsockopt(zmq.SUBSCRIBE, topic)
    sub.connect(server.endpoints["answers"])
    return sub


def _heartbeat_arrives(sub: zmq.Socket) -> bool:
    """Whether a heartbeat reaches ``sub`` (the service sends one every 0.2 s; 60 s only catches a hang)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if sub.poll(1000) and sub.recv_multipart()[0] == b"_heartbeat/":
            return True
    return False


def test_the_distinct_subscriptions_subscribers_hold_are_counted_until_they_go(service) -> None:
    """(Before the other subscription tests: none of their subscribers is still leaving meanwhile.)"""
    before = _stats(service)
    prefixes = [b"dir/" + bytes([65 + i]) * 300 for i in range(3)]
    first = _subscriber(service, *prefixes)
    second = _subscriber(service, prefixes[0])  # the same prefix again: its trie nodes are shared, counted once
    try:
        wait_for(lambda: _stats(service)["subscription_bytes"] == before["subscription_bytes"] + 3 * 304)
        assert _stats(service)["subscriptions"] == before["subscriptions"] + 3
    finally:
        first.close()
        second.close()
    wait_for(lambda: _stats(service)["subscription_bytes"] == before["subscription_bytes"])
    assert _stats(service)["subscriptions"] == before["subscriptions"]


def test_a_subscription_past_the_wire_limit_drops_its_subscriber_alone(service) -> None:
    """A subscription longer than any topic is held (it matches nothing; counted: test_wire_foreign_clients.py); one
    past limits.max_subscription_bytes is not read: ZeroMQ drops that subscriber's connection, and no one else's."""
    limits = service.config.limits
    longest_topic = limits.max_topic_bytes + limits.max_stream_bytes + 1
    honest = _subscriber(service, b"_heartbeat/", b"q/" + b"S" * (longest_topic - 2), b"x" * (longest_topic + 1))
    everything = _subscriber(service, b"")
    greedy = _subscriber(service, b"_heartbeat/", reconnect=False)
    events = greedy.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    try:
        assert _heartbeat_arrives(greedy) and _heartbeat_arrives(honest) and _heartbeat_arrives(everything)
        greedy.setsockopt(zmq.SUBSCRIBE, b"x" * (limits.max_subscription_bytes + 1))  # past the wire limit
        assert events.poll(60_000), "the service kept the connection of a subscription past its wire limit"
        assert _heartbeat_arrives(honest) and _heartbeat_arrives(everything)
        honest.setsockopt(zmq.UNSUBSCRIBE, b"_heartbeat/")  # unsubscribing works as before
        honest.setsockopt(zmq.SUBSCRIBE, b"_heart")
        assert _heartbeat_arrives(honest)
    finally:
        greedy.disable_monitor()
        events.close()
        for sock in (honest, everything, greedy):
            sock.close()


LONG_SUBSCRIPTION = b"x" * (100 << 10)  # past the default limits.max_subscription_bytes (64 KiB)


def _dropped_or_held(server, prefix: bytes) -> bool:
    """Whether ``server`` keeps the connection of a subscriber that subscribes to ``prefix`` (True: held, its
    heartbeats still arrive) or drops it (False: the disconnect ZeroMQ reports; 60 s only catches a hang)."""
    sub = _subscriber(server, b"_heartbeat/", reconnect=False)
    events = sub.get_monitor_socket(zmq.EVENT_DISCONNECTED)
    try:
        assert _heartbeat_arrives(sub)
        unmatchable = _stats(server)["subscriptions_unmatchable"]
        sub.setsockopt(zmq.SUBSCRIBE, prefix)
        wait_for(lambda: events.poll(0) or _stats(server)["subscriptions_unmatchable"] > unmatchable)
        return not events.poll(0) and _heartbeat_arrives(sub)
    finally:
        sub.disable_monitor()
        events.close()
        sub.close()


def test_the_default_subscription_limit_drops_a_100_kib_subscription(service) -> None:
    assert service.config.limits.max_subscription_bytes == 64 << 10  # (the documented default)
    assert _dropped_or_held(service, LONG_SUBSCRIPTION) is False


def test_a_larger_subscription_limit_holds_a_100_kib_subscription(checkpoint) -> None:
    """limits.max_subscription_bytes raised: the subscription the default drops is held, counted as unmatchable
    (longer than any topic), its subscriber still served."""
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 2048, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "limits": {"heartbeat_s": 0.2, "max_subscription_bytes": 256 << 10}})
    with serving(config) as server:
        assert _dropped_or_held(server, LONG_SUBSCRIPTION) is True
        assert _stats(server)["subscriptions_unmatchable"] == 1


def test_a_subscription_limit_below_the_longest_topic_is_refused() -> None:
    from engine.service.config import ConfigError

    with pytest.raises(ConfigError, match="max_subscription_bytes must be at least the longest topic, 385 bytes"):
        ServiceConfig.from_dict({"limits": {"max_subscription_bytes": 300}})
    with pytest.raises(ConfigError, match="max_subscription_bytes must be a finite number > 0"):
        ServiceConfig.from_dict({"limits": {"max_subscription_bytes": 0}})
