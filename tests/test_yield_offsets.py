"""A yield that crosses zero (a Bund's or a JGB's, quoted in percent) is refused as any stream crossing zero is,
but the offset named is 100, with why: shifted by 100, one basis point of yield is one bp of the shifted price, so
move_bps_* read in yield bp and `up` means the yield rose; pasted, a 1 bp yield move is labelled ~1 bp (with the
old advice of 1 it read as ~100 bp: review379 #2). A spread's advice stays the next whole number. Real CSV files
written here, the real command."""

from __future__ import annotations

import shlex
from pathlib import Path

import polars as pl

from conftest import drain
from connectors.replay import FileReplay
from connectors.zero_crossings import planned_lifts, read_lifts
from engine.service.cli import main

ROWS = 160
STEP = 0.0002  # of yield per tick: 50 ticks move it 0.01, one basis point


def yield_file(path: Path) -> Path:
    """DE10Y quoted in yield (percent), 0.1 bp wide, rising steadily from -0.02 through zero to +0.0118."""
    lines = ["timestamp,symbol,bid,ask"]
    for i in range(ROWS):
        mid = -0.02 + STEP * i
        lines.append(f"2024-01-02T08:{i // 60:02d}:{i % 60:02d}.000000Z,DE10Y,{mid - 0.0005:.4f},{mid + 0.0005:.4f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_yield_crossing_zero_is_lifted_by_100_and_its_bps_are_yield_bps(tmp_path: Path, capsys) -> None:
    path, out = yield_file(tmp_path / "bund_yield.csv"), tmp_path / "bund.parquet"
    assert main(["backtest", str(path), "--out", str(out), "--quiet", "--no-plot"]) == 2
    err = capsys.readouterr().err
    offset = "--price-offset 'DE10Y=100'"
    assert f"the lowest price in the files: DE10Y -0.0205: to lift each stream above zero, {offset} " \
           f"(docs/replay.md); DE10Y looks like a yield in percent" in err, err
    assert "an offset of 100 makes one basis point of yield one bp of the shifted price, so move_bps_* and " \
           "volatility_* read in yield bp, and `up` means the yield rose" in err, err
    assert "measure the offset's level" not in err  # (said of a small offset, which this is not)
    assert main(["backtest", str(path), "--out", str(out), "--quiet", "--no-plot", *shlex.split(offset)]) == 0
    capsys.readouterr()
    moves = pl.read_parquet(out).filter(pl.col("query") == "move50", pl.col("realised").is_not_null())
    # each scored answer's next 50 ticks moved the yield by 0.01: 1 bp of yield, in the (0.5, 2] bp bucket
    assert moves.height > 0 and set(moves["realised"]) == {"+1.25"}, moves["realised"].value_counts()
    directions = pl.read_parquet(out).filter(pl.col("query") == "dir20", pl.col("realised").is_not_null())
    assert directions.height > 0 and set(directions["realised"]) == {"up"}  # the yield rose


def test_a_calendar_spread_crossing_zero_keeps_the_next_whole_number(tmp_path: Path) -> None:
    path = tmp_path / "spread.csv"
    path.write_text("timestamp,symbol,bid,ask\n" + "".join(
        f"2024-01-02T08:00:{i:02d}Z,CLZ4-CLF5,{-0.05 + 0.01 * i:.2f},{-0.04 + 0.01 * i:.2f}\n" for i in range(12)))
    replay = FileReplay(path)  # (its rows below zero come first: no hole, rejected with the advice)
    drain(replay)
    said = replay.rejected.examples["nonpositive_price"]
    assert "--price-offset 'CLZ4-CLF5=1'" in said and "like a yield" not in said, said


def test_the_plans_and_the_rejects_both_say_the_yield(tmp_path: Path) -> None:
    """One rule before and after the read (zero_crossings.planned_lifts, read_lifts): the stream lifted by 100."""
    replay = FileReplay(yield_file(tmp_path / "bund_yield.csv"))
    foreseen = planned_lifts(replay.plans)
    drain(replay)
    read = read_lifts(replay.rejected)
    assert (foreseen.lowest, foreseen.yields) == (read.lowest, read.yields) == ({"DE10Y": -0.0205}, {"DE10Y"})


def test_a_price_column_named_as_a_yield_gets_the_offset_of_100(tmp_path: Path) -> None:
    """By its column's name, whatever its values (JGB 10y at -0.27..+0.15, but named `yield`)."""
    path = tmp_path / "jgb.csv"
    path.write_text("timestamp,symbol,yield,size\n" + "".join(
        f"2024-01-02T00:00:{i:02d}Z,JGB10Y,{-0.27 + 0.03 * i:.3f},1\n" for i in range(15)))
    replay = FileReplay(path, columns={"ts": "timestamp", "stream_col": "symbol", "price": "yield", "size": "size"})
    drain(replay)
    said = replay.rejected.examples["nonpositive_price"]
    assert "--price-offset 'JGB10Y=100' (docs/replay.md); JGB10Y looks like a yield in percent" in said, said


def test_a_power_price_between_minus_5_and_30_is_no_yield(tmp_path: Path) -> None:
    """SE3's hourly prices at -2.96..24.97 EUR/MWh were called "a yield in percent" and lifted by 100 (review441 #6):
    a yield moves by basis points, a power price by euros an hour, and a column in EUR/MWh is a price. Lifted by the
    next whole number above its lowest, with no word of yields."""
    prices = [12.0 + 5 * ((i * 7) % 5 - 2) for i in range(40)]
    prices[20:24] = [-1.5, -2.96, -0.4, -1.1]
    (tmp_path / "se3.csv").write_text("timestamp,symbol,price\n" + "".join(
        f"2024-06-01T{i // 4:02d}:{i % 4 * 15:02d}:00Z,SE3,{price}\n" for i, price in enumerate(prices)))
    (tmp_path / "se3_eur.csv").write_text("timestamp,symbol,Price [EUR/MWh]\n" + "".join(
        f"2024-06-01T{i // 4:02d}:{i % 4 * 15:02d}:00Z,SE3,{-0.02 + abs(i - 20) * 0.003:.3f}\n" for i in range(40)))
    for name in ("se3.csv", "se3_eur.csv"):
        lifts = planned_lifts(FileReplay(tmp_path / name).plans)
        assert lifts.holed == {"SE3"} and lifts.yields == frozenset(), (name, lifts)
