"""Answer heads (engine/service/features.py): a checkpoint's answers blended with a logistic regression on the
stream's microstructure features. The features a served stream keeps equal the batch ones evaluate uses; what a
backtest (so serving, the same TickPipeline) publishes is the blend of the model's answer at that tick; `train`
fits the heads and ships them."""

from __future__ import annotations

import json
import shutil

import numpy as np
import polars as pl
import pytest

from conftest import tiny_tick_checkpoint
from connectors.builtin import load_codec
from connectors.labels import marks_of
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.backtest import run_backtest
from engine.service.config import ConfigError, ServiceConfig
from engine.service.features import (
    FEATURES, FeatureTracker, LogisticBaseline, QuestionHead, brier, fit_head, microstructure_features, read_head,
    write_head,
)

# one worker takes the whole module under `pytest -n` (`--dist loadgroup`): the `runs` fixture
# (its three backtests) is built once, not once per worker that got one of its tests
pytestmark = pytest.mark.xdist_group("answer_head")

QUERIES = """
queries:
  - {name: dir, streams: ["*"], question: direction_5, kind: choice, trigger: batch}
  - {name: move, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {ticks: 3}}
  - {name: up, streams: ["*"], question: direction_5, kind: choice, choices: [up, down], trigger: batch}
"""


def some_head(n_classes: int, seed: int, weight: float) -> QuestionHead:
    rng = np.random.default_rng(seed)
    n = len(FEATURES)
    logistic = LogisticBaseline(rng.normal(size=n), rng.uniform(0.5, 2.0, size=n), rng.normal(size=(n, n_classes)),
                                rng.normal(size=n_classes))
    return QuestionHead(logistic, weight, 1000, 300, 0.5, 0.45)


def test_a_streams_features_tick_by_tick_equal_the_batch_ones() -> None:
    """What serving keeps per tick (FeatureTracker) is what evaluate computes over a whole file."""
    ticks = SyntheticMarket(SyntheticConfig(seed=4)).generate(6000).ticks
    for stream in ("SYN.A", "SYN.C"):
        mine = [t for t in ticks if t.stream == stream]
        marks = marks_of(mine)
        tracker = FeatureTracker()
        online = np.stack([tracker.update(t, m) for t, m in zip(mine, marks)])  # (n, F)
        np.testing.assert_allclose(online, microstructure_features(mine, marks), rtol=0, atol=1e-9)


def test_a_head_file_round_trips_and_a_damaged_one_is_refused(tmp_path) -> None:
    heads = {"direction_5": some_head(3, 1, 0.6), "move_bps_50": some_head(5, 2, 1.0)}
    write_head(tmp_path, heads, "test")
    back = read_head(tmp_path)
    assert set(back) == set(heads) and back["direction_5"].model_weight == 0.6
    x = np.random.default_rng(0).normal(size=(4, len(FEATURES)))
    p = np.full((4, 3), 1 / 3)
    np.testing.assert_allclose(back["direction_5"].blend(p, x), heads["direction_5"].blend(p, x), rtol=0, atol=1e-15)
    assert read_head(tmp_path / "nothing") == {}
    doc = json.loads((tmp_path / "answer_head.json").read_text())
    doc["features"] = doc["features"][:-1]
    (tmp_path / "answer_head.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="its features .* are not this version's"):
        read_head(tmp_path)
    doc["features"] = list(FEATURES)
    doc["questions"]["direction_5"]["model_weight"] = 1.5
    (tmp_path / "answer_head.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="model_weight must be a number in \\[0, 1\\], got 1.5"):
        read_head(tmp_path)


def test_the_blend_weight_is_the_validation_brier_minimum() -> None:
    """The regression fitted on train points, then of the grid of model weights the one with the lowest
    validation Brier (a hand scan gives the same)."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3000, len(FEATURES)))
    y = (x[:, 0] + 0.5 * rng.normal(size=3000) > 0).astype(int) + (x[:, 1] > 1).astype(int)  # 3 classes, learnable
    model = np.full((1000, 3), 1 / 3)  # a model that knows nothing: the regression should take most weight
    head = fit_head(x[:2000], y[:2000], x[2000:], y[2000:], model, 3)
    p_logistic = head.logistic.predict_proba(x[2000:])
    scan = {w: brier(w * model + (1 - w) * p_logistic, y[2000:]) for w in np.linspace(0, 1, 21)}
    assert head.model_weight == pytest.approx(min(scan, key=scan.get)) and head.model_weight < 0.5
    assert head.brier_blend == pytest.approx(scan[min(scan, key=scan.get)], abs=1e-6)
    assert head.brier_blend < head.brier_model


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same backtest with a checkpoint and with its copy that ships heads, mixing off and on."""
    root = tmp_path_factory.mktemp("head")
    plain = tiny_tick_checkpoint(root / "plain", seed=5, max_position_embeddings=256)
    headed = root / "headed"
    shutil.copytree(plain, headed)
    sizes = {q: len(load_codec(plain).questions[q].labels) for q in ("direction_5", "move_bps_50")}
    write_head(headed, {"direction_5": some_head(sizes["direction_5"], 7, 0.6),
                        "move_bps_50": some_head(sizes["move_bps_50"], 8, 0.3)}, "test")
    (root / "q.yaml").write_text(QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=21)).next_batch(600)  # ~150 a stream: dozens of answers a query
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "ticks.parquet")
    tables = {}
    for name, checkpoint, mode in (("plain", plain, "off"), ("headed", headed, "off"),
                                   ("headed_online", headed, "online")):
        config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
                                          "answers": {"adapt": mode}})
        run_backtest(config, [root / "ticks.parquet"], root / "q.yaml", root / f"{name}.parquet", batch_ms=100,
                     progress=False)
        tables[name] = pl.read_parquet(root / f"{name}.parquet").sort(["query", "stream", "seq"])
    return tables, ticks, read_head(headed), load_codec(plain)


