"""LogStats: the counters of one log (tick log or answer log), kept apart because its writer (TickLog), its readers
(log_reading.py) and a restart's replay (log_replay.py) each count into it, and `stats.log` reports them all."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class LogStats:
    appended: int = 0
    append_errors: int = 0
    fsyncs: int = 0
    torn_tails: int = 0  # damage at the end of the last segment with nothing valid after it, truncated on read
    corrupt_skipped: int = 0
    corrupt_records: int = 0  # the records that began in the damaged regions skipped (about: a payload may hold one)
    segments_dropped: int = 0  # by retention
    # a replay's: the ticks of its streams that segments retention dropped had held (the first kept segment's start
    # record counts them), which a restart no longer recovers
    ticks_dropped_by_retention: int = 0
    # a replay's: the ticks of messages whose end the log lacks (a kill while one was read in), not booked
    # (message_ends.py): the feed's resend brings them again whole. They stay in the log until retention drops them
    ticks_dropped_unended_message: int = 0
    # ... and of those, the ticks of the message the log ends in (``LogRecord.last``): what the stop before this start
    # cut, which its line says (review402 #3: it said every cut message still in the log, summed, at every start)
    ticks_unended_at_log_end: int = 0
