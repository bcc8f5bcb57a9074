"""`trigger: {move_bps: N}` (review322): a standing query answered at the tick whose mark (a trade's price, a
two-sided quote's mid) first lies N bps or more from the mark where it last fired, the stream's first tick setting
the first one. Checked on every path that places or rebuilds trigger state, with real parts: a backtest of a CSV of
known prices (chunked and tick group by tick group), an interrupted backtest resumed, a restart of a data directory
owing a burst, a live `serve` over real ZeroMQ sockets, and the YAML refusals."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import NamedTuple

import msgpack
import polars as pl
import pytest

from conftest import tiny_tick_checkpoint
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode, quote, trade
from engine.service.backtest import BacktestInterrupted
from engine.service.backtest import run_backtest as library_run_backtest
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from queries.spec import QuerySpecError
from queries.yaml_loader import load_queries
from test_service_limits import live_server, wait_for

# in-process runs without the calibration plot, about half of a short run's time, which no test here reads
run_backtest = functools.partial(library_run_backtest, plot=False)

T0 = 1_700_000_000 * 10**9
TOL = 1e-4
# ONE's trades, a second apart: 100 sets the reference (tick 1); 100.1 is 10 bps up (4); 99.95 is 15 down from 100.1
# (6), where 100.0 (9.99) was not; 100.2 is 25 up from 99.95 (10); 100.3 is 9.98 from 100.2, 100.31 10.98 (14);
# 100.25, 100.3, 100.22 and 100.23 are under 10 from 100.31, 100.20 is 10.97 (19)
ONE = [100.0, 100.05, 100.09, 100.1, 100.0, 99.95, 99.9, 99.9, 100.0, 100.2,
       100.1, 100.1, 100.3, 100.31, 100.25, 100.3, 100.22, 100.23, 100.20, 100.2]
ONE_FIRES = [1, 4, 6, 10, 14, 19]
# Q's quotes, mids 50 (1), 50.02, 50.05 (10 bps up: 3), 50.01, 50.0 (9.99 down), 49.99 (11.99: 6)
Q = [(49.99, 50.01), (50.01, 50.03), (50.04, 50.06), (50.0, 50.02), (49.99, 50.01), (49.98, 50.0)]
Q_FIRES = [1, 3, 6]
QUERIES = """
queries:
  - {name: mv, streams: ["*"], question: direction_20, kind: choice, trigger: {move_bps: 10}}
  - {name: grp, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
"""


def known_ticks() -> list:
    ticks = [trade("ONE", T0 + i * 10**9, price, 1.0) for i, price in enumerate(ONE)]
    ticks += [quote("Q", T0 + i * 10**9 + 5 * 10**8, bid, ask) for i, (bid, ask) in enumerate(Q)]
    return sorted(ticks, key=lambda t: t.ts)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("moves")
    checkpoint = tiny_tick_checkpoint(root / "model", max_position_embeddings=256)
    (root / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\n"
                                      f"answers: {{adapt: 'off'}}\n")
    (root / "q.yaml").write_text(QUERIES)
    (root / "q3.yaml").write_text("queries:\n  - {name: mv, streams: ['*'], question: direction_20, kind: choice, "
                                  "trigger: {move_bps: 3}}\n")
    pl.DataFrame([t.to_wire() for t in known_ticks()]).write_csv(root / "known.csv")
    return root


def fired(frame: pl.DataFrame, query: str, stream: str) -> list[int]:
    return frame.filter((pl.col("query") == query) & (pl.col("stream") == stream))["ticks"].to_list()


def assert_same_answers(got: pl.DataFrame, want: pl.DataFrame) -> None:
    """Row for row: keys and labels equal, probabilities to fp32 tolerance (other forwards round otherwise)."""
    assert got.height == want.height
    exact = ["query", "stream", "ticks", "data_ts", "seq", "answer"]
    assert got.select(exact).equals(want.select(exact))
    for g, w in zip(got["probs"], want["probs"]):
        gp, wp = json.loads(g), json.loads(w)
        assert gp.keys() == wp.keys() and all(abs(gp[k] - wp[k]) <= TOL for k in gp)


def test_a_backtest_answers_at_the_very_ticks_the_moves_cross_chunked_or_group_by_group(root: Path) -> None:
    """Batches of 5 s hold 5 of ONE's trades: each move is answered at its own tick inside its group, while the
    `batch` query beside it still answers at the groups' ends alone (the move's due point ends no group). The
    chunked path (many groups a forward) gives the answers of running the engine to idle after every group."""
    config = ServiceConfig.load(root / "engine.yaml")
    for chunked in (True, False):
        run_backtest(config, [root / "known.csv"], root / "q.yaml", root / f"a{chunked}.parquet", batch_ms=5000,
                     progress=False, chunked=chunked)
    chunked, grouped = (pl.read_parquet(root / f"a{c}.parquet") for c in (True, False))
    assert fired(chunked, "mv", "ONE") == ONE_FIRES
    assert fired(chunked, "mv", "Q") == Q_FIRES
    assert fired(chunked, "grp", "ONE") == [5, 10, 15, 20]  # (T0 is 0 mod 5 s: each batch holds 5 trades)
    assert fired(chunked, "grp", "Q") == [5, 6]
    by_tick = {r["ticks"]: r["data_ts"] for r in chunked.filter(pl.col("stream") == "ONE").to_dicts()}
    assert [by_tick[t] for t in ONE_FIRES] == [T0 + (t - 1) * 10**9 for t in ONE_FIRES]  # the crossing tick's time
    assert_same_answers(chunked, grouped)


def crossings(ticks: list, bps: float) -> list[tuple[str, int]]:
    """Where `{move_bps: bps}` fires, worked out from the prices alone: (stream, tick count) of each stream's first
    priced tick and of each tick whose mark lies ``bps`` or more from the mark where it last fired."""
    reference: dict[str, float] = {}
    counts: dict[str, int] = {}
    out = []
    for tick in ticks:
        counts[tick.stream] = counts.get(tick.stream, 0) + 1
        mark = tick.price if tick.is_trade else tick.mid
        last = reference.get(tick.stream)
        if mark is not None and (last is None or abs(mark - last) / last * 1e4 >= bps * (1 - 1e-9)):
            reference[tick.stream] = mark
            out.append((tick.stream, counts[tick.stream]))
    return sorted(out)


def test_moves_inside_messages_are_answered_through_context_rolls(root: Path) -> None:
    """5-tick messages of 4 streams through a 256-position window: the sessions roll, and a roll may book queued
    ticks uncomputed (skip_discarded); a due point is never among them, so every move is answered at its tick."""
    ticks = SyntheticMarket(SyntheticConfig(seed=7)).next_batch(500)
    pipeline = TickPipeline(ServiceConfig.from_dict({
        "model": {"path": str(root / "model")}, "kv": {"cells": 8192, "block_size": 16},
        "scheduler": {"max_batch_tokens": 64}, "queries": str(root / "q3.yaml")}))
    answers = []
    for i in range(0, len(ticks), 5):
        assert pipeline.ingest_message(encode(ticks[i : i + 5])) == []
        answers += pipeline.run_until_idle()
    assert pipeline.engine.scheduler.stats.rolls > 0 and pipeline.engine.scheduler.stats.skipped_tokens > 0
    assert sorted((a.stream, a.version) for a in answers) == crossings(ticks, 3)


def test_an_interrupted_backtest_resumed_gives_the_uninterrupted_answers(root: Path) -> None:
    """The references are rebuilt with the sessions: the resumed run fires where the uninterrupted one did."""
    config = ServiceConfig.load(root / "engine.yaml")
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(900)  # (over 20 moves of 3 bps past the first ticks)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "synthetic.parquet")
    args = (config, [root / "synthetic.parquet"], root / "q3.yaml")
    run_backtest(*args, root / "whole.parquet", progress=False)
    polls = iter(range(10**9))
    with pytest.raises(BacktestInterrupted):
        run_backtest(*args, root / "cut.parquet", progress=False, stop=lambda: next(polls) >= 112)
    kept = json.loads((root / "cut.parquet.parts" / "progress.json").read_text())
    assert 0 < kept["consumed"] < 900 and kept["answers"] > 0
    report = run_backtest(*args, root / "cut.parquet", progress=False, resume=True)
    assert report.resumed_at == kept["consumed"]
    whole = pl.read_parquet(root / "whole.parquet")
    resumed = pl.read_parquet(root / "cut.parquet")
    assert whole.filter(pl.col("ticks") > 1).height > 20  # it fired on moves, not only at each stream's first tick
    assert resumed.filter(pl.col("ticks") > kept["consumed"] // 4).height > 0  # ... and after the resume point
    assert_same_answers(resumed, whole)


def logged_config(root: Path, data_dir: Path, **scheduler) -> ServiceConfig:
    """q3.yaml's move query over a data directory, in small forwards (the replay groups ticks otherwise)."""
    return ServiceConfig.from_dict({"model": {"path": str(root / "model")}, "kv": {"cells": 8192, "block_size": 16},
                                    "scheduler": {"max_batch_tokens": 64, **scheduler}, "answers": {"adapt": "off"},
                                    "log": {"dir": str(data_dir)}, "queries": str(root / "q3.yaml")})


