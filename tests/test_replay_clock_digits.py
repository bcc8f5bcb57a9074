"""KRX-style times of day written as clock digits beside a date column (`20240102,090001418`: 09:00:01.418 KST;
`090005`: 09:00:05) are read as a wall clock, zero-padded text and numbers without the leading zero alike, not as
us or ms after midnight (review 231, finding 1: 09:00:01.418 read as 00:01:30.001418); a sample that cannot tell
the two readings apart is refused naming both; `--ts-unit hhmmss_ms` says it outright. Real CSV files written
here, read by the real replay and the CLI."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from conftest import drain
from connectors.replay import FileReplay
from engine.service.cli import main

SEOUL = ZoneInfo("Asia/Seoul")


def krx_file(path: Path, rows: int, step_ms: int, digits: int, padded: bool) -> list[datetime]:
    """KRX ticks `date,time,symbol,price,volume`, times HHMMSS plus `digits` of the second, from 09:00 Seoul time;
    the wall-clock times written, in order."""
    rng = random.Random(232)
    t, written = datetime(2024, 1, 2, 9, 0, 0), []
    with path.open("w") as f:
        f.write("date,time,symbol,price,volume\n")
        for _ in range(rows):
            t += timedelta(milliseconds=rng.randint(1, step_ms))
            t -= timedelta(microseconds=t.microsecond % 1000 if digits == 3 else t.microsecond)
            clock = f"{t:%H%M%S}" + (f"{t.microsecond // 1000:03d}" if digits == 3 else "")
            f.write(f"20240102,{clock if padded else clock.lstrip('0')},005930,{78500 + rng.choice([-100, 100])},"
                    f"{rng.randint(1, 500)}\n")
            written.append(t)
    return written


def utc_ns(wall: datetime) -> int:
    return int(wall.replace(tzinfo=SEOUL).astimezone(timezone.utc).timestamp() * 10**6) * 1000


@pytest.mark.parametrize("digits, padded", [(3, True), (3, False), (0, True), (0, False)])
def test_clock_digits_beside_a_date_read_as_the_wall_clock(tmp_path: Path, digits: int, padded: bool) -> None:
    path = tmp_path / "KRX_005930_20240102.csv"
    written = krx_file(path, 600, 3000 if digits else 5000, digits, padded)
    replay = FileReplay(path, columns={"tz": "Asia/Seoul"})
    ticks = drain(replay)
    assert [t.ts for t in ticks] == [utc_ns(w) for w in written]
    assert ticks[0].ts == utc_ns(written[0]) and datetime.fromtimestamp(ticks[0].ts / 1e9, timezone.utc).hour == 0
    unit = "hhmmss_ms" if digits else "hhmmss"
    assert f"read as ts_unit {unit} of each row's day in \"date\"" in "\n".join(replay.notes)


def test_explicit_unit_reads_integers_without_the_leading_zero(tmp_path: Path) -> None:
    path = tmp_path / "krx.csv"
    written = krx_file(path, 20, 100, 3, padded=False)  # all within a few seconds: only the unit tells
    ticks = drain(FileReplay(path, columns={"ts": "date+time", "ts_unit": "hhmmss_ms", "tz": "Asia/Seoul"}))
    assert [t.ts for t in ticks] == [utc_ns(w) for w in written]


def test_a_sample_that_cannot_tell_is_refused_naming_both_readings(tmp_path: Path, capsys) -> None:
    path = tmp_path / "KRX_000660_20240102.csv"
    krx_file(path, 5, 5000, 0, padded=True)  # five rows within 25 s: digits and counts alike
    queries = tmp_path / "q.yaml"
    queries.write_text("queries: [{name: dir5, streams: ['*'], question: direction_5, kind: choice, "
                       "trigger: {ticks: 5}}]\n")
    code = main(["backtest", str(path), "--tz", "Asia/Seoul", "--queries", str(queries), "--out",
                 str(tmp_path / "o.parquet")])
    err = capsys.readouterr().err
    assert code != 0
    assert "reads two ways" in err and "--ts-unit hhmmss)" in err and "--ts-unit ms_after_midnight" in err
    assert "is 09:00:0" in err and "is 00:01:30" in err


def test_one_days_clock_digits_with_date_and_digits_out_of_range_refused(tmp_path: Path) -> None:
    path = tmp_path / "krx.csv"
    written = krx_file(path, 20, 3000, 3, padded=True)
    ticks = drain(FileReplay(path, columns={"ts": "time", "ts_unit": "hhmmss_ms", "date": "2024-01-02",
                                            "price": "price", "stream_col": "symbol", "tz": "Asia/Seoul"}))
    assert [t.ts for t in ticks] == [utc_ns(w) for w in written]
    bad = tmp_path / "bad.csv"
    bad.write_text("date,time,price\n20240102,096101418,1\n20240102,096102000,2\n")  # minute 61
    with pytest.raises(ValueError, match=r"not a wall clock's HHMMSS digits \(9 of them"):
        drain(FileReplay(bad, columns={"ts": "date+time", "ts_unit": "hhmmss_ms", "stream": "X"}))


def test_a_full_map_without_a_unit_reads_clock_digits_too(tmp_path: Path) -> None:
    path = tmp_path / "krx.csv"
    written = krx_file(path, 600, 3000, 3, padded=False)
    replay = FileReplay(path, columns={"ts": "date+time", "price": "price", "size": "volume", "stream_col": "symbol",
                                       "tz": "Asia/Seoul"})
    assert [t.ts for t in drain(replay)] == [utc_ns(w) for w in written]
    assert any("read as ts_unit hhmmss_ms" in note for note in replay.notes)


def test_clock_digits_in_the_repeated_hour_read_at_the_second_pass_after_the_step_back(tmp_path: Path) -> None:
    """New York's 01:00-01:59 comes twice on 2026-11-01: clock digits written through both passes were all read at
    the earlier instant (then sorted, the second pass merged into the first); they go through the repeated-hour
    handling text times go through, so each row is read at its own pass, in file order."""
    new_york, utc = ZoneInfo("America/New_York"), timezone.utc
    first_pass = [datetime(2026, 11, 1, 0, 30) + timedelta(seconds=10 * k) for k in range(540)]  # to 01:59:50 EDT
    second_pass = [datetime(2026, 11, 1, 1, 0) + timedelta(seconds=10 * k) for k in range(540)]  # to 02:29:50 EST
    path = tmp_path / "ESZ6_20261101.csv"
    with path.open("w") as f:
        f.write("date,time,symbol,price,volume\n")
        for k, wall in enumerate(first_pass + second_pass):
            f.write(f"20261101,{wall:%H%M%S}{k % 1000:03d},ESZ6,{100 + k % 7 * 0.25},{1 + k % 5}\n")
    expected = [int(w.replace(tzinfo=new_york, fold=fold).astimezone(utc).timestamp()) * 10**9 + k % 1000 * 10**6
                for fold, walls, start in ((0, first_pass, 0), (1, second_pass, 540))
                for k, w in enumerate(walls, start)]
    replay = FileReplay(path, columns={"tz": "America/New_York"})
    assert [t.ts for t in drain(replay)] == expected
    assert "360 row(s) after the step back read at the second pass" in "\n".join(replay.notes)
