"""Vendor files of other platforms, in their own layouts, read without options or with the one option a message
names: LSEG Tick History (`#RIC`), MetaTrader 5 tick exports (`<BID>`, cells left empty when unchanged),
Interactive Brokers' per-kind files (`AAPL_TRADES_...`), QuantConnect/LEAN ticks (milliseconds after midnight in
a zip), NinjaTrader tick exports (a 100 ns fraction after a space), other platforms' and venues' exports, and a
column map that names one column of an LSEG file only. Every fixture is written here, from code, into tmp_path."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from connectors.iqfeed_level1 import ZONE
from connectors.ticks import Tick
from conftest import drain, ns
from engine.service.cli import main

MT5_HEADER = "<DATE>\t<TIME>\t<BID>\t<ASK>\t<LAST>\t<VOLUME>\t<FLAGS>"  # MetaTrader 5's tick export


def write_lseg(path: Path) -> None:
    # LSEG (Refinitiv) Tick History: many RICs in one file, trades and quotes in the same columns set
    path.write_text(
        "#RIC,Domain,Date-Time,GMT Offset,Type,Price,Volume,Bid Price,Bid Size,Ask Price,Ask Size\n"
        "BARC.L,Market Price,2024-01-02T08:00:00.048722264Z,+0,Quote,,,150.3,8100,150.32,8100\n"
        "VOD.L,Market Price,2024-01-02T08:00:00.051000000Z,+0,Trade,71.02,5000,,,,\n"
        "AZN.L,Market Price,2024-01-02T08:00:00.060000001Z,+0,Quote,,,10612,120,10614,80\n"
        "BARC.L,Market Price,2024-01-02T08:00:00.070000000Z,+0,Trade,150.32,1200,,,,\n")


def test_lseg_tick_history_gives_a_stream_per_ric(tmp_path: Path) -> None:
    write_lseg(tmp_path / "lseg_2024-01-02.csv")
    replay = FileReplay(tmp_path / "lseg_2024-01-02.csv")
    ticks = drain(replay)
    assert dict(replay.rejected) == {}
    assert ticks == [
        Tick("BARC.L", ns("2024-01-02T08:00:00.048722+00:00") + 264, "quote", bid=150.3, ask=150.32, bid_size=8100,
             ask_size=8100),
        Tick("VOD.L", ns("2024-01-02T08:00:00.051+00:00"), "trade", price=71.02, size=5000),
        Tick("AZN.L", ns("2024-01-02T08:00:00.060+00:00") + 1, "quote", bid=10612, ask=10614, bid_size=120,
             ask_size=80),
        Tick("BARC.L", ns("2024-01-02T08:00:00.070+00:00"), "trade", price=150.32, size=1200),
    ]
    assert "stream=#RIC" in replay.notes[0]


def test_a_map_naming_one_column_refines_the_detected_layout(tmp_path: Path) -> None:
    # `--columns stream=Domain` alone: the rest as detected (it was "missing argument 'ts'")
    write_lseg(tmp_path / "lseg.csv")
    spec = map_from_options(columns="stream=Domain", detect=True)
    ticks = drain(FileReplay(tmp_path / "lseg.csv", columns=spec))
    assert {t.stream for t in ticks} == {"Market Price"} and len(ticks) == 4
    with pytest.raises(ValueError, match="needs ts"):
        map_from_options(columns="stream=Domain")  # the config's form: no detection to refine


def test_metatrader_ticks_carry_the_unchanged_side_forward(tmp_path: Path) -> None:
    path = tmp_path / "EURUSD_202401020930_202401021030.csv"
    path.write_text(
        MT5_HEADER + "\n"
        "2024.01.02\t09:30:00.351\t1.09403\t1.09415\t\t\t6\n"
        "2024.01.02\t09:30:00.420\t1.09401\t\t\t\t2\n"
        "2024.01.02\t09:30:01.144\t\t1.09414\t\t\t4\n"
        "2024.01.02\t09:30:01.500\t\t\t1.09408\t2\t24\n")
    replay = FileReplay(path)
    ticks = drain(replay)
    t0 = ns("2024-01-02T09:30:00+00:00")
    assert ticks == [
        Tick("EURUSD", t0 + 351_000_000, "quote", bid=1.09403, ask=1.09415),
        Tick("EURUSD", t0 + 420_000_000, "quote", bid=1.09401, ask=1.09415),
        Tick("EURUSD", t0 + 1_144_000_000, "quote", bid=1.09401, ask=1.09414),
        Tick("EURUSD", t0 + 1_500_000_000, "trade", price=1.09408, size=2),
    ]
    assert dict(replay.rejected) == {}
    assert any("leave bid or ask empty" in note for note in replay.notes)
    # refused instead, when asked: each one-sided row counted
    strict = FileReplay(path, columns=map_from_options(columns="fill_quotes=false", detect=True))
    assert len(drain(strict)) == 2 and dict(strict.rejected) == {"missing_field": 2}


def test_metatrader_exports_in_utf16_read_as_their_utf8_copy(tmp_path: Path) -> None:
    text = (MT5_HEADER + "\r\n"
            "2024.01.02\t09:30:00.351\t2062.11\t2062.41\t\t\t6\r\n"
            "2024.01.02\t09:30:00.420\t\t2062.40\t\t\t4\r\n"
            "2024.01.02\t09:30:00.500\tbad\t2062.40\t\t\t2\r\n")
    path = tmp_path / "XAUUSD.csv"
    path.write_bytes(text.encode("utf-16"))  # with its byte-order mark, as MetaTrader writes
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.stream, t.bid, t.ask) for t in ticks] == [("XAUUSD", 2062.11, 2062.41), ("XAUUSD", 2062.11, 2062.40)]
    assert replay.notes[0] == "XAUUSD.csv: UTF-16 text, read as UTF-8"
    assert f"{path} line 4" in replay.rejected.examples["missing_field"]  # named as the user's file


def test_interactive_brokers_trades_and_quotes_of_one_stock_are_one_stream(tmp_path: Path) -> None:
    (tmp_path / "AAPL_TRADES_20240102.csv").write_text(
        "time,price,size,exchange,specialConditions\n1704205800,185.64,100,NASDAQ,\n1704205801,185.65,20,ARCA,   I\n")
    (tmp_path / "AAPL_BID_ASK_20240102.csv").write_text(
        "time,bidPrice,askPrice,bidSize,askSize\n1704205800,185.63,185.65,300,200\n")
    replay = FileReplay([tmp_path / "AAPL_TRADES_20240102.csv", tmp_path / "AAPL_BID_ASK_20240102.csv"])
    assert {t.stream for t in drain(replay)} == {"AAPL"}
    # IB's sale conditions (`I`: an odd lot) replay as trades, said as Polygon's and TAQ's are (review430 #4)
    assert any('sale conditions are not read ("specialConditions" holds "I")' in n for n in replay.notes)


def test_lean_ticks_count_milliseconds_after_midnight_inside_their_zip(tmp_path: Path) -> None:
    archive = tmp_path / "20240102_trade.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("20240102_spy_Trade_Tick.csv", "34200848,4726500,200,Q,00000000,0\n"
                                                  "34203568,4726400,100,D,00000001,0\n")
    common = {"names": "t,price,size,exchange,condition,suspicious".split(","), "date": "2024-01-02",
              "tz": "America/New_York"}
    columns = "ts=t,price=price,size=size,price_scale=10000,stream_name=SPY"
    ticks = drain(FileReplay(archive, columns=map_from_options(columns=columns, ts_unit="ms_after_midnight",
                                                               **common)))
    open_ny = ns("2024-01-02T09:30:00-05:00")
    assert ticks == [Tick("SPY", open_ny + 848_000_000, "trade", price=472.65, size=200),
                     Tick("SPY", open_ny + 3_568_000_000, "trade", price=472.64, size=100)]
    # read as seconds they are weeks past the day: refused, naming the archive and the unit that reads them
    as_seconds = map_from_options(columns=columns, ts_unit="seconds_after_midnight", **common)
    with pytest.raises(ValueError, match=r"20240102_trade\.zip \(20240102_spy_Trade_Tick\.csv inside\).*"
                                         r"--ts-unit ms_after_midnight"):
        drain(FileReplay(archive, columns=as_seconds))


def test_ninjatrader_ticks_read_their_100ns_fraction_and_the_quote_each_trade_met(tmp_path: Path) -> None:
    path = tmp_path / "ES 03-24.Last.txt"
    path.write_text("20240102 143000 2537700;4770.00;4769.75;4770.00;1\n"
                    "20240102 143000 9007580;4769.50;4769.50;4769.75;3\n")
    replay = FileReplay(path)
    ticks = drain(replay)
    t0 = ns("2024-01-02T14:30:00+00:00")
    assert ticks == [
        Tick("ES 03-24", t0 + 253_770_000, "quote", bid=4769.75, ask=4770.0),
        Tick("ES 03-24", t0 + 253_770_000, "trade", price=4770.0, size=1),
        Tick("ES 03-24", t0 + 900_758_000, "quote", bid=4769.5, ask=4769.75),
        Tick("ES 03-24", t0 + 900_758_000, "trade", price=4769.5, size=3),
    ]
    assert dict(replay.rejected) == {}


def test_numbers_with_grouping_commas_read_as_numbers(tmp_path: Path) -> None:
    # quoted "1,234.3" (spreadsheet exports), with a BOM and CRLF: it was every row refused
    path = tmp_path / "bkng.csv"
    path.write_bytes("\ufeffDate Time,Symbol,Trade Price,Trade Size\r\n"
                     '2024-01-02 14:30:00.178,BKNG,"1,234.3","5"\r\n'
                     '2024-01-02 14:30:01.135,BKNG,"1,234.9","1,200"\r\n'.encode())
    replay = FileReplay(path)
    assert [(t.price, t.size) for t in drain(replay)] == [(1234.3, 5), (1234.9, 1200)]
    assert dict(replay.rejected) == {}


def test_kaiko_sell_flag_gives_the_takers_side(tmp_path: Path) -> None:
    path = tmp_path / "krkn_ethusd_trades_2024_01_02.csv"
    path.write_text("id,exchange,symbol,date,price,amount,sell\n"
                    "100000,krkn,ethusd,1704153601524,2352.3,0.04566,true\n"
                    "100001,krkn,ethusd,1704153602380,2352.8,0.10323,false\n")
    ticks = drain(FileReplay(path))
    assert [(t.stream, t.ts, t.side) for t in ticks] == [("ethusd", 1704153601524 * 10**6, "sell"),
                                                         ("ethusd", 1704153602380 * 10**6, "buy")]


def test_option_trades_give_a_stream_per_contract_from_several_columns(tmp_path: Path) -> None:
    path = tmp_path / "opra_trades_20240102.csv"
    path.write_text("ts_ns,underlying,expiry,strike,right,price,size,exchange\n"
                    "1704205800177628355,QQQ,2024-01-19,405.0,C,3.19,5,Q\n"
                    "1704205800929986149,SPY,2024-01-19,470.0,C,4.11,2,I\n"
                    "1704205801000000000,SPY,2024-01-19,470.0,P,2.02,1,I\n")
    spec = map_from_options(columns="stream=underlying+expiry+strike+right", detect=True)
    ticks = drain(FileReplay(path, columns=spec))
    assert [(t.stream, t.ts) for t in ticks] == [("QQQ 2024-01-19 405 C", 1704205800177628355),
                                                 ("SPY 2024-01-19 470 C", 1704205800929986149),
                                                 ("SPY 2024-01-19 470 P", 1704205801000000000)]
    with pytest.raises(ValueError, match="joined by"):
        map_from_options(columns="ts=ts_ns,price=price,size=size,stream=underlying++right")


def test_coinapi_trades_name_their_pair_from_the_file_name(tmp_path: Path) -> None:
    path = tmp_path / "COINBASE_SPOT_BTC_USD_20240102.csv"
    path.write_text("time_exchange;time_coinapi;guid;price;base_amount;taker_side\n"
                    "2024-01-02T00:00:00.1002210Z;2024-01-02T00:00:00.1196420Z;a7;45122.3;0.081933;BUY\n")
    # the map names its time column and not its unit: read as the first value shows (it was "not a number of ns")
    spec = map_from_options(columns="ts=time_exchange,price=price,size=base_amount,side=taker_side", detect=True)
    replay = FileReplay(path, columns=spec)
    ticks = drain(replay)
    assert 'column "time_exchange" read as datetime, as its first value shows' in replay.notes[0]
    assert ticks == [Tick("BTC-USD", ns("2024-01-02T00:00:00.100221+00:00"), "trade", price=45122.3, size=0.081933,
                          side="buy")]


def test_a_perpetual_and_a_quarterly_future_are_two_streams(tmp_path: Path) -> None:
    # Binance COIN-M files: both name BTCUSD; the contract tells them apart (they were one stream)
    header = "id,price,qty,base_qty,time,is_buyer_maker\n"
    (tmp_path / "BTCUSD_PERP-trades-2024-01-02.csv").write_text(header + "1,42001.9,10,0.0238,1704153600000,true\n")
    (tmp_path / "BTCUSD_240329-trades-2024-01-02.csv").write_text(header + "1,42501.9,5,0.0118,1704153600500,false\n")
    ticks = drain(FileReplay(sorted(tmp_path.iterdir())))
    assert {(t.stream, t.price) for t in ticks} == {("BTCUSD_PERP", 42001.9), ("BTCUSD_240329", 42501.9)}


def test_deribit_direction_coinapi_estimated_and_bitfinex_signed_sides(tmp_path: Path) -> None:
    (tmp_path / "deribit.csv").write_text(
        "trade_seq,trade_id,timestamp,tick_direction,price,mark_price,iv,instrument_name,index_price,direction,amount\n"
        "1,ETH-1,1704153600000,0,0.0455,0.0452,55.1,BTC-29MAR24-60000-C,42000.5,sell,1.0\n")
    assert [(t.stream, t.side) for t in drain(FileReplay(tmp_path / "deribit.csv"))] == [("BTC-29MAR24-60000-C",
                                                                                          "sell")]
    (tmp_path / "COINBASE_SPOT_ETH_USD_20240102.csv").write_text(
        "time_exchange;time_coinapi;guid;price;base_amount;taker_side\n"
        "2024-01-02T00:00:00.1Z;2024-01-02T00:00:00.2Z;a;2352.1;0.5;SELL_ESTIMATED\n"
        "2024-01-02T00:00:01.1Z;2024-01-02T00:00:01.2Z;b;2352.2;0.5;BUY_ESTIMATED\n")
    spec = map_from_options(columns="ts=time_exchange,price=price,size=base_amount,side=taker_side", detect=True)
    assert [t.side for t in drain(FileReplay(tmp_path / "COINBASE_SPOT_ETH_USD_20240102.csv", columns=spec))] == \
        ["sell", "buy"]
    (tmp_path / "bitfinex_tBTCUSD_trades.csv").write_text(
        "ID,MTS,AMOUNT,PRICE\n1,1704153600000,0.5,42000\n2,1704153600100,-0.192659,41999\n")
    replay = FileReplay(tmp_path / "bitfinex_tBTCUSD_trades.csv")
    assert [(t.stream, t.size, t.side) for t in drain(replay)] == [("BTCUSD", 0.5, "buy"), ("BTCUSD", 0.192659, "sell")]
    assert "signed_size (negative: a sell)" in replay.notes[0]


def test_german_excel_numbers_and_grouping_commas_past_the_first_rows(tmp_path: Path) -> None:
    (tmp_path / "german.csv").write_text("Date;Time;Symbol;Price;Volume\n"
                                         "02.01.2024;09:00:01;BTCEUR;42.002,00;0,5183\n"
                                         "02.01.2024;09:00:02;BTCEUR;41.998,5;1.250,25\n")
    assert [(t.price, t.size) for t in drain(FileReplay(tmp_path / "german.csv"))] == [(42002.0, 0.5183),
                                                                                      (41998.5, 1250.25)]
    rows = [f"2024-01-02,14:30:{i:02d},XYZ,{990 + i}.25,10" for i in range(30)]
    rows.append('2024-01-02,14:30:30,XYZ,"1,020.25","1,500"')  # past the sniffed rows
    (tmp_path / "late.csv").write_text("Date,Time,Symbol,Price,Volume\n" + "\n".join(rows) + "\n")
    replay = FileReplay(tmp_path / "late.csv")
    ticks = drain(replay)
    assert (ticks[-1].price, ticks[-1].size) == (1020.25, 1500) and dict(replay.rejected) == {}
    (tmp_path / "semi.csv").write_text("time;price;size\n1704153600000;1.5;1\n1704153600001;0,5;1\n")
    replay = FileReplay(tmp_path / "semi.csv")  # not a decimal-comma file: 0,5 is refused, never read as 5
    assert [t.price for t in drain(replay)] == [1.5] and dict(replay.rejected) == {"missing_field": 1}


def test_metatrader_one_sided_quotes_past_the_first_rows_and_utf16_without_its_mark(tmp_path: Path) -> None:
    rows = [f"2024.01.02\t09:30:{i:02d}.000\t1.27{i:02d}\t1.28{i:02d}\t\t\t6" for i in range(30)]
    rows.append("2024.01.02\t09:30:30.000\t1.2750\t\t\t\t2")  # the first one-sided row, past the sniffed rows
    text = MT5_HEADER + "\n" + "\n".join(rows) + "\n"
    (tmp_path / "GBPUSD.csv").write_bytes(text.encode("utf-16-le"))  # no byte-order mark
    replay = FileReplay(tmp_path / "GBPUSD.csv")
    ticks = drain(replay)
    assert len(ticks) == 31 and (ticks[-1].bid, ticks[-1].ask) == (1.275, 1.2829) and dict(replay.rejected) == {}
    archive = tmp_path / "GBPUSD.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("GBPUSD.csv", text.encode("utf-16"))
    assert drain(FileReplay(archive)) == ticks


def test_interactive_brokers_api_names_and_a_refinement_that_completes_detection(tmp_path: Path) -> None:
    path = tmp_path / "AAPL_BID_ASK_20240102.csv"
    path.write_text("time,tickAttribBidAsk,priceBid,priceAsk,sizeBid,sizeAsk\n"
                    '2024-01-02 14:30:00+00:00,"TickAttribBidAsk(bidPastLow=False, askPastHigh=False)",185.49,185.51,'
                    "300,700\n")
    assert drain(FileReplay(path)) == [Tick("AAPL", ns("2024-01-02T14:30:00+00:00"), "quote", bid=185.49, ask=185.51,
                                            bid_size=300, ask_size=700)]
    # a layout detection cannot finish alone: the refinement names what it lacks
    (tmp_path / "odd.csv").write_text("time,pb,pa\n2024-01-02T14:30:00Z,185.49,185.51\n")
    with pytest.raises(ValueError, match="bid=bp,ask=ap"):
        FileReplay(tmp_path / "odd.csv")
    spec = map_from_options(columns="bid=pb,ask=pa,stream_name=AAPL", detect=True)
    assert [(t.bid, t.ask) for t in drain(FileReplay(tmp_path / "odd.csv", columns=spec))] == [(185.49, 185.51)]


def test_an_event_column_keeps_the_trades_and_a_contract_month_splits_the_streams(tmp_path: Path) -> None:
    (tmp_path / "mixed_event.csv").write_text("ts_event,symbol,event,price,size\n"
                                              "1709908200009225852,MSFT,B,175.01,800\n"
                                              "1709908200009225900,MSFT,X,175.02,100\n"
                                              "1709908200009226000,MSFT,A,175.03,500\n")
    replay = FileReplay(tmp_path / "mixed_event.csv")
    assert [(t.kind, t.price) for t in drain(replay)] == [("trade", 175.02)]  # bid and ask rows were trades
    assert dict(replay.rejected) == {"filtered_out": 2}
    assert any("column \"event\" marks each row's kind (A, B, X)" in note for note in replay.notes)
    (tmp_path / "cl.csv").write_text("Trade Date,Trade Time,Symbol,Contract Month,Price,Volume,Aggressor\n"
                                     "2024-03-08,08:00:02.778,CL,202405,78.65,16,B\n"
                                     "2024-03-08,08:00:02.900,CL,202406,78.50,3,S\n")
    ticks = drain(FileReplay(tmp_path / "cl.csv"))
    assert [(t.stream, t.side) for t in ticks] == [("CL 202405", "buy"), ("CL 202406", "sell")]


def test_fx_ecn_quotes_with_their_deals_read_as_quotes_and_trades(tmp_path: Path) -> None:
    (tmp_path / "ebs.csv").write_text("DateTime,CurrencyPair,BidPrice,BidSize,OfferPrice,OfferSize,Deal,DealSize,"
                                      "DealSide\n"
                                      "2024-03-08T07:00:01.441000Z,EUR/USD,1.09443,2,1.09448,5,1.09448,1,B\n"
                                      "2024-03-08T07:00:02.000000Z,EUR/USD,1.09444,3,1.09449,4,,,\n")
    t0 = ns("2024-03-08T07:00:01.441+00:00")
    assert drain(FileReplay(tmp_path / "ebs.csv")) == [
        Tick("EUR-USD", t0, "quote", bid=1.09443, ask=1.09448, bid_size=2, ask_size=5),
        Tick("EUR-USD", t0, "trade", price=1.09448, size=1, side="buy"),
        Tick("EUR-USD", t0 + 559_000_000, "quote", bid=1.09444, ask=1.09449, bid_size=3, ask_size=4)]


def test_barchart_ondemand_ticks_read_by_their_camel_case_names(tmp_path: Path) -> None:
    """Review242 (finding 7): Barchart's `tradeTimestamp`, `tradePrice`, `tradeSize` were refused as "no time
    column"; its offset is honoured: the Sunday 17:00 CT open is 23:00Z."""
    path = tmp_path / "barchart_ticks.csv"
    path.write_text("symbol,tradeTimestamp,tradingDay,sessionCode,tradePrice,tradeSize\n"
                    "ESZ26,2026-11-29T17:00:00.250-06:00,2026-11-30,G,6850.25,3\n"
                    "ESZ26,2026-11-30T08:30:00.000-06:00,2026-11-30,R,6851.00,7\n")
    replay = FileReplay(path)
    assert [(t.stream, t.ts, t.price, t.size) for t in drain(replay)] == [
        ("ESZ26", ns("2026-11-29T23:00:00.250+00:00"), 6850.25, 3.0),
        ("ESZ26", ns("2026-11-30T14:30:00+00:00"), 6851.0, 7.0)]
    assert "read as ts=tradeTimestamp (datetime), stream=symbol, price=tradePrice, size=tradeSize" in replay.notes[0]


