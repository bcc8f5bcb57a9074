"""Vendor files in the exact layouts vendors publish them, read as a new user would: first with no options,
then with the options a message points to. Binance public data (spot trades and aggTrades without a header,
ms and the 2025 us times; futures trades and bookTicker with one), Tardis.dev trades and quotes, Coinbase and
Kraken trade exports, HistData and TrueFX FX ticks, a Dukascopy export, LOBSTER messages, a TAQ-like trades
file, Polygon flat files, Databento CSV (pretty and fixed-point prices), a European file with decimal commas,
Tardis.dev book snapshots and an exchange's settlement file.
Every fixture is a few dozen rows written here, from code, into tmp_path."""

from __future__ import annotations

import gzip
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from conftest import drain, ns, shared_tiny_tick_checkpoint
from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from connectors.ticks import Tick
from engine.service.cli import main

N = 24
T0 = 1_704_153_600  # 2024-01-02 00:00:00 UTC, in s
US_OPEN = 1_717_421_400_000_000_000  # 2024-06-03 13:30 UTC (09:30 New York), in ns
MS, US = 1_000_000, 1_000
QUERIES = "queries:\n  - {name: dir5, streams: ['*'], question: direction_5, kind: choice, trigger: {ticks: 4}}\n"


def binance_trades(path: Path, t0: int, step: int, price: float) -> Path:
    """data.binance.vision spot trades: no header; id,price,qty,quoteQty,time,isBuyerMaker,isBestMatch."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(
        f"{3580617658 + i},{price + 0.01 * (i % 5):.8f},{0.0455 + i / 1000:.8f},"
        f"{(price + 0.01 * (i % 5)) * (0.0455 + i / 1000):.8f},{t0 + step * i},{'True' if i % 3 == 0 else 'False'},"
        f"True\n" for i in range(N)))
    return path


def test_binance_public_spot_trades_ms_and_us_without_options(tmp_path: Path) -> None:
    eth = binance_trades(tmp_path / "ETHUSDT-trades-2024-01-02.csv", T0 * 1000, 37, 2352.61)
    btc = binance_trades(tmp_path / "BTCUSDT-trades-2025-03-03.csv", 1_740_960_000_123_456, 37_000, 86000.0)
    replay = FileReplay([eth, btc])
    ticks = drain(replay)
    assert ticks[0] == Tick("ETHUSDT", T0 * 10**9, "trade", price=2352.61, size=0.0455, side="sell")
    assert ticks[1] == Tick("ETHUSDT", (T0 * 1000 + 37) * MS, "trade", price=2352.62, size=0.0465, side="buy")
    assert ticks[N] == Tick("BTCUSDT", 1_740_960_000_123_456 * US, "trade", price=86000.0, size=0.0455, side="sell")
    assert ticks[N + 1].ts == (1_740_960_000_123_456 + 37_000) * US  # us since 2025: not read as ms
    assert dict(replay.rejected) == {} and len(ticks) == 2 * N
    assert replay.notes[0].startswith("ETHUSDT-trades-2024-01-02.csv: no header row; read as preset "
                                      "binance-public-trades (--csv-names id,price,qty,quote_qty,time,is_buyer_maker,"
                                      "is_best_match): ts=time (ms), stream_name=ETHUSDT")
    assert "side=is_buyer_maker (a buyer-maker flag: true = sell)" in replay.notes[0]
    assert "ts=time (us)" in replay.notes[2]
    assert 'stream ETHUSDT, from the file name "ETHUSDT-trades-2024-01-02"' in replay.notes[1]
    # the preset by name reads the same, and a name that holds no symbol keeps the file name as the stream
    by_name = binance_trades(tmp_path / "dump" / "trades.csv", T0 * 1000, 37, 2352.61)
    assert [t.stream for t in drain(FileReplay(by_name, columns="binance-public-trades"))][:1] == ["trades"]


def test_binance_aggtrades_and_futures_files_with_a_header(tmp_path: Path) -> None:
    (tmp_path / "ETHUSDT-aggTrades-2024-01-02.csv").write_text("".join(
        f"{812345678 + i},{2352.61 + 0.01 * (i % 5):.8f},{0.5 + i / 100:.8f},{3580617658 + 2 * i},"
        f"{3580617659 + 2 * i},{T0 * 1000 + 41 * i},{'True' if i % 2 else 'False'},True\n" for i in range(N)))
    folder = tmp_path / "binance-ethusdt-perp"
    folder.mkdir()
    (folder / "trades.csv").write_text("id,price,qty,quote_qty,time,is_buyer_maker\n" + "".join(
        f"{4012345678 + i},{2351.9 + 0.1 * (i % 4):.2f},{0.012 * (1 + i % 3):.3f},1.0,{T0 * 1000 + 25 * i},"
        f"{'true' if i % 2 else 'false'}\n" for i in range(N)))
    (tmp_path / "BTCUSDT-bookTicker-2024-01-02.csv").write_text(
        "update_id,best_bid_price,best_bid_qty,best_ask_price,best_ask_qty,transaction_time,event_time\n" + "".join(
            f"{3912345678901 + i},{42283.5 + 0.1 * (i % 3):.1f},{1.25 + i},{42283.6 + 0.1 * (i % 3):.1f},{0.5 + i},"
            f"{T0 * 1000 + 10 * i},{T0 * 1000 + 10 * i + 2}\n" for i in range(N)))
    agg = drain(FileReplay(tmp_path / "ETHUSDT-aggTrades-2024-01-02.csv"))
    assert agg[1] == Tick("ETHUSDT", (T0 * 1000 + 41) * MS, "trade", price=2352.62, size=0.51, side="sell")
    replay = FileReplay(folder / "trades.csv")
    futures = drain(replay)
    # the perpetual, named apart from the spot pair (a folder of spot trades gives ETHUSDT)
    assert futures[:2] == [Tick("ETHUSDT_PERP", T0 * 10**9, "trade", price=2351.9, size=0.012, side="buy"),
                           Tick("ETHUSDT_PERP", (T0 * 1000 + 25) * MS, "trade", price=2352.0, size=0.024,
                                side="sell")]
    assert replay.notes[1] == ('trades.csv: stream ETHUSDT_PERP, from the folder name "binance-ethusdt-perp" '
                               "(--columns stream_name=NAME to name it otherwise)")
    book = drain(FileReplay(tmp_path / "BTCUSDT-bookTicker-2024-01-02.csv"))
    # transaction_time, as the header-less preset reads it (and aggTrades' transact_time), not event_time
    assert book[0] == Tick("BTCUSDT_PERP", T0 * 1000 * MS, "quote", bid=42283.5, ask=42283.6, bid_size=1.25,
                           ask_size=0.5)


def test_binance_capture_presets_take_the_instruments_name(tmp_path: Path) -> None:
    rows = {"local_ts_ns": [T0 * 10**9 + i for i in range(3)], "price": [2352.5] * 3, "qty": [0.1] * 3,
            "aggressor_side": ["buy", "sell", "buy"]}
    folder = tmp_path / "binance-ethusdt-spot"
    folder.mkdir()
    pl.DataFrame(rows).write_csv(folder / "trades.csv")
    pl.DataFrame(rows | {"symbol": ["SOLUSDT"] * 3}).write_csv(tmp_path / "mixed.csv")
    pl.DataFrame(rows).write_csv(tmp_path / "capture.csv")
    for path, stream, note in ((folder / "trades.csv", "ETHUSDT", 'from the folder name "binance-ethusdt-spot"'),
                               (tmp_path / "mixed.csv", "SOLUSDT", 'streams from column "symbol"'),
                               (tmp_path / "capture.csv", "BTCUSDT", "--preset binance-trades's default")):
        for columns in (None, "binance-trades"):  # detected from its columns, or the preset by name
            expected, said = stream, note
            if columns is None and path.name == "capture.csv":
                # detected, not given: not the preset's BTCUSDT, which ETHUSDT data was answered as (review 109)
                expected, said = tmp_path.name, f"capture.csv: stream {tmp_path.name}, the name of its folder"
            replay = FileReplay(path, columns=columns)
            assert {t.stream for t in drain(replay)} == {expected}, (path, columns)
            assert any(said in n for n in replay.notes), replay.notes
    named = FileReplay(folder / "trades.csv", columns={"preset": "binance-trades", "stream": "ETH-PERP"})
    assert {t.stream for t in drain(named)} == {"ETH-PERP"} and named.notes == []


def test_tardis_trades_and_quotes(tmp_path: Path) -> None:
    with gzip.open(tmp_path / "binance_trades_2024-01-02_ETHUSDT.csv.gz", "wt") as f:
        f.write("exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n" + "".join(
            f"binance,ETHUSDT,{T0 * 10**6 + 1000 * i + 7},{T0 * 10**6 + 1000 * i + 1500},{3580617658 + i},"
            f"{('buy', 'sell', 'unknown')[i % 3]},{2352.61 + 0.01 * (i % 4):.2f},{0.1 + i / 100:.4f}\n"
            for i in range(N)))
    (tmp_path / "binance_quotes_2024-01-02_ETHUSDT.csv").write_text(
        "exchange,symbol,timestamp,local_timestamp,ask_amount,ask_price,bid_price,bid_amount\n" + "".join(
            f"binance,ETHUSDT,{T0 * 10**6 + 800 * i},{T0 * 10**6 + 800 * i + 900},{1.5 + i},"
            f"{2352.62 + 0.01 * (i % 3):.2f},{2352.61 + 0.01 * (i % 3):.2f},{2.5 + i}\n" for i in range(N)))
    replay = FileReplay([tmp_path / "binance_trades_2024-01-02_ETHUSDT.csv.gz",
                         tmp_path / "binance_quotes_2024-01-02_ETHUSDT.csv"])
    ticks = drain(replay)
    trades = [t for t in ticks if t.kind == "trade"]
    assert dict(replay.rejected) == {} and len(trades) == N  # 'unknown' sides are no side, not rejected rows
    assert [t.side for t in trades[:3]] == ["buy", "sell", None]
    assert trades[0] == Tick("ETHUSDT", (T0 * 10**6 + 7) * US, "trade", price=2352.61, size=0.1, side="buy")
    quote = next(t for t in ticks if t.kind == "quote")
    assert quote == Tick("ETHUSDT", T0 * 10**9, "quote", bid=2352.61, ask=2352.62, bid_size=2.5, ask_size=1.5)


def test_coinbase_and_kraken_trade_exports(tmp_path: Path) -> None:
    (tmp_path / "coinbase-trades.csv").write_text("trade_id,product_id,price,size,time,side\n" + "".join(
        f"{583219000 + i},BTC-USD,{42290.12 + 0.01 * (i % 7):.2f},{0.0012 + i / 10000:.8f},"
        f"2024-01-02T00:00:{i:02d}.{123456 + i}Z,{'BUY' if i % 2 else 'SELL'}\n" for i in range(N)))
    (tmp_path / "XBTUSD.csv").write_text("".join(
        f"{T0 + i},{42290.1 + 0.1 * (i % 7):.1f},{0.0123 + i / 1000:.8f}\n" for i in range(N)))
    coinbase = drain(FileReplay(tmp_path / "coinbase-trades.csv"))
    # its name says Coinbase: `side` (BUY) is the maker's, so the taker sold (fix160)
    assert coinbase[1] == Tick("BTC-USD", T0 * 10**9 + 1_123_457_000, "trade", price=42290.13, size=0.0013,
                               side="sell")
    replay = FileReplay(tmp_path / "XBTUSD.csv")
    kraken = drain(replay)
    assert kraken[1] == Tick("XBTUSD", (T0 + 1) * 10**9, "trade", price=42290.2, size=0.0133)
    assert replay.notes == ["XBTUSD.csv: no header row; read as a time and two numbers (--csv-names time,price,size)"
                            ": ts=time (s), stream_name=XBTUSD, price=price, size=size"]
    # Kraken's trade history with a header: `buy/sell` is the taker's side, b or s
    (tmp_path / "kraken_XBTUSD.csv").write_text("price,volume,time,buy/sell,market/limit,miscellaneous\n" + "".join(
        f"{42290.1 + 0.1 * (i % 7):.1f},{0.0123 + i / 1000:.8f},{T0 + i}.{1000 + i},{'bs'[i % 2]},l,\n"
        for i in range(N)))
    # Bitstamp's transactions: `type` 0 is a buy, 1 a sell (the taker's)
    (tmp_path / "bitstamp_btcusd.csv").write_text("date,tid,price,type,amount\n" + "".join(
        f"{T0 + i},{300000 + i},{42290 + i % 7},{i % 2},{0.0123 + i / 1000:.8f}\n" for i in range(N)))
    bitstamp = drain(FileReplay(tmp_path / "bitstamp_btcusd.csv"))
    assert bitstamp[:2] == [Tick("BTCUSD", T0 * 10**9, "trade", price=42290.0, size=0.0123, side="buy"),
                            Tick("BTCUSD", (T0 + 1) * 10**9, "trade", price=42291.0, size=0.0133, side="sell")]
    headed = drain(FileReplay(tmp_path / "kraken_XBTUSD.csv"))
    assert [t.side for t in headed[:2]] == ["buy",
                                            "sell"] and headed[1].price == 42290.2 and headed[1].stream == "XBTUSD"


def test_histdata_and_truefx_fx_ticks(tmp_path: Path, capsys) -> None:
    for sep in (",", ";"):  # HistData's ticks are comma-separated, its M1 bars semicolon: either reads
        (tmp_path / f"DAT_ASCII_EURUSD_T_20240{1 if sep == ',' else 2}.csv").write_text("".join(
            f"20240102 170000{123 + 37 * i:03d}{sep}{1.10427 + 0.00001 * (i % 4):.6f}{sep}"
            f"{1.10433 + 0.00001 * (i % 4):.6f}{sep}0\n" for i in range(N)))
    (tmp_path / "EURUSD-2024-01.csv").write_text("".join(
        f"EUR/USD,20240102 00:00:{i:02d}.{100 + i:03d},{1.1034 + 0.00001 * (i % 3):.5f},"
        f"{1.1035 + 0.00001 * (i % 3):.5f}\n" for i in range(N)))
    replay = FileReplay([tmp_path / "DAT_ASCII_EURUSD_T_202401.csv", tmp_path / "DAT_ASCII_EURUSD_T_202402.csv"])
    hist = drain(replay)
    # HistData's times are EST without summer time, read in that zone by default; --tz says otherwise
    assert hist[0] == Tick("EURUSD", ns("2024-01-02T22:00:00.123+00:00"), "quote", bid=1.10427, ask=1.10433)
    assert hist[0] == hist[1] and len(hist) == 2 * N
    assert any("its times read in Etc/GMT+5 (EST all year" in n for n in replay.notes)
    utc = drain(FileReplay(tmp_path / "DAT_ASCII_EURUSD_T_202401.csv", columns={"tz": "UTC"}))
    assert utc[0].ts == ns("2024-01-02T17:00:00.123+00:00")
    (tmp_path / "q.yaml").write_text(QUERIES)
    code = main(["feed", "replay", str(tmp_path / "DAT_ASCII_EURUSD_T_202401.csv"), "--tz", "Etc/GMT+5",
                 "--ts-unit", "ms", "--endpoint", "tcp://127.0.0.1:1"])
    assert code == 2 and "tz applies to ts_unit datetime" in capsys.readouterr().err
    truefx = FileReplay(tmp_path / "EURUSD-2024-01.csv")
    ticks = drain(truefx)
    assert ticks[1] == Tick("EUR-USD", ns("2024-01-02T00:00:01.101+00:00"), "quote", bid=1.10341, ask=1.10351)
    assert "(--csv-names symbol,time,bid,ask): ts=time (datetime, %Y%m%d %H:%M:%S%.f), stream=symbol" in \
        truefx.notes[0]


def test_dukascopy_export_with_ask_before_bid(tmp_path: Path) -> None:
    (tmp_path / "EURUSD_Ticks_02.01.2024-02.01.2024.csv").write_text(
        "Gmt time,Ask,Bid,AskVolume,BidVolume\n" + "".join(
            f"02.01.2024 00:00:{i:02d}.{250 + i:03d},{1.1035 + 0.00001 * (i % 3):.5f},"
            f"{1.1034 + 0.00001 * (i % 3):.5f},{1.5 + i / 10:.2f},2.25\n" for i in range(N)))
    replay = FileReplay(tmp_path / "EURUSD_Ticks_02.01.2024-02.01.2024.csv")
    ticks = drain(replay)
    assert ticks[0] == Tick("EURUSD", ns("2024-01-02T00:00:00.250+00:00"), "quote", bid=1.1034, ask=1.1035,
                            bid_size=2.25, ask_size=1.5)
    assert "ts=Gmt time (datetime, %d.%m.%Y %H:%M:%S%.f)" in replay.notes[0]
    assert not any("UTC offset" in n for n in replay.notes)  # GMT by its name
    # --preset dukascopy reads its own export as well as the converted layout it names (timestamp_utc, bid, ...)
    preset = FileReplay(tmp_path / "EURUSD_Ticks_02.01.2024-02.01.2024.csv", columns="dukascopy")
    assert drain(preset) == ticks
    assert any("--preset dukascopy read in its vendor's other layout: ts=Gmt time" in n for n in preset.notes)
    # a preset whose columns the file lacks, where detection reads it: the way that works is named
    with pytest.raises(ValueError, match=r'the column map needs "local_ts_ns", .*; drop --preset binance-trades: '
                                         r"detected as ts=Gmt time \(datetime, %d.%m.%Y %H:%M:%S%.f\), stream_name="
                                         r"EURUSD, bid=Bid, ask=Ask"):
        FileReplay(tmp_path / "EURUSD_Ticks_02.01.2024-02.01.2024.csv", columns="binance-trades")
    # header-less (as some downloaders write it), ask first: the lower column is the bid
    (tmp_path / "gbpusd.csv").write_text("".join(f"2024-01-02 00:00:0{i}.5,1.2712{i},1.2710{i},0.75,0.75\n"
                                                 for i in range(5)))
    (tick, *_) = drain(FileReplay(tmp_path / "gbpusd.csv"))
    assert (tick.stream, tick.bid, tick.ask) == ("GBPUSD", 1.27100, 1.27120)


def test_lobster_messages_without_the_preset_are_refused_with_it_named(tmp_path: Path) -> None:
    path = tmp_path / "AAPL_2012-06-21_34200000_57600000_message_1.csv"
    path.write_text("".join(f"{34200.004241176 + i * 0.25:.9f},{(1, 4, 3, 5)[i % 4]},{16113575 + i},{18 + i},"
                            f"{5853300 + 100 * (i % 3)},{1 if i % 8 < 4 else -1}\n" for i in range(N)))
    with pytest.raises(ValueError, match=r"first line is data, not a header \(34200\.004241176,1,16113575,18,5853300,1"
                                         r"\): it looks like a LOBSTER message file .*--preset lobster-messages"):
        FileReplay(path)  # the preset is tested in test_vendor_files_maker_sides.py
    with pytest.raises(ValueError, match=r'needs "time", "price" and "size".*first line is data, not a header: give '
                                         r"its columns"):
        FileReplay(path, columns={"ts": "time", "price": "price", "size": "size"})
    # a map by hand without the preset's keep filter: prices are dollars x 10000; every message reads as a trade
    replay = FileReplay(path, columns={"names": ("time", "type", "order_id", "size", "price", "direction"),
                                       "ts": "time", "ts_unit": "seconds_after_midnight", "date": "2012-06-21",
                                       "tz": "America/New_York", "price": "price", "size": "size",
                                       "price_scale": 10000})
    ticks = drain(replay)
    assert ticks[0] == Tick("AAPL", ns("2012-06-21T13:30:00+00:00") + 4_241_176, "trade", price=585.33, size=18.0)
    assert len(ticks) == N and {t.price for t in ticks} == {585.33, 585.34, 585.35}


def test_taq_like_trades_with_date_and_time_columns(tmp_path: Path) -> None:
    (tmp_path / "taq_trades_20240603.csv").write_text("SYMBOL,DATE,TIME_M,PRICE,SIZE,EX\n" + "".join(
        f"{'AAPL' if i % 2 else 'MSFT'},20240603,09:30:{i:02d}.{123456789 + i},{192.31 + 0.01 * (i % 5):.2f},"
        f"{100 * (1 + i % 3)},Q\n" for i in range(N)))
    replay = FileReplay(tmp_path / "taq_trades_20240603.csv", columns={"tz": "America/New_York"})
    ticks = drain(replay)
    assert ticks[0] == Tick("MSFT", US_OPEN + 123_456_789, "trade", price=192.31, size=100.0)
    assert ticks[1] == Tick("AAPL", US_OPEN + 1_123_456_790, "trade", price=192.32, size=200.0)
    assert replay.notes == ["taq_trades_20240603.csv: detected, with the keys given (tz); read as ts=DATE+TIME_M "
                            "(datetime, %Y%m%d %H:%M:%S%.f, America/New_York), stream=SYMBOL, price=PRICE, size=SIZE"]
    assert "--tz" in FileReplay(tmp_path / "taq_trades_20240603.csv").notes[1]  # without the zone: said
    # WRDS TAQ's own names: the symbol is SYM_ROOT
    (tmp_path / "wrds.csv").write_text("DATE,TIME_M,EX,SYM_ROOT,SYM_SUFFIX,TR_SCOND,SIZE,PRICE\n" + "".join(
        f"2024-06-03,09:30:{i:02d}.{123456789 + i},Q,{'AAPL' if i % 2 else 'MSFT'},,@,{100 * (1 + i % 3)},"
        f"{192.31 + 0.01 * (i % 5):.2f}\n" for i in range(N)))
    assert drain(FileReplay(tmp_path / "wrds.csv", columns={"tz": "America/New_York"})) == ticks


def test_polygon_flat_file_and_databento_csv_prices(tmp_path: Path) -> None:
    with gzip.open(tmp_path / "2024-06-03.csv.gz", "wt") as f:
        f.write("ticker,conditions,correction,exchange,id,participant_timestamp,price,sequence_number,"
                "sip_timestamp,size,tape,trf_id,trf_timestamp\n" + "".join(
                    f"{'AAPL' if i % 2 else 'MSFT'},\"12,37\",0,{4 + i % 3},{52983525029340 + i},{US_OPEN + 1000 * i},"
                    f"{192.31 + 0.01 * (i % 5):.2f},{1000 + i},{US_OPEN + 1000 * i + 300},{100 + i},3,,\n"
                    for i in range(N)))
    polygon = drain(FileReplay(tmp_path / "2024-06-03.csv.gz"))
    assert polygon[1] == Tick("AAPL", US_OPEN + 1300, "trade", price=192.32, size=101.0)

    def iso(t: int) -> str:
        return datetime.fromtimestamp(t // 10**9, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{t % 10**9:09d}Z"

    header = "ts_recv,ts_event,rtype,publisher_id,instrument_id,action,side,depth,price,size,flags,ts_in_delta," \
             "sequence,symbol\n"
    events = [(US_OPEN + MS * i, 5300.25 + 0.25 * (i % 4), "BAN"[i % 3], 1 + i % 5) for i in range(N)]
    (tmp_path / "pretty.trades.csv").write_text(header + "".join(
        f"{iso(t + 512)},{iso(t)},0,1,5602,T,{side},0,{px:.9f},{size},0,18000,{9000 + i},ESM4\n"
        for i, (t, px, side, size) in enumerate(events)))
    (tmp_path / "raw.trades.csv").write_text(header + "".join(
        f"{t + 512},{t},0,1,5602,T,{side},0,{round(px * 10**9)},{size},130,18000,{9000 + i},ESM4\n"
        for i, (t, px, side, size) in enumerate(events)))
    pretty = drain(FileReplay(tmp_path / "pretty.trades.csv"))
    replay = FileReplay(tmp_path / "raw.trades.csv")
    raw = drain(replay)
    assert pretty == raw  # fixed-point prices (1 unit = 1e-9) read as the prices they are
    # ts_recv (512 ns after ts_event here), as the DBN reader uses: the same feed replays alike from CSV or DBN
    assert raw[:3] == [Tick("ESM4", US_OPEN + 512, "trade", price=5300.25, size=1.0, side="buy"),
                       Tick("ESM4", US_OPEN + MS + 512, "trade", price=5300.5, size=2.0, side="sell"),
                       Tick("ESM4", US_OPEN + 2 * MS + 512, "trade", price=5300.75, size=3.0)]
    assert "price_scale=1e+09" in replay.notes[0]


UNDEF = (1 << 63) - 1  # Databento's empty book side in its fixed-point exports
# What test_replay_formats' MBO records (and the same records exported as CSV below) reduce to:
# (ns after the first, kind, price or bid, size or ask, side or (bid size, ask size))
MBO_TICKS = [(30, "quote", 5300.0, 5300.25, (5.0, 3.0)), (50, "trade", 5300.0, 2.0, "sell"),
             (70, "quote", 5300.0, 5300.25, (3.0, 3.0)), (80, "quote", 5299.75, 5300.25, (9.0, 3.0)),
             (90, "quote", 5299.75, 5300.5, (9.0, 4.0))]


def book_ticks(ticks: list[Tick], t0: int) -> list[tuple]:
    return [(t.ts - t0, t.kind, t.price or t.bid, t.size or t.ask, t.side or (t.bid_size, t.ask_size)) for t in ticks]
QUARTER = 10**9 // 4


def test_databento_order_book_exports_reduce_as_their_dbn_files_do(tmp_path: Path) -> None:
    """Databento's CSV (and Parquet) exports of MBO and MBP-1 records: trades for action T, the top of book when it
    changes at the end of an event, nothing for the other records; the same records as tests/test_replay_formats'
    DBN files give the same ticks (here without the dbn extra)."""
    t0 = US_OPEN
    mbo = "ts_recv,ts_event,rtype,publisher_id,instrument_id,action,side,price,size,channel_id,order_id,flags," \
          "ts_in_delta,sequence,symbol\n"
    events = [  # (i, action, side, quarters, size, order id, last record of its event)
        (1, "R", "N", None, 0, 0, True), (2, "A", "B", 21200, 5, 1, False), (3, "A", "A", 21201, 3, 2, True),
        (4, "A", "B", 21199, 9, 3, True), (5, "T", "A", 21200, 2, 0, True), (6, "F", "B", 21200, 2, 1, True),
        (7, "C", "B", 21200, 2, 1, True), (8, "C", "B", 21200, 3, 1, True), (9, "M", "A", 21202, 4, 2, True),
        (10, "A", "A", 21203, 1, 4, True)]
    (tmp_path / "es.mbo.csv").write_text(mbo + "".join(
        f"{t0 + 10 * i},{t0 + i},160,1,7,{a},{side},{UNDEF if q is None else q * QUARTER},{size},0,{order},"
        f"{128 if last else 0},0,{i},ESM4\n" for i, a, side, q, size, order, last in events))
    replay = FileReplay(tmp_path / "es.mbo.csv")
    assert book_ticks(drain(replay), t0) == MBO_TICKS
    assert not replay.rejected and any("Databento mbo records" in n for n in replay.notes)

    header = "ts_recv,ts_event,rtype,publisher_id,instrument_id,action,side,depth,price,size,flags,ts_in_delta," \
             "sequence,bid_px_00,ask_px_00,bid_sz_00,ask_sz_00,bid_ct_00,ask_ct_00,symbol\n"
    records = [(1, "A", "B", 80000, 4, 80000, None), (2, "A", "A", 80001, 6, 80000, 80001),
               (3, "T", "B", 80001, 1, 80000, 80001), (4, "C", "A", 80001, 6, 80000, 80002)]
    (tmp_path / "nq.mbp-1.csv").write_text(header + "".join(
        f"{t0 + 10 * i},{t0 + i},1,1,9,{a},{side},0,{q * QUARTER},{size},128,0,{i},{bid * QUARTER},"
        f"{UNDEF if ask is None else ask * QUARTER},4,6,1,1,NQM4\n" for i, a, side, q, size, bid, ask in records))
    expected = [("NQM4", "quote", 20000.25, None), ("NQM4", "trade", 20000.25, "buy"),
                ("NQM4", "quote", 20000.5, None)]
    ticks = drain(FileReplay(tmp_path / "nq.mbp-1.csv"))
    assert [(t.stream, t.kind, t.price or t.ask, t.side) for t in ticks] == expected
    # the pretty export (prices as decimals, an empty side left empty), as Parquet
    pl.read_csv(tmp_path / "nq.mbp-1.csv").with_columns(
        *(pl.when(pl.col(c) == UNDEF).then(None).otherwise(pl.col(c) / 10**9).alias(c)
          for c in ("price", "bid_px_00", "ask_px_00"))).write_parquet(tmp_path / "nq.mbp-1.parquet")
    assert drain(FileReplay(tmp_path / "nq.mbp-1.parquet")) == ticks


def test_european_decimal_commas_and_signed_sides(tmp_path: Path) -> None:
    (tmp_path / "sap_xetra.csv").write_text("Time;Symbol;Price;Size;Side\n" + "".join(
        f"02.01.2024 09:00:{i:02d},{100 + i};SAP;{171 + i % 3},{32 + i % 5:02d};{10 * (1 + i % 3)};"
        f"{('1', '-1', '+1', '0')[i % 4]}\n" for i in range(N)))
    replay = FileReplay(tmp_path / "sap_xetra.csv")
    ticks = drain(replay)
    assert dict(replay.rejected) == {}
    assert ticks[:4] == [Tick("SAP", ns("2024-01-02T09:00:00.100+00:00"), "trade", price=171.32, size=10.0, side="buy"),
                         Tick("SAP", ns("2024-01-02T09:00:01.101+00:00"), "trade", price=172.33, size=20.0,
                              side="sell"),
                         Tick("SAP", ns("2024-01-02T09:00:02.102+00:00"), "trade", price=173.34, size=30.0,
                              side="buy"),
                         Tick("SAP", ns("2024-01-02T09:00:03.103+00:00"), "trade", price=171.35, size=10.0)]
    (tmp_path / "de.csv").write_text("Zeit;Kurs;Stueck\n02.01.2024 09:00:00,1;171,32;10\n")
    (detected,) = drain(FileReplay(tmp_path / "de.csv"))  # Zeit, Kurs, Stueck: known names since fix274 #1
    assert (detected.ts, detected.price, detected.size) == (ns("2024-01-02T09:00:00.100+00:00"), 171.32, 10.0)
    named = FileReplay(tmp_path / "de.csv", columns={"ts": "Zeit", "ts_unit": "datetime", "stream": "SAP",
                                                     "price": "Kurs", "size": "Stueck"})
    assert drain(named) == [Tick("SAP", ns("2024-01-02T09:00:00.100+00:00"), "trade", price=171.32, size=10.0)]
    (tmp_path / "us.csv").write_text("Time,Price,Size\n06/03/2024 09:30:00,192.31,100\n")  # June 3 or March 6?
    with pytest.raises(ValueError, match=r'holds "06/03/2024 09:30:00", a date that reads more than one way '
                                         r'\("%m/%d/%Y %H:%M:%S%\.f" or "%d/%m/%Y %H:%M:%S%\.f"\): give the one'):
        FileReplay(tmp_path / "us.csv")
    (tmp_path / "us_minutes.csv").write_text("Time,Price,Size\n06/03/2024 09:30,192.31,100\n")
    with pytest.raises(ValueError, match=r'holds "06/03/2024 09:30", a date that reads more than one way'):
        FileReplay(tmp_path / "us_minutes.csv", columns={"ts": "Time", "ts_unit": "datetime", "stream": "AAPL",
                                                         "price": "Price", "size": "Size"})
    (us,) = drain(FileReplay(tmp_path / "us.csv", columns={"ts_format": "%m/%d/%Y %H:%M:%S%.f"}))
    assert us.ts == ns("2024-06-03T09:30:00+00:00")


def test_cli_backtest_of_binance_public_files_as_downloaded(tmp_path: Path, tmp_path_factory, capsys) -> None:
    checkpoint = shared_tiny_tick_checkpoint(tmp_path_factory)  # (built once a worker: the backtest only reads it)
    (tmp_path / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 4096, block_size: 16}}\n")
    (tmp_path / "q.yaml").write_text(QUERIES)
    eth = binance_trades(tmp_path / "ETHUSDT-trades-2024-01-02.csv", T0 * 1000, 37, 2352.61)
    sol = binance_trades(tmp_path / "SOLUSDT-trades-2025-03-03.csv", 1_740_960_000_123_456, 37_000, 141.2)
    code = main(["backtest", str(eth), str(sol), "--queries", str(tmp_path / "q.yaml"), "--quiet",
                 "--config", str(tmp_path / "engine.yaml"), "--out", str(tmp_path / "a.parquet")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"replayed {2 * N} ticks (0 rejected)" in out
    assert "note: ETHUSDT-trades-2024-01-02.csv: no header row; read as preset binance-public-trades" in err
    answers = pl.read_parquet(tmp_path / "a.parquet")
    assert set(answers["stream"]) == {"ETHUSDT", "SOLUSDT"}
    eth_ts = answers.filter(pl.col("stream") == "ETHUSDT")["data_ts"]
    assert T0 * 10**9 < eth_ts.min() < (T0 + 1) * 10**9  # ms read as ms: 2024-01-02, not 1970 nor 55,000 AD


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
    want = [("BTCUSDT_PERP", 1704153601_000000000, 42510.0, 42510.2, 2.5, 1.5),  # binance-futures: the perpetual
            ("BTCUSDT_PERP", 1704153601_001000000, 42511.0, 42511.2, 2.5, 1.5)]
    quotes = lambda replay: [(t.stream, t.ts, t.bid, t.ask, t.bid_size, t.ask_size) for t in drain(replay)]  # noqa
    assert quotes(FileReplay(path)) == want  # detected
    spec = map_from_options(columns="ts=timestamp,bid=bids[0].price,ask=asks[0].price,bid_size=bids[0].amount,"
                                    "ask_size=asks[0].amount,stream=symbol")  # the map replay.md gives
    assert quotes(FileReplay(path, columns=spec)) == want


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


def test_a_futures_file_of_days_reads_its_settlement_beside_a_blank_last(tmp_path: Path) -> None:
    """Quandl's CHRIS files (`Date,Open,High,Low,Last,Change,Settle,Volume,...`) were read by `Last`, and the days a
    vendor leaves it blank rejected, with no word of `Settle` (review441 #2): the settlement is a future's price of
    record, read with a note naming the `Last` left."""
    (tmp_path / "CHRIS-CME_CL1.csv").write_text(
        "Date,Open,High,Low,Last,Change,Settle,Volume,Previous Day Open Interest\n"
        "2020-04-21,10.5,13.5,9.0,10.01,,10.01,100,5\n2020-04-20,17.7,17.9,-40.3,,,-37.63,200,6\n"
        "2020-04-17,19.9,20.4,17.3,18.27,,18.27,300,7\n")
    replay = FileReplay(tmp_path / "CHRIS-CME_CL1.csv", columns={"price_offset": 38})
    assert sorted(t.price for t in drain(replay)) == [0.37, 48.01, 56.27] and not dict(replay.rejected)
    assert any(n.startswith('CHRIS-CME_CL1.csv: read as settlement prices (Settle) ("Last" beside it is not read: '
                            '--columns price=Last reads it)') for n in replay.notes), replay.notes


def gemini_trades(path: Path, times_ms: list[int], sides: list[str], seconds: list[int] | None = None) -> Path:
    """Gemini's REST trades (GET /v1/trades/{symbol}) as a CSV: `timestamp` in s beside `timestampms` in ms, and
    `type`, buy or sell: the taker's side."""
    seconds = seconds or [t // 1000 for t in times_ms]
    path.write_text("timestamp,timestampms,tid,price,amount,exchange,type\n" + "".join(
        f"{s},{t},{1000 + i},{3800 + 0.05 * (i % 3):.2f},0.{i + 1:02d},gemini,{side}\n"
        for i, (s, t, side) in enumerate(zip(seconds, times_ms, sides))))
    return path


def test_gemini_trades_read_their_millisecond_clock_and_the_takers_side(tmp_path: Path) -> None:
    """review196: `timestamp` (s) was read, every trade of one second at one time, and `type` (buy/sell) called a
    row kind, no side read. The finer clock wins when its instants are the other's, and `type` is the side."""
    times = [1_717_200_000_000 + 450 * i for i in range(N)]  # 2 or 3 trades a second
    sides = ["buy", "sell", "BUY", "Sell"] * (N // 4)
    replay = FileReplay(gemini_trades(tmp_path / "gemini_ethusd.csv", times, sides))
    ticks = drain(replay)
    assert [t.ts for t in ticks] == [t * MS for t in times] and len({t.ts for t in ticks}) == N
    assert [t.side for t in ticks] == ["buy", "sell"] * (N // 2)
    assert ticks[1] == Tick("ETHUSD", times[1] * MS, "trade", price=3800.05, size=0.02, side="sell")
    assert dict(replay.rejected) == {}
    assert "read as ts=timestampms (ms), stream_name=ETHUSD, price=price, size=amount, side=type" in replay.notes[0]
    assert (f'gemini_ethusd.csv: column "timestampms" read as the time, in ms: it writes the instants of "timestamp" '
            f"(s) finer, on each of its first {N} rows (--columns ts=timestamp reads that one)") in replay.notes
    assert not any("row kind" in note or "kinds of rows" in note or "another clock" in note for note in replay.notes)
    # the same records as the REST API returns them, a JSON array
    rest = tmp_path / "ETHUSD-trades.json"
    rest.write_text(pl.read_csv(tmp_path / "gemini_ethusd.csv").write_json())
    assert [(t.ts, t.side) for t in drain(FileReplay(rest))] == [(t.ts, t.side) for t in ticks]
    # a `timestampms` that writes other instants is not read in its place, and is named
    other = gemini_trades(tmp_path / "other_ethusd.csv", times, sides, [T0 + i for i in range(N)])
    replay = FileReplay(other)
    assert [t.ts for t in drain(replay)] == [(T0 + i) * 10**9 for i in range(N)]
    assert any('column "timestampms" (ms) is named as "timestamp" in finer units but writes other instants '
               "(1717200000000 beside 1704153600)" in note for note in replay.notes), replay.notes


def test_gemini_auction_and_block_trades_keep_the_other_trades_sides(tmp_path: Path) -> None:
    """review218 #2: Gemini's `type` is buy, sell, auction or block; one auction row turned the side off for every
    trade, and the keep filter its note proposed left the buy/sell trades with no side either. Now the column is
    the taker's side, the auction and block trades (no aggressor) read with none, with a note; a keep filter on
    the column keeps the side."""
    times = [1_717_200_000_000 + 450 * i for i in range(N)]
    sides = ["buy", "sell"] * (N // 2)
    sides[3], sides[6] = "auction", "block"
    path = gemini_trades(tmp_path / "gemini_ethusd.csv", times, sides)
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [t.side for t in ticks] == [None if s in ("auction", "block") else s for s in sides]
    assert dict(replay.rejected) == {}
    assert ("gemini_ethusd.csv: column \"type\" read as the taker's side; its auction, block trades have no aggressor: "
            "read with no side") in replay.notes, replay.notes
    (tmp_path / "keep.yaml").write_text("keep: {type: [buy, sell]}\n")
    kept = drain(FileReplay(path, columns=map_from_options(columns=str(tmp_path / "keep.yaml"), detect=True)))
    assert [t.side for t in kept] == [s for s in sides if s in ("buy", "sell")]


@pytest.mark.parametrize("unit", [1, 1000])
def test_cryptodatadownload_bars_with_their_banner(tmp_path: Path, unit: int) -> None:
    """review231 #5: CryptoDataDownload's hourly bars, newest first under a URL banner line, were refused (the
    banner read as the header); without it `Volume BTC` was unread (every bar size 1) and the `date` read, not
    `unix`, though its older `2024-03-24 07-AM` form reads as no time. Now: banner skipped with a note, the base
    asset's volume as the size (not `Volume USDT`), `unix` (s or ms) as the time, a reject named by its line."""
    rows = [f"{(T0 + 3600 * i) * unit},2024-01-02 {i:02d}-AM,BTC/USDT,42000.00,42100.00,41900.00,{42000 + i}.50,"
            f"{1.25 + i},{(1.25 + i) * 42000},{100 + i}" for i in range(N)]
    rows[3] = rows[3].replace(f"{42003}.50", "x")  # an unreadable close: newest first, on line 3 + (N - 4)
    path = tmp_path / "Binance_BTCUSDT_1h.csv"
    path.write_text("https://www.CryptoDataDownload.com\n"
                    "unix,date,symbol,open,high,low,close,Volume BTC,Volume USDT,tradecount\n"
                    + "\n".join(reversed(rows)) + "\n")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [t.ts for t in ticks][:2] == [T0 * 10**9, (T0 + 3600) * 10**9]
    assert [t.price for t in ticks][:4] == [42000.5, 42001.5, 42002.5, 42004.5]
    assert [t.size for t in ticks][:4] == [1.25, 2.25, 3.25, 5.25]
    assert {t.stream for t in ticks} == {"BTC-USDT"}
    assert any('"https://www.CryptoDataDownload.com", is no CSV row' in n for n in replay.notes)
    assert f"Binance_BTCUSDT_1h.csv line {N - 1}" in " ".join(replay.rejected.examples.values())
    # its `date` named: refused (no format reads `07-AM`), pointing at the epoch column beside it
    with pytest.raises(ValueError, match=r'not ISO 8601: .*; or read the epoch count in column "unix" beside it: '
                                         r"--columns ts=unix$"):
        drain(FileReplay(path, columns={"ts": "date"}))


def test_a_banner_of_several_lines_is_skipped_and_a_headerless_files_first_row_never(tmp_path: Path, capsys) -> None:
    """One banner line above a header was skipped (CryptoDataDownload's URL); a vendor's three lines of title,
    copyright (a comma in it) and terms URL made the title the only column and the file was refused. Up to 10 such
    lines are skipped now, with a note. A header-less file's first row (its numbers and times) is never one, and
    neither is a header one separator short of rows that end with one."""
    rows = [f"{T0 + 3600 * i},BTC/USDT,{42000 + i}.50,{1.25 + i}" for i in range(N)]
    path = tmp_path / "Vendor_BTCUSDT_1h.csv"
    path.write_text("Example Data Vendor - hourly trades\nCopyright (c) Example Data, Inc. All rights reserved\n\n"
                    "https://www.example.com/terms\nunix,symbol,price,size\n" + "\n".join(rows) + "\n")
    (tmp_path / "q.yaml").write_text(QUERIES)
    assert main(["backtest", str(path), "--queries", str(tmp_path / "q.yaml"), "--out", str(tmp_path / "o.parquet"),
                 "--threads", "1"]) == 0
    assert f"replayed {N} ticks (0 rejected)" in capsys.readouterr().out
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.ts, t.price, t.size) for t in ticks][:2] == [(T0 * 10**9, 42000.5, 1.25), ((T0 + 3600) * 10**9,
                                                                                         42001.5, 2.25)]
    assert any("its first 3 lines, \"Example Data Vendor - hourly trades / Copyright (c) Example Data, Inc." in n
               and "skipped as a banner (up to 10 lines are)" in n for n in replay.notes), replay.notes
    headerless = tmp_path / "BTCUSDT_ticks.csv"
    headerless.write_text("".join(f"2024-01-02 10:00:{i:02d},{42000 + i}.5,0.{i + 1:02d}\n" for i in range(N)))
    replay = FileReplay(headerless)
    assert [t.price for t in drain(replay)][:2] == [42000.5, 42001.5]
    assert not any("banner" in n for n in replay.notes)
    trailing = tmp_path / "BTCUSDT_trailing.csv"
    trailing.write_text("unix,symbol,price,size\n" + "".join(f"{row},\n" for row in rows))
    replay = FileReplay(trailing, columns={"ts": "unix", "price": "price"})  # (its rows: extra_fields, as before)
    assert any('column "unix" read as s' in n for n in replay.notes) and not any("banner" in n for n in replay.notes)


def test_a_banner_padded_as_the_table_is_skipped_and_one_too_long_is_said_with_its_tail(tmp_path: Path,
                                                                                       capsys) -> None:
    """review250: an Excel title row saved with the table's separators (`Kursdaten Export;;;`) and a banner of more
    than 10 lines were read as the header, and the refusal ("columns found ['Disclaimer line A ...']; no time
    column") offered only column maps, which cannot skip a line. A line whose cells are all empty but its first is
    a banner's; a longer banner is refused saying so, with the `tail -n +N` (N the header's line) that removes it."""
    rows = [f"2024-03-04T14:30:{i:02d}Z;SAP;185,{i:02d};{1 + i}" for i in range(N)]
    padded = tmp_path / "semi_b.csv"
    padded.write_text("Kursdaten Export;;;\nQuelle: Boerse;;;\ntime;symbol;price;size\n" + "\n".join(rows) + "\n")
    replay = FileReplay(padded)
    assert [t.price for t in drain(replay)][:2] == [185.0, 185.01]
    assert any('its first 2 lines, "Kursdaten Export;;; / Quelle: Boerse;;;", are no CSV rows' in n
               for n in replay.notes), replay.notes
    banner = [f"Disclaimer line {chr(65 + i)} of the vendor" for i in range(11)]
    table = ["timestamp,symbol,price,size"] + [f"2024-03-04T14:30:{i:02d}Z,AAPL,185.{i:02d},{1 + i}" for i in range(N)]
    long = tmp_path / "banner11.csv"
    long.write_text("\n".join(banner + table) + "\n")
    said = (f'{long}: its first 11 lines ("Disclaimer line A of the vendor" ... "Disclaimer line K of the vendor") '
            f"look like a title or banner above a table whose header is line 12, and only up to 10 such lines are "
            f"skipped: the banner's first line was read as the header. Remove the banner first, e.g. tail -n +12 "
            f"{long} > banner11-table.csv, and replay that file (docs/replay.md)")
    for columns in (None, map_from_options(columns="ts=timestamp,price=price,size=size")):
        with pytest.raises(ValueError) as e:
            FileReplay(long, columns=columns)
        assert str(e.value) == said
    (tmp_path / "q.yaml").write_text(QUERIES)
    assert main(["backtest", str(long), "--queries", str(tmp_path / "q.yaml"), "--out", str(tmp_path / "o.parquet"),
                 "--threads", "1"]) == 2
    assert f"error: {said}" in capsys.readouterr().err
    (tmp_path / "banner11-table.csv").write_text("\n".join(table) + "\n")  # what the tail given writes
    assert len(drain(FileReplay(tmp_path / "banner11-table.csv"))) == N


def test_a_banner_line_with_a_date_amid_its_text_is_skipped_and_the_note_says_what_a_banner_line_lacks(
        tmp_path: Path) -> None:
    """review250: `Exported 2024-06-03 10:15 UTC` above a header was skipped as a banner (right: a header-less
    file's first row has cells that ARE numbers and times, this one text around a date), but the note said banner
    lines have "no numbers" and docs/replay.md that such a line is never one. Both now say what the rule reads: no
    cell that is a number or starts with a date. A line of such a cell stays a row (a header-less file's)."""
    rows = [f"2024-03-04T14:30:{i:02d}Z,AAPL,185.{i:02d},{1 + i}" for i in range(N)]
    path = tmp_path / "banner_date.csv"
    path.write_text("Trade report for AAPL\nExported 2024-06-03 10:15 UTC\ntimestamp,symbol,price,size\n"
                    + "\n".join(rows) + "\n")
    replay = FileReplay(path)
    assert len(drain(replay)) == N
    assert any('its first 2 lines, "Trade report for AAPL / Exported 2024-06-03 10:15 UTC", are no CSV rows (no cell '
               "of them a number or a date, and few or no separators" in n for n in replay.notes), replay.notes
    one = tmp_path / "one_line.csv"
    one.write_text("Exported 2024-06-03 10:15 UTC\ntimestamp,symbol,price,size\n" + "\n".join(rows) + "\n")
    replay = FileReplay(one)
    assert len(drain(replay)) == N
    assert any('its first line, "Exported 2024-06-03 10:15 UTC", is no CSV row (no cell of it a number or a date'
               in n for n in replay.notes), replay.notes
    headerless = tmp_path / "AAPL_ticks.csv"
    headerless.write_text("".join(f"2024-06-03 10:15:{i:02d},185.{i:02d},{1 + i}\n" for i in range(N)))
    replay = FileReplay(headerless)
    assert len(drain(replay)) == N and not any("banner" in n for n in replay.notes)
