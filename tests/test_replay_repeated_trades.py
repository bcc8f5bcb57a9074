"""Trades repeated with the same trade id inside one file (REST pages concatenated with an overlap): counted per
stream and said as a caution with the first repeat's line, never silently replayed as if new. Real files in
tmp_path, read by the real replay and the real `flashtick backtest`."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from connectors.replay import FileReplay
from engine.service.cli import main
from test_vendor_files import drain

N = 40


def trades(ids: list[int], stream: str = "BTC-USD") -> pl.DataFrame:
    return pl.DataFrame({"trade_id": ids, "product_id": stream, "price": [100.0 + i % 3 for i in ids],
                         "size": 0.01, "time": [f"2024-08-08T23:54:{14 + i // 10:02d}.{i % 10}00000Z" for i in ids],
                         "side": "sell"})


def test_rows_that_repeat_a_trade_id_are_counted_and_said_with_the_first(tmp_path: Path) -> None:
    ids = list(range(20)) + list(range(15, N))  # the second page starts 5 trades before the first ended
    trades(ids).write_csv(tmp_path / "pages.csv")
    replay = FileReplay(tmp_path / "pages.csv", columns="coinbase-trades")
    assert len(drain(replay)) == len(ids)  # said, not dropped: the id column is known by its name only
    said = ("pages.csv: 5 row(s) repeat the trade id (column 'trade_id') of an earlier row of their stream, the "
            "first line 22 (id 15, as line 17): each replays as one more tick, moving every "
            "count, label and score after it (export pages that overlap?); write the file without the repeats")
    assert said in replay.notes and replay.cautions == [said]


def test_the_same_id_in_two_streams_is_no_repeat_nor_is_a_file_without_repeats(tmp_path: Path) -> None:
    pl.concat([trades(list(range(N))), trades(list(range(N)), "ETH-USD")]).write_csv(tmp_path / "two.csv")
    replay = FileReplay(tmp_path / "two.csv", columns="coinbase-trades")
    assert len(drain(replay)) == 2 * N and not any("repeat the trade id" in note for note in replay.notes)


def test_a_backtest_says_the_repeats_again_at_its_end(tmp_path: Path, capsys) -> None:
    trades(list(range(30)) + list(range(25, N))).rename({"trade_id": "id"}).write_csv(tmp_path / "BTC-USD.csv")
    code = main(["backtest", str(tmp_path / "BTC-USD.csv"), "--preset", "coinbase-trades", "--out",
                 str(tmp_path / "a.parquet"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1].startswith("warning (said above too): BTC-USD.csv: 5 row(s) repeat the trade id "
                                           "(column 'id')"), out