def test_b3_public_trades_file_reads_its_date_and_clock_digits(tmp_path: Path) -> None:
    """B3's NEGOCIOSAVISTA.txt: `;`-separated, a decimal comma, DataNegocio beside HoraFechamento (HHMMSSmmm) in
    Sao Paulo's time (UTC-3): read in that zone by its layout (before: as UTC, 3 hours early), with a note; --tz
    says otherwise."""
    header = ("DataReferencia;CodigoInstrumento;AcaoAtualizacao;PrecoNegocio;QuantidadeNegociada;HoraFechamento;"
              "CodigoIdentificadorNegocio;TipoSessaoPregao;DataNegocio;CodigoParticipanteComprador;"
              "CodigoParticipanteVendedor\n")
    clocks = [f"10{minute:02d}{second:02d}{ms:03d}" for minute, second, ms in
              ((m, (7 * m) % 60, (37 * m) % 1000) for m in range(40))]
    path = tmp_path / "NEGOCIOSAVISTA.txt"
    path.write_text(header + "".join(
        f"2026-11-30;{('PETR4', 'VALE3')[i % 2]};0;{38 + i % 5},{450 + i:03d};{100 * (1 + i % 3)};{clock};{i};1;"
        f"2026-11-30;3;120\n" for i, clock in enumerate(clocks)))
    for columns in (None, {"tz": "America/Sao_Paulo"}):
        replay = FileReplay(path, columns=columns)
        ticks = drain(replay)
        assert len(ticks) == 40 and {t.stream for t in ticks} == {"PETR4", "VALE3"} and not replay.rejected
        # 10:00:00.000 BRT = 13:00:00Z; 10:01:07.037 = 13:01:07.037Z
        assert [(t.ts, t.price, t.size) for t in ticks[:2]] == [(ns("2026-11-30T13:00:00+00:00"), 38.45, 100.0),
                                                                (ns("2026-11-30T13:01:07.037+00:00"), 39.451, 200.0)]
        assert "ts=DataNegocio+HoraFechamento" in "\n".join(replay.notes)
    said = "its times (DataNegocio+HoraFechamento) read as Sao Paulo wall-clock times (America/Sao_Paulo), the " \
        "zone B3 writes them in (--tz ZONE says otherwise)"
    assert f"NEGOCIOSAVISTA.txt: {said}" in FileReplay(path).notes
    assert not any(said in note for note in replay.notes)  # --tz given: no such note
    utc = FileReplay(path, columns={"tz": "UTC"})  # --tz wins
    assert drain(utc)[0].ts == ns("2026-11-30T10:00:00+00:00")


