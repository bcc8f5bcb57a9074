"""A live `register` of queries that are registered already with an equal spec (review381 #1): the usual research
loop adds one query to a file and registers the whole file again. Each unchanged query keeps its trigger state,
cached answers, seqs and online adaptation, as a restart keeps them, and the reply says `unchanged`; `1000ms`
over `1s` is the same period (shown as written now). Real sockets, a real backtest of the same ticks to compare."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

import polars as pl
import pytest

from conftest import serving, tiny_tick_checkpoint
from connectors.feed import FeedClient
from connectors.feed_pump import run_feed
from connectors.replay import FileReplay
from connectors.ticks import TRADE, Tick
from engine.service.backtest import run_backtest
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.config import ServiceConfig
from queries.registry import Registry
from test_service_limits import wait_for

MS = 1_000_000
T0 = 1_717_401_600 * 10**9  # 2024-06-03T08:00:00Z, a whole second
QUERIES = """
queries:
  - {name: e_t10, streams: ["E*"], question: direction_5, kind: choice, trigger: {ticks: 10}}
  - {name: e_i1s, streams: ["E*"], question: direction_5, kind: choice, trigger: {interval: 1s}}
  - {name: e_mv, streams: ["E*"], question: direction_5, kind: choice, trigger: {move_bps: 7}}
  - {name: e_b, streams: ["E*"], question: direction_20, kind: choice}
"""
FIRST, TOTAL = 40, 70  # EEE's ticks before the re-register, and in all

pytestmark = pytest.mark.xdist_group("test_reregister_unchanged")


def ticks() -> list[Tick]:
    """EEE's trades 130 ms apart (each its own 100 ms batch: one message each, live and backtested), a seeded walk."""
    rng, price, out = random.Random(7), 100.0, []
    for i in range(TOTAL):
        price = round(price * (1 + rng.gauss(0, 0.0008)), 4)
        out.append(Tick("EEE", T0 + i * 130 * MS, TRADE, price=price, size=1.0 + i % 3, side="buy"))
    return out


def write(path: Path, part: list[Tick]) -> Path:
    pl.DataFrame([t.to_wire() for t in part]).write_parquet(path)
    return path


