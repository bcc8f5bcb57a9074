"""Clients of a running flashtick service: the control socket and the answer topics.

    with ControlClient("tcp://127.0.0.1:5557") as control:
        control.call("register", yaml=open("queries.yaml").read(), source="queries.yaml")
        print(control.call("ask", stream="BTCUSDT", query="dir20"))

    with AnswerSubscriber("tcp://127.0.0.1:5556", ["dir20/"]) as answers:
        answers.wait_ready()                     # the subscription has reached the server
        message = answers.recv(timeout_s=5)      # (topic, answer), or None on time-out

    with GaplessSubscriber(answers_ep, control, ["dir20/"], last_seqs=saved) as answers:
        answers.wait_ready()                     # subscribed, and caught up after the saved seqs
        topic, answer = answers.recv()           # every answer once, in seq order per topic
        saved = answers.last_seq                 # keep it to resume after a restart (yours or the service's)

Against a CURVE server both take `server_public_key=` (z85) and, when the
server has an allow-list, `client_keypair=(public, secret)`; see engine/service/auth.py.
A refused handshake is reported as such instead of a silent wait.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import threading
import time
import warnings
from collections import Counter, deque
from collections.abc import Mapping
from numbers import Integral
from typing import Any

import msgpack
import zmq

from connectors.feed import check_endpoint
from connectors.handshake import HandshakeMonitor, curve_client
from connectors.service_topics import HEARTBEAT_TOPIC
from connectors.ticks import shown_name
from connectors.wire_payload import packable

POLL_SLICE_MS = 100  # how often a waiting client looks at its handshake
_NO_ID = object()  # a request the caller gave no id
TINY_CONNECT_S = 0.1  # a connect wait below this fails on a live, idle service too: said, not blamed on it
TINY_REPLY_S = 0.1  # so does a reply wait below this (the request's round trip, the service's turn to read it)
FETCH_LIMIT = 1000  # answers per `answers` request (the service's most)


class ControlError(RuntimeError):
    """The service answered {ok: false, error}, did not answer in time, or refused the connection. ``reason``: the
    reply's (``starting``, ``busy``, ``shard_lost``: send the same request again later; ``bad_request``,
    ``unknown_stream``, ``ask_failed``, ``internal``: see docs/wire-protocol.md), None without one (no reply, or a
    service of an earlier version)."""

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason


class ControlUnreachable(ControlError, ConnectionError):
    """Nothing accepted the connection in time: no service there (yet)."""


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


def _positive_timeout(value: Any, name: str) -> float:
    """A time-out in seconds, > 0: 0 or less would fail at once and be blamed on the service ("busy?", "down?")."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == math.inf:
        raise ValueError(f"{name} is a number of seconds > 0, got {value!r}")
    return float(value)