def test_iqfeed_tick_history_without_a_header_reads_as_trades_with_their_quotes(tmp_path: Path) -> None:
    """IQFeed's HTT lines (`Time Stamp,Last,Last Size,Total Volume,Bid,Ask,TickID,Basis,Market Center,Conditions`)
    have no header and were refused; the layout is fixed and its times are US Eastern (08:30 EST = 13:30Z)."""
    path = tmp_path / "ESZ26.csv"
    path.write_text("2026-11-30 08:30:01.550485,6849.75,1,1,6849.50,6849.75,100000,C,43,01\n"
                    "2026-11-30 08:30:02.001000,6850.00,2,3,6849.75,6850.00,100001,O,43,01\n")
    replay = FileReplay(path)
    assert [(t.kind, t.ts, t.price, t.size, t.bid, t.ask) for t in drain(replay)] == [
        ("quote", ns("2026-11-30T13:30:01.550485+00:00"), None, None, 6849.5, 6849.75),
        ("trade", ns("2026-11-30T13:30:01.550485+00:00"), 6849.75, 1.0, None, None),
        ("quote", ns("2026-11-30T13:30:02.001+00:00"), None, None, 6849.75, 6850.0),
        ("trade", ns("2026-11-30T13:30:02.001+00:00"), 6850.0, 2.0, None, None)]
    said = "\n".join(replay.notes)
    assert "read as DTN IQFeed's tick history: a time (US Eastern)" in said and "America/New_York" in said
    assert "the zone TAQ writes them in" not in said


