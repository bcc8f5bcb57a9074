"""The tick log replayed onto sessions: every logged item re-fed through the stream encoders (codec state and
ordering guards come back) and booked on a ReplayTarget without being computed, each expiry, forget and retention
start applied where the live run had it (replay_log, split_log). A restart uses it (DataDir.replay), and so does a
shard restarted or a stream moved (DataDir.read_items). The tick log's own records this reads beside the ticks:
EXPIRED here (DataDir writes it), MESSAGE_START and MESSAGE_END in message_ends.py (the items of a message a kill cut
short are not booked), SEGMENT_START, LOGGED and FORGOTTEN in ticklog.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import msgpack

from connectors.encoder import PASSED, EncodedTick, StreamEncoders
from connectors.ticks import InvalidTick, Tick, validate
from engine.scheduler import AdmissionRefused
from engine.service.log_read_progress import LogReadProgress
from engine.service.log_reading import first_record, read
from engine.service.log_stats import LogStats
from engine.service.message_ends import MESSAGE_START, item_ticks, whole_messages
from engine.service.ticklog import FORGOTTEN, LOGGED, SEGMENT_START

EXPIRED = "expired"  # a tick log record of its own, {expired: stream}: the live run expired the stream here


class ReplayTarget(Protocol):
    """Where a tick log replay (split_log) puts what the log holds: one engine's scheduler (TickPipeline), or a
    sharded front door's restores (one per shard)."""

    def restore(self, item: EncodedTick) -> None:
        """Book ``item`` on its stream without computing it (Scheduler.restore); AdmissionRefused if the limits
        changed since it was logged."""

    def start_at(self, stream: str, ticks: int, last_ts: int, booked: Any = None) -> None:
        """``stream`` had ``ticks`` ticks (the last at ``last_ts``) in segments retention dropped; ``booked``: its
        session then (Scheduler.booked), when the log kept it."""

    def drop(self, stream: str) -> None:
        """The live run expired ``stream`` for idleness here: its KV goes, its context is kept (kept_contexts.py)."""

    def context_gone(self, stream: str) -> None:
        """``stream`` expired in segments retention dropped: only its ordering guard is left, so its next tick
        starts a new context, whose answers say so (``context_reset``)."""

    def forget(self, stream: str) -> None:
        """An operator had ``stream`` forgotten here: as ``drop``, and the refusals of its items this replay
        counted go too (a forgotten stream reads as never seen after the restart, whatever the limits)."""


class TailPoints(Protocol):
    """Where each stream's tail begins (owed_answers.TailStarts, or a dict of exact points)."""

    def get(self, stream: str) -> tuple[int, int | None] | None:
        """(tick count, event time of the tick reaching it; None: the first item reaching the count), or None:
        the stream is booked whole."""


class Replayed(NamedTuple):
    """What replay_log read."""

    ticks: int  # replayed
    refused: int  # items refused
    logged: int  # the ticks of every item read, refused or not (of every stream, whatever ``streams`` says)
    # the ticks logged before the first record read (0: it is the log's first), from its segment start; None when
    # the log does not say (retention dropped segments of a log written before segment starts had LOGGED)
    before: int | None


def logged_before(number: int, record: dict[str, Any]) -> int | None:
    """The ticks logged before record ``number``, the first the log still holds: 0 when it is the log's first, else
    what it says as a segment's start; None when it does not say (a log written before segment starts had LOGGED)."""
    return 0 if number == 0 else record.get(LOGGED) if SEGMENT_START in record else None


def dropped_by_retention(directory: Path) -> int | None:
    """The ticks retention has dropped of the tick log in ``directory`` so far, every segment it dropped since the log
    began: those logged before its oldest segment (reading that segment's start record alone); None when the log does
    not say."""
    first = first_record(directory)
    return None if first is None else logged_before(first[0], msgpack.unpackb(first[1], raw=False))


