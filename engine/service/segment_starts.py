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
        self._sessions_said = False

    def record(self, encoders: StreamEncoders | None, booked: Callable[[str], Any] | None, ticks_logged: int) -> bytes:
        """A new segment's first record, from the live ``encoders`` (none: a front door that has not made them yet)
        and ``booked`` (one engine's Scheduler.booked; none: no sessions in it), with ``ticks_logged`` since the log
        began. A record of every session past its share of the segment holds the counts alone, said once."""
        if encoders is None:
            return msgpack.packb({SEGMENT_START: {}, LOGGED: ticks_logged}, use_bin_type=True)
        states = encoders.codec_states()
        accepted = {name: a for name, a in encoders.accepted().items() if a is not None}
        sessions = booked is not None
        while True:
            starts = {name: [a["ticks"], a["last_ts"], states.get(name),
                             booked(name) if sessions and a["ticks"] else None, a["at_last_ts"], a["last_seq"]]
                      for name, a in accepted.items()}
            record = msgpack.packb({SEGMENT_START: starts, LOGGED: ticks_logged}, use_bin_type=True)
            if not sessions or len(record) <= self.segment_bytes // SEGMENT_START_SHARE:
                return record
            sessions = False  # a start that filled its segment would roll the log at every tick: counts alone
            if not self._sessions_said:
                self._sessions_said = True
                print(f"flashtick: the tick log's segments ({self.segment_bytes} bytes, log.segment_bytes) are "
                      f"too small to start with every stream's session ({len(record)} bytes): a restart after "
                      f"retention drops segments rebuilds sessions from the ticks kept", file=sys.stderr, flush=True)


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
