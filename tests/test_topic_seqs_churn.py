"""Topic seqs of queries no longer registered (fix353): a removed query's topics stay numbered and listed while the
gap-fill history keeps answers of them (the `answers` op and a resuming client's `topics` still find them), then go,
their seqs under the floor that keeps every seq from being handed out twice; a restart does the same for the
queries it no longer holds. Register/remove churn keeps the seqs held bounded. Real parts: a tiny model built from a
config, a real data directory, the real pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import tiny_tick_checkpoint
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from queries.yaml_loader import load_queries

KEEP = 24  # log.answers_keep: the history a gap fill reads


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("churn") / "model")


def config(checkpoint: Path, data_dir: Path) -> ServiceConfig:
    return ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
                                    "log": {"dir": str(data_dir), "answers_keep": KEEP}, "answers": {"adapt": "off"}})


def register(pipeline: TickPipeline, name: str, topic: str = "{query}/{stream}/") -> None:
    text = f"queries:\n  - {{name: {name}, streams: ['*'], question: direction_20, kind: choice, trigger: batch, " \
           f"topic: '{topic}'}}\n"
    pipeline.register_queries(load_queries(text, "q.yaml", pipeline.registry.questions))


def answered(pipeline: TickPipeline, market: SyntheticMarket) -> list:
    assert pipeline.ingest_message(encode(market.next_batch(8))) == []
    return pipeline.run_until_idle()


def test_register_remove_churn_keeps_the_seqs_held_bounded_and_never_reuses_one(checkpoint: Path,
                                                                                tmp_path: Path) -> None:
    pipeline = TickPipeline(config(checkpoint, tmp_path / "data"))
    market = SyntheticMarket(SyntheticConfig(seed=2))
    register(pipeline, "stays")
    held = []
    last_of_first: dict[str, int] = {}
    for i in range(60):
        register(pipeline, f"q{i}")
        answers = answered(pipeline, market)
        assert {a.query for a in answers} == {"stays", f"q{i}"}
        if i == 0:
            last_of_first = {a.topic: a.seq for a in answers if a.query == "q0"}
        pipeline.unregister_queries([f"q{i}"])
        held.append(pipeline.cache.topics_numbered)
    # the four topics of `stays`, those the history of KEEP answers still holds: never more, however many came
    assert max(held) <= 4 + KEEP and held[-1] == held[-10], held
    assert len(pipeline.cache._forgotten) <= KEEP
    # a removed query's topic the history still keeps: listed, numbered, filled
    newest = f"q59/{answers[0].stream}/"
    first = pipeline.cache.first_seq(newest)  # begun past the seqs forgotten: nothing of it before
    kept, complete = pipeline.history.after(newest, first - 1, 100)
    assert first > 1 and kept and kept[0]["seq"] == first and complete
    assert pipeline.cache.last_seq(newest) == kept[-1]["seq"]
    # said as no registered query's, not as a forgotten stream's or a replaced query's (review397 #4)
    assert pipeline.cache.topics("q59/")[newest]["retired"] is True
    assert not any("retired" in info for info in pipeline.cache.topics("stays/").values())
    assert "q0/" not in "".join(pipeline.cache.topics())  # long gone from the history: gone here too
    register(pipeline, "q0")  # again, under its name: its topics' seqs go on past every seq handed out before
    again = [a for a in answered(pipeline, market) if a.query == "q0"]
    assert any(a.topic in last_of_first for a in again)
    assert all(a.seq > last_of_first.get(a.topic, 0) for a in again)
    pipeline.close()


def test_a_restart_retires_the_topics_of_queries_it_no_longer_holds(checkpoint: Path, tmp_path: Path) -> None:
    first = TickPipeline(config(checkpoint, tmp_path / "data"))
    market = SyntheticMarket(SyntheticConfig(seed=3))
    register(first, "gone", topic="alerts/{query}/{stream}/")
    register(first, "stays")
    seqs = {a.topic: a.seq for _ in range(3) for a in answered(first, market)}
    assert {t.split("/")[0] for t in seqs} == {"alerts", "stays"}
    first.unregister_queries(["gone"])
    for _ in range(KEEP):  # `stays` answers (one a round at least) push every answer of `gone` out of the history
        answered(first, market)
    first.close()
    restarted = TickPipeline(config(checkpoint, tmp_path / "data"))
    assert restarted.cache.topics("alerts/") == {} and set(restarted.cache.topics("stays/")) == {
        t for t in seqs if t.startswith("stays/")}
    register(restarted, "gone", topic="alerts/{query}/{stream}/")
    back = [a for a in answered(restarted, market) if a.query == "gone"]
    assert any(a.topic in seqs for a in back)
    assert all(a.seq > seqs.get(a.topic, 0) for a in back)  # never a seq handed out before the restart
    restarted.close()
