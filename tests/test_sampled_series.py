"""Series sampled an hour or more apart as a rule (daily bars, settlements, an hourly power auction): every tick is
a pause of an hour or more. A split is said once, at its day, judged tick to tick (review208 #1: a 2-for-1 split in
daily bars was cautioned three times at the wrong days and missed at its own); the backtest's note on labels
across a close does not count their spacing as closes nor advise a --session-gap that scores nothing (review208 #3).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import tiny_tick_checkpoint
from connectors.labels import closes_spanned, ordinary_spacing
from connectors.price_steps import split_like_steps
from engine.service.cli import main

DAY = 86_400_000_000_000
QUERIES = """
queries:
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: move50, streams: ["*"], question: move_bps_50, kind: expectation, trigger: batch}
"""


def business_days(start: str, end: str) -> list[np.datetime64]:
    return [d for d in np.arange(np.datetime64(start), np.datetime64(end)) if np.is_busday(d)]


def yahoo_bars(path: Path, split_day: str | None = "2024-06-10", seed: int = 5) -> None:
    """Yahoo-style daily bars (Date,Open,High,Low,Close,Adj Close,Volume), 1.5% a day, halved at ``split_day``."""
    rng = np.random.default_rng(seed)
    p, lines = 1200.0, ["Date,Open,High,Low,Close,Adj Close,Volume"]
    for d in business_days("2024-01-02", "2024-09-30"):
        if str(d) == split_day:
            p = p / 2
        o = p
        p = round(p * (1 + rng.normal(0, 0.015)), 2)
        lines.append(f"{d},{o:.2f},{max(o, p) * 1.01:.2f},{min(o, p) * 0.99:.2f},{p:.2f},{p:.2f},"
                     f"{rng.integers(10**7, 9 * 10**7)}")
    path.write_text("\n".join(lines) + "\n")


def daily_closes(split_day: str, ratio: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A daily close series (1% a day) divided by ``ratio`` from ``split_day`` on: (ts ns, closes)."""
    rng = np.random.default_rng(seed)
    days = business_days("2021-01-04", "2021-07-30")
    p, closes = 100.0, []
    for d in days:
        p = round(p * (1 + rng.normal(0, 0.01)), 2)
        if str(d) == split_day:
            p = round(p / ratio, 2)
        closes.append(p)
    ts = np.array([np.datetime64(d, "ns").astype(np.int64) for d in days], dtype=np.int64)
    return ts, np.array(closes)


def test_a_split_in_daily_closes_is_said_once_at_its_day() -> None:
    ts, closes = daily_closes("2021-04-20", 4, seed=2)
    assert ordinary_spacing(ts) == DAY
    [step] = split_like_steps("XYZ", ts, closes)  # the 5-tick windows found it at 5 pauses, 4 of them wrong
    day = np.datetime64("2021-04-20", "ns").astype(np.int64)
    assert (str(step.ratio), step.before_ts, step.after_ts) == ("1/4", day - DAY, day)
    assert step.sampled_ns == DAY
    ts, closes = daily_closes("2021-04-20", 1, seed=2)  # the same days without the split
    assert split_like_steps("XYZ", ts, closes) == []
    bad = closes.copy()
    bad[70] /= 2  # a lone bad day, back the next: no split
    assert split_like_steps("XYZ", ts, bad) == []


def test_a_split_in_intraday_trades_is_still_judged_by_its_sessions() -> None:
    """Two sessions of a tick a minute: the pause between them is over an hour, the ordinary spacing is not."""
    minute = 60_000_000_000
    ts = np.concatenate([np.arange(300), 2 * 24 * 60 + np.arange(300)]).astype(np.int64) * minute
    prices = np.concatenate([45 + np.resize([0.0, 0.01, -0.01], 300), 22.5 + np.resize([0.01, 0.0, -0.01], 300)])
    [step] = split_like_steps("BF B", ts, prices)
    assert (str(step.ratio), step.before_ts, step.after_ts, step.sampled_ns) == ("1/2", 299 * minute,
                                                                                 2880 * minute, 0)


