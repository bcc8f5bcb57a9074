"""The client of the control socket: `ControlClient`, one request and its reply at a time with the reply's id
checked, the time-outs for a connection and for a reply told apart, and the errors that say which one failed
(`ControlError` and its kinds). The service's side of the socket is engine/service/control_socket.py and
control_ops.py; the public import is engine/service/client.py."""

from __future__ import annotations

import functools
import itertools
import math
import os
import threading
import time
from typing import Any

import msgpack
import zmq

from connectors.feed import check_endpoint
from connectors.handshake import HandshakeMonitor, curve_client
from connectors.tcp_endpoints import ipv6_for
from connectors.unclosed_clients import close_when_collected
from connectors.wire_payload import packable
from engine.forked_clients import CreatingProcess
from engine.quoting import quoted
from engine.service.control_requests import COMMON_KEYS, CONTROL_OPS
from engine.stream_patterns import did_you_mean

POLL_SLICE_MS = 100  # how often a waiting client looks at its handshake
_NO_ID = object()  # a request the caller gave no id
TINY_CONNECT_S = 0.1  # a connect wait below this fails on a live, idle service too: said, not blamed on it
TINY_REPLY_S = 0.1  # so does a reply wait below this (the request's round trip, the service's turn to read it)
FETCH_LIMIT = 1000  # answers per `answers` request (the service's most)


class ControlError(RuntimeError):
    """The service answered {ok: false, error}, did not answer in time, or refused the connection. ``reason``: the
    reply's (``starting``, ``busy``, ``shard_lost``, ``stopping``: send the same request again later; ``bad_request``,
    ``unknown_stream``, ``ask_failed``, ``internal``: see docs/wire-protocol.md), None without one (no reply, or a
    service of an earlier version)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class ControlUnreachable(ControlError, ConnectionError):
    """Nothing accepted the connection in time (a first one, or a new one after the last dropped): no service there
    (yet, or any more). The request was not sent, and never will be: send it again."""


class ControlDropped(ControlError, ConnectionError):
    """The connection dropped after the request went and before its reply came (the service restarted or
    stopped): the request may or may not have run. The same client reconnects by itself; send it again (an `ask`
    is safe to repeat; check a `register` with `list`)."""


class ControlTimeout(ControlError, TimeoutError):
    """No reply in time: the request may still run (retry an `ask`; a `register` may have taken). Refusals and
    {ok: false} are plain ControlErrors."""


class ControlBusy(ControlTimeout):
    """No reply in time over a live connection (its handshake done, not dropped): a service is there and took the
    request, but was too busy to answer (a long forward, a restart catching up), not down."""


def positive_timeout(value: Any, name: str) -> float:
    """A time-out in seconds, > 0: 0 or less would fail at once and be blamed on the service ("busy?", "down?")."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == math.inf:
        raise ValueError(f"{name} is a number of seconds > 0, got {quoted(value)}")
    return float(value)


def close_sockets(process: CreatingProcess, handshake: HandshakeMonitor, sock: zmq.Socket) -> None:
    """A client's close: its monitor first (closed after the socket, libzmq keeps the descriptors), then the socket,
    dropping what it holds unsent (a request or subscription of a client being closed is of no use). Nothing in a
    fork()ed child: the sockets are the parent's (libzmq's calls on a copy would signal the parent's I/O thread)."""
    if process.forked:
        return
    handshake.close()
    sock.close(linger=0)


def unknown_keys(op: str, fields: dict[str, Any]) -> str | None:
    """Why ``call(op, **fields)`` is refused before it is sent: a key its op does not take, which the service would
    ignore with a reply's note (wire clients of other languages keep that), and a Python caller would not see
    (review354 #12: `max_stale=20`, the CLI flag's name, computed a fresh answer where `max_stale_ticks` reads the
    cache). None for a known op's own keys, and for an op this client does not know (a later service's: the
    service says whether it has it)."""
    known = CONTROL_OPS.get(op)
    if known is None:
        return None
    unknown = [key for key in fields if key not in known.keys and key not in COMMON_KEYS]
    if not unknown:
        return None
    takes = ", ".join(known.keys) + "; id" if known.keys else "none but id"
    return (f"ControlClient.call({quoted(op)}): {'key' if len(unknown) == 1 else 'keys'} "
            f"{', '.join(map(quoted, unknown))} not taken by op {quoted(op)} (its keys: {takes}; and the call's own "
            f"timeout_s); nothing was sent (ControlClient.request({{...}}) sends a map as it is, for a key of a later "
            f"service's){did_you_mean(unknown, known.keys)}")


