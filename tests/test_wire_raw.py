"""A client that never saw our Python code: every socket and op of docs/wire-protocol.md, driven with pyzmq and
msgpack alone, each frame built as the document says.

Only the server fixture touches the engine's code (it starts a real server, in-process, on ephemeral 127.0.0.1
ports); the client side imports zmq and msgpack and nothing of engine/, queries/ or connectors/.
"""

from __future__ import annotations

import itertools
import math
import os
import threading
import time
import urllib.request
from typing import Any

import msgpack
import pytest
import zmq

CTX = zmq.Context.instance()
T0 = 1_700_000_000_000_000_000  # int64 ns since the epoch
DOCUMENTED_REASONS = {
    "not_a_map", "missing_stream", "bad_stream", "missing_field", "ts_not_int", "ts_out_of_range", "unknown_kind",
    "ambiguous_kind", "unknown_field", "wrong_type", "nonfinite_price", "nonpositive_price", "nonfinite_size",
    "negative_size", "unknown_side", "crossed_quote", "ts_backwards", "bad_msgpack", "oversize", "bad_framing",
    "bad_tokens", "stream_refused", "overloaded"}
ANSWER_KEYS = {"query", "stream", "topic", "seq", "version", "data_ts", "answer_ts", "model", "value"}
HEARTBEAT_KEYS = {"seq", "ts", "ticks_in", "answers_out", "pending_tokens", "behind"}
MAX_MESSAGE_BYTES = 64 << 10
_names = itertools.count()


def fresh_stream(prefix: str = "W") -> str:
    return f"{prefix}{next(_names)}.X"


# -- the server (the only part that imports the project) ------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from conftest import serving, tiny_tick_checkpoint
    from engine.service.config import ServiceConfig

    checkpoint = tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"))
    queries = tmp_path_factory.mktemp("q") / "q.yaml"
    queries.write_text("queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice,"
                       " trigger: batch}\n")
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)},
        "kv": {"cells": 16384, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                      "control": "tcp://127.0.0.1:0", "metrics_port": 0},
        "limits": {"heartbeat_s": 0.1, "max_message_bytes": MAX_MESSAGE_BYTES, "max_control_bytes": 1 << 20},
        "queries": str(queries),
    })
    with serving(config) as srv:
        yield srv.endpoints


# -- a raw client: pyzmq + msgpack -------------------------------------------------------------------------------

class Control:
    """A DEALER on the ROUTER control socket: [b"", msgpack request] out, [b"", msgpack reply] back."""

    def __init__(self, endpoint: str, kind: int = zmq.DEALER) -> None:
        self.sock = CTX.socket(kind)
        self.sock.linger = 0
        self.sock.connect(endpoint)
        self.kind = kind

    def raw(self, payload: bytes, timeout_s: float = 10.0) -> dict:
        self.sock.send_multipart([b"", payload] if self.kind == zmq.DEALER else [payload])
        if not self.sock.poll(int(timeout_s * 1000)):
            raise AssertionError("no control reply in time")
        frames = self.sock.recv_multipart()
        assert frames[:-1] == ([b""] if self.kind == zmq.DEALER else [])
        reply = msgpack.unpackb(frames[-1], raw=False)
        assert isinstance(reply, dict) and type(reply["ok"]) is bool
        if not reply["ok"]:
            assert set(reply) - {"id"} == {"ok", "error"} and isinstance(reply["error"], str) and reply["error"]
            assert len(reply["error"]) <= 500, "an error must not echo a huge request back"
        return reply

    def __call__(self, op: str, **fields: Any) -> dict:
        return self.raw(msgpack.packb({"op": op, **fields}))

    def ok(self, op: str, **fields: Any) -> dict:
        reply = self(op, **fields)
        assert reply["ok"] is True, reply
        return reply

    def close(self) -> None:
        self.sock.close()


class Sub:
    """A SUB socket on the answers PUB; ready (per the doc) once the first heartbeat arrives."""

    def __init__(self, endpoint: str, topics: list[str]) -> None:
        self.sock = CTX.socket(zmq.SUB)
        self.sock.linger = 0
        self.sock.rcvhwm = 0
        self.sock.connect(endpoint)
        for topic in [*topics, "_heartbeat/"]:
            self.sock.setsockopt(zmq.SUBSCRIBE, topic.encode())
        self.heartbeats: list[dict] = []
        self.kept: list[tuple[str, dict]] = []
        deadline = time.monotonic() + 10
        while not self.heartbeats:
            assert time.monotonic() < deadline, "no heartbeat: subscription not live"
            self._recv(0.2)

    def _recv(self, timeout_s: float) -> tuple[str, dict] | None:
        if not self.sock.poll(int(timeout_s * 1000)):
            return None
        frames = self.sock.recv_multipart()
        assert len(frames) == 2, f"answers are [topic, payload], got {len(frames)} frames"
        topic = frames[0].decode()
        payload = msgpack.unpackb(frames[1], raw=False)
        if topic == "_heartbeat/":
            assert set(payload) == HEARTBEAT_KEYS and isinstance(payload["behind"], bool)
            self.heartbeats.append(payload)
            return None
        self.kept.append((topic, payload))
        return topic, payload

    def until(self, predicate, timeout_s: float = 15.0) -> list[tuple[str, dict]]:
        """Everything received so far, once ``predicate`` of it holds (else AssertionError)."""
        deadline = time.monotonic() + timeout_s
        while not predicate(self.kept):
            assert time.monotonic() < deadline, f"condition not met in time; got {self.kept[-5:]}"
            self._recv(0.1)
        return self.kept

    def beats(self, n: int) -> None:
        """Wait for n more heartbeats (everything published before them has arrived)."""
        want = len(self.heartbeats) + n
        deadline = time.monotonic() + 10
        while len(self.heartbeats) < want:
            assert time.monotonic() < deadline
            self._recv(0.1)

    def close(self) -> None:
        self.sock.close()


def push_socket(endpoint: str) -> zmq.Socket:
    sock = CTX.socket(zmq.PUSH)
    sock.linger = 2000
    sock.connect(endpoint)
    return sock


@pytest.fixture
def clients(server):
    made: list[Any] = []

    def control(kind: int = zmq.DEALER) -> Control:
        made.append(Control(server["control"], kind))
        return made[-1]

    def sub(*topics: str) -> Sub:
        made.append(Sub(server["answers"], list(topics)))
        return made[-1]

    def push() -> zmq.Socket:
        made.append(push_socket(server["ingest"]))
        return made[-1]

    yield control, sub, push
    for c in made:
        c.close()


