"""answers.adapt: what a backtest (and so serving, the same TickPipeline) publishes is queries/adapt.py's mix of the
model's own answer, fed the labels the stream's marks give: the offline path over the same answers agrees."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from conftest import tiny_tick_checkpoint
from connectors.builtin import load_codec
from connectors.labels import NO_LABEL, marks_of, label_series
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.backtest import run_backtest
from engine.service.config import ConfigError, ServiceConfig
from queries.adapt import adapt_series

# one worker takes the whole module under `pytest -n` (`--dist loadgroup`): the `runs` fixture
# (its two backtests) is built once, not once per worker that got one of its tests
pytestmark = pytest.mark.xdist_group("answer_adaptation")

QUERIES = """
queries:
  - {name: dir, streams: ["*"], question: direction_5, kind: choice, trigger: batch}
  - {name: move, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {ticks: 3}}
  - {name: up, streams: ["*"], question: direction_5, kind: choice, choices: [up, down], trigger: batch}
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapt")
    checkpoint = tiny_tick_checkpoint(root / "model", seed=5, max_position_embeddings=256)
    (root / "q.yaml").write_text(QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=21)).next_batch(1000)  # ~250 a stream: over 50 answers of each query
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "ticks.parquet")
    tables = {}
    for mode in ("online", "off"):
        config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
                                          "answers": {"adapt": mode}})
        report = run_backtest(config, [root / "ticks.parquet"], root / "q.yaml", root / f"{mode}.parquet",
                              batch_ms=100, progress=False)
        tables[mode] = (pl.read_parquet(root / f"{mode}.parquet").sort(["query", "stream", "seq"]), report)
    return tables, ticks, load_codec(checkpoint)


def test_published_answers_are_the_offline_mix_of_the_models(runs) -> None:
    tables, ticks, codec = runs
    table = tables["online"][0]
    for query, question in (("dir", "direction_5"), ("move", "move_bps_50"), ("up", "direction_5")):
        spec = codec.questions[question].spec
        for stream in sorted(set(table["stream"])):
            rows = table.filter((pl.col("query") == query) & (pl.col("stream") == stream))
            model = [json.loads(p) for p in rows["model_probs"]]
            labels = list(model[0])  # the query's own label order
            published = np.array([[json.loads(p)[name] for name in labels] for p in rows["probs"]])  # (n, C)
            points = rows["ticks"].to_numpy()
            marks = marks_of([t for t in ticks if t.stream == stream])
            by_tick = label_series(spec, marks)  # label of the point after tick i+1
            order = {k: labels.index(name) if name in labels else NO_LABEL for k, name in enumerate(spec.labels)}
            by_point = np.array([NO_LABEL] + [order[k] if k != NO_LABEL else NO_LABEL for k in by_tick])
            offline = adapt_series(points, np.array([[m[name] for name in labels] for m in model]), by_point,
                                   start=int(points[0]), horizon=spec.horizon)
            np.testing.assert_allclose(published, offline, rtol=0, atol=1e-9)  # labels of a slice vs the whole
            np.testing.assert_allclose(published[0], [model[0][name] for name in labels], atol=1e-12)  # cold
            assert len(rows) > 50


def test_off_publishes_the_models_answer(runs) -> None:
    tables, _, _ = runs
    online, off = tables["online"][0], tables["off"][0]
    assert off["model_probs"].null_count() == off.height
    assert online.select("query", "stream", "seq", "ticks").equals(off.select("query", "stream", "seq", "ticks"))
    for adapted, plain in zip(online["model_probs"], off["probs"]):  # adaptation leaves the model's part alone
        assert json.loads(adapted) == pytest.approx(json.loads(plain), abs=1e-6)
    changed = sum(a != b for a, b in zip(online["probs"], off["probs"]))
    assert changed > online.height // 2


def test_backtest_reports_model_and_adapted_scores(runs) -> None:
    tables, _, _ = runs
    online, off = tables["online"][1], tables["off"][1]
    for adapted, plain in zip(online.scores, off.scores):
        assert adapted.model_brier == pytest.approx(plain.brier, abs=1e-6)
        assert adapted.model_accuracy == pytest.approx(plain.accuracy, abs=1e-3)
        assert plain.model_brier is None
    assert "model brier" in online.summary()


def test_config_switch_is_checked() -> None:
    with pytest.raises(ConfigError, match="answers.adapt must be one of"):
        ServiceConfig.from_dict({"answers": {"adapt": "yes"}})
    with pytest.raises(ConfigError, match="adapt_rate"):
        ServiceConfig.from_dict({"answers": {"adapt_rate": 1}})
    assert ServiceConfig().answers.adapt == "online"


def test_an_expectation_is_built_alike_adapted_or_not(runs) -> None:
    """`expected` was built in two places: the model's answer as a Python sum over its labels
    (queries/probe_answers.answer_value), the adapted one with numpy's dot (adaptation._published); the two sums
    differ in the last bit on some vectors. Both are now queries.probe_answers.published_value's: the published
    probabilities' dot with the values, in the query's label order, exactly, adapted or not. (A guard: on these
    answers the two sums agreed before too, the model's probabilities being float32's.)"""
    tables, _, codec = runs
    spec = codec.questions["move_bps_50"].spec  # the query asks it as it is: its labels, in the question's order
    for mode in ("online", "off"):
        rows = tables[mode][0].filter(pl.col("query") == "move")
        assert rows.height > 50
        for probs, expected in zip(rows["probs"], rows["expected"]):
            published = json.loads(probs)  # (the answers file's JSON sorts its keys)
            p = np.array([published[name] for name in spec.labels])
            assert expected == float(p @ np.asarray(spec.values, dtype=np.float64)), (mode, published, expected)
