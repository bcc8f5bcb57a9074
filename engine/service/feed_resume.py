"""A feed that survives a restart of the engine with no hole and no duplicate (connectors.feed.FeedResume).

PUSH has no receipts: when the engine restarts mid-feed, what was in flight (its socket's queue, TCP buffers) is
gone, while its tick log holds exactly what it accepted. So this keeps every tick the feed sent until the engine
confirms it (control op `streams`: each stream's tick count, asked about once a second), and when the
connection drops (FeedClient's ``watch_connection``) the feed stops, asks the engine that came back what it holds,
and sends each stream's ticks past that count again, in the messages they first went in (each one tick group at
the engine: an event-time batch of `feed --batch-ms` stays the one message the backtest's batch is), before it goes
on.

A stream's count is read as this feed's: the ticks the engine held of it when the feed began (its base) and the
ticks of it the engine refused (``_rejects/``, counted by RejectWatch) are allowed for; a tick the engine never
saw is sent again even where it will refuse it (older than its last), so the feed's rejection counts stay whole.
A stream that another process feeds at the same time cannot be resumed this way (its count is not this feed's
alone). Each stream is also placed by the engine's ``last_ts`` and ``at_last_ts``: every tick of the feed up to its
last accepted one is seen, refused and conflated ones included (``at_last_ts`` counts the ticks stamped ``last_ts``
the engine took up to the last it accepted, refused and conflated ones among them, as this feed sent them), and the
feed takes the later of the count and that placement. Both only ever fall short: the refusals heard on
``_rejects/`` lag the control reply (PUB/SUB: a flood that sheds may have many in flight), and a quote conflation
dropped (``when_behind: conflate``) is neither accepted nor refused; the placement misses the refusals past the
last accepted tick, which the count takes once they are heard, so a feed's closing count adds up whenever the
engine's own counters do. A stream the engine expired for idleness (scheduler.stream_idle_s: a halted symbol)
counts afresh from its next tick: a count lower than the engine's previous reply, its last tick where it was or
later, is read as that, and the feed's count goes on from the previous one (short of any accepted after that reply;
an expired session whose count grew past it before the feed asked again goes unseen: the placement carries the feed
there). A lower count whose last tick went back is ticks the engine lost (a restart that did not keep all it took):
the feed places it by ``last_ts`` and ``at_last_ts`` and counts on from there.
"""

from __future__ import annotations

import itertools
import shlex
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from connectors.service_topics import echoed_topic
from connectors.ticks import Tick, counted, shown_name
from engine.quoting import quoted
from engine.service.client import ControlClient, ControlError
from engine.service.feed_control import START_WAIT_S, FeedControl

CONFIRM_EVERY_S = 1.0  # how often the engine is asked what it holds (so what is kept here stays small)
# A feed's first price of a stream the engine holds this many times above or below the engine's last price of it is
# another price level: the files read another way (--price-offset) or another instrument under the name, which the
# engine would splice onto its earlier ticks as one stream
FAR_FROM_HELD = 1.5
MAX_OTHER_PUBLISHERS_SAID = 8  # streams said to be fed by another publisher too, at most (one line each)
SPLICE_WAY_OUT = ("to feed it apart from what the engine holds, give the stream another name (a file of one stream: "
                  "--columns ...,stream_name=NAME), or restart `flashtick serve` with another --data-dir or with "
                  "--no-log (it then holds no stream)")


class SentAs(NamedTuple):
    """Where a kept tick went: the feed's message number, its place in that message, the message's size. Ordered as
    the ticks were sent; a restart sends each message the engine lacks again as the one message it was (an
    event-time batch of `feed --batch-ms` is one tick group: cut otherwise, the live run answers at other ticks)."""
    message: int
    index: int
    size: int


