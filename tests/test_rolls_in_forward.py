"""Rolls inside a forward (engine/rolls_in_forward.py): a stream far behind passes several roll points in one
forward, and every answer is the one of stopping at each roll point (``scheduler.roll_inside_forward: false``),
bit for bit; the KV pool's accounting stays exact and its size is never exceeded.

Bit for bit needs kernels whose floats do not depend on the packing: the per-sequence attention path
(``ModelRunner(group_attention=False)``; the grouped path pads a sequence to what shares its bucket) and a KV
block as large as the window (a prefix read in one run: the attention merges runs, so a prefix split over
blocks in another order rounds otherwise). With the default kernels and blocks the answers agree to ~1e-6,
as any two packings of the same work do (tested below too)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from conftest import tiny_tick_checkpoint
from connectors.ticks import encode, trade
from engine.kv_cache import PoolExhausted
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline

QUERIES = """
queries:
  - {name: dir, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: move, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {ticks: 3}}
  - {name: nll, streams: ["*"], kind: surprise, trigger: batch}
  - {name: asked, streams: ["*"], question: direction_5, kind: choice, trigger: on_demand}
"""
START_NS = 1_700_000_000_000_000_000


def messages(counts: dict[str, int], seed: int, ts: int = START_NS, burst: dict[str, int] | None = None
             ) -> list[list]:
    """Trades of each stream, one a message in a seeded interleaving (each message closes its stream's tick group,
    so queries are due at every tick); then, per ``burst``, that many more of a stream in one message (one open
    group, which rolls drop uncomputed)."""
    rng = random.Random(seed)
    prices = {name: 100.0 + 10 * i for i, name in enumerate(sorted({*counts, *(burst or {})}))}

    def tick(name: str) -> object:
        nonlocal ts
        ts += rng.randrange(1, 10**8)
        prices[name] *= 1 + rng.gauss(0, 3e-4)
        return trade(name, ts, round(prices[name], 4), round(rng.uniform(0.1, 3), 3), rng.choice(("buy", "sell")))

    order = [name for name, n in counts.items() for _ in range(n)]
    rng.shuffle(order)
    out = [[tick(name)] for name in order]
    out += [[tick(name) for _ in range(n)] for name, n in (burst or {}).items()]
    return out


def pipeline(model: str | None, inside: bool, keep: float, block_size: int, cells: int,
             exact: bool = True, **scheduler) -> TickPipeline:
    config = ServiceConfig.from_dict({"model": {"path": model}, "kv": {"cells": cells, "block_size": block_size},
                                      "scheduler": {"roll_inside_forward": inside, "keep_fraction": keep,
                                                    **scheduler}})
    p = TickPipeline(config)
    p.engine.runner.group_attention = not exact
    p.registry.register(QUERIES)
    return p


def held_blocks(p: TickPipeline) -> int:
    """Blocks the streams' sessions (and the shared header) hold: all the pool has lent, once a forward is
    committed (a retired segment's blocks are back)."""
    scheduler = p.engine.scheduler
    sessions = [s.session for s in scheduler.streams.values()] + ([scheduler.header] if scheduler.header else [])
    return len({b for session in sessions for b in session.blocks})


def drain(p: TickPipeline) -> tuple[list, list[Counter]]:
    """Every answer until idle, stepping the loop's three calls, and per forward each stream's segments."""
    engine, answers, segments = p.engine, [], []
    while (plan := engine.scheduler.plan()) is not None:
        segments.append(Counter(state.name for state in plan.streams))
        report = engine.scheduler.commit(plan, engine.runner.run(plan.forward))
        answers += [o.answer for o in report.outcomes if o.error is None]
        pool = engine.scheduler.pool
        pool.check()
        assert pool.num_blocks - pool.num_free == held_blocks(p)  # no retired block left behind
    assert engine.scheduler.stats.late_evictions == 0  # every segment was fitted as it was planned
    return answers, segments


def feed_and_drain(p: TickPipeline, batch: list[list]) -> tuple[list, list[Counter]]:
    for message in batch:
        assert p.ingest_message(encode(message)) == []
    return drain(p)


def answer_rows(answers: list) -> dict:
    return {(a.query, a.stream, a.seq): (a.value, a.version, a.data_ts) for a in answers}


def run_both(model: str | None, keep: float, window: int, exact: bool, block_size: int | None = None,
             cells: int | None = None, **scheduler) -> dict[bool, dict]:
    """The same feed through both paths: a backlog, then a fork and probe of a busy session and an ask, then more
    backlog ending in a burst of one message."""
    # sized to the window so that one forward rolls BUSY 3+ times, MID once and QUIET never
    part1 = messages({"BUSY": 260, "MID": 110, "QUIET": 4} if window >= 512 else {"BUSY": 120, "MID": 48, "QUIET": 4},
                     seed=1)
    part2 = messages({"BUSY": 30, "MID": 20, "QUIET": 2}, seed=2, ts=START_NS + 10**12, burst={"BUSY": 200})
    runs = {}
    for inside in (False, True):
        p = pipeline(model, inside, keep, block_size or window, cells or 64 * window, exact, **scheduler)
        answers, segments = feed_and_drain(p, part1)
        engine = p.engine
        busy = engine.scheduler.streams["BUSY"].session
        fork = engine.fork(busy, "BUSY-fork")
        question = busy.tokens[-5:] + busy.tokens[:3]
        probed = (engine.probe(fork, question), engine.probe(busy, question))
        engine.evict(fork)
        engine.ask(p.flash.job_for(p.registry.get("asked"), "MID", ticket="t"))
        more, more_segments = feed_and_drain(p, part2)
        pool = engine.scheduler.pool
        tokens = {name: list(state.session.tokens) for name, state in engine.scheduler.streams.items()}
        for name in list(engine.scheduler.streams):
            engine.scheduler.drop(name)
        runs[inside] = {"answers": answers + more, "segments": segments + more_segments, "probed": probed,
                        "tokens": tokens, "stats": dict(vars(engine.scheduler.stats)),
                        "free_after_drop": pool.num_free, "pool_blocks": pool.num_blocks,
                        "header_blocks": len(engine.scheduler.header.blocks) if engine.scheduler.header else 0}
    return runs


MODELS = {"builtin": (None, 512), "tiny-llama": ("tiny", 256)}

# the tests share the module's tiny checkpoint and the probe-budget runs, which they only read: `--dist loadgroup`
# keeps them on one worker, which builds each once
pytestmark = pytest.mark.xdist_group("test_rolls_in_forward")


@pytest.fixture(scope="module")
def probe_budget_runs() -> dict[bool, dict]:
    """Both paths under a probe budget that runs out inside the rolled segments (read by two tests)."""
    return run_both(None, 0.5, 512, exact=True, max_probe_tokens=100)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("rolls_in_forward") / "model", seed=3,
                                max_position_embeddings=256)


