"""Clients of a running flashtick service: the control socket and the answer topics.

    with ControlClient("tcp://127.0.0.1:5557") as control:
        control.call("register", yaml=open("queries.yaml").read())
        print(control.call("ask", stream="BTCUSDT", query="dir20"))

    with AnswerSubscriber("tcp://127.0.0.1:5556", ["dir20/"]) as answers:
        topic, answer = answers.recv(timeout_s=5)
"""

from __future__ import annotations

from typing import Any

import msgpack
import zmq


class ControlError(RuntimeError):
    """The service answered {ok: false, error}, or did not answer in time."""


def _curve_client(sock: zmq.Socket, server_public_key: bytes | None) -> None:
    if server_public_key:
        public, secret = zmq.curve_keypair()
        sock.curve_serverkey = server_public_key
        sock.curve_publickey = public
        sock.curve_secretkey = secret


class ControlClient:
    def __init__(self, endpoint: str, timeout_s: float = 30.0, server_public_key: bytes | None = None) -> None:
        self.endpoint = endpoint
        self.timeout_ms = int(timeout_s * 1000)
        self._sock = zmq.Context.instance().socket(zmq.DEALER)
        self._sock.linger = 0
        _curve_client(self._sock, server_public_key)
        self._sock.connect(endpoint)

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its reply; raises ControlError on {ok: false} or time-out."""
        reply = self.request({"op": op, **fields})
        if not reply.get("ok"):
            raise ControlError(reply.get("error", "unknown error"))
        return reply

    def request(self, request: dict[str, Any]) -> dict[str, Any]:
        """The raw reply, {ok: false, ...} included."""
        self.send_raw(msgpack.packb(request, use_bin_type=True))
        return self.receive()

    def receive(self) -> dict[str, Any]:
        """The next reply (requests are answered in order)."""
        if not self._sock.poll(self.timeout_ms):
            raise ControlError(f"no reply from {self.endpoint} within {self.timeout_ms / 1000:.0f} s")
        return msgpack.unpackb(self._sock.recv_multipart()[-1], raw=False)

    def send_raw(self, payload: bytes) -> None:
        self._sock.send_multipart([b"", payload])

    def close(self) -> None:
        self._sock.close(linger=0)

    def __enter__(self) -> "ControlClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AnswerSubscriber:
    def __init__(self, endpoint: str, topics: list[str] | None = None, server_public_key: bytes | None = None) -> None:
        self._sock = zmq.Context.instance().socket(zmq.SUB)
        self._sock.linger = 0
        _curve_client(self._sock, server_public_key)
        self._sock.connect(endpoint)
        for topic in topics if topics is not None else [""]:
            self._sock.setsockopt(zmq.SUBSCRIBE, topic.encode())

    def recv(self, timeout_s: float = 5.0) -> tuple[str, dict[str, Any]] | None:
        """The next (topic, payload), or None after ``timeout_s``."""
        if not self._sock.poll(int(timeout_s * 1000)):
            return None
        topic, payload = self._sock.recv_multipart()
        return topic.decode(), msgpack.unpackb(payload, raw=False)

    def close(self) -> None:
        self._sock.close(linger=0)

    def __enter__(self) -> "AnswerSubscriber":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def format_answer(payload: dict) -> str:
    value = payload.get("value", {})
    if "expected" in value:
        return f"E={value['expected']:+.3f}"
    if "answer" in value:
        return f"{value['answer']} ({value['probs'][value['answer']]:.2f})"
    if "nll" in value and value["nll"] is not None:
        return f"nll={value['nll']:.2f}"
    return str(value.get("text", value))[:40]


def render_table(table: dict[str, dict], out: Any, title: str = "") -> None:
    """A live table of the latest answer per topic (redrawn in place on a terminal)."""
    lines = [title] if title else []
    lines.append(f"{'query':<12}{'stream':<12}{'seq':>6}{'ticks':>8}  answer")
    for topic in sorted(table):
        p = table[topic]
        lines.append(f"{p['query']:<12}{p['stream']:<12}{p['seq']:>6}{p['version']:>8}  {format_answer(p)}")
    if out.isatty():
        out.write("\x1b[H\x1b[2J" + "\n".join(lines) + "\n")
    else:
        out.write("\n".join(lines) + "\n\n")
    out.flush()
