"""Websocket captures whose ticks sit in envelopes (review325 #4, #5): Coinbase Advanced Trade's `events` (trades
and ticker quotes) and Kraken v1's `spread` arrays, written byte for byte as the venues send them and replayed with
no options."""

from __future__ import annotations

from pathlib import Path

from connectors.replay import FileReplay
from conftest import drain

ADVANCED = (
    '{"channel":"subscriptions","client_id":"","timestamp":"2024-08-08T23:54:15.342243000Z","sequence_num":0,'
    '"events":[{"subscriptions":{"market_trades":["BTC-USD"],"ticker":["BTC-USD"]}}]}\n'
    '{"channel":"market_trades","client_id":"","timestamp":"2024-08-08T23:54:15.344243000Z","sequence_num":1,'
    '"events":[{"type":"update","trades":[{"trade_id":"657398432","product_id":"BTC-USD","price":"61837.63",'
    '"size":"0.02000000","side":"SELL","time":"2024-08-08T23:54:15.342243Z"},{"trade_id":"657398433",'
    '"product_id":"BTC-USD","price":"61837.64","size":"0.00009000","side":"BUY",'
    '"time":"2024-08-08T23:54:15.343001Z"}]}]}\n'
    '{"channel":"ticker","client_id":"","timestamp":"2024-08-08T23:54:15.357891268Z","sequence_num":2,'
    '"events":[{"type":"update","tickers":[{"type":"ticker","product_id":"BTC-USD","price":"61837.64",'
    '"volume_24_h":"12011.3","low_24_h":"59800","high_24_h":"62101","low_52_w":"24900","high_52_w":"73835.57",'
    '"price_percent_chg_24_h":"3.02","best_bid":"61837.63","best_bid_quantity":"3.78826000",'
    '"best_ask":"61837.64","best_ask_quantity":"1.54698000"}]}]}\n'
    '{"channel":"heartbeats","client_id":"","timestamp":"2024-08-08T23:54:16.000000000Z","sequence_num":3,'
    '"events":[{"current_time":"2024-08-08 23:54:16.000 +0000 UTC","heartbeat_counter":1}]}\n')


def test_coinbase_advanced_trade_capture_reads_trades_as_the_takers_and_ticker_quotes(tmp_path: Path) -> None:
    path = tmp_path / "coinbase_advanced_BTC-USD_2024-08-08.jsonl"
    path.write_text(ADVANCED)
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.kind, t.ts, t.price, t.size, t.side, t.bid, t.ask, t.bid_size, t.ask_size) for t in ticks] == [
        ("trade", 1723161255342243000, 61837.63, 0.02, "sell", None, None, None, None),
        ("trade", 1723161255343001000, 61837.64, 0.00009, "buy", None, None, None, None),
        ("quote", 1723161255357891268, None, None, None, 61837.63, 61837.64, 3.78826, 1.54698)]
    assert {t.stream for t in ticks} == {"BTC-USD"}
    assert dict(replay.rejected) == {"filtered_out": 2}  # the subscriptions ack and the heartbeat
    said = " ".join(replay.notes + [str(c) for c in replay.cautions])
    assert "the taker's, as Advanced Trade's API documents it" in said
    assert "MAKER" not in said and "coinbase-trades" not in said  # no maker-side flip caution
    # its trades alone (a market_trades capture) read the same trades
    trades_only = tmp_path / "trades.jsonl"
    trades_only.write_text("".join(line + "\n" for line in ADVANCED.splitlines() if "market_trades\"," in line
                                   and "subscriptions" not in line))
    assert [(t.kind, t.side) for t in drain(FileReplay(trades_only))] == [("trade", "sell"), ("trade", "buy")]


KRAKEN_V1 = (
    '{"connectionID":8628615390848610000,"event":"systemStatus","status":"online","version":"1.9.0"}\n'
    '{"channelID":337,"channelName":"trade","event":"subscriptionStatus","pair":"XBT/USD","status":"subscribed",'
    '"subscription":{"name":"trade"}}\n'
    '{"channelID":338,"channelName":"spread","event":"subscriptionStatus","pair":"XBT/USD","status":"subscribed",'
    '"subscription":{"name":"spread"}}\n'
    '[337,[["61837.6","0.02000000","1723161255.342243","s","m",""]],"trade","XBT/USD"]\n'
    '[338,["61837.6","61837.7","1723161255.357891","3.78826000","1.54698000"],"spread","XBT/USD"]\n'
    '{"event":"heartbeat"}\n'
    '[338,["61837.5","61837.7","1723161255.386723","3.00000000","1.60520000"],"spread","XBT/USD"]\n')


def test_kraken_v1_spread_arrays_read_as_quotes_beside_its_trades(tmp_path: Path) -> None:
    path = tmp_path / "kraken_v1_XBTUSD_2024-08-08.jsonl"
    path.write_text(KRAKEN_V1)
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.stream, t.kind, t.ts, t.price, t.side, t.bid, t.ask, t.bid_size, t.ask_size) for t in ticks] == [
        ("XBT-USD", "trade", 1723161255342243000, 61837.6, "sell", None, None, None, None),
        ("XBT-USD", "quote", 1723161255357891000, None, None, 61837.6, 61837.7, 3.78826, 1.54698),
        ("XBT-USD", "quote", 1723161255386723000, None, None, 61837.5, 61837.7, 3.0, 1.6052)]
    assert "not_json" not in replay.rejected and replay.rejected["filtered_out"] == 4
    # a spread-only capture: the same quotes
    spread = tmp_path / "spread.jsonl"
    spread.write_text("".join(line + "\n" for line in KRAKEN_V1.splitlines() if '"spread","XBT' in line))
    assert [(t.kind, t.bid) for t in drain(FileReplay(spread))] == [("quote", 61837.6), ("quote", 61837.5)]


