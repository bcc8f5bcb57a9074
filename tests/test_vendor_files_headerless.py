"""Vendor files black-box reviewers found misread: WRDS TAQ's trades (cancels and corrections in TR_CORR), quotes
(BIDSIZ/ASKSIZ, a 0 bid meaning no bid), and more header-less layouts. Every fixture is written here, from code,
into tmp_path."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain

TAQ_TRADES = ("DATE,TIME_M,EX,SYM_ROOT,SYM_SUFFIX,TR_SCOND,SIZE,PRICE,TR_CORR,TR_SEQNUM\n"
              "2024-01-02,09:30:00.123456789,Q,AAPL,,@ F,100,185.64,00,1001\n"
              "2024-01-02,09:30:00.223456789,N,AAPL,,@,200,185.65,01,1002\n"
              "2024-01-02,09:30:01.000000000,P,AAPL,,@,300,999.99,08,1003\n"
              "2024-01-02,09:30:02.000000000,P,AAPL,,@,300,185.70,12,1004\n")
TAQ_QUOTES = ("DATE,TIME_M,EX,SYM_ROOT,SYM_SUFFIX,BID,BIDSIZ,ASK,ASKSIZ,QU_COND,NATBBO_IND\n"
              "2024-01-02,09:30:00.123456789,Q,AAPL,,185.60,3,185.62,5,R,4\n"
              "2024-01-02,09:30:00.223456789,N,AAPL,,0,0,185.63,2,R,4\n"
              "2024-01-02,09:30:00.323456789,N,AAPL,,0,0,0,0,R,4\n")


def test_taq_cancelled_and_corrected_prints_are_left_out_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "taq_trades.csv"
    path.write_text(TAQ_TRADES)
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [185.64, 185.65]  # 08 (a cancel) and 12 (a correction) left out
    assert dict(replay.rejected) == {"filtered_out": 2}
    note = next(n for n in replay.notes if "TR_CORR" in n and "cancelled" in n)
    assert "(08, 12)" in note and "TR_CORR 00, 01" in note
    assert any("sale conditions are not read ('TR_SCOND' holds" in n for n in replay.notes)
    # the map the note gives reads every print
    full = note.split("--columns ")[1].split(")")[0]
    assert len(drain(FileReplay(path, columns=map_from_options(columns=full)))) == 4
    # a Parquet copy holding the marks as numbers filters the same
    pl.read_csv(path).write_parquet(tmp_path / "taq_trades.parquet")
    replay = FileReplay(tmp_path / "taq_trades.parquet")
    assert [t.price for t in drain(replay)] == [185.64, 185.65]


def test_taq_quotes_read_their_sizes_and_a_zero_bid_is_a_one_sided_quote(tmp_path: Path) -> None:
    path = tmp_path / "taq_nbbo.csv"
    path.write_text(TAQ_QUOTES)
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.bid, t.ask, t.bid_size, t.ask_size) for t in ticks] == [(185.6, 185.62, 3.0, 5.0)]
    assert dict(replay.rejected) == {"missing_field": 2}  # never nonpositive_price: 0 is no bid
    example = replay.rejected.examples["missing_field"]
    assert "line 3" in example and "a one-sided quote (no bid)" in example and "price-offset" not in example


def test_an_unread_column_that_looks_like_a_quote_size_is_named(tmp_path: Path) -> None:
    path = tmp_path / "quotes.csv"
    path.write_text("timestamp,symbol,bid,ask,bid_depth_lots,ask_depth_lots\n"
                    "2024-01-02T09:30:00Z,AAPL,185.6,185.62,3,5\n")
    replay = FileReplay(path)
    assert len(drain(replay)) == 1
    assert any("'bid_depth_lots' looks like bid_size, 'ask_depth_lots' looks like ask_size, not read" in n
               for n in replay.notes)


def test_kraken_trades_with_decimal_epoch_seconds_need_no_options(tmp_path: Path) -> None:
    path = tmp_path / "XBTUSD.csv"
    path.write_text("1704153601.4989,41997.7,0.09579104\n1704153602.1234,41998.1,0.5\n")
    ticks = drain(FileReplay(path))
    assert [(t.stream, t.ts, t.price, t.size) for t in ticks] == [
        ("XBTUSD", 1704153601_498900000, 41997.7, 0.09579104), ("XBTUSD", 1704153602_123400000, 41998.1, 0.5)]


def test_older_binance_futures_trades_without_a_header_or_is_best_match(tmp_path: Path) -> None:
    path = tmp_path / "BTCUSDT-trades-2024-01-02.csv"
    path.write_text("4500000000,42500.1,0.053,2252.5,1704153601000,true\n"
                    "4500000001,42500.2,0.01,425.0,1704153601005,false\n")
    replay = FileReplay(path)
    assert [(t.stream, t.ts, t.price, t.side) for t in drain(replay)] == [
        ("BTCUSDT", 1704153601_000000000, 42500.1, "sell"), ("BTCUSDT", 1704153601_005000000, 42500.2, "buy")]
    assert any("preset binance-futures-trades" in n for n in replay.notes)


def test_a_row_with_a_stray_field_is_a_counted_reject_with_its_line(tmp_path: Path) -> None:
    rows = [f"2024-01-02T00:00:{i:02d}Z,BTC,{42000 + i}.5,1" for i in range(1, 31)]
    rows[19] += ",extra"  # line 21 of the file
    (tmp_path / "trades.csv").write_text("timestamp,symbol,price,size\n" + "\n".join(rows) + "\n")
    replay = FileReplay(tmp_path / "trades.csv")
    assert len(drain(replay)) == 29
    assert dict(replay.rejected) == {"extra_fields": 1}
    assert "trades.csv line 21: extra_fields: the row has 5 fields" in replay.rejected.examples["extra_fields"]
    # without a header (a blank line counts as a line, as polars counts it), and in a file's first lines
    (tmp_path / "XBTUSD.csv").write_text("1704153601,41997.7,0.1\n\n1704153602,41998.1,0.5,7\n1704153603,41998.2,0.5\n"
                                         "1704153604,41998.3,0.5\n")
    replay = FileReplay(tmp_path / "XBTUSD.csv")
    assert [t.price for t in drain(replay)] == [41997.7, 41998.2, 41998.3]
    assert "XBTUSD.csv line 3: extra_fields" in replay.rejected.examples["extra_fields"]


def test_a_date_column_beside_nanoseconds_after_midnight_reads_each_rows_day(tmp_path: Path) -> None:
    frame = pl.DataFrame({"DATE": ["2026-03-06", "2026-03-06", "2026-03-09"],
                          "TIME_NS": [14_423_874_757_847, 14_423_874_757_999, 34_200_000_000_001],
                          "SYMBOL": ["AAPL"] * 3, "PRICE": [185.1, 185.2, 185.3], "SIZE": [1, 2, 3]})
    frame.write_parquet(tmp_path / "ticks.parquet")
    frame.write_csv(tmp_path / "ticks.csv")
    want = [1772755200_000000000 + 14_423_874_757_847, 1772755200_000000000 + 14_423_874_757_999,
            1773014400_000000000 + 34_200_000_000_001]  # 2026-03-06 and 2026-03-09 at midnight UTC, + the time
    for name in ("ticks.parquet", "ticks.csv"):
        replay = FileReplay(tmp_path / name)  # detected: not ms since the epoch (every row out of range)
        assert [t.ts for t in drain(replay)] == want
        assert any("column 'TIME_NS' read as ns after midnight of each row's day in column 'DATE'" in n
                   for n in replay.notes)
        # the map written out, with and without its unit, reads the same
        spec = "ts=DATE+TIME_NS,price=PRICE,size=SIZE,stream=SYMBOL"
        assert [t.ts for t in drain(FileReplay(tmp_path / name, columns=map_from_options(columns=spec)))] == want
        given = map_from_options(columns=spec, ts_unit="ns_after_midnight")
        assert [t.ts for t in drain(FileReplay(tmp_path / name, columns=given))] == want
    # TAQ's YYYYMMDD dates, microseconds by the column's name
    (tmp_path / "us.csv").write_text("date,time_us,symbol,price,size\n20260306,34200000001,AAPL,185.1,1\n")
    assert [t.ts for t in drain(FileReplay(tmp_path / "us.csv"))] == [1772755200_000000000 + 34_200_000_001_000]


def test_refusals_name_the_file_and_the_preset_a_few_bad_rows_hid(tmp_path: Path) -> None:
    path = tmp_path / "BTCUSDT-trades-2024-01-02.csv"  # spot trades whose second row lost its time
    path.write_text("4500000000,42500.1,0.053,2252.5,1704153601000,true,true\n"
                    "4500000001,42500.2,0.01,425.0,,false,true\n"
                    "4500000002,42500.3,0.01,425.0,1704153601009,false,true\n")
    with pytest.raises(ValueError, match="--preset binance-public-trades reads it"):
        FileReplay(path)
    replay = FileReplay(path, columns="binance-public-trades")
    assert [t.price for t in drain(replay)] == [42500.1, 42500.3] and dict(replay.rejected) == {"missing_field": 1}
    # keys given for every file, one of which lacks a column they name: the file is named
    (tmp_path / "taq.csv").write_text(TAQ_TRADES)
    (tmp_path / "XBTUSD.csv").write_text("1704153601,41997.7,0.1\n")
    spec = map_from_options(columns="stream=EX+SYM_ROOT", detect=True)
    with pytest.raises(ValueError, match=r"XBTUSD\.csv: the map reads \['EX', 'SYM_ROOT'\]"):
        FileReplay([tmp_path / "taq.csv", tmp_path / "XBTUSD.csv"], columns=spec)


def test_files_of_several_venues_feeding_one_stream_get_a_note(tmp_path: Path) -> None:
    (tmp_path / "BTCUSDT-trades-2024-01-02.csv").write_text(
        "4500000000,42500.1,0.053,2252.5,1704153601000,true,true\n")  # Binance spot, header-less
    (tmp_path / "tardis_trades.csv").write_text(
        "exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n"
        "binance-futures,BTCUSDT,1704153601100000,1704153601200000,1,buy,42510.1,0.5\n")
    (tmp_path / "tardis_quotes.csv").write_text(
        "exchange,symbol,timestamp,local_timestamp,ask_amount,ask_price,bid_price,bid_amount\n"
        "binance-futures,BTCUSDT,1704153601150000,1704153601250000,1.5,42510.2,42510.0,2.5\n")
    (tmp_path / "BTCUSDT2024-01-02.csv").write_text(
        "timestamp,symbol,side,size,price,tickDirection,trdMatchID,grossValue,homeNotional,foreignNotional\n"
        "1704153601.5,BTCUSDT,Buy,0.1,42520.5,PlusTick,abc,1,0.1,4252\n")  # Bybit
    files = [tmp_path / n for n in ("BTCUSDT-trades-2024-01-02.csv", "tardis_trades.csv", "BTCUSDT2024-01-02.csv")]
    replay = FileReplay(files)
    assert {t.stream for t in drain(replay)} == {"BTCUSDT"}
    note = next(n for n in replay.notes if n.startswith("stream BTCUSDT is fed by files of 3 venues"))
    assert "binance (BTCUSDT-trades-2024-01-02.csv)" in note and "bybit (BTCUSDT2024-01-02.csv)" in note
    assert "binance-futures (tardis_trades.csv)" in note and "replay list" in note
    assert replay.cautions == [note]  # and said again at the end of a run
    # one venue's trades and quotes are one market: no note
    assert not any("venues" in n for n in FileReplay([tmp_path / "tardis_trades.csv",
                                                      tmp_path / "tardis_quotes.csv"]).notes)
    # the fix the note names: a stream per file in a replay list
    (tmp_path / "list.yaml").write_text("replay:\n"
                                        "  - {path: BTCUSDT-trades-2024-01-02.csv}\n"
                                        "  - {path: tardis_trades.csv, columns: {stream: BTCUSDT-PERP}}\n"
                                        "  - {path: BTCUSDT2024-01-02.csv, columns: {stream: BYBIT-BTCUSDT}}\n")
    replay = FileReplay(tmp_path / "list.yaml")
    assert {t.stream for t in drain(replay)} == {"BTCUSDT", "BTCUSDT-PERP", "BYBIT-BTCUSDT"}
    assert not any("venues" in n for n in replay.notes)


def test_the_several_venues_note_names_every_file_feeding_the_stream(tmp_path: Path) -> None:
    """Four days of Binance spot, a Bybit day and two files whose layout names no venue: each file is named."""
    days = [tmp_path / f"BTCUSDT-trades-2024-01-0{day}.csv" for day in range(2, 6)]
    for day, path in enumerate(days):
        path.write_text(f"{4500000000 + day},42500.1,0.053,2252.5,{1704153601000 + day * 86_400_000},true,true\n")
    (tmp_path / "BTCUSDT2024-01-02.csv").write_text(
        "timestamp,symbol,side,size,price,tickDirection,trdMatchID,grossValue,homeNotional,foreignNotional\n"
        "1704153601.5,BTCUSDT,Buy,0.1,42520.5,PlusTick,abc,1,0.1,4252\n")  # Bybit
    plain = [tmp_path / "mine.csv", tmp_path / "theirs.csv"]
    for i, path in enumerate(plain):
        path.write_text(f"timestamp,symbol,price,size\n{1704153602000 + i},BTCUSDT,42501.5,1\n")
    replay = FileReplay([*days, tmp_path / "BTCUSDT2024-01-02.csv", *plain])
    note = next(n for n in replay.notes if n.startswith("stream BTCUSDT is fed by files of 2 venues"))
    assert f"binance ({', '.join(p.name for p in days)})" in note
    assert "; and 2 file(s) of no known venue (mine.csv, theirs.csv)" in note


def tardis_book_snapshot(path: Path) -> None:
    columns = ["exchange", "symbol", "timestamp", "local_timestamp"]
    columns += [f"{side}[{i}].{what}" for i in range(5) for side in ("asks", "bids") for what in ("price", "amount")]
    rows = []
    for k in range(2):
        row = ["binance-futures", "BTCUSDT", str(1704153601000000 + k * 1000), str(1704153601001000 + k * 1000)]
        for i in range(5):
            row += [f"{42510.2 + i + k:.1f}", f"{1.5 + i}", f"{42510.0 - i + k:.1f}", f"{2.5 + i}"]
        rows.append(",".join(row))
    path.write_text(",".join(columns) + "\n" + "\n".join(rows) + "\n")


def test_tardis_book_snapshots_read_their_top_level_as_quotes(tmp_path: Path) -> None:
    path = tmp_path / "binance-futures_book_snapshot_5_2024-01-02_BTCUSDT.csv"
    tardis_book_snapshot(path)
    want = [("BTCUSDT", 1704153601_000000000, 42510.0, 42510.2, 2.5, 1.5),
            ("BTCUSDT", 1704153601_001000000, 42511.0, 42511.2, 2.5, 1.5)]
    quotes = lambda replay: [(t.stream, t.ts, t.bid, t.ask, t.bid_size, t.ask_size) for t in drain(replay)]  # noqa
    assert quotes(FileReplay(path)) == want  # detected
    spec = map_from_options(columns="ts=timestamp,bid=bids[0].price,ask=asks[0].price,bid_size=bids[0].amount,"
                                    "ask_size=asks[0].amount,stream=symbol")  # the map replay.md gives
    assert quotes(FileReplay(path, columns=spec)) == want


def test_okx_liquidations_left_out_by_a_keep_filter_in_a_replay_list(tmp_path: Path) -> None:
    (tmp_path / "okx.csv").write_text("instId,tradeId,px,sz,side,ts,isLiquidation\n"
                                      "BTC-USDT-SWAP,1,42500.1,2,buy,1704153601000,false\n"
                                      "BTC-USDT-SWAP,2,42400.0,50,sell,1704153601500,true\n")
    (tmp_path / "list.yaml").write_text("replay:\n  - {path: okx.csv, columns: {keep: {isLiquidation: [false]}}}\n")
    replay = FileReplay(tmp_path / "list.yaml")
    assert [t.price for t in drain(replay)] == [42500.1] and dict(replay.rejected) == {"filtered_out": 1}


def test_a_time_unit_that_changes_inside_a_file_is_said(tmp_path: Path) -> None:
    path = tmp_path / "BTCUSDT-trades-2024-12.csv"  # Binance's ms, then us from 2025-01-01, concatenated
    path.write_text("4500000000,42500.1,0.053,2252.5,1735689599000,true,true\n"
                    "4500000001,42500.2,0.053,2252.5,1735689600000001,true,true\n")
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [42500.1]
    example = replay.rejected.examples["ts_out_of_range"]
    assert "line 2" in example and "read as ms" in example and "this one is us" in example


def test_an_exchange_settlement_file_reads_its_trade_date_and_settle_columns(tmp_path: Path) -> None:
    """`Trade Date,Contract,Settle`: no column held a time, so detection refused it; a date alone is its time
    when no column has one, and a settlement its price, with a note that these are one price a day."""
    (tmp_path / "settles.csv").write_text("Trade Date,Contract,Settle\n2026-11-02,ICE:BRN F7,71.58\n"
                                          "2026-11-02,CBOT:ZC H7,450.04\n2026-11-03,ICE:BRN F7,71.56\n")
    replay = FileReplay(tmp_path / "settles.csv")
    day = 1_793_577_600 * 10**9  # 2026-11-02 00:00 UTC
    assert [(t.stream, t.ts, t.price, t.size) for t in drain(replay)] == [
        ("ICE:BRN F7", day, 71.58, 1.0), ("CBOT:ZC H7", day, 450.04, 1.0),
        ("ICE:BRN F7", day + 86_400 * 10**9, 71.56, 1.0)]
    assert replay.notes[0] == "settles.csv: no column map given; read as ts=Trade Date (datetime), stream=Contract, " \
                              "price=Settle"
    assert replay.notes[1].startswith("settles.csv: read as settlement prices (Settle): an exchange's one price a day")
    # beside a column with times, the date is not the time; beside a last price, a settlement is not the price
    (tmp_path / "bars.csv").write_text("Trade Date,Time,Symbol,Last,Settle,Volume\n"
                                       "2026-11-02,09:30:00,CL,61.2,61.0,5\n")
    assert "ts=Trade Date+Time" in FileReplay(tmp_path / "bars.csv").notes[0]
    assert "price=Last" in FileReplay(tmp_path / "bars.csv").notes[0]


def test_two_files_feeding_one_stream_over_the_same_times_get_a_caution(tmp_path: Path) -> None:
    """Two vendors' EURUSD quotes merged by time interleave into one stream in silence; days that follow each
    other, and one market's trades beside its quotes, are the normal case: no caution."""
    def quotes(name: str, day: int, start_s: int) -> Path:
        rows = [f"2026-11-{day:02d}T00:00:{start_s + i:02d}Z,EURUSD,1.1600{i},1.1601{i}" for i in range(5)]
        (tmp_path / name).write_text("timestamp,symbol,bid,ask\n" + "\n".join(rows) + "\n")
        return tmp_path / name

    duka, truefx = quotes("duka.csv", 2, 0), quotes("truefx.csv", 2, 2)
    replay = FileReplay([duka, truefx])
    assert len(drain(replay)) == 10
    (caution,) = replay.cautions
    assert caution.startswith(f"stream EURUSD fed by both {duka} and {truefx}, whose times overlap (2026-11-02T"
                              f"00:00:02Z to 2026-11-02T00:00:04Z): their ticks interleave into one stream"), caution
    assert "give each its own stream in a replay list (an entry's columns: {stream: NAME})" in caution
    assert not FileReplay([duka, quotes("next_day.csv", 3, 0)]).cautions  # one file after the other
    (tmp_path / "trades.csv").write_text("timestamp,symbol,price,size\n2026-11-02T00:00:01Z,EURUSD,1.16005,1\n"
                                         "2026-11-02T00:00:03Z,EURUSD,1.16006,2\n")
    assert not FileReplay([duka, tmp_path / "trades.csv"]).cautions  # one market's quotes and trades
    assert len(FileReplay([duka, truefx], streams=["EUR*"]).cautions) == 1  # selected: still said
    assert not FileReplay([(duka, {"stream": "EURUSD.DUKA"}), truefx]).cautions  # named apart


