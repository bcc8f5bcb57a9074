"""Scheduler.restore + Engine.rebuild (how a restart rebuilds sessions from the tick log) leave a stream where
forwards over the same chunks would: token log, rolls, boundaries, counts, and then the same surprise and the
same probe logits — whatever grouping the live run used, with sink tokens and a pool too small for all."""

from __future__ import annotations

import random

import torch

from conftest import tiny_engine, tiny_hf_model
from engine.batch import Probe
from engine.scheduler import SchedulerConfig

TOL = 1e-4


def chunks_of(seed: int, streams: int, count: int) -> list[tuple[str, list[int], int]]:
    rng = random.Random(seed)
    return [(f"S{rng.randrange(streams)}", [rng.randrange(1, 160) for _ in range(rng.randint(1, 9))], ts)
            for ts in range(1, count + 1)]


def live(model, config: SchedulerConfig, chunks, seed: int):
    """Fed as a service would: chunks arrive in random bursts, a forward after each burst."""
    engine = tiny_engine(model, cells=2048, scheduler=config)
    rng = random.Random(seed)
    i = 0
    while i < len(chunks):
        burst = rng.randint(1, 12)
        for stream, tokens, ts in chunks[i : i + burst]:
            engine.submit(stream, tokens, ts)
        i += burst
        engine.run_until_idle()
    return engine


def restored(model, config: SchedulerConfig, chunks):
    engine = tiny_engine(model, cells=2048, scheduler=config)
    for stream, tokens, ts in chunks:
        engine.scheduler.restore(stream, tokens, ts)
    engine.rebuild()
    return engine


def booked(engine) -> dict:
    return {name: (list(s.session.tokens), list(s.boundaries), s.ticks, s.event_ts)
            for name, s in engine.scheduler.streams.items()}


def test_restore_books_what_forwards_would_and_the_next_answers_match() -> None:
    model = tiny_hf_model()
    config = SchedulerConfig(window=96, sink_tokens=4, max_batch_tokens=64, probe_reserve=8)
    chunks = chunks_of(seed=1, streams=5, count=400)  # ~2000 tokens over 5 streams: many rolls each
    reference = live(model, config, chunks, seed=2)
    again = restored(model, config, chunks)
    assert reference.scheduler.stats.rolls > 10
    assert booked(again) == booked(reference)
    assert again.scheduler.stats.rebuilt_streams == 5  # all fit the pool: computed at once
    # the next chunk: same surprise (it starts from the rebuilt prediction), then the same probe logits
    for engine in (reference, again):
        for name in sorted(engine.scheduler.streams):
            engine.submit(name, [7, 8, 9], 10_000)
    outputs = []
    for engine in (reference, again):
        report = engine.step()
        surprise = {p.stream: p.surprise for p in report.advanced}
        probes = {name: engine.run([Probe(s.session, [3, 4, 5])])[0]
                  for name, s in sorted(engine.scheduler.streams.items())}
        outputs.append((surprise, probes))
    (surprise_a, probes_a), (surprise_b, probes_b) = outputs
    assert surprise_a.keys() == surprise_b.keys()
    for name in surprise_a:
        assert abs(surprise_a[name] - surprise_b[name]) < TOL * 10
        torch.testing.assert_close(probes_a[name], probes_b[name], atol=TOL, rtol=0)


def test_streams_past_the_free_pool_are_rebuilt_by_their_next_forward() -> None:
    model = tiny_hf_model()
    config = SchedulerConfig(window=96, max_batch_tokens=256, probe_reserve=8)
    chunks = chunks_of(seed=3, streams=40, count=600)
    engine = tiny_engine(model, cells=512, block_size=16, scheduler=config)  # room for a few windows only
    for stream, tokens, ts in chunks:
        engine.scheduler.restore(stream, tokens, ts)
    engine.rebuild()
    resident = [s for s in engine.scheduler.streams.values() if s.session.num_uncached == 0]
    waiting = [s for s in engine.scheduler.streams.values() if s.session.num_uncached]
    assert resident and waiting  # rebuilt what fits, evicted nothing
    name = waiting[0].name
    expected = tiny_engine(model, cells=2048, scheduler=config)
    for stream, tokens, ts in chunks:
        if stream == name:
            expected.submit(stream, tokens, ts)
            expected.run_until_idle()
    engine.submit(name, [5], 10_000)
    expected.submit(name, [5], 10_000)
    engine.run_until_idle()
    expected.run_until_idle()
    state, want = engine.scheduler.streams[name], expected.scheduler.streams[name]
    torch.testing.assert_close(engine.run([Probe(state.session, [1, 2])])[0],
                               expected.run([Probe(want.session, [1, 2])])[0], atol=TOL, rtol=0)
