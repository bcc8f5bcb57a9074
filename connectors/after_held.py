"""A file fed to an engine that already holds some of it (fed before, or the engine restarted mid-feed): the
source that leaves out what the engine holds of each stream and goes on from there (`AfterHeld`), telling a re-fed
file from one that continues the engine's ticks inside its last millisecond, and the lines the feed's summary says
about it: the ticks not sent, those sent as continuing, and files older than the engine's last tick of a stream.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from typing import Any, Mapping

from connectors.source import Source
from connectors.ticks import Tick, shown_name


NEARLY_WHOLE = 0.9  # a stream's share of the files' ticks left out past which the summary says so plainly


class AfterHeld(Source):
    """A finite source with the ticks an engine already holds left out: each stream's ticks stamped before the
    engine's last accepted tick of it (``last_ts``, the control op `streams`), and of those stamped exactly then the
    first ``at_last_ts`` (how many it took up to the last it accepted, refused and conflated ones before that
    included, so a file with a refused row among them is placed exactly; all of them where it is not known). A
    file fed again after a
    restart (or twice) goes on where the engine is, instead of sending what it holds, refused as ts_backwards, while
    the ticks stamped exactly at its last one would be taken twice (an equal `ts` is accepted), or, all left out,
    the rest of a run sharing that timestamp lost. What was left out is counted per stream (`skipped`), for the
    feed's summary; ``held_ticks`` (the engine's tick count of each stream's session) tells there a file fed again
    from one older than what the engine holds (no tick stamped as its last, and more ticks left out of a stream
    than its session holds: ``older``). A file
    source is handed the check (FileReplay.leave_out), so a paced replay does not wait through what it leaves out.
    A file whose ticks of a stream begin exactly at the engine's last tick, none before, and go on past it, while
    the engine holds more ticks than those stamped then, continues the engine's ticks (an export split by row count
    or page inside a millisecond), not the file that fed them (that one holds the engine's earlier ticks too, or
    its last tick would be later): its ticks stamped then are new, and all are sent (``continued``). Whether they go
    on past it is known only at the stream's next tick, so its ticks stamped then wait for that (sent just before
    it) or for the files' end: a file whose ticks of a stream are all stamped as the engine's last one (rows all
    in one millisecond) is placed by ``at_last_ts`` as a file fed again is, the first that many held, the rest
    sent (it was fed before, after earlier ticks: sending it whole took each of its ticks twice)."""

    def __init__(self, source: Source, last_ts: Mapping[str, int],
                 at_last_ts: Mapping[str, int | None] | None = None, held_ticks: Mapping[str, int] | None = None,
                 fed_by: Mapping[str, str] | None = None) -> None:
        """``fed_by``: the feed (its tag) whose tick the engine took last of a stream (`streams`' fed_by)."""
        self.source = source
        self.last_ts = dict(last_ts)
        self.at_last_ts = dict(at_last_ts or {})
        self.held_ticks = dict(held_ticks or {})
        self.fed_by = dict(fed_by or {})
        self.skipped: Counter[str] = Counter()
        self.read: Counter[str] = Counter()  # stream the engine holds -> the files' ticks of it, left out or not
        self._at_last_seen: Counter[str] = Counter()  # stream -> its ticks stamped last_ts met so far
        self._before_seen: set[str] = set()  # streams with a tick stamped before last_ts met: the files overlap
        self.continued: Counter[str] = Counter()  # stream -> its ticks stamped last_ts sent as new (see above)
        self._waiting: dict[str, list[Tick]] = {}  # stream -> its ticks stamped last_ts, until it is placed
        self._placed: dict[str, bool] = {}  # stream -> whether its files continue the engine's ticks, once known
        self._released: dict[str, list[Tick]] = {}  # stream -> its waiting ticks to send, before its next tick
        self._ready: deque[Tick] = deque()  # ticks to hand out, in order (a stream's released ones among them)
        self._passed_over = hasattr(source, "leave_out")
        if self._passed_over:
            source.leave_out = self._left_out

    def next_batch(self, max_ticks: int) -> list[Tick]:
        if len(self._ready) < max_ticks and not self._ended():
            ticks = self.source.next_batch(max_ticks)
            for tick in ticks if self._passed_over else [t for t in ticks if not self._left_out(t)]:
                self._ready.extend(self._released.pop(tick.stream, ()))
                self._ready.append(tick)
            if self.source.done:  # the files' end: a stream's ticks all stamped as the engine's last are placed
                for stream in list(self._waiting):
                    self._place(stream, continues=False)
                for released in self._released.values():
                    self._ready.extend(released)
                self._released.clear()
        return [self._ready.popleft() for _ in range(min(max_ticks, len(self._ready)))]

    def _ended(self) -> bool:
        return self.source.done and not self._waiting and not self._released

    def _left_out(self, tick: Tick) -> bool:
        if tick.stream in self.last_ts:
            self.read[tick.stream] += 1
        held = self._held(tick)
        if held and tick.stream not in self._waiting:
            self.skipped[tick.stream] += 1
        return held

    def _held(self, tick: Tick) -> bool:
        """Whether ``tick`` is left out here: held by the engine, or waiting (``_waiting``) to be placed."""
        stream, last_ts = tick.stream, self.last_ts.get(tick.stream)
        if last_ts is None:
            return False
        if stream in self._waiting and tick.ts != last_ts:  # its next tick: before (fed again) or after (continues)
            self._place(stream, continues=tick.ts > last_ts)
        if tick.ts > last_ts:
            return False
        if tick.ts < last_ts:
            self._before_seen.add(stream)
            return True
        self._at_last_seen[stream] += 1
        held_there = self.at_last_ts.get(stream)
        if held_there is None:
            return True
        if self._placed.get(stream) or (stream not in self._placed and self._may_continue(stream, held_there)):
            if stream in self._placed:  # (a tick stamped then after later ones: the files continue the engine's)
                self.continued[stream] += 1
                return False
            self._waiting.setdefault(stream, []).append(tick)
            return True
        return self._at_last_seen[stream] <= held_there

    def _may_continue(self, stream: str, held_there: int) -> bool:
        """Whether the files' ticks of ``stream`` begin at the engine's last time while it holds ticks before that
        time these files lack: they are no re-feed of what it holds (that would hold those earlier ticks too),
        unless none goes past that time."""
        return stream not in self._before_seen and self.held_ticks.get(stream, 0) > held_there

    def _place(self, stream: str, continues: bool) -> None:
        """The ticks of ``stream`` that waited: all sent where its files continue the engine's ticks, otherwise
        (the files' end came, or a tick before the engine's last) those past its ``at_last_ts`` only."""
        waiting, held_there = self._waiting.pop(stream), self.at_last_ts[stream]
        self._placed[stream] = continues
        if continues:
            self.continued[stream] += len(waiting)
        else:
            self.skipped[stream] += min(len(waiting), held_there)
            waiting = waiting[held_there:]
        if waiting:
            self._released.setdefault(stream, []).extend(waiting)

    @property
    def done(self) -> bool:
        return self._ended() and not self._ready

    def snapshot(self) -> dict[str, Any]:
        return self.source.snapshot()

    def restore(self, snapshot: dict[str, Any]) -> None:
        self.source.restore(snapshot)

    def close(self) -> None:
        self.source.close()

    def __getattr__(self, name: str) -> Any:  # the file source's notes, rejects and cautions, as they are
        return getattr(self.source, name)

    def said(self) -> str | None:
        """The summary's line for what was left out and what was sent as continuing the engine's ticks, or None."""
        continued = self._continued_text()
        if not self.skipped:
            return continued
        streams = ", ".join(f"{shown_name(s)}: {n}{self._holds(s)}" for s, n in sorted(self.skipped.items())[:8])
        more = f", ... ({len(self.skipped)} streams)" if len(self.skipped) > 8 else ""
        said = (f"{sum(self.skipped.values())} ticks not sent: stamped at or before the engine's last tick of their "
                f"stream ({streams}{more}), which it holds if these files were fed before (ticks older than its "
                f"last, from another file, it cannot take: a stream takes ticks in time order); the feed went on "
                f"from there (with the ticks stamped as that last one past as many as it holds)")
        said = f"{said}; {older}" if (older := self.older()) else said
        said = f"{said}; {other}" if (other := self._other_feed()) else said
        # (only of files read to their end: a run stopped early has read too few of them to say so; review402 #2)
        said = f"{said}; {nearly}" if self.source.done and (nearly := self._nearly_whole()) else said
        return f"{said}; {continued}" if continued else said

    def _other_feed(self) -> str | None:
        """What names the feed whose tick the engine took last of the streams left out: a feed of these files run
        before, or another publisher sending beside this one (review411 #10: of two feeds of one stream started
        together, the one placed second was told only of files fed before, of history that never existed); None
        when the engine names none."""
        streams = [s for s in sorted(self.skipped) if s in self.fed_by]
        if not streams:
            return None
        feeds = sorted({self.fed_by[s] for s in streams})
        return (f"the engine's last tick of {_some(streams)} came from another feed ({', '.join(feeds[:3])}"
                f"{', ...' if len(feeds) > 3 else ''}): a feed of these files run before, or one running beside "
                f"this feed, whose later ticks of the streams this feed sends the engine leaves out if it still runs "
                f"(a stream takes one feed at a time: docs/feed-resume.md)")

    def _nearly_whole(self) -> str | None:
        """What says plainly that the files of a stream were left out all but a few ticks, which were sent: a
        re-feed of what the engine holds, or another instrument's file under the same stream name (review 163:
        a future's day appended as one tick to the perpetual's stream, exit 0), which the feed cannot tell apart."""
        streams = [s for s, n in sorted(self.skipped.items())
                   if self.read[s] > n >= NEARLY_WHOLE * self.read[s]]
        if not streams:
            return None
        counts = ", ".join(f"{shown_name(s)}: {self.read[s] - self.skipped[s]:,} of {self.read[s]:,} sent"
                           for s in streams[:5]) + (", ..." if len(streams) > 5 else "")
        return (f"the files' ticks of {_some(streams)} were left out nearly whole ({counts}): if these files are "
                f"not what fed it before (another contract's or vendor's ticks under the same stream name), their "
                f"ticks are not in the engine; feed them as a stream of their own (--columns ...,stream_name=NAME)")

    def _holds(self, stream: str) -> str:
        held, at = self.held_ticks.get(stream), self.at_last_ts.get(stream)
        if held is None:
            return ""
        return f" (the engine holds {held:,}" + (f", {at:,} stamped as its last)" if at is not None else ")")

    def _continued_text(self) -> str | None:
        if not self.continued:
            return None
        streams = ", ".join(f"{shown_name(s)}: {n}{self._holds(s)}" for s, n in sorted(self.continued.items())[:8])
        more = f", ... ({len(self.continued)} streams)" if len(self.continued) > 8 else ""
        return (f"{sum(self.continued.values())} ticks sent stamped as the engine's last tick of their stream "
                f"({streams}{more}): the files begin at that time with no earlier tick, so they continue what it "
                f"holds rather than repeat it (a file split inside a millisecond)")

    def older(self) -> str | None:
        """What says the files left out ticks older than what the engine holds, not ticks it holds: none of a
        stream's ticks is stamped as the engine's last one and more were left out than its session counts (a later
        day fed before an earlier one); None when none did. Files with a tick stamped as that last one are what
        fed it: the ticks it refused of them (a crossed quote, a 0 bid) are left out too, counted in no session, so
        the count alone would call them older."""
        streams = {s: n for s, n in self.skipped.items()
                   if not self._at_last_seen[s] and n > self.held_ticks.get(s, n)}
        if not streams:
            return None
        named = ", ".join(f"{shown_name(s)}: {n} left out, its session holds {self.held_ticks[s]}"
                          for s, n in sorted(streams.items())[:5]) + (", ..." if len(streams) > 5 else "")
        # a last tick stamped ahead of this machine's clock is the likelier cause (the feed says what to do about it),
        # said of those streams only: another's last tick may be an honest one, its files fed out of order
        now = time.time_ns()
        ahead = [s for s in sorted(streams) if self.last_ts.get(s, now) > now]
        clock, order = "its last there stamped ahead of this machine's clock", "an earlier file fed after a later one?"
        if not ahead or len(ahead) == len(streams):
            why = clock if ahead else order
        else:
            others = sorted(set(streams) - set(ahead))
            why = f"{_some(ahead)}: {clock}; {_some(others)}: {order}"
        return (f"not all of them are ticks the engine holds ({named}): the files hold ticks older than the "
                f"engine's last of their stream ({why}), which a stream cannot take: it takes each stream's ticks "
                f"in time order only")


def _some(streams: list[str], most: int = 5) -> str:
    """The first ``most`` stream names, shown, and "..." past them."""
    return ", ".join(map(shown_name, streams[:most])) + (", ..." if len(streams) > most else "")