T0 = 1704153600  # 2024-01-02T00:00:00Z


def test_rest_trades_saved_without_a_header_read_their_time_by_its_values(tmp_path: Path) -> None:
    """Review 163 (finding 5): Kraken's REST trades saved as `price,volume,time` were refused with their price
    called seconds after midnight, and Bitfinex's `ID,MTS,AMOUNT,PRICE` with its trade id called `time`. The time
    is the column whose values are a present-day epoch in ms (or decimal seconds), not an id that would read as
    2017 in seconds: Kraken's reads as a time and two numbers, Bitfinex's as its layout, sides from AMOUNT's sign."""
    (tmp_path / "XBTUSD_pvt.csv").write_text("".join(
        f"{42000 + (i % 9) * 0.1:.1f},{0.0123 + i / 1000:.8f},{T0 + i * 0.9 + 0.1234:.4f}\n" for i in range(40)))
    replay = FileReplay(tmp_path / "XBTUSD_pvt.csv")
    kraken = drain(replay)
    assert len(kraken) == 40 and (kraken[1].stream, kraken[1].ts, kraken[1].price, kraken[1].size) == (
        "XBTUSD", (T0 + 1) * 10**9 + 23_400_000, 42000.1, 0.0133)
    assert replay.notes[0] == ("XBTUSD_pvt.csv: no header row; read as a time and two numbers (--csv-names "
                               "price,size,time): ts=time (s), stream_name=XBTUSD, price=price, size=size")
    (tmp_path / "tBTCUSD_rest.csv").write_text("".join(
        f"{1500000000 + i},{(T0 + i) * 1000},{(-1) ** (i // 3) * (0.001 + i / 1000):.8f},{42000 + i % 9}\n"
        for i in range(40)))
    replay = FileReplay(tmp_path / "tBTCUSD_rest.csv")
    bitfinex = drain(replay)
    assert len(bitfinex) == 40 and dict(replay.rejected) == {}
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in bitfinex[2:4]] == [
        ("BTCUSD", (T0 + 2) * 10**9, 42002.0, 0.003, "buy"), ("BTCUSD", (T0 + 3) * 10**9, 42003.0, 0.004, "sell")]
    assert ("tBTCUSD_rest.csv: no header row; read as Bitfinex's trades: an id, a time in ms, a signed amount "
            "(negative: a sell) and a price (--csv-names ID,MTS,AMOUNT,PRICE): ts=MTS (ms), stream_name=BTCUSD, "
            "price=PRICE, size=AMOUNT, signed_size (negative: a sell)") in replay.notes


