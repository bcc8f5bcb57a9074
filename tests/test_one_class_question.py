"""A bps-bucketed question whose labels sit in one inner bucket (review379 #4): on FX every 50-tick window of EURUSD
is `low` (0.3 to 1 bp), so `volatility_50` scored accuracy 1.000 with no note, since the saturation check looks at the
end buckets only. `backtest` and `scores` now name the stream and the bucket, and say what to do. Real files, a
real model, a real server and the CLI over its sockets."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl

from conftest import serving, tiny_tick_checkpoint
from connectors.feed import FeedClient
from connectors.ticks import Tick, quote
from engine.service.backtest import run_backtest
from engine.service.client import ControlClient
from engine.service.cli import main
from engine.service.config import ServiceConfig
from test_backtest import cheap_option_and_underlying
from test_cli import config, run, wait_for

WAY_OUT = ("95% or more of their realised labels fall in one bucket, its buckets being fixed in bps over 50 ticks, so "
           "a high accuracy there is that bucket's share, not skill, and its answers say little there; ask another "
           "question of them (direction_5/direction_20 read a sign at any scale). A fine-tune on their ticks "
           "(flashtick train FILES --out DIR, docs/model.md) fits the answers to them, but the fixed buckets still "
           "do not split them")


def fx_walk(n: int = 700, seed: int = 3) -> list[Tick]:
    """EURUSD quotes on a random walk of a tenth of a pip (~0.09 bp) a tick: over 50 ticks its realised volatility
    is always `low` ((0.3, 1] bps), and its 50-tick move spreads over several buckets."""
    rng = np.random.default_rng(seed)
    bid = (1.09431 + np.cumsum(rng.choice([-1, 0, 1], n, p=[0.4, 0.2, 0.4])) * 1e-5).round(5)
    t0 = 1_704_463_200_000_000_000
    return [quote("EURUSD", t0 + i * 250_000_000, b, round(b + 2e-5, 5), 1e6, 1e6) for i, b in enumerate(bid)]


QUERIES = """
queries:
  - {name: move50, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {ticks: 5}}
  - {name: vol50, streams: ["*"], question: volatility_50, kind: choice, trigger: {ticks: 5}}
  - {name: dir5, streams: ["*"], question: direction_5, kind: choice, trigger: {ticks: 5}}
"""


def test_backtest_names_the_stream_and_the_bucket_a_question_does_not_split(tmp_path: Path) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    (tmp_path / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\n")
    (tmp_path / "q.yaml").write_text(QUERIES)
    option = [t for t in cheap_option_and_underlying() if t.stream != "SPY"]  # every move an end bucket
    pl.DataFrame([t.to_wire() for t in fx_walk() + option]).write_parquet(tmp_path / "fx.parquet")
    report = run_backtest(ServiceConfig.load(tmp_path / "engine.yaml"), [tmp_path / "fx.parquet"], tmp_path / "q.yaml",
                          tmp_path / "a.parquet", progress=False)
    realised = pl.read_parquet(tmp_path / "a.parquet").filter(pl.col("realised").is_not_null())
    eur = lambda query: realised.filter(pl.col("query") == query, pl.col("stream") == "EURUSD")  # noqa: E731
    assert set(eur("vol50")["realised"]) == {"low"} and eur("vol50").height >= 20  # what the note is about
    assert eur("move50")["realised"].n_unique() >= 3  # split: no note
    notes = [line for line in report.summary().splitlines() if line.startswith("note:") and "does not split" in line]
    n = eur("vol50").height
    # the option's vhigh is an end bucket: the saturation note says it, not this one
    assert notes == [f"note: vol50: volatility_50 does not split 1 of 2 streams (EURUSD: low ((0.3, 1] bps) on {n} "
                     f"of {n}): " + WAY_OUT], report.summary()
    assert any(line.startswith("note: vol50: volatility_50 is saturated on 1 of 2 streams (SPY   241220C00470000)")
               for line in report.summary().splitlines())


def test_scores_says_it_too(tmp_path: Path, capsys) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        (tmp_path / "v.yaml").write_text("queries:\n  - {name: vol50, streams: ['*'], question: volatility_50, "
                                         "kind: choice, trigger: {ticks: 5}}\n")
        assert run(capsys, "register", str(tmp_path / "v.yaml"), *control)[0] == 0
        ticks = fx_walk(400)
        with FeedClient(server.endpoints["ingest"]) as feed:
            for i in range(0, len(ticks), 10):  # (a message is one batch: the trigger fires once in each)
                feed.send(ticks[i : i + 10])

        def said() -> dict:
            assert main(["scores", "--json", *control]) == 0
            return json.loads(capsys.readouterr().out).get("vol50", {})
        wait_for(lambda: said().get("scored", 0) >= 30, timeout_s=120)  # (one_class: 20 labels or more)
        scores = said()
        code, out, _ = run(capsys, "scores", *control)
        with ControlClient(server.endpoints["control"]) as ctl:  # a get says it beside the answer too
            caveats = ctl.call("get", stream="EURUSD", query="vol50")["caveats"]
    one = [c["text"] for c in caveats if c["kind"] == "one_class_question"]
    assert len(one) == 1 and re.fullmatch(r"on EURUSD, volatility_50 does not split this stream: (\d+) of its \1 "
                                          r"realised labels are low \(\(0\.3, 1\] bps\), .*", one[0]), caveats
    assert scores["one_class_streams"] == 1 and scores["saturated_streams"] == 0, scores
    notes = [line for line in out.splitlines() if line.startswith("note: vol50:") and "does not split" in line]
    assert code == 0 and len(notes) == 1, out
    assert re.fullmatch(r"note: vol50: volatility_50 does not split 1 of 1 streams \(EURUSD: low \(\(0\.3, 1\] bps\) "
                        r"on (\d+) of \1\): " + re.escape(WAY_OUT), notes[0]), notes[0]
