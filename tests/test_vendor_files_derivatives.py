"""Crypto derivatives vendor files: what holds trades or quotes is read as such, and what holds only a
derivative's other data (book level updates, funding, mark and index prices, liquidations) is never read as
trade prints. Each file is written here byte for byte in the vendor's layout (docs/replay.md's vendor table)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from conftest import drain
from connectors.map_options import map_from_options
from connectors.replay import FileReplay

T0_US = 1_704_153_600_000_000  # 2024-01-02 00:00:00 UTC, in us
L2_HEADER = "exchange,symbol,timestamp,local_timestamp,is_snapshot,side,price,amount\n"


def write_gz(path: Path, text: str) -> Path:
    with gzip.open(path, "wt", newline="") as f:
        f.write(text)
    return path


def tardis_l2(path: Path) -> Path:
    """A snapshot of two levels a side at T0, then updates: a size change at the best bid, a deletion of the best
    ask, an update below the best bid (no quote), and a second snapshot that rebuilds the bids."""
    rows = [
        (0, "true", "bid", "42000.0", "1.5"), (0, "true", "bid", "41999.5", "2"),
        (0, "true", "ask", "42000.5", "0.7"), (0, "true", "ask", "42001.0", "3"),
        (100, "false", "bid", "42000.0", "1.1"),
        (200, "false", "ask", "42000.5", "0"),
        (300, "false", "bid", "41990.0", "9"),
        (400, "true", "bid", "41998.0", "4"), (400, "true", "bid", "41997.5", "1"),
    ]
    text = L2_HEADER + "".join(f"bybit,BTCUSDT,{T0_US + dt},{T0_US + dt + 800},{snap},{side},{px},{amount}\n"
                               for dt, snap, side, px, amount in rows)
    return write_gz(path, text)


def quotes(replay: FileReplay) -> list[tuple]:
    return [(t.kind, t.stream, t.ts, t.bid, t.bid_size, t.ask, t.ask_size) for t in drain(replay)]


def test_tardis_incremental_book_l2_replays_as_top_of_book_quotes(tmp_path: Path) -> None:
    path = tardis_l2(tmp_path / "bybit_incremental_book_L2_2024-01-02_BTCUSDT.csv.gz")
    replay = FileReplay(path)
    t0 = T0_US * 1000
    assert quotes(replay) == [
        ("quote", "BTCUSDT", t0, 42000.0, 1.5, 42000.5, 0.7),  # the snapshot, quoted once at its end
        ("quote", "BTCUSDT", t0 + 100_000, 42000.0, 1.1, 42000.5, 0.7),
        ("quote", "BTCUSDT", t0 + 200_000, 42000.0, 1.1, 42001.0, 3.0),  # the best ask deleted
        ("quote", "BTCUSDT", t0 + 400_000, 41998.0, 4.0, 42001.0, 3.0),  # the new snapshot replaced the bids
    ]
    assert not replay.rejected
    assert any("incremental_book_L2" in note and "no trades" in note for note in replay.notes)


def test_a_side_map_for_l2_sides_still_reads_the_book_not_trades(tmp_path: Path) -> None:
    """The review's workaround (side_map bid: buy, ask: sell) made every level update a trade; the book reads."""
    path = tardis_l2(tmp_path / "bybit_incremental_book_L2_2024-01-02_BTCUSDT.csv.gz")
    (tmp_path / "l2map.yaml").write_text("side_map: {bid: buy, ask: sell}\n")
    ticks = drain(FileReplay(path, columns=map_from_options(columns=str(tmp_path / "l2map.yaml"), detect=True)))
    assert ticks and {t.kind for t in ticks} == {"quote"}
