"""What the service tells of each live stream's feed beside its ticks (review323 #10, #11, #12): its clock's offset
to this machine's (the smallest read time - ts its ticks had lately: receive_clock.py), flagged past
`ingest.clock_ahead_warn_ms` ahead (its answers' `data_age_ms` counts from the earliest their tick can have come, not
from its ts, and they carry a `clock_ahead` caveat, review376 #1), its refused ticks by reason (stream_refusals.py),
and `health`'s `warnings`: the streams whose clocks run ahead, and those whose ticks are refused as late at a rate
that means two clocks interleave.

With `--shards` the front door reads every wire tick, so it keeps the offsets (sharded_ingest.py) and `streams`,
answers and `health` say them as one engine's do."""

from __future__ import annotations

import sys
import time
from typing import Any

from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from engine.service.sharded import ShardedPipeline
from engine.service.stream_refusals import STREAMS_SAID, StreamRefusals
from engine.quoting import quoted
from queries.cache import Answer


CLOCK_AHEAD_SAID_EVERY_S = 60.0  # streams newly found with a clock ahead: one log line at most this often


class FeedClocks:
    """The Server's per-stream feed figures (a mixin: it reads the pipeline's receive clock and the refusals)."""

    config: ServiceConfig
    pipeline: TickPipeline | ShardedPipeline
    stream_refusals: StreamRefusals

    def _init_feed_clocks(self) -> None:
        ingest = self.config.ingest
        self.stream_refusals = StreamRefusals(ingest.late_share_warn, ingest.reorder_window_ms)
        self._clocks_ahead_said: set[str] = set()  # streams whose clock ahead the log said (while it stays ahead)
        self._next_clock_line = 0.0

    def _clocks_ahead(self) -> dict[str, int]:
        """The streams whose feed's clock runs past ingest.clock_ahead_warn_ms ahead of this machine's: name ->
        offset (ns), furthest first (stats' `clock_ahead_streams` counts them; O(streams), once a heartbeat)."""
        threshold_ns = round(self.config.ingest.clock_ahead_warn_ms * 1e6)
        return self.pipeline.receive_clock.most_ahead(threshold_ns, sys.maxsize)

    def _say_clocks_ahead(self, ahead: dict[str, int]) -> None:
        """A log line (`feed_clock`) for streams newly found with a clock ahead, the furthest named, at most every
        CLOCK_AHEAD_SAID_EVERY_S (review412 #8: `health` warned of one, the log said nothing)."""
        self._clocks_ahead_said &= ahead.keys()
        new = [stream for stream in ahead if stream not in self._clocks_ahead_said]
        if not new or time.monotonic() < self._next_clock_line:
            return
        self._next_clock_line = time.monotonic() + CLOCK_AHEAD_SAID_EVERY_S
        self._clocks_ahead_said.update(new)
        more = f" ({len(new) - 1} more streams newly ahead: `health`'s warnings name them)" if len(new) > 1 else ""
        print(f"flashtick: clock ahead: {_ahead_text(new[0], ahead[new[0]])}{more}", file=sys.stderr, flush=True)

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
        """A published answer's age at publish (`data_age_ms`, `_age_ms`) and its stream's `clock_offset_ms` when
        stamped with the wall clock."""
        offset = self._offset_ns(stream)
        return {"data_age_ms": self._age_ms(stream, data_ts),
                **({"clock_offset_ms": round(offset / 1e6, 3)} if offset is not None else {})}

    def _age_ms(self, stream: str, data_ts: int) -> float:
        """An answer's `data_age_ms`: this machine's clock less the answered tick's ts; for a stream whose clock
        runs ahead of this machine's (a negative offset), less the earliest the tick can have reached the service,
        its ts less that lead (every tick of the stream was read at least that long before its ts). So it is never
        negative and never younger than the answer is (review376 #1: a tick stamped an hour ahead gave an hour's
        negative age, which passed every freshness gate): a clock that runs ahead steadily reads its true age, one
        stamp ahead makes its stream's later answers read older by that lead, never fresher, until the offset forgets
        it (receive_clock.py: two windows with ticks on)."""
        offset = self._offset_ns(stream)
        lead = -offset if offset is not None and offset < 0 else 0
        return data_age_ms(data_ts - lead)

    def _tick_seq(self, answer: Answer) -> dict[str, int]:
        """``answer``'s `tick_seq`: the `seq` its feed gave the last tick it covers, the one that brought its stream
        to its `version` (connectors/answered_seqs.py); empty where that tick carried none (or is too old to know)."""
        seq = self.pipeline.encoders.seq_at.of(answer.stream, answer.version)
        return {} if seq is None else {"tick_seq": seq}

    def _answer_wire(self, answer: Answer) -> dict[str, Any]:
        """``answer`` as an ask's or get's reply holds it: its cached form and its `tick_seq`, as published."""
        return {**answer.to_wire(), **self._tick_seq(answer)}

    def _clock_caveats(self, stream: str) -> list[dict[str, str]]:
        """The `clock_ahead` caveat of an answer on ``stream`` (published, or in an ask's or get's reply) while its
        feed's clock runs past ingest.clock_ahead_warn_ms ahead of this machine's: its `data_ts` is ahead of when it
        happened, and its `data_age_ms` counts from the earliest the tick can have come (review376 #1: an answer about
        a tick stamped an hour ahead passed every freshness gate, its reply's caveats empty). The same test as
        `streams`' `clock_ahead`, so they agree."""
        offset = self._offset_ns(stream)
        if offset is None or -offset <= self.config.ingest.clock_ahead_warn_ms * 1e6:
            return []
        return [{"kind": "clock_ahead", "text": _ahead_text(stream, offset)}]

    def _feed_warnings(self) -> dict[str, Any]:
        """`health`'s `warnings` (absent when none): streams whose clock runs ahead past the threshold, the
        furthest STREAMS_SAID, and streams seen interleaving two clocks (stream_refusals.py)."""
        ahead = self.pipeline.receive_clock.most_ahead(round(self.config.ingest.clock_ahead_warn_ms * 1e6),
                                                       STREAMS_SAID)
        warnings = [{"stream": stream, "kind": "clock_ahead", "clock_offset_ms": round(offset / 1e6, 3),
                     "message": _ahead_text(stream, offset)} for stream, offset in ahead.items()]
        warnings += self.stream_refusals.health_warnings()
        kv_watch = getattr(self, "_kv_thrash", None)  # (Heartbeat's: the live streams' KV past the pool)
        warnings += kv_watch.health_warnings() if kv_watch is not None else []
        return {"warnings": warnings} if warnings else {}


def _ahead_text(stream: str, offset_ns: int) -> str:
    return (f"stream {quoted(stream)} is stamped {-offset_ns / 1e9:.3f} s ahead of this machine's clock (its smallest "
            f"read time - ts in the last 5 to 10 minutes: a stray stamp is forgotten so): its ticks' ts are ahead of "
            f"when they happened, and its answers' data_age_ms counts from the earliest each tick can have come (ts "
            f"less that lead), so it reads older, never younger, than they are; check the venue's or the feed "
            f"handler's clock, or this host's (ingest.clock_ahead_warn_ms)")


def data_age_ms(data_ts: int, now_ns: int | None = None) -> float:
    """This machine's clock less ``data_ts``, in ms, never negative: a negative age passes any freshness gate
    (`data_age_ms < X`). FeedClocks._age_ms moves ``data_ts`` back by a stream's lead first."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    return max(0.0, round((now_ns - data_ts) / 1e6, 3))
