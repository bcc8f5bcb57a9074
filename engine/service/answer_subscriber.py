"""The plain answer subscriber: `AnswerSubscriber`, a SUB socket on answer topic prefixes that knows when its
subscription is live at the service (`wait_ready`, from the heartbeats) and says why a CURVE handshake was refused.
It delivers what PUB delivers, drops and all; engine/service/gapless_subscriber.py fills the gaps."""

from __future__ import annotations

import contextlib
import functools
import math
import threading
import time
from collections import deque
from typing import Any

import msgpack
import zmq

from connectors.handshake import HandshakeMonitor, curve_client
from connectors.service_topics import HEARTBEAT_TOPIC
from connectors.tcp_endpoints import ipv6_for
from connectors.unclosed_clients import close_when_collected
from engine.forked_clients import CreatingProcess
from engine.quoting import quoted
from engine.service.control_client import POLL_SLICE_MS, close_sockets, positive_timeout


def topic_prefixes(topics: list[str] | None) -> list[str]:
    """A subscriber's topic prefixes (None: every topic). A bare str is refused: list("dir20/") would subscribe to
    "d", "i", ... and the subscriber would wait for answers that never match."""
    if topics is None:
        return [""]
    if isinstance(topics, (str, bytes)) or not all(isinstance(t, str) for t in topics):
        raise TypeError('topics is a list of topic prefixes, e.g. ["dir20/"] or ["dir20/BTCUSDT/"], got '
                        f'{quoted(topics)}')
    return list(topics)


class AnswerSubscriber:
    """A SUB socket on the answers topics. `recv` returns only messages of the topics asked for. Threads sharing
    one take turns on its socket (a recv's wait is sliced, so `close` from another thread ends it); it belongs to
    the process that made it (in a fork()ed child it raises UsedAfterFork)."""

    def __init__(self, endpoint: str, topics: list[str] | None = None, server_public_key: bytes | None = None,
                 client_keypair: tuple[bytes, bytes] | None = None) -> None:
        self.endpoint = endpoint
        self.topics = topic_prefixes(topics)
        self._process = CreatingProcess(f"AnswerSubscriber to {endpoint}")
        # one thread at a time on the socket (libzmq's are not thread-safe: readers sharing one aborted the
        # process, review421 #4), taken per poll slice so that threads take turns and a close waits one slice
        self._turn = threading.Lock()
        self._sock = zmq.Context.instance().socket(zmq.SUB)
        self._sock.linger = 0
        curve_client(self._sock, server_public_key, client_keypair)
        self._handshake = HandshakeMonitor(self._sock, curve=bool(server_public_key))
        # a subscriber dropped unclosed (a notebook cell re-run) closes, ending its subscription at the service
        self.unclosed = close_when_collected(self, f"AnswerSubscriber to {endpoint}",
                                             functools.partial(close_sockets, self._process, self._handshake,
                                                               self._sock))
        ipv6_for(self._sock, endpoint)
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
        why, e.g. a refused CURVE handshake) if none comes in `timeout_s` (> 0: a wait of 0 would fail at once and
        blame the service).
        """
        positive_timeout(timeout_s, "timeout_s")
        self._check_usable()
        extra = not self._wanted(HEARTBEAT_TOPIC)
        if extra:
            self._subscription(zmq.SUBSCRIBE, HEARTBEAT_TOPIC)
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
            raise TimeoutError(f"no heartbeat from {self.endpoint} within {timeout_s:g} s: {self._no_heartbeat_why()}")
        finally:
            if extra:
                self._subscription(zmq.UNSUBSCRIBE, HEARTBEAT_TOPIC)

    def recv(self, timeout_s: float | None = 5.0) -> tuple[str, dict[str, Any]] | None:
        """The next (topic, payload), or None after ``timeout_s`` (None: wait for ever). It blocks: from asyncio,
        run it in an executor (``loop.run_in_executor(None, sub.recv, 1.0)``)."""
        self._check_usable()
        if self._early:
            with contextlib.suppress(IndexError):  # (another thread may have taken the last one since)
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
        self._process.check()
        return self._handshake.refused()

    def _no_heartbeat_why(self) -> str:
        """What is known of a wait_ready that timed out: a service starting has not bound its answers socket yet, and
        a connection made is one whose heartbeat has not come yet (review421 #6: both were "is the service running
        there?")."""
        if self._handshake.refused() is None and not self._handshake.connected:
            return ("nothing accepted the connection: no service there, or one still starting (its answers socket "
                    "binds once it serves; `flashtick health` says starting until then)")
        if self._handshake.live:
            return ("connected, but no heartbeat came within that time (one comes every limits.heartbeat_s: a "
                    "time-out shorter than that, or a service too busy to send it)")
        return self._handshake.explain()

    def _wanted(self, topic: str) -> bool:
        return any(topic.startswith(prefix) for prefix in self.topics)

    def _check_usable(self) -> None:
        self._process.check()
        if self._sock.closed:
            raise RuntimeError(f"AnswerSubscriber to {self.endpoint} is closed")

    def _subscription(self, option: int, topic: str) -> None:
        with self._turn:
            if not self._sock.closed:
                self._sock.setsockopt(option, topic.encode())

    def _recv(self, timeout_ms: int) -> tuple[str, dict[str, Any]] | None:
        """The next message within ``timeout_ms`` (waiting for another thread's turn counts), or None."""
        if not self._turn.acquire(timeout=timeout_ms / 1000):
            return None
        try:
            self._check_usable()  # closed by another thread while this one waited its turn: the way to end a wait
            if not self._sock.poll(timeout_ms):
                return None
            frames = self._sock.recv_multipart()
        finally:
            self._turn.release()
        if len(frames) != 2:  # the rest of a message whose first frame an interrupted recv (Ctrl-C) took: the
            self.stray_frames += 1  # socket is at a message boundary again after it; that message is lost here
            return None  # (a GaplessSubscriber fetches it by seq)
        topic, payload = frames
        return topic.decode(), msgpack.unpackb(payload, raw=False)

    def close(self) -> None:
        self.unclosed.detach()
        if self._process.forked:  # (its turn may be a copy of one a parent's thread held: never released here)
            return
        with self._turn:
            close_sockets(self._process, self._handshake, self._sock)

    def __enter__(self) -> "AnswerSubscriber":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