def trade(stream: str, ts: int, price: float = 101.25, size: float = 3.0, **extra: Any) -> dict:
    return {"stream": stream, "ts": ts, "price": price, "size": size, **extra}


def quote(stream: str, ts: int, bid: float = 101.2, ask: float = 101.3, **extra: Any) -> dict:
    return {"stream": stream, "ts": ts, "bid": bid, "ask": ask, **extra}


def stats(control: Control) -> dict:
    return control.ok("stats")["stats"]


def wait_stats(control: Control, predicate, timeout_s: float = 15.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while not predicate(s := stats(control)):
        assert time.monotonic() < deadline, "stats did not get there in time"
        time.sleep(0.02)
    return s


def check_answer(topic: str, payload: dict) -> None:
    """The documented payload: keys, types, topic == frame."""
    assert set(payload) == ANSWER_KEYS, payload
    assert payload["topic"] == topic == f"{payload['query']}/{payload['stream']}/"
    for key in ("seq", "version", "data_ts", "answer_ts"):
        assert type(payload[key]) is int and payload[key] >= 0, key
    assert isinstance(payload["model"], str) and payload["model"]
    assert isinstance(payload["value"], dict)


# -- ingest ------------------------------------------------------------------------------------------------------

def test_trades_and_quotes_with_every_field_are_ingested_and_answered(clients) -> None:
    control, sub, push = clients
    ctl, feed, s = control(), push(), fresh_stream()
    answers = sub(f"dir/{s}/")
    before = stats(ctl)["ticks_in"]
    messages = [
        trade(s, T0, 101.25, 3.0, side="buy", kind="trade"),                   # one map, every trade field
        trade(s, T0, 101, 2),                                                   # ints, same ts (equal ts is fine)
        [trade(s, T0 + 1_000, 101.5, 0.0, side=None),                           # nil side, zero size
         quote(s, T0 + 2_000, 101.4, 101.6, bid_size=5.0, ask_size=7, kind="quote"),
         quote(s, T0 + 3_000, 101.5, 101.5),                                    # locked quote, no sizes
         trade(s, T0 + 4_000, 101.5, 1.0, side="sell")],
    ]
    for message in messages:
        feed.send(msgpack.packb(message))
    feed.send(msgpack.packb(trade(s, T0 + 5_000, 1.5, 2.0), use_single_float=True))  # float32 on the wire
    got = answers.until(lambda g: len(g) >= 4)
    assert [p["seq"] for _, p in got] == [1, 2, 3, 4]  # per-topic seq starts at 1, one answer per message
    assert [p["version"] for _, p in got] == [1, 2, 6, 7]  # the stream's tick count at each message's end
    assert [p["data_ts"] for _, p in got] == [T0, T0, T0 + 4_000, T0 + 5_000]  # the message's last tick
    for topic, payload in got:
        check_answer(topic, payload)
        assert payload["query"] == "dir" and payload["stream"] == s
        assert payload["answer_ts"] > 0
        probs = payload["value"]["probs"]
        assert set(payload["value"]) == {"answer", "probs"} and set(probs) == {"down", "flat", "up"}
        assert payload["value"]["answer"] == max(probs, key=probs.get)
        assert math.isclose(sum(probs.values()), 1.0, abs_tol=1e-3)
    after = stats(ctl)
    assert after["ticks_in"] - before == 7 and after["rejected"].get(s) is None


GOOD = trade("R.OK", T0)
BAD_MESSAGES: list[tuple[str, Any, int, str, bool]] = [
    # (case, message (bytes or frames), index, reason, carries the stream)
    ("garbage", b"\xc1\xff\x00", -1, "bad_msgpack", False),
    ("json", b'{"stream": "R.OK", "ts": 1, "price": 1.0, "size": 1.0}', -1, "bad_msgpack", False),
    ("trailing bytes", msgpack.packb(GOOD) + b"\x01", -1, "bad_msgpack", False),
    ("int map key", msgpack.packb([{1: 2}]), -1, "bad_msgpack", False),
    ("deep nesting", b"\x91" * 60_000 + b"\xc0", -1, "bad_msgpack", False),
    ("a scalar", msgpack.packb(5), -1, "not_a_map", False),
    ("a scalar item", msgpack.packb([5]), 0, "not_a_map", False),
    ("no stream", msgpack.packb({"ts": T0, "price": 1.0, "size": 1.0}), 0, "missing_stream", False),
    ("empty stream", msgpack.packb(trade("", T0)), 0, "missing_stream", False),
    ("stream an int", msgpack.packb(trade(7, T0)), 0, "wrong_type", False),  # type: ignore[arg-type]
    ("stream bin", msgpack.packb(trade(b"R.OK", T0), use_bin_type=True), 0, "wrong_type", False),  # type: ignore
    ("keys bin", msgpack.packb({b"stream": b"R.OK", b"ts": T0}, use_bin_type=True), 0, "wrong_type", False),
    ("stream with /", msgpack.packb(trade("dir/R.OK", T0)), 0, "bad_stream", False),
    ("stream with _", msgpack.packb(trade("_heartbeat", T0)), 0, "bad_stream", False),
    ("stream 10k chars", msgpack.packb(trade("A" * 10_000, T0)), 0, "bad_stream", False),
    ("stream bidi", msgpack.packb(trade("AB\u202eC", T0)), 0, "bad_stream", False),
    ("stream NUL", msgpack.packb(trade("AB\x00", T0)), 0, "bad_stream", False),
    ("no ts", msgpack.packb({"stream": "R.OK", "price": 1.0, "size": 1.0}), 0, "missing_field", True),
    ("ts float", msgpack.packb(trade("R.OK", 1.7e18)), 0, "ts_not_int", True),  # type: ignore[arg-type]
    ("ts bool", msgpack.packb(trade("R.OK", True)), 0, "ts_not_int", True),
    ("ts text", msgpack.packb(trade("R.OK", "2024-01-01")), 0, "ts_not_int", True),  # type: ignore[arg-type]
    ("ts ext timestamp", msgpack.packb(trade("R.OK", msgpack.Timestamp(1, 0))), 0, "ts_not_int", True),  # type: ignore
    ("ts negative", msgpack.packb(trade("R.OK", -1)), 0, "ts_out_of_range", True),
    ("ts uint64", msgpack.packb(trade("R.OK", 2**64 - 1)), 0, "ts_out_of_range", True),
    ("kind unknown", msgpack.packb(trade("R.OK", T0, kind="option")), 0, "unknown_kind", True),
    ("kind unguessable", msgpack.packb({"stream": "R.OK", "ts": T0, "size": 1.0}), 0, "unknown_kind", True),
    ("kind ambiguous", msgpack.packb(trade("R.OK", T0, bid=1.0)), 0, "ambiguous_kind", True),
    ("extra key", msgpack.packb(trade("R.OK", T0, venue="X")), 0, "unknown_field", True),
    ("quote field in a trade", msgpack.packb(trade("R.OK", T0, kind="trade", bid=1.0)), 0, "unknown_field", True),
    ("huge map", msgpack.packb(trade("R.OK", T0) | {f"k{i}": i for i in range(5000)}), 0, "unknown_field", True),
    ("price text", msgpack.packb(trade("R.OK", T0, "1.0")), 0, "wrong_type", True),  # type: ignore[arg-type]
    ("price ext", msgpack.packb(trade("R.OK", T0, msgpack.ExtType(5, b"xx"))), 0, "wrong_type", True),  # type: ignore
    ("price bool", msgpack.packb(trade("R.OK", T0, True)), 0, "wrong_type", True),
    ("price nil", msgpack.packb(trade("R.OK", T0, None)), 0, "missing_field", True),  # type: ignore[arg-type]
    ("no size", msgpack.packb({"stream": "R.OK", "ts": T0, "price": 1.0}), 0, "missing_field", True),
    ("no ask", msgpack.packb({"stream": "R.OK", "ts": T0, "bid": 1.0}), 0, "missing_field", True),
    ("price nan", msgpack.packb(trade("R.OK", T0, math.nan)), 0, "nonfinite_price", True),
    ("price inf", msgpack.packb(trade("R.OK", T0, math.inf)), 0, "nonfinite_price", True),
    ("ask -inf", msgpack.packb(quote("R.OK", T0, 1.0, -math.inf)), 0, "nonfinite_price", True),
    ("price 0", msgpack.packb(trade("R.OK", T0, 0)), 0, "nonpositive_price", True),
    ("bid negative", msgpack.packb(quote("R.OK", T0, -1.0, 1.0)), 0, "nonpositive_price", True),
    ("size nan", msgpack.packb(trade("R.OK", T0, size=math.nan)), 0, "nonfinite_size", True),
    ("size negative", msgpack.packb(trade("R.OK", T0, size=-1.0)), 0, "negative_size", True),
    ("ask_size negative", msgpack.packb(quote("R.OK", T0, ask_size=-2)), 0, "negative_size", True),
    ("side unknown", msgpack.packb(trade("R.OK", T0, side="long")), 0, "unknown_side", True),
    ("crossed quote", msgpack.packb(quote("R.OK", T0, 2.0, 1.0)), 0, "crossed_quote", True),
    ("oversize", msgpack.packb([trade("R.OK", T0)] * 2000), -1, "oversize", False),
    ("three frames", [b"a", b"b", b"c"], -1, "bad_framing", False),
    ("two frames, not tokens", [b"ticks", msgpack.packb(GOOD)], -1, "bad_framing", False),
    ("empty frame", b"", -1, "bad_msgpack", False),
    ("tokenized not a list", [b"tokens", msgpack.packb({"stream": "R.OK"})], -1, "bad_msgpack", False),
    ("tokenized garbage", [b"tokens", b"\xc1"], -1, "bad_msgpack", False),
    ("tokenized bad id", [b"tokens", msgpack.packb([{"stream": "R.OK", "ts": T0, "tokens": [10**6]}])], 0,
     "bad_tokens", True),
    ("tokenized empty", [b"tokens", msgpack.packb([{"stream": "R.OK", "ts": T0, "tokens": []}])], 0,
     "bad_tokens", True),
    ("tokenized ticks > tokens", [b"tokens", msgpack.packb([{"stream": "R.OK", "ts": T0, "tokens": [1], "ticks": 2}])],
     0, "bad_tokens", True),
    ("tokenized ticks 0", [b"tokens", msgpack.packb([{"stream": "R.OK", "ts": T0, "tokens": [1], "ticks": 0}])], 0,
     "wrong_type", True),
    ("tokenized extra key", [b"tokens", msgpack.packb([{"stream": "R.OK", "ts": T0, "tokens": [1], "x": 1}])], 0,
     "unknown_field", True),
    ("tokenized ts float", [b"tokens", msgpack.packb([{"stream": "R.OK", "ts": 1.5, "tokens": [1]}])], 0,
     "ts_not_int", True),
    ("tokenized bad stream", [b"tokens", msgpack.packb([{"stream": "a/b", "ts": T0, "tokens": [1]}])], 0,
     "bad_stream", False),
]


def test_every_documented_reject_reason_is_published_counted_and_leaves_the_service_serving(clients) -> None:
    control, sub, push = clients
    ctl, feed = control(), push()
    rejects = sub("_rejects/")
    feed.send(msgpack.packb(trade("R.OK", T0)))  # the stream exists: ts_backwards below is about order alone
    before = wait_stats(ctl, lambda s: s["ticks_in"] >= 1)["rejected"]
    seen: dict[str, int] = {}
    for case, message, index, reason, with_stream in BAD_MESSAGES + [
            ("ts backwards", msgpack.packb(trade("R.OK", T0 - 1)), 0, "ts_backwards", True)]:
        n = len(rejects.kept)
        if isinstance(message, list):
            feed.send_multipart(message)
        else:
            feed.send(message)
        topic, payload = rejects.until(lambda g: len(g) > n)[n]
        assert topic == "_rejects/", case
        assert set(payload) == {"index", "reason", "error"} | ({"stream"} if with_stream else set()), (case, payload)
        assert (payload["index"], payload["reason"]) == (index, reason), (case, payload)
        assert isinstance(payload["error"], str) and payload["error"].startswith(f"{reason}: "), (case, payload)
        assert len(payload["error"]) < 400, (case, "an error must not echo a huge input back")
        if with_stream:
            assert payload["stream"] == "R.OK"
        seen[reason] = seen.get(reason, 0) + 1
    assert DOCUMENTED_REASONS - seen.keys() == {"stream_refused", "overloaded"}  # those need other configs
    after = stats(ctl)
    for reason, n in seen.items():
        assert after["rejected"][reason] - before.get(reason, 0) == n, reason
    assert ctl.ok("health")["status"] == "serving"


def test_a_json_first_try_is_told_to_use_msgpack(clients) -> None:
    control, sub, push = clients
    rejects, feed = sub("_rejects/"), push()
    feed.send(b'[{"stream": "J", "ts": 1, "price": 1.0, "size": 1.0}]')
    (_, payload), = rejects.until(lambda g: len(g) >= 1)
    assert "looks like JSON text" in payload["error"] and "msgpack" in payload["error"]
    reply = control().raw(b'{"op": "health"}')
    assert reply["ok"] is False and "looks like JSON text" in reply["error"]


def test_a_bad_tick_never_drops_the_good_ones_of_its_message(clients) -> None:
    control, sub, push = clients
    s, ctl, feed = fresh_stream(), control(), push()
    rejects = sub("_rejects/")
    before = stats(ctl)["ticks_in"]
    feed.send(msgpack.packb([trade(s, T0), trade(s, T0 + 2, size=-1.0), 7, trade(s, T0 + 3), trade(s, T0 + 1)]))
    got = rejects.until(lambda g: len(g) >= 3)
    assert [(p["index"], p["reason"]) for _, p in got] == [(1, "negative_size"), (2, "not_a_map"),
                                                            (4, "ts_backwards")]
    wait_stats(ctl, lambda st: st["ticks_in"] - before == 2)


def test_tokenized_ticks_count_their_ticks_and_share_the_ordering_guard(clients) -> None:
    control, sub, push = clients
    s, ctl, feed = fresh_stream("TOK"), control(), push()
    answers = sub(f"dir/{s}/")
    before = stats(ctl)["ticks_in"]
    feed.send_multipart([b"tokens", msgpack.packb([
        {"stream": s, "ts": T0, "tokens": [1, 7, 18, 43], "ticks": 1},
        {"stream": s, "ts": T0 + 5, "tokens": [2, 14, 26, 44, 2, 14, 26, 44], "ticks": 2},
        {"stream": s, "ts": T0 + 6, "tokens": [3]}])])  # ticks defaults to 1
    (topic, payload), = answers.until(lambda g: len(g) >= 1)
    check_answer(topic, payload)
    assert (payload["seq"], payload["version"], payload["data_ts"]) == (1, 4, T0 + 6)
    wait_stats(ctl, lambda st: st["ticks_in"] - before == 4)
    rejects = sub("_rejects/")
    feed.send(msgpack.packb(trade(s, T0 + 1)))  # a raw tick of the same stream, older: the one guard refuses it
    (_, reject), = rejects.until(lambda g: len(g) >= 1)
    assert (reject["reason"], reject["stream"]) == ("ts_backwards", s)


def test_unicode_stream_names_make_their_own_topics(clients) -> None:
    control, sub, push = clients
    feed = push()
    names = ["Société Générale", "日経225", "AAPL US Equity", "x{stream}{query}", "A*B[1]?", "%s%n\\"]
    answers = sub(*[f"dir/{n}/" for n in names])
    for i, name in enumerate(names):
        feed.send(msgpack.packb(trade(name, T0 + i)))
    got = answers.until(lambda g: len(g) >= len(names))
    assert {t for t, _ in got} == {f"dir/{n}/" for n in names}
    assert all(p["stream"] + "/" == t.split("/", 1)[1] for t, p in got)


# -- hostile and heavy clients ---------------------------------------------------------------------------------

def test_garbage_from_one_feed_never_wedges_the_service_for_others(clients) -> None:
    control, sub, push = clients
    s, ctl, hostile, good = fresh_stream(), control(), push(), push()
    answers = sub(f"dir/{s}/")
    junk = [b"", b"\x00" * 1000, bytes(range(256)) * 50, b"\xdf\xff\xff\xff\xff", b"\xdd\xff\xff\xff\xff",
            b"\xc7\xff\x05" + b"x" * 100, b"\x91" * 60_000, msgpack.packb({"a" * 60_000: 1}),
            msgpack.packb([[[[[[[[[[[{"stream": s}]]]]]]]]]]]), msgpack.packb([None] * 20_000)]
    for i in range(10):
        for data in junk:  # a burst of garbage before each good tick, from another socket
            hostile.send(data)
            hostile.send_multipart([data, data, data])
        good.send(msgpack.packb(trade(s, T0 + i)))
        answers.until(lambda g, n=i: len(g) > n)  # answered through the garbage
        assert ctl.ok("health")["status"] == "serving"
    assert [p["seq"] for _, p in answers.kept] == list(range(1, 11))
    assert stats(ctl)["engine_errors"] == 0


def test_one_message_of_many_bad_ticks_publishes_a_bounded_summary(clients) -> None:
    control, sub, push = clients
    s, ctl, feed = fresh_stream(), control(), push()
    rejects = sub("_rejects/")
    before = stats(ctl)["rejected"]
    feed.send(msgpack.packb([None] * 5000 + [trade(s, T0, size=-1.0)] * 3 + [trade(s, T0)]))
    got = [p for _, p in rejects.until(lambda g: len(g) >= 102)]
    rejects.beats(2)
    assert len(rejects.kept) == 102  # the first 100 one by one, then one entry per (reason, stream) with a count
    assert [p["index"] for p in got[:100]] == list(range(100)) and "count" not in got[0]
    assert got[100] | {"error": ""} == {"index": 100, "reason": "not_a_map", "error": "", "count": 4900}
    assert got[101] | {"error": ""} == {"index": 5000, "reason": "negative_size", "error": "", "stream": s,
                                        "count": 3}
    after = stats(ctl)["rejected"]
    assert after["not_a_map"] - before.get("not_a_map", 0) == 5000
    assert after["negative_size"] - before.get("negative_size", 0) == 3


def test_several_push_sockets_at_once_lose_nothing(clients) -> None:
    control, sub, push = clients
    ctl = control()
    streams = [fresh_stream("MP") for _ in range(4)]
    feeds = [push() for _ in streams]
    before = stats(ctl)["ticks_in"]

    def send(feed: zmq.Socket, stream: str) -> None:
        for i in range(50):
            feed.send(msgpack.packb([trade(stream, T0 + 2 * i), quote(stream, T0 + 2 * i + 1)]))

    threads = [threading.Thread(target=send, args=pair) for pair in zip(feeds, streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wait_stats(ctl, lambda st: st["ticks_in"] - before == 400 and st["pending_tokens"] == 0, timeout_s=60)
    for stream in streams:  # one answer per message, gapless: 50 per topic
        reply = ctl.ok("answers", topic=f"dir/{stream}/", after=0)
        assert [a["seq"] for a in reply["answers"]] == list(range(1, 51)) and reply["complete"] is True
        assert reply["answers"][-1]["version"] == 100


def test_a_very_large_batch_is_one_tick_group(clients) -> None:
    control, sub, push = clients
    s, ctl, feed = fresh_stream(), control(), push()
    answers = sub(f"dir/{s}/")
    batch = [trade(s, T0 + i, 100 + (i % 7) * 0.25, 1.0) for i in range(1000)]
    data = msgpack.packb(batch)
    assert len(data) < MAX_MESSAGE_BYTES
    feed.send(data)
    (_, payload), = answers.until(lambda g: len(g) >= 1, timeout_s=60)
    assert (payload["seq"], payload["version"], payload["data_ts"]) == (1, 1000, T0 + 999)
    answers.beats(2)
    assert len(answers.kept) == 1  # one message, one group: one answer for a batch trigger


def test_a_message_far_past_the_limit_drops_the_connection_and_the_feed_reconnects(clients) -> None:
    """Over 8 x max_message_bytes ZeroMQ refuses the message unread (no reject, no count); the PUSH socket
    reconnects by itself and its next messages go in."""
    control, sub, push = clients
    s, ctl, feed = fresh_stream(), control(), push()
    answers = sub(f"dir/{s}/")
    feed.send(b"\xc4" + b"\x00" * (9 * MAX_MESSAGE_BYTES))
    deadline = time.monotonic() + 20
    i = 0
    while not answers.kept:  # the first sends may be lost with the dropped connection: keep sending
        assert time.monotonic() < deadline
        feed.send(msgpack.packb(trade(s, T0 + i)))
        i += 1
        answers._recv(0.2)
    assert ctl.ok("health")["status"] == "serving"


# -- answers (PUB) -------------------------------------------------------------------------------------------------

def test_prefix_subscriptions_are_exact(clients) -> None:
    control, sub, push = clients
    feed = push()
    a, b = fresh_stream("PX"), fresh_stream("PX")  # PX7.X is no prefix of PX70.X's topic: topics end with '/'
    answers = sub(f"dir/{a}/")
    for i in range(3):
        feed.send(msgpack.packb([trade(b, T0 + i), trade(a, T0 + i)]))
    got = answers.until(lambda g: len(g) >= 3)
    answers.beats(2)
    assert {t for t, _ in answers.kept} == {f"dir/{a}/"} and len(got) == 3


def test_a_subscriber_that_leaves_and_comes_back_fills_its_gap_with_the_answers_op(clients) -> None:
    control, sub, push = clients
    s, ctl, feed = fresh_stream(), control(), push()
    topic = f"dir/{s}/"
    first = sub(topic)
    for i in range(5):
        feed.send(msgpack.packb(trade(s, T0 + i)))
    last_seq = first.until(lambda g: len(g) >= 5)[-1][1]["seq"]
    first.close()  # away: what is published now is lost to it
    for i in range(5, 12):
        feed.send(msgpack.packb(trade(s, T0 + i)))
    wait_stats(ctl, lambda st: st["pending_tokens"] == 0)
    again = sub(topic)  # 1. subscribe, live at the first heartbeat
    for i in range(12, 15):
        feed.send(msgpack.packb(trade(s, T0 + i)))
    fill = ctl.ok("answers", topic=topic, after=last_seq)  # 2. what was missed
    assert set(fill) == {"ok", "answers", "complete", "last_seq", "oldest_seq"}
    assert fill["complete"] is True and fill["oldest_seq"] == 1 and type(fill["last_seq"]) is int
    seqs = [a["seq"] for a in fill["answers"]]
    assert seqs[0] == last_seq + 1 and seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    for answer in fill["answers"]:
        check_answer(answer["topic"], answer)
    live = again.until(lambda g: g and g[-1][1]["seq"] == 15)
    merged = sorted({*seqs, *(p["seq"] for _, p in live)})  # 3. duplicates dropped by seq
    assert merged == list(range(last_seq + 1, 16))
    limited = ctl.ok("answers", topic=topic, after=0, limit=2)
    assert [a["seq"] for a in limited["answers"]] == [1, 2] and limited["last_seq"] == 15


def test_the_answers_op_on_a_topic_never_published(clients) -> None:
    ctl = clients[0]()
    reply = ctl.ok("answers", topic="dir/NOBODY.X/", after=0)
    assert reply["answers"] == [] and reply["complete"] is True
    assert reply["last_seq"] == 0 and reply["oldest_seq"] is None


def test_a_late_subscriber_snapshots_with_get_then_drops_what_it_already_has(clients) -> None:
    control, sub, push = clients
    s, ctl, feed = fresh_stream(), control(), push()
    for i in range(4):
        feed.send(msgpack.packb(trade(s, T0 + i)))
    wait_stats(ctl, lambda st: st["pending_tokens"] == 0)
    late = sub(f"dir/{s}/")
    snapshot = ctl.ok("get", query="dir", stream=s)["answer"]
    check_answer(snapshot["topic"], snapshot)
    assert snapshot["seq"] == 4
    feed.send(msgpack.packb(trade(s, T0 + 9)))
    got = late.until(lambda g: any(p["seq"] == 5 for _, p in g))
    assert [p["seq"] for _, p in got if p["seq"] > snapshot["seq"]] == [5]


def test_heartbeats_count_up_and_say_what_the_engine_holds(clients) -> None:
    control, sub, push = clients
    beats = sub()
    beats.beats(3)
    seqs = [h["seq"] for h in beats.heartbeats]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    for h in beats.heartbeats:
        assert all(type(h[k]) is int for k in ("seq", "ts", "ticks_in", "answers_out", "pending_tokens"))
        assert abs(h["ts"] - time.time_ns()) < 60 * 10**9  # wall clock, ns


# -- control (ROUTER) ----------------------------------------------------------------------------------------------

YAML = """queries:
  - {name: vol, streams: ["CT*"], question: volatility_50, kind: choice, trigger: batch}
  - {name: move, streams: ["CT*"], question: move_bps_50, kind: expectation, trigger: {ticks: 2}}
  - {name: surp, streams: ["CT*"], kind: surprise, trigger: batch, topic: "surp/{stream}/"}
"""


def test_control_ops_and_their_reply_shapes(clients) -> None:
    control, sub, push = clients
    ctl, feed, s = control(), push(), fresh_stream("CT")
    reg = ctl.ok("register", yaml=YAML, source="mine.yaml")
    assert set(reg) == {"ok", "registered", "version"} and reg["registered"] == ["vol", "move", "surp"]
    assert type(reg["version"]) is int
    listed = ctl.ok("list")
    assert set(listed) == {"ok", "queries", "version"} and listed["version"] == reg["version"]
    specs = {q["name"]: q for q in listed["queries"]}
    assert {"dir", "vol", "move", "surp"} <= set(specs) and specs["move"]["kind"] == "expectation"
    answers = sub("vol/", "move/", "surp/")
    feed.send(msgpack.packb([trade(s, T0), quote(s, T0 + 1)]))
    got = answers.until(lambda g: {t for t, _ in g} == {f"vol/{s}/", f"move/{s}/", f"surp/{s}/"})
    values = {p["query"]: p["value"] for _, p in got}
    assert set(values["vol"]) == {"answer", "probs"}
    assert set(values["move"]) == {"expected", "probs"} and isinstance(values["move"]["expected"], float)
    assert set(values["surp"]) == {"nll"} and values["surp"]["nll"] >= 0
    for topic, payload in got:
        check_answer(topic, payload)
        assert payload["seq"] == 1

    got = ctl.ok("get", query="vol", stream=s)
    assert set(got) == {"ok", "answer"} and got["answer"]["topic"] == f"vol/{s}/"
    assert ctl.ok("get", query="vol", stream="NOBODY.X") == {"ok": True, "answer": None}
    assert ctl.ok("get", query="no_such_query", stream=s) == {"ok": True, "answer": None}

    fresh = ctl.ok("ask", stream=s, query="vol")  # computed now: seq 0, for this asker alone
    assert fresh["cached"] is False and fresh["answer"]["seq"] == 0 and fresh["answer"]["version"] == 2
    cached = ctl.ok("ask", stream=s, query="vol", max_stale_ticks=10)
    assert cached["cached"] is True and cached["answer"]["seq"] == 1
    expect = ctl.ok("ask", stream=s, query="move")
    assert set(expect["answer"]["value"]) == {"expected", "probs"}
    surprise = ctl.ok("ask", stream=s, query="surp")
    assert surprise["cached"] is True and set(surprise["answer"]["value"]) == {"nll"}
    adhoc = ctl.ok("ask", stream=s, spec={"name": "adhoc", "question": "regime", "kind": "choice"})
    assert adhoc["answer"]["query"] == "adhoc" and adhoc["answer"]["seq"] == 0
    gen = ctl.ok("ask", stream=s, spec={"name": "gen", "kind": "generate", "question_tokens": [1, 2],
                                         "max_tokens": 3})
    value = gen["answer"]["value"]
    assert set(value) == {"text", "tokens", "first_prob"} and isinstance(value["text"], str)
    assert 1 <= len(value["tokens"]) <= 3 and all(type(t) is int for t in value["tokens"])

    unreg = ctl.ok("unregister", name="move")
    assert set(unreg) == {"ok", "version"} and unreg["version"] > reg["version"]
    for name in ("vol", "surp"):
        ctl.ok("unregister", name=name)

    st = stats(ctl)
    for key in ("ticks_in", "answers_published", "pending_tokens", "kv_cells_used", "kv_cells_capacity",
                "sessions_resident", "streams", "ingest_messages", "control_requests", "control_errors",
                "engine_errors", "heartbeats", "queries"):
        assert type(st[key]) is int, key
    assert isinstance(st["rejected"], dict) and all(type(n) is int for n in st["rejected"].values())
    assert set(st["freshness_ms"]) == {"p50", "p99"} and isinstance(st["behind"], bool)
    assert {"forwards", "tokens_advanced", "tokens_rebuilt"} <= set(st["runner"])
    assert {"evictions", "rolls", "refused_streams"} <= set(st["scheduler"])
    assert isinstance(st["uptime_s"], float) and isinstance(st["model"], str)
    health = ctl.ok("health")
    assert set(health) == {"ok", "status", "uptime_s", "streams", "model"} and health["status"] == "serving"
    assert type(health["streams"]) is int and isinstance(health["uptime_s"], float)


def test_a_req_socket_works_too(clients) -> None:
    ctl = clients[0](zmq.REQ)
    assert ctl.ok("health", unused_key=1)["status"] == "serving"  # keys an op does not use are ignored
    assert ctl.ok("list")["queries"]


CONTROL_ERRORS = [
    ({"op": "fly"}, "unknown op 'fly'"),
    ({"op": "answers", "topic": "dir/R.OK/", "after": True}, "needs 'after' as int"),
    ({"op": 5}, "string 'op'"),
    ({"nop": "list"}, "string 'op'"),
    (["list"], "msgpack map"),
    ({"op": "register"}, "needs 'yaml'"),
    ({"op": "register", "yaml": "queries: [{name: x"}, "control:register"),
    ({"op": "register", "yaml": "queries:\n  - {name: x, streams: [a], kind: choice, question: direction_20,"
                                " trigerr: batch}\n", "source": "/etc/my.yaml"}, "my.yaml:2"),
    ({"op": "unregister", "name": "no_such_query"}, "no query named 'no_such_query'"),
    ({"op": "unregister"}, "needs 'name'"),
    ({"op": "get", "query": "dir"}, "needs 'stream'"),
    ({"op": "ask", "stream": "NOBODY.X", "query": "dir"}, "has sent no data"),
    ({"op": "ask", "stream": "R.OK", "query": "nope"}, "nope"),
    ({"op": "ask", "stream": "R.OK"}, "needs 'query'"),
    ({"op": "ask", "stream": "R.OK", "query": "dir", "max_stale_ticks": -1}, "max_stale_ticks as an int >= 0"),
    ({"op": "ask", "stream": "R.OK", "spec": {"name": "x", "kind": "choice"}}, "question"),
    ({"op": "ask", "stream": "R.OK", "spec": "dir"}, "needs 'spec' as dict"),
    ({"op": "answers", "topic": "dir/R.OK", "after": 0}, "topics end with '/'"),
    ({"op": "answers", "topic": "A" * 10_000, "after": 0}, "topics end with '/'"),
    ({"op": "ask", "stream": "A" * 10_000, "query": "dir"}, "has sent no data"),
    ({"op": "get", "stream": "A", "query": "B" * 10_000, "id": 5}, ""),  # not an error: answer nil (below)
    ({"op": "answers", "topic": "dir/R.OK/"}, "needs 'after'"),
    ({"op": "answers", "topic": "dir/R.OK/", "after": 0, "limit": 0}, "limit from 1 to 1000"),
    ({"op": "answers", "topic": "dir/R.OK/", "after": 0, "limit": 5000}, "limit from 1 to 1000"),
]


@pytest.mark.parametrize("request_, expected", CONTROL_ERRORS, ids=[str(r)[:40] for r, _ in CONTROL_ERRORS])
def test_control_errors_have_the_documented_shape(clients, request_, expected) -> None:
    ctl = clients[0]()
    reply = ctl.raw(msgpack.packb(request_))
    if "id" in request_:
        assert reply == {"ok": True, "answer": None, "id": 5}
        return
    assert reply["ok"] is False and expected in reply["error"], reply


def test_control_garbage_is_answered_and_counted(clients) -> None:
    ctl = clients[0]()
    errors = stats(ctl)["control_errors"]
    for payload in (b"\xc1", b"", b"\x91" * 100_000, msgpack.packb({1: "list"}),
                    msgpack.packb({"op": msgpack.ExtType(1, b"x")})):
        reply = ctl.raw(payload)
        assert reply["ok"] is False
    assert stats(ctl)["control_errors"] - errors == 5
    assert ctl.ok("health")["status"] == "serving"


def test_metrics_are_prometheus_text(server, clients) -> None:
    body = urllib.request.urlopen(server["metrics"], timeout=10).read().decode()
    for name in ("flashtick_ticks_in_total", "flashtick_rejected_total", "flashtick_answers_published_total",
                 "flashtick_answer_freshness_ms", "flashtick_kv_cells_used", "flashtick_kv_cells_capacity",
                 "flashtick_evictions_total", "flashtick_rolls_total", "flashtick_tokens_rebuilt_total",
                 "flashtick_forwards_total"):
        assert f"\n{name}" in body or body.startswith(name), name


def test_pipelined_requests_are_told_apart_by_their_id(clients) -> None:
    """An ask computed in a forward replies after requests sent behind it: the echoed `id` matches them up."""
    control, sub, push = clients
    s, ctl, feed = fresh_stream(), control(), push()
    feed.send(msgpack.packb(trade(s, T0)))
    wait_stats(ctl, lambda st: st["pending_tokens"] == 0 and ctl.ok("get", query="dir", stream=s)["answer"])
    requests = [{"op": "ask", "stream": s, "query": "dir", "id": 1}, {"op": "health", "id": "two"},
                {"op": "fly", "id": [3]}, {"op": "list"}]
    for request in requests:
        ctl.sock.send_multipart([b"", msgpack.packb(request)])
    replies = []
    for _ in requests:
        assert ctl.sock.poll(10_000)
        replies.append(msgpack.unpackb(ctl.sock.recv_multipart()[-1], raw=False))
    by_id = {str(r.get("id")): r for r in replies}
    assert by_id["1"]["answer"]["seq"] == 0 and by_id["two"]["status"] == "serving"
    assert by_id["[3]"]["ok"] is False and "unknown op" in by_id["[3]"]["error"]
    assert by_id["None"]["queries"] and "id" not in by_id["None"]


def test_a_control_request_past_max_control_bytes_gets_no_reply_and_the_socket_recovers(clients) -> None:
    ctl = clients[0]()
    ctl.sock.send_multipart([b"", msgpack.packb({"op": "register", "yaml": "#" * (1 << 20)})])  # > 1 MiB
    assert not ctl.sock.poll(500)  # ZeroMQ dropped the connection unread: no reply comes, ever
    deadline = time.monotonic() + 15
    while True:  # the DEALER reconnects by itself; a request sent meanwhile may be lost with the old connection
        assert time.monotonic() < deadline
        ctl.sock.send_multipart([b"", msgpack.packb({"op": "health", "id": 7})])
        if ctl.sock.poll(300):
            break
    reply = msgpack.unpackb(ctl.sock.recv_multipart()[-1], raw=False)
    assert reply["status"] == "serving" and reply["id"] == 7


@pytest.fixture
def shedding(tmp_path):
    """A server of small limits: it refuses new ticks while more than one token waits for a forward, holds two
    streams and keeps three published answers for the answers op."""
    from conftest import serving, tiny_tick_checkpoint
    from engine.service.config import ServiceConfig

    config = ServiceConfig.from_dict({
        "model": {"path": str(tiny_tick_checkpoint(tmp_path))},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "limits": {"heartbeat_s": 0.1, "max_backlog_tokens": 1, "when_behind": "shed"},
        "scheduler": {"max_streams": 2},
        "log": {"answers_keep": 3},
    })
    with serving(config) as srv:
        yield srv.endpoints


def test_when_behind_shed_refuses_ticks_as_overloaded_and_max_streams_as_stream_refused(shedding) -> None:
    rejects, feed, ctl = Sub(shedding["answers"], ["_rejects/"]), push_socket(shedding["ingest"]), \
        Control(shedding["control"])
    try:
        feed.send(msgpack.packb([trade("SHED", T0 + i) for i in range(5)]))  # the first tick puts it behind
        got = [p for _, p in rejects.until(lambda g: len(g) >= 4)]
        assert [(p["index"], p["reason"], p["stream"]) for p in got] == [(i, "overloaded", "SHED") for i in (1, 2, 3, 4)]
        st = wait_stats(ctl, lambda st: st["pending_tokens"] == 0)
        assert st["ticks_in"] == 1 and st["rejected"] == {"overloaded": 4}
        feed.send(msgpack.packb(trade("SHED", T0 + 9)))  # caught up: accepted again
        wait_stats(ctl, lambda st: st["ticks_in"] == 2 and st["pending_tokens"] == 0)
        feed.send(msgpack.packb(trade("SHED2", T0)))  # a second stream fits scheduler.max_streams: 2 ...
        wait_stats(ctl, lambda st: st["ticks_in"] == 3 and st["pending_tokens"] == 0)
        feed.send(msgpack.packb(trade("SHED3", T0)))  # ... a third is refused
        reject = rejects.until(lambda g: len(g) >= 5)[4][1]
        assert (reject["index"], reject["reason"], reject["stream"]) == (0, "stream_refused", "SHED3")
        assert reject["error"].startswith("stream_refused: ")
    finally:
        for c in (rejects, ctl):
            c.close()
        feed.close(linger=0)


# -- a real `flashtick serve` process, restarted -----------------------------------------------------------------

def start_serve(config: str, data_dir: str) -> tuple[Any, dict[str, str]]:
    """`python -m engine.service.cli serve` (the `flashtick serve` command) on ephemeral ports, built-in model;
    the endpoints are read from its 'flashtick serving ingest=... answers=... control=...' line on stderr."""
    import select
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "engine.service.cli", "serve", "--config", config,
                             "--data-dir", data_dir], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    text = b""
    while time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stderr], [], [], 1.0)[0]:
            text += os.read(proc.stderr.fileno(), 65536)  # unbuffered: select() sees what is left to read
            for line in text.decode(errors="replace").splitlines():
                if line.startswith("flashtick serving "):
                    return proc, dict(word.split("=", 1) for word in line.split()[2:])
    proc.kill()
    raise AssertionError(f"serve did not start: {text.decode(errors='replace')}")