class BurstRun(NamedTuple):
    """The run that never stopped, shared by both restarts below (read only): the data directory as the process
    death left it (a burst logged, not computed), the answers owed then, and its answers to the ticks after."""
    ticks: list
    at_death: Path
    owed: list
    after: list


@pytest.fixture(scope="module")
def burst_run(root: Path, tmp_path_factory) -> BurstRun:
    """The live run, once for both restarts (a deferred tail is the restart's alone: each ran the same live run)."""
    ticks = SyntheticMarket(SyntheticConfig(seed=7)).next_batch(900)
    data = tmp_path_factory.mktemp("burst_run") / "data"
    live = TickPipeline(logged_config(root, data))
    try:
        for i in range(0, 200, 5):
            assert live.ingest_message(encode(ticks[i : i + 5])) == []
            live.run_until_idle()
        for i in range(200, 600, 5):  # the burst: accepted and logged, not yet computed
            assert live.ingest_message(encode(ticks[i : i + 5])) == []
        at_death = data.with_name("at_death")
        shutil.copytree(data, at_death)  # what the disk holds if the process died now
        owed = live.run_until_idle()
        after = []
        for i in range(600, 900, 5):
            assert live.ingest_message(encode(ticks[i : i + 5])) == []
            after += live.run_until_idle()
    finally:
        live.close()
    return BurstRun(ticks, at_death, owed, after)