@pytest.mark.parametrize("keep", [0.5, 0.25])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_rolls_inside_a_forward_give_the_answers_of_one_roll_per_forward_bit_for_bit(model, keep, tiny_model) -> None:
    path, window = MODELS[model]
    runs = run_both(str(tiny_model) if path == "tiny" else None, keep, window, exact=True)
    old, new = runs[False], runs[True]
    assert old["answers"] and answer_rows(new["answers"]) == answer_rows(old["answers"])  # == on floats: same bits
    assert all(torch.equal(a, b) for a, b in zip(new["probed"], old["probed"]))  # the fork and the probe between
    assert new["tokens"] == old["tokens"]  # the sessions end alike, rolls included
    assert new["stats"]["rolls"] == old["stats"]["rolls"] and new["stats"]["skipped_tokens"] == old["stats"][
        "skipped_tokens"] > 0  # the burst's dropped ticks are skipped on both paths
    assert old["stats"]["rolls_in_forward"] == 0 < new["stats"]["rolls_in_forward"]
    assert len(new["segments"]) < len(old["segments"])
    assert max(max(c.values()) for c in old["segments"]) == 1  # the old path: one segment a stream a forward
    # one forward in which streams roll 0, 1 and 3 or more times
    assert any({1, 2} <= set(c.values()) and max(c.values()) >= 4 for c in new["segments"]), new["segments"]
    for run in (old, new):  # every block back: the free count is the pool's, less the shared header's
        assert run["free_after_drop"] == run["pool_blocks"] - run["header_blocks"]


