"""A restart's replay of the tick log (fix353): the answers published before the stop are re-fed to the answer
adaptation in runs (engine/service/adaptation.py ``_refeed``, labels in one pass: connectors/labels.py
``window_labels``) rather than one at a time, and the log is read without copying each record twice. What a
restart publishes must not move: with several streams and every trigger kind (`batch`, `ticks`, `interval`,
`move_bps`, `surprise`), adapted answers on, a burst owed at the stop, the answers owed and those after the restart
equal an uninterrupted run's (seqs, versions, event times, trigger firings; values within the kernels' packing
rounding), the owed-answers line says their number, and the adaptation's mixes are the ones a run that never
stopped holds. Real parts: a tiny model built from a config, real data directories, the real pipeline."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest

from conftest import tiny_tick_checkpoint
from connectors.labels import label_series, window_labels
from connectors.questions import DEFAULT_QUESTIONS
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service import adaptation
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline

TOL = 1e-4  # the tail's forwards pack otherwise than the live run's (~1e-6), and an adapted mix carries it on
QUERIES = """
queries:
  - {name: grp, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: vol, streams: ["*"], question: volatility_50, kind: choice, trigger: {ticks: 50}}
  - {name: mv50, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {interval: 1s}}
  - {name: moved, streams: ["*"], question: direction_5, kind: choice, trigger: {move_bps: 2}}
  - {name: surprise, streams: ["*"], kind: surprise, trigger: batch, topic: "surprise/{stream}/"}
"""


# the restart cases share the module's model and its uninterrupted run (read only): `--dist loadgroup` keeps them on one
# worker
pytestmark = pytest.mark.xdist_group("test_restart_replay")


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("restart_replay")
    tiny_tick_checkpoint(root / "model", max_position_embeddings=256)
    (root / "q.yaml").write_text(QUERIES)
    return root


def config(root: Path, data_dir: Path) -> ServiceConfig:
    return ServiceConfig.from_dict({"model": {"path": str(root / "model")}, "kv": {"cells": 16384, "block_size": 16},
                                    "scheduler": {"max_batch_tokens": 256}, "log": {"dir": str(data_dir)},
                                    "queries": str(root / "q.yaml")})


def key(answer) -> tuple:
    return answer.query, answer.stream, answer.version, answer.seq, answer.data_ts, answer.query_version


def assert_same(got: list, want: list) -> None:
    assert sorted(map(key, got)) == sorted(map(key, want))
    by_key = {key(a): a for a in want}
    for answer in got:
        value, expected = answer.value, by_key[key(answer)].value
        assert value.keys() == expected.keys(), (value, expected)
        for name in ("probs", "model_probs"):
            if name in value:
                assert value[name] == pytest.approx(expected[name], abs=TOL), (answer, value, expected)
        for name in ("answer", "expected", "nll"):
            if name in value and isinstance(value[name], float):
                assert value[name] == pytest.approx(expected[name], abs=TOL * 10)


def mixes(pipeline: TickPipeline) -> dict:
    """Each (stream, query)'s mix state, the answers still waiting to be re-fed fed first (as any read does)."""
    for stream in list(pipeline.adaptation.streams):
        pipeline.adaptation._refeed(stream)
    return {f"{stream}/{query}": mix.to_state() for stream, per_query in pipeline.adaptation.mixes.items()
            for query, mix in per_query.items()}


def assert_same_mixes(got: dict, want: dict) -> None:
    """The same mixes: counts and points, and sums of model answers within the tail's rounding. (Not ``face``, where
    the last weights were solved: a warm start for the next solve, which a re-fed answer never runs.)"""
    assert got.keys() == want.keys() and got

    def flat(value) -> list:
        return [x for item in value for x in flat(item)] if isinstance(value, (list, tuple)) else [value]

    for name in want:
        assert got[name].keys() == want[name].keys()
        for field in set(want[name]) - {"face"}:
            mine, theirs = flat(got[name][field]), flat(want[name][field])
            assert len(mine) == len(theirs), (name, field)
            assert mine == pytest.approx(theirs, rel=1e-5, abs=1e-5), (name, field)


class Uninterrupted(NamedTuple):
    """The run that never stopped, shared by the restarts below (read only): its live answers before the stop, the
    data directory as the stop left it, the answers owed then, its mixes, and its answers to the ticks after."""
    ticks: list
    answered: list
    at_stop: Path
    owed: list
    mixes: dict
    after: list