def test_a_refused_header_less_file_names_its_columns_by_position(tmp_path: Path) -> None:
    """A layout no guess reads (Kraken's 7-column REST arrays; Bitfinex's with no sell among its first rows) is
    refused with --csv-names naming the epoch column `time` and each column said by position with what it looks
    like; a price is never called seconds after midnight beside an epoch time."""
    (tmp_path / "XBTUSD_rest.csv").write_text("".join(
        f"{42000 + i % 9}.1,0.{i + 1:04d},{T0 + i}.1234,{'bs'[i % 2]},{'ml'[i % 2]},,{70000000 + i}\n"
        for i in range(20)))
    with pytest.raises(ValueError) as refused:
        FileReplay(tmp_path / "XBTUSD_rest.csv")
    said = str(refused.value)
    assert "--csv-names c1,c2,time,c4,c5,c6,c7 " in said and "seconds after midnight" not in said, said
    assert ("its columns: 1 (42000.1) a number; 2 (0.0001) a number; 3 (1704153600.1234) a time, seconds since the "
            "epoch (2024-01-02T00:00:00.123400000Z); 4 (b) text; 5 (m) text; 6 () empty; 7 (70000000) a number") \
        in said, said
    (tmp_path / "tBTCUSD_buys.csv").write_text("".join(
        f"{1500000000 + i},{(T0 + i) * 1000},0.5,{42000 + i % 9}\n" for i in range(20)))
    with pytest.raises(ValueError) as refused:
        FileReplay(tmp_path / "tBTCUSD_buys.csv")
    said = str(refused.value)
    assert "--csv-names c1,time,c3,c4 " in said, said
    assert ("its columns: 1 (1500000000) an integer: an id, or seconds since the epoch (2017-07-14T02:40:00Z); "
            "2 (1704153600000) a time, ms since the epoch (2024-01-02T00:00:00Z); 3 (0.5) a number; 4 (42000) a "
            "number. If it holds Bitfinex's trades (no sell among its first rows, so AMOUNT's sign does not tell): "
            "--csv-names ID,MTS,AMOUNT,PRICE") in said, said