def test_default_kernels_agree_to_their_rounding(tiny_model) -> None:
    """With the grouped attention and 16-cell blocks the two packings differ by rounding only: the same answers,
    labels, ticks and times, the floats within 1e-5. (On the tiny model: packings are the engine's, not the
    model's; the built-in model's rolls are test_rolls_inside_a_forward_give_the_answers_of_one_roll_per_forward's.)"""
    runs = run_both(str(tiny_model), 0.5, 256, exact=False, block_size=16, cells=16 * 1024)
    old, new = answer_rows(runs[False]["answers"]), answer_rows(runs[True]["answers"])
    assert old.keys() == new.keys()
    for key, (value, version, data_ts) in old.items():
        other = new[key]
        assert (version, data_ts) == other[1:], key
        assert value.get("answer") == other[0].get("answer"), key
        for field in ("probs", "model_probs"):
            for label, prob in (value.get(field) or {}).items():
                assert other[0][field][label] == pytest.approx(prob, abs=1e-5), key
        if "nll" in value and value["nll"] is not None:
            assert other[0]["nll"] == pytest.approx(value["nll"], abs=1e-4), key


@pytest.mark.parametrize("when_full", ["evict", "refuse"])
def test_a_small_pool_is_never_exceeded(when_full, tiny_model) -> None:
    """A pool of a few windows: a segment past a roll point needs its retired blocks and the new sequence's at
    once; where they do not fit (after eviction, under `evict`) the stream stops at its roll point. No forward
    allocates past the pool (it would raise PoolExhausted), no late eviction, every block comes back. (The tiny
    model's window of 256, 16 blocks: 200 ticks, ~800 tokens, roll it 7 times, as 400 rolled the built-in's 512.)"""
    for cells in (16 * 18, 16 * 38):  # one window and its straddled block (no room for a second), then two
        p = pipeline(str(tiny_model), True, 0.5, 16, cells, exact=False, when_full=when_full)
        try:
            answers, segments = feed_and_drain(p, messages({"BUSY": 200}, seed=4))
        except PoolExhausted as e:  # pragma: no cover - the failure this test is for
            pytest.fail(f"a forward went past the pool: {e}")
        stats = p.engine.scheduler.stats
        assert answers and stats.late_evictions == 0
        assert (stats.rolls_in_forward > 0) == (cells > 16 * 18)  # a segment past a roll point only with room
        pool = p.engine.scheduler.pool
        for name in list(p.engine.scheduler.streams):
            p.engine.scheduler.drop(name)
        assert pool.num_free == pool.num_blocks - (len(p.engine.scheduler.header.blocks)
                                                   if p.engine.scheduler.header else 0)


def test_binding_budgets(probe_budget_runs, tiny_model) -> None:
    """A probe budget that runs out inside the rolled segments hands their rest back and still answers bit for bit;
    a token budget that ends a segment sooner than the next forward would computes a shorter sequence, the same
    answers on the same ticks within rounding. (The token budget on the tiny model's window of 256: 512 tokens a
    forward take 5 forwards where 3 do unbudgeted, 6 segments past a roll point where 7 are.)"""
    runs = probe_budget_runs
    assert runs[True]["stats"]["probes_deferred"] > 0 and runs[True]["stats"]["rolls_in_forward"] > 0
    assert answer_rows(runs[True]["answers"]) == answer_rows(runs[False]["answers"])
    runs = run_both(str(tiny_model), 0.5, 256, exact=True, max_batch_tokens=512)
    old, new = answer_rows(runs[False]["answers"]), answer_rows(runs[True]["answers"])
    assert runs[True]["stats"]["rolls_in_forward"] > 0 and old.keys() == new.keys()
    assert runs[True]["tokens"] == runs[False]["tokens"]
    for key, (value, version, data_ts) in old.items():
        assert (version, data_ts) == new[key][1:] and value.get("answer") == new[key][0].get("answer"), key
        for label, prob in (value.get("probs") or {}).items():
            assert new[key][0]["probs"][label] == pytest.approx(prob, abs=1e-5), key


def test_rolls_in_forward_counts_only_segments_a_forward_ran(probe_budget_runs) -> None:
    """A segment whose first cut the probe budget has no room for is handed back whole (the stream is rolled, its
    kept tokens prefilled by a later forward): `scheduler.rolls_in_forward` counted it anyway (5 where 2 ran). It
    counts each forward's segments past a stream's first, as the plans hold them."""
    new = probe_budget_runs[True]  # (its answers: test_binding_budgets)
    ran = sum(n - 1 for forward in new["segments"] for n in forward.values())
    assert new["stats"]["probes_deferred"] > 0 and ran > 0
    assert new["stats"]["rolls_in_forward"] == ran