@pytest.fixture(scope="module")
def uninterrupted(root: Path, tmp_path_factory) -> Uninterrupted:
    """The live run, once for every restart case: it re-feeds nothing (REFEED_EVERY and a deferred tail are the
    restart's alone), so each case's own was the same run again."""
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(1600)
    data = tmp_path_factory.mktemp("uninterrupted") / "data"
    live = TickPipeline(config(root, data))
    try:
        answered = []
        for i in range(0, 1200, 8):  # answered as they came: the log's answers, re-fed at the restart
            assert live.ingest_message(encode(ticks[i : i + 8])) == []
            answered += live.run_until_idle()
        for i in range(1200, 1400, 8):  # a burst: accepted and logged, not yet computed when the process died
            assert live.ingest_message(encode(ticks[i : i + 8])) == []
        at_stop = data.with_name("at_stop")
        shutil.copytree(data, at_stop)
        owed = live.run_until_idle()
        live_mixes = mixes(live)
        after = []
        for i in range(1400, 1600, 8):  # (200 ticks, 300 before: every trigger kind fires in them still)
            assert live.ingest_message(encode(ticks[i : i + 8])) == []
            after += live.run_until_idle()
    finally:
        live.close()
    return Uninterrupted(ticks, answered, at_stop, owed, live_mixes, after)


@pytest.mark.parametrize("refeed_every", [16, adaptation.REFEED_EVERY], ids=["runs in the replay", "at its end"])
@pytest.mark.parametrize("deferred", [False, True], ids=["at start", "deferred"])
def test_a_restart_of_every_trigger_kind_publishes_what_an_uninterrupted_run_does(
        uninterrupted: Uninterrupted, root: Path, tmp_path: Path, monkeypatch, capsys, refeed_every: int,
        deferred: bool) -> None:
    monkeypatch.setattr(adaptation, "REFEED_EVERY", refeed_every)
    ticks, answered = uninterrupted.ticks, uninterrupted.answered
    shutil.copytree(uninterrupted.at_stop, tmp_path / "after")
    capsys.readouterr()
    recovered = TickPipeline(config(root, tmp_path / "after"), defer_owed=deferred)
    owed = recovered.run_until_idle() if deferred else [o.answer for o in recovered.recovered if o.answer]
    assert {a.query for a in answered} == {"grp", "vol", "mv50", "moved", "surprise"}
    assert {a.query for a in uninterrupted.owed} == {"grp", "vol", "mv50", "moved", "surprise"}
    assert any("model_probs" in a.value and a.value["probs"] != a.value["model_probs"] for a in answered)
    lead = "owed: " if deferred else "computing what was owed: "
    assert f"flashtick: {lead}{len(uninterrupted.owed)} answers due on " in capsys.readouterr().err
    assert_same(owed, uninterrupted.owed)
    assert_same_mixes(mixes(recovered), uninterrupted.mixes)
    after_restart = []
    for i in range(1400, 1600, 8):  # the trigger state and the mixes rebuilt answer the next ticks as live
        assert recovered.ingest_message(encode(ticks[i : i + 8])) == []
        after_restart += recovered.run_until_idle()
    assert {a.query for a in uninterrupted.after} == {"grp", "vol", "mv50", "moved", "surprise"}
    assert_same(after_restart, uninterrupted.after)
    recovered.close()


def test_labels_of_many_points_at_once_are_bit_for_bit_those_of_each_alone() -> None:
    """A run's labels come from one pass over the marks; each must be the label its own window gives (a whole
    stream's running sum of squared returns would round the volatility otherwise and move a bucket's edge). Fifteen
    trials: each scale of returns with and without an overflowed mark, every case of the 60 it ran before, whose
    other 45 repeated them with other draws (the running sum's rounding itself moved no edge in any of the 60: the
    check is that the labels are bit for bit, which any draw shows)."""
    rng = np.random.default_rng(0)
    for trial in range(15):
        marks = 100 * np.exp(np.cumsum(rng.normal(0, [1e-5, 1e-4, 1e-3][trial % 3], 160)))
        if trial % 5 == 0:
            marks[rng.integers(0, len(marks))] = np.inf  # an overflowed mark: its windows have no label
        ts = np.cumsum(rng.integers(1, 10**9, len(marks))).astype(np.int64)
        for spec in DEFAULT_QUESTIONS:
            if spec.kind == "regime":
                continue
            h = spec.horizon
            for gap in (None, 6 * 10**8):
                times = ts if gap is not None else None
                alone = [int(label_series(spec, marks[i : i + h + 1], ts=None if gap is None else ts[i : i + h + 1],
                                          session_gap_ns=gap)[0]) for i in range(len(marks) - h)]
                assert window_labels(spec, marks, ts=times, session_gap_ns=gap).tolist() == alone