@pytest.mark.parametrize("request_id", ["", "ESZ26,"])
def test_iqfeed_basis_for_last_codes_are_not_taken_for_instruments(tmp_path: Path, request_id: str) -> None:
    """fix298 #3: IQFeed's Basis For Last holds C and O, a trade's basis: the replay cautioned that column
    'basis_for_last' held values that "look like instruments" and suggested --columns stream=basis_for_last, wrong
    for a fixed layout whose fields are all named. Its named fields are left out of that guess."""
    path = tmp_path / "ESZ26.csv"
    total, lines = 0, []
    for i in range(60):
        bid, total = 6849.5 + 0.25 * (i % 4), total + 1 + i % 5
        lines.append(f"{request_id}2026-11-30 08:30:{i:02d}.000000,{bid + 0.25:.2f},{1 + i % 5},{total},{bid:.2f},"
                     f"{bid + 0.25:.2f},{100000 + i},{'CO'[i % 2]},43,01\n")
    path.write_text("".join(lines))
    replay = FileReplay(path)
    assert len(drain(replay)) == 120 and not replay.rejected
    said = "\n".join([*replay.notes, *replay.cautions])
    assert "read as DTN IQFeed's tick history" in said and "stream=basis_for_last" not in said \
        and "look like instruments" not in said, said