@pytest.mark.parametrize("deferred", [False, True], ids=["at start", "deferred"])
def test_a_restart_owes_the_moves_of_a_burst_and_fires_after_it_as_the_live_run(burst_run: BurstRun, root: Path,
                                                                                 tmp_path: Path, deferred: bool,
                                                                                 capsys) -> None:
    """A burst accepted and logged but not computed when the process died: the restart answers each move in it at
    its tick (not one answer at the last tick), with the seqs of a run that never stopped, and says how many it
    owes before computing them; the references it rebuilt fire the later ticks where the live run fires them."""
    ticks, uninterrupted = burst_run.ticks, burst_run.owed
    shutil.copytree(burst_run.at_death, tmp_path / "after")
    capsys.readouterr()
    recovered = TickPipeline(logged_config(root, tmp_path / "after"), defer_owed=deferred)
    owed = recovered.run_until_idle() if deferred else [o.answer for o in recovered.recovered if o.answer]
    assert len({(a.stream, a.version) for a in uninterrupted}) > 10  # moves inside the burst, each at its tick
    lead = "owed: " if deferred else "computing what was owed: "
    assert f"flashtick: {lead}{len(uninterrupted)} answers due on " in capsys.readouterr().err
    key = lambda a: (a.query, a.stream, a.version, a.seq, a.data_ts)  # noqa: E731
    assert sorted(map(key, owed)) == sorted(map(key, uninterrupted))
    by_key = {key(a): a for a in uninterrupted}
    for answer in owed:
        assert answer.value["probs"] == pytest.approx(by_key[key(answer)].value["probs"], abs=TOL)
    after_restart = []
    for i in range(600, 900, 5):  # after the restart: the next ticks fire the same moves on both
        assert recovered.ingest_message(encode(ticks[i : i + 5])) == []
        after_restart += recovered.run_until_idle()
    assert burst_run.after and sorted(map(key, after_restart)) == sorted(map(key, burst_run.after))
    recovered.close()


