"""A raw flashtick client for the wire tests: pyzmq and msgpack only, every frame built as docs/wire-protocol.md
says. Nothing of engine/, queries/ or connectors/ is imported here: this is what a C++, Rust or Node trading
system would write from the document alone."""

from __future__ import annotations

import itertools
import re
import time
from typing import Any

import msgpack
import zmq

CTX = zmq.Context.instance()
# an error reply's `reason`
CONTROL_REASONS = {"starting", "busy", "shard_lost", "bad_request", "unknown_stream", "unknown_query", "ask_failed",
                   "internal", "stopping"}
T0 = 1_700_000_000_000_000_000  # int64 ns since the epoch
ANSWER_KEYS = {"query", "stream", "topic", "seq", "version", "data_ts", "answer_ts", "model", "value",
               "query_version"}
HEARTBEAT_KEYS = {"seq", "ts", "ticks_in", "answers_out", "pending_tokens", "behind", "lag_s", "shed",
                  "conflated", "max_message_bytes", "protocol", "epoch", "registry_version", "last_seqs",
                  "unread_messages", "unread_bytes"}
PROTOCOL = 1  # the wire protocol this client is written to (docs/wire-protocol.md, "Compatibility")
_names = itertools.count()


def fresh_stream(prefix: str = "W") -> str:
    return f"{prefix}{next(_names)}.X"


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
            assert set(reply) - {"id"} == {"ok", "reason", "error"}
            assert isinstance(reply["error"], str) and reply["error"]
            assert reply["reason"] in CONTROL_REASONS, reply
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
            assert set(payload) == HEARTBEAT_KEYS and payload["protocol"] == PROTOCOL \
                and isinstance(payload["behind"], bool) \
                and isinstance(payload["lag_s"], float) and all(type(payload[key]) is int and payload[key] >= 0
                                                                for key in ("shed", "conflated", "registry_version")) \
                and all(type(topic) is str and type(seq) is int and seq > 0
                        for topic, seq in payload["last_seqs"].items())
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


def check_answer(topic: str, payload: dict, published: bool = True, filled: bool = False) -> None:
    """The documented payload: keys, types, topic == frame; ``published`` (PUB's, not a control reply's) carries
    its epoch and its model's digest too; ``filled`` (an `answers` op's, a gap fill) the age, clock offset and
    caveats it was published with, not its epoch nor digest."""
    # a published answer carries its epoch and age at publish, and its stream's clock offset when stamped with the
    # wall clock (this client's streams are on T0, 2023: never)
    always = ANSWER_KEYS | ({"epoch", "model_digest", "data_age_ms"} if published else set()) | (
        {"data_age_ms"} if filled else set())
    optional = {"clock_offset_ms", "caveats"} if published or filled else set()  # (a wall-clock stream's; a stream
    optional |= {"tick_seq"}  # (the answered tick's seq, where its feed sent one)
    assert always <= set(payload) <= always | optional, payload  # the model is out of its range on: typed below)
    if "tick_seq" in payload:
        assert type(payload["tick_seq"]) is int and payload["tick_seq"] >= 0, payload
    if "caveats" in payload:
        assert all(set(c) >= {"kind", "text"} for c in payload["caveats"]), payload
    if "clock_offset_ms" in payload:
        assert type(payload["clock_offset_ms"]) is float, payload
    if published:
        assert re.fullmatch(r"[0-9a-f]{16}", payload["epoch"]), payload
        assert re.fullmatch(r"[0-9a-f]{64}", payload["model_digest"]), payload  # (review349 #3: which model)
    if published or filled:
        assert type(payload["data_age_ms"]) is float, payload
    assert payload["topic"] == topic == f"{payload['query']}/{payload['stream']}/"
    for key in ("seq", "version", "data_ts", "answer_ts"):
        assert type(payload[key]) is int and payload[key] >= 0, key
    assert isinstance(payload["model"], str) and payload["model"]
    assert isinstance(payload["value"], dict)


def resume_after(ticks: list[dict], held: dict) -> list[dict]:
    """docs/wire-protocol.md's recipe ("A service that stops"), as a raw feed runs it from the `streams` reply:
    none of the stream's ticks stamped before `last_ts`; of those stamped exactly `last_ts`, all but the first
    `at_last_ts`; all after it."""
    resend, at_last = [], 0
    for tick in ticks:
        if tick["ts"] == held["last_ts"]:
            at_last += 1
        if tick["ts"] > held["last_ts"] or tick["ts"] == held["last_ts"] and at_last > held["at_last_ts"]:
            resend.append(tick)
    return resend


def held_of(control: Control, stream: str) -> dict | None:
    return control.ok("streams", streams=[stream])["streams"][stream]


def wait_until(condition, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not there in time"
        time.sleep(0.05)
