"""TickSequences: the live service's use of a wire tick's `seq`, the feed's sequence number of its stream's tick. A
pre-tokenized item's `seq` (a connector that tokenizes in its own process numbers its items) is kept the same way,
one numbering per stream whichever form its ticks come in.

Per stream it keeps the last `seq` accepted. A tick whose `seq` is at most that one repeats a tick already taken (a
reconnecting feed's resend, the second copy of an A/B line pair): it is dropped before the ordering guard, counted as
a duplicate (per stream and in total, never as a rejection: nothing is lost, and `ts_backwards` keeps meaning a late
tick) and not counted in `at_last_ts` (it is no tick the feed has not sent before). A `seq` past the last one plus
one is a gap, counted (the numbers missing too; a stream's first said in the service's log) and never waited on:
the tick is taken. A `seq` below the last one at
a `ts` more than RESTARTED_AFTER_NS past the stream's last accepted tick is a venue's numbering begun again (a new
session's trade ids), taken and counted as such, as file replay's --sequence reads a lower number at a later time.

A tick without `seq` is taken as before; one taken at its stream's last `ts` with the values (kind, price, size,
side, quote) of a tick already taken at that `ts` is counted as `repeats_taken` (a resend taken again, or a second
trade that matched the first: the wire cannot tell them apart without `seq`), so the repeats a reconnect or a second
line let through are seen, not silent.

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

from connectors.sequence_watch import RESTAMPED_NS
from connectors.ticks import Tick, utc_text
from engine.quoting import quoted

# A lower `seq` this long after the stream's last accepted tick starts a new numbering rather than repeating one:
# the window file replay's --sequence looks for a restamped resend in (a resend comes minutes after, a venue's
# numbering starts again after a night or a maintenance break)
RESTARTED_AFTER_NS = RESTAMPED_NS
SAID_STREAMS = 5  # the streams with most duplicates or gaps named in `stats`
GAPS_SAID = 20  # the streams whose first gap the service's log says (the rest counted in stats alone)
RUN_VALUES = 64  # the values of a stream's ticks at its last ts kept (a millisecond's trades); more are not compared


def _values(tick: Tick) -> tuple:
    return tick.kind, tick.price, tick.size, tick.side, tick.bid, tick.ask, tick.bid_size, tick.ask_size


class TickSequences:
    """Per stream: the last `seq` accepted, duplicates dropped, gaps and the numbers they miss, numberings begun
    again, and unsequenced repeats taken (see the module docstring)."""

    def __init__(self, notify: Callable[[str], None] | None = None) -> None:
        self.notify = notify  # the service's log: a stream's first gap, for up to GAPS_SAID streams
        self._gaps_said: set[str] = set()
        self.last: dict[str, int] = {}
        self.duplicates: Counter[str] = Counter()
        self.gaps: Counter[str] = Counter()
        self.missing: Counter[str] = Counter()
        self.restarts: Counter[str] = Counter()
        self.repeats_taken: Counter[str] = Counter()
        # each stream's last accepted ts and the values of its raw ticks taken then (unsequenced repeats)
        self._run: dict[str, tuple[int, list[tuple]]] = {}

    def duplicate(self, stream: str, seq: int | None, ts: int, last_ts: int | None, held_seq: int | None = None
                  ) -> bool:
        """Whether a wire item of ``stream`` numbered ``seq`` (a raw tick's or a pre-tokenized item's) and stamped
        ``ts`` repeats a `seq` of its stream already taken (or held aside by conflation, ``held_seq``); ``last_ts``:
        the stream's last accepted ts. A duplicate is counted here; the caller drops it."""
        if seq is None:
            return False
        known = [n for n in (self.last.get(stream), held_seq) if n is not None]
        if not known or seq > max(known):
            return False
        if last_ts is not None and ts - last_ts > RESTARTED_AFTER_NS:
            return False  # a numbering begun again (counted when it is committed)
        self.duplicates[stream] += 1
        return True

    def committed(self, stream: str, tick: Tick | None, previous_ts: int | None, live: bool, ts: int = 0,
                  seq: int | None = None) -> None:
        """A tick of ``stream`` accepted (None: a pre-tokenized item, which has no values, stamped ``ts`` and
        numbered ``seq``, None when it carries none); ``previous_ts``: the stream's last accepted ts before it.
        ``live``: from the wire, so counted."""
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
        if seq is None:
            return
        last = self.last.get(stream)
        if live and last is not None and seq > last + 1:
            self.gaps[stream] += 1
            self.missing[stream] += seq - last - 1
            self._say_gap(stream, last, seq, ts)
        elif live and last is not None and seq <= last:
            self.restarts[stream] += 1
        self.last[stream] = seq

    def _say_gap(self, stream: str, last: int, seq: int, ts: int) -> None:
        """A stream's first gap in the service's log (up to GAPS_SAID streams): ticks a venue link lost."""
        if self.notify is None or stream in self._gaps_said or len(self._gaps_said) >= GAPS_SAID:
            return
        self._gaps_said.add(stream)
        more = "; said for the first gap of each stream, up to 20 streams" if len(self._gaps_said) == GAPS_SAID \
            else ""
        self.notify(f"stream {quoted(stream)}: a gap in its seq, {last} -> {seq} ({seq - last - 1:,} "
                    f"missing) at {utc_text(ts)}: the ticks after it are taken; gaps are counted in stats' "
                    f"seq_gaps and streams' seq_gaps{more}")

    def start_at(self, stream: str, seq: int | None) -> None:
        """A stream restored from a tick log segment's start record (its earlier ticks gone by retention)."""
        if seq is not None:
            self.last[stream] = seq

    def forget(self, stream: str) -> None:
        """An operator's `forget`: the stream's numbering is forgotten with its ordering guard."""
        self.last.pop(stream, None)
        self._run.pop(stream, None)
        for counts in (self.duplicates, self.gaps, self.missing, self.restarts, self.repeats_taken):
            counts.pop(stream, None)

    def of(self, stream: str) -> dict[str, Any]:
        """A stream's figures as `streams` says them."""
        return {"last_seq": self.last.get(stream), "duplicates": self.duplicates[stream],
                "seq_gaps": self.gaps[stream], "seq_missing": self.missing[stream],
                "repeats_taken": self.repeats_taken[stream]}

    def summary(self) -> dict[str, Any]:
        """For `stats` (and /metrics, its top-level ints as counters)."""
        worst = Counter({s: self.duplicates[s] + self.gaps[s] for s in self.duplicates.keys() | self.gaps.keys()})
        return {"duplicates": self.duplicates.total(), "seq_gaps": self.gaps.total(),
                "seq_missing": self.missing.total(), "seq_restarts": self.restarts.total(),
                "repeats_taken": self.repeats_taken.total(),
                "sequence_streams": {s: {"duplicates": self.duplicates[s], "seq_gaps": self.gaps[s],
                                         "seq_missing": self.missing[s]}
                                     for s, _ in worst.most_common(SAID_STREAMS) if worst[s]}}