@pytest.mark.parametrize(("expired", "answered"), [(False, 240), (True, 240), (True, 120)],
                         ids=["forgotten, answered after", "expired, answered after", "expired, a burst after"])
def test_a_restart_past_an_expiry_takes_the_reference_of_the_streams_new_life(root: Path, tmp_path: Path,
                                                                             expired: bool, answered: int) -> None:
    """A stream forgotten (its ticks count from 1 again, the first firing), or every stream expired (their contexts,
    counts and references kept), then fed again, and a burst left unanswered: the restart's replay passes the
    forget or expiry as the live run did (a forget's references go; an anchor of the new life is told apart by its
    time), so the owed answers and the moves after the restart are the live run's."""
    # 75 ticks a stream until the stop (the forget or expiry after 30), 30 after the restart
    ticks = SyntheticMarket(SyntheticConfig(seed=11)).next_batch(420)
    live = TickPipeline(logged_config(root, tmp_path / "data", stream_idle_s=0.05))
    answers = []
    for i in range(0, 300, 5):
        if i == 120 and expired:  # (a wall-clock idle: waited for, never timed)
            gone: list[str] = []
            wait_for(lambda: gone.extend(live.expire_idle()) or len(gone) == 4)
        elif i == 120:
            live.forget_stream("SYN.A")
        if i == 120:
            before = len(answers)
        assert live.ingest_message(encode(ticks[i : i + 5])) == []
        if i < answered:
            answers += live.run_until_idle()
    shutil.copytree(tmp_path / "data", tmp_path / "after")
    recovered = TickPipeline(logged_config(root, tmp_path / "after", stream_idle_s=0.05))
    owed = [o.answer for o in recovered.recovered if o.answer]
    uninterrupted = live.run_until_idle()
    after = [(a.stream, a.version) for a in answers[before:] + uninterrupted]
    if expired:  # its context, count and references kept (review355 #7): it goes on, no new life
        assert after and all(version > 1 for stream, version in after if stream == "SYN.A")
    else:  # its new life's first tick fired, answered before the stop or owed by the restart
        assert ("SYN.A", 1) in after
    key = lambda a: (a.query, a.stream, a.version, a.seq, a.data_ts)  # noqa: E731
    assert uninterrupted and sorted(map(key, owed)) == sorted(map(key, uninterrupted))
    after_live, after_restart = [], []
    for i in range(300, 420, 5):
        assert live.ingest_message(encode(ticks[i : i + 5])) == recovered.ingest_message(encode(ticks[i : i + 5])) == []
        after_live += live.run_until_idle()
        after_restart += recovered.run_until_idle()
    assert any(a.stream == "SYN.A" for a in after_live)
    assert sorted(map(key, after_restart)) == sorted(map(key, after_live))
    recovered.close()
    live.close()