class ControlClient:
    """Requests to the control socket. Each `call` (and `request`) carries an `id` and takes only the reply with
    that id: a reply that comes after its call timed out is dropped when the next call reads it (counted in
    `stale_replies`), never returned as another call's answer. Calls from several threads take turns."""

    def __init__(self, endpoint: str, timeout_s: float = 30.0, server_public_key: bytes | None = None,
                 client_keypair: tuple[bytes, bytes] | None = None, connect_timeout_s: float = 10.0,
                 refused_at_once: bool = False) -> None:
        """``timeout_s``: for each reply (a call may give its own); ``connect_timeout_s``: for a connection to be
        made at all (nothing listening: an error after it, not after ``timeout_s``). ``refused_at_once``: a refused
        connection (nothing listens on the port) is an error at once rather than retried for ``connect_timeout_s``
        (a probe's answer: a service that is still binding is down to it too)."""
        self.endpoint = check_endpoint(endpoint, "control endpoint")
        self.timeout_s = _positive_timeout(timeout_s, "timeout_s")
        self.timeout_ms = int(self.timeout_s * 1000)
        _positive_timeout(connect_timeout_s, "connect_timeout_s")
        self._connect_s = min(connect_timeout_s, timeout_s)
        self._connect_by = time.monotonic() + self._connect_s
        self._refused_at_once = refused_at_once
        self._sock = zmq.Context.instance().socket(zmq.DEALER)
        self._sock.linger = 0
        curve_client(self._sock, server_public_key, client_keypair)
        self._handshake = HandshakeMonitor(self._sock, curve=bool(server_public_key))
        self._disconnects_at_send = 0
        self._sock.connect(endpoint)
        self._lock = threading.Lock()  # one request and its reply at a time: the socket is not thread-safe
        self._ids = itertools.count(1)
        self._tag = f"{os.getpid():x}.{id(self):x}"  # ids of this client's requests: `<tag>.<n>`
        self.stale_replies = 0  # replies dropped because their call had already timed out
        self._closed = False
        self._waited_s = timeout_s  # the time-out of the request in flight, for its error

    def call(self, op: str, timeout_s: float | None = None, **fields: Any) -> dict[str, Any]:
        """Send one request and wait for its reply (``timeout_s``: this call's own wait; default the client's);
        raises ControlError on {ok: false}, time-out or refusal."""
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
        if self._closed:
            raise ControlError(f"ControlClient to {self.endpoint} is closed")
        request = dict(request)
        theirs = request.pop("id", _NO_ID)  # the caller's id goes back on the reply; the wire carries ours, which
        rid = request["id"] = f"{self._tag}.{next(self._ids)}"  # no two requests share
        wait_s = self.timeout_s if timeout_s is None else _positive_timeout(timeout_s, "timeout_s")
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
        if deadline is None:
            deadline = time.monotonic() + self.timeout_ms / 1000
        try:
            while not self._sock.poll(max(0, min(POLL_SLICE_MS, int((deadline - time.monotonic()) * 1000)))):
                self._give_up_if_refused_or_late(deadline)
                self._handshake.poll()
                if self._handshake.disconnects > self._disconnects_at_send:  # the request went with the connection
                    raise ControlDropped(f"the connection to {self.endpoint} dropped before the reply came (the "
                                         f"service restarted?): ask again")
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
            raise ControlUnreachable(f"no connection to {self.endpoint}: it was refused (nothing listens there); is "
                                     f"the service running there, and past its first seconds?")
        if not self._handshake.connected and time.monotonic() >= self._connect_by:
            raise ControlUnreachable(f"no connection to {self.endpoint}: nothing accepted it within "
                                     f"{self._connect_s:g} s; " + (
                                         "is the service running there?" if self._connect_s >= TINY_CONNECT_S else
                                         "a time-out that short is seldom enough to connect at all: give more"))
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

    def send_raw(self, payload: bytes, timeout_ms: int | None = None) -> None:
        """Queue one request; a DEALER with no live connection cannot take it, so that is waited out here."""
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
        self._handshake.close()
        self._sock.close(linger=0)

    def __enter__(self) -> "ControlClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def topic_prefixes(topics: list[str] | None) -> list[str]:
    """A subscriber's topic prefixes (None: every topic). A bare str is refused: list("dir20/") would subscribe to
    "d", "i", ... and the subscriber would wait for answers that never match."""
    if topics is None:
        return [""]
    if isinstance(topics, (str, bytes)) or not all(isinstance(t, str) for t in topics):
        raise TypeError(f"topics is a list of topic prefixes, e.g. ['dir20/'] or ['dir20/BTCUSDT/'], got {topics!r}")
    return list(topics)


