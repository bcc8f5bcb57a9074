"""The labels' mark (connectors/labels.py) follows trades that print outside a stale quote: a stream whose quote
feed stops (post-market, a halt's reopening) is labelled from its trades until it quotes again; feeds that
quote while they trade (the shared Binance and EURUSD data) keep their labels mark for mark."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from connectors.labels import STALE_QUOTE_NS, MarkTracker, label_series, marks_of, realised_label
from connectors.questions import DEFAULT_QUESTIONS
from connectors.ticks import QUOTE, Tick, quote, trade
from engine.service.backtest import run_backtest as library_run_backtest
from engine.service.config import ServiceConfig
from engine.service.datasets import load_real
from engine.service.stream_marks import StreamMarksBook

# in-process runs without the calibration plot, about half of a short run's time, which no test here reads
run_backtest = functools.partial(library_run_backtest, plot=False)

SECOND = 1_000_000_000
OPEN = int(datetime(2026, 3, 10, 14, 30, tzinfo=timezone.utc).timestamp()) * SECOND  # 09:30 ET
QUESTIONS = {spec.name: spec for spec in DEFAULT_QUESTIONS}
QUERIES = """
queries:
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: move50, streams: ["*"], question: move_bps_50, kind: expectation, trigger: batch}
"""


def session_then_post_market_climb(stream: str = "AAA") -> list[Tick]:
    """The reviewer's fixture: 300 minutes of quotes around $100, each followed a second later by a trade inside it,
    then, 95 minutes after the last quote, 80 post-market trades 30 s apart climbing to $110 with no quote."""
    ticks = []
    for i in range(300):
        mid = 100.0 + (0.01 if i % 2 else -0.01)
        ts = OPEN + 60 * i * SECOND
        ticks.append(quote(stream, ts, round(mid - 0.01, 2), round(mid + 0.01, 2), 100.0, 100.0))
        ticks.append(trade(stream, ts + SECOND, round(mid, 2), 100.0))
    post = OPEN + (6 * 3600 + 35 * 60) * SECOND  # 16:05 ET
    ticks += [trade(stream, post + 30 * i * SECOND, round(100.0 + 10.0 * (i + 1) / 80, 2), 100.0) for i in range(80)]
    return ticks


def test_a_post_market_climb_after_the_last_quote_is_labelled_up() -> None:
    ticks = session_then_post_market_climb()
    marks = marks_of(ticks)
    assert marks[599] == pytest.approx(100.01) and list(marks[600:]) == [t.price for t in ticks[600:]]
    direction = label_series(QUESTIONS["direction_20"], marks)
    move = label_series(QUESTIONS["move_bps_50"], marks)
    assert {QUESTIONS["direction_20"].labels[i] for i in direction[599:660]} == {"up"}
    assert {QUESTIONS["move_bps_50"].labels[i] for i in move[599:630]} == {"+12"}
    # the regular session's trades print inside their fresh quotes: its marks are the mids
    assert np.array_equal(marks[:600:2], marks[1:600:2])
    assert np.allclose(marks[:600], [100.0 + (0.01 if i // 2 % 2 else -0.01) for i in range(600)])


def test_only_a_trade_outside_a_stale_quote_moves_the_mark_and_the_next_quote_takes_it_back() -> None:
    tracker = MarkTracker()
    assert tracker.update(trade("X", 0, 50.0, 1.0)) == 50.0  # before the first quote: trades
    assert tracker.update(quote("X", SECOND, 99.0, 101.0)) == 100.0
    assert tracker.update(trade("X", 2 * SECOND, 105.0, 1.0)) == 100.0  # outside, but the quote is fresh
    late = SECOND + STALE_QUOTE_NS + 1
    assert tracker.update(trade("X", late, 100.5, 1.0)) == 100.0  # stale, but inside the quote
    assert tracker.update(trade("X", late + 1, 101.5, 1.0)) == 101.5  # stale and outside: the trade
    assert tracker.update(trade("X", late + 2, 100.2, 1.0)) == 100.2  # back inside: trades mark it until a quote
    assert tracker.update(quote("X", late + 3, 102.0, 104.0)) == 103.0
    assert tracker.update(trade("X", late + 4, 110.0, 1.0)) == 103.0  # a fresh quote again


def test_one_point_labels_and_live_marks_agree_with_the_series() -> None:
    """realised_label (one answer point from a tracker's copy) and the live scores' StreamMarksBook both follow
    the trades after the stale quote, as label_series over the whole stream does."""
    ticks = session_then_post_market_climb()
    spec = QUESTIONS["direction_20"]
    series = label_series(spec, marks_of(ticks))
    tracker = MarkTracker()
    for i, tick in enumerate(ticks[:-spec.horizon]):
        tracker.update(tick)
        if i >= 590:
            assert realised_label(spec, ticks[i + 1 :], tracker) == spec.labels[series[i]]
    book = StreamMarksBook(QUESTIONS, committed=lambda stream: 0)
    for tick in ticks:
        book.observe(tick)
    marks = book.streams["AAA"]
    assert [marks.label(spec, point) for point in range(600, 661)] == list(series[599:660])


def test_a_backtest_labels_the_climb_up_chunked_and_batch_by_batch(tmp_path: Path) -> None:
    ticks = session_then_post_market_climb()
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(tmp_path / "post.parquet")
    (tmp_path / "q.yaml").write_text(QUERIES)
    # the built-in model: the labels are the data's, and a tiny checkpoint's build imported transformers, ~3/4 of
    # this test's CPU
    config = ServiceConfig.from_dict({"kv": {"cells": 8192, "block_size": 16}})
    tables = {}
    for name, chunked in [("chunked", True), ("batches", False)]:
        # batches of 5 minutes: the session's 5 quotes and trades, the climb's 10 trades (the default 100 ms made a
        # forward of every tick batch by batch); 6 answers of dir20 and 3 of move50 in the climb are realised
        run_backtest(config, [tmp_path / "post.parquet"], tmp_path / "q.yaml", tmp_path / f"{name}.parquet",
                     batch_ms=300_000, progress=False, chunked=chunked)
        tables[name] = pl.read_parquet(tmp_path / f"{name}.parquet").sort(["query", "stream", "seq"])
    exact = ["query", "stream", "seq", "ticks", "data_ts", "realised"]
    assert tables["chunked"].select(exact).equals(tables["batches"].select(exact))
    post = tables["chunked"].filter(pl.col("data_ts") > ticks[599].ts, pl.col("realised").is_not_null())
    realised = {query: set(rows["realised"]) for (query,), rows in post.group_by("query")}
    assert realised == {"dir20": {"up"}, "move50": {"+12"}}
    assert post.filter(pl.col("query") == "move50").height >= 3  # (not one answer alone)


def last_mid_marks(ticks: list[Tick]) -> np.ndarray:
    """The mark before stale quotes counted: last mid, last trade price until the first quote."""
    mark, quoted, out = None, False, []
    for tick in ticks:
        if tick.kind == QUOTE:
            mark, quoted = 0.5 * (tick.bid + tick.ask), True
        elif not quoted:
            mark = tick.price
        out.append(mark)
    return np.array(out, dtype=np.float64)


@pytest.mark.parametrize("name", ["BTCUSDT", "ETHUSDT", "EURUSD"])
def test_feeds_that_quote_while_they_trade_keep_every_label(shared_data: Path, name: str) -> None:
    if name == "ETHUSDT" and not (shared_data / "binance-ethusdt-spot").is_dir():
        pytest.skip("binance-ethusdt-spot/ not in the shared data folder")
    (data,) = load_real(shared_data, (name,))
    before, after = last_mid_marks(data.ticks), marks_of(data.ticks)
    assert np.array_equal(before, after)
    for spec in DEFAULT_QUESTIONS:
        if spec.kind != "regime":
            assert np.array_equal(label_series(spec, before), label_series(spec, after)), spec.name
