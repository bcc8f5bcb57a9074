"""The data directory's per-item logging (DataDir.items): each accepted ingest item appended to the tick log, framed
by the wire message it came in (``MESSAGE_START`` on its first item, an end record after its last: message_ends.py
says how a restart reads them), the records of streams expired or forgotten, and ticks refused while the tick or
answer log cannot be written: said on stderr at most every REFUSAL_NOTE_S, their spell counted (refusal_spell.py),
and the reason given to `health` (``problem``). engine/service/durability.py owns the directory and its logs."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import msgpack

from connectors.encoder import EncodedTick
from connectors.ticks import counted
from engine.quoting import quoted
from engine.service.answer_log import AnswerLog
from engine.service.log_replay import EXPIRED
from engine.service.message_ends import END_RECORD, ENDS_LOGGED, MESSAGE_START, WHOLE, latched_end
from engine.service.refusal_spell import RefusalSpell
from engine.service.ticklog import FORGOTTEN, LogWriteError, TickLog

REFUSAL_NOTE_S = 10.0  # at most one stderr line this often while the tick log refuses ticks


class ItemLog:
    """Appends a data directory's accepted items to its tick log (see the module docstring)."""

    def __init__(self, log: TickLog, answers: AnswerLog, root: Path) -> None:
        self.log = log
        self.answers = answers
        self.root = root  # named in a refusal
        self.ticks_logged = 0  # since the tick log began, what retention dropped included (segment starts say it)
        self._message_start = False
        # an item of the message being read in is logged and its end record is not: written as message() ends, or,
        # when the disk refused it, before the next record (a restart would drop the message, answered live)
        self._message_open = False
        self._reading = False  # within message(): an item logged is of that message
        self._whole = False  # ... and that message is one item: its start is its end
        # the message being read in: the ticks it lists, the record number of its first logged item, its ticks
        # logged and refused by the log (what a latched end record says: message_ends.LATCHED)
        self._listed, self._first, self._kept, self._log_refused = 0, 0, 0, 0
        self._refusal_said_at = -math.inf  # when stderr last heard that the tick log refuses ticks
        # the latest refusal of a tick since the last one logged: when (monotonic) and why (`health`: degraded)
        self._refused: tuple[float, str] | None = None
        self._refusals = RefusalSpell(root)  # since when ticks are refused, how many: said once accepted again

    @contextmanager
    def message(self, items: int) -> Iterator[None]:
        """A wire message of ``items`` items (connectors.encoder.listed_ticks) is read in within it. Its first
        logged item says it begins (``MESSAGE_START``), so a restart knows where the live run's tick groups ended
        (one per message and stream) and answers owed ticks group by group; after its last, a record says it ended
        (``MESSAGE_END``, however the reading ended: its items logged are the engine's), so a restart tells a whole
        message from one a kill cut short, which it drops (message_ends.py). A message of one item needs none: its
        start says it is whole (``WHOLE``). The end record is one write(2), fsynced as every record is (group: by
        the background thread); a disk that refuses it is tried again before the next record. A log that stopped
        taking appends part way through the message (latched: its directory moved away) still takes its end record,
        which says so: the items logged before were accepted and answered, and are the message a restart books."""
        self._message_start = self._reading = True
        self._whole = items == 1
        self._listed, self._kept, self._log_refused = items, 0, 0
        try:
            yield
        finally:
            self._message_start = self._reading = False
            try:
                if self._message_open and self.log.latched is not None:
                    self.log.append_closing(latched_end(self.log.latched_kind or "refused", self._first,
                                                        self._listed, self._kept, self._log_refused))
                    self._message_open = False
                self._end_owed()
            except LogWriteError:  # said with the next refused tick, if the disk still refuses
                pass

    def _end_owed(self) -> None:
        """The end record of a message whose items are logged, if it is not yet; raises LogWriteError."""
        if self._message_open:
            self.log.append(END_RECORD)
            self._message_open = False

    def log_expired(self, stream: str) -> None:
        """``stream`` expired for idleness here (``EXPIRED``): a restart drops its session at this point of the log
        too, rather than rebuild a stream the live run had forgotten and answer it again. A disk that refuses
        the record costs only that (a restart then rebuilds the stream, as from a log written before this)."""
        try:
            self._end_owed()
            self.log.append(msgpack.packb({EXPIRED: stream}, use_bin_type=True))
        except LogWriteError as e:
            print(f"flashtick: could not log the expiry of stream {quoted(stream)}: {e}", file=sys.stderr, flush=True)

    def log_forgotten(self, stream: str) -> None:
        """``stream`` forgotten here at an operator's request (``FORGOTTEN``): a restart forgets it at this point of
        the log too, its ordering guard included. Raises ticklog.LogWriteError when the disk refuses the record:
        the stream is then not forgotten (a restart would bring its guard back)."""
        self._end_owed()
        self.log.append(msgpack.packb({FORGOTTEN: stream}, use_bin_type=True))

    def append(self, item: EncodedTick) -> None:
        """Log one accepted item; raises ticklog.LogWriteError (nothing logged) when the disk refuses, or while
        the answer log holds answers it could not write (their ticks' answers would go unlogged too)."""
        if self.answers.failing:
            self._log_refused += item.ticks if self._reading else 0  # (log_unavailable too, as the sender reads it)
            self._refusals.refused("answer log", item.ticks)
            self._say_refused(f"the answer log cannot be written ({self.answers.unlogged} answers wait)")
            raise LogWriteError(f"the answer log of {self.root} cannot be written (is the disk full?); ticks are "
                                f"refused until it can")
        record = item.to_record()
        if self._message_start:
            record[MESSAGE_START] = WHOLE if self._whole else ENDS_LOGGED
        try:
            if self._message_start or not self._reading:  # (not within the message being read in)
                self._end_owed()
            number = self.log.append(msgpack.packb(record, use_bin_type=True))
        except LogWriteError as e:  # the sender is told on _rejects/; the operator here, at most every few seconds
            self._refusals.refused("tick log", item.ticks)
            self._say_refused(str(e))
            if not self._reading:
                raise
            self._log_refused += item.ticks
            kept = (f"; {counted(self._kept, 'tick')} of this message before it were accepted (logged, kept at a "
                    f"restart that reads this log)" if self._kept else "")
            raise LogWriteError(f"{e}{kept}") from None
        if self._reading:
            self._first = number if self._message_start else self._first
            self._kept += item.ticks
        self.ticks_logged += item.ticks
        self._refused = None  # (a write succeeded: `health` serving again)
        self._message_open |= self._message_start and not self._whole
        self._message_start = False
        self._refusals.accepted()

    @property
    def problem(self) -> str | None:
        """Why ticks are refused now (the logs cannot be written: `health` says degraded), or None."""
        latched = self.log.latched or self.answers.log.latched
        if latched is not None:
            return f"{latched}: no tick is accepted until the service restarts"
        if self.answers.failing:
            return f"the answer log cannot be written ({self.answers.unlogged} answers wait); ticks refused"
        if self._refused is not None:  # until a tick is logged again: a quiet feed on a full disk is still degraded
            return (f"ticks refused (log_unavailable) since {time.monotonic() - self._refused[0]:.0f} s ago, until a "
                    f"write succeeds again: {self._refused[1]}")
        return None

    def _say_refused(self, why: str) -> None:
        now = time.monotonic()
        self._refused = (now, why)
        if now - self._refusal_said_at >= REFUSAL_NOTE_S:
            self._refusal_said_at = now
            print(f"flashtick: ticks refused (log_unavailable): {why}", file=sys.stderr, flush=True)

    def close(self) -> None:
        """The end record a message still owes, if the disk takes it (a restart drops that message otherwise, as
        one a kill cut short)."""
        try:
            self._end_owed()
        except LogWriteError:
            pass
