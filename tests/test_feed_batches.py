"""`flashtick feed replay --batch-ms`: a live run of a file answers at the ticks its backtest answers at, with the
same numbers, because each event-time batch goes as one message (one tick group), cut as the backtest cuts."""

from __future__ import annotations

import json
import math
import time

import msgpack
import polars as pl
import pytest
import zmq

from conftest import serving, tiny_tick_checkpoint
from connectors.event_time_batches import MAX_BATCH_TICKS, EventTimeCutter
from connectors.feed import FeedClient
from connectors.feed_pump import run_feed
from connectors.replay import FileReplay
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import TRADE, Tick
from engine.service.backtest import run_backtest
from engine.service.client import AnswerSubscriber
from engine.service.config import ServiceConfig

MS = 1_000_000
QUERIES = """
queries:
  - {name: dir, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: every7, streams: ["*"], question: direction_5, kind: choice, trigger: {ticks: 7}}
  - {name: move, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {interval: 300ms}}
"""


def trade_at(ts: int, stream: str = "A") -> Tick:
    return Tick(stream, ts, TRADE, price=100.0, size=1.0, side="buy")


def test_the_cutter_cuts_where_the_backtest_does() -> None:
    """A batch runs from a tick to the end of that tick's window; the first tick at or past the end starts the next
    (its own window, however far on); a tick stamped earlier than its batch's start stays in it."""
    cutter = EventTimeCutter(100 * MS)
    stamps = [0, 50, 99, 100, 250, 251, 249, 400, 420]
    done = cutter.add([trade_at(t * MS) for t in stamps[:5]]) + cutter.add([trade_at(t * MS) for t in stamps[5:]])
    done += cutter.flush()
    assert [[t.ts // MS for t in batch] for batch in done] == [[0, 50, 99], [100], [250, 251, 249], [400, 420]]
    assert cutter.flush() == []
    with pytest.raises(ValueError, match="batch_ns must be an int > 0"):
        EventTimeCutter(0)


def test_a_live_feed_cut_in_event_time_batches_answers_as_the_backtest_does(tmp_path) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(450)
    data = tmp_path / "ticks.parquet"
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(data)
    model = {"path": str(checkpoint)}
    kv = {"cells": 8192, "block_size": 16}

    out = tmp_path / "answers.parquet"
    run_backtest(ServiceConfig.from_dict({"model": model, "kv": kv}), [data], queries, out, batch_ms=100.0,
                 progress=False)
    backtest = {(r["query"], r["stream"], r["ticks"]): r for r in pl.read_parquet(out).iter_rows(named=True)}
    assert len({q for q, _, _ in backtest}) == 3 and len(backtest) > 150

    local = "tcp://127.0.0.1:0"
    config = ServiceConfig.from_dict({"model": model, "kv": kv, "queries": str(queries),
                                      "endpoints": {"ingest": local, "answers": local, "control": local},
                                      "limits": {"heartbeat_s": 0.1}})
    live: dict[tuple[str, str, int], dict] = {}
    with serving(config) as server, AnswerSubscriber(server.endpoints["answers"], [""]) as sub:
        sub.wait_ready()
        with FeedClient(server.endpoints["ingest"]) as client:
            stats = run_feed(FileReplay([str(data)]), client, batch_ns=100 * MS)
        assert stats.ticks == len(ticks) and stats.split_batches == 0
        deadline = time.monotonic() + 60
        while len(live) < len(backtest) and time.monotonic() < deadline:
            message = sub.recv(timeout_s=0.2)
            if message and not message[0].startswith("_"):
                payload = message[1]
                live[(payload["query"], payload["stream"], payload["version"])] = payload
    assert live.keys() == backtest.keys()  # the same answered ticks, every query and trigger
    for key, payload in live.items():
        row = backtest[key]
        if key[0] == "move":
            assert math.isclose(payload["value"]["expected"], row["expected"], abs_tol=1e-6)
        probs = json.loads(row["probs"])
        assert payload["value"]["probs"].keys() == probs.keys()
        # float32 rounding of forwards grouped otherwise; docs/queries.md states 5e-6 (the built-in model's
        # largest measured: 1.14e-6); the tiny model here stays within 1e-6
        assert max(abs(payload["value"]["probs"][k] - p) for k, p in probs.items()) < 1e-6, key


def test_an_event_time_batch_past_one_message_goes_in_several_and_is_counted(tmp_path) -> None:
    data = tmp_path / "burst.parquet"
    burst = [trade_at(10**18 + i) for i in range(MAX_BATCH_TICKS + 5)] + [trade_at(10**18 + 10**9)]  # one batch, one
    pl.DataFrame([t.to_wire() for t in burst]).write_parquet(data)
    pull = zmq.Context.instance().socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    try:
        with FeedClient(f"tcp://127.0.0.1:{port}") as client:
            stats = run_feed(FileReplay([str(data)]), client, batch=4096, batch_ns=100 * MS)
        sizes = [len(msgpack.unpackb(pull.recv(), raw=False)) for _ in range(stats.messages)]
    finally:
        pull.close(linger=0)
    assert sizes == [MAX_BATCH_TICKS, 5, 1] and stats.split_batches == 1
    assert "1 event-time batch over 8,192 ticks sent in several messages" in stats.summary()


def test_the_cli_refuses_a_batch_width_that_is_not_positive(capsys) -> None:
    from engine.service.cli import main

    assert main(["feed", "replay", "nowhere.csv", "--batch-ms", "0", "--endpoint", "tcp://127.0.0.1:1"]) != 0
    assert "--batch-ms must be a number of milliseconds > 0" in capsys.readouterr().err

