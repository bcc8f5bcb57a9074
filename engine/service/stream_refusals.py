"""Refused ticks by stream and reason (review323 #11: which stream lost ticks was kept nowhere but the transient
`_rejects/` topic), and the warning of a stream whose ticks are refused as late at a rate that means two clocks
interleave on it (review323 #6: two venues' feeds under one name lost 46% of their ticks live without a log line).

The counts are kept for the STREAMS_KEPT streams refused most (a new one past them takes the least refused one's
place, whose counts join ``other``), so a flood of names costs bounded memory; `streams` shows a stream's own
(`rejected`), `stats` the most refused (`rejected_streams`) and /metrics the top STREAMS_SAID with the rest summed
under `stream="_other"`. The interleave check runs at each heartbeat: a stream with at least LATE_MIN ticks refused
as `ts_backwards` since the last one, and at least `ingest.late_share_warn` of its ticks, is said in the log (at most
every WARN_EVERY_S) and in `health`'s `warnings` for WARNING_KEPT_S, naming `ingest.reorder_window_ms`; the warning
says its window as UTC times (from its first late tick counted to the check), which stays true however late
`health` is read.

A tick refused more than STEP_BACK_NS behind its stream's last one is a clock jump or a stale message: when none of
the stream's ticks is taken after it (looked at again at the next check, so a tick late at the end of one is not
judged alone) its feed's clock stepped back, said as such in the log and `health` with `flashtick forget`; when its
later ticks are taken it was one stray tick (or a few: a replayed or stale message), said once in the log with
nothing to do (review411 #2: one tick an hour late was said as a clock stepped back whose every tick is refused,
with advice to `forget` a healthy stream).

A tick refused as an exact copy of one its stream took (connectors/tick_sequences.py RESENT: a reconnect's resend
without `seq`) is neither: it is counted apart from the late ones and said at the check as its feed's resend, with the
resume recipe that stops it (review431 #3: a resend was said as two clocks interleaving, with a reorder window to set).
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from typing import Any, Callable

from connectors.tick_sequences import RESENT
from connectors.ticks import utc_text
from engine.quoting import quoted
from engine.service.config_ingest import MAX_REORDER_WINDOW_MS
from engine.service.log_lines import named_few

STREAMS_KEPT = 64  # streams whose refusals are counted one by one
STREAMS_SAID = 10  # the most refused, in `stats` (rejected_streams) and /metrics (flashtick_rejected_by_stream_total)
OTHER = "_other"  # the label (and `stats` key) of every other stream's refusals summed (no stream starts with '_')
LATE_MIN = 10  # ts_backwards refusals between two heartbeats before a stream's share of them is looked at
WARN_EVERY_S = 10.0
WARNING_KEPT_S = 600.0  # health says an interleaving stream this long after it was last seen so
# ticks refused this far behind their stream's last accepted one are a clock jump (its feed's clock stepped back, a
# tick stamped ahead), not two clocks interleaving: past what a reorder window can hold (MAX_REORDER_WINDOW_MS)
STEP_BACK_NS = int(MAX_REORDER_WINDOW_MS * 1e6)
_BACKWARDS = re.compile(r"ts (-?\d+) \(.*?\) < previous (-?\d+)")  # connectors/tick_times.py check_order's words


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 5400 else f"{seconds / 60:.1f} min"


class StreamRefusals:
    """One service's refused ticks, by stream and reason, and its late-tick warnings."""

    def __init__(self, late_share_warn: float, window_ms: float) -> None:
        self.late_share_warn = late_share_warn
        self.window_ms = window_ms  # (ingest.reorder_window_ms now: the warning says what to set)
        self._counts: dict[str, Counter[str]] = {}
        self.other: Counter[str] = Counter()
        # stream -> [ts_backwards since the last check, accepted ticks at the first of them, the furthest back (ns),
        # the last accepted ts it was behind, when the first of them came, checks it was kept past (0 or 1)]
        self._late: dict[str, list[float]] = {}
        self.warnings: dict[str, dict[str, Any]] = {}  # stream -> the last interleave seen (health), bounded
        self._next_line = 0.0
        # (stream, a stray line?) -> when (monotonic) that line may be said again for it
        self._next_step_line: dict[tuple[str, bool], float] = {}
        self.stepped_back = 0  # ticks refused as stamped more than STEP_BACK_NS behind their stream's last one
        self._resent: Counter[str] = Counter()  # ticks refused as copies of ones taken (resends) since last said
        self._next_resent_line = 0.0  # (monotonic) when a resend may be said again

    def add(self, rejections: list[dict[str, Any]], accepted_of: Callable[[str], int | None] = lambda _: None
            ) -> None:
        """A message's refusals (as `_rejects/` carries them); ``accepted_of``: a stream's accepted tick count now,
        the late check's base."""
        for rejection in rejections:
            stream, reason, count = rejection.get("stream"), rejection["reason"], rejection.get("count", 1)
            if stream is None:
                continue
            if stream not in self._counts and len(self._counts) >= STREAMS_KEPT:
                least = min(self._counts, key=lambda s: (sum(self._counts[s].values()), s))
                self.other.update(self._counts.pop(least))
            self._counts.setdefault(stream, Counter())[reason] += count
            if reason == "ts_backwards" and RESENT in (rejection.get("error") or ""):
                if stream in self._resent or len(self._resent) < STREAMS_KEPT:
                    self._resent[stream] += count
            elif reason == "ts_backwards" and (stream in self._late or len(self._late) < STREAMS_KEPT):
                late = self._late.setdefault(stream, [0, accepted_of(stream) or 0, 0, 0, time.time(), 0])
                late[0] += count
                if (times := _BACKWARDS.search(rejection.get("error") or "")) is not None:  # how far back, and from
                    ts, last_ts = int(times.group(1)), int(times.group(2))
                    late[2], late[3] = max(late[2], last_ts - ts), last_ts

    def of(self, stream: str) -> dict[str, int]:
        """``stream``'s refused ticks by reason ({} when none is counted)."""
        return dict(self._counts.get(stream, {}))

    def most(self, n: int = STREAMS_SAID) -> dict[str, dict[str, int]]:
        """The ``n`` most refused streams' counts by reason, most first, then every other stream's summed."""
        ranked = sorted(self._counts.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
        out = {stream: dict(counts) for stream, counts in ranked[:n]}
        rest = sum((counts for _, counts in ranked[n:]), Counter()) + self.other
        return {**out, **({OTHER: dict(rest)} if rest else {})}

    def check_late(self, accepted_of: Callable[[str], int | None], now: float | None = None) -> list[str]:
        """At a heartbeat: the streams whose ticks were refused as late since the last one at a rate that means two
        clocks interleave, or whose feed's clock stepped back (not a stray tick far behind: the module doc), kept in
        ``warnings``; the log's line said (at most every WARN_EVERY_S). Returns them."""
        now = time.time() if now is None else now
        late, self._late = self._late, {}
        seen = []
        stepped = []
        for stream, (refused, base, back_ns, last_ts, since, kept) in late.items():
            refused, accepted = int(refused), max(0, (accepted_of(stream) or 0) - int(base))
            interleaving = refused >= LATE_MIN and refused >= self.late_share_warn * (refused + accepted)
            if back_ns > STEP_BACK_NS and not accepted and not kept:  # (no tick after it yet: judged at the next)
                self._late[stream] = [refused, base, back_ns, last_ts, since, 1]
            elif back_ns > STEP_BACK_NS and accepted and not interleaving:  # its later ticks taken: stale, not a step
                self.stepped_back += refused
                self._say_once(stream, f"INFO: {self._stray_line(stream, refused, accepted, back_ns, last_ts)}",
                               stray=True)
            elif back_ns > STEP_BACK_NS:  # a clock jump, not two clocks: no window helps; said whatever the count
                stepped.append(stream)
                self.warnings.pop(stream, None)
                self.warnings[stream] = {"kind": "clock_stepped_back", "ts_backwards": refused,
                                         "accepted": accepted, "at": round(now, 3), "since": round(min(since, now), 3),
                                         "step_s": round(back_ns / 1e9, 3), "last_ts": last_ts}
                self.stepped_back += refused
            elif interleaving:
                seen.append(stream)
                self.warnings.pop(stream, None)
                self.warnings[stream] = {"kind": "late_ticks", "ts_backwards": refused, "accepted": accepted,
                                         "at": round(now, 3), "since": round(min(since, now), 3),
                                         "share": round(refused / (refused + accepted), 3)}
        # what this check says, taken before the trims below: more than STREAMS_SAID streams seen at one check (two
        # feeds on 50 streams) pushed the first of them out of `warnings`, and saying them raised a KeyError that
        # stopped the service (review435 #0)
        said = {stream: self.warnings[stream] for stream in seen[:STREAMS_SAID]}
        steps = {stream: self.warnings[stream] for stream in stepped}
        if self._resent and time.monotonic() >= self._next_resent_line:  # (else kept, said with the next check's)
            self._next_resent_line = time.monotonic() + WARN_EVERY_S
            print(f"flashtick: INFO: {self._resent_line(self._resent)}", file=sys.stderr, flush=True)
            self._resent = Counter()
        for stream in [s for s, w in self.warnings.items() if now - w["at"] > WARNING_KEPT_S]:
            del self.warnings[stream]
        while len(self.warnings) > STREAMS_SAID:  # (the oldest said first out)
            del self.warnings[next(iter(self.warnings))]
        if seen and time.monotonic() >= self._next_line:
            self._next_line = time.monotonic() + WARN_EVERY_S
            print(f"flashtick: {self.line(said)}", file=sys.stderr, flush=True)
        for stream, step in steps.items():
            self._say_once(stream, f"WARNING: {self.step_line(stream, step)}")
        return seen + stepped

    def _say_once(self, stream: str, line: str, stray: bool = False) -> None:
        """``line`` in the log, at most every WARN_EVERY_S for ``stream`` (a stream stepped back an hour refuses for
        an hour); a stray tick's INFO line and a clock step's WARNING each on its own clock, so that a harmless
        stray line never holds back the warning a desk routes on."""
        key = (stream, stray)
        if time.monotonic() >= self._next_step_line.get(key, 0.0):
            self._next_step_line[key] = time.monotonic() + WARN_EVERY_S
            print(f"flashtick: {line}", file=sys.stderr, flush=True)
        if len(self._next_step_line) > STREAMS_KEPT:
            self._next_step_line.pop(next(iter(self._next_step_line)))

    @staticmethod
    def _stray_line(stream: str, refused: int, accepted: int, back_ns: float, last_ts: float) -> str:
        """Ticks refused far behind their stream's last one while its later ticks were taken (the module doc)."""
        ticks = "1 tick" if refused == 1 else f"{refused} ticks"
        return (f"stream {quoted(stream)}: {ticks} refused as ts_backwards, stamped up to {_duration(back_ns / 1e9)} "
                f"behind its last accepted tick ({utc_text(int(last_ts))}), while its later ticks were taken "
                f"({accepted} since): a stale or replayed message, not its feed's clock; nothing to do")

    @staticmethod
    def _resent_line(resent: Counter[str]) -> str:
        """Ticks refused as copies of ones their stream took (the module doc), by stream: one line for a resend
        however many streams it spans (a reconnect resends every subscribed one), the most resent named first."""
        streams = [stream for stream, _ in resent.most_common()]
        copies = sum(resent.values())
        ticks = "1 tick" if copies == 1 else f"{copies} ticks"
        whose = f"stream {quoted(streams[0])}" if len(streams) == 1 else f"streams {named_few(streams)}"
        return (f"{whose}: {ticks} refused as ts_backwards, each an exact copy (ts, kind, values) of a tick its "
                f"stream took: its feed resent them (a venue reconnect's snapshot), not two clocks; nothing lost, "
                f"but a resent tick stamped at its last ts is taken again (streams' repeats_taken). To send none "
                f"again, the feed drops what `streams` says was sent (last_ts, at_last_ts) at each reconnect, or "
                f"sends each tick's seq (then dropped as a duplicate): docs/feed-resume.md; no reorder window helps")

    @staticmethod
    def step_line(stream: str, w: dict[str, Any]) -> str:
        """A stream whose ticks come stamped far behind its last accepted one (its feed's clock stepped back, or
        one tick came stamped ahead; ``w``: its warning): how far, how many refused, until when, and what to do
        (review351 #13)."""
        return (f"stream {quoted(stream)}: {w['ts_backwards']} ticks refused as ts_backwards from "
                f"{_utc(w['since'])} to {_utc(w['at'])}, stamped up to {_duration(w['step_s'])} behind its last "
                f"accepted tick ({utc_text(w['last_ts'])}): its feed's clock stepped back, or one tick came stamped "
                f"ahead; every tick of it is refused until its stamps pass that time. No reorder window helps (it "
                f"holds {MAX_REORDER_WINDOW_MS / 1000:g} s at most): fix the feed's clock, or `flashtick forget "
                f"{stream}` to start the stream afresh now (its session and ordering guard dropped)")

    def line(self, warnings: dict[str, dict[str, Any]]) -> str:
        """The warning of the streams seen at one check (``warnings``: theirs, at most STREAMS_SAID), its window said
        in absolute terms: `health` serves it for WARNING_KEPT_S, long after "since the last heartbeat" meant
        anything."""
        counts = [(s, w["ts_backwards"], w["accepted"]) for s, w in warnings.items() if w["kind"] == "late_ticks"]
        said = ", ".join(f"{s} {late} of {late + accepted}" for s, late, accepted in counts)
        since = min(w["since"] for w in warnings.values())
        at = max(w["at"] for w in warnings.values())
        fix = (f"ingest.reorder_window_ms ({self.window_ms:g} now) holds ticks that long to place the late ones: "
               f"raise it past their lateness" if self.window_ms else
               "set ingest.reorder_window_ms (a window past their lateness) to place them in time order")
        return (f"ticks refused as late (ts_backwards) from {_utc(since)} to {_utc(at)} ({at - since:.1f} s): "
                f"{said}: two clocks interleave on "
                f"these streams (two feeds or venues under one name, or a venue sending out of order); {fix}, or "
                f"give each feed its own name (ingest.rename)")

    def health_warnings(self) -> list[dict[str, Any]]:
        """`health`'s entries for the streams seen interleaving in the last WARNING_KEPT_S."""
        return [{"stream": stream, **w, "message": self.step_line(stream, w) if w["kind"] == "clock_stepped_back"
                 else self.line({stream: w})} for stream, w in self.warnings.items()]


def _utc(seconds: float) -> str:
    """A Unix time as ISO 8601 UTC to the ms (``2026-12-06T06:20:01.250Z``)."""
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
