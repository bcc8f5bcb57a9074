"""Crypto vendors' files beyond Tardis (CoinAPI quotes, Kaiko's venues, CoinDesk/CCData and CryptoCompare trades),
each written byte for byte in the vendor's layout and read with no options."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain


def test_coinapi_quote_flat_files_read_their_sizes(tmp_path: Path) -> None:
    folder = tmp_path / "T-QUOTES" / "D-20240808" / "E-BINANCE"
    folder.mkdir(parents=True)
    path = folder / "IDDI-4+SC-BINANCE_SPOT_BTC_USDT+S-BTCUSDT.csv.gz"
    path.write_bytes(gzip.compress(b"time_exchange;time_coinapi;ask_px;ask_sx;bid_px;bid_sx\n"
                                   b"2024-08-08T23:54:15.3578912Z;2024-08-08T23:54:15.3601120Z;61837.64;1.54698;"
                                   b"61837.63;3.78826\n"
                                   b"2024-08-08T23:54:15.3867230Z;2024-08-08T23:54:15.3890010Z;61837.64;1.6052;"
                                   b"61837.63;3.78826\n"))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.stream, t.ts, t.bid, t.bid_size, t.ask, t.ask_size) for t in ticks] == [
        ("BTCUSDT", 1723161255357891200, 61837.63, 3.78826, 61837.64, 1.54698),
        ("BTCUSDT", 1723161255386723000, 61837.63, 3.78826, 61837.64, 1.6052)]
    assert any("bid_size=bid_sx" in n and "ask_size=ask_sx" in n for n in replay.notes), replay.notes


def test_kaiko_venues_each_in_their_own_stream_raise_no_caution(tmp_path: Path) -> None:
    path = tmp_path / "kaiko_multi.csv"
    path.write_text("id,exchange,symbol,date,price,amount,sell\n"
                    "3735683259,bnce,btcusdt,1723161255342,61837.63,0.02,True\n"
                    "657398432,cbse,btcusd,1723161255343,61840.01,0.01,False\n"
                    "3735683260,bnce,btcusdt,1723161255617,61837.63,0.048,\n")
    replay = FileReplay(path)
    assert [(t.stream, t.side) for t in drain(replay)] == [("btcusdt", "sell"), ("btcusd", "buy"), ("btcusdt", None)]
    assert not any("venues" in str(n) for n in replay.notes + replay.cautions), replay.cautions
    # one symbol on both venues: that stream mixes them, and the caution says which share
    mixed = tmp_path / "kaiko_mixed.csv"
    mixed.write_text(path.read_text() + "657398433,cbse,btcusdt,1723161255700,61840.02,0.01,false\n")
    replay = FileReplay(mixed)
    drain(replay)
    said = [str(c) for c in replay.cautions if "venues" in str(c)]
    assert len(said) == 1 and "1 of 2 streams mix them" in said[0], said


COINDESK_TRADES = (
    "TYPE,MARKET,INSTRUMENT,MAPPED_INSTRUMENT,BASE,QUOTE,SIDE,ID,TIMESTAMP,TIMESTAMP_NS,RECEIVED_TIMESTAMP,"
    "RECEIVED_TIMESTAMP_NS,QUANTITY,PRICE,QUOTE_QUANTITY,SOURCE,CCSEQ\n"
    "952,binance,BTCUSDT,BTC-USDT,BTC,USDT,SELL,3735683259,1723161255,342000000,1723161255,87896568,0.02,61837.63,"
    "1236.7526,POLLING,0\n"
    "952,binance,BTCUSDT,BTC-USDT,BTC,USDT,BUY,3735683260,1723161255,617000000,1723161255,347673567,0.048,61837.64,"
    "2968.20624,POLLING,1\n"
    "952,binance,BTCUSDT,BTC-USDT,BTC,USDT,SELL,3735683261,1723161256,5000,1723161256,9000000,0.5,61837.5,"
    "30918.75,POLLING,2\n")


def test_coindesk_trades_join_their_seconds_and_nanoseconds_with_no_options(tmp_path: Path) -> None:
    path = tmp_path / "coindesk_binance_BTC-USDT_trades_2024-08-08.csv"
    path.write_text(COINDESK_TRADES)
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == [
        ("BTCUSDT", 1723161255342000000, 61837.63, 0.02, "sell"),
        ("BTCUSDT", 1723161255617000000, 61837.64, 0.048, "buy"),
        ("BTCUSDT", 1723161256000005000, 61837.5, 0.5, "sell")]
    assert any('"TIMESTAMP_NS" the ns within each second' in n for n in replay.notes), replay.notes
    assert not any("another clock" in n for n in replay.notes), replay.notes


def test_coindesk_seconds_plus_part_map_reads_with_or_without_its_unit(tmp_path: Path) -> None:
    path = tmp_path / "coindesk.csv"
    path.write_text(COINDESK_TRADES)
    for unit in ("ns", None):
        spec = map_from_options(columns="ts=TIMESTAMP+TIMESTAMP_NS", ts_unit=unit, detect=True)
        assert [t.ts for t in drain(FileReplay(path, columns=spec))][:2] == [1723161255342000000,
                                                                             1723161255617000000], unit
    # a part whose name says no unit: the refusal names the units that read it, and --ts-unit us then does
    (tmp_path / "parts.csv").write_text("secs,part,price,size\n1723161255,342000,61837.63,0.02\n")
    with pytest.raises(ValueError, match="--ts-unit ms or us"):
        drain(FileReplay(tmp_path / "parts.csv", columns=map_from_options(columns="ts=secs+part", detect=True)))
    spec = map_from_options(columns="ts=secs+part", ts_unit="us", detect=True)
    assert [t.ts for t in drain(FileReplay(tmp_path / "parts.csv", columns=spec))] == [1723161255342000000]


def test_cryptocompare_streamer_trades_read_their_flag_and_nanoseconds(tmp_path: Path) -> None:
    path = tmp_path / "cryptocompare_ws_trades.jsonl"
    path.write_text(
        '{"TYPE":"20","MESSAGE":"STREAMERWELCOME","SERVER_UPTIME_SECONDS":1262462}\n'
        '{"TYPE": "0", "M": "Binance", "FSYM": "BTC", "TSYM": "USDT", "F": "1", "ID": "3735683259", "TS": 1723161255, '
        '"Q": 0.02, "P": 61837.63, "TOTAL": 1236.7526, "RTS": 1723161254, "CCSEQ": 259, "TSNS": 342000000, '
        '"RTSNS": 87896568}\n'
        '{"TYPE":"999","MESSAGE":"HEARTBEAT","TIMEMS":1723161256000}\n'
        '{"TYPE": "0", "M": "Binance", "FSYM": "BTC", "TSYM": "USDT", "F": "2", "ID": "3735683260", "TS": 1723161255, '
        '"Q": 0.048, "P": 61837.64, "TOTAL": 2968.20624, "RTS": 1723161254, "CCSEQ": 260, "TSNS": 617000000, '
        '"RTSNS": 347673567}\n'
        '{"TYPE": "0", "M": "Binance", "FSYM": "BTC", "TSYM": "USDT", "F": "4", "ID": "3735683261", "TS": 1723161256, '
        '"Q": 0.5, "P": 61837.5, "TOTAL": 30918.75, "RTS": 1723161256, "CCSEQ": 261, "TSNS": 5000, "RTSNS": 9000}\n')
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == [
        ("Binance BTC USDT", 1723161255342000000, 61837.63, 0.02, "sell"),
        ("Binance BTC USDT", 1723161255617000000, 61837.64, 0.048, "buy"),
        ("Binance BTC USDT", 1723161256000005000, 61837.5, 0.5, None)]
    assert dict(replay.rejected) == {"filtered_out": 2}
    assert any("CryptoCompare streamer trades" in n and "20 (1), 999 (1)" in n for n in replay.notes), replay.notes