def test_published_answers_are_the_heads_blend_of_the_models(runs) -> None:
    tables, ticks, heads, codec = runs
    plain, headed, online = tables["plain"], tables["headed"], tables["headed_online"]
    for query, question in (("dir", "direction_5"), ("move", "move_bps_50")):
        labels = list(codec.questions[question].labels)
        head = heads[question]
        for stream in sorted(set(plain["stream"])):
            mine = [t for t in ticks if t.stream == stream]
            features = microstructure_features(mine, marks_of(mine))  # (n, F): row i after tick i + 1
            rows = [t.filter((pl.col("query") == query) & (pl.col("stream") == stream)) for t in (plain, headed)]
            assert rows[0]["ticks"].to_list() == rows[1]["ticks"].to_list() and rows[0].height > 5
            model = np.array([[json.loads(p)[name] for name in labels] for p in rows[0]["probs"]])  # (n, C)
            x = features[rows[0]["ticks"].to_numpy() - 1]
            published = np.array([[json.loads(p)[name] for name in labels] for p in rows[1]["probs"]])
            np.testing.assert_allclose(published, head.blend(model, x), rtol=0, atol=1e-6)
            if query == "move":  # an expectation is read from the blended answer
                values = np.array([codec.questions[question].values[name] for name in labels])
                np.testing.assert_allclose(rows[1]["expected"].to_numpy(), published @ values, rtol=0, atol=1e-5)
            # mixing on: the model's own answer beside the mix is the blended one
            mixed = online.filter((pl.col("query") == query) & (pl.col("stream") == stream))
            own = np.array([[json.loads(p)[name] for name in labels] for p in mixed["model_probs"]])
            np.testing.assert_allclose(own, published, rtol=0, atol=1e-6)
    # a query asking a subset of the answers is answered by the model alone
    for a, b in zip(*(t.filter(pl.col("query") == "up")["probs"].to_list() for t in (plain, headed))):
        assert json.loads(a) == pytest.approx(json.loads(b), abs=1e-6)


def test_a_damaged_head_file_is_refused_at_start(tmp_path) -> None:
    """Refused by name before anything runs: bad JSON, an unknown key, a head for a question the checkpoint does
    not have (or for `regime`, which has no realised answers), a head with the wrong number of answers."""
    checkpoint = tiny_tick_checkpoint(tmp_path / "m", seed=1, max_position_embeddings=256)
    (tmp_path / "q.yaml").write_text(QUERIES)
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}})
    pl.DataFrame([t.to_wire() for t in SyntheticMarket(SyntheticConfig(seed=1)).next_batch(50)]) \
        .write_parquet(tmp_path / "t.parquet")
    write_head(checkpoint, {"direction_5": some_head(3, 1, 0.5)}, "test")
    good = json.loads((checkpoint / "answer_head.json").read_text())
    cases = [("{", "answer_head.json: not valid JSON"),
             ({**good, "extra": 1}, r'unknown keys "extra" \(known: "format", "source"'),
             ({**good, "questions": {"direction_7": good["questions"]["direction_5"]}},
              "a head for \"direction_7\", which is no question of this checkpoint"),
             ({**good, "questions": {"regime": good["questions"]["direction_5"]}}, "a head for \"regime\""),
             ({**good, "questions": {"move_bps_50": good["questions"]["direction_5"]}},
              "question \"move_bps_50\" has 9 answers, its head 3 weight columns")]
    for doc, message in cases:
        (checkpoint / "answer_head.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
        with pytest.raises(ConfigError, match=message):
            run_backtest(config, [tmp_path / "t.parquet"], tmp_path / "q.yaml", tmp_path / "a.parquet",
                         progress=False)
