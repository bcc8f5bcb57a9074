"""TickSequences: the live service's use of a wire tick's `seq`, the feed's sequence number of its stream's tick. A
pre-tokenized item's `seq` (a connector that tokenizes in its own process numbers its items) is kept the same way,
one numbering per stream whichever form its ticks come in.

Per stream it keeps the last `seq` accepted. A tick whose `seq` is at most that one and whose `ts` is at most the
stream's last accepted `ts` repeats a tick already taken (a reconnecting feed's resend, the second copy of an A/B line
pair): it is dropped before the ordering guard, counted as a duplicate (per stream and in total, never as a
rejection: nothing is lost, and `ts_backwards` keeps meaning a late tick) and not counted in `at_last_ts` (it is no
tick the feed has not sent before). A `seq` past the last one plus one is a gap, counted (the numbers missing too; a
stream's first said in the service's log) and never waited on: the tick is taken. The numbers a stream's recent gaps
skipped are kept (MISSING_KEPT ranges a stream): a tick numbered in one came late, never a repeat, so it meets the
ordering guard as a tick without `seq` does (refused as `ts_backwards`, told to its sender, when stamped before the
stream's last tick) and is counted as `seq_late` (its number was not lost after all), not as a duplicate (review376
#3). A live tick refused before its stream's last number was passed (`seen`: refused, conflated, shed) had its number
received: the next accepted one counts no gap for it (review376 #10). A `seq` at most the last one stamped after the
stream's last accepted tick is a numbering begun again (a feed handler that restarted its per-session counter, a
venue's new session), taken, counted in `seq_restarts` and said in the log for a stream's first (review376 #2: it
was dropped as a duplicate for an hour, silently), unless it says again what a recent tick of its stream numbered
so said (its kind and values), up to an hour earlier: a resend restamped with the time it was sent again (an A/B
line stamped on each line's own receive clock), a duplicate, counted also as `duplicates_restamped` and said in
the log for a stream's first, by the very rule file replay's `sequence` leaves such a resend out by
(connectors/sequence_watch.py RecentTicks; review383 #2: each was taken twice, as a numbering begun again).

A tick without `seq` is taken as before; one taken at its stream's last `ts` with the values (kind, price, size,
side, quote) of a tick already taken at that `ts` is counted as `repeats_taken` (a resend taken again, or a second
trade that matched the first: the wire cannot tell them apart without `seq`), so the repeats a reconnect or a second
line let through are seen, not silent. The unnumbered raw ticks taken recently are kept too (as RecentTicks keeps the
numbered ones: hashes, two generations): a tick refused as `ts_backwards` that says again what one of them said (its
time, kind and values) is a resend of one feed, not a late tick of another clock, and its refusal says so
(``resent_refusal``; review431 #3: a reconnect's resend was said as two clocks interleaving, with advice to set a
reorder window, which then took every resent tick twice).

Feeds that number every instrument's messages with one counter (US SIPs, OPRA channels, TAQ's Sequence Number) set
``scope`` "feed" (`ingest.seq_scope`): a stream's numbers then rise with gaps that are other instruments' ticks, so
gaps and numberings begun again are counted per feed, as the wire identifies a feed (the message's topic frame,
`[TAG, ticks]`: a channel; messages without one are the untagged feed), over every number the feed's ticks brought,
refused, conflated and shed ones included (numbers received are not missing). Repeats are still dropped per stream:
a feed-wide number rises within each stream too, and a stream's last `seq` survives a restart in the tick log, so a
resend after one is still a duplicate. A feed's last number is this process's: after a restart its first tick starts
it again, with no gap counted.

The last `seq` goes into the tick log with its tick (Tick.to_wire; a pre-tokenized item's record holds its own) and
each segment's start record, so a restart
replays it back and a resend after the restart is still a duplicate. The counts are this process's, as
`stats.rejected` is. Counted only for ticks from the wire (`live`), never a tick log's replay. Apart from
connectors/stream_table.py because this is the sequence bookkeeping alone, which the table consults and feeds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from connectors.sequence_watch import RECENT, RESTAMPED_NS, RecentTicks
from connectors.tick_errors import InvalidTick
from connectors.ticks import Tick, utc_text
from engine.quoting import quoted

# A feed-wide number (scope "feed") at most the feed's last, this long after it, starts a new numbering rather than
# repeating one: the window file replay's --sequence looks for a restamped resend in (a resend comes minutes after,
# a venue's numbering starts again after a night or a maintenance break)
RESTARTED_AFTER_NS = RESTAMPED_NS
MISSING_KEPT = 8  # a stream's most recent gaps whose numbers are kept, so a late tick numbered in one is told as late
SAID_STREAMS = 5  # the streams with most duplicates or gaps named in `stats`
GAPS_SAID = 20  # the streams whose first gap the service's log says (the rest counted in stats alone)
SEQ_SCOPES = ("stream", "feed")  # ingest.seq_scope: what one numbering counts, a stream's ticks or a feed's
RUN_VALUES = 64  # the values of a stream's ticks at its last ts kept (a millisecond's trades); more are not compared
# the words a `ts_backwards` refusal of a resent tick ends with (engine/service/stream_refusals.py tells it by them)
RESENT = "it copies a tick its stream took"


def _values(tick: Tick) -> tuple:
    return tick.kind, tick.price, tick.size, tick.side, tick.bid, tick.ask, tick.bid_size, tick.ask_size


def resent_refusal(err: InvalidTick) -> InvalidTick:
    """``err`` (a late tick's `ts_backwards`) said as what it is: an exact copy of a tick its stream took or holds, a
    resend of its feed (a venue reconnect's snapshot), which no reorder window places (review431 #3)."""
    return InvalidTick(err.reason, f"{err.message}; {RESENT} (its ts, kind and values): a resend of its feed, not "
                                   f"a late tick (docs/feed-resume.md: drop what was sent, or send seq)", err.stream)


class TickSequences:
    """Per stream: the last `seq` accepted, duplicates dropped, gaps and the numbers they miss, numberings begun
    again, and unsequenced repeats taken (see the module docstring)."""

    def __init__(self, notify: Callable[[str], None] | None = None, scope: str = "stream") -> None:
        if scope not in SEQ_SCOPES:
            raise ValueError(f"seq scope must be one of {', '.join(map(quoted, SEQ_SCOPES))}, got {quoted(scope)}")
        self.notify = notify  # the service's log: a stream's (or feed's) first gap, for up to GAPS_SAID of them
        self.scope = scope
        self._gaps_said: set[tuple[bool, str]] = set()  # (a feed's?, its name)
        self._restarts_said: set[str] = set()
        self._restamps_said: set[str] = set()
        self.feed = ""  # the feed of the message being read (its topic; "": untagged), told by the reader
        self.feeds = FeedNumbers(self)  # scope "feed": each feed's last number, gaps, numberings begun again
        self.last: dict[str, int] = {}
        self.duplicates: Counter[str] = Counter()
        self.restamped: Counter[str] = Counter()  # of the duplicates, resends at a later ts (RecentTicks)
        self.recent = RecentTicks()  # the numbered raw ticks taken recently: where a restamped resend is found
        self.gaps: Counter[str] = Counter()
        self.missing: Counter[str] = Counter()
        self.late: Counter[str] = Counter()  # numbers a gap skipped that came after all (a late tick)
        self.restarts: Counter[str] = Counter()
        self.repeats_taken: Counter[str] = Counter()
        # each stream's last accepted ts and the values of its raw ticks taken then (unsequenced repeats)
        self._run: dict[str, tuple[int, list[tuple]]] = {}
        # hashes of the unnumbered raw ticks taken recently, (stream, ts, values): a resend refused is told by them;
        # two generations of up to RECENT, the older dropped whole when the newer fills (as RecentTicks)
        self._unnumbered: set[int] = set()
        self._unnumbered_older: set[int] = set()
        # scope "stream": the numbers each stream's recent gaps skipped that have not come yet, and the highest
        # number of a live tick refused above its stream's last (received: no gap for it)
        self._skipped = SkippedNumbers()
        self._received: dict[str, int] = {}

    def duplicate(self, stream: str, seq: int | None, ts: int, last_ts: int | None, held_seq: int | None = None,
                  held_ts: int | None = None, tick: Tick | None = None) -> bool:
        """Whether a wire item of ``stream`` numbered ``seq`` (a raw tick's, ``tick``, or a pre-tokenized item's)
        and stamped ``ts`` repeats a `seq` of its stream already taken (or held aside by conflation, ``held_seq``
        stamped ``held_ts``); ``last_ts``: the stream's last accepted ts. A duplicate is counted here; the caller
        drops it. A number a gap skipped is a late tick's, and one stamped after every tick taken starts a numbering
        again unless its tick says again what a recent one so numbered said (a restamped resend): neither repeats a
        tick, so neither is a duplicate (the module docstring)."""
        if seq is None:
            return False
        known = [n for n in (self.last.get(stream), held_seq) if n is not None]
        if not known or seq > max(known):
            return False
        if self._skipped.at(stream, seq) if self.scope == "stream" else self.feeds.skipped.at(self.feed, seq):
            return False  # a late tick: its ordering guard decides (ts_backwards, told to its sender)
        newest = max((t for t in (last_ts, held_ts) if t is not None), default=None)
        if newest is not None and ts > newest:
            if tick is None or not self.recent.restamped(tick, seq):
                return False  # a numbering begun again (counted when it is committed)
            self.restamped[stream] += 1
            self._say_restamped(stream, seq, ts)
        self.duplicates[stream] += 1
        return True

    def committed(self, stream: str, tick: Tick | None, previous_ts: int | None, live: bool, ts: int = 0,
                  seq: int | None = None) -> None:
        """A tick of ``stream`` accepted (None: a pre-tokenized item, which has no values, stamped ``ts`` and
        numbered ``seq``, None when it carries none); ``previous_ts``: the stream's last accepted ts before it.
        ``live``: from the wire, so counted (a tick log's replay keeps the numbers alone, deciding as the live
        service did: the same ticks in the same order)."""
        if tick is None:
            self._run.pop(stream, None)
        else:
            ts, seq = tick.ts, tick.seq
            values = _values(tick)
            run = self._run.get(stream)
            if run is None or run[0] != tick.ts or previous_ts != tick.ts:
                run = self._run[stream] = (tick.ts, [])
            if seq is None and live and values in run[1]:
                self.repeats_taken[stream] += 1
            if len(run[1]) < RUN_VALUES:
                run[1].append(values)
            if seq is not None:
                self.recent.remember(tick, seq)
            else:
                self._unnumbered.add(hash((stream, ts, values)))
                if len(self._unnumbered) >= RECENT:
                    self._unnumbered_older, self._unnumbered = self._unnumbered, set()
        if seq is None:
            return
        if self.scope == "feed":  # repeats per stream (below), gaps per feed
            late = live and self.feeds.numbered(seq, ts)
            if not late or self.last.get(stream, -1) < seq:  # (a late one keeps the stream's last number)
                self.last[stream] = seq
            return
        last = self.last.get(stream)
        if last is not None and seq > last:
            received = self._received.get(stream)
            if received is not None and received <= seq:
                del self._received[stream]
            top = last if received is None else max(last, received)
            if seq > top + 1:
                self._skipped.skip(stream, top + 1, seq - 1)
                if live:
                    self.gaps[stream] += 1
                    self.missing[stream] += seq - top - 1
                    self._say_gap(stream, top, seq, ts)
        elif last is not None and self._came_late(stream, seq, live):
            return  # (the stream's last number stays: this one filled a gap behind it)
        elif last is not None:
            self._skipped.drop(stream)  # (a numbering begun again: the old one's gaps are no longer awaited)
            self._received.pop(stream, None)
            if live:
                self.restarts[stream] += 1
                self._say_restart(stream, last, seq, ts)
        self.last[stream] = seq

    def resent(self, tick: Tick) -> bool:
        """Whether ``tick`` (unnumbered) says again what a recent unnumbered tick of its stream taken at its time said:
        refused as late, it is a resend (the module docstring)."""
        key = hash((tick.stream, tick.ts, _values(tick)))
        return key in self._unnumbered or key in self._unnumbered_older

    def seen(self, stream: str | None, seq: int | None, ts: int) -> None:
        """A live tick of ``stream`` numbered ``seq`` was taken off the wire and not accepted (refused, conflated,
        shed): its number was received all the same, so no gap is counted for it (under scope "feed", in its feed;
        else in its stream, where a number a gap skipped counts as late)."""
        if seq is None:
            return
        if self.scope == "feed":
            self.feeds.numbered(seq, ts)
            return
        last = self.last.get(stream) if stream is not None else None
        if last is None:
            return
        if seq > last:
            self._received[stream] = max(seq, self._received.get(stream, seq))
        else:
            self._came_late(stream, seq, True)

    def _came_late(self, stream: str, seq: int, live: bool) -> bool:
        """Whether ``seq`` is a number one of ``stream``'s gaps skipped: then it is no longer awaited, and a live one
        is counted as late (seq_late)."""
        if not self._skipped.fill(stream, seq):
            return False
        if live:
            self.late[stream] += 1
        return True

    def _say_restart(self, stream: str, last: int, seq: int, ts: int) -> None:
        """A stream's first numbering begun again in the service's log (up to GAPS_SAID streams)."""
        if self.notify is None or stream in self._restarts_said or len(self._restarts_said) >= GAPS_SAID:
            return
        self._restarts_said.add(stream)
        self.notify(f"stream {quoted(stream)}: its seq went back, {last} -> {seq}, on a tick stamped after its last "
                    f"one ({utc_text(ts)}): taken as a numbering begun again (a feed handler whose counter started "
                    f"again), counted in streams' seq_restarts; a resend, at the ts it first had or later with its "
                    f"values, is dropped as a duplicate")

    def _say_restamped(self, stream: str, seq: int, ts: int) -> None:
        """A stream's first restamped resend in the service's log (up to GAPS_SAID streams)."""
        if self.notify is None or stream in self._restamps_said or len(self._restamps_said) >= GAPS_SAID:
            return
        self._restamps_said.add(stream)
        self.notify(f"stream {quoted(stream)}: seq {seq} again, stamped later ({utc_text(ts)}) with the kind and "
                    f"values it had: a resend restamped (an A/B line on its own receive clock), dropped as a "
                    f"duplicate as file replay's sequence leaves it out; counted in stats' duplicates_restamped")

    def _say_gap(self, stream: str, last: int, seq: int, ts: int, feed: bool = False) -> None:
        """A stream's (or feed's) first gap in the service's log (up to GAPS_SAID of them): ticks a link lost."""
        if self.notify is None or (feed, stream) in self._gaps_said or len(self._gaps_said) >= GAPS_SAID:
            return
        self._gaps_said.add((feed, stream))
        whose = ("streams", "stream") if not feed else ("feeds", "feed")
        more = f"; said for the first gap of each {whose[1]}, up to 20 {whose[0]}" \
            if len(self._gaps_said) == GAPS_SAID else ""
        name = (f"feed {quoted(stream)}" if stream else "the untagged feed") if feed else f"stream {quoted(stream)}"
        where = "stats' seq_gaps and sequence_feeds" if feed else "stats' seq_gaps and streams' seq_gaps"
        self.notify(f"{name}: a gap in its seq, {last} -> {seq} ({seq - last - 1:,} "
                    f"missing) at {utc_text(ts)}: the ticks after it are taken; gaps are counted in {where}{more}")

    def start_at(self, stream: str, seq: int | None) -> None:
        """A stream restored from a tick log segment's start record (its earlier ticks gone by retention)."""
        if seq is not None:
            self.last[stream] = seq

    def forget(self, stream: str) -> None:
        """An operator's `forget`: the stream's numbering is forgotten with its ordering guard."""
        self.last.pop(stream, None)
        self._run.pop(stream, None)
        self._skipped.drop(stream)
        self._received.pop(stream, None)
        # (its recent ticks stay among RecentTicks', bounded: dropping them would scan every stream's at each
        # expired stream forgotten, and a later tick saying again what one of them said is still its resend)
        for counts in (self.duplicates, self.restamped, self.gaps, self.missing, self.late, self.restarts,
                       self.repeats_taken):
            counts.pop(stream, None)

    def of(self, stream: str) -> dict[str, Any]:
        """A stream's figures as `streams` says them."""
        return {"last_seq": self.last.get(stream), "duplicates": self.duplicates[stream],
                "duplicates_restamped": self.restamped[stream], "seq_gaps": self.gaps[stream],
                "seq_missing": self.missing[stream], "seq_late": self.late[stream],
                "seq_restarts": self.restarts[stream], "repeats_taken": self.repeats_taken[stream]}

    def summary(self) -> dict[str, Any]:
        """For `stats` (and /metrics, its top-level ints as counters)."""
        worst = Counter({s: self.duplicates[s] + self.gaps[s] for s in self.duplicates.keys() | self.gaps.keys()})
        feeds = self.feeds
        return {"duplicates": self.duplicates.total(), "duplicates_restamped": self.restamped.total(),
                "seq_gaps": self.gaps.total() + feeds.gaps.total(),
                "seq_missing": self.missing.total() + feeds.missing.total(),
                "seq_late": self.late.total() + feeds.late.total(),
                "seq_restarts": self.restarts.total() + feeds.restarts.total(),
                "repeats_taken": self.repeats_taken.total(),
                **({"seq_scope": "feed", "sequence_feeds": feeds.summary()} if self.scope == "feed" else {}),
                "sequence_streams": {s: {"duplicates": self.duplicates[s], "seq_gaps": self.gaps[s],
                                         "seq_missing": self.missing[s]}
                                     for s, _ in worst.most_common(SAID_STREAMS) if worst[s]}}


FEEDS_SAID = 20  # the feeds of most gaps in `stats`' sequence_feeds


class FeedNumbers:
    """Scope "feed": each feed's last number (and the ts that brought it), its gaps, the numbers they skipped and
    its numberings begun again, counted over every number its live ticks brought (TickSequences.committed and
    .seen), keyed by the feed of the message being read (TickSequences.feed)."""

    def __init__(self, sequences: TickSequences) -> None:
        self.sequences = sequences
        self.last: dict[str, tuple[int, int]] = {}  # feed -> (its highest number seen, that tick's ts)
        self.gaps: Counter[str] = Counter()
        self.missing: Counter[str] = Counter()
        self.restarts: Counter[str] = Counter()
        self.late: Counter[str] = Counter()  # numbers a gap skipped that came after all
        self.skipped = SkippedNumbers()  # the numbers each feed's recent gaps skipped, not come yet

    def numbered(self, seq: int, ts: int) -> bool:
        """A live tick numbered ``seq`` taken off the wire (accepted or not) from the feed being read; True when its
        number is one a gap skipped (a late tick, counted as such)."""
        feed = self.sequences.feed
        last = self.last.get(feed)
        if last is not None and seq <= last[0]:
            if self.skipped.fill(feed, seq):
                self.late[feed] += 1
                return True
            if ts - last[1] <= RESTARTED_AFTER_NS:
                return False  # a number already passed (a line's second copy, a stream's resend): no gap, no restart
            self.restarts[feed] += 1  # a numbering begun again (the next session's)
            self.skipped.drop(feed)
        elif last is not None and seq > last[0] + 1:
            self.gaps[feed] += 1
            self.missing[feed] += seq - last[0] - 1
            self.skipped.skip(feed, last[0] + 1, seq - 1)
            self.sequences._say_gap(feed, last[0], seq, ts, feed=True)
        self.last[feed] = (seq, ts)
        return False

    def summary(self) -> dict[str, dict[str, int]]:
        """Each feed's figures (the FEEDS_SAID of most gaps), for `stats`' sequence_feeds; "" is the untagged
        feed."""
        feeds = sorted(self.last, key=lambda f: (-self.gaps[f], f))[:FEEDS_SAID]
        return {feed: {"last_seq": self.last[feed][0], "seq_gaps": self.gaps[feed],
                       "seq_missing": self.missing[feed], "seq_restarts": self.restarts[feed]} for feed in feeds}


class SkippedNumbers:
    """Per stream (or feed): the [first, last] ranges of numbers its MISSING_KEPT most recent gaps skipped that have
    not come yet, so a tick numbered in one reads as late, not as a repeat (an older gap's numbers read as repeats,
    as before any was kept)."""

    def __init__(self) -> None:
        self._ranges: dict[str, list[list[int]]] = {}

    def at(self, key: str, seq: int) -> bool:
        """Whether a gap of ``key`` skipped ``seq`` (and it has not come since)."""
        return self._index(key, seq) is not None

    def skip(self, key: str, first: int, last: int) -> None:
        ranges = self._ranges.setdefault(key, [])
        ranges.append([first, last])
        del ranges[:-MISSING_KEPT]

    def fill(self, key: str, seq: int) -> bool:
        """``seq`` came: no longer awaited. False when no kept gap of ``key`` skipped it."""
        index = self._index(key, seq)
        if index is None:
            return False
        ranges = self._ranges[key]
        first, last = ranges.pop(index)
        ranges[index:index] = [r for r in ([first, seq - 1], [seq + 1, last]) if r[0] <= r[1]]
        if not ranges:
            del self._ranges[key]
        return True

    def drop(self, key: str) -> None:
        self._ranges.pop(key, None)

    def _index(self, key: str, seq: int) -> int | None:
        for index, (first, last) in enumerate(self._ranges.get(key, ())):
            if first <= seq <= last:
                return index
        return None
