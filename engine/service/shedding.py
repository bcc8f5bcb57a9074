"""Which ticks `limits.when_behind: shed` refuses: decided for each tick as it is read, against the backlog that
accepting it would leave, and fairly, the streams that hold most of that backlog refused first.

A flag refreshed between forwards let one read take every message queued during a forward (several forwards'
worth) before the engine counted itself behind, and once behind it refused every stream alike: one flooding feed
had every other feed's ticks refused. Here a tick is weighed at read time by the wait the accepted backlog would
have: its tokens at the recent pace (tokens drained per second over the last forwards) plus the longest wait in it
so far, the oldest accepted tick's or the tick's own before it was read (its ts says it for a stream stamped with
the wall clock, else it waited as long as the ingest queue held messages unread: review392 #1, where ticks that
had waited 19-34 s unread were accepted under max_lag_s 2, every stream being under its share of an accepted
backlog of ~0). Past the bound, a stream's ticks are refused once it holds its share of the tokens the bound
allows (that budget, the time the longest wait leaves, over the streams with tokens waiting) and for as long as the
accepted backlog stays past the bound; a stream under its share still gets in, up to twice the bound. A tick read
after waiting the whole bound leaves no budget: refused, whatever its stream, so the engine reads past the stale
queue (whole messages, cheaply) and catches up.
"""

from __future__ import annotations

from typing import NamedTuple

from connectors.ticks import InvalidTick
from engine.quoting import quoted
from engine.service.forward_pace import ForwardPace

SHED_STREAMS_KEPT = 64  # streams whose refusals are counted one by one (the most refused: a flood of names is bounded)
SHED_STREAMS_SAID = 5  # the most refused streams, in `stats` (shed_streams) and the log's behind line
HARD_LIMIT = 2.0  # past this many times the bound every tick is refused, whatever its stream's share


class Backlog(NamedTuple):
    """What waits when a tick of ``stream`` is read."""

    pending_tokens: int  # accepted, waiting for a forward
    stream_tokens: int  # of them, the tick's stream's
    streams_waiting: int  # streams with tokens waiting
    oldest_wait_s: float  # how long the oldest accepted tick has waited
    read_wait_s: float  # how long the tick waited before it was read (its ts, or the ingest queue's unread wait)

    @property
    def longest_wait_s(self) -> float:
        """The oldest wait in the backlog once the tick is accepted."""
        return max(self.oldest_wait_s, self.read_wait_s)


class ShedLimits(NamedTuple):
    max_lag_s: float
    max_backlog_tokens: int


def projected_lag_s(backlog: Backlog, seconds_per_token: float | None) -> float:
    """The wait of the oldest data once the backlog is computed: the longest wait so far plus the backlog at the
    recent pace (the wait alone until a forward was timed)."""
    return backlog.longest_wait_s + backlog.pending_tokens * (seconds_per_token or 0.0)


def budget_tokens(backlog: Backlog, seconds_per_token: float | None, limits: ShedLimits) -> float:
    """Tokens the bound allows waiting: what the recent pace computes in the time the longest wait leaves."""
    left_s = limits.max_lag_s - backlog.longest_wait_s
    if left_s <= 0:
        return 0.0
    if seconds_per_token is None:
        return limits.max_backlog_tokens
    return min(limits.max_backlog_tokens, left_s / max(seconds_per_token, 1e-9))


def over_bound(backlog: Backlog, seconds_per_token: float | None, limits: ShedLimits, times: float = 1.0) -> str | None:
    """Why the backlog is past ``times`` the bound (the limit to raise, or the load to lower); None when it is not."""
    if backlog.pending_tokens > times * limits.max_backlog_tokens:
        return f"{backlog.pending_tokens} tokens pending (limits.max_backlog_tokens {limits.max_backlog_tokens})"
    lag_s = projected_lag_s(backlog, seconds_per_token)
    if lag_s > times * limits.max_lag_s:
        computing = f", {backlog.pending_tokens} tokens to compute at the recent pace" if seconds_per_token else ""
        waited = (f"the oldest accepted {backlog.oldest_wait_s:.1f} s so far"
                  if backlog.oldest_wait_s >= backlog.read_wait_s else
                  f"read after waiting {backlog.read_wait_s:.1f} s")
        return f"data would wait {lag_s:.1f} s ({waited}{computing}; limits.max_lag_s {limits.max_lag_s:g})"
    return None


