"""Context rolls staggered per stream: streams that fill up together (a venue's open, a restart) roll in
different forwards (the first roll of each comes early by its own stable share; later ones at the window's
roll point, the phase kept), and the benchmarks' peers cut where the scheduler does."""

from __future__ import annotations

import random

from benchmarks.streaming_sides import TokenLog, Window
from conftest import tiny_engine, tiny_hf_model
from engine.context_rolls import roll_points
from engine.scheduler import SchedulerConfig

CONFIG = SchedulerConfig(window=256, probe_reserve=4, max_batch_tokens=4096)


def test_roll_points_are_stable_per_stream_and_spread_over_the_span() -> None:
    names = [f"VENUE.SYM{i:03d}" for i in range(200)]
    points = [roll_points(name, roll_at=508, keep=256) for name in names]
    assert points == [roll_points(name, roll_at=508, keep=256) for name in names]  # hashed, not random
    rolls, keeps = zip(*points)
    assert all(508 - 126 < r <= 508 for r in rolls) and all(256 - 64 < k <= 256 for k in keeps)
    assert len(set(rolls)) > 80 and len(set(keeps)) > 40  # spread, not a handful of values
    assert all(r - k > 0 for r, k in points)  # every stream still adds tokens between rolls
    sink_rolls, sink_keeps = roll_points("X", roll_at=100, keep=50, sink=40)
    assert 40 + sink_keeps < sink_rolls <= 100  # the sink stays inside the rule


def test_streams_filling_up_together_roll_in_different_forwards() -> None:
    engine = tiny_engine(tiny_hf_model(), cells=16 * 300, scheduler=CONFIG)
    streams = [f"S{i:02d}" for i in range(16)]
    first_roll: dict[str, int] = {}
    for step in range(100):  # every stream gets the same 4 tokens a step, in lockstep
        before = {s: len(engine.scheduler.streams[s].session.tokens) for s in streams} if step else {}
        for s in streams:
            engine.submit(s, [1 + step % 7, 2, 3, 4], step + 1)
        engine.run_until_idle()
        for s in streams:
            state = engine.scheduler.streams[s]
            assert len(state.session.tokens) <= state.roll_at  # never past its own roll point
            if step and len(state.session.tokens) < before[s] and s not in first_roll:
                first_roll[s] = step
                assert len(state.session.tokens) <= state.keep  # kept at most its own share
                assert state.roll_at == engine.scheduler.roll_at  # only the first roll comes early
    assert set(first_roll) == set(streams)
    per_forward = [list(first_roll.values()).count(step) for step in set(first_roll.values())]
    assert len(per_forward) >= 8 and max(per_forward) <= 4  # one roll point for all would be 16 in one forward


def test_the_benchmark_peers_cut_where_the_scheduler_does() -> None:
    """benchmarks/streaming_sides.TokenLog (llama.cpp's and the stateless side's context) against the
    scheduler's own rolls, booked by ``restore`` over the same chunks: the same tokens after every chunk."""
    engine = tiny_engine(tiny_hf_model(), cells=4096, scheduler=CONFIG)
    scheduler = engine.scheduler
    window = Window(scheduler.window, scheduler.roll_at, scheduler.keep)
    rng = random.Random(3)
    logs = {name: TokenLog(window, name) for name in ("A", "BB", "VENUE.C", "D-4")}
    for ts in range(1, 1200):
        name = rng.choice(sorted(logs))
        chunk = [rng.randrange(1, 100) for _ in range(rng.randint(1, 9))]
        scheduler.restore(name, chunk, ts)
        logs[name].take([chunk])
        assert logs[name].tokens == scheduler.streams[name].session.tokens
    assert scheduler.stats.rolls > 30
