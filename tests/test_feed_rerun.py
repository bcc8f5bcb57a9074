"""A `feed replay` killed (SIGKILL) while the engine still has its last messages queued, then run again, as the docs
say to resume: the new feed places itself after those messages, so no tick is taken twice, even on a clock whose
ticks of a stream share a timestamp (review234 #2: 30,008 ticks held of a 30,000-tick file on a 5 ms clock).
(2,004 ticks here: 167 messages, 100 read before the kill, the rest queued or unsent; 3,000, then 6,000, took the
same paths with half as much again, then three times, the live run and the backtest to compute.)"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from conftest import serving, tiny_tick_checkpoint
from forked_cli import cli_popen, cli_run
from engine.service.client import ControlClient
from engine.service.config import ServiceConfig

ROOT = Path(__file__).resolve().parent.parent
STREAMS = ("AAA", "BBB", "CCC")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"), max_position_embeddings=256)


def ms_clock_file(path: Path, n: int) -> Counter:
    """``n`` trades over STREAMS stamped on a 5 ms clock (each stream's ticks 4 to a timestamp); per-stream counts."""
    rows, price = [], {s: 100.0 + i for i, s in enumerate(STREAMS)}
    for i in range(n):
        stream = STREAMS[i % len(STREAMS)]
        price[stream] += 0.01 * ((i * 7919) % 5 - 2)
        rows.append(f"{1_700_000_000_000 + (i // 12) * 5},{stream},{price[stream]:.2f},{1 + i % 9}\n")
    path.write_text("ts,stream,price,size\n" + "".join(rows))
    return Counter(STREAMS[i % len(STREAMS)] for i in range(n))


def feed(path: Path, endpoints: dict[str, str]) -> subprocess.Popen:
    return cli_popen(["feed", "replay", str(path), "--ts-unit", "ms", "--batch-ms", "5", "--endpoint",
                      endpoints["ingest"], "--control", endpoints["control"], "--answers", ""], stderr=subprocess.PIPE,
                     text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def history(control: ControlClient, topic: str) -> list[dict]:
    """The topic's whole published history, from seq 1 (the `answers` op, a page at a time)."""
    out: list[dict] = []
    while True:
        reply = control.call("answers", topic=topic, after=out[-1]["seq"] if out else 0)
        out += reply["answers"]
        if not reply["answers"] or out[-1]["seq"] == reply["last_seq"]:
            return out


def backtest(checkpoint: Path, path: Path, queries: Path, out: Path) -> pl.DataFrame:
    cli_run(["backtest", str(path), "--ts-unit", "ms", "--model", str(checkpoint), "--queries", str(queries),
             "--batch-ms", "5", "--out", str(out), "--quiet"], check=True, capture_output=True, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
    return pl.read_parquet(out)


def test_a_feed_killed_with_messages_queued_at_the_engine_and_run_again_takes_no_tick_twice(checkpoint,
                                                                                           tmp_path) -> None:
    path = tmp_path / "ms.csv"
    expected = ms_clock_file(path, 2004)
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  - {name: dir, streams: ['*'], question: direction_5, kind: choice, "
                       "trigger: batch}\n")
    # an engine slower than the feed (a message a turn, a forward and a `batch` answer per stream between them):
    # the feed's messages queue on its ingest socket, and a kill leaves some there unread
    cfg = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}, "queries": str(queries),
        "log": {"dir": str(tmp_path / "data")}, "limits": {"max_ingest_per_step": 1},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"}})
    with serving(cfg) as server, ControlClient(server.endpoints["control"], timeout_s=60) as control:
        first = feed(path, server.endpoints)
        try:
            while control.call("stats")["stats"]["ingest_messages"] < 100:  # (a hang is caught by the timeout)
                assert first.poll() is None, first.stderr.read()
                time.sleep(0.02)
        finally:
            first.kill()
        first.wait(60)
        queued = server._ingest_unread()  # (read off the engine's thread: a hint for the message below only)
        again = feed(path, server.endpoints)
        _, err = again.communicate(timeout=300)
        assert again.returncode == 0, err
        deadline = time.monotonic() + 300  # (only catches a hang) every accepted tick computed, its answers out
        while time.monotonic() < deadline:
            stats = control.call("stats")["stats"]
            if not stats["pending_tokens"] and not stats["owed_ticks"] and \
                    stats["answers_out"] == stats["answers_published"]:
                break
            time.sleep(0.05)
        held = {name: entry["ticks"] for name, entry in control.call("streams")["streams"].items() if entry}
        ticks_in = control.call("stats")["stats"]["ticks_in"]
        served = {f"dir/{stream}/": history(control, f"dir/{stream}/") for stream in STREAMS}
    assert held == dict(expected), (queued, err)
    assert ticks_in == sum(expected.values())
    assert "another publisher" not in err
    expected_answers = backtest(checkpoint, path, queries, tmp_path / "bt.parquet")
    for topic, answers in served.items():  # the backtest's answers, at the same ticks, with the same seqs
        mine = expected_answers.filter(pl.col("topic") == topic).sort("seq")
        assert [(a["seq"], a["version"]) for a in answers] == list(zip(mine["seq"], mine["ticks"])), topic
        for answer, probs in zip(answers, mine["probs"]):  # (the backtest's: a JSON map, label -> prob)
            assert answer["value"]["probs"] == pytest.approx(json.loads(probs), abs=1e-4)
