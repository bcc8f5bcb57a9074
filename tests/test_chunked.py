"""Chunked evaluation: one forward advances many tick groups of a stream and answers every standing query at its
own cut, with exactly the answers of running the engine to idle after every group (fp32, 1e-4): every trigger
kind, every answer kind, across context rolls, in backtests and for live bursts."""

from __future__ import annotations

import functools
import json
import random

import polars as pl
import pytest

from conftest import tiny_tick_checkpoint
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.backtest import run_backtest as library_run_backtest
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline

# in-process runs without the calibration plot, about half of a short run's time, where a test does not read it
# (plot=True)
run_backtest = functools.partial(library_run_backtest, plot=False)

TOL = 1e-4
QUERIES = """
queries:
  - {name: dir, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: vol, streams: ["*"], question: volatility_50, kind: choice, trigger: {ticks: 7}}
  - {name: move, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {interval: 700ms}}
  - {name: nll, streams: ["*"], kind: surprise, trigger: batch}
  - {name: gen, streams: ["SYN.A", "SYN.C"], question: direction_5, kind: generate, max_tokens: 3,
     trigger: {ticks: 10}}
  - {name: asked, streams: ["*"], question: direction_5, kind: choice, trigger: on_demand}
"""


# the tests share the module's checkpoint and ticks (setup) and the slow feed's answers (slow_feed), which they only
# read: `--dist loadgroup` keeps them on one worker, which builds each once
pytestmark = pytest.mark.xdist_group("test_chunked")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("chunked")
    # 256 positions: sessions roll every few dozen ticks
    checkpoint = tiny_tick_checkpoint(root / "model", seed=3, max_position_embeddings=256)
    (root / "q.yaml").write_text(QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=13)).next_batch(1200)
    # the backtests' file: 600 ticks, each stream's ~150 (600 tokens) rolling its window of 256 positions again
    pl.DataFrame([t.to_wire() for t in ticks[:600]]).write_parquet(root / "ticks.parquet")
    return root, checkpoint, ticks


def config(checkpoint, cells: int = 8192, **scheduler) -> ServiceConfig:
    return ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": cells, "block_size": 16},
                                    "scheduler": scheduler})


