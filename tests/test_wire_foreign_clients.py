"""What a client in another language sees on the wire (review308: C with libzmq, Node.js with zeromq.js): a DEALER
that keeps a routing id of its own across a reconnect, error codes a client can switch on (every one the document's
table lists), a request's `id` echoed byte for byte, an empty tick list refused, and each publisher's rejections on
a topic of its own. pyzmq and msgpack only on the client side; the bytes are built by hand where their encoding is
the point."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import msgpack
import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from engine.service.control_requests import read_control_request
from wire_client import CTX, T0, fresh_stream, held_of, stats, trade, wait_stats, wait_until
from wire_server import clients, server  # noqa: F401 (fixtures)

DOC = Path(__file__).resolve().parent.parent / "docs" / "wire-protocol.md"
# one worker takes the file under `--dist loadgroup`: its module `server` (a model load and a start) is built once,
# not once on each worker that got some of its tests
pytestmark = pytest.mark.xdist_group("test_wire_foreign_clients")


def dealer(endpoint: str, routing_id: bytes | None = None) -> zmq.Socket:
    sock = CTX.socket(zmq.DEALER)
    sock.linger = 0
    if routing_id is not None:
        sock.routing_id = routing_id
    sock.connect(endpoint)
    return sock


def replies_until(sock: zmq.Socket, wanted_id: int, timeout_s: float) -> list[dict]:
    """The replies read until the one whose `id` is ``wanted_id``, or until none came for ``timeout_s`` (it never
    came). Reading on after it only waited out the silence: 10 s a request, a minute of this file's run."""
    got: list[dict] = []
    while wanted_id not in [reply.get("id") for reply in got] and sock.poll(int(timeout_s * 1000)):
        got.append(msgpack.unpackb(sock.recv_multipart()[-1], raw=False))
    return got


def fed_stream(clients, ticks: int = 20) -> str:
    control, _sub, push = clients
    ctl, feed = control(), push()
    stream = fresh_stream("FC")
    feed.send(msgpack.packb([trade(stream, T0 + i) for i in range(ticks)]))
    wait_until(lambda: (held_of(ctl, stream) or {}).get("ticks") == ticks)
    return stream


# -- #1: a fixed routing id, reconnected with asks in flight --------------------------------------------------------

def test_a_client_that_reconnects_with_its_own_routing_id_while_asks_are_in_flight_is_answered(server, clients):
    """review308 #1: a DEALER with ZMQ_ROUTING_ID "risk-3" sent asks, died, and reconnected with the same id: libzmq's
    ROUTER ignored the new connection for its whole life (no reply, nothing counted) while it still held the old
    one. With router_handover the new connection takes the id over: each health request is answered (a reply to an
    ask of the old connection may come on the new one too, told apart by its `id`)."""
    stream = fed_stream(clients)
    for trial in range(2):
        routing_id = f"risk-{trial}".encode()
        old = dealer(server["control"], routing_id)
        time.sleep(0.3)  # (connected: the asks go out, rather than wait in the socket for a peer)
        for i in range(5):
            old.send_multipart([b"", msgpack.packb({"op": "ask", "stream": stream, "query": "direction_20", "id": i})])
        old.close()
        new = dealer(server["control"], routing_id)
        try:
            for k in range(3):
                new.send_multipart([b"", msgpack.packb({"op": "health", "id": 100 + k})])
                got = replies_until(new, 100 + k, 10)
                assert 100 + k in [reply["id"] for reply in got], (trial, k, got)
        finally:
            new.close()