def test_coinbase_exchange_matches_with_ticker_read_its_quotes_and_each_trade_once(tmp_path: Path) -> None:
    path = tmp_path / "coinbase_ws_BTC-USD_2024-08-08.jsonl"
    path.write_text(
        '{"type": "subscriptions", "channels": [{"name": "matches", "product_ids": ["BTC-USD"]}, {"name": "ticker", '
        '"product_ids": ["BTC-USD"]}, {"name": "level2_batch", "product_ids": ["BTC-USD"]}]}\n'
        '{"type": "snapshot", "product_id": "BTC-USD", "bids": [["61837.63", "3.78826"]], "asks": [["61837.64", '
        '"1.54698"]]}\n'
        '{"type": "last_match", "trade_id": 657398432, "maker_order_id": "8954b1c6-c7d7-4543-4cc7-987e073329ec", '
        '"taker_order_id": "be5945fe-c7ab-d0ae-e27d-3abb473fb750", "side": "buy", "size": "0.02000000", "price": '
        '"61837.63", "product_id": "BTC-USD", "sequence": 84672938272, "time": "2024-08-08T23:54:15.342243Z"}\n'
        '{"type": "l2update", "product_id": "BTC-USD", "changes": [["buy", "61837.63", "3.78826000"]], "time": '
        '"2024-08-08T23:54:15.357891Z"}\n'
        '{"type": "match", "trade_id": 657398433, "maker_order_id": "1c0e3b7a-7d8c-4a0a-9a43-3cbbd1e0a0b1", '
        '"taker_order_id": "0f3c3a4e-2b8f-4a53-8f3e-0d6f0f8b1c2d", "side": "sell", "size": "0.00009000", "price": '
        '"61837.64", "product_id": "BTC-USD", "sequence": 84672938321, "time": "2024-08-08T23:54:15.617133Z"}\n'
        '{"type": "ticker", "sequence": 84672938321, "product_id": "BTC-USD", "price": "61837.64", "open_24h": '
        '"60010.01", "volume_24h": "12011.3", "low_24h": "59800.00", "high_24h": "62101.00", "volume_30d": '
        '"380000.1", "best_bid": "61837.63", "best_bid_size": "0.04819000", "best_ask": "61837.64", '
        '"best_ask_size": "3.48478000", "side": "buy", "time": "2024-08-08T23:54:15.617133Z", "trade_id": 657398433, '
        '"last_size": "0.00009000"}\n'
        '{"type": "heartbeat", "last_trade_id": 657398433, "product_id": "BTC-USD", "sequence": 84672938322, '
        '"time": "2024-08-08T23:54:16.000000Z"}\n')
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.kind, t.ts, t.price, t.side, t.bid, t.ask, t.bid_size, t.ask_size) for t in ticks] == [
        ("trade", 1723161255342243000, 61837.63, "sell", None, None, None, None),  # the maker bought: flipped
        ("trade", 1723161255617133000, 61837.64, "buy", None, None, None, None),
        ("quote", 1723161255617133000, None, None, 61837.63, 61837.64, 0.04819, 3.48478)]
    said = " ".join(replay.notes)
    assert "ticker read as quotes" in said and "is no unique trade id" not in said and "WRDS" not in said
    assert dict(replay.rejected) == {"filtered_out": 4}  # subscriptions, snapshot, l2update, heartbeat


def test_kraken_v2_ticker_with_its_timestamp_reads_as_quotes(tmp_path: Path) -> None:
    path = tmp_path / "kraken_v2_ticker.jsonl"
    path.write_text(
        '{"method":"subscribe","result":{"channel":"ticker","event_trigger":"bbo","snapshot":true,'
        '"symbol":"BTC/USD"},"success":true,"time_in":"2024-08-08T23:54:15.300000Z",'
        '"time_out":"2024-08-08T23:54:15.300100Z"}\n'
        '{"channel":"ticker","type":"snapshot","data":[{"symbol":"BTC/USD","bid":61837.6,"bid_qty":3.78826,'
        '"ask":61837.7,"ask_qty":1.54698,"last":61837.6,"volume":1201.3,"vwap":61500.2,"low":59800.0,'
        '"high":62101.0,"change":1800.1,"change_pct":3.02,"timestamp":"2024-08-08T23:54:15.357891Z"}]}\n'
        '{"channel":"heartbeat"}\n'
        '{"channel":"ticker","type":"update","data":[{"symbol":"BTC/USD","bid":61837.5,"bid_qty":3.0,'
        '"ask":61837.7,"ask_qty":1.6052,"last":61837.6,"volume":1201.4,"vwap":61500.2,"low":59800.0,'
        '"high":62101.0,"change":1800.1,"change_pct":3.02,"timestamp":"2024-08-08T23:54:15.386723Z"}]}\n')
    replay = FileReplay(path)
    assert [(t.stream, t.kind, t.ts, t.bid, t.ask, t.bid_size, t.ask_size) for t in drain(replay)] == [
        ("BTC-USD", "quote", 1723161255357891000, 61837.6, 61837.7, 3.78826, 1.54698),
        ("BTC-USD", "quote", 1723161255386723000, 61837.5, 61837.7, 3.0, 1.6052)]
    assert any("Kraken v2 ticker" in n for n in replay.notes), replay.notes