def replay_log(directory: Path, encoders: StreamEncoders, book: Callable[[EncodedTick], None], *,
               skip_corrupt: bool, stats: LogStats, streams: set[str] | None = None, upto: int | None = None,
               message_start: Callable[[], None] | None = None, expire: Callable[[str], None] | None = None,
               segment_start: Callable[[dict[str, list[int]]], None] | None = None,
               forget: Callable[[str], None] | None = None,
               latched: Callable[[dict[str, Any]], None] | None = None,
               progress: LogReadProgress | None = None) -> Replayed:
    """Logged items (records before ``upto``; of ``streams`` only, when given) through ``encoders`` to ``book``.
    A refusal (InvalidTick) is counted, never fatal. ``message_start`` is called before each record that began a
    wire message, ``expire`` at each stream's expiry (a log written before those were recorded has neither),
    ``forget`` where an operator had the stream forgotten (without it, the encoders forget it, ordering guard
    included). The items of a message whose end the log lacks (message_ends.py: a kill while it was read in) are
    not booked: counted in ``stats.ticks_dropped_unended_message`` (and in ``logged``: they were logged; those of
    the message the log ends in in ``ticks_unended_at_log_end`` too); those of one
    the log stopped taking part way through (its directory moved away) are, and ``latched`` hears of it."""
    ticks = refused = logged = 0
    before: int | None = None
    first = True
    for number, record, unended, last in whole_messages(_decoded(directory, skip_corrupt, stats, upto, progress),
                                                        latched):
        if first:  # the log's first record, or the first kept segment's start
            first = False
            before = logged_before(number, record)
        if unended:  # nothing of it was answered or told the feed, which sends it again whole
            if SEGMENT_START not in record:  # (a roll inside it: its counts hold the cut items)
                logged += item_ticks(record)
                stats.ticks_dropped_unended_message += item_ticks(record)
                stats.ticks_unended_at_log_end += item_ticks(record) if last else 0
            continue
        if EXPIRED in record:
            if expire is not None and (streams is None or record[EXPIRED] in streams):
                expire(record[EXPIRED])
            continue
        if FORGOTTEN in record:
            if streams is None or record[FORGOTTEN] in streams:
                (forget or encoders.forget)(record[FORGOTTEN])
            continue
        if SEGMENT_START in record:
            if segment_start is not None:
                segment_start(record[SEGMENT_START])
            continue
        if message_start is not None and record.get(MESSAGE_START):
            message_start()
        tick = record.get("tick")
        logged += 1 if tick is not None else record["tokenized"]["ticks"]
        if streams is not None and (tick or record["tokenized"])["stream"] not in streams:
            continue
        if record.get(PASSED):  # ticks the live run refused or conflated just before it, counted in at_last_ts
            item = tick or record["tokenized"]
            encoders.note_passed(item["stream"], item["ts"], record[PASSED])
        if tick is not None:
            try:
                encoders.ingest(logged_tick(tick), book)
                ticks += 1
            except InvalidTick:  # accepted once, so not expected
                refused += 1
        else:
            done = encoders.ingest_tokenized(msgpack.packb([record["tokenized"]]), book)
            ticks += done.ticks
            refused += len(done.rejections)
    return Replayed(ticks, refused, logged, before)