def test_a_request_read_after_a_new_connection_took_its_routing_id_is_answered_to_the_new_holder() -> None:
    """review444 #1: an ask sent just before its client died, read only after the client came back under the same
    id (the service was in a forward), was read under the name ZMQ_ROUTER_HANDOVER gave the dead connection, and
    its reply was dropped; the page promises it to the new connection. The control socket's reader
    (read_control_request) gives the id the client announced, and the reply reaches the new connection."""
    router = CTX.socket(zmq.ROUTER)
    router.linger, router.router_mandatory, router.router_handover = 0, 1, 1
    events = router.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)
    endpoint = f"tcp://127.0.0.1:{router.bind_to_random_port('tcp://127.0.0.1')}"

    def await_event(event: int) -> None:  # (the router's own socket is not touched: it reads nothing before)
        while events.poll(10_000):
            if recv_monitor_message(events)["event"] == event:
                return
        raise AssertionError(f"no monitor event {event}")

    old = dealer(endpoint, b"cpp-svc-7")
    new = None
    try:
        await_event(zmq.EVENT_HANDSHAKE_SUCCEEDED)
        old.send(msgpack.packb({"op": "ask", "id": "ask-1"}))
        old.close(linger=10_000)  # (the ask goes out, then the connection closes)
        await_event(zmq.EVENT_DISCONNECTED)
        new = dealer(endpoint, b"cpp-svc-7")
        new.send(msgpack.packb({"op": "health", "id": "h-1"}))
        await_event(zmq.EVENT_HANDSHAKE_SUCCEEDED)  # the new connection holds the id: the old one is renamed
        for wanted in ("ask-1", "h-1"):
            routing_id, request = read_control_request(router)
            assert (routing_id, msgpack.unpackb(request)["id"]) == (b"cpp-svc-7", wanted)
            router.send_multipart([routing_id, msgpack.packb({"ok": True, "id": wanted})])
            assert new.poll(10_000) and msgpack.unpackb(new.recv())["id"] == wanted
    finally:
        router.disable_monitor()
        for sock in (old, new, events, router):
            if sock is not None:
                sock.close(linger=0)


# -- #5: error codes, one table -------------------------------------------------------------------------------------

def documented_codes() -> dict[str, str]:
    """The error-code table of docs/wire-protocol.md: code -> its "produced by" cell."""
    text = DOC.read_text()
    table = text[text.index("| `reason` | where | meaning | produced by |"):]
    table = table[:table.index("\n\n")]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| `(\w+)` \| [^|]+ \| [^|]+ \| (.+) \|$", table, re.M)}


def test_every_documented_control_code_is_produced_by_the_request_the_table_names(clients) -> None:
    """review308 #5: "no query named X" was `bad_request`, like a malformed request; it has its own code now. Each
    code whose table row names a request (as JSON) is produced by sending exactly that request."""
    codes = documented_codes()
    assert {"bad_request", "unknown_stream", "unknown_query", "busy", "starting", "shard_lost", "ask_failed",
            "internal", "empty_list", "bad_framing"} <= set(codes)
    fed_stream(clients)  # (some stream has data: `R.OK` of the table's requests is fed below)
    control, _sub, push = clients
    push().send(msgpack.packb(trade("R.OK", T0)))
    ctl = control()
    wait_until(lambda: (held_of(ctl, "R.OK") or {}).get("ticks", 0) >= 1)
    sent = 0
    for code, produced_by in codes.items():
        for request in re.findall(r"`(\{\"op\".*?\})`", produced_by):
            reply = ctl.raw(msgpack.packb(json.loads(request)))
            assert reply["ok"] is False and reply["reason"] == code, (code, request, reply)
            sent += 1
    assert sent >= 4


def test_an_unknown_query_is_unknown_query_in_get_ask_and_unregister(clients) -> None:
    stream = fed_stream(clients)
    ctl = clients[0]()
    for op, fields in (("get", {"stream": stream, "query": "nd99"}), ("ask", {"stream": stream, "query": "nd99"}),
                       ("unregister", {"name": "nd99"})):
        reply = ctl(op, **fields)
        assert reply["ok"] is False and reply["reason"] == "unknown_query", (op, reply)
        assert reply["error"].startswith('no query named "nd99"'), (op, reply)
    assert ctl("get", stream=7, query="dir")["reason"] == "bad_request"  # a malformed request stays bad_request


