"""Vendor files whose trade side is not the aggressor's, in the layouts the vendors publish: Coinbase Exchange's
REST trades and websocket `match` messages (the MAKER's side) and LOBSTER message files (the RESTING order's
side, among submissions and cancels that are no trades). Each is read without options and with the preset the
messages point to, asserting the ticks; the LOBSTER preset also through `flashtick backtest`. Bybit's and OKX's
trade history, whose side is the taker's, read as they are without options. Every fixture is written here, from
code, into tmp_path."""

from __future__ import annotations

import gzip
import zipfile
from pathlib import Path

import polars as pl
import pytest

from conftest import drain, ns, tiny_tick_checkpoint
from connectors.replay import FileReplay
from connectors.ticks import Tick
from engine.service.cli import main
from test_vendor_files_without_options import N, QUERIES

COINBASE_T0 = ns("2024-08-08T23:54:00+00:00")
LOBSTER_OPEN = ns("2012-06-21T13:30:00+00:00")  # 09:30 in New York, 34200 s after its midnight
LOBSTER_NAME = "AAPL_2012-06-21_34200000_57600000_message_10.csv"


def coinbase_trades(n: int = N) -> list[dict]:
    """Trades as Coinbase Exchange's REST API gives them (`GET /products/{id}/trades`): numbers as text, ISO
    times with a `Z`, `side` the MAKER's."""
    return [{"trade_id": 583219000 + i, "side": "buy" if i % 3 else "sell", "size": f"{0.0012 + i / 10000:.8f}",
             "price": f"{64000.12 + 0.01 * (i % 7):.2f}", "time": f"2024-08-08T23:54:{i:02d}.{123456 + i}Z"}
            for i in range(n)]


