"""The first record of each tick log segment (``SEGMENT_START``): every stream's tick count, last accepted ts,
codec state, `at_last_ts` and last `seq` so far, and (one engine) its session as a replay would have booked it, so
that a replay starting at that segment, once retention dropped the ones before, goes on exactly where the live run
was (log_replay.py reads it). DataDir hands ``SegmentStarts.record`` to its TickLog, which writes it at every roll."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

from connectors.encoder import StreamEncoders
from engine.service.log_reading import segment_first_record
from engine.service.ticklog import LOGGED, SEGMENT_START

SEGMENT_START_SHARE = 4  # a segment's start record may take at most 1/4 of log.segment_bytes with the sessions


class SegmentStarts:
    def __init__(self, segment_bytes: int) -> None:
        self.segment_bytes = segment_bytes  # log.segment_bytes
        self._sessions_said = self._guards_said = self._counts_said = False

    def record(self, encoders: StreamEncoders | None, booked: Callable[[str], Any] | None, ticks_logged: int) -> bytes:
        """A new segment's first record, from the live ``encoders`` (none: a front door that has not made them yet)
        and ``booked`` (one engine's Scheduler.booked; none: no sessions in it), with ``ticks_logged`` since the log
        began. It holds the streams held and the expired streams' guards kept (scheduler.expired_streams_kept),
        never those forgotten. Past its share of the segment (1/SEGMENT_START_SHARE) it holds the counts alone;
        still past it, only the most recently expired guards that fit; still past it (the held streams' counts
        alone), it is written whole, a restart needs each, and the segment's ticks fill log.segment_bytes after it
        (ticklog.py), so a segment never rolls every few ticks. Each step is said once."""
        if encoders is None:
            return msgpack.packb({SEGMENT_START: {}, LOGGED: ticks_logged}, use_bin_type=True)
        states = encoders.codec_states()
        held, expired = encoders.held_accepted(), encoders.expired_guards()
        share = self.segment_bytes // SEGMENT_START_SHARE

        def pack(sessions: bool, guards: list[str]) -> bytes:
            starts = {name: [a["ticks"], a["last_ts"], states.get(name),
                             booked(name) if sessions and booked is not None and a["ticks"] else None,
                             a["at_last_ts"], a["last_seq"]] for name, a in held.items()}
            starts.update({name: [0, expired[name]["last_ts"], None, None, expired[name]["at_last_ts"],
                                  expired[name]["last_seq"]] for name in guards})
            return msgpack.packb({SEGMENT_START: starts, LOGGED: ticks_logged}, use_bin_type=True)

        names = list(expired)  # oldest expiry first
        record = pack(booked is not None, names)
        if len(record) <= share:
            return record
        if booked is not None:
            self._say_once("_sessions_said", f"the tick log's segments ({self.segment_bytes} bytes, "
                           f"log.segment_bytes) are too small to start with every stream's session ({len(record)} "
                           f"bytes): a restart after retention drops segments rebuilds sessions from the ticks kept")
            record = pack(False, names)
        if len(record) <= share:
            return record
        counts_alone = pack(False, [])
        kept = names
        while kept and len(record) > share:  # the newest guards, as many as fit (estimated from their mean size)
            each = max(1, (len(record) - len(counts_alone)) // len(kept))
            keep = min(len(kept) - 1, max(0, (share - len(counts_alone)) // each))
            kept = kept[len(kept) - keep:] if keep else []
            record = pack(False, kept)
        if len(kept) < len(names):
            self._say_once("_guards_said", f"the tick log's segment start holds the ordering guards of the "
                           f"{len(kept)} most recently expired streams of {len(names)} kept "
                           f"(scheduler.expired_streams_kept), to stay within 1/{SEGMENT_START_SHARE} of "
                           f"log.segment_bytes ({self.segment_bytes}): after a restart whose retention dropped the "
                           f"earlier segments, an older expired stream's next tick is taken as a new stream's "
                           f"(docs/feed-resume.md)")
        if len(record) > share:
            self._say_once("_counts_said", f"the tick log's segment start holds the tick counts of {len(held)} "
                           f"streams held ({len(record)} bytes), past 1/{SEGMENT_START_SHARE} of log.segment_bytes "
                           f"({self.segment_bytes}): written whole (a restart needs each held stream's count), and "
                           f"each segment takes log.segment_bytes of ticks past it; raise log.segment_bytes")
        return record

    def _say_once(self, flag: str, line: str) -> None:
        if not getattr(self, flag):
            setattr(self, flag, True)
            print(f"flashtick: {line}", file=sys.stderr, flush=True)


def counts_before(path: Path) -> dict[str, int] | None:
    """Each stream's tick count before the segment file ``path``, from its start record alone; None when it has none
    (gone, damaged, or written before segments began with one)."""
    try:
        payload = segment_first_record(path)
    except FileNotFoundError:
        return None
    record = None if payload is None else msgpack.unpackb(payload, raw=False)
    if not isinstance(record, dict) or not isinstance(record.get(SEGMENT_START), dict):
        return None
    return {name: start[0] for name, start in record[SEGMENT_START].items()}