# IQFeed's protocol 6 tick lines, written here from the documented field list (DTN's "Historical via TCP/IP" page,
# as IQFeed4j's tick schema spells it out): TimeStamp, Last, LastSize, TotalVolume, Bid, Ask, TickID, BasisForLast,
# TradeMarketCenter, TradeConditions, TradeAggressor (0 invalid, 1 buy, 2 sell, 3 neither), DayCode (day of month)
IQFEED_6 = ("2026-11-30 08:30:01.550485,6849.75,1,1,6849.50,6849.75,100000,C,43,01,1,30\n"
            "2026-11-30 08:30:02.001000,6849.50,2,3,6849.50,6849.75,100001,C,43,01,2,30\n"
            "2026-11-30 08:30:02.500000,6849.75,1,4,6849.50,6849.75,100002,C,43,01,3,30\n"
            "2026-11-30 08:30:03.000000,6849.75,5,9,6849.50,6849.75,100003,O,43,1701,0,30\n")


@pytest.mark.parametrize("request_id", ["", "ESZ26,"])
def test_iqfeed_protocol_6_tick_lines_read_the_aggressor_as_the_trades_side(tmp_path: Path, request_id: str) -> None:
    """Protocol 6's 12 fields (TradeAggressor, DayCode after the older ten), with or without the request's id
    first: refused before ("its layout cannot be guessed"); now read as the older lines, the aggressor as the side
    of the trade (1 buy, 2 sell; 0 and 3 none), in US Eastern time."""
    path = tmp_path / "ESZ26.csv"
    path.write_text("".join(request_id + line + "\n" for line in IQFEED_6.splitlines()))
    replay = FileReplay(path)
    ticks = drain(replay)
    trades = [(t.ts, t.price, t.size, t.side) for t in ticks if t.kind == "trade"]
    assert trades == [(ns("2026-11-30T13:30:01.550485+00:00"), 6849.75, 1.0, "buy"),
                      (ns("2026-11-30T13:30:02.001+00:00"), 6849.5, 2.0, "sell"),
                      (ns("2026-11-30T13:30:02.5+00:00"), 6849.75, 1.0, None),
                      (ns("2026-11-30T13:30:03+00:00"), 6849.75, 5.0, None)]
    assert [(t.bid, t.ask) for t in ticks if t.kind == "quote"] == [(6849.5, 6849.75)] * 4
    assert {t.stream for t in ticks} == {"ESZ26"} and not replay.rejected
    said = "\n".join(replay.notes)
    assert "market center, conditions, trade aggressor (the trade's side, the taker's: 1 buy, 2 sell, 0 and 3 " \
           "none) and day code (not read), protocol 6's" in said, said
    assert ("a request id (not read), a time (US Eastern)" in said) == bool(request_id)


