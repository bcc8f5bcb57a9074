"""What the server does to a live wire message before its pipeline reads it, when the `ingest` section asks for it:
its streams renamed (``ingest.rename``: a venue's symbol to the desk's name, exact or by a pattern, and
``ingest.slashes``: connectors/stream_renames.py) and its ticks, raw and pre-tokenized,
held for ``ingest.reorder_window_ms`` (reorder_window.py) and released in event-time order; and a placed feed's ticks
that the engine took already, left out (placed_feeds.py: a watched feed's message has its stream names read first,
and is decoded here only when one of its ticks is left out). With none of them at work a message goes to the
pipeline as read, untouched (no decode here).

A message is decoded here only when one of them is set; one that does not decode, or is no tick map or list of them,
goes on as read (the pipeline says why it is refused). Its items are packed again one by one as they were read (text
that is not UTF-8 included, so every refusal reads as it would have); an item holding a key twice is refused here,
as the pipeline would (packing it again would keep one value). A held tick's refusal, when it is released, names
its index in the message it came in and goes to that message's `_rejects/` topic.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import msgpack

from connectors.encoded_items import Rejection
from connectors.msgpack_reading import RepeatedKeys, check_keys, tick_items, unpack
from connectors.stream_renames import StreamRenames
from connectors.tick_errors import InvalidTick
from connectors.tick_sequences import resent_refusal
from connectors.tick_times import check_order
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from engine.service.placed_feeds import PlacedFeeds, streams_read
from engine.service.reorder_window import Release, ReorderWindow
from engine.service.sharded import ShardedPipeline

_PACKER = msgpack.Packer(unicode_errors="surrogateescape")  # (items read with surrogates go back as they came)


class IngestHolding:
    """The Server's renaming and reorder window (a mixin: it feeds the server's pipeline, and publishes the
    rejections of what it releases as ingest_reading.py does for a message read)."""

    config: ServiceConfig
    pipeline: TickPipeline | ShardedPipeline
    counters: dict[str, int]
    _publish_rejections: Callable[[list[dict[str, Any]], str | None], None]  # (IngestReading's)

    def _init_holding(self) -> None:
        ingest = self.config.ingest
        self.stream_renames = StreamRenames(ingest.rename, ingest.slashes)
        self.reorder = (ReorderWindow(ingest.reorder_window_ns, ingest.reorder_max_ticks)
                        if ingest.reorder_window_ms > 0 else None)
        self.placed_feeds = PlacedFeeds()  # feeds placed by `streams` (drain, tag): what they send again, left out
        self.counters["placing_duplicates"] = 0

    def _ingest_raw(self, payload: bytes, tag: str | None) -> list[dict[str, Any]]:
        """A raw-tick message read now: renamed, its ticks held (their refusals come when they are released), the
        rest ingested now; returns the refusals of now."""
        keep = None
        if self.placed_feeds.watches(tag) and \
                (streams := streams_read(payload, self.stream_renames.renamed)) is not None:
            keep = self.placed_feeds.kept(tag, streams, self._ticks_taken)
        if self.reorder is None and not self.stream_renames and keep is None:
            return self.pipeline.ingest_message(payload)
        items = self._decoded(payload, tick_items)
        if items is None or (keep is not None and len(keep) != len(items)):  # (read otherwise: nothing left out)
            return self.pipeline.ingest_message(payload)
        if keep is not None:
            self.counters["placing_duplicates"] += keep.count(False)
        return self._held_or_ingested(items, tag, False, keep)

    def _ticks_taken(self, stream: str) -> int:
        """The engine's tick count of ``stream`` now (0: it holds none)."""
        held = self.pipeline.encoders.accepted([stream])[stream]
        return 0 if held is None else held["ticks"]

    def _ingest_tokenized(self, payload: bytes) -> list[dict[str, Any]]:
        """A tokenized message read now: renamed, and its items held in the reorder window as raw ticks are, in one
        order per stream with them: a stream fed both forms must not have its raw ticks, held, refused as late
        behind a tokenized item that passed them. The sender's tokens are its codec's in its order, which the
        window keeps for items sent in order (equal stamps go out as read); one sent late is placed by its `ts`, as
        a raw tick is, rather than refused (the engine's codec state never moves for a tokenized item)."""
        if self.reorder is None and not self.stream_renames:
            return self.pipeline.ingest_tokenized(payload)
        items = self._decoded(payload, lambda obj: obj if isinstance(obj, list) else None)
        if items is None:
            return self.pipeline.ingest_tokenized(payload)
        return self._held_or_ingested(items, None, True)

    def _held_or_ingested(self, items: list[Any], tag: str | None, tokenized: bool,
                          keep: list[bool] | None = None) -> list[dict[str, Any]]:
        """A message's items (renamed): each with a stream and an int ts held in the reorder window (when set), the
        rest ingested now through their form's path; returns the refusals of now. ``keep``: per item, False for one
        left out (a placed feed's tick taken already: placed_feeds.py), the others keeping their index."""
        ingest = self.pipeline.ingest_tokenized if tokenized else self.pipeline.ingest_message
        now_ns, now, refused, releases = time.time_ns(), [], [], []
        message = self.reorder.next_message() if self.reorder is not None else 0
        for index, obj in enumerate(items):
            if keep is not None and not keep[index]:
                continue
            if isinstance(obj, RepeatedKeys):
                refused.append(self._refused_here(index, obj))
            elif self.reorder is not None and type(obj) is dict and type(obj.get("stream")) is str \
                    and type(obj.get("ts")) is int and not tokenized and obj.get("seq") is None \
                    and (newest := self.reorder.resent_behind(obj["stream"], obj["ts"], obj, message)) is not None:
                refused.append(self._resent_refused(index, obj["stream"], obj["ts"], newest))
            elif self.reorder is not None and type(obj) is dict and type(obj.get("stream")) is str \
                    and type(obj.get("ts")) is int:
                releases += self.reorder.hold(obj["stream"], obj["ts"], obj, tag, index, now_ns, message,
                                              tokenized)
            else:  # (no stream or ts to hold it by: its checks refuse it now)
                now.append((index, obj))
        rejections = refused + self._ingest_items(now, ingest)
        self._ingest_released(releases)
        return rejections

    def _release_due(self) -> None:
        """The held ticks whose window is up, to the engine (each turn of the loop), in their tick groups."""
        if self.reorder is not None and len(self.reorder):
            self._ingest_released(self.reorder.due(time.time_ns()))

    def _release_all(self) -> None:
        """Every held tick, to the engine now (a stop; a feed placing itself reads what the engine holds)."""
        if self.reorder is not None and len(self.reorder):
            self._ingest_released(self.reorder.flush())

    def _holding_wait_ms(self, wait_ms: int) -> int:
        """The loop's poll wait, no longer than until the next held stream's window is up."""
        due = self.reorder.next_due_ns() if self.reorder is not None else None
        return wait_ms if due is None else max(0, min(wait_ms, (due - time.time_ns()) // 1_000_000 + 1))

    def _decoded(self, payload: bytes, items_of: Callable[[Any], list | None]) -> list | None:
        """The message's items, renamed; None for a message the pipeline must read as it came (it says why)."""
        try:
            items = items_of(unpack(payload, max_bytes=self.config.limits.max_message_bytes))
        except InvalidTick:
            return None
        if not items:
            return None
        return [self._renamed(obj) for obj in items]

    def _renamed(self, obj: Any) -> Any:
        if type(obj) is dict and type(name := obj.get("stream")) is str \
                and (renamed := self.stream_renames.renamed(name)) != name:
            return {**obj, "stream": renamed}
        return obj

    def _refused_here(self, index: int, obj: RepeatedKeys) -> dict[str, Any]:
        try:
            check_keys(obj)
        except InvalidTick as err:
            self.pipeline.rejected[err.reason] += 1
            return Rejection.of(index, err).to_wire()
        raise AssertionError("a map read with a key twice passes check_keys")  # (check_keys refuses every one)

    def _resent_refused(self, index: int, stream: str, ts: int, newest: int) -> dict[str, Any]:
        """A held tick's resend, refused as `ts_backwards` behind the newest held tick ``newest`` (reorder_window.py),
        in the words the ordering guard gives one unheld."""
        try:
            check_order(stream, ts, newest)
        except InvalidTick as err:
            self.pipeline.rejected[err.reason] += 1
            return Rejection.of(index, resent_refusal(err)).to_wire()
        raise AssertionError("a resend is stamped before the newest held tick")  # (resent_behind's rule)

    def _ingest_items(self, indexed: list[tuple[int, Any]],
                      ingest: Callable[[bytes], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """``indexed`` items (with their index in the message read) packed again as one message and ingested; the
        refusals name the index each had in the message read (-1: the message's own)."""
        if not indexed:
            return []
        rejections = ingest(_PACKER.pack([obj for _, obj in indexed]))
        return [{**r, "index": indexed[r["index"]][0] if 0 <= r["index"] < len(indexed) else -1}
                for r in rejections]

    def _ingest_released(self, releases: list[Release]) -> None:
        """Released ticks, one message per tick group (reorder_window.py: the groups the feed sent), each read as
        reaching the engine now: the window they were held is not the engine's lag (tick_ingest.py idle_at_ns); but
        their clock offsets are taken from when they were read off the socket, so the hold is no clock skew and
        data_age_ms counts it (review411 #11)."""
        for release in releases:
            idle_at = getattr(self.pipeline, "idle_at_ns", None)
            self.pipeline.idle_at_ns = time.time_ns()
            # a release is one stream's: by ts, the last read of the ticks stamped so (ticks go out sorted by ts, then
            # read order), which never reads a tick further ahead than it was
            read_before = {t.ts: t.read_ns for t in release.ticks}
            try:
                ingest = self.pipeline.ingest_tokenized if release.tokenized else self.pipeline.ingest_message
                self.pipeline.encoders.reading_feed(release.tag)  # (the feed it came from: ingest.seq_scope)
                rejections = self._ingest_items([(t.index, t.obj) for t in release.ticks],
                                                lambda data: ingest(data, read_before))
            finally:
                self.pipeline.idle_at_ns = idle_at
            self._publish_rejections(rejections, release.tag)
