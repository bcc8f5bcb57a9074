"""`--bar-stamp` and `--bar-length`, the map's bar_stamp and bar_length as options of their own, on each command
that reads files: `backtest`, `evaluate`, `train` and `feed replay` read a start-stamped hourly bar file (written
here) stamped at each bar's close, its start plus the length given. Real runs: a tiny model built from a config, a
served engine on 127.0.0.1 ephemeral ports for `feed replay`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import serving, tiny_tick_checkpoint
from engine.service.cli import main
from engine.service.client import ControlClient
from engine.service.config import ServiceConfig

HOUR = 3_600_000_000_000
T0 = 1_704_189_600_000_000_000  # 2024-01-02T10:00:00Z, the first bar's start
BARS = 800
CLOSE = ["--bar-stamp", "close", "--bar-length", "1h"]
NOTE = 'bars stamped at their close (bar_stamp close): each bar\'s start ("Datetime") plus its length, 1h, from ' \
       "bar_length 1h"
QUICK = ["--threads", "1", "--resamples", "20", "--max-points", "100000"]
LOCAL = {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"}


@pytest.fixture(scope="module")
def bars(tmp_path_factory) -> Path:
    """Hourly bars as a vendor writes them (`Datetime,Open,High,Low,Close,Volume`, each stamped with its start)."""
    root = tmp_path_factory.mktemp("bars")
    rng = np.random.default_rng(11)
    close = 100 * np.exp(np.cumsum(rng.normal(0, 0.002, BARS)))
    starts = pl.Series([T0 + i * HOUR for i in range(BARS)]).cast(pl.Datetime("ns", "UTC"))
    pl.DataFrame({"Datetime": starts, "Open": close * 0.999, "High": close * 1.002, "Low": close * 0.997,
                  "Close": close.round(4), "Volume": rng.integers(100, 1000, BARS)}).write_csv(root / "EURUSD.csv")
    return root / "EURUSD.csv"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("model"), seed=2, max_position_embeddings=256)


def said(capsys) -> str:
    out = capsys.readouterr()
    return out.out + out.err


def test_backtest_stamps_bars_at_their_close_with_the_options(bars: Path, model: Path, tmp_path: Path,
                                                              capsys) -> None:
    (tmp_path / "q.yaml").write_text("queries:\n  - {name: dir5, streams: ['*'], question: direction_5, "
                                     "kind: choice, trigger: batch}\n")
    out = tmp_path / "bt.parquet"
    assert main(["backtest", str(bars), "--model", str(model), "--queries", str(tmp_path / "q.yaml"), "--threads",
                 "1", "--out", str(out), *CLOSE]) == 0
    assert NOTE in said(capsys)
    last = pl.read_parquet(out)["data_ts"].max()
    assert last == T0 + BARS * HOUR  # the last bar's start plus its hour: its close
    assert main(["backtest", str(bars), "--model", str(model), "--queries", str(tmp_path / "q.yaml"), "--threads",
                 "1", "--out", str(tmp_path / "open.parquet"), "--bar-stamp", "open"]) == 0
    assert "bar_stamp close" not in said(capsys)
    assert pl.read_parquet(tmp_path / "open.parquet")["data_ts"].max() == T0 + (BARS - 1) * HOUR  # as written


def test_evaluate_and_train_read_bars_with_the_options(bars: Path, model: Path, tmp_path: Path, capsys) -> None:
    assert main(["evaluate", str(model), str(bars), *QUICK, "--json", *CLOSE]) == 0
    text = said(capsys)
    assert NOTE in text, text
    assert main(["train", str(bars), "--out", str(tmp_path / "m"), "--from-scratch", "--hidden", "32", "--layers",
                 "1", "--heads", "2", "--kv-heads", "1", "--intermediate", "64", "--window-ticks", "63", "--steps",
                 "2", "--batch", "1", "--eval-every", "2", *QUICK, *CLOSE]) == 0
    assert NOTE in said(capsys)


def test_feed_replay_sends_bars_stamped_at_their_close(bars: Path, model: Path, tmp_path: Path, capsys) -> None:
    config = ServiceConfig.from_dict({"model": {"path": str(model)}, "kv": {"cells": 4096, "block_size": 16},
                                      "endpoints": LOCAL, "log": {"dir": str(tmp_path / "data")}})
    with serving(config) as server:
        assert main(["feed", "replay", str(bars), "--endpoint", server.endpoints["ingest"], "--answers",
                     server.endpoints["answers"], *CLOSE]) == 0
        assert NOTE in said(capsys)
        with ControlClient(server.endpoints["control"], timeout_s=120) as control:
            streams = control.call("streams")["streams"]
    assert streams["EURUSD"]["ticks"] == BARS and streams["EURUSD"]["last_ts"] == T0 + BARS * HOUR, streams


def test_a_bar_length_without_the_close_stamp_is_refused_in_the_options_words(bars: Path, tmp_path: Path,
                                                                              capsys) -> None:
    assert main(["feed", "replay", str(bars), "--endpoint", "tcp://127.0.0.1:1", "--bar-length", "1h"]) == 2
    assert "--bar-length 1h is the length added to a bar's start to stamp it at its close: give --bar-stamp close " \
           "too" in capsys.readouterr().err