class ControlFeedResume:
    """A feed's resumption across restarts of the engine, on its control socket: pass one as ``run_feed(...,
    resume=ControlFeedResume(lambda: ControlClient(control_endpoint)))`` with a ``FeedClient(...,
    watch_connection=True)``. It keeps each tick sent until the engine's ``streams`` counts confirm it; when the
    connection drops it waits for the engine to come back and sends again, message by message, what it does not
    hold, so no tick is lost or repeated (this module's docstring says how a stream's count is read)."""

    def __init__(self, connect: Callable[[], ControlClient], wait_s: float = 600.0,
                 confirm_every_s: float = CONFIRM_EVERY_S, stop: threading.Event | None = None,
                 start_wait_s: float = START_WAIT_S, who: str = "flashtick feed replay") -> None:
        """``connect`` makes a client of the engine's control socket (made again after a failed call: a request
        lost with a dropped connection must not leave its late reply to be read as another's); ``wait_s``: how
        long to wait for the engine to come back after the connection dropped, or for one that is starting
        (loading its model, replaying its tick log) to serve; ``start_wait_s``: how long to wait for a control
        socket that accepts nothing yet (a `serve` launched a moment before the feed); ``stop`` (a signal's): ends
        those waits (EngineLost), so a feed stops while its engine is down rather than when it is back; ``who``: the
        feed command's full name, the prefix of the lines it prints (as of the command's errors)."""
        self.who = who
        self.link = FeedControl(connect, wait_s, stop, who)
        self.confirm_every_s = confirm_every_s
        reply = self.link.first_reply(start_wait_s)
        # the tag for the feed's messages (FeedClient's) the engine placed it under (placed_feeds.py); None from an
        # engine of an earlier version, or a tag a FeedClient would refuse
        tag = reply.get("tag")
        self.tag: str | None = tag if isinstance(tag, str) and echoed_topic(tag.encode("utf-8", "replace")) == tag \
            else None
        self.base: dict[str, int] = {name: held["ticks"] for name, held in reply["streams"].items() if held}
        # stream -> the feed (its tag) whose tick the engine took last of it (absent from an earlier version)
        self.fed_by: dict[str, str] = {name: held["fed_by"] for name, held in reply["streams"].items()
                                       if held and type(held.get("fed_by")) is str}
        # stream -> (ticks, last_ts, at_last_ts) of its session in the engine's last reply: a lower count later is a
        # session begun afresh (an idle expiry, its last tick where it was or later) or ticks lost (its last went back)
        self.session: dict[str, tuple[int, int, int | None]] = {
            name: (held["ticks"], held["last_ts"], held.get("at_last_ts"))
            for name, held in reply["streams"].items() if held and held.get("last_ts") is not None}
        # stream -> the event time of the engine's last tick of it when the feed began (a new synthetic market starts
        # after these, so its ticks are not refused as older than a previous feed's)
        self.last_ts: dict[str, int] = {name: held["last_ts"] for name, held in reply["streams"].items() if held}
        # ... and how many of its ticks are stamped then (None: not known; a service of an earlier version says none)
        self.at_last_ts: dict[str, int | None] = {name: held.get("at_last_ts")
                                                  for name, held in reply["streams"].items() if held}
        # ... and the price level of its last tick (a trade's price, a quote's mid; absent from an earlier version)
        self.last_price: dict[str, float] = {name: held["last_price"] for name, held in reply["streams"].items()
                                             if held and held.get("last_price") is not None}
        self.price_offset_of: Callable[[str], float] = lambda stream: 0.0  # the feed's files' offset of a stream
        # what the engine adds to every tick at ingest (its `health`'s ingest_price_offset), which the feed's
        # FeedClient takes off the ticks it sends (cmd_feed._read_as_served): None when it adds nothing
        self.ingest_offset: Any = None
        self._base_complete = not reply.get("truncated")
        self.kept: dict[str, deque[tuple[SentAs, Tick]]] = {}  # stream -> (where sent, tick) not yet confirmed
        self.first: dict[str, int] = {}  # stream -> this feed's index (among its ticks of the stream) of kept[0]
        # stream -> (ts, n): the latest ts of its ticks the engine took before kept[0] (held when the feed began, then
        # confirmed), and how many stamped then; None: not known (no at_last_ts, ticks out of order)
        self.run: dict[str, tuple[int | None, int] | None] = {}
        self.count: Counter[str] = Counter()  # stream -> ticks of it this feed sent
        self.latest: dict[str, int] = {}  # stream -> the latest event time of the ticks of it this feed sent
        self.fed_by_another: list[str] = []  # streams whose last tick at the engine came from another publisher
        self.restarts = 0
        self.resent = 0
        self.lost_ticks = 0  # ticks the engine had confirmed and, restarted without them, no longer holds
        # stream -> (this feed's ticks of it the engine left out for another feed's, ... as sent twice), as last said
        self.left_out: dict[str, tuple[int, int]] = {}
        self._messages = itertools.count()
        self._confirm_at = time.monotonic() + confirm_every_s

    def sent(self, ticks: list[Tick], rejected: Mapping[str, int]) -> None:
        message = next(self._messages)
        for index, tick in enumerate(ticks):
            stream = tick.stream
            if stream not in self.kept:
                self._say_another_level(tick)
                self.kept[stream], self.first[stream] = deque(), self.count[stream]
                held_at = self.at_last_ts.get(stream)
                self.run[stream] = (None, 0) if stream not in self.last_ts and self._base_complete else \
                    None if held_at is None else (self.last_ts[stream], held_at)
                if not self._base_complete and stream not in self.base:  # (past the first reply's 10,000 names)
                    self.base[stream] = _ticks(self.link.held([stream]).get(stream)) - 1  # less this tick, just sent
            self.kept[stream].append((SentAs(message, index, len(ticks)), tick))
            self.count[stream] += 1
            self.latest[stream] = max(tick.ts, self.latest.get(stream, tick.ts))
        if time.monotonic() >= self._confirm_at:
            self._confirm_at = time.monotonic() + self.confirm_every_s
            self.unconfirmed(rejected)

    def _say_another_level(self, tick: Tick) -> None:
        """Once per stream, at the feed's first tick of it: a warning when the engine holds the stream at a price
        level far from this tick's (FAR_FROM_HELD), since the engine would continue its earlier ticks with these as
        one stream, every label across the seam counting the jump as a move."""
        held, price = self.last_price.get(tick.stream), tick.level
        if held is None or price is None or held <= 0 or price <= 0 or max(held, price) / min(held, price) \
                <= FAR_FROM_HELD:
            return
        offset = self.price_offset_of(tick.stream)
        read = f" (read with --price-offset {offset:g})" if offset else ""
        # forget only once this feed stopped: it drops the ticks this feed sent too, and a feed going on after it
        # would start the stream partway through its files
        print(f"{self.who}: warning: stream {quoted(tick.stream)}: its first price here, {price:g}{read}, is far from "
              f"the engine's last price of it, {held:g}: the engine holds earlier ticks of {quoted(tick.stream)}, read "
              f"another way or of another instrument, and would continue them with these as one stream; if the "
              f"engine's are the ones read wrongly (fed before without an offset given now, say), stop this feed, "
              f"run `flashtick forget {shlex.quote(tick.stream)}` (it drops that one stream at the engine, its "
              f"answers and the ticks this feed sent too) and feed its files again from their start; else, "
              f"{SPLICE_WAY_OUT}", file=sys.stderr, flush=True)

    def _say_another_publisher(self, stream: str, held: dict[str, Any] | None) -> None:
        """Once per stream (for the first MAX_OTHER_PUBLISHERS_SAID): a warning when the engine's last tick of
        ``stream`` is stamped after every tick of it this feed sent and after its last when the feed began (only
        another publisher can have sent it), or when it left this feed's ticks of it out for another feed's, placed
        after this one began (`streams`' superseded: review411 #10, said nowhere). One stream, one publisher: their
        ticks interleave, each one older than the other's last is refused, and a tick both send at the same time is
        taken twice (stamped as the last)."""
        last_ts = None if held is None else held.get("last_ts")
        left_out = self._superseded(held)
        if last_ts is None or stream in self.fed_by_another or len(self.fed_by_another) >= MAX_OTHER_PUBLISHERS_SAID \
                or (left_out is None and last_ts <= max(self.latest[stream], self.last_ts.get(stream,
                                                                                              self.latest[stream]))):
            return
        self.fed_by_another.append(stream)
        more = (" (further streams fed by another publisher are not said)"
                if len(self.fed_by_another) == MAX_OTHER_PUBLISHERS_SAID else "")
        if left_out is not None:
            print(f"{self.who}: warning: stream {shown_name(stream)}: the engine leaves this feed's ticks of it out "
                  f"({left_out['ticks']} so far), neither taken nor refused: another feed ({left_out['by']}) placed "
                  f"itself after this one began and sends the same stream, and a stream takes one publisher "
                  f"(docs/feed-resume.md); stop one of the two, or give each its own stream name{more}",
                  file=sys.stderr, flush=True)
            return
        print(f"{self.who}: warning: stream {shown_name(stream)}: the engine's last tick of it is stamped after "
              f"every tick this feed sent of it: another publisher is feeding the same stream. A stream takes one "
              f"publisher (docs/wire-protocol.md): the ticks of each older than the other's last are refused as "
              f"ts_backwards (this feed counts only its own), and a tick both send at the same time is taken "
              f"twice{more}", file=sys.stderr, flush=True)

    def _count_left_out(self, stream: str, held: dict[str, Any] | None) -> None:
        """What of this feed's ticks of ``stream`` the engine left out, neither taken nor refused, as its reply
        ``held`` counts them: for a feed placed after this one (`superseded`), and as sent twice (`sent_twice`: as
        many as the stream took after this feed was placed, a stopped feed's tail read late or another live feed's
        ticks), for the summary to add up to what was sent (review430 #11)."""
        twice = None if held is None or self.tag is None else held.get("sent_twice")
        mine = twice.get(self.tag) if isinstance(twice, dict) else None
        counts = ((self._superseded(held) or {}).get("ticks", 0), mine if type(mine) is int else 0)
        if any(counts):
            self.left_out[stream] = counts

    @property
    def superseded_ticks(self) -> int:
        return sum(superseded for superseded, _ in self.left_out.values())

    @property
    def sent_twice_ticks(self) -> int:
        return sum(twice for _, twice in self.left_out.values())

    def _superseded(self, held: dict[str, Any] | None) -> dict[str, Any] | None:
        """What of this feed's ticks of a stream the engine left out for another feed's (`streams`' superseded):
        {by, ticks}; None when none (or an engine of an earlier version)."""
        superseded = None if held is None or self.tag is None else held.get("superseded")
        mine = superseded.get(self.tag) if isinstance(superseded, dict) else None
        return mine if isinstance(mine, dict) and type(mine.get("ticks")) is int else None

    def unconfirmed(self, rejected: Mapping[str, int]) -> int:
        """Forget what the engine has taken (accepted and logged, so a restart brings it back; or refused); returns
        how many ticks sent it has not (all still kept, when it does not answer now)."""
        try:
            self._confirm(rejected)
        except ControlError:  # (going down, say): kept a while longer, asked again later
            pass
        return sum(len(kept) for kept in self.kept.values())

    def _confirm(self, rejected: Mapping[str, int]) -> None:
        streams = [stream for stream, kept in self.kept.items() if kept]
        held = self.link.held(streams)
        for stream in streams:
            self._say_another_publisher(stream, held.get(stream))
            self._count_left_out(stream, held.get(stream))
            done = self._seen(stream, held.get(stream), rejected)  # this feed's ticks of it the engine has seen
            kept = self.kept[stream]
            while kept and self.first[stream] < done:
                _, tick = kept.popleft()
                self.first[stream] += 1
                run = self.run[stream]
                if run is not None:
                    self.run[stream] = None if run[0] is not None and tick.ts < run[0] else \
                        (tick.ts, run[1] + 1) if tick.ts == run[0] else (tick.ts, 1)

    def lost(self, unsent: list[list[Tick]], rejected: Mapping[str, int]) -> list[list[Tick]]:
        self.restarts += 1
        held = self.link.wait_for_engine(list(self.kept))
        again: list[tuple[SentAs, Tick]] = []
        for stream, kept in self.kept.items():
            # this feed's ticks of the stream the engine has seen (accepted, or refused: those are sent again too, so
            # they are refused again and counted, rather than left unaccounted for)
            start = min(self._seen(stream, held.get(stream), rejected), self.count[stream])
            if start < self.first[stream]:
                self._say_lost(stream, self.first[stream] - start)
                start = self.first[stream]
            again += list(kept)[start - self.first[stream]:]
            self.count[stream] = start  # what goes again is sent (and kept) anew
            while len(kept) > start - self.first[stream]:
                kept.pop()
        again.sort(key=lambda entry: entry[0])
        parts = [list(part) for _, part in itertools.groupby(again, lambda entry: entry[0].message)]
        self.resent += len(again)
        print(f"{self.who}: the engine's connection dropped (restart {self.restarts}); it is back: sending "
              f"{len(again)} ticks again that it does not hold, then going on", file=sys.stderr, flush=True)
        if split := [part for part in parts if len(part) < part[0][0].size]:
            self._say_split(len(split), sum(part[0][0].size - len(part) for part in split))
        return [[tick for _, tick in part] for part in parts] + [message for message in unsent if message]

    def _say_split(self, messages: int, held: int) -> None:
        """Says that the engine holds part of ``messages`` sent (``held`` ticks of them): the rest, sent again as one
        message, is a tick group apart from that part where it is taken, where a run without the restart had one
        group: answers there may differ from that run's (or a backtest's). Not a kill while the engine read a message
        in: its restart leaves out such a message's part (its tick log records where messages end,
        message_ends.py), which goes again whole; an engine of a version before that keeps it, and any engine holds
        part of a message whose rest it refused (refusals not yet counted from `_rejects/` look the same)."""
        # worded to be true either way: the refusals of the rest may still be on their way to this feed's
        # `_rejects/` watch (a race no wait closes: those published as the engine stopped may never come)
        it = "it" if messages == 1 else "them"
        print(f"{self.who}: the engine holds part of {counted(messages, 'message')} sent before it stopped "
              f"({counted(held, 'tick')} of {it}) and not the rest, which goes again as one message: it refused the "
              f"rest (refusals not heard here yet), or it is a flashtick from before 2026-12-05, which kept the part "
              f"of a message a stop cut short. Where the rest is taken now, it is a tick group apart from that part, "
              f"so its `batch` and `{{ticks: N}}` answers there (and, with answers.adapt, the numbers after them) "
              f"may differ from a run without the restart or a backtest", file=sys.stderr, flush=True)

    def _seen(self, stream: str, held: dict[str, Any] | None, rejected: Mapping[str, int]) -> int:
        """How many of this feed's ticks of ``stream`` the engine has seen (accepted or refused), from its reply
        ``held`` (None: it holds none: every tick of a new stream refused so far, or a data directory not kept):
        the later of its count and its placement, both short of it at worst (see the module's docstring). The base
        is not moved to fit the placement unless the engine lost ticks: so moved, it took in the refusals heard by
        then, then counted twice those heard later of the ticks it placed, and never those heard of ticks past its
        last accepted one (a flood shed, its refusals heard late: "N not accounted for" for good)."""
        ticks = _ticks(held)
        if held is None or held.get("last_ts") is None:
            return ticks - self.base.get(stream, 0) + rejected.get(stream, 0)
        where = (held["last_ts"], held.get("at_last_ts"))
        before = self.session.get(stream)
        self.session[stream] = (ticks, *where)
        if before is not None and ticks < before[0]:
            if _not_before(where, before[1:]):  # the session counts afresh (an idle expiry): count on from it
                self.base[stream] = self.base.get(stream, 0) - before[0]
            else:  # its last tick went back: it lost ticks it had taken (a restart that did not keep them)
                return self._rebased(stream, held, rejected)
        # (ticks left out for another feed's are seen too: neither taken nor refused, but no longer on their way)
        left_out = self._superseded(held)
        done = ticks - self.base.get(stream, 0) + rejected.get(stream, 0) + (left_out or {}).get("ticks", 0)
        return max(min(done, self.count[stream]), self._placed(stream, held))

    def _rebased(self, stream: str, held: dict[str, Any], rejected: Mapping[str, int]) -> int:
        """Where the engine lost ticks it had taken, its ``last_ts`` and ``at_last_ts`` place it: every tick before
        its last is in it (a stream's ticks go in order), and of those stamped then, as many as it counts; nothing
        kept: every tick sent was confirmed before. Its count goes on from there."""
        kept, last_ts = self.kept[stream], held["last_ts"]
        if (counted := _ticks(held) - self.base.get(stream, 0) + rejected.get(stream, 0)) < self.first[stream]:
            self._say_lost(stream, self.first[stream] - counted)  # (confirmed ones: the placement cannot see them)
        before = sum(tick.ts < last_ts for _, tick in kept)
        at = sum(tick.ts == last_ts for _, tick in kept)
        seen = self.first[stream] + before + (at if held.get("at_last_ts") is None else min(at, held["at_last_ts"]))
        self.base[stream] = _ticks(held) + rejected.get(stream, 0) - seen
        return seen

    def _say_lost(self, stream: str, n: int) -> None:
        """``n`` ticks of ``stream`` the engine had confirmed are not in it now: counted (the closing line says them)
        and said; they were let go once confirmed, so they cannot be sent again."""
        self.lost_ticks += n
        print(f"{self.who}: the engine holds {n} fewer ticks of {quoted(stream)} than it had confirmed (its data "
              f"directory was not kept?); they cannot be sent again", file=sys.stderr, flush=True)

    def _placed(self, stream: str, held: dict[str, Any]) -> int:
        """How many of this feed's ticks of ``stream`` the engine has taken by its ``last_ts`` and ``at_last_ts`` (0:
        not known): every one before its last accepted tick, refused and conflated ones included, as a stream's
        ticks go in order; of those stamped then, as many as it counts, those held before kept[0] included."""
        run, last_ts, at_last_ts = self.run.get(stream), held.get("last_ts"), held.get("at_last_ts")
        if run is None or last_ts is None or at_last_ts is None or (run[0] is not None and run[0] > last_ts):
            return 0
        prev_ts, at = run[0], run[1] if run[0] == last_ts else 0
        placed = first = self.first[stream]
        for i, (_, tick) in enumerate(self.kept[stream]):
            if tick.ts > last_ts or (prev_ts is not None and tick.ts < prev_ts):  # (out of order: placed no further)
                break
            if tick.ts == last_ts:
                at += 1
                if at > at_last_ts:
                    break
            prev_ts, placed = tick.ts, first + i + 1
        return placed

    def health(self) -> dict[str, Any]:
        """The engine's ``health`` reply, {} when it gives none now (FeedControl.health)."""
        return self.link.health()

    def close(self) -> None:
        self.link.close()


def _not_before(where: tuple[int, int | None], was: tuple[int, int | None]) -> bool:
    """Whether an engine's (last_ts, at_last_ts) of a stream is where it was or later (an unknown count: not)."""
    if where[0] != was[0]:
        return where[0] > was[0]
    return where[1] is not None and was[1] is not None and where[1] >= was[1]


def _ticks(held: dict[str, Any] | None) -> int:
    """The engine's tick count of a stream from its `streams` reply (0: it holds none)."""
    return 0 if held is None else held["ticks"]
