"""Two bar files of one instrument over the same minutes replay each bar once (review315 #10): the rule of one file's
repeated bars (connectors/repeated_bars.py) across a run's files: the bar of the file given later replaces the
earlier file's of the same stream and bar time, counted as filtered_out and cautioned (how many identical, how many
revised, the first with its file and line). Ticks are not bars: two trade files over one time keep every trade."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from conftest import drain
from connectors.replay import FileReplay

T0 = 1704205800  # 2024-01-02T14:30:00Z
REVISED = 8  # the minute the second file revises


def bars(minutes: range, revised_by: float = 0.0) -> pl.DataFrame:
    """TradingView-style 1-minute bars of AAPL (the stream from the file name); minute m closes at 185 + m/100."""
    closes = [185.0 + m / 100 + (revised_by if m == REVISED else 0.0) for m in minutes]
    return pl.DataFrame({"time": [T0 + 60 * m for m in minutes], "open": [185.0] * len(minutes),
                         "high": [186.0] * len(minutes), "low": [184.0] * len(minutes), "close": closes,
                         "Volume": [100 + m for m in minutes]})


def replayed(replay: FileReplay) -> list[tuple[int, float]]:
    return [((t.ts // 10**9 - T0) // 60, t.price) for t in drain(replay)]


def test_a_later_files_bars_replace_the_earlier_ones_once_each(tmp_path: Path) -> None:
    bars(range(10)).write_csv(tmp_path / "AAPL_1m.csv")  # minutes 0-9
    bars(range(6, 14), revised_by=0.5).write_parquet(tmp_path / "AAPL_1m.parquet")  # 6-13, minute 8 revised
    replay = FileReplay([tmp_path / "AAPL_1m.csv", tmp_path / "AAPL_1m.parquet"])
    assert replayed(replay) == [(m, round(185.0 + m / 100 + (0.5 if m == REVISED else 0.0), 2)) for m in range(14)]
    assert replay.rejected == {"filtered_out": 4}  # the CSV's minutes 6-9
    caution = next(n for n in replay.cautions if "file given after theirs" in n)
    assert caution.startswith("4 bar(s) of 2 files repeat the stream and bar time of a bar in a file given after "
                              "theirs (3 with the same values (a re-download), 1 with other values (a revised bar))")
    assert (f"the first: {tmp_path / 'AAPL_1m.csv'} line 8 (2024-01-02T14:36:00Z, AAPL), replaced by "
            f"{tmp_path / 'AAPL_1m.parquet'} row 1") in caution
    # the files now follow each other: no caution of two sources interleaved
    assert not any("whose times overlap" in n for n in replay.notes)

    replay = FileReplay([tmp_path / "AAPL_1m.parquet", tmp_path / "AAPL_1m.csv"])  # the order given decides
    assert replayed(replay) == [(m, round(185.0 + m / 100, 2)) for m in range(14)]
    assert replay.rejected == {"filtered_out": 4}
    assert any(n.startswith("4 bar(s) of 2 files") and f"{tmp_path / 'AAPL_1m.parquet'} row 1" in n
               for n in replay.cautions)


def test_bars_of_other_streams_or_times_and_ticks_are_left_as_they_are(tmp_path: Path) -> None:
    bars(range(5)).write_csv(tmp_path / "AAPL_1m.csv")
    bars(range(5)).write_csv(tmp_path / "MSFT_1m.csv")  # the same times, another stream
    bars(range(5, 8)).write_parquet(tmp_path / "AAPL_1m.parquet")  # the next minutes
    replay = FileReplay([tmp_path / "AAPL_1m.csv", tmp_path / "MSFT_1m.csv", tmp_path / "AAPL_1m.parquet"])
    assert len(drain(replay)) == 13 and replay.rejected == {}
    assert not any("file given after theirs" in n for n in replay.notes)

    trades = "ts,symbol,price,size\n2024-01-02T10:00:00Z,AAPL,185.5,100\n2024-01-02T10:01:00Z,AAPL,185.6,100\n"
    (tmp_path / "a.csv").write_text(trades)
    pl.read_csv(tmp_path / "a.csv").write_parquet(tmp_path / "b.parquet")
    replay = FileReplay([tmp_path / "a.csv", tmp_path / "b.parquet"])  # ticks: every trade replayed
    assert len(drain(replay)) == 4 and replay.rejected == {}
    assert not any("file given after theirs" in n for n in replay.notes)