@pytest.mark.parametrize("request_id", ["", "ESZ26,"])
def test_iqfeed_lines_with_an_empty_conditions_field_read_like_those_with_conditions(tmp_path: Path,
                                                                                     request_id: str) -> None:
    """A trade with no conditions leaves TradeConditions empty (`...,C,11,,1,3`): such a file was refused ("its
    layout cannot be guessed: give its 12 columns"); now it reads as the same lines with conditions do."""
    path = tmp_path / "AAPL.csv"
    path.write_text("".join(request_id + line.replace(",43,01,", ",43,,").replace(",43,1701,", ",43,,") + "\n"
                            for line in IQFEED_6.splitlines()))
    replay = FileReplay(path)
    trades = [(t.ts, t.side) for t in drain(replay) if t.kind == "trade"]
    assert trades == [(ns("2026-11-30T13:30:01.550485+00:00"), "buy"), (ns("2026-11-30T13:30:02.001+00:00"), "sell"),
                      (ns("2026-11-30T13:30:02.5+00:00"), None), (ns("2026-11-30T13:30:03+00:00"), None)]
    assert not replay.rejected and "protocol 6's" in "\n".join(replay.notes)


@pytest.mark.parametrize("before", ["", "LH,", "ESZ26,LH,", "ESZ26,"])
def test_iqfeed_lines_ending_with_a_comma_an_lh_mark_and_endmsg_read_as_plain_lines(tmp_path: Path,
                                                                                   before: str) -> None:
    """fix280 #6: IQFeed ends each line with a comma, protocol 6 writes `LH` before a history line's fields, and an
    answer ends with `!ENDMSG!`: such a file was refused ("its layout cannot be guessed: give its 13 columns").
    Now its ticks read as the plain lines' do; the empty last field and `LH` are not read, and the end line is
    left out as filtered_out (counted, no error)."""
    plain = tmp_path / "plain" / "ESZ26.csv"
    plain.parent.mkdir()
    plain.write_text(IQFEED_6)
    path = tmp_path / "ESZ26.csv"
    path.write_text("".join(before + line + ",\n" for line in IQFEED_6.splitlines()) +
                    before.replace("LH,", "") + "!ENDMSG!,\n")
    replay = FileReplay(path)
    assert drain(replay) == drain(FileReplay(plain)) != []
    assert replay.rejected == {"filtered_out": 1}
    assert '!ENDMSG!"), no tick: not an error' in replay.rejected.examples["filtered_out"]
    said = "\n".join(replay.notes)
    assert "each line ends with a comma, its empty last field not read" in said, said
    assert ("protocol 6's LH (not read)" in said) == ("LH" in before)


@pytest.mark.parametrize("before", ["", "LH,", "ESZ26,LH,", "ESZ26,"])
def test_iqfeed_endmsg_between_answers_joined_in_one_file_is_left_out_not_rejected(tmp_path: Path,
                                                                                   before: str) -> None:
    """fix292 #2: a file of two answers joined (two requests' lines saved one after the other) holds `!ENDMSG!`
    after each; the first, mid-file, was rejected as missing_field ('"!ENDMSG!" is not a time the map reads').
    Each is left out as filtered_out, counted, no error."""
    lines = ["".join(before + line + ",\n" for line in IQFEED_6.splitlines()[i:i + 2]) for i in (0, 2)]
    end = before.replace("LH,", "") + "!ENDMSG!,\n"
    path = tmp_path / "ESZ26.csv"
    path.write_text(lines[0] + end + lines[1] + end)
    plain = tmp_path / "plain" / "ESZ26.csv"
    plain.parent.mkdir()
    plain.write_text(IQFEED_6)
    replay = FileReplay(path)
    assert drain(replay) == drain(FileReplay(plain)) != []
    assert replay.rejected == {"filtered_out": 2}
    assert replay.rejected.examples["filtered_out"].startswith(f"{path} line 3: filtered_out: IQFeed's end of an "
                                                               f'answer ("!ENDMSG!"), no tick: not an error')


# DTN IQFeed's live Level 1 feed (port 5009, protocol 6.2) as a capture saves it: the system messages, the update
# field list, a summary (P) per symbol, then updates (Q) as trades print and quotes change; each line ends with
# the comma IQFeed ends every message with
IQFEED_LEVEL1 = (
    "S,SERVER CONNECTED\n"
    "S,CURRENT PROTOCOL,6.2\n"
    "S,CURRENT UPDATE FIELDNAMES,Symbol,Most Recent Trade,Most Recent Trade Size,Most Recent Trade Time,"
    "Most Recent Trade Market Center,Total Volume,Bid,Bid Size,Ask,Ask Size,Open,High,Low,Close,Message Contents,"
    "Most Recent Trade Conditions\n"
    "T,20261130 08:30:01\n"
    "P,@ESZ26,6849.75,1,08:30:01.550485,43,100000,6849.50,12,6849.75,8,6840.00,6855.25,6838.50,6845.00,,01,\n"
    "Q,@ESZ26,6849.75,2,08:30:01.612301,43,100002,6849.50,11,6849.75,8,6840.00,6855.25,6838.50,6845.00,Cba,01,\n"
    "Q,@ESZ26,6849.75,2,08:30:01.612301,43,100002,6849.50,14,6849.75,8,6840.00,6855.25,6838.50,6845.00,b,01,\n"
    "T,20261130 08:30:02\n"
    "Q,@ESZ26,6850.00,1,08:30:02.004117,43,100003,6849.75,3,6850.00,9,6840.00,6855.25,6838.50,6845.00,Cba,01,\n")


LEVEL1_TICKS = [  # what IQFEED_LEVEL1 replays: the summary sets the state; a repeated trade is not a trade again
    ("quote", ns("2026-11-30T13:30:01.612301+00:00"), None, None, 6849.5, 6849.75, 11.0, 8.0),
    ("trade", ns("2026-11-30T13:30:01.612301+00:00"), 6849.75, 2.0, None, None, None, None),
    ("quote", ns("2026-11-30T13:30:01.612301+00:00"), None, None, 6849.5, 6849.75, 14.0, 8.0),
    ("quote", ns("2026-11-30T13:30:02.004117+00:00"), None, None, 6849.75, 6850.0, 3.0, 9.0),
    ("trade", ns("2026-11-30T13:30:02.004117+00:00"), 6850.0, 1.0, None, None, None, None)]


def _level1_ticks(replay: FileReplay) -> list[tuple]:
    return [(t.kind, t.ts, t.price, t.size, t.bid, t.ask, t.bid_size, t.ask_size) for t in drain(replay)]