def shed_reason(stream: str | None, backlog: Backlog, seconds_per_token: float | None, limits: ShedLimits,
                shed_now: set[str]) -> str | None:
    """Why a tick of ``stream`` is refused now; None to accept it. ``shed_now``: the streams refused for their
    share since the engine's backlog went past the bound (they stay refused until it is within it again: emptied,
    and it is cleared); a stream refused for its share joins it. Past the bound by the tick's wait before its read
    alone, it is not kept there: that wait is the queue's it came in (a quiet feed's own connection is read at once),
    and a quiet stream once at its share would stay refused for as long as a flood's queue takes to read."""
    why = over_bound(backlog, seconds_per_token, limits)
    read = backlog._replace(read_wait_s=0.0)  # what the engine holds, the tick's own wait aside
    if why is None or over_bound(read, seconds_per_token, limits) is None:
        shed_now.clear()
    if why is None:
        return None
    if stream is None or (hard := over_bound(read, seconds_per_token, limits, HARD_LIMIT)) is not None:
        return why if stream is None else f"{hard}, past {HARD_LIMIT:g} times the bound: every stream refused"
    budget = budget_tokens(backlog, seconds_per_token, limits)
    share = budget / max(1, backlog.streams_waiting)
    if stream not in shed_now and backlog.stream_tokens < share:
        return None
    if backlog.stream_tokens > 0:  # (a stream holding nothing is no heavy one: a flood of names stays unkept)
        shed_now.add(stream)
    if budget == 0:  # the oldest accepted tick, or this one before its read, waited the whole bound: no share
        return why
    return (f"{why}; stream {quoted(stream)} holds {backlog.stream_tokens} of the tokens waiting, its share being "
            f"{share:.0f} ({backlog.streams_waiting} streams waiting)")


class ShedCounts:
    """Ticks refused as `overloaded`, by stream: the SHED_STREAMS_KEPT most refused kept (a new stream past them
    takes the place of the least refused one, counted from then), so a flood of names costs bounded memory."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, stream: str, ticks: int) -> None:
        if stream not in self._counts and len(self._counts) >= SHED_STREAMS_KEPT:
            del self._counts[min(self._counts, key=self._counts.__getitem__)]
        self._counts[stream] = self._counts.get(stream, 0) + ticks

    def most(self, n: int = SHED_STREAMS_SAID) -> dict[str, int]:
        """The ``n`` most refused streams, most first."""
        return dict(sorted(self._counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n])


class Shedding:
    """One engine's shedding state: the recent pace, the streams refused for their share, the counts."""

    def __init__(self, max_lag_s: float, max_backlog_tokens: int) -> None:
        self.limits = ShedLimits(max_lag_s, max_backlog_tokens)
        self.pace = ForwardPace()  # tokens the recent forwards took off the backlog, and how long they took
        self.shed_now: set[str] = set()
        self.counts = ShedCounts()
        # stream held -> its ticks refused as overloaded since its last accepted one: shedding refuses a burst's
        # newest ticks, so the stream's latest answer is about its state before them (review376 #13); an `ask` or
        # `get` on it says so (refused_caveat), until a tick of it is accepted again
        self.newer_refused: dict[str, int] = {}

    def refused(self, stream: str, ticks: int) -> None:
        self.newer_refused[stream] = self.newer_refused.get(stream, 0) + ticks

    def accepted(self, stream: str) -> None:
        if self.newer_refused:
            self.newer_refused.pop(stream, None)

    def refused_caveat(self, stream: str) -> list[dict[str, str]]:
        """The `shed_newer` caveat of a stream whose newest ticks were refused (none when none was)."""
        refused = self.newer_refused.get(stream)
        if not refused:
            return []
        return [{"kind": "shed_newer", "text": (
            f"{refused} tick{'s' if refused != 1 else ''} of {quoted(stream)} newer than the last one accepted "
            f"{'were' if refused != 1 else 'was'} refused as overloaded (limits.when_behind: shed; the feed was told "
            f"on _rejects/): this answer is about the stream as of its data_ts, before them, not its latest state; "
            f"it stays so until a tick of the stream is accepted again")}]

    def refusal(self, stream: str | None, backlog: Backlog) -> InvalidTick | None:
        why = shed_reason(stream, backlog, self.pace.seconds_per_token, self.limits, self.shed_now)
        return None if why is None else InvalidTick("overloaded", f"the engine is behind: {why}; when_behind: shed",
                                                    stream)
