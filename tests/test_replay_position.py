"""Where a backtest is in a folder of daily files (review382 #6): the progress line names the event time reached
and the file it came from, a stop says the same, and under --streams and --max-ticks the bar counts ticks against
its total (it counted the rows the filter left out and ran past it, losing the % and the ETA). Real files, the
tiny tick model; the bar drawn into pytest's captured stderr, no terminal."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import polars as pl
import pytest

from conftest import engine_dir
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import utc_text
from engine.service.backtest import BacktestInterrupted, run_backtest as library_run_backtest
from engine.service.config import ServiceConfig

run_backtest = functools.partial(library_run_backtest, plot=False)

QUERIES = """
queries:
  - {name: dir5, streams: ["*"], question: direction_5, kind: choice, trigger: {ticks: 3}}
"""
DAY_TICKS = 300


@pytest.fixture(scope="module")
def days(tmp_path_factory) -> tuple[Path, list]:
    """An engine folder and `days/day1.parquet`, `days/day2.parquet`: one synthetic market's ticks cut in two."""
    root = engine_dir(tmp_path_factory.mktemp("position"), QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=4)).next_batch(2 * DAY_TICKS)
    (root / "days").mkdir()
    for day in range(2):
        part = ticks[day * DAY_TICKS:(day + 1) * DAY_TICKS]
        pl.DataFrame([t.to_wire() for t in part]).write_parquet(root / "days" / f"day{day + 1}.parquet")
    return root, ticks


def test_a_stop_says_the_event_time_and_file_reached(days, tmp_path: Path, capsys) -> None:
    root, ticks = days
    polls = iter(range(10**6))
    with pytest.raises(BacktestInterrupted) as stopped:
        run_backtest(ServiceConfig.load(root / "engine.yaml"), root / "days", root / "q.yaml", tmp_path / "a.parquet",
                     progress=True, checkpoint_s=0.01, stop=lambda: next(polls) >= 140)
    e = stopped.value
    assert DAY_TICKS < e.ticks < 2 * DAY_TICKS  # stopped in the second day
    last = ticks[e.ticks - 1]  # the last tick taken: the files hold the market's ticks in time order
    assert (f"interrupted after {e.ticks} ticks (event time {utc_text(last.ts)}, file days/day2.parquet (2 of 2)); "
            in str(e)), str(e)
    err = capsys.readouterr().err  # the bar, drawn on a stderr that is no terminal (progress=True)
    shown = re.findall(r"replaying (\d{4}-\d\d-\d\d \d\d:\d\dZ) days/(day\d)\.parquet \((\d)/2\)", err)
    assert shown, err[-500:]
    assert {(name, index) for _, name, index in shown} <= {("day1", "1"), ("day2", "2")}
    assert shown[-1][1:] == ("day2", "2")
    assert shown[-1][0] <= f"{utc_text(last.ts)[:10]} {utc_text(last.ts)[11:16]}Z"  # (redrawn up to 10 times a s)


def test_the_bar_counts_ticks_against_max_ticks_under_a_stream_filter(days, tmp_path: Path, capsys) -> None:
    root, ticks = days
    stream = ticks[0].stream
    limit = 100
    assert sum(t.stream == stream for t in ticks) > limit and len({t.stream for t in ticks}) > 1
    report = run_backtest(ServiceConfig.load(root / "engine.yaml"), root / "days", root / "q.yaml",
                          tmp_path / "b.parquet", progress=True, streams=[stream], max_ticks=limit)
    assert report.ticks == limit
    err = capsys.readouterr().err
    counts = [(int(n), int(total)) for n, total in re.findall(r"\| *(\d+)/(\d+) \[", err)]
    assert counts and all(total == limit and n <= limit for n, total in counts), counts
    assert counts[-1] == (limit, limit)
