"""The control socket's traffic: requests read (a bounded share of the loop), checked and handed to their op
(engine/service/control_ops.py), errors turned into replies, and replies sent without ever blocking the loop:
one a client has no room for waits, bounded in bytes, and is dropped and counted past that."""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from typing import Any, Callable

import zmq

from engine.service.config import ServiceConfig
from engine.service.control_requests import (CONTROL_OPS, ERROR_REPLY_CHARS, NO_ID, ControlError, ControlStopping,
                                             check_fields, check_request, envelope_problem, noted, refused_envelope,
                                             read_control_request, request_id, request_or_none, refusal, sendable,
                                             unpack_request, unused_keys_note)
from engine.service.document_parse import DocumentParse
from engine.service.drain_slice import DRAIN_SLICE_S
from engine.service.wire_protocol import pack, pack_with_raw, raw_map_value
from engine.quoting import quoted
from queries.limits import clip
from queries.spec import QuerySpecError

# a stop reads the requests still queued at the control socket for at most this long, each refused as `stopping`
STOPPING_READ_S = 0.5
STOPPING_WORDS = "the service is stopping: send it again once it is back (`health` says serving)"


def echoed_id(payload: bytes, rid: object) -> bytes:
    """The msgpack bytes a reply carries as `id`: the request's own, byte for byte (raw_map_value), else ``rid``
    (its decoded value) packed again."""
    raw = raw_map_value(payload, "id")
    return raw if raw is not None else pack(rid)


class UnsentReplies:
    """One control client's replies waiting for room in its ZeroMQ queue, in order, and their bytes."""

    def __init__(self) -> None:
        self.replies: deque[list[bytes]] = deque()
        self.bytes = 0

    def add(self, frames: list[bytes], most_bytes: int) -> bool:
        """Keep ``frames`` to send later; False (not kept) when that would pass ``most_bytes``."""
        size = sum(map(len, frames))
        if self.bytes + size > most_bytes:
            return False
        self.replies.append(frames)
        self.bytes += size
        return True

    def pop(self) -> None:
        self.bytes -= sum(map(len, self.replies.popleft()))


