"""The control socket's replies while the service starts: `health` says "starting" (and what the start is doing)
and every other op is told to try again, from a thread of its own while the model loads and the tick log replays,
so a supervisor's probe does not take a long start for a hang."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import zmq

from engine.service.control_requests import (NO_ID, envelope_problem, read_control_request, refused_envelope,
                                             request_id, request_or_none)
from engine.service.release import release_fields
from engine.service.wire_protocol import WIRE_PROTOCOL, pack, pack_with_raw, raw_map_value

class StartingReplies:
    """While the service starts (the model loads, the tick log replays): a thread that answers its control socket,
    `health` with ``status: starting`` and every other op with an error that says to try again. The socket is the
    main loop's once the block ends (the thread joined first: a socket is used by one thread at a time)."""

    def __init__(self, sock: zmq.Socket, model: str, zero_bid: str, started_at: float,
                 send: Callable[[list[bytes]], None]) -> None:
        self.sock, self.model, self.started_at = sock, model, started_at
        self._send = send  # the server's (a reply its client does not read is dropped and counted)
        self.zero_bid = zero_bid  # known from the config: a feed asking this early learns how its 0 bids are read
        self.phase = "loading the model"  # what the start is doing, in `health`'s reply (`said`)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="control-while-starting", daemon=True)

    def __enter__(self) -> "StartingReplies":
        if not self._thread.is_alive():  # (started already when bound before the engine's imports: EarlyStart)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def said(self, phase: str) -> None:
        """The start's progress, told by the pipeline (a str assignment: safe to read from the replying thread)."""
        self.phase = phase

    def _serve(self) -> None:
        while not self._done.is_set():
            if not self.sock.poll(100):
                continue
            frames = read_control_request(self.sock)
            if envelope_problem(frames[:-1]) is not None:  # (told properly once the service serves)
                frames = [*refused_envelope(frames[:-1]), frames[-1]]
            request = request_or_none(frames[-1])  # (a request that is not msgpack: told once the service serves)
            op = request.get("op") if isinstance(request, dict) else None
            if op == "health":
                reply = {"ok": True, "status": "starting", "uptime_s": time.time() - self.started_at,
                         "model": self.model, "phase": self.phase, "protocol": WIRE_PROTOCOL,
                         **release_fields(), "zero_bid": self.zero_bid}
            else:
                reply = {"ok": False, "reason": "starting",
                         "error": "the service is starting (loading its model, recovering its streams from the tick "
                                  "log): try again once `flashtick health` says serving"}
            packed = pack(reply)
            if (rid := request_id(request)) is not NO_ID:  # (byte for byte, as the serving loop echoes it)
                raw = raw_map_value(frames[-1], "id")
                packed = pack_with_raw(reply, "id", raw if raw is not None else pack(rid))
            self._send([*frames[:-1], packed])
