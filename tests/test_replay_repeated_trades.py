"""Trades repeated with the same trade id inside one file (REST pages concatenated with an overlap): counted per
stream and said as a caution with the first repeat's line, never silently replayed as if new. Real files in
tmp_path, read by the real replay and the real `flashtick backtest`."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl

from connectors.replay import FileReplay
from engine.service.cli import main
from conftest import drain

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
    said = ('pages.csv: 5 row(s) repeat an earlier row of their stream, its trade id (column "trade_id"), time, '
            "price and size alike, the first line 22 (id 15, as line 17): each replays as one more tick, moving every "
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
    out, err = capsys.readouterr()
    assert code == 0, out
    assert out.splitlines()[-1].startswith("warning (said above too): BTC-USD.csv: 5 row(s) repeat an earlier row "
                                           'of their stream, its trade id (column "id")'), out
    # said first with the label it is said again with, not as one more `note:` among the reading's notes
    assert "flashtick backtest: warning: BTC-USD.csv: 5 row(s) repeat an earlier row" in err, err


def test_an_order_id_s_partial_fills_are_no_repeats_and_are_never_advised_away(tmp_path: Path) -> None:
    # the review's BTCUSDT-orderid.csv: id = row // 3 (three fills per order), each fill its own time and size;
    # the caution called 2 of every 3 trades repeats and said to write the file without them
    fills = trades(list(range(N))).with_columns(trade_id=pl.int_range(pl.len()) // 3)
    fills.write_csv(tmp_path / "orders.csv")
    replay = FileReplay(tmp_path / "orders.csv", columns="coinbase-trades")
    assert len(drain(replay)) == N and replay.cautions == []
    said = ("orders.csv: column \"trade_id\" is no unique trade id: 26 row(s) share an earlier row's id at another "
            "time, price or size, the first line 3 (id 0, as line 2), as an order id's partial fills do; each "
            "replays as the trade it is")
    assert said in replay.notes, replay.notes
    # order ids and an overlap of pages: the whole rows repeated are said apart, with the advice
    pl.concat([fills, fills.slice(30)]).write_csv(tmp_path / "both.csv")
    replay = FileReplay(tmp_path / "both.csv", columns="coinbase-trades")
    assert len(replay.cautions) == 1 and replay.cautions[0].startswith(
        'both.csv: 10 row(s) repeat an earlier row of their stream, its trade id (column "trade_id"), time, price '
        "and size alike, the first line 42 (id 10, as line 32)"), replay.cautions
    assert any(note.startswith('both.csv: column "trade_id" is no unique trade id: 26 row(s)') for note in replay.notes)


BYBIT_HEADER = "timestamp,symbol,side,size,price,tickDirection,trdMatchID,grossValue,homeNotional,foreignNotional\n"


def test_header_lines_of_parts_joined_with_cat_are_no_repeated_trade(tmp_path: Path) -> None:
    # Bybit's hourly parts joined with `cat` (plain, and the .csv.gz parts): each part's header was a "repeated
    # trade" of id 'trdMatchID', and the user was told to write the file without it
    parts = [BYBIT_HEADER + "".join(f"{1704153600 + i * 3.0:.4f},BTCUSDT,{('Buy', 'Sell')[i % 2]},0.01,"
                                    f"{42000 + i % 7 * 0.1:.1f},PlusTick,m{i},1,0.01,420.0\n"
                                    for i in range(h * 20, (h + 1) * 20)) for h in range(3)]
    (tmp_path / "BTCUSDT2024-01-02.csv").write_text("".join(parts))
    (tmp_path / "BTCUSDT2024-01-03.csv.gz").write_bytes(b"".join(gzip.compress(p.encode()) for p in parts))
    for name in ("BTCUSDT2024-01-02.csv", "BTCUSDT2024-01-03.csv.gz"):
        replay = FileReplay(tmp_path / name)
        assert len(drain(replay)) == 60 and replay.cautions == [], replay.cautions
        assert any("line 22 and 1 more repeat the header row" in note for note in replay.notes), replay.notes
        assert not any("repeat an earlier row" in note for note in replay.notes), replay.notes


OKX_HEADER = "instrument_name,trade_id,side,price,size,created_time\n"


def okx_pages(folder: Path, pages: int = 4, per_page: int = 30, overlap: int = 3) -> list[Path]:
    """OKX trade history saved as hourly pages, each starting with the previous page's last `overlap` trades."""
    rows = [f"BTC-USDT-SWAP,{400000000 + i},{('buy', 'sell')[i % 2]},{42000 + i % 5 * 0.1:.1f},{1 + i % 7},"
            f"{1704153600000 + i * 500}\n" for i in range(pages * per_page)]
    paths = []
    for h in range(pages):
        paths.append(folder / f"BTC-USDT-SWAP-trades-2024-01-02-{h:02d}.csv")
        paths[-1].write_text(OKX_HEADER + "".join(rows[max(0, h * per_page - overlap):(h + 1) * per_page]))
    return paths


def test_trades_repeated_across_consecutive_pages_are_said_as_repeats_not_two_vendors(tmp_path: Path) -> None:
    # the review's 5 hourly pages: 3,012 ticks for 3,000 trades, said only as "two vendors" overlapping
    paths = okx_pages(tmp_path)
    replay = FileReplay(paths)
    assert len(drain(replay)) == 4 * 30 + 3 * 3  # said, not dropped, as the one-file rule
    assert len(replay.cautions) == 3 and not any("two vendors" in c for c in replay.cautions), replay.cautions
    assert replay.cautions[0] == (
        f"stream BTC-USDT-SWAP: 3 trade(s) of {paths[1]} repeat trades of {paths[0]}, their trade id (column "
        '"trade_id"), time, price and size alike, the first at its line 2 (id "400000027"): each replays as one '
        "more tick, moving every count, label and score after it (export pages that overlap, each starting with the "
        "last trades of the one before?); write the files without the repeats")
    # pages that only follow each other: nothing to say
    apart = tmp_path / "apart"
    apart.mkdir()
    replay = FileReplay(okx_pages(apart, overlap=0))
    assert len(drain(replay)) == 120 and replay.cautions == []


