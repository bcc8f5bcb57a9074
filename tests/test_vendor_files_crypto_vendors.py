"""Crypto vendors' files beyond Tardis (CoinAPI quotes, Kaiko's venues, CoinDesk/CCData and CryptoCompare trades),
each written byte for byte in the vendor's layout and read with no options."""

from __future__ import annotations

import gzip
from pathlib import Path

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