def test_registering_the_same_file_again_keeps_every_query_as_the_backtest_answers(tmp_path: Path) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    engine = {"model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}}
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    every = ticks()
    out = tmp_path / "bt.parquet"
    run_backtest(ServiceConfig.from_dict(engine), [write(tmp_path / "all.parquet", every)], queries, out,
                 batch_ms=100.0, progress=False)
    backtest = {(r["query"], r["ticks"]): r for r in pl.read_parquet(out).iter_rows(named=True)}
    assert {q for q, _ in backtest} == {"e_t10", "e_i1s", "e_mv", "e_b"}

    local = "tcp://127.0.0.1:0"
    config = ServiceConfig.from_dict({**engine, "queries": str(queries), "limits": {"heartbeat_s": 0.1},
                                      "endpoints": {"ingest": local, "answers": local, "control": local}})
    live: dict[tuple[str, int], dict] = {}
    with serving(config) as server, AnswerSubscriber(server.endpoints["answers"], ["e_"]) as sub, \
            ControlClient(server.endpoints["control"]) as control:
        sub.wait_ready()
        with FeedClient(server.endpoints["ingest"]) as client:
            run_feed(FileReplay([str(write(tmp_path / "first.parquet", every[:FIRST]))]), client, batch_ns=100 * MS)
        wait_for(lambda: server.pipeline.ticks_in == FIRST and not server.pipeline.busy)
        again = control.call("register", yaml=QUERIES, source="q.yaml")
        assert again["unchanged"] == ["e_t10", "e_i1s", "e_mv", "e_b"] and again["replaced"] == []
        reworded = control.call("register", yaml=QUERIES.replace("{interval: 1s}", "{interval: 1000ms}"))
        assert reworded["unchanged"] == ["e_t10", "e_i1s", "e_mv", "e_b"] and reworded["replaced"] == []
        # as wire-protocol.md and queries.md say it (review397 #5): the same specs as written move no version, one
        # written in another form moves it (its form is saved and listed anew)
        assert reworded["version"] == again["version"] + 1
        listed = {q["name"]: q for q in control.call("list")["queries"]}
        assert listed["e_i1s"]["trigger"] == {"interval": "1000ms"}  # shown as written now, the same trigger
        with FeedClient(server.endpoints["ingest"]) as client:
            run_feed(FileReplay([str(write(tmp_path / "rest.parquet", every[FIRST:]))]), client, batch_ns=100 * MS)
        wait_for(lambda: server.pipeline.ticks_in == TOTAL and not server.pipeline.busy)
        published = sum(topic["last_seq"] for topic in control.topics("e_").values())
        deadline = time.monotonic() + 60  # (only catches a hang: every answer was published already)
        while len(live) < published and time.monotonic() < deadline:
            if (message := sub.recv(timeout_s=1)) is not None:
                live[(message[1]["query"], message[1]["version"])] = message[1]
    assert live.keys() == backtest.keys()  # no query fired off its grid at the re-register
    for key, payload in live.items():
        assert payload["seq"] == backtest[key]["seq"], key  # seqs go on
        probs = json.loads(backtest[key]["probs"])  # the adapted probabilities too: their mixes went on
        assert max(abs(payload["value"]["probs"][k] - p) for k, p in probs.items()) < 1e-5, key


def test_the_registry_keeps_an_equal_spec_and_replaces_a_changed_one() -> None:
    registry = Registry()
    first = registry.register(QUERIES)
    assert [s.name for s in first] == ["e_t10", "e_i1s", "e_mv", "e_b"] and registry.version == 1
    assert [s.name for s in registry.due("EEE", 1, T0)] == ["e_t10", "e_i1s", "e_b"]  # (a move: Registry.moved)
    assert [s.name for s in registry.due("EEE", 2, T0 + 130 * MS)] == ["e_b"]
    assert registry.register(QUERIES) == [] and registry.version == 1  # nothing changed: not even the version
    assert [s.name for s in registry.due("EEE", 3, T0 + 260 * MS)] == ["e_b"]  # the grids were kept
    changed = QUERIES.replace("{ticks: 10}", "{ticks: 5}").replace("{interval: 1s}", "{interval: 1000ms}")
    assert [s.name for s in registry.register(changed)] == ["e_t10"]
    assert registry.version == 2 and registry.query_version("e_t10") == 2 and registry.query_version("e_i1s") == 1
    assert registry.get("e_i1s").trigger.text() == "interval:1000ms"
    assert [s.name for s in registry.due("EEE", 4, T0 + 390 * MS)] == ["e_t10", "e_b"]  # only the replaced fires


def test_a_restart_whose_file_writes_an_unchanged_period_otherwise_keeps_the_query(tmp_path: Path, capsys) -> None:
    """A restart keeps an unchanged query, as a live register now does: its file's `1000ms` for the kept `1s`
    is shown as the file writes it, with its version, answers and trigger state kept, and said as no replace."""
    from connectors.ticks import encode
    from engine.service.pipeline import TickPipeline

    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)

    def pipeline() -> TickPipeline:
        return TickPipeline(ServiceConfig.from_dict({
            "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
            "log": {"dir": str(tmp_path / "data")}, "queries": str(queries)}))

    first = pipeline()
    for tick in ticks()[:FIRST]:
        assert first.ingest_message(encode([tick])) == []
    first.run_until_idle()
    cached = first.cache.get("e_i1s", "EEE")
    first.close()
    queries.write_text(QUERIES.replace("{interval: 1s}", "{interval: 1000ms}"))
    capsys.readouterr()
    second = pipeline()
    assert "replaces the one kept" not in capsys.readouterr().err
    assert second.registry.get("e_i1s").trigger.text() == "interval:1000ms"
    assert second.registry.query_version("e_i1s") == 1 and second.cache.get("e_i1s", "EEE") == cached
    assert second.ingest_message(encode([ticks()[FIRST]])) == []  # 5.2 s: no 1 s boundary since 5.07 s
    answered = {a.query for a in second.run_until_idle()}
    assert "e_b" in answered and not {"e_t10", "e_i1s"} & answered  # off their grids: not fired again
    second.close()
