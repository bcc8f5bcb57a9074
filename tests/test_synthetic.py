"""Synthetic market: seeded reproducibility, event-time order, labels consistent with the ticks."""

from __future__ import annotations

import numpy as np
import pytest

from connectors.codec import BinnedCodec
from connectors.labels import MarkTracker, label_series, marks_of, persistence_series, realised_label
from connectors.synthetic import LIVE_START_BEHIND_NS, VOLATILE, SyntheticConfig, SyntheticMarket
from connectors.ticks import decode, encode, validate


def test_same_seed_same_market_other_seed_other_market() -> None:
    a = SyntheticMarket(SyntheticConfig(seed=3)).generate(3000)
    b = SyntheticMarket(SyntheticConfig(seed=3)).generate(3000)
    c = SyntheticMarket(SyntheticConfig(seed=4)).generate(3000)
    assert a.ticks == b.ticks and a.truths == b.truths
    assert a.ticks != c.ticks


def test_ticks_are_valid_and_in_event_time_order() -> None:
    market = SyntheticMarket(SyntheticConfig(seed=5))
    ticks = market.next_batch(2000) + list(next(iter(market)) for _ in range(10))
    assert [t.ts for t in ticks] == sorted(t.ts for t in ticks)
    for t in ticks:
        assert validate(t.to_wire()) == t
    assert decode(encode(ticks)).ticks == ticks
    assert {t.stream for t in ticks} == {s.name for s in market.config.streams}


def test_hidden_regime_is_visible_in_the_ticks() -> None:
    data = SyntheticMarket(SyntheticConfig(seed=11)).generate(40_000)
    for ticks, truths in data.by_stream().values():
        reg = np.array([t.regime for t in truths])
        assert 0.05 < reg.mean() < 0.95  # both regimes occur
        gaps = np.diff([t.ts for t in ticks])
        marks = marks_of(ticks)
        absret = np.abs(np.diff(np.log(marks)))
        vol = reg[1:] == VOLATILE
        # Volatile means faster arrivals and bigger moves, as documented.
        assert gaps[vol].mean() < 0.7 * gaps[~vol].mean()
        assert absret[vol].mean() > 1.5 * absret[~vol].mean()


def test_labels_consistent_with_ticks_and_single_point_api() -> None:
    codec = BinnedCodec()
    data = SyntheticMarket(SyntheticConfig(seed=2)).generate(6000)
    ticks, truths = data.by_stream()["SYN.B"]
    marks = marks_of(ticks)
    regimes = np.array([t.regime for t in truths])
    rng = np.random.default_rng(0)
    for q in codec.questions.values():
        series = label_series(q.spec, marks, regimes)
        h = q.horizon
        if h:
            assert (series[len(ticks) - h :] == -1).all() and (series[: len(ticks) - h] >= 0).all()
        for i in rng.integers(0, len(ticks), 40):
            tracker = MarkTracker()
            for t in ticks[: i + 1]:
                tracker.update(t)
            label = realised_label(q, ticks[i + 1 :], tracker, truths[i].regime_label)
            expected = None if series[i] < 0 else q.labels[series[i]]
            assert label == expected, (q.name, i)
    direction = codec.questions["direction_20"].spec
    i = 100
    move = marks[i + 20] - marks[i]
    assert direction.labels[label_series(direction, marks)[i]] == ("up" if move > 0 else "down" if move < 0 else "flat")
    persist = persistence_series(direction, marks)
    assert persist[i + 20] == label_series(direction, marks)[i] and (persist[:20] == -1).all()


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="quote_share must be a probability"):
        SyntheticConfig(quote_share=1.5)
    with pytest.raises(ValueError, match="max_ticks must be >= 0"):
        SyntheticMarket().next_batch(-1)


def test_a_live_feed_at_1000_ticks_a_second_stays_within_the_services_clock_bound_for_days() -> None:
    """`flashtick feed synthetic` (1,000 ticks/s by default) runs event time ~32x the clock; started at the clock it
    passed serve's limits.max_ts_ahead_s (a day ahead) after ~45 minutes and every tick after was refused."""
    from engine.service.config import LimitsSection

    ticks = SyntheticMarket(SyntheticConfig(seed=0)).next_batch(20_000)
    market_rate = len(ticks) / ((ticks[-1].ts - ticks[0].ts) / 1e9)  # ticks a second of event time
    lead_per_s = 1000 / market_rate - 1  # seconds of event time gained on the clock per second sent
    seconds_to_limit = (LIVE_START_BEHIND_NS + LimitsSection().max_ts_ahead_ns) / 1e9 / lead_per_s
    assert seconds_to_limit > 7 * 86_400


def test_start_now_anchors_event_time_once_and_keeps_the_seeded_path() -> None:
    """start_ts=None starts a year before the wall clock (a live feed runs event time faster than the clock, and a
    service refuses ticks far ahead of its own); the path relative to its start, and so its tokens, are the seed's."""
    import dataclasses
    import time

    from connectors.source import SyntheticSource

    fixed = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(500)
    before = time.time_ns()
    live = SyntheticSource(SyntheticConfig(seed=3, start_ts=None))
    start = live.config.start_ts
    assert before - LIVE_START_BEHIND_NS <= start <= time.time_ns() - LIVE_START_BEHIND_NS
    ticks = live.next_batch(500)
    shift = start - SyntheticConfig().start_ts
    assert ticks == [dataclasses.replace(t, ts=t.ts + shift) for t in fixed]
    codec = BinnedCodec()
    assert codec.encode_stream(ticks) == codec.encode_stream(fixed)
    later = SyntheticSource(SyntheticConfig(seed=3, start_ts=None))  # a second live run starts later
    assert later.config.start_ts >= start
    snap = live.snapshot()
    with pytest.raises(ValueError, match="different arguments"):
        later.restore(snap)  # "now" again is another start: resuming needs the start the snapshot carries
    resumed = SyntheticSource(SyntheticConfig(seed=3, start_ts=snap["start_ts"]))
    resumed.restore(snap)
    assert resumed.next_batch(5) == live.next_batch(5)
    with pytest.raises(ValueError, match="start_ts"):
        SyntheticConfig(start_ts=-1)