def test_a_request_while_the_service_starts_is_starting_with_its_id_as_sent(tmp_path) -> None:
    """The `starting` row: every op but health while the model loads (StartingReplies on a real ROUTER)."""
    from engine.service.starting_replies import StartingReplies

    router = CTX.socket(zmq.ROUTER)
    router.linger = 0
    port = router.bind_to_random_port("tcp://127.0.0.1")
    client = dealer(f"tcp://127.0.0.1:{port}")
    try:
        with StartingReplies(router, "m", "no_bid", time.time(), router.send_multipart):
            client.send_multipart([b"", b"\x82\xa2op\xa4list\xa2id\xcd\x00\x07"])  # id: uint16 7
            assert client.poll(10_000)
            frames = client.recv_multipart()
        reply = msgpack.unpackb(frames[-1], raw=False)
        assert reply["ok"] is False and reply["reason"] == "starting" and reply["id"] == 7
        assert frames[-1].endswith(b"\xa2id\xcd\x00\x07")
    finally:
        client.close()
        router.close()


# -- #6: `id` byte for byte -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("id_hex", ["ca3f800000", "cd0001", "c403010203", "d40501", "cb3ff0000000000000", "01",
                                    "d100ff", "a3616263", "920102", "81a178c0"],
                         ids=["float32", "uint16", "bin", "ext", "float64", "fixint", "int16", "str", "array", "map"])
def test_a_requests_id_comes_back_byte_for_byte(clients, id_hex) -> None:
    """review308 #6: an id sent as float32 1.0 came back as float64, a uint16 1 as a fixint: a C client keying its
    pending requests on the id's bytes missed the reply. It comes back as it came, on success and on error."""
    ctl = clients[0]()
    raw = bytes.fromhex(id_hex)
    for request in (b"\x82\xa2op\xa6health\xa2id" + raw, b"\x82\xa2op\xa3fly\xa2id" + raw):
        ctl.sock.send_multipart([b"", request])
        assert ctl.sock.poll(10_000)
        payload = ctl.sock.recv_multipart()[-1]
        reply = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        assert payload.endswith(b"\xa2id" + raw) and list(reply)[-1] == "id", (request, payload)


# -- #8: an empty list ----------------------------------------------------------------------------------------------

def test_an_empty_tick_list_is_refused_as_empty_list_and_counted(clients) -> None:
    """review308 #8: `[]` was taken without a word (an encoder that empties every batch showed only as no answers)."""
    control, sub, push = clients
    ctl, feed, rejects = control(), push(), sub("_rejects/")
    before = stats(ctl)["rejected"].get("empty_list", 0)
    for message in (b"\x90", b"\xdc\x00\x00", [b"venue-7", b"\x90"], [b"tokens", b"\x90"]):
        n = len(rejects.kept)
        feed.send_multipart(message if isinstance(message, list) else [message])
        topic, payload = rejects.until(lambda g: len(g) > n)[n]
        assert (payload["index"], payload["reason"]) == (-1, "empty_list"), payload
        assert payload["error"].startswith("empty_list: the message holds an empty list"), payload
    wait_stats(ctl, lambda st: st["rejected"].get("empty_list", 0) - before == 4)
    assert ctl.ok("health")["status"] == "serving"


# -- #9: a publisher's own rejections -------------------------------------------------------------------------------