def test_backtest_of_daily_bars_cautions_a_split_once_and_its_spacing_is_no_close(tmp_path: Path, capsys) -> None:
    yahoo_bars(tmp_path / "NVDA.csv")
    yahoo_bars(tmp_path / "AAPL.csv", split_day=None, seed=6)
    (tmp_path / "q.yaml").write_text(QUERIES)
    # (--no-plot: no test here reads the calibration plot, about half of a short backtest's time)
    common = ["backtest", "--queries", str(tmp_path / "q.yaml"), "--threads", "1", "--quiet", "--no-plot"]
    assert main([*common, str(tmp_path / "NVDA.csv"), "--out", str(tmp_path / "nv.parquet")]) == 0
    out = capsys.readouterr().out
    stepped = [line for line in out.splitlines() if "stepped" in line]
    assert len(stepped) == 1, stepped
    assert stepped[0].startswith("warning: NVDA: its price stepped x0.507 across a pause of 3 days in event time "
                                 "(2024-06-07T00:00:00Z to 2024-06-10T00:00:00Z)"), stepped
    assert "(its ticks are 24 h apart as a rule, so a --session-gap would leave every answer unscored: adjust the " \
           "prices before it)" in stepped[0]
    assert "--session-gap 1h" not in out, out  # every tick is a pause: that advice scores nothing
    assert "note: NVDA: its ticks are 24 h apart as a rule" in out and "(dir20: 20 ticks, 20 trading days; " \
           "move50: 50 ticks, 50 trading days)" in out, out
    assert main([*common, str(tmp_path / "AAPL.csv"), "--out", str(tmp_path / "aapl.parquet")]) == 0
    assert "stepped" not in capsys.readouterr().out


def epex_hours(path: Path, days: int = 12) -> None:
    """An EPEX-style German export: hourly auction prices, `;`-separated, decimal commas, +02:00 times."""
    rng = np.random.default_rng(3)
    t = np.datetime64("2024-05-01T00:00", "m")
    lines = ["Zeitstempel;Gebiet;Preis;Volumen"]
    for i in range(24 * days):
        h = i % 24
        p = 60 + 30 * np.sin(h / 24 * 6.28) + rng.normal(0, 5)
        lines.append(f"{t + np.timedelta64(i, 'h')}:00+02:00;DE-LU;{p:.2f}".replace(".", ",")
                     + f";{rng.uniform(100, 3000):.1f}".replace(".", ","))
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("sampled") / "model", seed=3, max_position_embeddings=256)


def test_an_hourly_auction_is_told_what_its_labels_span_not_to_cut_every_tick(tiny: Path, tmp_path: Path,
                                                                               capsys) -> None:
    epex_hours(tmp_path / "epex.csv")
    (tmp_path / "q.yaml").write_text(QUERIES)
    assert main(["backtest", str(tmp_path / "epex.csv"), "--columns", "ts=Zeitstempel,price=Preis,size=Volumen,"
                 "stream=Gebiet", "--model", str(tiny), "--queries", str(tmp_path / "q.yaml"), "--threads", "1",
                 "--quiet", "--no-plot", "--out", str(tmp_path / "ep.parquet")]) == 0
    out = capsys.readouterr().out
    assert "are labelled across a pause of an hour or more" not in out and "--session-gap 1h" not in out, out
    assert "note: DE-LU: its ticks are 60 min apart as a rule (a series sampled hourly or daily: an auction's " \
           "hours, settlements, bars), so a label spans its own intervals (dir20: 20 ticks, about 20 h; move50: 50 " \
           "ticks, about 2.08 days)" in out, out
    assert "stepped" not in out, out