def test_a_live_serve_publishes_an_answer_at_each_move_and_none_otherwise(root: Path) -> None:
    """Real sockets: ONE's trades, one message of 7 ticks then one tick a message, and a FLAT stream whose price
    never moves 10 bps (answered once, at its first tick). Each move is published at its own tick, the ones inside
    the 7-tick message included."""
    flat = [trade("FLAT", T0 + i * 10**9 + 1, 200.0 + 0.01 * (i % 3), 1.0) for i in range(20)]
    one = [trade("ONE", T0 + i * 10**9, price, 1.0) for i, price in enumerate(ONE)]
    with live_server(root / "model", queries=str(root / "q.yaml"), answers={"adapt": "off"}) as (server, push):
        with AnswerSubscriber(server.endpoints["answers"], ["mv/"]) as sub:
            sub.wait_ready(timeout_s=60)
            push.send(encode(one[:7] + flat[:7]))
            for tick in one[7:] + flat[7:]:
                push.send(msgpack.packb(tick.to_wire()))
            wait_for(lambda: server.pipeline.ticks_in == 40 and not server.pipeline.busy)
            with ControlClient(server.endpoints["control"]) as control:  # (idle: every mv answer it will send)
                published = sum(topic["last_seq"] for topic in control.topics("mv/").values())
            answers = []  # each one published, read as it comes (not until 2 s pass without one)
            while len(answers) < published and (got := sub.recv(timeout_s=60)) is not None:
                answers.append(got[1])
    assert sorted(a["version"] for a in answers if a["stream"] == "ONE") == ONE_FIRES
    assert [a["version"] for a in answers if a["stream"] == "FLAT"] == [1]
    assert [a["seq"] for a in answers if a["stream"] == "ONE"] == list(range(1, len(ONE_FIRES) + 1))


@pytest.mark.parametrize(("written", "said"), [
    ("0", "move_bps trigger needs a number of basis points > 0, got 0"),
    ("-5", "move_bps trigger needs a number of basis points > 0, got -5"),
    ("10bps", "the unit is in the key's name: write {move_bps: 10}"),
    ('"10"', "(quoted in the YAML: drop the quotes, trigger: {move_bps: 10})"),
    ("ten", 'got "ten"; write the basis points as a number, e.g. {move_bps: 10} or {move_bps: 2.5}'),
    ("true", "got true; write the basis points as a number"),
    ("0.0001", "move_bps trigger takes basis points to 3 decimals (0.001 bp), got 0.0001"),
    (".nan", "got NaN"),
])
def test_a_bad_move_is_refused_by_name_with_the_fix(written: str, said: str) -> None:
    text = f"queries:\n  - {{name: mv, streams: ['*'], kind: surprise, trigger: {{move_bps: {written}}}}}\n"
    with pytest.raises(QuerySpecError) as refused:
        load_queries(text, "q.yaml")
    assert said in str(refused.value) and "mv" in str(refused.value)


def test_move_bps_is_read_written_and_listed_as_given() -> None:
    """A fractional move (FX) keeps its written form through queries.yaml and the wire; a bare `move_bps` is told
    it takes a mapping, and a list of triggers is refused as for every kind."""
    (spec,) = load_queries("queries:\n  - {name: mv, streams: ['*'], kind: surprise, trigger: {move_bps: 2.5}}\n",
                           "q.yaml")
    assert spec.trigger.move_bps == 2.5 and spec.trigger.text() == "move_bps:2.5"
    assert spec.to_dict()["trigger"] == {"move_bps": 2.5}
    with pytest.raises(QuerySpecError, match=r"move_bps takes a period, written as a mapping: trigger: \{move_bps: 10"):
        load_queries("queries:\n  - {name: mv, streams: ['*'], kind: surprise, trigger: move_bps}\n", "q.yaml")
    with pytest.raises(QuerySpecError, match="trigger must be"):
        load_queries("queries:\n  - {name: mv, streams: ['*'], kind: surprise, trigger: [{move_bps: 10}, batch]}\n",
                     "q.yaml")
