"""review262 #1: a venue's leap second (`23:59:60.x`) read as the next second and sorted behind the ticks that
followed it, `23:59:60.000` on the real midnight's time, under a note blaming "newest first, or merged"; a clock
stepping back 1 s there (POSIX time) had its two passes of 23:59:59 interleaved under the same note. Both are read
as the last instant of the second before the leap, in file order, with a note naming the leap second. Small real
files in tmp_path, the real replay and the real backtest."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from engine.service.cli import main
from conftest import drain

MIDNIGHT = 1_483_228_800_000_000_000  # 2017-01-01T00:00:00Z, after the leap second of 2016-12-31
LAST = MIDNIGHT - 1  # 2016-12-31T23:59:59.999999999Z


def leap_text(path: Path) -> Path:
    """The review's file: a venue stamping the leap second as 23:59:60.x, rows in its order (prices 101..107)."""
    times = ["2016-12-31T23:59:59.800000000Z", "2016-12-31T23:59:59.900000000Z", "2016-12-31T23:59:60.000000000Z",
             "2016-12-31T23:59:60.500000000Z", "2017-01-01T00:00:00.000000000Z", "2017-01-01T00:00:00.100000000Z",
             "2017-01-01T00:00:00.200000000Z"]
    path.write_text("timestamp,symbol,price,size\n" + "".join(f"{t},LEAP,{101 + i},1\n" for i, t in enumerate(times)))
    return path


def posix_step(path: Path, per_ns: int = 1) -> Path:
    """The review's step.csv: a venue whose int clock steps back 1 s at midnight, repeating 23:59:59 (in ns, or in
    the unit of `per_ns` ns)."""
    base = MIDNIGHT - 10**9
    times = [base, base + 500_000_000, base + 999_999_999, base + 1, base + 500_000_001, MIDNIGHT,
             MIDNIGHT + 100_000_000]
    path.write_text("ts,symbol,price,size\n" + "".join(f"{t // per_ns},STEP,{101 + i},1\n"
                                                       for i, t in enumerate(times)))
    return path


def read(path: Path, **options: str) -> tuple[list[tuple[int, float]], list[str]]:
    with FileReplay(path, columns=map_from_options(detect=True, **options) if options else None) as replay:
        return [(t.ts, t.price) for t in drain(replay)], replay.notes


def test_a_leap_second_written_60_keeps_its_place_before_midnight(tmp_path: Path) -> None:
    ticks, notes = read(leap_text(tmp_path / "leap.csv"))
    assert [price for _, price in ticks] == [101, 102, 103, 104, 105, 106, 107]  # the venue's order
    assert [ts for ts, _ in ticks][2:5] == [LAST, LAST, MIDNIGHT]
    assert "leap.csv: 2 row(s) stamped in a leap second (:60, on 2016-12-31): read at the last instant of the " \
           "second before it (:59.999999999), in file order, before the next second's rows (UTC times, as POSIX " \
           "time, have no 61st second)" in notes, notes
    assert not any("not in time order" in note for note in notes), notes


def test_a_leap_second_in_a_format_given_or_in_local_time_reads_alike(tmp_path: Path) -> None:
    path = tmp_path / "ny.csv"
    path.write_text("time,symbol,price,size\n" + "".join(
        f"2016-12-31 {t},S,{101 + i},1\n" for i, t in enumerate(["18:59:59.5", "18:59:60.0", "18:59:60.5",
                                                                 "19:00:00.0"])))
    ticks, notes = read(path, tz="America/New_York")
    assert ticks == [(LAST - 499_999_999, 101), (LAST, 102), (LAST, 103), (MIDNIGHT, 104)]
    assert any("2 row(s) stamped in a leap second" in note for note in notes), notes
    ticks, _ = read(leap_text(tmp_path / "leap.csv"), ts_format="%Y-%m-%dT%H:%M:%S%.fZ")
    assert [price for _, price in ticks] == [101, 102, 103, 104, 105, 106, 107]


