"""Vendor files whose rows or cells mean more than their columns say, read as the vendor means them: LSEG Tick
History's `Type` (corrections and status rows are no new ticks) and `GMT Offset` (local times), its legacy
`Date[G],Time[G]` layout, FIX/CME aggressor sides (2 is a sell), Tardis.dev quotes with an empty book side (no
orders there: never filled from an earlier quote) and HistData's zone. Every fixture is written here, from code,
into tmp_path."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from connectors.column_map import ColumnMap
from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from connectors.ticks import Tick
from conftest import drain, ns

LSEG_HEADER = "#RIC,Domain,Date-Time,GMT Offset,Type,Price,Volume,Bid Price,Bid Size,Ask Price,Ask Size\n"


def vod_rows(path: Path, *rows: str) -> Path:
    """An LSEG tick history of VOD.L on 2024-01-02: each row from its time of day on (`08:30:00.1Z,+0,Trade,...`)."""
    path.write_text(LSEG_HEADER + "".join(f"VOD.L,Market Price,2024-01-02T{row}\n" for row in rows))
    return path


def test_lseg_corrections_and_status_rows_are_left_out_and_counted(tmp_path: Path) -> None:
    path = vod_rows(tmp_path / "lseg.csv", "08:00:00.000000000Z,+0,Market Condition,,,,,,",
                    "08:30:00.100000000Z,+0,Trade,97.52,900,,,,",
                    "08:30:00.200000000Z,+0,Quote,,,97.53,5000,97.55,7000",
                    "08:32:28.400000000Z,+0,Correction,976.40,250000,,,,", "08:32:29.000000000Z,+0,Trade,97.54,100,,,,")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.kind, t.price or t.bid) for t in ticks] == [("trade", 97.52), ("quote", 97.53), ("trade", 97.54)]
    assert dict(replay.rejected) == {"filtered_out": 2}  # counted, not silent
    assert any("its Trade, Quote rows are read, its Correction, Market Condition rows left out" in note
               for note in replay.notes)
    # a map given in full reads what it says: the correction is a trade again
    spec = map_from_options(columns="ts=Date-Time,stream=#RIC,price=Price,size=Volume")
    assert [t.price for t in drain(FileReplay(path, columns=spec))] == [97.52, 976.4, 97.54]


def test_lseg_trade_row_without_a_price_is_a_missing_field_not_an_unknown_kind(tmp_path: Path) -> None:
    path = vod_rows(tmp_path / "lseg.csv", "08:30:00.100000000Z,+0,Trade,97.52,900,,,,",
                    "08:30:00.150000000Z,+0,Quote,,,97.51,10,97.56,10", "08:30:00.200000000Z,+0,Trade,,900,,,,",
                    "08:30:00.300000000Z,+0,Quote,,,,,,", "08:30:00.400000000Z,+0,Correction,97.0,10,,,,",
                    "08:32:29.000000000Z,+0,Trade,97.54,100,,,,")
    replay = FileReplay(path)
    assert [t.price or t.bid for t in drain(replay)] == [97.52, 97.51, 97.54]
    assert dict(replay.rejected) == {"missing_field": 2, "filtered_out": 1}
    first = replay.rejected.examples["missing_field"]
    assert 'column "Type" marks the row Trade but it has no price (column "Price")' in first


def test_lseg_local_times_are_read_at_each_rows_gmt_offset(tmp_path: Path) -> None:
    path = tmp_path / "ibm.csv"
    path.write_text(LSEG_HEADER +
                    "IBM.N,Market Price,2024-01-02T09:30:00.127692637,-5,Trade,161.19,100,,,,\n"
                    "VOD.L,Market Price,2024-01-02T14:30:01.000000000,+0,Trade,97.50,100,,,,\n"
                    "INFY.NS,Market Price,2024-01-02T20:00:02.000000000,+5.5,Trade,1500.0,10,,,,\n")
    replay = FileReplay(path)
    assert [t.ts for t in drain(replay)] == [ns("2024-01-02T14:30:00.127692+00:00") + 637,
                                             ns("2024-01-02T14:30:01+00:00"), ns("2024-01-02T14:30:02+00:00")]
    assert any("column \"GMT Offset\" gives each row's (hours)" in note for note in replay.notes)
    # --tz reads them in a zone instead; the offset column is then not applied
    spec = map_from_options(tz="America/New_York", detect=True)
    assert drain(FileReplay(path, columns=spec))[0].ts == ns("2024-01-02T14:30:00.127692+00:00") + 637
    # times carrying their own offset (the usual export, `...Z`) keep it; a map that adds an offset column refuses
    write = tmp_path / "utc.csv"
    write.write_text(LSEG_HEADER + "IBM.N,Market Price,2024-01-02T14:30:00Z,-5,Trade,161.19,100,,,,\n")
    assert drain(FileReplay(write))[0].ts == ns("2024-01-02T14:30:00+00:00")
    spec = map_from_options(columns="utc_offset=GMT Offset", detect=True)
    with pytest.raises(ValueError, match="carry their own UTC offset"):
        FileReplay(write, columns=spec)
    with pytest.raises(ValueError, match="utc_offset reads wall-clock times"):
        ColumnMap(ts="t", ts_unit="datetime", price="p", size="s", utc_offset="o", tz="Europe/London")


def test_lseg_legacy_date_and_time_columns(tmp_path: Path) -> None:
    path = tmp_path / "vod.csv"
    path.write_text("#RIC,Date[G],Time[G],GMT Offset,Type,Price,Volume,Bid Price,Bid Size,Ask Price,Ask Size\n"
                    "VOD.L,02-Jan-2024,08:30:00.035378,+0,Trade,92.82,1700,,,,\n"
                    "VOD.L,02-Jan-2024,08:30:00.086639,+0,Quote,,,92.80,46000,92.83,19000\n")
    replay = FileReplay(path)
    assert drain(replay) == [
        Tick("VOD.L", ns("2024-01-02T08:30:00.035378+00:00"), "trade", price=92.82, size=1700),
        Tick("VOD.L", ns("2024-01-02T08:30:00.086639+00:00"), "quote", bid=92.8, ask=92.83, bid_size=46000,
             ask_size=19000)]
    assert not any("carry no UTC offset" in note for note in replay.notes)  # [G]: GMT, by its name


def test_fix_aggressor_sides_read_2_as_a_sell(tmp_path: Path) -> None:
    path = tmp_path / "ESH4_trades.csv"
    path.write_text("transact_time,symbol,price,size,aggressor_side\n"
                    "1704205800035377462,ESH4,4772.00,15,1\n"
                    "1704205800115067061,ESH4,4771.75,17,2\n"
                    "1704205800159823554,ESH4,4771.50,5,0\n")
    replay = FileReplay(path)
    assert [t.side for t in drain(replay)] == ["buy", "sell", None]
    assert dict(replay.rejected) == {}
    assert "side=aggressor_side (FIX's AggressorSide: 1 = buy, 2 = sell, 0 = none)" in replay.notes[0]
    # signed sides stay signed: -1 is a sell, and a column of 0 and 1 is not FIX's
    (tmp_path / "signed.csv").write_text("ts,symbol,price,size,side\n1704205800035377462,X,1,1,1\n"
                                         "1704205800035377463,X,1,1,-1\n")
    assert [t.side for t in drain(FileReplay(tmp_path / "signed.csv"))] == ["buy", "sell"]


def test_tardis_quotes_with_an_empty_book_side_are_rejected_not_filled(tmp_path: Path) -> None:
    path = tmp_path / "deribit_quotes_2024-01-02_OPTIONS.csv"
    path.write_text("exchange,symbol,timestamp,local_timestamp,ask_amount,ask_price,bid_price,bid_amount\n"
                    "deribit,BTC-29MAR24-50000-C,1704205800086638,1704205800087538,12.5,0.0420,0.0410,8.0\n"
                    "deribit,BTC-29MAR24-50000-C,1704205800115067,1704205800115967,12.5,0.0420,,\n"
                    "deribit,BTC-29MAR24-50000-C,1704205800159823,1704205800160723,12.5,0.0425,0.0415,8.0\n")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.bid, t.ask) for t in ticks] == [(0.041, 0.042), (0.0415, 0.0425)]  # no bid 0.0410 invented
    assert dict(replay.rejected) == {"missing_field": 1}
    example = replay.rejected.examples["missing_field"]
    assert "Tardis.dev leaves a side empty when the book has no orders there" in example
    assert "fill_quotes=true" not in example
    # the same cells in a file of no known layout are a one-sided quote too; a user who knows the file writes
    # only what changed says so
    (tmp_path / "changes.csv").write_text("time,symbol,bid,ask\n2024-01-02T08:00:00Z,X,1.0,1.1\n"
                                          "2024-01-02T08:00:01Z,X,,1.2\n")
    assert [(t.bid, t.ask) for t in drain(FileReplay(tmp_path / "changes.csv"))] == [(1.0, 1.1)]
    filled = FileReplay(tmp_path / "changes.csv", columns=map_from_options(columns="fill_quotes=true", detect=True))
    assert [(t.bid, t.ask) for t in drain(filled)] == [(1.0, 1.1), (1.0, 1.2)]


def test_histdata_times_name_histdatas_zone(tmp_path: Path) -> None:
    path = tmp_path / "DAT_ASCII_EURUSD_T_202401.csv"
    path.write_text("20240102 000000700,1.10412,1.10415,0\n20240102 000001200,1.10413,1.10416,0\n")
    replay = FileReplay(path)
    assert Counter(t.stream for t in drain(replay)) == {"EURUSD": 2}
    assert any("read in Etc/GMT+5 (EST all year, no summer time), the zone HistData writes them in" in note
               for note in replay.notes)


def test_a_reason_rejecting_many_rows_is_a_warning_above_the_scores(tmp_path: Path, capsys) -> None:
    from conftest import tiny_tick_checkpoint
    from engine.service.cli import main
    from test_vendor_files_without_options import QUERIES

    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    (tmp_path / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 4096, block_size: 16}}\n")
    (tmp_path / "q.yaml").write_text(QUERIES)
    path = tmp_path / "trades.csv"  # a venue's own side codes (K, Q): 40% of the rows cannot be read
    path.write_text("ts_event,symbol,price,size,side\n" + "".join(
        f"{1704205800000000000 + i * 250_000_000},XYZ,{100 + (i % 7) * 0.01:.2f},{1 + i % 5},"
        f"{('B', 'S', 'K', 'Q', 'B')[i % 5]}\n" for i in range(200)))
    argv = ["--queries", str(tmp_path / "q.yaml"), "--quiet", "--config", str(tmp_path / "engine.yaml"),
            "--out", str(tmp_path / "a.parquet")]
    assert main(["backtest", str(path), *argv]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("replayed 120 ticks (80 rejected), ")
    assert out[1] == ("warning: unknown_side 80 (40%) of the 200 ticks read rejected, left out of every answer and "
                      "score: is a column read as the file means it? (the first such row below; docs/replay.md)")
    assert out[2].startswith("  rejected unknown_side: 80 (first: ")


def _streams(replay: FileReplay) -> list[str]:
    return sorted({t.stream for t in drain(replay)})


def test_spreadsheet_serial_dates_and_kdb_timestamps(tmp_path: Path) -> None:
    # Bloomberg's BDH export to Excel: `Dates` as serial days since 1899-12-30 (as epoch seconds: 1970-01-01)
    (tmp_path / "bbg.csv").write_text("Dates,LAST_PRICE,VOLUME\n45293.39583333,185.64,1947\n"
                                      "45293.39652778,185.65,4960\n")
    replay = FileReplay(tmp_path / "bbg.csv")
    assert [t.ts for t in drain(replay)] == [ns("2024-01-02T09:30:00+00:00"), ns("2024-01-02T09:31:00+00:00")]
    assert any("read as spreadsheet serial dates" in note for note in replay.notes)
    assert any("read as spreadsheet serial dates" in note and note.endswith(", in UTC: give --tz ZONE if they are "
                                                                         "local times (a Bloomberg terminal's are)")
               for note in replay.notes)
    spec = map_from_options(tz="America/New_York", detect=True)
    in_new_york = FileReplay(tmp_path / "bbg.csv", columns=spec)
    assert drain(in_new_york)[0].ts == ns("2024-01-02T14:30:00+00:00")
    # the zone the times were read in, not "in UTC", once --tz gave one (review150 finding 4)
    assert any(note.endswith("times on 1970-01-01), in America/New_York (--tz ZONE says otherwise)")
               for note in in_new_york.notes if "read as spreadsheet serial dates" in note), in_new_york.notes
    # its text form, minutes without seconds: refused with both readings of the day, then read with the one given
    (tmp_path / "bbg_text.csv").write_text("Dates,LAST_PRICE,VOLUME\n1/2/2024 09:30,185.64,1285\n")
    with pytest.raises(ValueError, match=r'"%m/%d/%Y %H:%M" or "%d/%m/%Y %H:%M"'):
        FileReplay(tmp_path / "bbg_text.csv")
    spec = map_from_options(ts_format="%m/%d/%Y %H:%M", detect=True)
    assert drain(FileReplay(tmp_path / "bbg_text.csv", columns=spec))[0].ts == ns("2024-01-02T09:30:00+00:00")
    # kdb+'s timestamps (BitMEX's dumps), to the nanosecond
    (tmp_path / "bitmex.csv").write_text("timestamp,symbol,side,size,price\n"
                                         "2024-01-02D00:00:01.000000789,XBTUSD,Buy,900,42500.5\n")
    assert drain(FileReplay(tmp_path / "bitmex.csv")) == [
        Tick("XBTUSD", ns("2024-01-02T00:00:01+00:00") + 789, "trade", price=42500.5, size=900, side="buy")]


def test_option_chains_and_instrument_ids_give_a_stream_per_contract(tmp_path: Path) -> None:
    (tmp_path / "opra.csv").write_text("ts_ns,underlying,expiry,strike,right,price,size,exchange\n"
                                       "1704205800000000000,SPY,2024-01-19,470,C,1.50,13,C\n"
                                       "1704205800050000000,SPY,2024-01-19,470,P,2.10,5,C\n")
    assert _streams(FileReplay(tmp_path / "opra.csv")) == ["SPY 2024-01-19 470 C", "SPY 2024-01-19 470 P"]
    # Cboe DataShop's layout: the root (SPXW) names the contract, not the underlying (^SPX)
    (tmp_path / "cboe.csv").write_text(
        "underlying_symbol,quote_datetime,root,expiration,strike,option_type,trade_size,trade_price\n"
        "^SPX,2024-01-02 09:30:00.000,SPXW,2024-01-19,4700.0,C,18,1.50\n"
        "^SPX,2024-01-02 09:30:00.050,SPX,2024-01-19,4700.0,C,9,1.51\n")
    assert _streams(FileReplay(tmp_path / "cboe.csv")) == ["SPX 2024-01-19 4700 C", "SPXW 2024-01-19 4700 C"]
    # a Databento export without symbols: one stream per instrument id, as its DBN file replays
    (tmp_path / "glbx.trades.csv").write_text(
        "ts_recv,ts_event,rtype,publisher_id,instrument_id,action,side,depth,price,size,flags\n"
        "1704205800000015000,1704205800000000000,0,1,5002,T,B,0,4780250000000,1,0\n"
        "1704205800010015000,1704205800010000000,0,1,4378,T,A,0,16850750000000,2,0\n")
    ticks = drain(FileReplay(tmp_path / "glbx.trades.csv"))
    assert [(t.stream, t.price, t.side) for t in ticks] == [("5002", 4780.25, "buy"), ("4378", 16850.75, "sell")]


def test_databento_tbbo_replays_the_quote_each_trade_met(tmp_path: Path) -> None:
    (tmp_path / "glbx.tbbo.csv").write_text(
        "ts_recv,ts_event,rtype,publisher_id,instrument_id,action,side,depth,price,size,flags,bid_px_00,ask_px_00,"
        "bid_sz_00,ask_sz_00,symbol\n"
        "1704205800000015000,1704205800000000000,1,1,5002,T,A,0,4780250000000,1,0,4780250000000,4780500000000,25,35,"
        "ESH4\n")
    replay = FileReplay(tmp_path / "glbx.tbbo.csv")
    t0 = 1704205800000015000
    assert drain(replay) == [Tick("ESH4", t0, "quote", bid=4780.25, ask=4780.5, bid_size=25, ask_size=35),
                             Tick("ESH4", t0, "trade", price=4780.25, size=1, side="sell")]
    assert any("Databento TBBO records" in note for note in replay.notes)


def test_itch_like_executions_and_times_after_midnight_in_ns(tmp_path: Path) -> None:
    (tmp_path / "itch.csv").write_text("timestamp,msg_type,stock,order_ref,buy_sell,shares,price,match_number\n"
                                       "34200000000000,C,MSFT,88000,S,300,370.60,700000\n"
                                       "34200001234567,E,AAPL,88001,B,100,185.65,700001\n")
    spec = map_from_options(ts_unit="ns_after_midnight", date="2024-01-02", tz="America/New_York", detect=True)
    ticks = drain(FileReplay(tmp_path / "itch.csv", columns=spec))
    assert [(t.stream, t.ts, t.size) for t in ticks] == [("MSFT", ns("2024-01-02T14:30:00+00:00"), 300),
                                                         ("AAPL", ns("2024-01-02T14:30:00.001234+00:00") + 567, 100)]


def test_venues_of_one_instrument_and_correction_columns_are_said(tmp_path: Path) -> None:
    (tmp_path / "kaiko.csv").write_text("id,exchange,symbol,date,price,amount,sell\n"
                                        "1,bfnx,btc-usd,1704153601000,42650.00,0.1,false\n"
                                        "2,cbse,btc-usd,1704153601111,42500.02,0.1,true\n")
    replay = FileReplay(tmp_path / "kaiko.csv")
    assert _streams(replay) == ["btc-usd"]
    assert any('column "exchange" holds 2 venues (bfnx, cbse)' in n and "--columns stream=exchange+symbol" in n
               for n in replay.notes)
    spec = map_from_options(columns="stream=exchange+symbol", detect=True)
    assert _streams(FileReplay(tmp_path / "kaiko.csv", columns=spec)) == ["bfnx btc-usd", "cbse btc-usd"]
    # a consolidated tape's exchange codes are one market's prints: no note
    (tmp_path / "taq.csv").write_text("timestamp,symbol,exchange,price,size\n2024-01-02T14:30:00Z,AAPL,N,185.6,100\n"
                                      "2024-01-02T14:30:01Z,AAPL,Q,185.7,100\n")
    assert not any("venues" in n for n in FileReplay(tmp_path / "taq.csv").notes)
    (tmp_path / "tickdata.csv").write_text(
        "Date,Time,Price,Volume,Exchange,Sales Condition,Correction Indicator,Exclude Record Flag\n"
        "2024-01-02,09:30:00.000,185.64,1000,Z,@,01,X\n2024-01-02,09:30:00.313,185.65,100,Q,@ TI,00,\n")
    replay = FileReplay(tmp_path / "tickdata.csv")
    assert len(drain(replay)) == 2
    assert any('correction columns are not read ("Correction Indicator" holds 01; "Exclude Record Flag" holds X)'
               in n for n in replay.notes)


def test_binance_futures_files_without_a_header(tmp_path: Path) -> None:
    (tmp_path / "BTCUSDT-aggTrades-2024-01-02.csv").write_text(
        "1900000000,42500.1,0.053,4400000000,4400000002,1704153601000,true\n")
    (tmp_path / "BTCUSDT-bookTicker-2024-01-02.csv").write_text(
        "3800000000000,42500.1,7.1,42500.2,5.3,1704153601000,1704153601003\n")
    assert drain(FileReplay(tmp_path / "BTCUSDT-aggTrades-2024-01-02.csv")) == [
        Tick("BTCUSDT_PERP", ns("2024-01-02T00:00:01+00:00"), "trade", price=42500.1, size=0.053, side="sell")]
    assert drain(FileReplay(tmp_path / "BTCUSDT-bookTicker-2024-01-02.csv")) == [  # USD-M's: apart from spot
        Tick("BTCUSDT_PERP", ns("2024-01-02T00:00:01+00:00"), "quote", bid=42500.1, ask=42500.2, bid_size=7.1,
             ask_size=5.3)]
    # a layout no guess reads is refused with --csv-names that can be pasted: distinct names
    (tmp_path / "odd.csv").write_text("1704153601000,1704153601003,x,y,1704153601009\n")
    with pytest.raises(ValueError, match=r"--csv-names time,time_2,c3,c4,time_3 "):
        FileReplay(tmp_path / "odd.csv")


def test_a_date_that_reads_two_ways_is_settled_by_a_later_row(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("Date,Time,Price,Volume\n01/12/2024,09:30:00.000,185.64,100\n"
                                    "01/16/2024,09:30:19.000,185.83,100\n")
    replay = FileReplay(tmp_path / "t.csv")
    assert [t.ts for t in drain(replay)] == [ns("2024-01-12T09:30:00+00:00"), ns("2024-01-16T09:30:19+00:00")]
    assert any('its later rows read only as "%m/%d/%Y %H:%M:%S%.f"' in note for note in replay.notes)
    (tmp_path / "u.csv").write_text("Date,Time,Price,Volume\n01/12/2024,09:30:00.000,185.64,100\n"
                                    "02/11/2024,09:30:19.000,185.83,100\n")  # every row reads both ways
    with pytest.raises(ValueError, match="reads more than one way"):
        FileReplay(tmp_path / "u.csv")


def test_coinapi_flat_files_without_a_map(tmp_path: Path) -> None:
    path = tmp_path / "COINBASE_SPOT_BTC_USD_20240102.csv"
    path.write_text("time_exchange;time_coinapi;guid;price;base_amount;taker_side\n"
                    "2024-01-02T00:00:01.0000000;2024-01-02T00:00:01.0400000;3f1a;42500.01;0.0563;BUY_ESTIMATED\n"
                    "2024-01-02T00:00:01.1234570;2024-01-02T00:00:01.1634570;3f1b;42500.02;0.788;SELL\n")
    assert drain(FileReplay(path)) == [
        Tick("BTC-USD", ns("2024-01-02T00:00:01+00:00"), "trade", price=42500.01, size=0.0563, side="buy"),
        Tick("BTC-USD", ns("2024-01-02T00:00:01.123457+00:00"), "trade", price=42500.02, size=0.788, side="sell")]


def test_tz_for_every_file_leaves_a_file_whose_times_carry_their_offset_as_it_is(tmp_path: Path) -> None:
    """The README's `trades.csv bbo.parquet` with --tz: naive-time trades beside UTC-aware quotes were refused
    ('already carries time zone "UTC"; tz=... is for naive times'). --tz is for naive times: the aware file keeps
    its own, said; a map of the file's own that contradicts it is still refused."""
    import polars as pl

    (tmp_path / "trades.csv").write_text("time,symbol,price,size\n2024-06-03 09:30:00.5,AAPL,190.1,100\n")
    pl.DataFrame({"time": pl.Series(["2024-06-03T13:30:01"]).str.to_datetime(time_zone="UTC"), "symbol": ["AAPL"],
                  "bid": [190.0], "ask": [190.2]}).write_parquet(tmp_path / "bbo.parquet")
    replay = FileReplay([tmp_path / "trades.csv", tmp_path / "bbo.parquet"],
                        columns=map_from_options(tz="America/New_York", detect=True))
    assert [(t.kind, t.ts) for t in drain(replay)] == [("trade", ns("2024-06-03T13:30:00.5+00:00")),
                                                       ("quote", ns("2024-06-03T13:30:01+00:00"))]
    assert any("bbo.parquet: its times carry their own UTC offset, so --tz America/New_York (for naive times) is "
               "not applied to it" in note for note in replay.notes), replay.notes
    with pytest.raises(ValueError, match='already carries time zone "UTC"'):
        FileReplay([(tmp_path / "bbo.parquet", {"tz": "America/New_York"})])


def test_a_fixed_offset_zone_named_like_a_region_is_said(tmp_path: Path) -> None:
    """`--tz EST` reads a July 09:30 as 14:30 UTC (UTC-5 all year) where New York's clock says 13:30: said."""
    path = tmp_path / "es.csv"
    path.write_text("time,price,size\n2026-07-13 09:30:00,6850.25,1\n")
    replay = FileReplay(path, columns=map_from_options(tz="EST", detect=True))
    assert drain(replay)[0].ts == ns("2026-07-13T14:30:00+00:00")  # as asked: EST is UTC-5
    assert any("tz EST is a fixed offset all year, with no summer time: if the times are New York's clock (summer "
               "time included), give --tz America/New_York" in note for note in replay.notes), replay.notes
    replay = FileReplay(path, columns=map_from_options(tz="America/New_York", detect=True))
    assert drain(replay)[0].ts == ns("2026-07-13T13:30:00+00:00") and not any("fixed offset" in n for n in replay.notes)