def _decoded(directory: Path, skip_corrupt: bool, stats: LogStats, upto: int | None,
             progress: LogReadProgress | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """The tick log's records before ``upto`` (all: None), decoded (``progress`` hears of each)."""
    for number, payload in read(directory, skip_corrupt=skip_corrupt, stats=stats):
        if upto is not None and number >= upto:
            return
        if progress is not None:
            progress.read(len(payload))
        yield number, msgpack.unpackb(payload, raw=False)


class SplitLog(NamedTuple):
    """What split_log read and booked."""

    ticks: int  # replayed
    refused: int  # items refused
    tail: list[EncodedTick | None]  # past each stream's answered point
    logged: int  # the ticks logged since the log began, those retention dropped included
    # of ``ticks``, those of sessions an expiry dropped (the streams held have the others), and of how many streams
    expired_ticks: int = 0
    expired_streams: int = 0


def split_log(directory: Path, encoders: StreamEncoders, target: ReplayTarget,
              answered: TailPoints | None, *, skip_corrupt: bool, stats: LogStats,
              streams: set[str] | None = None, upto: int | None = None,
              latched: Callable[[dict[str, Any]], None] | None = None,
              progress: LogReadProgress | None = None) -> SplitLog:
    """Replay the tick log (records before ``upto``; of ``streams`` only, when given) through ``encoders`` onto
    ``target``: each item booked without being computed (token logs and rolls end exactly as the live run's
    did), each expiry and retention start applied where the live run had it. ``stats`` counts the ticks
    retention dropped (``ticks_dropped_by_retention``).

    ``answered``: each stream's answered point (tick count, event time of that tick). The live run had
    computed every tick up to it; the items after it are not booked but returned as the tail, in log order,
    with None where a wire message began: the caller computes them as the live run would have, a tick group at
    a time (answer_tail), and so answers every group the stopped process owed. A stream whose point is not a
    logged item of that time (the log's retention dropped its start) is booked whole. A point without an event
    time (a query's registration) is reached by the first item at that count, or before the first item at 0;
    where the stream then expires (or is forgotten), that was an earlier session: its items are booked after
    all, and the next session looks for the point again.

    Where the live run expired a stream for idleness, the stream is dropped here too (its ordering guard stays,
    as live); where an operator had it forgotten, so is its guard, and its items up to there count neither as
    replayed nor as refused. A stream whose first ticks retention dropped counts on from where the live run was."""
    split = _LogSplit(encoders, target, answered, streams)
    read = replay_log(directory, encoders, split.book, skip_corrupt=skip_corrupt, stats=stats, streams=streams,
                      upto=upto, message_start=split.message_start, expire=split.expire,
                      segment_start=split.start, forget=split.forget, latched=latched, progress=progress)
    # a log written before LOGGED: the streams' counts at the first kept start, which miss a stream expired before it
    dropped = read.before if read.before is not None else split.started
    stats.ticks_dropped_by_retention += dropped
    expired = [ticks for ticks in split.expired_at.values() if ticks]
    return SplitLog(read.ticks - split.taken[0] - split.late[0], read.refused - split.taken[1] + split.late[1],
                    split.tail_items(), dropped + read.logged, sum(expired), len(expired))


_TAKEN: Any = object()  # a tail item an expiry or forget took back (_LogSplit._take_tail)


class _LogSplit:
    """What one split_log keeps as it reads: each stream's answered point until reached, the tail past it, and
    what expiries and forgets take back of the counts. Its methods are the callbacks replay_log calls."""

    def __init__(self, encoders: StreamEncoders, target: ReplayTarget, answered: TailPoints | None,
                 streams: set[str] | None) -> None:
        self.encoders, self.target, self.answered, self.streams = encoders, target, answered, streams
        self.pending: dict[str, tuple[int, int | None] | None] = {}  # each stream's point until reached (None: none)
        self.counted: dict[str, int] = {}
        self.owed: set[str] = set()  # streams past their answered point: their items go to the tail
        self.tail: list[EncodedTick | None] = []  # (an item taken back out of it is _TAKEN: tail_items leaves it out)
        # stream -> where its items are in ``tail``: an expiry or forget takes a stream's items back without a pass
        # over the whole tail (a log whose every stream expired made that pass an expiry: 21 s of a 3,000-stream
        # restart, review380 #6)
        self._tail_at: dict[str, list[int]] = {}
        self.seen: set[str] = set()  # streams this replay has items (or a start) of
        # the ticks segment starts count of the streams first met there (a log without LOGGED: dropped)
        self.started = 0
        # stream -> [ticks replayed, items refused] since the log began or its last forget: what a forget takes back
        self.placed: dict[str, list[int]] = {}
        self.taken = [0, 0]  # ... the sums of what the forgets took back
        # stream -> its ticks in ``placed`` at its last expiry: none of them is held
        self.expired_at: dict[str, int] = {}
        # stream -> the event time of its last item admission refused (a limit lowered since): its ordering guard if
        # the live run then expired it (the encoders, which a refusal leaves as they were, hold none of those ticks)
        self.refused_ts: dict[str, int] = {}
        self.late = [0, 0]  # tail items booked after all (an earlier session's) that admission refused: ticks, items
        self.booked_ts: dict[str, int] = {}  # the event time of the last item booked of each stream with a point

    def point_of(self, stream: str) -> tuple[int, int | None] | None:
        if stream not in self.pending:
            self.pending[stream] = None if self.answered is None else self.answered.get(stream)
        return self.pending[stream]

    def reached(self, stream: str, point: tuple[int, int | None]) -> bool:
        """Whether ``stream``'s items booked so far reach ``point``: an answer's (count and time) exactly; a
        registration's (count alone) once its count is reached, which a stream counting on past an expiry (its
        context kept) may have passed already when it looks for the point again: reached at its next item."""
        counted = self.counted.get(stream, 0)
        if (counted != point[0] if point[1] is not None else counted < point[0]) or \
                point[1] not in (None, self.booked_ts.get(stream)):
            return False
        self.owed.add(stream)
        self.pending[stream] = None
        return True

    def start(self, counts: dict[str, list[Any]]) -> None:
        """A segment's start: the streams first met here had records in segments retention dropped; they
        go on counting ticks (and guarding order) from where the live run was, not from 0, with its codec state
        and session (where the record has them: logs of earlier versions hold counts only)."""
        for stream, (ticks, last_ts, *kept) in counts.items():
            if stream in self.seen or (self.streams is not None and stream not in self.streams):
                continue
            self.seen.add(stream)
            state, booked, at_last_ts, last_seq = (kept + [None] * 4)[:4]  # (older logs: fewer of them)
            self.encoders.start_at(stream, ticks, last_ts, state, at_last_ts, last_seq)
            if ticks:
                self.target.start_at(stream, ticks, last_ts, booked)
                self.counted[stream] = ticks
                self.started += ticks
            else:
                self.target.context_gone(stream)

    def book(self, item: EncodedTick) -> None:
        self.seen.add(item.stream)
        counts = self.placed.setdefault(item.stream, [0, 0])
        point = None if item.stream in self.owed else self.point_of(item.stream)
        if point is not None and point[1] is None and self.reached(item.stream, point):
            point = None  # a registration's count, reached before this item (0: before the stream's first)
        if item.stream in self.owed:
            self._tail_at.setdefault(item.stream, []).append(len(self.tail))
            self.tail.append(item)
            counts[0] += item.ticks
            return
        self.place(item)
        counts[0] += item.ticks
        if point is not None:  # (an earlier session of the stream, before an expiry, may pass the count first)
            self.counted[item.stream] = self.counted.get(item.stream, 0) + item.ticks
            self.booked_ts[item.stream] = item.ts
            self.reached(item.stream, point)

    def place(self, item: EncodedTick) -> None:
        try:
            self.target.restore(item)
        except AdmissionRefused as e:  # the limits changed since: counted, never fatal
            self.placed[item.stream][1] += 1  # (replay_log counts one refusal per item refused)
            self.refused_ts[item.stream] = item.ts
            raise InvalidTick("stream_refused", str(e), item.stream) from None

    def earlier_session(self, stream: str, kept: bool) -> None:
        """``stream`` expires: its tail items so far are booked after all (the live run had computed them: an expiry
        waits for a stream's data). Its context kept (``kept``), its answered point was reached in the session that
        goes on (its count, and its latest answers, are kept with it): its next items are still owed. Kept none, a
        point reached before it was in an earlier session (a registration's count, which any session may reach),
        and the next session looks for the point again."""
        self.pending.pop(stream, None)
        if stream not in self.owed:
            return
        if not kept:
            self.owed.discard(stream)
        mine = self._take_tail(stream)
        for item in mine:
            try:
                self.place(item)
            except InvalidTick:  # counted as replayed when it went to the tail: refused instead
                self.placed[stream][0] -= item.ticks
                self.late[0] += item.ticks
                self.late[1] += 1

    def expire(self, stream: str) -> None:
        """The later event wins: a stream whose items were refused here and that the live run then expired reads
        expired (its guard at its last tick, as live) where the target held a session of it then (target.drop takes
        the refusals back); one the target never admitted stays refused (target.drop keeps it). Its context and
        tick count are kept (scheduler.expired_streams_kept > 0: engine/kept_contexts.py), so its answered point
        counts on across the expiry (a point reached before it was that session's, whose owed items are booked
        here so the expiry frees its slot as live); kept none, its next session counts afresh."""
        kept = self.encoders.expired_kept > 0
        self.earlier_session(stream, kept)
        self.target.drop(stream)
        self.encoders.drop(stream)
        refused = self.refused_ts.pop(stream, None)
        held = self.encoders.accepted([stream])[stream]
        if refused is not None and (held is None or held["last_ts"] is None or held["last_ts"] < refused):
            self.encoders.start_at(stream, 0, refused)  # (ticks 0: only its guard; how many at that ts unknown)
        if not kept:
            self.counted.pop(stream, None)  # the answered point counts the session after the last expiry
        if stream in self.placed:
            self.expired_at[stream] = self.placed[stream][0]

    def forget(self, stream: str) -> None:
        """As an expiry, and its ordering guard goes too; what the live run had not computed of it was dropped.
        Its items so far are taken back from the counts: a restart's "recovered N ticks" and its refusals (a
        limit lowered since) are of the streams it holds, not of one the operator dropped."""
        self.pending.pop(stream, None)  # the next session looks for its point again
        self.target.forget(stream)
        self.encoders.forget(stream)  # (not drop: the guard goes too)
        self.refused_ts.pop(stream, None)
        self.counted.pop(stream, None)
        ticks, refused = self.placed.pop(stream, (0, 0))
        self.expired_at.pop(stream, None)
        self.taken[0] += ticks
        self.taken[1] += refused
        self.owed.discard(stream)
        self._take_tail(stream)

    def _take_tail(self, stream: str) -> list[EncodedTick]:
        """``stream``'s items taken back out of the tail, in log order."""
        mine = []
        for at in self._tail_at.pop(stream, ()):
            mine.append(self.tail[at])
            self.tail[at] = _TAKEN
        while self.tail and self.tail[-1] is _TAKEN:  # (so message_start sees the last item left)
            self.tail.pop()
        return mine

    def tail_items(self) -> list[EncodedTick | None]:
        """The tail, in log order, with None where a wire message began."""
        return [item for item in self.tail if item is not _TAKEN]

    def message_start(self) -> None:
        if self.tail and self.tail[-1] is not None:  # (runs of message starts of no tail item are one boundary)
            self.tail.append(None)


def logged_tick(record: dict[str, Any]) -> Tick:
    """A logged tick back as the Tick it was: the log holds ``Tick.to_wire()`` of a tick validated when it was
    accepted (and each record's checksum), so it is rebuilt as it is: reading a 200,000-tick log through the
    encoders took 1.40 s instead of 1.88 s validating every tick again (session 11); a record that is not one
    (written otherwise) is validated as a wire tick is."""
    try:
        return Tick(**record)
    except TypeError:
        return validate(record, zero_bid_is_price=True)  # (accepted when logged, whatever limits.zero_bid says now)