@pytest.mark.parametrize("name", ["ESZ26_2026-11-30-level1.txt", "esz26_2026-11-30.csv", "2026-11-30.csv.gz"])
def test_iqfeed_live_level1_messages_replay_as_the_quotes_and_trades_they_changed(tmp_path: Path, name: str) -> None:
    """fix320 #1 (was refused, fix302): a capture of IQFeed's live Level 1 messages, fields per `S,CURRENT UPDATE
    FIELDNAMES`, replays as ticks: a `Q,` update that changes the bid/ask or their sizes is a quote, one whose
    Message Contents flags a trade (C) is that trade, the `P,` summary only sets the state (counted filtered_out,
    naming its line), and the last trade repeated beside a changed bid size (line 7) is not replayed again. Times
    of day are US Eastern on the day the file's name holds (08:30 EST = 13:30Z)."""
    import gzip

    path = tmp_path / name
    data = IQFEED_LEVEL1.encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    replay = FileReplay(path)
    assert _level1_ticks(replay) == LEVEL1_TICKS
    assert {t.stream for t in drain(FileReplay(path))} == {"@ESZ26"}
    assert replay.rejected.examples["filtered_out"].startswith(f"{path} line 5: filtered_out: an IQFeed summary")
    assert sum(replay.rejected.values()) == 1
    said = "\n".join(replay.notes)
    assert "read as DTN IQFeed live Level 1 messages by its field list: 3 quote(s)" in said and ZONE in said


def test_iqfeed_level1_without_a_field_list_reads_the_default_fields_and_trades_by_their_change(
        tmp_path: Path) -> None:
    """Without a field-names line the updates are IQFeed's default field set; with Message Contents left empty a
    new trade is known by its Most Recent Trade fields changing, and the same fields again beside a new bid are no
    second trade. Without a date in the name the replay is refused saying how to give it; --columns date= reads."""
    lines = [line.replace(",Cba,", ",,").replace(",b,", ",,") for line in IQFEED_LEVEL1.splitlines()
             if not line.startswith(("S,", "T,"))]  # (no `T,` lines either: their date would give the day)
    lines.insert(1, lines[1])  # the first `Q,` (a new trade and quote after the summary), twice: no second tick
    path = tmp_path / "ESZ26-level1.txt"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"times of day in US Eastern, and nothing gives their date: no `T,YYYYMMDD "
                                         r"HH:MM:SS` time stamp line.*--columns date=YYYY-MM-DD"):
        FileReplay(path)
    replay = FileReplay(path, columns=map_from_options(columns="date=2026-11-30", detect=True))
    assert _level1_ticks(replay) == LEVEL1_TICKS
    assert "by IQFeed's default fields (no `S,CURRENT UPDATE FIELDNAMES` line)" in "\n".join(replay.notes)


def test_iqfeed_level1_bid_and_ask_times_stamp_quotes_and_an_unreadable_line_is_named(tmp_path: Path) -> None:
    """A field list with Bid Time and Ask Time stamps a quote alone at the later of them; a line of the wrong field
    count, or whose price is no number, is rejected naming its line, and the lines after it still read."""
    path = tmp_path / "NQ_2026-11-30.csv"
    path.write_text(
        "S,CURRENT UPDATE FIELDNAMES,Symbol,Most Recent Trade,Most Recent Trade Size,Most Recent Trade Time,"
        "Bid,Bid Size,Bid Time,Ask,Ask Size,Ask Time,Message Contents,\n"
        "P,@NQZ26,21000.25,1,09:30:00.000100,21000.00,5,09:30:00.000200,21000.25,4,09:30:00.000300,,\n"
        "Q,@NQZ26,21000.25,1,09:30:00.000100,21000.00,6,09:30:01.500000,21000.25,4,09:30:00.000300,b,\n"
        "Q,@NQZ26,21000.25,1,09:30:00.000100,21000.00,6,09:30:01.500000,\n"
        "Q,@NQZ26,abc,1,09:30:02.000000,21000.00,6,09:30:01.500000,21000.25,4,09:30:00.000300,C,\n"
        "Q,@NQZ26,21000.50,2,09:30:02.250000,21000.25,3,09:30:02.250000,21000.50,7,09:30:02.250000,Cba,\n")
    replay = FileReplay(path)
    assert [(t.kind, t.ts, t.price, t.bid, t.bid_size) for t in drain(replay)] == [
        ("quote", ns("2026-11-30T14:30:01.5+00:00"), None, 21000.0, 6.0),
        ("quote", ns("2026-11-30T14:30:02.25+00:00"), None, 21000.25, 3.0),
        ("trade", ns("2026-11-30T14:30:02.25+00:00"), 21000.5, None, None)]
    examples = replay.rejected.examples
    assert examples["missing_field"].startswith(f"{path} line 4: missing_field: a `Q,` line of 7 fields, where its "
                                                f"field list names 11 (given)"), examples
    assert examples["wrong_type"].startswith(f"{path} line 5: wrong_type: a `Q,` line whose Most Recent Trade "
                                             f'"abc" is not a number'), examples


def test_iqfeed_level1_symbols_keep_their_own_state_and_a_log_capture_reads(tmp_path: Path) -> None:
    """Two symbols' messages interleaved: each update is compared with its own symbol's last state (NQ's summary
    does not make ES's next update a change), and a quote without a time field of its own is stamped at the
    latest time the capture has shown (ES's summary, 08:30:01.550485), not NQ's older last trade."""
    lines = IQFEED_LEVEL1.splitlines(keepends=True)
    nq = ("P,@NQZ26,21000.25,1,08:29:59.000001,43,5000,21000.00,5,21000.25,4,0,0,0,0,,01,\n"
          "Q,@NQZ26,21000.25,1,08:29:59.000001,43,5000,21000.00,6,21000.25,4,0,0,0,0,b,01,\n")
    path = tmp_path / "capture_2026-11-30.log"
    path.write_text("".join(lines[:5]) + nq + "".join(lines[5:]))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.stream, t.kind, t.ts, t.bid_size) for t in ticks if t.stream == "@NQZ26"] == [
        ("@NQZ26", "quote", ns("2026-11-30T13:30:01.550485+00:00"), 6.0)]
    assert [(t.kind, t.ts, t.price, t.size, t.bid, t.ask, t.bid_size, t.ask_size) for t in ticks
            if t.stream == "@ESZ26"] == LEVEL1_TICKS
    assert sum(replay.rejected.values()) == 2  # the two summaries, filtered_out