class ControlSocket:
    """The Server's control socket (a mixin: the ops it dispatches to are the Server's ``_op_*`` methods)."""

    config: ServiceConfig
    counters: dict[str, int]
    _sockets: dict[str, zmq.Socket]
    _unsent: dict[bytes, UnsentReplies]  # routing id -> replies ZeroMQ's queue had no room for yet
    _parsing: DocumentParse | None  # a `register` whose document is being parsed off the engine thread
    poller: zmq.Poller  # the loop's: control leaves it while a `register` parses
    _registered: Callable[[DocumentParse], dict]  # (ControlOps)
    _waiting: dict[int, Any]  # ask ticket -> the control reply still owed (the Server's)
    _stop: threading.Event  # set by stop(): requests read from then on are refused as `stopping`

    def _send_reply(self, frames: list[bytes]) -> None:
        """A control reply to its client (``frames[0]``, its routing id). One that finds the client's ZeroMQ queue
        full (CONTROL_HWM replies, early_start.py: a client not reading, or a burst of pipelined replies the I/O
        thread has not sent yet) waits in ``_unsent``, sent as room comes (``_send_unsent``), up to
        limits.control_queue_bytes a client: past that, or for a client gone, it is dropped and counted."""
        unsent = self._unsent.get(frames[0])
        if unsent is None:
            try:
                self._sockets["control"].send_multipart(frames, zmq.NOBLOCK)
                return
            except zmq.Again:
                unsent = self._unsent[frames[0]] = UnsentReplies()
            except zmq.ZMQError as e:
                if e.errno != zmq.EHOSTUNREACH:
                    raise
                self._dropped_replies(1, "its client disconnected before it came")
                return
        if not unsent.add(frames, self.config.limits.control_queue_bytes):
            self._dropped_replies(1, f"its client has limits.control_queue_bytes="
                                     f"{self.config.limits.control_queue_bytes} bytes of replies it has not read")

    def _send_unsent(self) -> None:
        """Send the replies that wait for room in their client's ZeroMQ queue, each client's in order."""
        if not self._unsent:
            return
        sock = self._sockets["control"]
        sock.getsockopt(zmq.EVENTS)  # (ZeroMQ learns here what its I/O thread has sent since: room again)
        for routing_id, unsent in list(self._unsent.items()):
            try:
                while unsent.replies:
                    sock.send_multipart(unsent.replies[0], zmq.NOBLOCK)
                    unsent.pop()
            except zmq.Again:
                continue
            except zmq.ZMQError as e:
                if e.errno != zmq.EHOSTUNREACH:
                    raise
                self._dropped_replies(len(unsent.replies), "its client disconnected before it came")
            del self._unsent[routing_id]

    def _dropped_replies(self, count: int, why: str) -> None:
        self.counters["control_replies_dropped"] += count
        if self.counters["control_replies_dropped"] == count:
            print(f"flashtick: dropped a control reply: {why} (later drops are only counted: stats "
                  f"control_replies_dropped)", file=sys.stderr, flush=True)

    def _drain_control(self) -> None:
        sock = self._sockets["control"]
        deadline = time.monotonic() + DRAIN_SLICE_S  # a client flooding requests must not stall ingest and forwards
        while time.monotonic() <= deadline:
            try:
                frames = read_control_request(sock, zmq.NOBLOCK)
            except zmq.Again:
                return
            self.counters["control_requests"] += 1
            envelope, payload = frames[:-1], frames[-1]
            # the frames before the request come back with the reply: a few small ones (a REQ socket's delimiter,
            # proxies' routing ids), not megabytes that a client could have echoed to it without reading them
            echoed = envelope_problem(envelope)
            if echoed is not None:
                envelope = refused_envelope(envelope)  # (the reply still reaches its client, a REQ one too)
            reply = lambda obj, envelope=envelope: self._send_reply([*envelope, pack(obj)])  # noqa: E731
            try:
                # a request refused for its frames is read too, for its `id` (review261 #1: a client matching replies
                # by `id` never matched that error); the frames' error comes first, the likelier mistake
                request = unpack_request(payload) if echoed is None else request_or_none(payload)
                if (rid := request_id(request)) is not NO_ID:  # echoed: a client may pipeline requests
                    reply = lambda obj, envelope=envelope, raw=echoed_id(payload, rid): self._send_reply(  # noqa: E731
                        [*envelope, pack_with_raw(obj, "id", raw)])
                if echoed is not None:
                    raise ControlError(echoed)
                check_request(request)
                if self._stop.is_set():
                    raise ControlStopping(STOPPING_WORDS)
                handler = getattr(self, f"_op_{request['op']}", None)
                if handler is None:
                    raise ControlError(f"unknown op {quoted(request['op'])} (ops: {', '.join(CONTROL_OPS)})")
                check_fields(request)  # (before its op looks a name up: a malformed request is bad_request)
                if (note := unused_keys_note(request)) is not None:  # a misspelt key is said, whenever it replies
                    reply = lambda obj, reply=reply, note=note: reply(noted(obj, note))  # noqa: E731
                result = handler(request, reply)
                if result is not None:
                    reply({"ok": True, **result})
            except Exception as e:
                self._refused(reply, e)
            if self._parsing is not None:  # a `register` parses off the engine thread: control waits for it
                self.poller.unregister(sock)  # (ingest, forwards and heartbeats go on: _take_parsed reads it again)
                return

    def _answer_owed_requests(self) -> None:
        """At a stop, once the drain is done: every control request still owed a reply gets one (review376 #12: an
        `ask` read just before a SIGTERM under load got none): asks waiting for a forward and a `register` still
        parsing are refused as `stopping`, and so is each request still queued at the socket (STOPPING_READ_S at
        most). The replies go out as the socket closes (Server.close lingers for them)."""
        stopping = {"ok": False, "reason": "stopping", "error": STOPPING_WORDS}
        owed = list(self._waiting.values()) + ([self._parsing.reply] if self._parsing is not None else [])
        self._waiting.clear()
        self._parsing = None
        for reply in owed:
            self.counters["control_errors"] += 1
            reply(stopping)
        sock = self._sockets["control"]
        deadline = time.monotonic() + STOPPING_READ_S
        while time.monotonic() < deadline and sock.poll(0):
            self._drain_control()
        self._send_unsent()

    def _take_parsed(self) -> None:
        """A `register` whose document is parsed: applied and replied to here, on the engine thread, and control read
        again (the requests sent after it are served after it, as they came)."""
        parse = self._parsing
        if parse is None or not parse.done():
            return
        self._parsing = None
        self.poller.register(self._sockets["control"], zmq.POLLIN)
        try:
            parse.reply({"ok": True, **self._registered(parse)})
        except Exception as e:
            self._refused(parse.reply, e)

    def _refused(self, reply: Callable[[dict], Any], e: Exception) -> None:
        """The error reply to a request its op raised ``e`` for, counted."""
        self.counters["control_errors"] += 1
        if isinstance(e, (ControlError, QuerySpecError, ValueError, LookupError)):
            reason, error = refusal(e)
            reply({"ok": False, "reason": reason, "error": error})
        else:  # anything unforeseen: the service keeps serving
            reply({"ok": False, "reason": "internal",
                   "error": sendable(clip(f"{type(e).__name__}: {e}", ERROR_REPLY_CHARS))})