class AnswerSubscriber:
    """A SUB socket on the answers topics. `recv` returns only messages of the topics asked for."""

    def __init__(self, endpoint: str, topics: list[str] | None = None, server_public_key: bytes | None = None,
                 client_keypair: tuple[bytes, bytes] | None = None) -> None:
        self.endpoint = endpoint
        self.topics = topic_prefixes(topics)
        self._sock = zmq.Context.instance().socket(zmq.SUB)
        self._sock.linger = 0
        curve_client(self._sock, server_public_key, client_keypair)
        self._handshake = HandshakeMonitor(self._sock, curve=bool(server_public_key))
        self._sock.connect(endpoint)
        for topic in self.topics:
            self._sock.setsockopt(zmq.SUBSCRIBE, topic.encode())
        self._early: deque[tuple[str, dict[str, Any]]] = deque()  # taken while waiting for readiness
        self.stray_frames = 0  # messages skipped for not being [topic, payload]: the tail of an interrupted recv

    def wait_ready(self, timeout_s: float = 5.0) -> None:
        """Return once the subscription is live at the server, so nothing published from now on is missed.

        PUB drops what it publishes before a subscription reaches it (the slow
        joiner). The server publishes a heartbeat every limits.heartbeat_s;
        subscriptions travel in order, so the first heartbeat to arrive proves
        the topics subscribed before it are live. Raises TimeoutError (saying
        why, e.g. a refused CURVE handshake) if none comes in `timeout_s`.
        """
        if self._sock.closed:
            raise RuntimeError(f"AnswerSubscriber to {self.endpoint} is closed")
        extra = not self._wanted(HEARTBEAT_TOPIC)
        if extra:
            self._sock.setsockopt(zmq.SUBSCRIBE, HEARTBEAT_TOPIC.encode())
        try:
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                message = self._recv(POLL_SLICE_MS)
                if message is not None and message[0].startswith(HEARTBEAT_TOPIC):
                    if not extra:
                        self._early.append(message)
                    return
                if message is not None:
                    self._early.append(message)
                elif (refused := self._handshake.refused()) is not None:
                    raise TimeoutError(f"{self.endpoint} refused the subscription: {refused}")
            raise TimeoutError(f"no heartbeat from {self.endpoint} within {timeout_s:g} s: {self._handshake.explain()}")
        finally:
            if extra and not self._sock.closed:
                self._sock.setsockopt(zmq.UNSUBSCRIBE, HEARTBEAT_TOPIC.encode())

    def recv(self, timeout_s: float | None = 5.0) -> tuple[str, dict[str, Any]] | None:
        """The next (topic, payload), or None after ``timeout_s`` (None: wait for ever). It blocks: from asyncio,
        run it in an executor (``loop.run_in_executor(None, sub.recv, 1.0)``)."""
        if self._sock.closed:
            raise RuntimeError(f"AnswerSubscriber to {self.endpoint} is closed")
        if self._early:
            return self._early.popleft()
        deadline = math.inf if timeout_s is None else time.monotonic() + timeout_s
        while True:
            # in slices, so a close from another thread (an application shutting down) ends a wait for ever
            message = self._recv(POLL_SLICE_MS if deadline == math.inf else
                                 max(0, min(POLL_SLICE_MS, int((deadline - time.monotonic()) * 1000))))
            if message is not None and self._wanted(message[0]):
                return message
            if message is None and time.monotonic() >= deadline:
                return None

    def refused(self) -> str | None:
        """Why the server refused this subscriber's handshake, if it did (it will not change by waiting)."""
        return self._handshake.refused()

    def _wanted(self, topic: str) -> bool:
        return any(topic.startswith(prefix) for prefix in self.topics)

    def _recv(self, timeout_ms: int) -> tuple[str, dict[str, Any]] | None:
        if self._sock.closed:
            raise RuntimeError(f"AnswerSubscriber to {self.endpoint} is closed")
        try:
            if not self._sock.poll(timeout_ms):
                return None
            frames = self._sock.recv_multipart()
        except zmq.ZMQError:
            if self._sock.closed:  # closed (by another thread) while waiting: the way to end a wait for ever
                raise RuntimeError(f"AnswerSubscriber to {self.endpoint} is closed") from None
            raise
        if len(frames) != 2:  # the rest of a message whose first frame an interrupted recv (Ctrl-C) took: the
            self.stray_frames += 1  # socket is at a message boundary again after it; that message is lost here
            return None  # (a GaplessSubscriber fetches it by seq)
        topic, payload = frames
        return topic.decode(), msgpack.unpackb(payload, raw=False)

    def close(self) -> None:
        self._handshake.close()
        self._sock.close(linger=0)

    def __enter__(self) -> "AnswerSubscriber":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _saved_seqs(last_seqs: Any) -> dict[str, int]:
    """A GaplessSubscriber's ``last_seqs``, checked: each the last seq delivered on its topic, an int >= 0. A negative
    one (a "nothing seen yet" sentinel) was asked for as `answers after -1`, which the service refuses, and every
    answer of the topic then waited behind that fetch, for ever and silently."""
    if last_seqs is None:
        return {}
    if not isinstance(last_seqs, Mapping):
        raise TypeError(f"last_seqs is a mapping {{topic: last seq delivered}}, as `last_seq` saved it, got "
                        f"{type(last_seqs).__name__}")
    for topic, seq in last_seqs.items():
        if not isinstance(seq, Integral) or isinstance(seq, bool) or seq < 0:
            raise ValueError(f"last_seqs[{topic!r}] is {seq!r}: a saved seq is an int >= 0, the last seq delivered "
                             f"on its topic; for a topic with nothing seen yet leave it out (or give 0), and its "
                             f"kept answers are fetched from the first")
    return {topic: int(seq) for topic, seq in last_seqs.items()}


