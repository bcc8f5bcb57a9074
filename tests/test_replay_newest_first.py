"""Newest-first exports (Bybit's and Coinbase's REST trades): every step between two times is a step back, and the
trades of one time are newest first too, so the replay reverses the file before its stable sort by time; a file
merged from sources keeps its rows of one time in file order. Real files in tmp_path, read by the real replay."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from connectors.replay import FileReplay
from conftest import drain

T0_MS = 1_723_161_254_087  # 2024-08-08T23:54:14.087Z
# oldest first: (ms after T0, price); several trades share a millisecond, as one aggressive order's fills do
TRADES = [(0, 100.0), (0, 100.5), (0, 101.0), (3, 101.5), (3, 101.0), (7, 100.0), (7, 99.5), (7, 99.0), (9, 99.5)]


def bybit_rows(trades: list[tuple[int, float]]) -> pl.DataFrame:
    return pl.DataFrame({"timestamp": [T0_MS + ms for ms, _ in trades], "symbol": "BTCUSDT",
                         "side": "Buy", "size": [0.001 * (i + 1) for i in range(len(trades))],
                         "price": [price for _, price in trades]})


def prices(replay: FileReplay) -> list[float]:
    return [tick.price for tick in drain(replay)]


def test_a_newest_first_file_replays_its_trades_of_one_time_oldest_first(tmp_path: Path) -> None:
    bybit_rows(TRADES[::-1]).write_csv(tmp_path / "bybit_desc.csv")
    replay = FileReplay(tmp_path / "bybit_desc.csv")
    assert prices(replay) == [price for _, price in TRADES]
    assert replay.notes[-1] == ("bybit_desc.csv: its rows are not in time order: 3 row(s) earlier than the row "
                                "before them, by up to 4 ms (newest first throughout); replayed reversed, then "
                                "sorted by time, rows of equal times in reverse file order (oldest first)")


def test_a_coinbase_rest_dump_newest_first_replays_in_trade_id_order(tmp_path: Path) -> None:
    times = [f"2024-08-08T23:54:14.{ms:06d}Z" for ms, _ in TRADES]  # microseconds shared, as Coinbase's are
    rows = pl.DataFrame({"trade_id": list(range(500, 500 + len(TRADES))), "price": [p for _, p in TRADES],
                         "size": 0.01, "time": times, "side": "sell"})
    rows.reverse().write_csv(tmp_path / "BTC-USD.csv")
    replay = FileReplay(tmp_path / "BTC-USD.csv", columns="coinbase-trades")
    assert prices(replay) == [price for _, price in TRADES]


def test_newest_first_pages_that_overlap_once_are_still_reversed(tmp_path: Path) -> None:
    # two pages concatenated newest first whose boundary steps forward once (a later page repeats a time)
    long = [(ms // 3, 100.0 + ms % 5) for ms in range(300)]  # oldest first, three trades a millisecond
    newest_first = long[::-1]
    pages = newest_first[:150] + newest_first[144:]  # page two starts six trades (two ms) back: one step forward
    bybit_rows(pages).write_csv(tmp_path / "pages.csv")
    replay = FileReplay(tmp_path / "pages.csv")
    assert "(newest first, but for 1 row(s) later than the row before them); replayed reversed" in \
        replay.notes[-1]
    got = prices(replay)
    assert got[:150] == [price for _, price in long[:150]] and len(got) == 306


def test_a_file_merged_from_sources_keeps_its_rows_of_one_time_in_file_order(tmp_path: Path) -> None:
    ascending = bybit_rows(TRADES)
    pl.concat([ascending[5:], ascending[:5]]).write_csv(tmp_path / "merged.csv")  # two sources, one after the other
    replay = FileReplay(tmp_path / "merged.csv")
    assert prices(replay) == [price for _, price in TRADES]
    assert "(newest first, or merged from several sources); replayed sorted by time, rows of equal times in file " \
           "order" in replay.notes[-1]
