"""What the ingest side hands on and hands back: `EncodedTick` (tokens ready for the engine, not yet committed to
their stream, and what a tick log keeps of them), `Submit` (how it is handed on), and per message `Ingested` (the
items accepted) with its `Rejection`s (each refused tick's reason, as `_rejects/` publishes it).

Apart from connectors/encoder.py because the service, the tick log and the shards pass these values around without
the encoders that make them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from connectors.tick_errors import InvalidTick
from connectors.ticks import Tick

PASSED = "passed"  # a tick log record's key: EncodedTick.passed


class EncodedTick(NamedTuple):
    """Tokens ready for the engine, not yet committed to the stream's state."""

    stream: str
    ts: int
    tokens: list[int]
    ticks: int  # ticks these tokens stand for (1 for a raw tick)
    state: Any  # codec state after this tick; None when pre-tokenized (the codec state does not move)
    tick: Tick | None = None  # the raw tick it came from (None when pre-tokenized): what a tick log keeps
    passed: int = 0  # ticks of its stream stamped ts taken just before it and refused or conflated (PassedOver)
    seq: int | None = None  # the feed's sequence number of the item (a raw tick's is its tick's; None: none sent)

    def to_record(self) -> dict[str, Any]:
        """What a tick log keeps to replay this item through the same encoders: the raw tick, or the tokens, and
        the ticks passed over before it (``passed``, left out when 0: logs written before it have none)."""
        if self.tick is not None:
            record: dict[str, Any] = {"tick": self.tick.to_wire()}
        else:
            record = {"tokenized": {"stream": self.stream, "ts": self.ts, "tokens": self.tokens, "ticks": self.ticks}}
            if self.seq is not None:  # (a restart's replay takes it back: a resend after it is still a duplicate)
                record["tokenized"]["seq"] = self.seq
        if self.passed:
            record[PASSED] = self.passed
        return record


class Rejection(NamedTuple):
    """One refused tick (or message, index -1) with its REASONS code and a human message."""

    index: int
    reason: str
    error: str
    stream: str | None = None  # set once the tick got far enough to have a valid stream name
    count: int = 1  # the ticks it stands for (a shed message: one per stream, from its first tick's index)

    @classmethod
    def of(cls, index: int, err: InvalidTick) -> Rejection:
        return cls(index, err.reason, str(err), err.stream)

    def to_wire(self) -> dict[str, Any]:
        # an error quoting text that was not UTF-8 (decoded with surrogates) is sent escaped, never unsendable
        error = self.error.encode("utf-8", "backslashreplace").decode()
        d: dict[str, Any] = {"index": self.index, "reason": self.reason, "error": error}
        if self.stream is not None:
            d["stream"] = self.stream
        if self.count != 1:
            d["count"] = self.count
        return d


class Ingested(NamedTuple):
    """What one message gave: the accepted items (in order) and the rejections."""

    accepted: list[EncodedTick]
    rejections: list[Rejection]

    @property
    def ticks(self) -> int:
        return sum(item.ticks for item in self.accepted)


Submit = Callable[[EncodedTick], None]
"""Hands an encoded item on (to the engine); raises InvalidTick (e.g. "stream_refused") to refuse it."""