class GaplessSubscriber:
    """Every answer of the subscribed topics exactly once, in seq order per topic, across PUB drops, reconnects
    and restarts of the service or of this client: the recipe of docs/wire-protocol.md, done for you.

    Subscribe; on each answer, one whose seq is at most the topic's last seen is a duplicate and is dropped,
    one past last + 1 means answers were missed: they are fetched with the control op ``answers`` (after the
    last seen seq) and delivered first. ``wait_ready`` also fetches whatever came after ``last_seqs`` while this
    client was away. Heartbeats are watched too: one whose seq went back (the service restarted, and may have
    published the answers it owed before this client reconnected) or skipped some (this client was away) makes
    it fetch every topic it has seen, so an answer is not left undelivered until its topic's next one. A fetch
    the service does not answer (it went down meanwhile) is tried again at the next heartbeat, the topic's newer
    answers held back until then. Answers
    the service no longer keeps (``log.answers_keep``) are counted in ``unrecoverable``, never invented. The
    service's own topics (``_heartbeat/``, ``_rejects/``) are not delivered.

    Seqs are the service's data directory's: a service without one (``--no-log``), or with another, numbers
    from 1 again, under another ``epoch`` (in heartbeats, answers and ``health``). An answer or heartbeat of a new
    epoch makes this client start over on every topic, as one resumed with nothing: each topic's kept answers of
    the new epoch from its first (``epochs_seen`` counts such changes). A client that saves ``last_seq`` saves
    ``epoch`` with it and gives both back, so that seqs of another epoch are never taken for this one's. A saved seq
    is an int >= 0: a negative one is refused (ValueError); a topic with nothing seen yet is left out (or given 0).
    """

    def __init__(self, endpoint: str, control: ControlClient, topics: list[str] | None = None,
                 last_seqs: dict[str, int] | None = None, epoch: str | None = None, **curve: Any) -> None:
        if not callable(getattr(control, "call", None)):
            raise TypeError(f"GaplessSubscriber needs a ControlClient of the same service (it fetches missed answers "
                            f"with its `answers` op), got {control!r}")
        saved = _saved_seqs(last_seqs)  # (checked before any socket is made)
        wanted = topic_prefixes(topics)
        if not any(HEARTBEAT_TOPIC.startswith(prefix) for prefix in wanted):
            wanted.append(HEARTBEAT_TOPIC)  # watched, never delivered
        self.subscriber = AnswerSubscriber(endpoint, wanted, **curve)
        # A topic first met past its seq 1 has answers this client missed. Resumed (``last_seqs`` given, even
        # empty), every one the service keeps is owed: the topic began while the client was away. Fresh, those
        # published since it started (server time, from its first heartbeat): "from now on", not the history.
        self.since_ns: int | None = None if last_seqs is not None else -1  # -1: set by the first heartbeat
        self.heartbeat_seq: int | None = None  # the latest heartbeat's seq
        self._unfilled: set[str] = set()  # topics whose gap fetch the service did not answer: again at a heartbeat
        self._held: dict[str, list[dict[str, Any]]] = {}  # their answers that arrived meanwhile, in order
        self.restarts_seen = 0  # heartbeats whose seq went back: the service restarted
        self.control = control
        self.last_seq: dict[str, int] = saved
        self.epoch = epoch  # whose seqs last_seq holds (None: not known yet; the service's first word sets it)
        self.epochs_seen = 0  # times the service's epoch changed under this client: it started over
        self.filled = 0  # answers fetched to fill gaps
        self.unrecoverable = 0  # answers missed that the service no longer keeps
        self.missed: Counter[str] = Counter()  # per topic: answers PUB did not deliver (drops, time away)
        # per topic, the seqs fetched that PUB may still deliver (a fetch after a restart's heartbeat runs ahead of
        # answers in flight): one that arrives later was not missed after all. Seqs below one PUB delivered are
        # dropped (PUB keeps a topic's order: they will not come), so this holds only what is in flight.
        self._fetched: dict[str, set[int]] = {}
        self._ready: deque[tuple[str, dict[str, Any]]] = deque()
        self._discovery_owed = False  # a `topics` call the service did not answer: again at the next heartbeat

    def wait_ready(self, timeout_s: float = 5.0) -> None:
        self.subscriber.wait_ready(timeout_s)
        epoch_given = self.epoch is not None
        try:
            serving = self.control.call("health").get("epoch")  # (None while it starts: the first heartbeat's)
        except ControlError:
            serving = None
        if serving is not None:
            self._epoch(serving)
        if not epoch_given and self.last_seq:
            self._start_over_if_seqs_of_another_epoch()
        for topic, seq in list(self.last_seq.items()):
            self._fill(topic, seq, None)
        if self.since_ns is None:  # resumed: topics may have begun while it was away
            self._discover()

    def _start_over_if_seqs_of_another_epoch(self) -> None:
        """``last_seqs`` given without their ``epoch``: a saved seq past its topic's last at the service cannot be of
        this epoch (seqs only grow within one), so they are of an earlier service's: every answer PUB brings would be
        taken for a duplicate and dropped, silently, until the topic passed the saved seq. The client starts over
        as at a change of epoch (``epochs_seen``), with a warning saying to save ``epoch`` beside the seqs."""
        known: dict[str, dict[str, Any]] = {}
        try:
            for prefix in self.subscriber.topics:
                if not prefix.startswith("_"):
                    known.update(self.control.topics(prefix))
        except ControlError:  # not answered now: nothing to compare with
            return
        ahead = {topic: seq for topic, seq in self.last_seq.items()
                 if topic in known and seq > (known[topic].get("last_seq") or 0)}
        if not ahead:
            return
        topic, seq = next(iter(sorted(ahead.items())))
        warnings.warn(f"GaplessSubscriber: last_seqs hold seqs past the service's ({len(ahead)} topics, e.g. {topic} "
                      f"{seq} where the service's last is {known[topic].get('last_seq') or 0}): they are of another "
                      f"epoch (the service restarted without its data directory, or another service); starting "
                      f"over from each topic's first kept answer. Save `epoch` with `last_seq` and give both back",
                      RuntimeWarning, stacklevel=3)
        self.epochs_seen += 1
        self.last_seq.clear()
        self.since_ns = None

    def recv(self, timeout_s: float | None = 5.0) -> tuple[str, dict[str, Any]] | None:
        """The next answer in seq order per topic, or None after ``timeout_s`` (None: wait for ever)."""
        deadline = math.inf if timeout_s is None else time.monotonic() + timeout_s
        while not self._ready:
            message = self.subscriber.recv(None if deadline == math.inf else max(0.0, deadline - time.monotonic()))
            if message is None:
                return None
            topic, answer = message
            if (epoch := answer.get("epoch")) is not None and epoch != self.epoch:
                self._epoch(epoch)
            if topic.startswith(HEARTBEAT_TOPIC):
                self._heartbeat(answer.get("seq"), answer.get("ts"))
                continue
            if topic.startswith("_"):
                continue
            if topic in self._unfilled:  # behind a gap not fetched yet: it waits, so the order holds
                self._held.setdefault(topic, []).append(answer)
                continue
            self._delivered_by_pub(topic, answer["seq"])
            last = self.last_seq.get(topic)
            if last is not None and answer["seq"] <= last:
                continue  # already delivered (a fill got it first)
            if answer["seq"] > (last or 0) + 1 and (last is not None or self.since_ns != -1):
                self._fill(topic, last or 0, answer["seq"] - 1)  # a gap, or a new topic met past its first answer
                if topic in self._unfilled:
                    self._held.setdefault(topic, []).append(answer)
                    continue
            self._deliver(topic, answer)
        return self._ready.popleft()

    def _epoch(self, epoch: str) -> None:
        """The service's epoch: a change means its seqs started over (no data directory kept them), so what this
        client holds says nothing of the new ones: it starts over as one resumed with nothing."""
        if self.epoch is not None and epoch != self.epoch:
            self.epochs_seen += 1
            self.last_seq.clear()
            self._fetched.clear()
            self._held.clear()
            self._unfilled.clear()
            self.since_ns = None  # every kept answer of the new epoch is owed, from each topic's first
            self._discovery_owed = True  # topics of it not met yet: found at the next heartbeat
        self.epoch = epoch

    def _delivered_by_pub(self, topic: str, seq: int) -> None:
        """PUB delivered ``topic``'s answer ``seq``: if a fetch got it first, it was not missed after all."""
        fetched = self._fetched.get(topic)
        if not fetched:
            return
        if seq in fetched:
            self.missed[topic] -= 1
        fetched.difference_update([s for s in fetched if s <= seq])

    def _heartbeat(self, seq: Any, ts: Any = None) -> None:
        """A heartbeat whose seq went back (a restart) or skipped (heartbeats missed: so may answers have been):
        every topic seen so far is fetched past its last seq."""
        if type(seq) is not int:
            return
        if self.since_ns == -1:  # a fresh subscriber begins at the first heartbeat it sees
            self.since_ns = int(ts) if type(ts) is int else 0
            self._discover(fill=False)  # the topics older than it, known at once: no fetch each at first sight
        self._retry_fills()
        last, self.heartbeat_seq = self.heartbeat_seq, seq
        if last is None or seq == last + 1:
            if self._discovery_owed:
                self._discover()
            return
        self.restarts_seen += seq <= last
        for topic, after in list(self.last_seq.items()):
            self._fill(topic, after, None)
        self._discover()

    def _discover(self, fill: bool = True) -> None:
        """Topics of this client's prefixes that it has not met, found with the op ``topics``: a topic that began
        while it was away (a new stream's answers) and published nothing since would otherwise never be met. A
        resumed client fills each from its first kept answer; a fresh one those published since it began, and takes
        a topic whose latest answer is older than itself as seen up to that answer (so meeting it later on PUB
        costs no search for where "since it began" starts). ``fill=False`` (a fresh client's first heartbeat: PUB
        delivers everything from here on) only does the latter."""
        found: dict[str, dict[str, Any]] = {}
        try:
            for prefix in self.subscriber.topics:
                if not prefix.startswith("_"):  # the service's own topics (the heartbeats' prefix): never delivered
                    found.update(self.control.topics(prefix))
        except ControlError as e:  # restarting: again at the next heartbeat; a service without the op: never
            self._discovery_owed = "unknown op" not in str(e)
            return
        self._discovery_owed = False
        for topic, info in sorted(found.items()):
            if topic in self.last_seq or topic.startswith("_") or not info["last_seq"]:
                continue
            answer_ts = info.get("answer_ts")
            if self.since_ns is None:
                self._fill(topic, 0, None)
            elif self.since_ns == -1 or answer_ts is None:
                continue  # not begun yet; no latest answer to date the topic by: a search at first sight
            elif answer_ts < self.since_ns:
                self.last_seq[topic] = info["last_seq"]  # nothing of it since this client began
            elif fill:
                self._fill(topic, 0, info["last_seq"])  # published since this client began

    def _fill(self, topic: str, after: int, upto: int | None) -> None:
        """Fetch and queue ``topic``'s answers after seq ``after`` (up to ``upto``, or all the service has). A fetch
        the service does not answer (it is restarting) is not an error: the topic is fetched again at the next
        heartbeat, and what arrives on it meanwhile waits, so its order holds."""
        if topic in self._unfilled:
            return
        try:
            self._fetch(topic, after, upto)
        except ControlError:
            self._unfilled.add(topic)

    def _retry_fills(self) -> None:
        """Topics whose fetch failed: everything after their last delivered seq, then what waited behind."""
        for topic in list(self._unfilled):
            try:
                self._fetch(topic, self.last_seq.get(topic, 0), None)
            except ControlError:
                continue
            self._unfilled.discard(topic)
            for answer in self._held.pop(topic, ()):  # PUB's, held behind the fetch: not missed if it got them
                self._delivered_by_pub(topic, answer["seq"])
                if answer["seq"] > self.last_seq[topic]:
                    self._deliver(topic, answer)

    def _fetch(self, topic: str, after: int, upto: int | None) -> None:
        # a topic this client never had: a fresh one takes what was published since it began (since_ns), and the
        # service's older answers are no gap of its own
        since = self.since_ns if topic not in self.last_seq and self.since_ns not in (None, -1) else None
        if since is not None and upto is not None:
            after = max(after, self._published_before(topic, since, upto))
        while upto is None or after < upto:
            reply = self.control.call("answers", topic=topic, after=after, limit=FETCH_LIMIT)
            answers = [a for a in reply["answers"] if (upto is None or a["seq"] <= upto)
                       and a.get("topic", topic) == topic]  # (the reply is this request's: ControlClient's ids)
            if since is None and ((answers and answers[0]["seq"] > after + 1) or (not answers and upto is not None)):
                self.unrecoverable += (answers[0]["seq"] - 1 if answers else upto) - after  # no longer kept
            if not answers:
                return
            for answer in answers:
                if since is not None and answer.get("answer_ts", since) < since:
                    continue  # published before this client began
                self.filled += 1
                self.missed[topic] += 1
                self._fetched.setdefault(topic, set()).add(answer["seq"])
                self._deliver(topic, answer)
            after = answers[-1]["seq"]
            if upto is None and len(reply["answers"]) < FETCH_LIMIT:
                return

    def _published_before(self, topic: str, since: int, upto: int) -> int:
        """The last seq of ``topic`` (at most ``upto``) published before server time ``since``: one call for a topic
        older than this client (its answer ``upto`` is), else a binary search of one-answer fetches (a topic first
        met at seq 50,000 costs ~16 calls, not its whole kept history)."""
        lo, hi = 0, upto  # every kept answer with seq <= lo is before `since`; the answer seq hi + 1 is not
        kept = self.control.call("answers", topic=topic, after=upto - 1, limit=1)["answers"]  # the usual case first:
        if kept and kept[0]["seq"] == upto and kept[0].get("answer_ts", since) < since:  # an old topic, none missed
            return upto
        while lo < hi:
            mid = (lo + hi + 1) // 2
            kept = self.control.call("answers", topic=topic, after=mid - 1, limit=1)["answers"]
            found = kept[0] if kept and kept[0].get("topic", topic) == topic else None
            if found is None or found["seq"] > hi or found.get("answer_ts", since) >= since:
                hi = mid - 1  # answer mid (or the first kept past it) is from since on
            else:
                lo = found["seq"]
        return lo

    def _deliver(self, topic: str, answer: dict[str, Any]) -> None:
        if "epoch" not in answer and self.epoch is not None:  # a fetched one (control replies carry none): every
            answer["epoch"] = self.epoch  # answer delivered has the same keys
        self.last_seq[topic] = answer["seq"]
        self._ready.append((topic, answer))

    def close(self) -> None:
        self.subscriber.close()

    def __enter__(self) -> "GaplessSubscriber":
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


def format_line(topic: str, payload: dict) -> str:
    """One message on one line: an answer's topic, seq, ticks seen and answer; other topics as key=value."""
    topic = shown_name(topic)  # a stream name must not drive the terminal, nor read as another
    if "query" in payload and "value" in payload:
        return f"{topic:<28}{payload['seq']:>7}{payload['version']:>9}  {format_answer(payload)}"
    fields = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in sorted(payload.items()))
    return f"{topic:<28}{fields}"


def render_table(table: dict[str, dict], out: Any, title: str = "") -> None:
    """A live table of the latest answer per topic (redrawn in place on a terminal)."""
    lines = [title] if title else []
    lines.append(f"{'query':<12}{'stream':<12}{'seq':>6}{'ticks':>8}  answer")
    for topic in sorted(table):
        p = table[topic]
        lines.append(f"{p['query']:<12}{shown_name(p['stream']):<12}{p['seq']:>6}{p['version']:>8}  {format_answer(p)}")
    if out.isatty():
        out.write("\x1b[H\x1b[2J" + "\n".join(lines) + "\n")
    else:
        out.write("\n".join(lines) + "\n\n")
    out.flush()