def test_a_csv_page_and_a_parquet_page_with_whole_sizes_are_compared_not_a_join_error(tmp_path: Path,
                                                                                       capsys) -> None:
    # the review's pair: the CSV's sizes read as Float64, the Parquet keeps its Int64, and polars refused the join
    rows = [(1704186000000 + i * 1000, 1000 + i, "ETHUSDT", 2000 + i % 7 * 0.25, 1 + i % 3, ("sell", "buy")[i % 3 > 0])
            for i in range(60)]
    cols = ["timestamp", "trade_id", "symbol", "price", "qty", "side"]
    pl.DataFrame(rows[:32], schema=cols, orient="row").write_csv(tmp_path / "page0.csv")
    pl.DataFrame(rows[30:], schema=cols, orient="row").write_parquet(tmp_path / "page1.parquet")
    code = main(["backtest", str(tmp_path / "page0.csv"), str(tmp_path / "page1.parquet"), "--out",
                 str(tmp_path / "a.parquet"), "--quiet", "--threads", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert (f"stream ETHUSDT: 2 trade(s) of {tmp_path / 'page1.parquet'} repeat trades of {tmp_path / 'page0.csv'}, "
            f'their trade id (column "trade_id")') in out, out


def test_two_vendors_of_one_stream_over_one_time_keep_their_caution(tmp_path: Path) -> None:
    one, other = okx_pages(tmp_path, pages=1)[0], tmp_path / "BTC-USDT-SWAP-trades-other.csv"
    other.write_text(OKX_HEADER + "".join(f"BTC-USDT-SWAP,{900 + i},buy,42001.0,1,{1704153600000 + i * 400}\n"
                                          for i in range(20)))
    replay = FileReplay([one, other])
    drain(replay)
    assert len(replay.cautions) == 1 and "(two vendors)" in replay.cautions[0], replay.cautions


def binance_trades(folder: Path, day: str, start_ms: int) -> tuple[Path, Path]:
    """Binance's public trades and the aggTrades that hold them (no header), for one symbol over the same minutes."""
    trades, aggs = [], []
    for i in range(20):
        first = len(trades) + 1
        for k in range(1 + i % 3):
            trades.append(f"{len(trades) + 1},42000.{i % 4},0.01,420.0,{start_ms + i * 250},{i % 2 == 0},True\n")
        aggs.append(f"{i},42000.{i % 4},{0.01 * (1 + i % 3):.2f},{first},{len(trades)},{start_ms + i * 250},"
                    f"{i % 2 == 0},True\n")
    (folder / f"BTCUSDT-trades-{day}.csv").write_text("".join(trades))
    (folder / f"BTCUSDT-aggTrades-{day}.csv").write_text("".join(aggs))
    return folder / f"BTCUSDT-trades-{day}.csv", folder / f"BTCUSDT-aggTrades-{day}.csv"


def test_binance_trades_beside_the_aggtrades_of_the_same_minutes_are_refused_naming_both(tmp_path: Path,
                                                                                          capsys) -> None:
    # every trade replayed twice (2,748 ticks for 1,748 trades), said only as two vendors overlapping
    trades, aggs = binance_trades(tmp_path, "2024-01-02", 1704153600000)
    code = main(["backtest", str(trades), str(aggs), "--out", str(tmp_path / "a.parquet"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and (f"error: {trades} (Binance's trades) and {aggs} (its aggTrades) hold the same trades of "
                          f"stream BTCUSDT from 2024-01-02T00:00:00Z to ") in err, err
    assert "Give one kind: the trades files (a tick per fill) or the aggTrades files" in err, err
    # each kind alone, or the two kinds of different days, replay as they did
    later = tmp_path / "later"
    later.mkdir()
    _, next_aggs = binance_trades(later, "2024-01-03", 1704240000000)
    assert len(drain(FileReplay([trades, next_aggs]))) == 39 + 20


def test_read_by_their_id_as_sequence_the_repeats_are_said_left_out_not_to_be_fixed(tmp_path: Path, capsys) -> None:
    """review323 #8: with `--sequence` naming the trade id column, the run drops the repeats; its words said they
    replay as more ticks and to write the file without them, then dropped them (and said so at the end)."""
    trades(list(range(30)) + list(range(25, N))).write_csv(tmp_path / "BTC-USD.csv")
    replay = FileReplay(tmp_path / "BTC-USD.csv", columns={"preset": "coinbase-trades", "sequence": "trade_id"})
    assert len(drain(replay)) == N and replay.cautions == []  # 45 rows, 5 repeats left out
    said = ('BTC-USD.csv: 5 row(s) repeat an earlier row of their stream, its trade id (column "trade_id"), time, '
            'price and size alike, the first line 32 (id "25", as line 27): left out, the first read kept, as the '
            "sequence column \"trade_id\" repeats with them (the run's last notes count them); the file needs no "
            "change")
    assert said in replay.notes, replay.notes
    code = main(["backtest", str(tmp_path / "BTC-USD.csv"), "--preset", "coinbase-trades", "--sequence", "trade_id",
                 "--out", str(tmp_path / "a.parquet"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, out
    assert f"replayed {N} ticks" in out and "warning" not in out + err, out + err
    assert '5 tick(s) of 1 stream(s) repeat a sequence number (column "trade_id")' in out + err, out + err
