"""A seeded synthetic market with hidden state a model can learn and a test can check.

Each stream is an independent Markov simulation (seeded per stream from the
market seed), so a stream's ticks do not depend on which other streams run:

* regime: calm <-> volatile (persistent Markov switching). Volatile means faster
  and burstier arrivals, more and larger mid moves, wider spreads, bigger trades.
* phase: mean-reverting (pull towards an anchor), trending up or trending down.
  The phase sets a bias on the direction of the next mid move; the displayed
  book imbalance and the trade aggressor side both lean with that bias.
* arrivals: exponential gaps mixed with short bursts (a few ms).
* bid/ask bounce: trades print at the bid or the ask, quotes move the mid.

`SyntheticMarket.events()` merges streams in event-time order (ties by stream
index) and never ends; `next_batch(n)` hands out the next n ticks without
blocking, and `generate(n)` returns ticks plus the hidden `Truth` per tick.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import random
import time
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

from connectors.ticks import QUOTE, TRADE, Tick
from engine.quoting import quoted, quoted_list

CALM, VOLATILE = 0, 1
REVERT, TREND_UP, TREND_DOWN = 0, 1, 2
PHASES = ("revert", "trend_up", "trend_down")


@dataclass(frozen=True)
class StreamParams:
    """One instrument: its name, starting price and tick size."""

    name: str
    price: float
    tick_size: float

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("stream name must be non-empty")
        if not (self.price > 0 and self.tick_size > 0 and self.tick_size < self.price):
            raise ValueError(f"stream {quoted(self.name)}: need 0 < tick_size < price, got {self.tick_size}, "
                             f"{self.price}")


DEFAULT_STREAMS = (
    StreamParams("SYN.A", 100.0, 0.01),  # 1 bp ticks
    StreamParams("SYN.B", 50.0, 0.01),  # 2 bp ticks
    StreamParams("SYN.C", 2000.0, 0.05),  # 0.25 bp ticks
    StreamParams("SYN.D", 1.1, 0.00001),  # FX-like, ~0.09 bp ticks
)




def stream_set(count: int) -> tuple[StreamParams, ...]:
    """``count`` streams for a feed or a load test: the first of DEFAULT_STREAMS (SYN.A .. SYN.D), then `SYN.5`,
    `SYN.6`, ... taking the defaults' prices and tick sizes in turn (an FX-like stream every fourth)."""
    if count < 1:
        raise ValueError(f"need at least one stream, got {count}")
    extra = (StreamParams(f"SYN.{i + 1}", DEFAULT_STREAMS[i % len(DEFAULT_STREAMS)].price,
                          DEFAULT_STREAMS[i % len(DEFAULT_STREAMS)].tick_size)
             for i in range(len(DEFAULT_STREAMS), count))
    return (*DEFAULT_STREAMS[:count], *extra)


# Where a market started "now" starts its event time: a year before the clock. The market keeps its own pace (~31
# ticks a second of event time for the default streams), so a feed sending 1,000 ticks/s runs event time ~32x the
# clock, and a live service refuses ticks stamped over limits.max_ts_ahead_s (10 s) ahead of its clock: started at
# the clock, such a feed would be refused after seconds; a year back, after ~12 days.
LIVE_START_BEHIND_NS = 365 * 86_400 * 10**9