def test_a_clock_stepping_back_1_s_in_the_leap_second_is_said_so_and_keeps_file_order(tmp_path: Path) -> None:
    ticks, notes = read(posix_step(tmp_path / "step.csv"))
    assert [price for _, price in ticks] == [101, 102, 103, 104, 105, 106, 107]
    assert [ts for ts, _ in ticks][2:6] == [LAST, LAST, LAST, MIDNIGHT]
    assert "step.csv: its clock steps back 1 s in the leap second ending 2016-12-31, repeating 23:59:59 as POSIX " \
           "time does: the 2 row(s) after the step back, the leap second's, read at the last instant of that second " \
           "(23:59:59.999999999 UTC), in file order" in notes, notes
    assert not any("newest first" in note for note in notes), notes
    ticks, notes = read(posix_step(tmp_path / "step_ms.csv", per_ns=10**6), ts_unit="ms")
    assert [price for _, price in ticks] == [101, 102, 103, 104, 105, 106, 107]
    assert any("(23:59:59.999 UTC)" in note for note in notes), notes


def test_a_step_back_of_a_second_on_another_day_is_no_leap_second(tmp_path: Path) -> None:
    path = tmp_path / "day_before.csv"
    path.write_text("ts,symbol,price,size\n" + "".join(
        f"{t - 86_400 * 10**9},S,{101 + i},1\n" for i, t in enumerate([MIDNIGHT - 10**9 + 900_000_000,
                                                                      MIDNIGHT - 10**9 + 1, MIDNIGHT])))
    ticks, notes = read(path)
    assert [price for _, price in ticks] == [102, 101, 103]  # sorted by time, as any file out of order
    assert any("its rows are not in time order" in note for note in notes)
    # (fix281 #6: named for what it is, a step back of the clock that is no leap second's)
    assert not any("stamped in a leap second" in note or "steps back 1 s in the leap second" in note
                   for note in notes), notes
    assert any("not at a leap second: a clock correction?" in note for note in notes), notes


@pytest.mark.parametrize("correction_ms, said", [(1000, True), (1250, True), (650, False), (1750, False)])
def test_a_clock_stepping_back_a_second_outside_a_leap_second_is_named_with_its_row(
        tmp_path: Path, correction_ms: int, said: bool) -> None:
    """fix281 #6: a 1 s step back at no leap second (a clock corrected mid-session) got the generic "newest
    first, or merged from several sources", which it is neither; named now for what it is, with its row. A tick
    every 250 ms, the clock set back `correction_ms` after line 31: a step back of 750 ms to 1 s is named, a
    smaller (a few rows out of order) or a larger one keeps the generic cause."""
    start = 1_709_648_520_000_000_000  # 2024-03-05T14:22:00Z, no leap second near
    times = [start + 250_000_000 * i for i in range(1, 31)]
    times += [times[-1] + 250_000_000 * i - correction_ms * 1_000_000 for i in range(1, 31)]
    path = tmp_path / "clock_step.csv"
    path.write_text("timestamp,symbol,price,size\n" + "".join(f"{t},AAPL,{170 + 0.01 * (i % 5):.2f},{100 + i}\n"
                                                              for i, t in enumerate(times)))
    replay = FileReplay(path)
    assert [t.ts for t in drain(replay)] == sorted(times)
    note = next(n for n in replay.notes if "its rows are not in time order" in n)
    back_ms = correction_ms - 250
    step = f"{back_ms} ms" if back_ms < 1000 else "1 s"
    expected = (f"the clock stepped back {step} at 2024-03-05T14:22:07.500000000Z (line 32: "
                f"2024-03-05T14:22:{7.5 - back_ms / 1000:09.6f}000Z), not at a leap second: a clock correction?")
    assert (expected in note) == said, note
    assert ("newest first, or merged from several sources" in note) != said, note


def test_a_backtest_answers_the_leap_second_before_midnight(tmp_path: Path, capsys) -> None:
    out = tmp_path / "bt" / "answers.parquet"
    assert main(["backtest", str(leap_text(tmp_path / "leap.csv")), "--out", str(out), "--batch-ms", "0.001",
                 "--quiet", "--threads", "1"]) == 0
    assert "note: leap.csv: 2 row(s) stamped in a leap second" in capsys.readouterr().err
    answers = pl.read_parquet(out)
    last = answers.filter(pl.col("ticks") == answers["ticks"].max())
    assert last["data_ts"].unique().to_list() == [MIDNIGHT + 200_000_000]  # the venue's last tick, not the leap's
