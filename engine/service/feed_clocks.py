"""What the service tells of each live stream's feed beside its ticks (review323 #10, #11, #12): its clock's offset
to this machine's (the smallest read time - ts its ticks had: receive_clock.py), flagged past
`ingest.clock_ahead_warn_ms` ahead (its answers' `data_age_ms` is negative by about that much), its refused ticks by
reason (stream_refusals.py), and `health`'s `warnings`: the streams whose clocks run ahead, and those whose ticks
are refused as late at a rate that means two clocks interleave.

With `--shards` the front door reads every wire tick, so it keeps the offsets (sharded_ingest.py) and `streams`,
answers and `health` say them as one engine's do."""

from __future__ import annotations

import time
from typing import Any

from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from engine.service.sharded import ShardedPipeline
from engine.service.stream_refusals import STREAMS_SAID, StreamRefusals
from engine.quoting import quoted


class FeedClocks:
    """The Server's per-stream feed figures (a mixin: it reads the pipeline's receive clock and the refusals)."""

    config: ServiceConfig
    pipeline: TickPipeline | ShardedPipeline
    stream_refusals: StreamRefusals

    def _init_feed_clocks(self) -> None:
        ingest = self.config.ingest
        self.stream_refusals = StreamRefusals(ingest.late_share_warn, ingest.reorder_window_ms)

    def _offset_ns(self, stream: str) -> int | None:
        return self.pipeline.receive_clock.offset_ns(stream)

    def _stream_feed(self, stream: str) -> dict[str, Any]:
        """A `streams` entry's feed figures: `clock_offset_ms` (absent: not stamped with the wall clock, or not held),
        `clock_ahead` (a caveat, past ingest.clock_ahead_warn_ms) and `rejected` (by reason, when any)."""
        offset = self._offset_ns(stream)
        entry: dict[str, Any] = {}
        if offset is not None:
            entry["clock_offset_ms"] = round(offset / 1e6, 3)
            if -offset > self.config.ingest.clock_ahead_warn_ms * 1e6:
                entry["clock_ahead"] = _ahead_text(stream, offset)
        if rejected := self.stream_refusals.of(stream):
            entry["rejected"] = rejected
        return entry

    def _answer_feed(self, stream: str, data_ts: int) -> dict[str, Any]:
        """A published answer's age at publish (`data_age_ms`: this machine's clock less the answered tick's ts)
        and its stream's `clock_offset_ms` when stamped with the wall clock (the age less the offset is how long
        since the tick reached the service, whatever the venue's clock)."""
        offset = self._offset_ns(stream)
        return {"data_age_ms": round((time.time_ns() - data_ts) / 1e6, 3),
                **({"clock_offset_ms": round(offset / 1e6, 3)} if offset is not None else {})}

    def _feed_warnings(self) -> dict[str, Any]:
        """`health`'s `warnings` (absent when none): streams whose clock runs ahead past the threshold, the
        furthest STREAMS_SAID, and streams seen interleaving two clocks (stream_refusals.py)."""
        ahead = self.pipeline.receive_clock.most_ahead(round(self.config.ingest.clock_ahead_warn_ms * 1e6),
                                                       STREAMS_SAID)
        warnings = [{"stream": stream, "kind": "clock_ahead", "clock_offset_ms": round(offset / 1e6, 3),
                     "message": _ahead_text(stream, offset)} for stream, offset in ahead.items()]
        warnings += self.stream_refusals.health_warnings()
        return {"warnings": warnings} if warnings else {}


def _ahead_text(stream: str, offset_ns: int) -> str:
    return (f"stream {quoted(stream)} is stamped {-offset_ns / 1e9:.3f} s ahead of this machine's clock (its smallest "
            f"read time - ts): its answers' data_age_ms read that much low (negative); check the venue's or the "
            f"feed handler's clock, or this host's (ingest.clock_ahead_warn_ms)")
