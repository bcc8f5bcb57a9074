"""Two marks of a stream may be too far apart for float64: 5e-324 after 1e308 overflowed the move in bps to inf, with
numpy's 'overflow encountered in divide' and labels.py's path on stderr (review 111). Such a window has no label
(unscorable); every other is as before, and prices real instruments trade at (1e-8 crypto dust, 1e7 indices) label
as any. Since review283 #4 such prices are refused at the tick check (connectors/ticks.py: `price_out_of_range`
outside [1e-12, 1e15]), so a backtest never meets them; the labels still hold against marks that overflow."""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import tiny_tick_checkpoint
from connectors.labels import NO_LABEL, MarkTracker, label_series, realised_label
from connectors.questions import DEFAULT_QUESTIONS
from connectors.tick_errors import InvalidTick
from connectors.ticks import quote, trade
from engine.service.backtest import run_backtest
from engine.service.config import ServiceConfig

QUESTIONS = {spec.name: spec for spec in DEFAULT_QUESTIONS}
T0 = 1_723_161_254_000_000_000


def test_windows_too_wide_for_float64_have_no_label_and_no_warning() -> None:
    marks = np.array([100.0, 101.0, 1e308, 5e-324, 100.0, 99.0, 99.0, 100.0, 101.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy RuntimeWarning fails the test
        direction_5 = label_series(QUESTIONS["direction_5"], marks)
        direction = label_series(replace(QUESTIONS["direction_5"], horizon=1), marks)
        vol = label_series(replace(QUESTIONS["volatility_50"], horizon=2), marks)
    # 101 -> 1e308 and 5e-324 -> 100 overflow; 1e308 -> 5e-324 is -1e4 bps: down; the last has no future
    assert list(direction) == [2, NO_LABEL, 0, NO_LABEL, 0, 1, 2, 2, NO_LABEL]
    assert list(direction_5) == [0, 0, 0, NO_LABEL] + [NO_LABEL] * 5  # 5e-324 -> 101 overflows
    assert vol[0] != NO_LABEL and vol[4] != NO_LABEL and vol[7] == NO_LABEL  # log returns stay finite here
    marks[2] = np.inf  # a mid of two 1e308 sides: the windows over it lose their label, the later ones keep theirs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vol = label_series(replace(QUESTIONS["volatility_50"], horizon=2), marks)
    assert list(vol[:4] == NO_LABEL) == [True, True, True, False] and (vol[3:7] != NO_LABEL).all()


def test_live_scoring_of_an_overflowing_window_is_unscorable_and_real_extremes_label() -> None:
    spec = QUESTIONS["direction_5"]
    for price in (5e-324, 1e308):  # no longer a tick: refused before any label is made
        with pytest.raises(InvalidTick, match="price_out_of_range"):
            trade("X", T0, price, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for low, high in ((1e-8, 1.2e-8), (1e7, 1.1e7)):  # crypto dust, an index or BRK.A
            tracker = MarkTracker()
            tracker.update(quote("X", T0, low, low * 1.0001, 1.0, 1.0))
            ticks = [quote("X", T0 + i, high, high * 1.0001, 1.0, 1.0) for i in range(1, 6)]
            assert realised_label(spec, ticks, tracker) == "up"


def test_a_backtest_of_absurd_prices_says_no_numpy_warning(tmp_path: Path) -> None:
    prices = [100.0 + 0.01 * (i % 5) for i in range(120)]
    prices[40], prices[50] = 1e308, 5e-324  # the reviewer's evil_values.parquet
    pl.DataFrame({"timestamp": [T0 + i * 200_000_000 for i in range(120)], "symbol": ["EVIL"] * 120,
                  "price": prices, "size": [1.0] * 120}).write_parquet(tmp_path / "evil.parquet")
    (tmp_path / "q.yaml").write_text("queries:\n  - {name: dir5, streams: ['*'], question: direction_5, "
                                     "kind: choice, trigger: {ticks: 1}}\n")
    config = ServiceConfig.from_dict({"model": {"path": str(tiny_tick_checkpoint(tmp_path / "model"))},
                                      "kv": {"cells": 8192, "block_size": 16}})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        run_backtest(config, [tmp_path / "evil.parquet"], tmp_path / "q.yaml", tmp_path / "out.parquet",
                     progress=False)
    realised = dict(pl.read_parquet(tmp_path / "out.parquet").select("ticks", "realised").iter_rows())
    # the two absurd rows are refused (price_out_of_range): 118 ticks of ~100, every window with a future labelled
    assert max(realised) == 118 and {realised[n] for n in range(1, 114)} <= {"up", "flat", "down"}