def stop_serve(proc: Any) -> None:
    import signal

    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(30) == 0  # SIGTERM stops it cleanly
    finally:
        proc.kill()
        proc.stderr.close()


def test_a_serve_process_keeps_seqs_across_a_restart(tmp_path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text('endpoints: {ingest: "tcp://127.0.0.1:0", answers: "tcp://127.0.0.1:0",'
                      ' control: "tcp://127.0.0.1:0"}\nlimits: {heartbeat_s: 0.1}\n'
                      "queries: {path}\n".replace("{path}", str(tmp_path / "q.yaml")))
    (tmp_path / "q.yaml").write_text("queries:\n  - {name: d, streams: ['*'], question: direction_5, kind: choice,"
                                     " trigger: batch}\n")
    seqs, beats = [], []
    for start in range(2):
        proc, endpoints = start_serve(str(config), str(tmp_path / "data"))
        sub, feed, ctl = Sub(endpoints["answers"], ["d/RS/"]), push_socket(endpoints["ingest"]), \
            Control(endpoints["control"])
        try:
            beats.append(sub.heartbeats[0]["seq"])
            for i in range(3):
                feed.send(msgpack.packb(trade("RS", T0 + 10 * start + i)))
            seqs += [p["seq"] for _, p in sub.until(lambda g: len(g) >= 3, timeout_s=30)]
            history = ctl.ok("answers", topic="d/RS/", after=0)
            assert [a["seq"] for a in history["answers"]] == seqs and history["last_seq"] == len(seqs)
            assert ctl.ok("get", query="d", stream="RS")["answer"]["version"] == 3 * (start + 1)
        finally:
            for c in (sub, ctl):
                c.close()
            feed.close(linger=0)
            stop_serve(proc)
    assert seqs == [1, 2, 3, 4, 5, 6]  # seq continues over the restart, never reused
    assert beats[1] <= 2  # heartbeat seq counts from 1 at each start


def test_the_answers_op_says_when_the_history_no_longer_holds_a_gap(shedding) -> None:
    feed, ctl = push_socket(shedding["ingest"]), Control(shedding["control"])
    try:
        ctl.ok("register", yaml="queries: [{name: k, streams: ['*'], question: direction_5, kind: choice,"
                                " trigger: batch}]")
        for i in range(6):  # one at a time: this server sheds ticks sent while one waits
            feed.send(msgpack.packb(trade("KEEP", T0 + i)))
            wait_stats(ctl, lambda st, n=i + 1: st["ticks_in"] == n and st["pending_tokens"] == 0)
        reply = ctl.ok("answers", topic="k/KEEP/", after=1)
        assert [a["seq"] for a in reply["answers"]] == [4, 5, 6]  # log.answers_keep: 3
        assert (reply["complete"], reply["oldest_seq"], reply["last_seq"]) == (False, 4, 6)
        assert ctl.ok("answers", topic="k/KEEP/", after=3)["complete"] is True
    finally:
        ctl.close()
        feed.close(linger=0)


def test_an_external_pub_feed_sends_what_a_push_feed_sends(tmp_path) -> None:
    """endpoints.feeds: the service SUB-connects to a feed's PUB socket, subscribed to everything."""
    from conftest import serving, tiny_tick_checkpoint
    from engine.service.config import ServiceConfig

    pub = CTX.socket(zmq.XPUB)  # an XPUB sees the service's subscription arrive: no slow-joiner guess
    pub.linger = 0
    pub.bind("tcp://127.0.0.1:*")
    config = ServiceConfig.from_dict({
        "model": {"path": str(tiny_tick_checkpoint(tmp_path))},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0",
                      "feeds": [pub.getsockopt_string(zmq.LAST_ENDPOINT)]},
        "limits": {"heartbeat_s": 0.1},
    })
    with serving(config) as srv:
        rejects, ctl = Sub(srv.endpoints["answers"], ["_rejects/"]), Control(srv.endpoints["control"])
        try:
            assert pub.poll(10_000) and pub.recv() == b"\x01"  # subscribed to every topic
            pub.send(msgpack.packb([trade("PUBFEED", T0), quote("PUBFEED", T0 + 1)]))  # one frame, no topic
            pub.send(msgpack.packb(trade("PUBFEED", T0 + 2)))
            pub.send_multipart([b"ticks/PUBFEED", msgpack.packb(trade("PUBFEED", T0 + 3))])  # a topic frame: refused
            wait_stats(ctl, lambda st: st["ticks_in"] == 3)
            (_, reject), = rejects.until(lambda g: len(g) >= 1)
            assert (reject["index"], reject["reason"]) == (-1, "bad_framing")
        finally:
            rejects.close()
            ctl.close()
            pub.close()
