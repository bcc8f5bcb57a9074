"""The Source seam: where ticks come from (file replay, synthetic market, ZeroMQ).

A source is polled by one loop that also does other work, so it must never
block; and a long replay or backtest must survive a restart, so it can
snapshot its position and resume from it.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from typing import Any

from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import Tick
from engine.quoting import quoted

BEHIND_SAID_S = 1.0  # a paced source (a replay's --speed) this late, in wall seconds, is said to be behind

SKIP_CHUNK = 4096  # ticks regenerated per step when fast-forwarding a restore


class Source(ABC):
    """A non-blocking, resumable stream of ticks.

    Contract
    --------
    * `next_batch(max_ticks)` returns at once with 0..max_ticks ticks. An empty
      list means "nothing available right now", not "finished": check `done`.
    * `done` is True once a finite source has handed out its last tick (the
      "replay complete" marker); it is already True right after the
      `next_batch` call that returned that tick. An endless source is never done.
    * `snapshot()` is a small msgpack/JSON-able dict describing the position
      right AFTER the last tick returned by `next_batch`. `restore(snapshot)`
      on a source built with the same arguments makes the next `next_batch`
      return the tick that would have followed: no tick repeated, none skipped.
      Ticks the source has read ahead or is still holding back (for pacing)
      were never returned, so they are not part of the position and come again
      after a restore. A snapshot taken before the first `next_batch` restores
      to the beginning.
    """

    @abstractmethod
    def next_batch(self, max_ticks: int) -> list[Tick]:
        """Up to `max_ticks` ticks available now, in order; never blocks."""

    @property
    @abstractmethod
    def done(self) -> bool:
        """True once a finite source is exhausted."""

    @abstractmethod
    def snapshot(self) -> dict[str, Any]:
        """The position after the last returned tick (see the class contract)."""

    @abstractmethod
    def restore(self, snapshot: dict[str, Any]) -> None:
        """Continue right after the tick the snapshot was taken at; raises ValueError if it is not ours."""

    def close(self) -> None:
        """Release files or sockets; the default has nothing to release."""


def check_max_ticks(max_ticks: int) -> None:
    if isinstance(max_ticks, bool) or not isinstance(max_ticks, int) or max_ticks < 0:
        raise ValueError(f"max_ticks must be an int >= 0, got {quoted(max_ticks)}")


def fingerprint(description: Any) -> str:
    """A short stable digest of a source's arguments, so a snapshot cannot resume the wrong source."""
    return hashlib.sha256(repr(description).encode()).hexdigest()[:16]


def check_snapshot(snapshot: dict[str, Any], source: str, expected_fingerprint: str) -> int:
    """Validate a snapshot taken by a source of kind `source`; return its tick position."""
    if not isinstance(snapshot, dict) or snapshot.get("source") != source:
        got = snapshot.get("source") if isinstance(snapshot, dict) else type(snapshot).__name__
        raise ValueError(f"not a {source} snapshot (source={quoted(got)})")
    if snapshot.get("fingerprint") != expected_fingerprint:
        raise ValueError(
            f"{source} snapshot was taken with different arguments (fingerprint {quoted(snapshot.get('fingerprint'))}, "
            f"this source is {quoted(expected_fingerprint)}); build the source exactly as before restoring"
        )
    emitted = snapshot.get("emitted")
    if isinstance(emitted, bool) or not isinstance(emitted, int) or emitted < 0:
        raise ValueError(f"snapshot \"emitted\" must be an int >= 0, got {quoted(emitted)}")
    return emitted


class SyntheticSource(Source):
    """The seeded synthetic market as a Source, endless or limited to `limit` ticks.

    Resuming regenerates the market from its seed and skips the ticks already
    emitted: the market is deterministic, so this reproduces the exact sequence.
    A config whose `start_ts` is None (now) is anchored once, here; the snapshot
    carries the start it got, and a source built with that `start_ts` resumes it.
    """

    def __init__(self, config: SyntheticConfig | None = None, limit: int | None = None) -> None:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise ValueError(f"limit must be None (endless) or an int >= 0, got {quoted(limit)}")
        self.config = (config or SyntheticConfig()).anchored()
        self.limit = limit
        self._fingerprint = fingerprint(("synthetic", self.config))  # limit left out: resuming may run longer
        self._market = SyntheticMarket(self.config)
        self.emitted = 0

    def next_batch(self, max_ticks: int) -> list[Tick]:
        check_max_ticks(max_ticks)
        n = max_ticks if self.limit is None else min(max_ticks, self.limit - self.emitted)
        ticks = self._market.next_batch(n)
        self.emitted += len(ticks)
        return ticks

    @property
    def done(self) -> bool:
        return self.limit is not None and self.emitted >= self.limit

    def snapshot(self) -> dict[str, Any]:
        return {"source": "synthetic", "fingerprint": self._fingerprint, "emitted": self.emitted,
                "start_ts": self.config.start_ts}

    def restore(self, snapshot: dict[str, Any]) -> None:
        emitted = check_snapshot(snapshot, "synthetic", self._fingerprint)
        if self.limit is not None and emitted > self.limit:
            raise ValueError(f"snapshot position {emitted} is past this source's limit {self.limit}")
        self._market = SyntheticMarket(self.config)
        for start in range(0, emitted, SKIP_CHUNK):
            self._market.next_batch(min(SKIP_CHUNK, emitted - start))
        self.emitted = emitted