@dataclass(frozen=True)
class SyntheticConfig:
    """Market-wide knobs; probabilities are per tick of a stream.

    `start_ts` is where event time starts (ns since the epoch). The default is a
    fixed instant, so a seed gives the same ticks on every run (tests, training,
    benchmarks). None means "now": the wall clock is read once when the market is
    built (`anchored`) and event time starts LIVE_START_BEHIND_NS before it, for a
    live feed whose event time must move on from the previous run's. The path
    relative to the start is the same either way, and so are its tokens (codecs
    see gaps, not instants).
    """

    seed: int = 0
    streams: tuple[StreamParams, ...] = DEFAULT_STREAMS
    start_ts: int | None = 1_700_000_000_000_000_000
    p_to_volatile: float = 1 / 800
    p_to_calm: float = 1 / 400
    p_phase_switch: float = 1 / 300
    quote_share: float = 0.65
    rate_hz: tuple[float, float] = (4.0, 16.0)  # (calm, volatile) mean arrival rate outside bursts
    burst_p: tuple[float, float] = (0.25, 0.5)
    burst_mean_s: float = 0.002
    move_p: tuple[float, float] = (0.3, 0.6)
    trend_bias: float = 0.25
    revert_strength: float = 0.03  # bias per tick of distance to the anchor

    def __post_init__(self) -> None:
        if not self.streams:
            raise ValueError("need at least one stream")
        names = [s.name for s in self.streams]
        if len(set(names)) != len(names):
            raise ValueError(f"stream names must be unique, got {quoted_list(names)}")
        for name in ("p_to_volatile", "p_to_calm", "p_phase_switch", "quote_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"{name} must be a probability in [0, 1], got {getattr(self, name)}")
        if min(self.rate_hz) <= 0 or self.burst_mean_s <= 0:
            raise ValueError(f"rates must be > 0, got rate_hz={self.rate_hz}, burst_mean_s={self.burst_mean_s}")
        if not 0 <= self.trend_bias < 0.5:
            raise ValueError(f"trend_bias must be in [0, 0.5), got {self.trend_bias}")
        start = self.start_ts
        if start is not None and (isinstance(start, bool) or not isinstance(start, int) or not 0 <= start < 2**62):
            raise ValueError(f"start_ts must be None (now) or an int of ns in [0, 2**62), got {quoted(start)}")

    def anchored(self) -> SyntheticConfig:
        """This config with a start_ts of None replaced by the wall clock now less LIVE_START_BEHIND_NS (a fixed
        start is kept)."""
        if self.start_ts is not None:
            return self
        return dataclasses.replace(self, start_ts=time.time_ns() - LIVE_START_BEHIND_NS)


class Truth(NamedTuple):
    """Hidden state in force when a tick was emitted."""

    regime: int  # CALM or VOLATILE
    phase: int  # REVERT, TREND_UP or TREND_DOWN

    @property
    def regime_label(self) -> str:
        return "volatile" if self.regime == VOLATILE else "calm"


@dataclass
class _Stream:
    """One stream's simulation state; prices are kept in integer ticks so they stay exact."""

    params: StreamParams
    cfg: SyntheticConfig
    rng: random.Random
    ts: int
    bid: int = 0
    spread: int = 1
    anchor: int = 0
    regime: int = CALM
    phase: int = REVERT
    emitted: int = field(default=0)

    def __post_init__(self) -> None:
        self.bid = self.anchor = round(self.params.price / self.params.tick_size)

    def _px(self, ticks: int) -> float:
        return round(ticks * self.params.tick_size, 10)

    def _bias(self) -> float:
        if self.phase == TREND_UP:
            return self.cfg.trend_bias
        if self.phase == TREND_DOWN:
            return -self.cfg.trend_bias
        return max(-0.4, min(0.4, -self.cfg.revert_strength * (self.bid - self.anchor)))

    def step(self) -> tuple[Tick, Truth]:
        cfg, rng, vol = self.cfg, self.rng, self.regime
        if rng.random() < (cfg.p_to_calm if vol else cfg.p_to_volatile):
            self.regime = vol = 1 - vol
        if rng.random() < cfg.p_phase_switch:
            self.phase, self.anchor = rng.randrange(3), self.bid
        if rng.random() < cfg.burst_p[vol]:
            gap = rng.expovariate(1 / cfg.burst_mean_s)
        else:
            gap = rng.expovariate(cfg.rate_hz[vol])
        self.ts += int(gap * 1e9)
        bias = self._bias()
        truth = Truth(vol, self.phase)
        self.emitted += 1
        if rng.random() < cfg.quote_share:
            return self._quote(bias), truth
        return self._trade(bias), truth

    def _quote(self, bias: float) -> Tick:
        rng, vol = self.rng, self.regime
        if rng.random() < self.cfg.move_p[vol]:
            size = 1 + (int(rng.expovariate(1 / 1.5)) if vol else int(rng.random() < 0.2))
            self.bid = max(1, self.bid + (size if rng.random() < 0.5 + bias else -size))
        if rng.random() < 0.3:
            self.spread = rng.choices((1, 2, 3), weights=(0.5, 0.3, 0.2) if vol else (0.85, 0.15, 0.0))[0]
        # The displayed book leans with the hidden bias: this is what makes direction learnable.
        imb = min(0.98, max(0.02, 0.5 + bias + rng.gauss(0.0, 0.15)))
        total = round(math.exp(rng.gauss(1.0 + vol, 0.6)), 3) + 0.001
        return Tick(
            self.params.name, self.ts, QUOTE,
            bid=self._px(self.bid), ask=self._px(self.bid + self.spread),
            bid_size=round(total * imb, 3), ask_size=round(total * (1 - imb), 3),
        )

    def _trade(self, bias: float) -> Tick:
        rng, vol = self.rng, self.regime
        buy = rng.random() < min(0.95, max(0.05, 0.5 + 0.8 * bias))
        price = self._px(self.bid + self.spread) if buy else self._px(self.bid)
        size = round(math.exp(rng.gauss(0.7 * vol, 1.0)), 4) + 0.0001
        return Tick(self.params.name, self.ts, TRADE, price=price, size=size, side="buy" if buy else "sell")


@dataclass
class SyntheticData:
    """Ticks of all streams in event-time order, with the hidden truth per tick."""

    ticks: list[Tick]
    truths: list[Truth]

    def by_stream(self) -> dict[str, tuple[list[Tick], list[Truth]]]:
        out: dict[str, tuple[list[Tick], list[Truth]]] = {}
        for tick, truth in zip(self.ticks, self.truths):
            ticks, truths = out.setdefault(tick.stream, ([], []))
            ticks.append(tick)
            truths.append(truth)
        return out


class SyntheticMarket:
    """Seeded multi-stream market; an endless, non-blocking source of ticks."""

    def __init__(self, config: SyntheticConfig | None = None) -> None:
        self.config = (config or SyntheticConfig()).anchored()
        seeds = random.Random(self.config.seed)
        self._streams = [
            _Stream(p, self.config, random.Random(seeds.getrandbits(64)), self.config.start_ts)
            for p in self.config.streams
        ]
        # One pending event per stream; the heap orders by (ts, stream index), so ties are deterministic.
        self._heap: list[tuple[int, int, Tick, Truth]] = []
        for i, s in enumerate(self._streams):
            tick, truth = s.step()
            heapq.heappush(self._heap, (tick.ts, i, tick, truth))
        self.emitted = 0

    def next_event(self) -> tuple[Tick, Truth]:
        _, i, tick, truth = heapq.heappop(self._heap)
        nxt, nxt_truth = self._streams[i].step()
        heapq.heappush(self._heap, (nxt.ts, i, nxt, nxt_truth))
        self.emitted += 1
        return tick, truth

    def events(self) -> Iterator[tuple[Tick, Truth]]:
        while True:
            yield self.next_event()

    def __iter__(self) -> Iterator[Tick]:
        while True:
            yield self.next_event()[0]

    def next_batch(self, max_ticks: int) -> list[Tick]:
        """The next `max_ticks` ticks; returns at once (a simulator always has data)."""
        if max_ticks < 0:
            raise ValueError(f"max_ticks must be >= 0, got {max_ticks}")
        return [self.next_event()[0] for _ in range(max_ticks)]

    def generate(self, n_ticks: int) -> SyntheticData:
        pairs = [self.next_event() for _ in range(n_ticks)]
        return SyntheticData([p[0] for p in pairs], [p[1] for p in pairs])