def test_closes_spanned_leaves_out_a_series_sampled_at_the_pause_length() -> None:
    hour = 3_600_000_000_000
    hourly = np.arange(10, dtype=np.int64) * hour
    assert not closes_spanned(hourly, 2, hour).any()
    minutes = np.concatenate([np.arange(5), 200 + np.arange(5)]).astype(np.int64) * 60_000_000_000  # a 3 h pause
    assert closes_spanned(minutes, 2, hour).tolist() == [False, False, False, True, True] + [False] * 5


def test_evaluate_and_train_say_the_backtests_note_on_a_series_sampled_hourly(tiny: Path, tmp_path: Path,
                                                                              capsys) -> None:
    """The backtest said what an hourly or daily series' labels span (its spacing is no close); `evaluate` and
    `train` said nothing of it. One note (session_gaps.sampled_note), the same words, on all three commands."""
    epex_hours(tmp_path / "epex.csv", days=40)
    reading = ["--columns", "ts=Zeitstempel,price=Preis,size=Volumen,stream=Gebiet", "--threads", "1", "--quiet"]
    said = ("note: DE-LU: its ticks are 60 min apart as a rule (a series sampled hourly or daily: an auction's hours, "
            "settlements, bars), so a label spans its own intervals (direction_5: 5 ticks, about 5 h; direction_20: "
            "20 ticks, about 20 h; volatility_50 and move_bps_50: 50 ticks, about 2.08 days) and its pauses of an "
            "hour or more are its sampling, not closes: not counted as labels across a pause, and no --session-gap "
            "is advised for it (one at its spacing or under leaves no answer scored)")
    assert main(["evaluate", str(tiny), str(tmp_path / "epex.csv"), *reading]) == 0
    err = capsys.readouterr().err
    assert f"flashtick evaluate: {said}\n" in err, err
    # a tiny model from scratch (the note is the reading's, whatever is trained): fine-tuning the built-in model
    # forwarded its validation windows twice, ~2/3 of this test's CPU
    tiny_model = ["--from-scratch", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
                  "--intermediate", "64", "--window-ticks", "63"]
    assert main(["train", str(tmp_path / "epex.csv"), *reading, "--out", str(tmp_path / "trained"), "--steps", "1",
                 "--split", "62/19/19", *tiny_model]) == 0
    err = capsys.readouterr().err
    assert f"flashtick train: {said}\n" in err, err


def test_daily_bars_say_trading_days_in_both_notes_and_their_saturation_by_bar_spacing_alone(tiny: Path,
                                                                                           tmp_path: Path,
                                                                                           capsys) -> None:
    """The bar reader's note and the backtest's note on a sampled series say a daily horizon alike, in trading
    days (one helper: connectors/bar_questions.horizon_span); the saturation note of a stream read from a bar file
    names its bar spacing as the cause, not an option's tick or a price near zero."""
    yahoo_bars(tmp_path / "MSFT.csv", split_day=None, seed=8)
    (tmp_path / "q.yaml").write_text(QUERIES)
    assert main(["backtest", str(tmp_path / "MSFT.csv"), "--model", str(tiny), "--queries", str(tmp_path / "q.yaml"),
                 "--threads", "1", "--no-plot", "--out", str(tmp_path / "ms.parquet")]) == 0
    said = capsys.readouterr()
    out = said.out + said.err
    assert "direction_20 20 bars (20 trading days)" in out, out  # the reader's note
    assert "(dir20: 20 ticks, 20 trading days; move50: 50 ticks, 50 trading days)" in out, out  # the backtest's
    assert "days)" not in out.replace("trading days)", ""), out  # no calendar days beside them
    [saturated] = [line for line in out.splitlines() if line.startswith("note: move50: move_bps_50 is saturated")]
    assert "and these streams are bars read from bar files (1d apart: 50 bars span 50 trading days): 50 bars move " \
           "more than its outer edges on most instruments" in saturated, saturated
    assert "a tick large against the price" not in saturated and "settlements" not in saturated, saturated
