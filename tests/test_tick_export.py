"""`flashtick ticklog export`: a data directory's tick log back as a tick file that a backtest reads as it is, whose
answers are the ones the live service published; beside a running serve, and over torn and damaged logs."""

from __future__ import annotations

import json
import math
import shutil
import time

import polars as pl
import pytest

from conftest import serving, tiny_tick_checkpoint
from connectors.feed import FeedClient, run_feed
from connectors.replay import FileReplay, replay_ticks
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import utc_text
from engine.service.backtest import run_backtest
from engine.service.cli import main
from engine.service.client import AnswerSubscriber
from engine.service.config import ServiceConfig
from test_feed_batches import MS, QUERIES  # the queries live answers were held to a backtest's with, every trigger


def export(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["ticklog", "export", *map(str, args)])
    return code, capsys.readouterr().err


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A serve with a data directory fed trades and quotes of three streams in 100 ms event-time messages over
    real sockets; what it published, the ticks fed, the stopped directory and an export taken while it served."""
    root = tmp_path_factory.mktemp("served")
    checkpoint = tiny_tick_checkpoint(root / "model")
    queries = root / "q.yaml"
    queries.write_text(QUERIES)
    ticks = [t for t in SyntheticMarket(SyntheticConfig(seed=5)).next_batch(450) if t.stream != "SYN.D"]
    source = root / "ticks.parquet"
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(source)
    data_dir = root / "data"
    local = "tcp://127.0.0.1:0"
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
                                      "queries": str(queries), "log": {"dir": str(data_dir)},
                                      "endpoints": {"ingest": local, "answers": local, "control": local},
                                      "limits": {"heartbeat_s": 0.1}})
    live: dict[tuple[str, str, int], dict] = {}
    with serving(config) as server, AnswerSubscriber(server.endpoints["answers"], [""]) as sub:
        sub.wait_ready()
        with FeedClient(server.endpoints["ingest"]) as client:
            assert run_feed(FileReplay([str(source)]), client, batch_ns=100 * MS).ticks == len(ticks)
        quiet_until = time.monotonic() + 3  # every answer is out once none came for a while
        deadline = time.monotonic() + 90
        while time.monotonic() < min(quiet_until, deadline):
            message = sub.recv(timeout_s=0.2)
            if message and not message[0].startswith("_"):
                payload = message[1]
                live[(payload["query"], payload["stream"], payload["version"])] = payload
                quiet_until = time.monotonic() + 3
        while_serving = root / "while_serving.parquet"
        assert main(["ticklog", "export", str(data_dir), "--out", str(while_serving)]) == 0  # the lock is held
    return {"root": root, "checkpoint": checkpoint, "queries": queries, "ticks": ticks, "data": data_dir, "live": live,
            "while_serving": while_serving}


def test_an_export_of_a_stopped_serve_backtests_to_the_answers_it_published(served, capsys) -> None:
    ticks, data_dir = served["ticks"], served["data"]
    out = served["root"] / "export.parquet"
    logged = {path: path.read_bytes() for path in (data_dir / "ticks").iterdir()}
    code, err = export(capsys, data_dir, "--out", out)
    assert code == 0, err
    first, last = min(t.ts for t in ticks), max(t.ts for t in ticks)
    assert err == (f"flashtick ticklog export: {len(ticks)} ticks of 3 streams from 1 segment of {data_dir / 'ticks'}, "
                   f"{utc_text(first)} to {utc_text(last)} -> {out}\n")
    assert {path: path.read_bytes() for path in (data_dir / "ticks").iterdir()} == logged  # nothing changed
    frame = pl.read_parquet(out)
    assert frame.columns == ["stream", "ts", "kind", "price", "size", "side", "bid", "ask", "bid_size", "ask_size"]
    assert frame.equals(pl.read_parquet(served["while_serving"]))  # beside the serve: the same records
    assert list(replay_ticks(str(out))) == ticks  # read with no preset or map: the ticks fed, in order

    answers = served["root"] / "answers.parquet"
    run_backtest(ServiceConfig.from_dict({"model": {"path": str(served["checkpoint"])},
                                          "kv": {"cells": 8192, "block_size": 16}}),
                 [out], served["queries"], answers, batch_ms=100.0, progress=False)
    backtest = {(r["query"], r["stream"], r["ticks"]): r for r in pl.read_parquet(answers).iter_rows(named=True)}
    live = served["live"]
    assert len({q for q, _, _ in backtest}) == 3 and len(backtest) > 100
    assert live.keys() == backtest.keys()  # the same answered ticks, every query and trigger
    for key, payload in live.items():
        row = backtest[key]
        if key[0] == "move":
            assert math.isclose(payload["value"]["expected"], row["expected"], abs_tol=1e-6)
        probs = json.loads(row["probs"])
        # float32 rounding of forwards grouped otherwise (test_feed_batches.py: within 1e-6 on this model)
        assert max(abs(payload["value"]["probs"][k] - p) for k, p in probs.items()) < 1e-6, key


def test_an_export_takes_streams_a_time_range_and_csv(served, capsys) -> None:
    ticks, data_dir = served["ticks"], served["data"]
    start = ticks[len(ticks) // 2].ts
    out = served["root"] / "some.csv"
    code, err = export(capsys, data_dir, "--out", out, "--streams", "SYN.A", "SYN.B", "--from", str(start))
    assert code == 0, err
    kept = [t for t in ticks if t.stream in ("SYN.A", "SYN.B") and t.ts >= start]
    assert f"{len(kept)} ticks of 2 streams" in err and f"{len(ticks) - len(kept)} ticks outside" in err
    assert list(replay_ticks(str(out))) == kept
    code, err = export(capsys, data_dir, "--out", served["root"] / "x.parquet", "--streams", "SYN.Z")
    assert code == 2 and "streams ['SYN.Z'] match none of the streams" in err
    code, err = export(capsys, data_dir, "--out", served["root"] / "x.json")
    assert code == 2 and "give a file ending in .parquet (or .pq) or .csv" in err
    code, err = export(capsys, served["root"], "--out", served["root"] / "x.parquet")
    assert code == 2 and "holds no tick log" in err


def test_a_torn_tail_is_left_out_and_damage_stops_the_export_unless_skipped(served, tmp_path, capsys) -> None:
    data_dir = shutil.copytree(served["data"], tmp_path / "data")
    (segment,) = sorted((data_dir / "ticks").glob("ticks-*.log"))
    whole = segment.read_bytes()
    segment.write_bytes(whole + whole[:30])  # a record cut short at the end: a torn tail (or one being written)
    out = tmp_path / "torn.parquet"
    code, err = export(capsys, data_dir, "--out", out)
    assert code == 0 and "is left out; the file is left as it is" in err and "an incomplete last record" in err
    assert segment.read_bytes() == whole + whole[:30]  # the log is not cut: only a restart does that
    assert pl.read_parquet(out).height == len(served["ticks"])

    damaged = bytearray(whole)
    middle = len(damaged) // 2
    damaged[middle] ^= 0xFF
    segment.write_bytes(bytes(damaged))
    code, err = export(capsys, data_dir, "--out", tmp_path / "stopped.parquet")
    assert code == 2 and f"{segment}: damaged record at byte " in err and "--skip-corrupt" in err, err
    assert not (tmp_path / "stopped.parquet").exists()
    code, err = export(capsys, data_dir, "--out", tmp_path / "skipped.parquet", "--skip-corrupt")
    assert code == 0 and "damaged bytes at byte" in err and "1 damaged region skipped" in err, err
    assert 0 < pl.read_parquet(tmp_path / "skipped.parquet").height < len(served["ticks"])
    assert segment.read_bytes() == bytes(damaged) and not list((data_dir / "ticks").glob("*.damaged*"))