def assert_same_values(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key, x in a.items():
        if isinstance(x, float):
            assert b[key] == pytest.approx(x, abs=TOL), key
        elif isinstance(x, dict):
            assert_same_values(x, b[key])
        else:
            assert b[key] == x, key


def test_chunked_backtest_equals_batch_by_batch(setup) -> None:
    root, checkpoint, _ = setup
    engine_config = config(checkpoint, max_batch_tokens=256)  # a forward spans ~60 ticks of 4 streams
    for name, chunked in [("chunked", True), ("batches", False)]:
        run_backtest(engine_config, [root / "ticks.parquet"], root / "q.yaml", root / f"{name}.parquet",
                     batch_ms=100, progress=False, chunked=chunked)
    chunked, batches = (pl.read_parquet(root / f"{n}.parquet").sort(["query", "stream", "seq"])
                        for n in ("chunked", "batches"))
    assert set(batches["query"]) == {"dir", "vol", "move", "nll", "gen"}
    exact = ["query", "stream", "topic", "seq", "ticks", "data_ts", "text", "realised"]
    assert chunked.select(exact).equals(batches.select(exact))
    for column in ("expected", "nll", "brier", "log_loss"):
        a, b = chunked[column].fill_null(0.0).to_numpy(), batches[column].fill_null(0.0).to_numpy()
        assert abs(a - b).max() <= TOL, column
    for a, b in zip(chunked["probs"], batches["probs"]):
        assert (a is None) == (b is None)
        if a is not None:
            assert_same_values(json.loads(a), json.loads(b))


def feed(checkpoint, ticks, burst: int, cells: int = 8192, **scheduler) -> tuple[TickPipeline, dict]:
    """Messages of 1-5 ticks (one tick group each); the engine runs after every ``burst`` messages."""
    pipeline = TickPipeline(config(checkpoint, cells, **scheduler))
    pipeline.registry.register(QUERIES)
    rng = random.Random(7)
    answers, i, messages = [], 0, 0
    while i < len(ticks):
        n = rng.randint(1, 5)
        assert pipeline.ingest_message(encode(ticks[i : i + n])) == []
        i, messages = i + n, messages + 1
        if messages % burst == 0:
            answers += pipeline.run_until_idle()
    answers += pipeline.run_until_idle()
    return pipeline, {(a.query, a.stream, a.seq): a for a in answers}


@pytest.fixture(scope="module")
def slow_feed(setup) -> tuple[TickPipeline, dict]:
    """The engine run after every message of the first 700 ticks: what each burst size is held to (read only)."""
    _, checkpoint, ticks = setup
    return feed(checkpoint, ticks[:700], burst=1)


@pytest.mark.parametrize("cells", [8192, 640], ids=["big-pool", "pool-of-two-windows"])
def test_live_bursts_answer_like_a_slow_feed(setup, slow_feed, cells: int) -> None:
    _, checkpoint, ticks = setup
    slow, slow_answers = slow_feed
    # 40 messages per burst, and budgets that bind: forwards of 96 tokens, 24 question tokens, and a KV pool
    # that holds two of the four streams' windows (sessions evicted and rebuilt between forwards)
    burst, burst_answers = feed(checkpoint, ticks[:700], burst=40, cells=cells, max_batch_tokens=96,
                                max_probe_tokens=24)
    # fewer forwards (179 vs 345 measured with rolls staggered per stream: each roll ends a stream's advance)
    assert burst.runner.stats.forwards < slow.runner.stats.forwards * (0.6 if cells == 8192 else 1)
    assert burst.engine.scheduler.stats.rolls > 0 and slow.engine.scheduler.stats.rolls > 0
    assert burst.engine.scheduler.stats.probes_deferred > 0  # the probe budget cut some chunks short
    assert (burst.engine.scheduler.stats.evictions > 0) == (cells < 8192)
    assert {a.query for a in slow_answers.values()} == {"dir", "vol", "move", "nll", "gen"}
    assert slow_answers.keys() == burst_answers.keys()
    for key, a in slow_answers.items():
        b = burst_answers[key]
        assert (a.version, a.data_ts) == (b.version, b.data_ts), key
        assert_same_values(a.value, b.value)
    for name, state in slow.engine.scheduler.streams.items():  # the sessions end alike, rolls included
        assert burst.engine.scheduler.streams[name].session.tokens == state.session.tokens


def test_an_ask_during_a_burst_waits_for_the_ticks_accepted_before_it(setup) -> None:
    """Read your writes: an ask sent after a burst is answered once every tick of its stream accepted before it is
    computed, never from part of the burst (a state partway through a tick group, which is no cut of the data);
    ticks accepted after it do not hold it back."""
    _, checkpoint, ticks = setup
    pipeline = TickPipeline(config(checkpoint, max_batch_tokens=256))  # the burst takes several forwards
    pipeline.registry.register(QUERIES)
    for i in range(0, 200, 4):
        assert pipeline.ingest_message(encode(ticks[i : i + 4])) == []
    accepted = sum(t.stream == "SYN.B" for t in ticks[:200])
    job = pipeline.flash.job_for(pipeline.registry.get("asked"), "SYN.B", ticket="t")
    pipeline.engine.ask(job)
    for i in range(200, 400, 4):  # more of the burst, after the ask
        assert pipeline.ingest_message(encode(ticks[i : i + 4])) == []
    forwards, asked = 0, []
    while not asked:
        report = pipeline.engine.step()
        forwards += 1
        asked = [o for o in report.outcomes if o.job is job]
    (advanced,) = [p for p in report.advanced if p.stream == "SYN.B"]
    assert forwards > 1  # the burst before it is longer than one forward takes
    assert asked[0].answer.version == advanced.ticks >= accepted  # no cut: after its forward's whole advance
    assert pipeline.engine.scheduler.pending_tokens() > 0  # it did not wait for the ticks sent after it


BATCH_QUERIES = """
queries:
  - {name: dir, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: move, streams: ["*"], question: move_bps_50, kind: expectation, trigger: batch}
  - {name: nll, streams: ["*"], kind: surprise, trigger: batch}
  - {name: gen, streams: ["SYN.A"], question: direction_5, kind: generate, max_tokens: 3, trigger: batch}
"""


def test_a_burst_in_one_group_computes_only_what_its_last_roll_keeps(setup) -> None:
    """Ticks queued in one open group (``ingest`` one by one, no message ends it) that a later roll of their stream
    drops are booked, not computed: a burst many windows long costs about one window, and the answers at its end
    equal those of an engine that computed every tick as it came (the same version, values within 1e-4)."""
    _, checkpoint, ticks = setup

    def run(burst: int) -> tuple[TickPipeline, dict]:
        # the model's own answers: adaptation mixes in what was published before, and the every-tick engine
        # publishes at every tick
        pipeline = TickPipeline(ServiceConfig.from_dict({"model": {"path": str(checkpoint)},
                                                         "answers": {"adapt": "off"},
                                                         "kv": {"cells": 8192, "block_size": 16}}))
        pipeline.registry.register(BATCH_QUERIES)
        answers = []
        for i, tick in enumerate(ticks[:1000]):
            pipeline.ingest(tick)
            if (i + 1) % burst == 0:
                answers += pipeline.run_until_idle()
        return pipeline, {(a.query, a.stream, a.version): a for a in answers}

    every_tick, reference = run(burst=1)
    bursts, answers = run(burst=500)  # ~125 ticks of each stream per burst: 500 tokens, windows of 256 positions
    skipped = bursts.engine.scheduler.stats.skipped_tokens
    assert every_tick.engine.scheduler.stats.skipped_tokens == 0  # one chunk queued at a time: nothing to skip
    assert skipped > 1000
    # a skip books tokens uncomputed and a roll re-encodes them: neither is a rebuild of evicted KV (each skip
    # counted as one, so a feed catching up looked like a KV pool too small)
    assert bursts.engine.scheduler.stats.evictions == bursts.engine.scheduler.stats.rebuilt_streams == 0
    computed = lambda p: p.runner.stats.tokens_advanced + p.runner.stats.tokens_rebuilt  # noqa: E731
    assert computed(bursts) < computed(every_tick) / 4  # measured 1472 tokens against 9000 (3536 skipped)
    assert {q for q, _, _ in answers} == {"dir", "move", "nll", "gen"} and len(answers) == 2 * (3 * 4 + 1)
    for key, a in answers.items():
        b = reference[key]  # the every-tick engine answered at that same tick count
        assert (a.version, a.data_ts) == (b.version, b.data_ts), key
        assert_same_values(a.value, b.value)
    for name, state in every_tick.engine.scheduler.streams.items():
        assert bursts.engine.scheduler.streams[name].session.tokens == state.session.tokens
