"""A checkpoint trained with --price-offset learnt prices at the shifted level, whatever file they come from: every
command that runs it on files reads them with its offset (checkpoint_notes.trained_options, the one rule). Before,
`backtest --model` took it on the training files alone, so the next day's file of a contract that prints below
zero was read unshifted (review374 #1: 86% of CLK0's ticks refused, `--test-from test` scoring the ticks it had
trained on), while `evaluate`, `feed replay` and `serve` shifted it. Real files, a real tiny model trained here,
the real backtest and evaluate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from engine.service.cli import main
from test_served_price_offset import TICKS, power_model

STREAM = "DEQH"  # a quarter-hour power product that dips below zero
OFFSET = 21


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """The model trained on the first day lifted by 21, and the next day's file (its own dip below zero, as many
    ticks, so `--test-from test` cuts it where evaluate's test part starts)."""
    root, _ = power_model(tmp_path_factory.mktemp("offset_other"), STREAM, f"{STREAM}={OFFSET}", seed=11)
    rng = np.random.default_rng(12)
    level = np.where((np.arange(TICKS) > 900) & (np.arange(TICKS) < 1300), -12.0, 35.0)
    prices = np.round(level + np.cumsum(rng.choice([-0.05, 0.0, 0.05], TICKS)), 2)
    next_day = root / "power_next_day.csv"
    pl.DataFrame({"timestamp": [f"2026-11-04 08:{i // 600:02d}:{i // 10 % 60:02d}.{i % 10}00" for i in range(TICKS)],
                  "symbol": [STREAM] * TICKS, "price": prices,
                  "size": np.round(rng.uniform(0.1, 25, TICKS), 1)}).write_csv(next_day)
    assert (prices <= 0).sum() > 300  # unshifted, those rows are refused as nonpositive_price
    return root / "m", next_day


def test_backtest_of_another_file_reads_it_with_the_offset_and_scores_what_evaluate_scores(trained, tmp_path,
                                                                                          capsys) -> None:
    model, next_day = trained
    points_file, answers = tmp_path / "points.parquet", tmp_path / "answers.parquet"
    assert main(["evaluate", str(model), str(next_day), "--threads", "1", "--resamples", "10", "--json",
                 "--batch-ms", "100", "--points-out", str(points_file)]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    taken = f"reading the files with --price-offset {STREAM}={OFFSET}, as this model was trained"
    assert taken in captured.err and result["rejected"] == {}, captured.err

    queries = tmp_path / "dir20.yaml"
    queries.write_text("queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, "
                       "trigger: batch}\n")
    assert main(["backtest", str(next_day), "--model", str(model), "--queries", str(queries), "--out", str(answers),
                 "--test-from", "test", "--batch-ms", "100", "--threads", "1", "--quiet", "--no-plot"]) == 0
    captured = capsys.readouterr()
    assert f"flashtick backtest: note: {taken}" in captured.err, captured.err
    assert f"replayed {TICKS} ticks (0 rejected)" in captured.out and "nonpositive_price" not in captured.err
    assert "trained on files read with" not in captured.err  # (the mismatch note of a file read unshifted)

    # the same ticks at the same level: the answers backtest scores are evaluate's test points, label for label
    points = pl.read_parquet(points_file).filter(pl.col("question") == "direction_20").sort("tick")
    start, stop = result["streams"][STREAM]["test"]
    scored = pl.read_parquet(answers).filter(pl.col("realised").is_not_null() & (pl.col("ticks") > start)
                                             & (pl.col("ticks") <= stop)).sort("ticks")
    assert scored.height == points.height > 20
    # and --test-from test scored those answers alone: evaluate's test part of this file, as many ticks as training's
    assert json.loads(answers.with_suffix(".scores.json").read_text())[0]["scored"] == points.height
    assert (scored["ticks"] - 1).to_list() == points["tick"].to_list()
    assert scored["data_ts"].to_list() == points["data_ts"].to_list()
    assert scored["realised"].to_list() == points["realised"].to_list()


def test_an_offset_given_otherwise_is_kept_and_said(trained, tmp_path, capsys) -> None:
    """The offset is taken unless given: one given wins (a user may mean it), and the mismatch is said."""
    model, next_day = trained
    queries = tmp_path / "dir20.yaml"
    queries.write_text("queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice}\n")
    assert main(["backtest", str(next_day), "--model", str(model), "--queries", str(queries), "--out",
                 str(tmp_path / "a.parquet"), "--price-offset", f"{STREAM}=30", "--threads", "1", "--quiet",
                 "--no-plot"]) == 0
    err = capsys.readouterr().err
    assert "as this model was trained" not in err
    assert f"this model was trained on files read with --price-offset {STREAM}={OFFSET}; these files are read with " \
           f"--price-offset {STREAM}=30" in err, err
