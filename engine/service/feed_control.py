"""A feed's calls to the engine's control socket, for the feed's resume (engine/service/feed_resume.py): a client
made afresh after a failed call (a request lost with a dropped connection must not leave its late reply to be read
as another's), the engine's first reply once it serves (waiting while it starts), the wait for an engine that comes
back after its connection dropped (a signal ends either wait), and each stream's held ticks asked in calls of at
most MAX_NAMES_PER_CALL names."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from connectors.feed import EngineLost, FeedTimeout
from engine.service.client import ControlClient, ControlError

# a control reply's error while the engine loads (starting_replies.py StartingReplies): its reason, or, from a
# service of an earlier version that gave none, its words
STARTING, STARTING_WORDS = "starting", "the service is starting"
START_WAIT_S = 20.0  # a feed waits this long for a control socket that accepts nothing yet (a serve just launched)
MAX_NAMES_PER_CALL = 10_000  # the control op `streams` answers for at most this many names (MAX_STREAMS_PER_REPLY)


class FeedControl:
    def __init__(self, connect: Callable[[], ControlClient], wait_s: float, stop: threading.Event | None,
                 who: str) -> None:
        """``connect``, ``wait_s``, ``stop`` and ``who`` as ControlFeedResume takes them (feed_resume.py)."""
        self.who = who
        self.connect = connect
        self.stop = stop
        self.control: ControlClient | None = None
        self.wait_s = wait_s

    def first_reply(self, start_wait_s: float) -> dict[str, Any]:
        """The engine's streams when the feed begins, once it serves: a feed started with (or just after) a `serve`
        that is still loading or replaying its tick log must not send before it can place itself after the ticks
        the engine holds (a synthetic market starting "now" was refused as ts_backwards behind a previous run's).
        Its ``tag`` is for the feed's messages: the engine keeps this placement under it (what of a killed feed's it
        reads after the reply, this feed sends again and the engine leaves out: placed_feeds.py). ControlError when
        nothing accepts the control socket within ``start_wait_s``."""
        started = time.monotonic()
        said = ""
        while True:
            try:
                # drain: what a feed of these streams killed before this one left queued at the engine is read
                # first, so this feed places itself after it; what comes later the engine sorts out by the tag it
                # gives (an engine of an earlier version ignores drain, and gives none)
                return self.call(streams=None, drain=True)
            except ControlError as e:
                starting = e.reason == STARTING or e.reason is None and STARTING_WORDS in str(e)
                self._stopped("start")
                if time.monotonic() - started >= (self.wait_s if starting else start_wait_s):
                    raise
                why = "it is starting (loading its model, replaying its tick log)" if starting else str(e)
                if why != said:  # an operator must tell "waiting for the engine" from "hung"
                    print(f"{self.who}: waiting for the engine before sending: {why} (a signal stops the feed)",
                          file=sys.stderr, flush=True)
                    said = why
                self._pause(0.5)

    def wait_for_engine(self, streams: list[str]) -> dict[str, int]:
        deadline = time.monotonic() + self.wait_s
        said = False
        while True:
            try:
                if not streams:  # nothing sent yet: still one call, so this waits for an engine that serves
                    self.call(streams=[])
                return self.held(streams)
            except ControlError as e:
                self._stopped("come back")
                if time.monotonic() >= deadline:
                    raise FeedTimeout(f"the engine did not come back within {self.wait_s:g} s after its "
                                      f"connection dropped ({e})") from None
                if not said:  # an operator must tell "waiting for the engine" from "hung"
                    print(f"{self.who}: the engine's connection dropped ({e}); waiting up to {self.wait_s:g} s "
                          f"for it to come back (a signal stops the feed)", file=sys.stderr, flush=True)
                    said = True
                self._pause(0.2)

    def _stopped(self, waiting_to: str) -> None:
        """EngineLost once a signal asked the feed to stop while it waits for its engine to start or come back."""
        if self.stop is not None and self.stop.is_set():
            raise EngineLost(f"stopped by a signal while waiting for the engine to {waiting_to}") from None

    def _pause(self, seconds: float) -> None:
        """A wait between tries that a signal (``stop``) ends at once."""
        if self.stop is not None:
            self.stop.wait(seconds)
        else:
            time.sleep(seconds)

    def held(self, streams: list[str]) -> dict[str, dict[str, Any]]:
        """Per stream: the engine's ``{ticks, last_ts, at_last_ts}``; absent if it holds none."""
        out: dict[str, dict[str, Any]] = {}
        for i in range(0, len(streams), MAX_NAMES_PER_CALL):
            reply = self.call(streams=streams[i : i + MAX_NAMES_PER_CALL])
            for name, held in reply["streams"].items():
                if held:
                    out[name] = held
        return out

    def health(self) -> dict[str, Any]:
        """The engine's ``health`` reply ({} when it gives none now: what needs it goes unsaid)."""
        try:
            return self.call("health")
        except ControlError:
            return {}

    def call(self, op: str = "streams", **fields: Any) -> dict[str, Any]:
        """A control op (``streams`` unless named); ControlError (the client made afresh next time) when it fails."""
        if self.control is None:
            self.control = self.connect()
        try:
            return self.control.call(op, **fields)
        except ControlError:
            self.control.close()
            self.control = None
            raise

    def close(self) -> None:
        if self.control is not None:
            self.control.close()