class ControlClient:
    """Requests to the control socket. Each `call` (and `request`) carries an `id` and takes only the reply with
    that id: a reply that comes after its call timed out is dropped when the next call reads it (counted in
    `stale_replies`), never returned as another call's answer. Calls from several threads take turns. It belongs
    to the process that made it: in a fork()ed child every call raises UsedAfterFork."""

    def __init__(self, endpoint: str, timeout_s: float = 30.0, server_public_key: bytes | None = None,
                 client_keypair: tuple[bytes, bytes] | None = None, connect_timeout_s: float = 10.0,
                 refused_at_once: bool = False) -> None:
        """``timeout_s``: for each reply (a call may give its own); ``connect_timeout_s``: for a connection to be
        made at all (nothing listening: an error after it, not after ``timeout_s``). ``refused_at_once``: a refused
        connection (nothing listens on the port) is an error at once rather than retried for ``connect_timeout_s``
        (a probe's answer: a service that is still binding is down to it too)."""
        self.endpoint = check_endpoint(endpoint, "control endpoint")
        self.timeout_s = positive_timeout(timeout_s, "timeout_s")
        self.timeout_ms = int(self.timeout_s * 1000)
        positive_timeout(connect_timeout_s, "connect_timeout_s")
        self._connect_s = min(connect_timeout_s, timeout_s)
        self._connect_by = time.monotonic() + self._connect_s
        self._refused_at_once = refused_at_once
        self._process = CreatingProcess(f"ControlClient to {endpoint}")
        self._sock = zmq.Context.instance().socket(zmq.DEALER)
        self._sock.linger = 0
        curve_client(self._sock, server_public_key, client_keypair)
        self._handshake = HandshakeMonitor(self._sock, curve=bool(server_public_key))
        self.unclosed = close_when_collected(self, f"ControlClient to {endpoint}", functools.partial(
            close_sockets, self._process, self._handshake, self._sock))
        self._disconnects_at_send = 0
        ipv6_for(self._sock, endpoint)
        self._sock.connect(endpoint)
        self._lock = threading.Lock()  # one request and its reply at a time: the socket is not thread-safe
        self._ids = itertools.count(1)
        self._tag = f"{os.getpid():x}.{id(self):x}"  # ids of this client's requests: `<tag>.<n>`
        self.stale_replies = 0  # replies dropped because their call had already timed out
        self._closed = False
        self._waited_s = timeout_s  # the time-out of the request in flight, for its error

    def call(self, op: str, timeout_s: float | None = None, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its reply (``timeout_s``: this call's own wait; default the client's);
        raises ControlError on {ok: false}, time-out or refusal. A key ``op`` does not take raises TypeError before
        anything is sent (the service would ignore it, with only a note); ``request`` sends a map as it is."""
        refusal = unknown_keys(op, fields)
        if refusal is not None:
            raise TypeError(refusal)
        reply = self.request({"op": op, **fields}, timeout_s)
        if not reply.get("ok"):
            raise ControlError(reply.get("error", "unknown error"), reply.get("reason"))
        return reply

    def topics(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """The op ``topics`` through all its pages: every topic starting with ``prefix`` -> {last_seq, answer_ts}."""
        found: dict[str, dict[str, Any]] = {}
        after = ""
        while True:
            reply = self.call("topics", prefix=prefix, after=after)
            found.update(reply["topics"])
            if not reply.get("truncated") or not reply["topics"]:
                return found
            after = max(reply["topics"])

    def request(self, request: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
        """The raw reply, {ok: false, ...} included: the one whose `id` is the request's (the caller's, or one
        given here and taken off the reply)."""
        self._process.check()
        if self._closed:
            raise ControlError(f"ControlClient to {self.endpoint} is closed")
        request = dict(request)
        theirs = request.pop("id", _NO_ID)  # the caller's id goes back on the reply; the wire carries ours, which
        rid = request["id"] = f"{self._tag}.{next(self._ids)}"  # no two requests share
        wait_s = self.timeout_s if timeout_s is None else positive_timeout(timeout_s, "timeout_s")
        deadline = time.monotonic() + wait_s  # waiting for another thread's call counts too
        if not self._lock.acquire(timeout=wait_s):
            raise ControlTimeout(f"no reply from {self.endpoint} within the time-out ({wait_s:g} s): "
                                 f"another thread's call on this client held it all that time")
        try:
            self._waited_s = wait_s
            self.send_raw(msgpack.packb(request, use_bin_type=True, default=packable),
                          max(0, int((deadline - time.monotonic()) * 1000)))
            while True:
                reply = self.receive(deadline)
                if not isinstance(reply, dict) or "id" not in reply or reply["id"] == rid:  # (a server that does
                    break  # not echo ids answers in order)
                self.stale_replies += 1
        finally:
            self._lock.release()
        if isinstance(reply, dict) and "id" in reply:
            if theirs is _NO_ID:
                del reply["id"]
            else:
                reply["id"] = theirs
        return reply

    def receive(self, deadline: float | None = None) -> dict[str, Any]:
        """The next reply, whichever request it answers (``deadline``: time.monotonic(); default the client's
        time-out from now)."""
        self._process.check()
        if deadline is None:
            deadline = time.monotonic() + self.timeout_ms / 1000
        try:
            while not self._sock.poll(max(0, min(POLL_SLICE_MS, int((deadline - time.monotonic()) * 1000)))):
                self._handshake.poll()
                if self._handshake.disconnects > self._disconnects_at_send:  # the request went with the connection
                    raise ControlDropped(f"the connection to {self.endpoint} dropped before the reply came (the "
                                         f"service restarted?): ask again")
                self._give_up_if_refused_or_late(deadline)  # (after: a drop since the send is not "unreachable")
            return msgpack.unpackb(self._sock.recv_multipart()[-1], raw=False)
        except zmq.ZMQError:
            if self._closed:  # closed by another thread while this one waited
                raise ControlError(f"ControlClient to {self.endpoint} was closed while waiting for a reply") from None
            raise

    def _give_up_if_refused_or_late(self, deadline: float) -> None:
        refused = self._handshake.refused()
        if refused is not None:  # ZeroMQ would retry for ever; this will not change
            raise ControlError(f"{self.endpoint} refused the connection: {refused}")
        if self._refused_at_once and not self._handshake.connected and self._handshake.connect_retries:
            raise self._unreachable(f"no connection to {self.endpoint}: it was refused (nothing listens there); is "
                                    f"the service running there, and past its first seconds?")
        if not self._handshake.connected and time.monotonic() >= self._connect_by:
            raise self._unreachable(f"no connection to {self.endpoint}: nothing accepted it within "
                                    f"{self._connect_s:g} s; " + (
                                        "is the service running there?" if self._connect_s >= TINY_CONNECT_S else
                                        "a time-out that short is seldom enough to connect at all: give more"))
        if self._connection_lost() and time.monotonic() >= self._connect_by:
            raise self._unreachable(f"no connection to {self.endpoint}: the one this client had dropped and nothing "
                                    f"accepted a new one within {self._connect_s:g} s: has the service stopped or "
                                    f"moved? (the request was not sent: send it again once the service is back)")
        if time.monotonic() >= deadline and self._waited_s < TINY_REPLY_S and self._handshake.refused() is None:
            raise ControlTimeout(f"no reply from {self.endpoint} within the time-out ({self._waited_s:g} s): the "
                                 f"time-out may be too short: one under {TINY_REPLY_S:g} s is often shorter than a "
                                 f"reply takes even from an idle service (the round trip, the service's turn to "
                                 f"read it), so this says nothing of the service; give a longer one (flashtick's "
                                 f"--timeout, ControlClient's timeout_s)")
        if time.monotonic() >= deadline:
            late = ControlBusy if self._handshake.live else ControlTimeout
            raise late(f"no reply from {self.endpoint} within the time-out ({self._waited_s:g} s): "
                       f"{self._handshake.explain()}")

    def _connection_lost(self) -> bool:
        """This client's connection was made and has dropped, with no new one yet (as of the events taken)."""
        return self._handshake.succeeded and not self._handshake.live

    def _unreachable(self, message: str) -> ControlUnreachable:
        """The error for no connection in time, the request it held dropped: a DEALER queues a request for a
        connection to come, so a service that came up later ran one its caller was told was not sent (review421
        #5). Connected anew, the next call has its own connect_timeout_s from now."""
        self._sock.disconnect(self.endpoint)
        self._sock.connect(self.endpoint)
        self._connect_by = time.monotonic() + self._connect_s
        return ControlUnreachable(message)

    def send_raw(self, payload: bytes, timeout_ms: int | None = None) -> None:
        """Queue one request; a DEALER with no live connection cannot take it, so that is waited out here."""
        self._process.check()
        self._handshake.poll()
        if self._connection_lost():  # a service that stopped since the last call: connect_timeout_s from now
            self._connect_by = time.monotonic() + self._connect_s
        if timeout_ms is None:  # raw use; `request` says its own time-out
            timeout_ms = self.timeout_ms
            self._waited_s = timeout_ms / 1000
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            if self._sock.poll(max(0, min(POLL_SLICE_MS, int((deadline - time.monotonic()) * 1000))), zmq.POLLOUT):
                try:
                    self._handshake.poll()
                    self._disconnects_at_send = self._handshake.disconnects
                    self._sock.send_multipart([b"", payload], zmq.NOBLOCK)
                    return
                except zmq.Again:  # the connection went between poll and send
                    pass
            self._give_up_if_refused_or_late(deadline)

    def close(self) -> None:
        self._closed = True
        self.unclosed.detach()
        close_sockets(self._process, self._handshake, self._sock)

    def __enter__(self) -> "ControlClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