def test_coinbase_rest_trades_read_flipped_with_the_preset_the_note_names(tmp_path: Path, capsys) -> None:
    trades = coinbase_trades()
    # the API lists the newest trade first, and a dump keeps that order
    pl.DataFrame(trades[::-1]).select("trade_id", "side", "size", "price", "time").write_csv(tmp_path / "BTC-USD.csv")
    as_is = FileReplay(tmp_path / "BTC-USD.csv")
    ticks = drain(as_is)
    assert ticks[0] == Tick("BTC-USD", COINBASE_T0 + 123_456_000, "trade", price=64000.12, size=0.0012, side="sell")
    assert as_is.notes[1] == ("BTC-USD.csv: its columns are Coinbase Exchange's trades layout, whose side is the "
                              "MAKER's; read here as the aggressor's. If the file is Coinbase's, give --preset "
                              "coinbase-trades (sides flipped), or name it so (coinbase-BTC-USD.csv)")
    assert as_is.cautions == [as_is.notes[1]]  # said again at the end of a run: every side may be inverted
    (tmp_path / "q.yaml").write_text(QUERIES)
    code = main(["backtest", str(tmp_path / "BTC-USD.csv"), "--queries", str(tmp_path / "q.yaml"), "--out",
                 str(tmp_path / "a.parquet"), "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and out.splitlines()[-1] == f"warning (said above too): {as_is.notes[1]}", out
    replay = FileReplay(tmp_path / "BTC-USD.csv", columns="coinbase-trades")
    assert replay.cautions == []
    flipped = drain(replay)
    assert flipped[:2] == [Tick("BTC-USD", COINBASE_T0 + 123_456_000, "trade", price=64000.12, size=0.0012,
                                side="buy"),
                           Tick("BTC-USD", COINBASE_T0 + 1_123_457_000, "trade", price=64000.13, size=0.0013,
                                side="sell")]
    assert [t.side for t in flipped] == [{"buy": "sell", "sell": "buy"}[t.side] for t in ticks]
    assert replay.sorted_files == [tmp_path / "BTC-USD.csv"] and dict(replay.rejected) == {}
    assert replay.notes == [f"BTC-USD.csv: its rows are not in time order: {N - 1} row(s) earlier than the row "
                            f"before them, by up to 1 s (newest first throughout); "
                            f"replayed reversed, then sorted by time, rows of equal times in reverse file order "
                            f"(oldest first)"]
    # Parquet straight from the JSON (prices and sizes as text), with the product the request named
    pl.DataFrame(trades).with_columns(product_id=pl.lit("ETH-USD")).write_parquet(tmp_path / "dump.parquet")
    replay = FileReplay(tmp_path / "dump.parquet", columns="coinbase-trades")
    assert drain(replay) == [Tick("ETH-USD", t.ts, "trade", price=t.price, size=t.size, side=t.side)
                             for t in flipped]
    assert replay.notes == ['dump.parquet: streams from column "product_id"']
    assert "give --preset coinbase-trades" in FileReplay(tmp_path / "dump.parquet").notes[1]


def test_coinbase_rest_trades_in_a_file_named_coinbase_read_flipped_with_a_note(tmp_path: Path) -> None:
    # fix160: the same columns under a name that says Coinbase are Coinbase's: the maker's side, read flipped
    trades = coinbase_trades()
    frame = pl.DataFrame(trades).select("trade_id", "side", "size", "price", "time")
    frame.write_csv(tmp_path / "BTC-USD.csv")
    as_is = drain(FileReplay(tmp_path / "BTC-USD.csv"))  # no sign of Coinbase: a taker's side, with the caution
    frame.write_csv(tmp_path / "coinbase-BTC-USD.csv")
    frame.write_csv(tmp_path / "BTC-USD_Coinbase_trades.csv")
    preset = drain(FileReplay(tmp_path / "BTC-USD.csv", columns="coinbase-trades"))
    for path in (tmp_path / "coinbase-BTC-USD.csv", tmp_path / "BTC-USD_Coinbase_trades.csv"):
        replay = FileReplay(path)
        ticks = drain(replay)
        assert ticks == preset and [t.side for t in ticks] == [{"buy": "sell", "sell": "buy"}[t.side] for t in as_is]
        assert ticks[0].side == ("buy" if trades[0]["side"] == "sell" else "sell")
        assert ("side=side (the maker's side, read flipped: buy = sell, sell = buy)" in replay.notes[0]), replay.notes
        assert replay.notes[1] == (f"{path.name}: its columns are Coinbase Exchange's trades layout and its name "
                                   f"says Coinbase: \"side\" is the MAKER's side, read flipped to the aggressor's "
                                   f"(buy = sell, sell = buy), as --preset coinbase-trades reads it; a full map "
                                   f"(--columns ts=time,price=price,size=size,side=side) reads the sides as they are")
        assert replay.cautions == []
        # the full map that note gives reads the sides as they are; a side given by a refinement is not flipped
        assert drain(FileReplay(path, columns={"ts": "time", "price": "price", "size": "size", "side": "side"})) \
            == as_is
        assert drain(FileReplay(path, columns={"side": "side"})) == as_is


def coinbase_matches(n: int = N) -> list[dict]:
    """Websocket `matches` channel messages, the first a `last_match`: `side` is the maker order's."""
    return [{"type": "last_match" if i == 0 else "match", "trade_id": 583219000 + i,
             "maker_order_id": f"ac928c66-ca53-498f-9c13-a110027a{i:04d}",
             "taker_order_id": f"132fb6ae-456b-4654-b4e0-d681ac05{i:04d}", "side": "sell" if i % 4 else "buy",
             "size": f"{0.05 + i / 100:.8f}", "price": f"{(64000.5 if i % 2 else 2650.25) + i:.2f}",
             "product_id": "BTC-USD" if i % 2 else "ETH-USD", "sequence": 50 + i,
             "time": f"2024-08-08T23:54:{i:02d}.{500000 + i}Z"} for i in range(n)]


def test_coinbase_websocket_matches_detected_by_their_order_ids_and_flipped(tmp_path: Path) -> None:
    pl.DataFrame(coinbase_matches()).write_csv(tmp_path / "matches.csv")
    replay = FileReplay(tmp_path / "matches.csv")
    ticks = drain(replay)
    assert ticks[:2] == [Tick("ETH-USD", COINBASE_T0 + 500_000_000, "trade", price=2650.25, size=0.05, side="sell"),
                         Tick("BTC-USD", COINBASE_T0 + 1_500_001_000, "trade", price=64001.5, size=0.06,
                              side="buy")]
    assert len(ticks) == N and dict(replay.rejected) == {}
    assert replay.notes == ["matches.csv: no column map given; read as preset coinbase-matches (the file has its "
                            "columns): ts=time (datetime), stream=product_id, "
                            "price=price, size=size, side=side (the maker's side, read flipped: buy = sell, "
                            "sell = buy), "
                            "keep type in match|last_match"]
    # the same messages without their `type` column: the order ids still say whose side it is
    pl.DataFrame(coinbase_matches()).drop("type").write_csv(tmp_path / "untyped.csv")
    assert drain(FileReplay(tmp_path / "untyped.csv")) == ticks
    assert drain(FileReplay(tmp_path / "untyped.csv", columns={"ts_unit": "datetime"})) == ticks  # refined: the same


def test_coinbase_matches_without_their_type_column_name_the_preset_and_the_column(tmp_path: Path) -> None:
    """Read less its filter (no `type` column to keep matches by), the note still names the preset and says the
    keep column is missing, so every row is read."""
    pl.DataFrame(coinbase_matches()).drop("type").write_csv(tmp_path / "untyped.csv")
    replay = FileReplay(tmp_path / "untyped.csv")
    assert len(drain(replay)) == N
    assert replay.notes[0] == (
        'untyped.csv: no column map given; read as preset coinbase-matches less its filter (the file has its columns '
        'but not its keep column "type": every row is read, none left out as the preset\'s filter would): '
        "ts=time (datetime), stream=product_id, price=price, size=size, side=side (the maker's side, read flipped: "
        "buy = sell, sell = buy)")


def test_coinbase_full_channel_dump_keeps_only_the_matches(tmp_path: Path) -> None:
    """The `full` channel in one Parquet table: orders received, opened and done carry a side, price and size
    too, but only the matches are trades; the others are counted as filtered out."""
    match = coinbase_matches(2)[1]
    rows = [{"type": "received", "order_id": "d50ec984", "order_type": "limit", "side": "sell",
             "size": "0.5", "price": "64010.00", "time": "2024-08-08T23:54:00.100000Z"},
            {"type": "open", "order_id": "d50ec984", "side": "sell", "price": "64010.00", "remaining_size": "0.5",
             "time": "2024-08-08T23:54:00.200000Z"},
            match,
            {"type": "done", "order_id": "d50ec984", "side": "sell", "price": "64010.00", "remaining_size": "0",
             "reason": "canceled", "time": "2024-08-08T23:54:02.000000Z"}]
    pl.DataFrame(rows, infer_schema_length=None).with_columns(product_id=pl.lit("BTC-USD")).write_parquet(
        tmp_path / "full.parquet")
    replay = FileReplay(tmp_path / "full.parquet")
    assert drain(replay) == [Tick("BTC-USD", COINBASE_T0 + 1_500_001_000, "trade", price=64001.5, size=0.06,
                                  side="buy")]
    assert dict(replay.rejected) == {"filtered_out": 3}
    assert replay.rejected.examples["filtered_out"].startswith(
        f"{tmp_path / 'full.parquet'} row 1: filtered_out: column \"type\" holds received, which the map's keep leaves "
        f"out (it keeps match, last_match); not an error")


def test_trades_printed_with_their_quote_replay_as_the_quote_then_the_trade(tmp_path: Path) -> None:
    """Coinbase Advanced Trade's trades carry the book's bid and ask (empty when it gives none): a row with both
    is two ticks at its time, the quote the trade met first; a row of one kind stays one tick."""
    rows = ["trade_id,product_id,price,size,time,side,bid,ask,exchange",
            "601,BTC-USD,64000.12,0.5,2024-08-08T23:54:00.5Z,BUY,64000.11,64000.12,",
            "602,BTC-USD,64000.11,0.25,2024-08-08T23:54:01Z,SELL,,,",
            "603,BTC-USD,,,2024-08-08T23:54:02Z,,64000.10,64000.13,",
            "604,BTC-USD,64000.13,0.1,2024-08-08T23:54:03Z,BUY,64000.10,,"]
    (tmp_path / "advanced.csv").write_text("\n".join(rows) + "\n")
    replay = FileReplay(tmp_path / "advanced.csv")
    t0 = COINBASE_T0
    assert drain(replay) == [
        Tick("BTC-USD", t0 + 500_000_000, "quote", bid=64000.11, ask=64000.12),
        Tick("BTC-USD", t0 + 500_000_000, "trade", price=64000.12, size=0.5, side="buy"),
        Tick("BTC-USD", t0 + 1_000_000_000, "trade", price=64000.11, size=0.25, side="sell"),
        Tick("BTC-USD", t0 + 2_000_000_000, "quote", bid=64000.10, ask=64000.13),
        Tick("BTC-USD", t0 + 3_000_000_000, "trade", price=64000.13, size=0.1, side="buy")]
    assert dict(replay.rejected) == {"missing_field": 1}  # 604's quote has no ask; its trade is read
    assert any("a row with both replays as two ticks at its time, its quote then its trade" in n for n in replay.notes)


def lobster_messages(path: Path, rows: list[tuple]) -> Path:
    """A LOBSTER message file: no header; time (s after midnight), type, order id, size, price x 10000,
    direction (the limit order's side: 1 buy, -1 sell)."""
    path.write_text("".join(f"{t:.9f},{kind},{order},{size},{price},{side}\n"
                            for t, kind, order, size, price, side in rows))
    return path


MESSAGES = [  # (time, type, order id, size, price x 10000, direction)
    (34200.004241176, 1, 16113575, 18, 5853300, 1),   # a buy order submitted
    (34200.025552082, 1, 16120456, 18, 5859100, -1),  # a sell order submitted
    (34200.201743415, 3, 16120456, 18, 5859100, -1),  # ... and deleted
    (34201.000000001, 4, 16113575, 10, 5853300, 1),   # the resting buy order executed: a seller hit it
    (34201.5, 2, 16113575, 3, 5853300, 1),             # part of it cancelled
    (34202.25, 5, 0, 100, 5855000, -1),                # a hidden sell order executed: a buyer lifted it
    (34203.0, 4, 16120480, 18, 5859200, -1),           # a visible sell order executed
    (34204.0, 6, -1, 5000, 5856000, -1),               # a cross trade (auction)
    (34205.0, 7, -1, 0, -1, -1),                       # a trading halt
]


def test_lobster_preset_reads_executions_at_the_aggressors_side(tmp_path: Path) -> None:
    path = lobster_messages(tmp_path / LOBSTER_NAME, MESSAGES)
    replay = FileReplay(path, columns="lobster-messages")
    assert drain(replay) == [
        Tick("AAPL", LOBSTER_OPEN + 1_000_000_001, "trade", price=585.33, size=10.0, side="sell"),
        Tick("AAPL", LOBSTER_OPEN + 2_250_000_000, "trade", price=585.5, size=100.0, side="buy"),
        Tick("AAPL", LOBSTER_OPEN + 3_000_000_000, "trade", price=585.92, size=18.0, side="buy")]
    assert dict(replay.rejected) == {"filtered_out": 6}
    assert replay.rejected.examples["filtered_out"] == (
        f"{path} line 1: filtered_out: column \"type\" holds 1, which the map's keep leaves out (it keeps 4, 5); not "
        "an error: rows left out on purpose and counted (a keep filter's, or rows holding no tick)")
    assert replay.notes == [f'{LOBSTER_NAME}: stream AAPL, from the file name "{LOBSTER_NAME[:-4]}" (--columns '
                            f"stream_name=NAME to name it otherwise)",
                            f"{LOBSTER_NAME}: the day is 2012-06-21, from the file name, times in America/New_York "
                            f"(--date and --tz give others)"]
    # --date and --tz replace the file name's day and New York
    later = drain(FileReplay(path, columns={"preset": "lobster-messages", "date": "2012-06-22", "tz": "UTC"}))
    assert later[0].ts == LOBSTER_OPEN + 1_000_000_001 + (24 - 4) * 3600 * 10**9


def test_a_lobster_download_as_unpacked_reads_its_messages_beside_the_order_book(tmp_path: Path) -> None:
    """review390 #5: LOBSTER's download holds each message file beside its `_orderbook_N.csv` (the book after each
    message, ask/bid price and size, no time of its own); a folder of both, with the preset, was refused on the
    book's four columns, and nothing said to give the message file alone. The book is known by its name: skipped
    with a note in a folder, a list or a zip archive, and given alone refused naming its message file."""
    folder = tmp_path / "lobster"
    folder.mkdir()
    lobster_messages(folder / LOBSTER_NAME, MESSAGES)
    book = folder / LOBSTER_NAME.replace("_message_", "_orderbook_")
    book.write_text("".join(f"5859100,18,5853300,{18 - i}\n" for i in range(len(MESSAGES))))
    with zipfile.ZipFile(tmp_path / "sample.zip", "w") as archive:
        archive.write(folder / LOBSTER_NAME, LOBSTER_NAME)
        archive.write(book, book.name)
    for given in (folder, [book, folder / LOBSTER_NAME], tmp_path / "sample.zip"):
        replay = FileReplay(given, columns="lobster-messages")
        assert [t.price for t in drain(replay)] == [585.33, 585.5, 585.92], given
        assert any(f"skipped {book.name}: LOBSTER's order book beside its message file" in n for n in replay.notes)
    with pytest.raises(ValueError, match=rf"{book}: LOBSTER's order book .*: replay reads its message file, "
                                         rf"{folder / LOBSTER_NAME} --preset lobster-messages"):
        FileReplay(book, columns="lobster-messages")


def test_lobster_messages_with_named_columns_read_as_the_preset_reads_them(tmp_path: Path) -> None:
    """A LOBSTER file converted by its user (Parquet, or a CSV given a header) keeps LOBSTER's column names: read
    without options as the preset reads the original. A copy already in dollars and datetimes is not rescaled."""
    names = ("time", "type", "order_id", "size", "price", "direction")
    table = pl.DataFrame(MESSAGES, schema=names, orient="row")
    table.write_parquet(tmp_path / LOBSTER_NAME.replace(".csv", ".parquet"))
    replay = FileReplay(tmp_path / LOBSTER_NAME.replace(".csv", ".parquet"))
    expected = [Tick("AAPL", LOBSTER_OPEN + 1_000_000_001, "trade", price=585.33, size=10.0, side="sell"),
                Tick("AAPL", LOBSTER_OPEN + 2_250_000_000, "trade", price=585.5, size=100.0, side="buy"),
                Tick("AAPL", LOBSTER_OPEN + 3_000_000_000, "trade", price=585.92, size=18.0, side="buy")]
    assert drain(replay) == expected
    assert dict(replay.rejected) == {"filtered_out": 6}
    assert "keep type in 4|5" in replay.notes[0] and "price_scale=10000" in replay.notes[0]
    # in dollars, stamped in UTC, capitalised names, as a CSV with a header
    converted = table.with_columns((pl.col("price") / 10_000).round(4),
                                   (pl.lit(LOBSTER_OPEN - 34200 * 10**9)
                                    + (pl.col("time") * 1e9).round().cast(pl.Int64))
                                   .cast(pl.Datetime("ns")).alias("time")).rename(str.capitalize)
    converted.write_csv(tmp_path / "aapl.csv")
    assert drain(FileReplay(tmp_path / "aapl.csv")) == [
        Tick("aapl", t.ts, "trade", price=t.price, size=t.size, side=t.side) for t in expected]


def test_lobster_file_renamed_needs_its_day_and_is_pointed_to_the_preset(tmp_path: Path) -> None:
    path = lobster_messages(tmp_path / "aapl-messages.csv", MESSAGES)
    with pytest.raises(ValueError, match=r"looks like a LOBSTER message file \(time,type,order_id,size,price,"
                                         r"direction\): --preset lobster-messages reads its executions as trades"):
        FileReplay(path)
    with pytest.raises(ValueError, match=r"aapl-messages.csv: its times are seconds after midnight \(ts_unit "
                                         r"seconds_after_midnight\) and the day is not given; its name holds no date "
                                         r"\(YYYY-MM-DD, q.s YYYY.MM.DD or YYYYMMDD\), "
                                         r"nor does a folder above "
                                         r"it .*give the day with --date YYYY-MM-DD when every file given is of "
                                         r"that one day"):
        FileReplay(path, columns="lobster-messages")
    (first, *_) = drain(FileReplay(path, columns={"preset": "lobster-messages", "date": "2012-06-21"}))
    assert first == Tick("aapl-messages", LOBSTER_OPEN + 1_000_000_001, "trade", price=585.33, size=10.0, side="sell")
    # other header-less seconds after midnight (not LOBSTER's six columns) still get the generic options
    (tmp_path / "asx.csv").write_text("36000.25,45.10,100,B\n36001.5,45.11,200,S\n")
    with pytest.raises(ValueError, match=r"looks like seconds after midnight: --ts-unit seconds_after_midnight"):
        FileReplay(tmp_path / "asx.csv")


def test_cli_backtest_of_lobster_messages_counts_what_it_leaves_out(tmp_path: Path, capsys) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    (tmp_path / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 4096, block_size: 16}}\n")
    (tmp_path / "q.yaml").write_text(QUERIES)
    rows = [(34200.004241176 + i * 0.25, (1, 4, 3, 5)[i % 4], 16113575 + i, 18 + i, 5853300 + 100 * (i % 3),
             1 if i % 8 < 4 else -1) for i in range(2 * N)]
    path = lobster_messages(tmp_path / LOBSTER_NAME, rows)
    argv = ["--preset", "lobster-messages", "--queries", str(tmp_path / "q.yaml"), "--quiet",
            "--config", str(tmp_path / "engine.yaml"), "--out", str(tmp_path / "a.parquet")]
    code = main(["backtest", str(path), *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"replayed {N} ticks (0 rejected, {N} left out by a filter)" in out
    assert f'  left out filtered_out: {N} (first: {path} line 1: filtered_out: column "type" holds 1' in out
    assert "note: AAPL_2012-06-21_34200000_57600000_message_10.csv: the day is 2012-06-21, from the file name" in err
    answers = pl.read_parquet(tmp_path / "a.parquet")
    assert set(answers["stream"]) == {"AAPL"} and answers["data_ts"].min() > LOBSTER_OPEN
    # a file of submissions and cancels only has nothing to backtest: an error with the reason, not an empty run
    quiet = lobster_messages(tmp_path / "MSFT_2012-06-21_34200000_57600000_message_1.csv",
                             [r for r in rows if r[1] not in (4, 5)])
    assert main(["backtest", str(quiet), *argv]) == 2
    err = capsys.readouterr().err
    assert "every row was left out by a filter, so there is nothing to backtest" in err
    assert f"left out filtered_out: {N} (first: {quiet} line 1:" in err


def test_bybit_trading_history_reads_with_the_takers_side(tmp_path: Path) -> None:
    """public.bybit.com/trading: decimal epoch seconds, Buy/Sell the taker's side (the newer files add `RPI`);
    public.bybit.com/spot: ms and lower-case sides."""
    t0 = 1_704_153_600  # 2024-01-02 00:00 UTC
    header = "timestamp,symbol,side,size,price,tickDirection,trdMatchID,grossValue,homeNotional,foreignNotional"
    with gzip.open(tmp_path / "BTCUSDT2024-01-02.csv.gz", "wt") as f:
        f.write(header + ",RPI\n" + "".join(
            f"{t0}.{873 + 1000 * i:04d},BTCUSDT,{'Sell' if i % 3 else 'Buy'},{0.003 * (1 + i % 4):.3f},"
            f"{42283.5 - 0.5 * (i % 3):.1f},ZeroMinusTick,224061a0-e105-508c-9696-b53ab4b5{i:04d},1.268505e+10,"
            f"{0.003 * (1 + i % 4):.3f},126.8505,false\n" for i in range(N // 3)))
    (tmp_path / "ETHUSDT_2024-01-02.csv").write_text("id,timestamp,price,volume,side\n" + "".join(
        f"{2290000000 + i},{t0 * 1000 + 250 * i},{2352.61 + 0.01 * (i % 3):.2f},{0.5 + i / 10:.2f},"
        f"{'sell' if i % 2 else 'buy'}\n" for i in range(N // 3)))
    replay = FileReplay([tmp_path / "BTCUSDT2024-01-02.csv.gz", tmp_path / "ETHUSDT_2024-01-02.csv"])
    ticks = drain(replay)
    # its derivatives history: the linear perpetual, apart from the spot pair (docs/replay.md, Derivatives' streams)
    assert [t for t in ticks if t.stream == "BTCUSDT_PERP"][:2] == [
        Tick("BTCUSDT_PERP", t0 * 10**9 + 87_300_000, "trade", price=42283.5, size=0.003, side="buy"),
        Tick("BTCUSDT_PERP", t0 * 10**9 + 187_300_000, "trade", price=42283.0, size=0.006, side="sell")]
    assert [t for t in ticks if t.stream == "ETHUSDT"][:2] == [
        Tick("ETHUSDT", t0 * 10**9, "trade", price=2352.61, size=0.5, side="buy"),
        Tick("ETHUSDT", t0 * 10**9 + 250_000_000, "trade", price=2352.62, size=0.6, side="sell")]
    assert len(ticks) == 2 * (N // 3) and dict(replay.rejected) == {}
    assert "ts=timestamp (s), stream=symbol, price=price, size=size, side=side" in replay.notes[0]


def test_okx_trade_history_reads_with_the_takers_side(tmp_path: Path) -> None:
    """OKX's trade history (okx.com data download, unzipped): created_time in ms, side the taker's."""
    t0 = 1_704_124_800_000  # 2024-01-01 16:00 UTC, midnight in OKX's UTC+8 day
    (tmp_path / "BTC-USDT-SWAP-trades-2024-01-02.csv").write_text(
        "instrument_name,trade_id,side,price,size,created_time,source\n" + "".join(
            f"BTC-USDT-SWAP,{2885385355 + i},{'sell' if i % 2 else 'buy'},{42542.2 + 0.1 * (i % 4):.1f},"
            f"{1 + i % 5},{t0 + 21 + 37 * i},0\n" for i in range(N)))
    replay = FileReplay(tmp_path / "BTC-USDT-SWAP-trades-2024-01-02.csv")
    ticks = drain(replay)
    assert ticks[:2] == [Tick("BTC-USDT-SWAP", (t0 + 21) * 10**6, "trade", price=42542.2, size=1.0, side="buy"),
                         Tick("BTC-USDT-SWAP", (t0 + 58) * 10**6, "trade", price=42542.3, size=2.0, side="sell")]
    assert len(ticks) == N and dict(replay.rejected) == {}
    assert replay.notes[1:] == ["BTC-USDT-SWAP-trades-2024-01-02.csv: no column map given; read as ts=created_time "
                                "(ms), stream=instrument_name, price=price, size=size, side=side"]
    assert "BTC-USDT-SWAP (OKX linear: a contract is 0.01 BTC)" in replay.notes[0]  # (review431 #6: not the coin)
    # the same trades as OKX's API gives them (GET /api/v5/market/history-trades): instId, px, sz, ts in ms
    (tmp_path / "okx_api.csv").write_text("instId,tradeId,px,sz,side,ts\n" + "".join(
        f"BTC-USDT-SWAP,{2885385355 + i},{42542.2 + 0.1 * (i % 4):.1f},{1 + i % 5},{'sell' if i % 2 else 'buy'},"
        f"{t0 + 21 + 37 * i}\n" for i in range(N)))
    api = FileReplay(tmp_path / "okx_api.csv")
    assert drain(api) == ticks and api.notes[1:] == [
        "okx_api.csv: no column map given; read as ts=ts (ms), stream=instId, price=px, size=sz, side=side"]
