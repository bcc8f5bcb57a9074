"""`evaluate` (and `train`, whose table is the same report) on FX quotes that end soon after a weekend: split by
ticks, validation and test both fall in the first minutes after Sunday's reopen, and the split line says so, with
the part and the closure (review379 #11); a file without a closure near its held-out parts says nothing of one.
Real CSV files written here, the real command and the built-in model."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from engine.service.cli import main

QUICK = ["--max-points", "64", "--resamples", "10", "--threads", "1"]
FRIDAY = datetime(2024, 1, 5, 20, 0, tzinfo=timezone.utc)
SUNDAY = datetime(2024, 1, 7, 22, 0, 2, tzinfo=timezone.utc)


def quotes_csv(path: Path, times: list[datetime]) -> Path:
    rng = np.random.default_rng(5)
    mids = 1.0943 + np.cumsum(rng.choice([-0.00001, 0.0, 0.00001], len(times)))
    path.write_text("timestamp,symbol,bid,ask\n" + "".join(
        f"{t.strftime('%Y-%m-%dT%H:%M:%S.%fZ')},EURUSD,{m - 0.00001:.5f},{m + 0.00001:.5f}\n"
        for t, m in zip(times, mids)))
    return path


def parts_line(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("parts (UTC event times)"))


def test_held_out_parts_right_after_a_weekend_are_said_with_the_closure(tmp_path: Path, capsys) -> None:
    # Friday's last 1,000 quotes 7 s apart (to 21:56:33), then Sunday's reopen: 1,000 quotes 2 s apart
    times = [FRIDAY + timedelta(seconds=7 * i) for i in range(1000)]
    times += [SUNDAY + timedelta(seconds=2 * i) for i in range(1000)]
    path = quotes_csv(tmp_path / "eurusd.csv", times)
    assert main(["evaluate", "builtin", str(path), *QUICK]) == 0
    line = parts_line(capsys.readouterr().out)
    closure = "a 2 days market closure of EURUSD (2024-01-05T21:56:33Z to 2024-01-07T22:00:02Z)"
    assert f"; note: validation starts 15 min after and test starts 25 min after {closure}: " in line, line
    assert "held-out ticks at a reopen (the week's thinnest hours) or across a closure" in line


def test_a_split_away_from_any_closure_says_none(tmp_path: Path, capsys) -> None:
    path = quotes_csv(tmp_path / "eurusd.csv", [FRIDAY + timedelta(seconds=3 * i) for i in range(2000)])
    assert main(["evaluate", "builtin", str(path), *QUICK]) == 0
    assert "closure" not in parts_line(capsys.readouterr().out)


def test_a_test_part_across_a_closure_is_said_to_straddle_it(tmp_path: Path, capsys) -> None:
    # 1,800 quotes on Friday, the last 200 after the weekend: the test part (the last 300) spans the closure
    times = [FRIDAY + timedelta(seconds=4 * i) for i in range(1800)]
    times += [SUNDAY + timedelta(seconds=4 * i) for i in range(200)]
    assert main(["evaluate", "builtin", str(quotes_csv(tmp_path / "eurusd.csv", times)), *QUICK]) == 0
    line = parts_line(capsys.readouterr().out)
    assert "; note: test straddles a 2 days market closure of EURUSD (2024-01-05T21:59:56Z to 2024-01-07T22:00:02Z)" \
        in line, line
    assert "validation" not in line.split("; note: ")[1]
