"""A process that froze its own heap (an app forking its workers from a frozen heap, as ``gc.freeze``'s documentation
advises; this test session, conftest's _libraries_frozen) keeps it frozen through a backtest or a service of ours:
their freeze_heap leaves such a heap as it is and their thaw unfreezes only what they froze. A backtest's thaw
once unfroze the app's whole heap. Real files, the tiny tick model."""

from __future__ import annotations

import gc

import polars as pl

from conftest import engine_dir, heap_thawed_for_this_test, shared_tiny_tick_checkpoint
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.backtest import run_backtest
from engine.service.config import ServiceConfig
from engine.service.heap_memory import freeze_heap, thaw_heap

QUERIES = "queries:\n  - {name: dir5, streams: ['*'], question: direction_5, kind: choice, trigger: {ticks: 5}}\n"


def test_a_heap_its_owner_froze_stays_frozen_through_a_backtest(tmp_path, tmp_path_factory) -> None:
    assert gc.get_freeze_count() > 10_000  # (the session's: conftest's _libraries_frozen)
    frozen = gc.get_freeze_count()
    assert freeze_heap() is False  # left as its owner has it: no collection, nothing of ours to thaw
    thaw_heap(False)
    assert gc.get_freeze_count() == frozen

    root = engine_dir(tmp_path, QUERIES, checkpoint=shared_tiny_tick_checkpoint(tmp_path_factory))
    ticks = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(60)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(tmp_path / "ticks.parquet")
    report = run_backtest(ServiceConfig.load(root / "engine.yaml"), tmp_path / "ticks.parquet", root / "q.yaml",
                          tmp_path / "answers.parquet", progress=False, plot=False)
    assert report.answers > 0
    assert gc.get_freeze_count() > 0.9 * frozen  # still frozen, less what refcounts freed (the old thaw left 0)


def test_a_heap_nobody_froze_is_frozen_by_the_caller_and_thawed_by_it() -> None:
    heap_thawed_for_this_test()
    frozen_here = freeze_heap()
    assert frozen_here and gc.get_freeze_count() > 10_000
    assert freeze_heap(ours=True) is True  # what came since joins the caller's own freeze (a shard's move)
    thaw_heap(frozen_here)
    assert gc.get_freeze_count() == 0