def test_iqfeed_level1_capture_running_past_midnight_counts_on_into_the_next_day(tmp_path: Path) -> None:
    """A futures session captured from the evening: a trade at 00:00:00.1 after one at 23:59:59.9 is the next day's
    (not the first day's first tick), and the earlier trade repeated beside a later quote stays on its own day."""
    path = tmp_path / "ESZ26_2026-11-30.txt"
    path.write_text(
        "Q,@ESZ26,6849.75,2,23:59:59.900000,43,100002,6849.50,11,6849.75,8,0,0,0,0,Cba,01,\n"
        "Q,@ESZ26,6850.75,2,00:00:00.100000,43,100004,6849.50,11,6849.75,8,0,0,0,0,C,01,\n"
        "Q,@ESZ26,6850.75,2,00:00:00.100000,43,100004,6849.75,11,6850.75,8,0,0,0,0,ba,01,\n")
    assert [(t.kind, t.ts, t.price) for t in drain(FileReplay(path))] == [
        ("quote", ns("2026-12-01T04:59:59.9+00:00"), None), ("trade", ns("2026-12-01T04:59:59.9+00:00"), 6849.75),
        ("trade", ns("2026-12-01T05:00:00.1+00:00"), 6850.75), ("quote", ns("2026-12-01T05:00:00.1+00:00"), None)]


def test_iqfeed_level1_capture_backtests_through_the_cli(tmp_path: Path, capsys) -> None:
    """`flashtick backtest` of a capture: exit 0, its ticks scored; without a day it exits 2 saying how to give it."""
    path = tmp_path / "ESZ26_2026-11-30.txt"
    path.write_text(IQFEED_LEVEL1)
    out = tmp_path / "a.parquet"
    assert main(["backtest", str(path), "--out", str(out), "--quiet"]) == 0
    assert out.exists()
    undated = tmp_path / "ESZ26.txt"  # no date in its name, nor `T,` lines (whose date would give the day)
    undated.write_text("".join(line for line in IQFEED_LEVEL1.splitlines(keepends=True) if not line.startswith("T,")))
    assert main(["backtest", str(undated), "--out", str(tmp_path / "b.parquet"), "--quiet"]) == 2
    assert "--columns date=YYYY-MM-DD" in capsys.readouterr().err
    dated = tmp_path / "c.parquet"
    assert main(["backtest", str(undated), "--out", str(dated), "--columns", "date=2026-11-30", "--quiet"]) == 0
    assert dated.exists()


def test_iqfeed_level1_first_sight_of_a_symbol_sets_its_state_unless_the_feed_says_a_trade(tmp_path: Path) -> None:
    """fix327 #4: a symbol's first `Q,` update with no `P,` before it counted its last trade (printed before the
    capture began) as a new trade. The first sight now sets the state only, unless its Message Contents says what
    happened then: C/E/O a trade, b/a a quote change. Without Message Contents it makes no tick at all."""
    header = "S,CURRENT UPDATE FIELDNAMES,Symbol,Most Recent Trade,Most Recent Trade Size,Most Recent Trade Time," \
             "Bid,Bid Size,Ask,Ask Size,Message Contents\n"
    path = tmp_path / "CL_2026-11-30.txt"
    path.write_text(header +
                    "Q,@CLF27,70.10,3,08:00:00.100000,70.09,5,70.11,4,\n"  # first sight, no contents: state only
                    "Q,@CLF27,70.10,3,08:00:00.100000,70.09,6,70.11,4,\n"  # bid size changed: a quote
                    "Q,@NGF27,3.50,1,08:00:01.000000,3.49,2,3.51,2,C\n"  # first sight, a trade said: the trade
                    "Q,@HOF27,2.40,1,07:59:00.000000,2.39,2,2.41,2,ba\n")  # first sight, a quote said: the quote
    ticks = [(t.stream, t.kind, t.price, t.bid_size) for t in drain(FileReplay(path))]
    assert ticks == [("@CLF27", "quote", None, 6.0), ("@NGF27", "trade", 3.5, None), ("@HOF27", "quote", None, 2.0)]


def test_iqfeed_level1_day_from_its_t_lines_when_its_name_gives_none(tmp_path: Path) -> None:
    """fix327 #4: a capture's `T,YYYYMMDD HH:MM:SS` lines give its day when its name (and folders) hold none; where
    a name holds another, the feed's clock wins (review336 #11: a session file named by its trade date), with a note
    naming both and the --date that reads the name's day."""
    undated = tmp_path / "ESZ26-level1.txt"
    undated.write_text(IQFEED_LEVEL1)
    replay = FileReplay(undated)
    assert _level1_ticks(replay) == LEVEL1_TICKS
    assert any(note.startswith(f"{undated.name}: the day is 2026-11-30, from its first `T,` time stamp line")
               for note in replay.notes), replay.notes
    named = tmp_path / "ESZ26_2026-11-29.txt"
    named.write_text(IQFEED_LEVEL1)
    replay = FileReplay(named)
    assert [t.ts for t in drain(replay)][0] == ns("2026-11-30T13:30:01.612301+00:00")
    assert any("the day is 2026-11-30, from its first `T,` time stamp line (the feed's clock), not its name's "
               "2026-11-29" in note and "--date 2026-11-29" in note for note in replay.notes), replay.notes
    on_name = FileReplay(named, columns=map_from_options(columns="date=2026-11-29", detect=True))
    assert [t.ts for t in drain(on_name)][0] == ns("2026-11-29T13:30:01.612301+00:00")
    late = tmp_path / "ES-evening.txt"  # updates before midnight, its first `T,` line after it: the day before
    late.write_text("Q,@ESZ26,6849.75,2,23:59:59.900000,43,100002,6849.50,11,6849.75,8,0,0,0,0,Cba,01,\n"
                    "T,20261201 00:00:00\n"
                    "Q,@ESZ26,6850.75,2,00:00:00.100000,43,100004,6849.50,11,6849.75,8,0,0,0,0,C,01,\n")
    assert [t.ts for t in drain(FileReplay(late))] == [ns("2026-12-01T04:59:59.9+00:00")] * 2 + [
        ns("2026-12-01T05:00:00.1+00:00")]