def test_a_tagged_publisher_subscribes_to_its_own_rejections_alone(clients) -> None:
    """review308 #9: every publisher's rejections came on `_rejects/`; a message framed [TAG, ticks] has its
    rejections on `_rejects/TAG/`, which a feed handler subscribes to alone; `_rejects/` still takes them all."""
    control, sub, push = clients
    mine, everything, feed = sub("_rejects/cpp-1/"), sub("_rejects/"), push()
    feed.send_multipart([b"cpp-2", msgpack.packb([trade("a/b", T0)])])  # another venue's bad tick
    feed.send(msgpack.packb([trade("c/d", T0)]))  # and an untagged one
    feed.send_multipart([b"cpp-1", msgpack.packb([trade("e/f", T0)])])
    got = everything.until(lambda g: len(g) >= 3)
    assert [topic for topic, _ in got] == ["_rejects/cpp-2/", "_rejects/", "_rejects/cpp-1/"]
    assert [p.get("topic") for _, p in got] == ["cpp-2", None, "cpp-1"]
    feed.send_multipart([b"cpp-1", msgpack.packb([trade("g/h", T0)])])  # (one subscriber's messages keep their order)
    got = mine.until(lambda g: len(g) >= 2)
    assert [(topic, p["topic"], p["reason"]) for topic, p in got] == [("_rejects/cpp-1/", "cpp-1", "bad_stream")] * 2
    assert ["e/f" in got[0][1]["error"], "g/h" in got[1][1]["error"]] == [True, True]


# -- #2: a subscription longer than any topic -----------------------------------------------------------------------

def test_a_subscription_longer_than_any_topic_is_held_counted_and_the_sockets_others_served(clients) -> None:
    """review308 #2: subscribing `dir20/` + 400 bytes dropped the SUB's connection (ZMQ_MAXMSGSIZE on the XPUB):
    it reconnected ~7 times a second for ever, its `_heartbeat/` subscription dead too, nothing logged or counted.
    Such a subscription matches nothing; it is held and counted, and the socket's other subscriptions are served."""
    control, sub, _push = clients
    ctl = control()
    before = stats(ctl)["subscriptions_unmatchable"]
    subscriber = sub("dir/" + "X" * 400, "dir/" + "Y" * 20_000)  # (waits for a heartbeat: the connection holds)
    beats = len(subscriber.heartbeats)
    while len(subscriber.heartbeats) < beats + 3:  # more heartbeats on the same socket: not dropped and reconnected
        subscriber._recv(1.0)
    wait_stats(ctl, lambda st: st["subscriptions_unmatchable"] - before == 2)
    assert [h["seq"] for h in subscriber.heartbeats] == sorted(h["seq"] for h in subscriber.heartbeats)


# -- #7: a restart answers before the engine imports ----------------------------------------------------------------

EARLY_START = """
import sys, json
from engine.service.config import ServiceConfig
from engine.service.early_start import EarlyStart
config = ServiceConfig.from_dict({"endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                                                "control": "tcp://127.0.0.1:0", "metrics_port": 0}})
early = EarlyStart(config)
imported = "torch" in sys.modules or "engine.service.server" in sys.modules
print(json.dumps({**early.endpoints, "engine_imported": imported}), flush=True)
sys.stdin.readline()
early.close()
"""


def test_control_and_metrics_answer_starting_before_the_engine_is_imported(tmp_path) -> None:
    """review308 #7: after a restart nothing listened for ~24 s (the engine's imports, torch), so a probe saw
    "connection refused". `flashtick serve` binds control and metrics first (EarlyStart), which imports no torch."""
    import os
    import subprocess
    import sys
    import urllib.request

    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen([sys.executable, "-c", EARLY_START], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(root)}, cwd=root)
    try:
        bound = json.loads(proc.stdout.readline())
        assert bound["engine_imported"] is False
        client = dealer(bound["control"])
        client.send_multipart([b"", msgpack.packb({"op": "health", "id": 1})])
        assert client.poll(30_000)
        reply = msgpack.unpackb(client.recv_multipart()[-1], raw=False)
        client.close()
        assert reply["ok"] is True and reply["status"] == "starting" and reply["phase"] == "importing the engine"
        text = urllib.request.urlopen(bound["metrics"], timeout=30).read().decode()
        assert 'flashtick_starting{phase="importing the engine"} 1' in text and "flashtick_serving 0" in text
    finally:
        proc.stdin.write("\n")
        proc.stdin.flush()
        proc.wait(60)
