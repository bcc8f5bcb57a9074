"""JSON-lines tick files (`.jsonl`, `.ndjson`, `.json` of one object per line, `.gz` of them): read as the table of
their objects' fields through the same detection, maps, rejects and notes as a CSV; exchange websocket captures
(Binance trade/aggTrade/bookTicker, Coinbase Exchange matches; OKX, Bybit and Kraken v2 ticks in arrays under
`data`, Deribit's under `params.data`) known by their keys; REST dumps of one JSON array (Binance trades/aggTrades,
Coinbase trades). Real files in tmp_path."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from conftest import engine_dir
from connectors.replay import FileReplay
from engine.service.cli import main

T0 = 1_704_153_600_000  # 2024-01-02 00:00:00 UTC, in ms


def write_lines(path: Path, objects: list[dict | str]) -> Path:
    """One JSON object a line (a str is written as it is: a malformed line)."""
    text = "\n".join(o if isinstance(o, str) else json.dumps(o) for o in objects) + "\n"
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def read(path: Path | list, **kwargs) -> tuple[list, FileReplay]:
    with FileReplay(path, **kwargs) as replay:
        ticks = []
        while not replay.done:
            ticks += replay.next_batch(1000)
    return ticks, replay


def flat_trades(n: int) -> list[dict]:
    """Trades as a REST dump writes them: prices and sizes as strings, two symbols."""
    return [{"ts": T0 + 10 * i, "symbol": "BTCUSDT" if i % 3 else "ETHUSDT", "price": f"{43000.1 + i % 7:.2f}",
             "qty": f"0.{i % 9 + 1:03d}", "side": "sell" if i % 2 else "buy"} for i in range(n)]


def test_a_flat_ndjson_file_reads_as_its_csv_twin(tmp_path: Path) -> None:
    trades = flat_trades(50)
    csv = tmp_path / "trades.csv"
    pl.DataFrame(trades).write_csv(csv)
    from_csv, _ = read(csv)
    for name in ("trades.jsonl", "trades.ndjson", "trades.json", "trades.jsonl.gz"):
        ticks, replay = read(write_lines(tmp_path / name, trades))
        assert ticks == from_csv, name
        assert f"{name}: no column map given; read as ts=ts (ms), stream=symbol, price=price, size=qty, side=side" \
            in replay.notes
    assert from_csv[0].price == 43000.1 and from_csv[0].size == 0.001  # "43000.10", "0.001": exact as numbers
    assert {t.stream for t in from_csv} == {"BTCUSDT", "ETHUSDT"}


def binance_trade(i: int, event: str = "trade") -> dict:
    ids = {"t": 100 + i} if event == "trade" else {"a": 100 + i, "f": 200 + i, "l": 200 + i}
    return {"e": event, "E": T0 + 10 * i + 3, "s": "BTCUSDT", **ids, "p": f"{43000.1 + i:.2f}", "q": "0.01000",
            "T": T0 + 10 * i, "m": i % 2 == 0, "M": True}


@pytest.mark.parametrize("event", ["trade", "aggTrade"])
def test_binance_trade_events_read_at_their_trade_time_with_the_aggressor_side(tmp_path: Path, event: str) -> None:
    ticks, replay = read(write_lines(tmp_path / "capture.jsonl", [binance_trade(i, event) for i in range(4)]))
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks[:2]] == [
        ("BTCUSDT", T0 * 1_000_000, 43000.1, 0.01, "sell"),  # m true: the buyer was the maker, so the seller aggressed
        ("BTCUSDT", (T0 + 10) * 1_000_000, 43001.1, 0.01, "buy")]
    assert len(ticks) == 4 and not replay.rejected
    assert any(f"capture.jsonl: Binance {event} events: ts=T (trade time, ms)" in n for n in replay.notes)


def test_a_binance_combined_stream_reads_its_data_and_leaves_other_messages_out(tmp_path: Path) -> None:
    book = {"u": 7, "s": "BTCUSDT", "b": "43000.00", "B": "1.5", "a": "43000.20", "A": "2"}
    lines = [{"stream": "btcusdt@trade", "data": binance_trade(i)} for i in range(3)]
    lines.insert(1, {"stream": "btcusdt@bookTicker", "data": book})
    lines.append({"stream": "ethusdt@trade", "data": {**binance_trade(3), "s": "ETHUSDT", "p": "2300.5"}})
    ticks, replay = read(write_lines(tmp_path / "combined.jsonl", lines))
    assert [(t.stream, t.price) for t in ticks] == [("BTCUSDT", 43000.1), ("BTCUSDT", 43001.1),
                                                    ("BTCUSDT", 43002.1), ("ETHUSDT", 2300.5)]
    assert dict(replay.rejected) == {"filtered_out": 1}  # the bookTicker message: no time of its own, nor received
    assert "combined.jsonl line 2: filtered_out" in replay.rejected.examples["filtered_out"]
    note = next(n for n in replay.notes if "Binance trade events (inside a combined stream's data)" in n)
    assert "messages without e (bookTicker's) (1); a spot bookTicker has no time of its own, and these lines carry " \
           "no receive time" in note


RECEIVED_LAG_NS = 1_262_000_000  # the collector's clock behind the exchange's, as in the shared BTCUSDT capture


def received_capture(n: int) -> list[str]:
    """hftbacktest's `RECV_NS {"stream", "data"}` lines: trades, each with a bookTicker received 1 ms after it."""
    lines = []
    for i in range(n):
        trade = binance_trade(i)
        received = trade["T"] * 1_000_000 - RECEIVED_LAG_NS
        book = {"u": 7 + i, "s": "BTCUSDT", "b": f"{43000.0 + i:.2f}", "B": "1.5", "a": f"{43000.2 + i:.2f}", "A": "2"}
        lines += [f"{received} " + json.dumps({"stream": "btcusdt@trade", "data": trade}),
                  f"{received + 1_000_000} " + json.dumps({"stream": "btcusdt@bookTicker", "data": book})]
    return lines


def test_a_received_binance_capture_reads_its_trades_with_their_top_of_book_on_one_clock(tmp_path: Path) -> None:
    """review400 #6: a combined capture with receive times replayed its trades only (every bookTicker left out), and
    split in two its trades were stamped with their trade time, its quotes with the receive time, 1.26 s apart
    without a word. Combined: both at the receive time, in the order received; split: a caution naming the
    measured gap and the option that puts both files on the receive clock, where the two read as the capture."""
    lines = received_capture(3)
    ticks, replay = read(write_lines(tmp_path / "btcusdt_20240809.log", lines))
    received = [int(line.split()[0]) for line in lines]
    assert [(t.kind, t.ts, t.price or t.bid) for t in ticks] == [
        (kind, ts, 43000.1 + i // 2 if kind == "trade" else 43000.0 + i // 2)
        for i, (kind, ts) in enumerate(zip(["trade", "quote"] * 3, received))]
    assert not replay.rejected
    note = next(n for n in replay.notes if "Binance trade events and bookTicker messages" in n)
    assert "both stamped with ts=local_ts" in note and "T, which runs 1,262 ms ahead of it" in note
    trades = write_lines(tmp_path / "trades.log", lines[0::2])
    quotes = write_lines(tmp_path / "book_20240809.log", lines[1::2])
    _, split = read([trades, quotes])
    caution = next(n for n in split.cautions if "read on two clocks" in n)
    assert f'{trades} stamped with the exchange\'s time "T", which runs 1,262 ms ahead of its receive time' in caution
    assert "--columns ts=local_ts reads every file on the receive clock" in caution
    one_clock, agreed = read([trades, quotes], columns={"ts": "local_ts"})
    assert one_clock == ticks and not any("two clocks" in n for n in agreed.notes)


def test_a_binance_capture_takes_quotes_from_its_book_tickers_alone(tmp_path: Path) -> None:
    """A trade event's own `a` (an aggTrade's id) and `b`/`a` (an older spot trade's order ids) are no quote: read
    as one, every aggTrade beside bookTickers made a one-sided quote (missing_field) and such a trade a quote at
    prices of ids. A futures bookTicker (`e: bookTicker`, its own T) reads at T, the clock of its trades."""
    aggregated = [line.replace('"e": "trade", ', '"e": "aggTrade", "a": 17, ') if "@trade" in line else line
                  for line in received_capture(3)]
    with_ids = [line.replace('"e": "trade", ', '"e": "trade", "b": 88, "a": 50, ') for line in received_capture(3)]
    for name, lines in (("agg_20240809.log", aggregated), ("ids_20240809.log", with_ids)):
        ticks, replay = read(write_lines(tmp_path / name, lines))
        assert [(t.kind, t.bid, t.ask) for t in ticks] == [
            tick for i in range(3) for tick in (("trade", None, None), ("quote", 43000.0 + i, 43000.2 + i))], name
        assert not replay.rejected, name
    futures = []
    for i in range(3):
        trade = binance_trade(i, "aggTrade")
        book = {"e": "bookTicker", "u": 7 + i, "s": "BTCUSDT", "b": f"{43000.0 + i:.2f}", "B": "1.5",
                "a": f"{43000.2 + i:.2f}", "A": "2", "T": trade["T"] + 5, "E": trade["T"] + 6}
        futures += [{"stream": "btcusdt@aggTrade", "data": trade}, {"stream": "btcusdt@bookTicker", "data": book}]
    ticks, replay = read(write_lines(tmp_path / "futures.jsonl", futures))
    assert [(t.kind, t.ts // 1_000_000 - T0) for t in ticks] == [
        (kind, 10 * i + lag) for i in range(3) for kind, lag in (("trade", 0), ("quote", 5))]
    assert not replay.rejected and any("both at ts=T" in n for n in replay.notes)


def test_binance_book_ticker_needs_a_receive_time_named(tmp_path: Path) -> None:
    book = [{"u": 7 + i, "s": "BTCUSDT", "b": "43000.00", "B": "1.5", "a": f"43000.{20 + i}", "A": "2"}
            for i in range(3)]
    bare = write_lines(tmp_path / "book.jsonl", book)
    with pytest.raises(ValueError, match=r"book.jsonl: Binance bookTicker messages .* carry no time of their own.*"
                                         r"--columns ts=FIELD"):
        FileReplay(bare)
    stamped = write_lines(tmp_path / "book_recv.jsonl", [{**b, "recv_ms": T0 + i} for i, b in enumerate(book)])
    ticks, _ = read(stamped, columns={"ts": "recv_ms"})
    assert [(t.kind, t.ts, t.bid, t.ask, t.bid_size, t.ask_size) for t in ticks[:1]] == [
        ("quote", T0 * 1_000_000, 43000.0, 43000.2, 1.5, 2.0)]
    assert len(ticks) == 3


def coinbase_match(i: int, kind: str = "match") -> dict:
    return {"type": kind, "trade_id": 500 + i, "maker_order_id": f"m{i}", "taker_order_id": f"t{i}",
            "side": "buy" if i % 2 else "sell", "size": "0.00100000", "price": f"{42290.12 + i:.2f}",
            "product_id": "BTC-USD", "sequence": 900 + i, "time": f"2024-01-02T00:00:0{i}.123456Z"}


def test_coinbase_match_messages_flip_the_makers_side_and_count_other_types(tmp_path: Path) -> None:
    lines = [{"type": "subscriptions", "channels": [{"name": "matches", "product_ids": ["BTC-USD"]}]},
             coinbase_match(0, "last_match"),
             {"type": "heartbeat", "sequence": 901, "last_trade_id": 500, "product_id": "BTC-USD",
              "time": "2024-01-02T00:00:00.5Z"},
             coinbase_match(1),
             {"type": "ticker", "sequence": 902, "product_id": "BTC-USD", "price": "42291.12", "side": "buy",
              "time": "2024-01-02T00:00:01.2Z", "best_bid": "42291.11", "best_ask": "42291.13"},
             {"type": "heartbeat", "sequence": 903, "last_trade_id": 501, "product_id": "BTC-USD",
              "time": "2024-01-02T00:00:01.5Z"},
             coinbase_match(2)]
    ticks, replay = read(write_lines(tmp_path / "coinbase.ndjson", lines))
    # (review325 #7: the ticker beside the matches is read as a quote, its trade being the match read already)
    assert [(t.stream, t.price, t.side, t.bid) for t in ticks] == [
        ("BTC-USD", 42290.12, "buy", None),  # maker sold: a buy
        ("BTC-USD", 42291.12, "sell", None), ("BTC-USD", None, None, 42291.11), ("BTC-USD", 42292.12, "buy", None)]
    assert ticks[0].ts == 1_704_153_600_123_456_000
    assert dict(replay.rejected) == {"filtered_out": 3}
    note = next(n for n in replay.notes if "Coinbase Exchange websocket messages" in n)
    assert note.endswith("ticker read as quotes, bid=best_bid, ask=best_ask with their sizes (its trade is the match "
                         "read already); other types left out, counted as filtered_out: heartbeat (2), "
                         "subscriptions (1)")


def test_a_malformed_line_is_rejected_with_its_line_number_and_the_rest_read(tmp_path: Path) -> None:
    trades = flat_trades(6)
    lines: list[dict | str] = [*trades[:2], '{"ts": 1704153600020, "symbol": "BTCUSDT", "pri', "", "[1, 2]",
                               *trades[2:]]
    ticks, replay = read(write_lines(tmp_path / "cut.jsonl", lines))
    assert len(ticks) == 6
    assert dict(replay.rejected) == {"not_json": 2}
    assert replay.rejected.examples["not_json"].startswith(f"{tmp_path / 'cut.jsonl'} line 3: not_json: not JSON "
                                                           f"(Unterminated string")
    assert any("cut.jsonl: 2 line(s) are not JSON objects" in n for n in replay.notes)


def test_a_line_nested_too_deep_is_one_bad_row_not_the_files_end(tmp_path: Path) -> None:
    """A line of 200,000 '[' (then as many ']') stopped the whole replay with Python's bare "maximum recursion depth
    exceeded"; it is a bad row like a line that is not JSON: named by its line, the rest read."""
    trades = flat_trades(6)
    ticks, replay = read(write_lines(tmp_path / "deep.jsonl", [*trades[:3], "[" * 200_000 + "]" * 200_000,
                                                               *trades[3:]]))
    assert len(ticks) == 6
    assert dict(replay.rejected) == {"not_json": 1}
    assert replay.rejected.examples["not_json"].startswith(f"{tmp_path / 'deep.jsonl'} line 4: not_json: nested "
                                                           f"deeper than a tick's object is read")


def test_a_key_given_twice_is_rejected_as_on_the_wire_and_the_rest_read(tmp_path: Path) -> None:
    """A line with a key twice in one object replayed silently with the first value (polars'; Python's json keeps
    the last), while the wire refuses a tick map so as `duplicate_key`: rejected alike, with its line and values;
    a key twice in a message's tick, or written escaped, too; the same keys in two ticks of one message are none."""
    lines: list[dict | str] = [binance_trade(i) for i in range(4)]
    lines[2] = json.dumps(binance_trade(2)).replace('"q":', '"p": "1.00", "q":')
    lines.insert(3, json.dumps(binance_trade(9)).replace('"q":', '"\\u0070" : "2.00", "q":'))  # "p" escaped
    ticks, replay = read(write_lines(tmp_path / "dup.jsonl", lines))
    assert [t.price for t in ticks] == [43000.1, 43001.1, 43003.1]
    assert dict(replay.rejected) == {"duplicate_key": 2}
    assert replay.rejected.examples["duplicate_key"].startswith(
        f"{tmp_path / 'dup.jsonl'} line 3: duplicate_key: key \"p\" given more than once in one object (\"43002.10\", "
        f'"1.00"): which value was meant cannot be told')
    assert not any("not JSON objects" in n for n in replay.notes)
    okx = [okx_message("trades", "BTC-USDT", okx_trade(0), okx_trade(1)),
           json.dumps(okx_message("trades", "BTC-USDT", okx_trade(2))).replace('"sz":', '"px": "1.0", "sz":'),
           okx_message("trades", "BTC-USDT", okx_trade(3), okx_trade(4))]
    ticks, replay = read(write_lines(tmp_path / "okx.jsonl", okx))
    assert [t.price for t in ticks] == [42219.9, 42220.9, 42222.9, 42223.9]
    assert dict(replay.rejected) == {"duplicate_key": 1}
    assert 'okx.jsonl line 2: duplicate_key: key "px" given more than once' in replay.rejected.examples["duplicate_key"]


def okx_trade(i: int, inst: str = "BTC-USDT") -> dict:
    return {"instId": inst, "tradeId": f"{130639474 + i}", "px": f"{42219.9 + i:.1f}", "sz": f"0.{i + 1:04d}",
            "side": "sell" if i % 2 else "buy", "ts": str(T0 + i), "count": "1"}


def okx_message(channel: str, inst: str, *data: dict) -> dict:
    return {"arg": {"channel": channel, "instId": inst}, "data": list(data)}


def test_okx_trades_read_one_row_per_tick_named_by_the_messages_line(tmp_path: Path) -> None:
    lines: list[dict | str] = [
        {"event": "subscribe", "arg": {"channel": "trades", "instId": "BTC-USDT"}, "connId": "a4d3ae55"},
        okx_message("trades", "BTC-USDT", okx_trade(0), okx_trade(1)),
        "pong",
        okx_message("trades", "ETH-USDT", {**okx_trade(2, "ETH-USDT"), "px": "2300.5", "sz": "-1"}),
        okx_message("trades", "BTC-USDT", okx_trade(3))]
    ticks, replay = read(write_lines(tmp_path / "okx.jsonl", lines))
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == [
        ("BTC-USDT", T0 * 1_000_000, 42219.9, 0.0001, "buy"),
        ("BTC-USDT", (T0 + 1) * 1_000_000, 42220.9, 0.0002, "sell"),
        ("BTC-USDT", (T0 + 3) * 1_000_000, 42222.9, 0.0004, "sell")]
    assert dict(replay.rejected) == {"filtered_out": 1, "not_json": 1, "negative_size": 1}
    examples = replay.rejected.examples
    assert "okx.jsonl line 1: filtered_out: a message without ticks (subscribe)" in examples["filtered_out"]
    assert "okx.jsonl line 3: not_json" in examples["not_json"]
    assert "okx.jsonl line 4: negative_size" in examples["negative_size"]  # its message's line, not its row
    assert "okx.jsonl: OKX trades: ts=ts (ms), stream=instId, price=px, size=sz, side (the taker's); one row per " \
        "tick of each message's data; messages without ticks left out, counted as filtered_out: subscribe (1)" \
        in replay.notes


def test_bybit_public_trades_skip_the_acks(tmp_path: Path) -> None:
    def trade(i: int) -> dict:
        return {"T": T0 + i, "s": "BTCUSDT", "S": "Sell" if i else "Buy", "v": f"0.00{i + 1}",
                "p": f"{16578.5 - i / 2:.2f}", "L": "PlusTick", "i": f"20f43950-d8dd-5b31-9112-a178eb6023a{i}",
                "BT": False}

    lines = [{"success": True, "ret_msg": "subscribe", "conn_id": "cl6u4qj4", "req_id": "", "op": "subscribe"},
             {"topic": "publicTrade.BTCUSDT", "type": "snapshot", "ts": T0 + 2, "data": [trade(0), trade(1)]},
             {"success": True, "ret_msg": "pong", "conn_id": "cl6u4qj4", "req_id": "", "op": "ping"},
             {"topic": "publicTrade.BTCUSDT", "type": "snapshot", "ts": T0 + 9, "data": [trade(2)]}]
    ticks, replay = read(write_lines(tmp_path / "bybit.jsonl", lines))
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == [
        ("BTCUSDT_PERP", T0 * 1_000_000, 16578.5, 0.001, "buy"),  # a linear perpetual's trades (L): fix327 #5
        ("BTCUSDT_PERP", (T0 + 1) * 1_000_000, 16578.0, 0.002, "sell"),
        ("BTCUSDT_PERP", (T0 + 2) * 1_000_000, 16577.5, 0.003, "sell")]
    assert dict(replay.rejected) == {"filtered_out": 2}
    assert any(n.startswith("bybit.jsonl: Bybit publicTrade: ts=T (ms), stream=s") and
               n.endswith("messages without ticks left out, counted as filtered_out: subscribe (1), ping (1)")
               for n in replay.notes), replay.notes


KRAKEN_STATUS = {"channel": "status", "type": "update", "data": [
    {"api_version": "v2", "connection_id": 12393906104898154338, "system": "online", "version": "2.0.0"}]}
KRAKEN_ACK = {"method": "subscribe", "result": {"channel": "trade", "snapshot": True, "symbol": "BTC/USD"},
              "success": True, "time_in": "2023-09-25T09:04:31.742599Z", "time_out": "2023-09-25T09:04:31.742648Z"}


def kraken_trades(kind: str, *trades: tuple[str, str, float, float]) -> dict:
    return {"channel": "trade", "type": kind, "data": [
        {"symbol": symbol, "side": side, "price": price, "qty": qty, "ord_type": "market", "trade_id": 4665906 + i,
         "timestamp": f"2023-09-25T07:49:3{i}.708706Z"} for i, (symbol, side, price, qty) in enumerate(trades)]}


def test_kraken_v2_trades_with_slashed_symbols_and_status_heartbeats_left_out(tmp_path: Path) -> None:
    lines = [KRAKEN_STATUS, KRAKEN_ACK, kraken_trades("snapshot", ("BTC/USD", "buy", 26212.2, 0.0012)),
             {"channel": "heartbeat"}, kraken_trades("update", ("BTC/USD", "sell", 26212.1, 0.5),
                                                     ("BTC/USD", "buy", 26212.3, 0.02))]
    ticks, replay = read(write_lines(tmp_path / "kraken.jsonl", lines))
    t0 = 1_695_628_170_708_706_000  # 2023-09-25T07:49:30.708706Z
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == [
        ("BTC-USD", t0, 26212.2, 0.0012, "buy"), ("BTC-USD", t0, 26212.1, 0.5, "sell"),
        ("BTC-USD", t0 + 1_000_000_000, 26212.3, 0.02, "buy")]
    assert dict(replay.rejected) == {"filtered_out": 3}
    note = next(n for n in replay.notes if n.startswith("kraken.jsonl: Kraken v2 trade: ts=timestamp (ISO)"))
    assert note.endswith("other channels' ticks left out, counted as filtered_out: status (1); messages without "
                         "ticks left out, counted as filtered_out: subscribe (1), heartbeat (1)")
    assert "kraken.jsonl: stream names with '/' replay with '-' instead (EUR/USD as EUR-USD): answer topics use '/' " \
           "as their separator; it may be another venue's name too: name it by venue, e.g. \"EUR-USD.kraken\"" in \
           replay.notes


def deribit_trades(instrument: str, *trades: tuple[int, str, float, float]) -> dict:
    """A Deribit `trades.{instrument}.raw` subscription message (JSON-RPC): its trades in `params.data`."""
    return {"jsonrpc": "2.0", "method": "subscription", "params": {"channel": f"trades.{instrument}.raw", "data": [
        {"trade_seq": 1000 + ms, "trade_id": f"{300000 + ms}", "timestamp": T0 + ms, "tick_direction": 0,
         "price": price, "mark_price": price - 0.5, "iv": None, "instrument_name": instrument, "index_price": price - 9,
         "direction": side, "amount": amount} for ms, side, price, amount in trades]}}


def test_deribit_trades_subscription_reads_its_params_data(tmp_path: Path) -> None:
    """Review 163 (finding 8): Deribit's websocket capture (`{"method": "subscription", "params": {"channel":
    "trades.BTC-PERPETUAL.raw", "data": [...]}}`) was refused with a --columns map, which cannot reach ticks nested
    under `params.data`. Its trades read as other venues' arrays under `data` do: stream instrument_name, side
    direction, size amount, time timestamp (ms); the subscription's ack and heartbeats are filtered_out."""
    ack = {"jsonrpc": "2.0", "id": 42, "result": ["trades.BTC-PERPETUAL.raw", "trades.BTC-29MAR24.raw"],
           "usIn": 1704153599990000, "usOut": 1704153599990100, "usDiff": 100, "testnet": False}
    heartbeat = {"jsonrpc": "2.0", "method": "heartbeat", "params": {"type": "heartbeat"}}
    lines = [ack, deribit_trades("BTC-PERPETUAL", (0, "buy", 42000.5, 10.0), (0, "sell", 42000.0, 20.0)),
             heartbeat, deribit_trades("BTC-29MAR24", (3, "sell", 42900.5, 50.0)),
             deribit_trades("BTC-PERPETUAL", (7, "buy", 0.0, 10.0))]
    ticks, replay = read(write_lines(tmp_path / "deribit_ws.jsonl", lines))
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == [
        ("BTC-PERPETUAL", T0 * 1_000_000, 42000.5, 10.0, "buy"), ("BTC-PERPETUAL", T0 * 1_000_000, 42000.0, 20.0,
                                                                 "sell"),
        ("BTC-29MAR24", (T0 + 3) * 1_000_000, 42900.5, 50.0, "sell")]
    assert dict(replay.rejected) == {"filtered_out": 2, "nonpositive_price": 1}
    assert "deribit_ws.jsonl line 5: nonpositive_price" in replay.rejected.examples["nonpositive_price"]
    note = next(n for n in replay.notes if n.startswith("deribit_ws.jsonl: Deribit trades"))
    assert note == ("deribit_ws.jsonl: Deribit trades (JSON-RPC subscription, ticks in params.data): ts=timestamp "
                    "(ms), stream=instrument_name, price, size=amount, side=direction (the taker's); one row per tick "
                    "of each message's data; messages without ticks left out, counted as filtered_out: message "
                    "without ticks (1), heartbeat (1)"), note


def test_okx_bbo_tbt_and_tickers_read_as_quotes(tmp_path: Path) -> None:
    def bbo(i: int, bids: list) -> dict:
        return okx_message("bbo-tbt", "BTC-USDT", {"asks": [[f"42220.{i + 1}", "0.5", "0", "3"]], "bids": bids,
                                                   "ts": str(T0 + i), "seqId": 3000 + i})

    lines = [{"event": "subscribe", "arg": {"channel": "bbo-tbt", "instId": "BTC-USDT"}, "connId": "a4d3ae55"},
             bbo(0, [["42220.0", "1.25", "0", "7"]]), bbo(1, [])]
    ticks, replay = read(write_lines(tmp_path / "bbo.jsonl", lines))
    assert [(t.kind, t.stream, t.ts, t.bid, t.ask, t.bid_size, t.ask_size) for t in ticks] == [
        ("quote", "BTC-USDT", T0 * 1_000_000, 42220.0, 42220.1, 1.25, 0.5)]  # bbo-tbt's ticks name no instId: arg's
    assert dict(replay.rejected) == {"filtered_out": 1, "missing_field": 1}  # no bids: a one-sided quote
    assert "bbo.jsonl line 3: missing_field: bid is empty" in replay.rejected.examples["missing_field"]
    ticker = {"instType": "SPOT", "instId": "ETH-USDT", "last": "2300.1", "lastSz": "0.1", "askPx": "2300.2",
              "askSz": "11", "bidPx": "2300.1", "bidSz": "5", "open24h": "2250", "high24h": "2310", "low24h": "2240",
              "sodUtc0": "2260", "sodUtc8": "2270", "volCcy24h": "1000", "vol24h": "0.5", "ts": str(T0)}
    ticks, replay = read(write_lines(tmp_path / "tickers.jsonl", [okx_message("tickers", "ETH-USDT", ticker)]))
    assert [(t.kind, t.stream, t.ts, t.bid, t.ask, t.bid_size, t.ask_size) for t in ticks] == [
        ("quote", "ETH-USDT", T0 * 1_000_000, 2300.1, 2300.2, 5.0, 11.0)]
    assert any(n.startswith("tickers.jsonl: OKX tickers: quotes bid=bidPx") for n in replay.notes)


def test_a_capture_of_trades_and_bbo_replays_its_trades(tmp_path: Path) -> None:
    bbo = okx_message("bbo-tbt", "BTC-USDT", {"asks": [["42220.1", "0.5", "0", "3"]],
                                              "bids": [["42220.0", "1", "0", "7"]], "ts": str(T0), "seqId": 1})
    ticks, replay = read(write_lines(tmp_path / "both.jsonl", [bbo, okx_message("trades", "BTC-USDT", okx_trade(0)),
                                                               bbo]))
    assert [(t.kind, t.price) for t in ticks] == [("trade", 42219.9)]
    assert dict(replay.rejected) == {"filtered_out": 2}
    assert any("other channels' ticks left out, counted as filtered_out: bbo-tbt (2)" in n for n in replay.notes)


def test_ticks_in_arrays_of_an_unknown_exchange_are_detected_as_any_table(tmp_path: Path) -> None:
    lines = [{"ch": "market.btcusdt.trade", "data": [{"ts": T0 + i, "symbol": "btcusdt", "price": "43000.5",
                                                      "amount": "0.2", "direction": "buy"} for i in range(2)]},
             {"ping": 1704153600123}]
    ticks, replay = read(write_lines(tmp_path / "other.jsonl", lines))
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == [
        ("btcusdt", T0 * 1_000_000, 43000.5, 0.2, "buy"), ("btcusdt", (T0 + 1) * 1_000_000, 43000.5, 0.2, "buy")]
    assert dict(replay.rejected) == {"filtered_out": 1}
    assert any("its messages hold their ticks in arrays under 'data': one row per tick" in n for n in replay.notes)


def test_a_file_of_json_arrays_a_line_is_still_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no line is a JSON object"):  # Kraken v1's messages
        FileReplay(write_lines(tmp_path / "kraken.jsonl", [[0, [["43000.1", "0.1"]], "trade", "XBT/USD"]] * 2))


BINANCE_REST_TRADES = [  # GET /api/v3/trades?symbol=BTCUSDT, saved as it came (two-space indents)
    {"id": 3342105080, "price": "42219.90000000", "qty": "0.01200000", "quoteQty": "506.63880000", "time": T0 + 5,
     "isBuyerMaker": True, "isBestMatch": True},
    {"id": 3342105081, "price": "42220.00000000", "qty": "0.50000000", "quoteQty": "21110.00000000",
     "time": T0 + 9, "isBuyerMaker": False, "isBestMatch": True}]


def test_a_binance_rest_dump_needs_its_stream_named_by_the_file_or_the_map(tmp_path: Path) -> None:
    dump = tmp_path / "trades.json"
    dump.write_text(json.dumps(BINANCE_REST_TRADES, indent=2))
    with pytest.raises(ValueError, match=r"trades.json: a REST dump \(one JSON array of records\) whose records name "
                                         r"no instrument, nor does its file name: .*--columns stream_name=NAME"):
        FileReplay(dump)
    expected = [("BTCUSDT", (T0 + 5) * 1_000_000, 42219.9, 0.012, "sell"),  # buyer the maker: the seller aggressed
                ("BTCUSDT", (T0 + 9) * 1_000_000, 42220.0, 0.5, "buy")]
    ticks, replay = read(dump, columns={"stream": "BTCUSDT"})
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == expected
    assert any(n.startswith("trades.json: Binance REST trades (/api/v3/trades): ts=time (ms)") for n in replay.notes)
    named = tmp_path / "BTCUSDT-trades-2024-01-02.json"
    named.write_text(json.dumps(BINANCE_REST_TRADES))
    ticks, _ = read(named)
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == expected


def test_binance_rest_agg_trades_name_a_bad_record_by_its_place(tmp_path: Path) -> None:
    agg = [{"a": 26129 + i, "p": f"{2300.5 + i:.8f}", "q": "4.70443515", "f": 27781 + i, "l": 27781 + i, "T": T0 + i,
            "m": i % 2 == 0, "M": True} for i in range(3)]
    agg[1]["p"] = "-1"
    dump = tmp_path / "ETHUSDT_aggTrades.json"
    dump.write_text(json.dumps(agg))
    ticks, replay = read(dump)
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == [
        ("ETHUSDT", T0 * 1_000_000, 2300.5, 4.70443515, "sell"), ("ETHUSDT", (T0 + 2) * 1_000_000, 2302.5, 4.70443515,
                                                                  "sell")]
    assert "ETHUSDT_aggTrades.json record 2: nonpositive_price" in replay.rejected.examples["nonpositive_price"]


def test_a_rest_dump_record_with_a_key_twice_is_rejected_as_a_line_is(tmp_path: Path) -> None:
    """A record of one JSON array holding a key twice took polars' first value without a word, where a JSON-lines
    line so is rejected as duplicate_key: such a record is rejected alike, named by its record and line, on one line
    or pretty-printed, also in a nested object; the same keys in the next record are no repeat."""
    trades = [{**BINANCE_REST_TRADES[i % 2], "id": 3342105080 + i, "time": T0 + i} for i in range(5)]
    for indent in (None, 2):
        text = json.dumps(trades, indent=indent)
        second = text.index('"qty"', text.index("3342105081"))
        text = text[:second] + '"price": "1.00", ' + text[second:]  # record 2: its price, then another
        dump = tmp_path / "BTCUSDT-trades.json"
        dump.write_text(text)
        ticks, replay = read(dump)
        assert [t.ts // 1_000_000 - T0 for t in ticks] == [0, 2, 3, 4]
        assert dict(replay.rejected) == {"duplicate_key": 1}
        assert replay.rejected.examples["duplicate_key"].startswith(
            f'{dump} record 2: duplicate_key: key "price" given more than once in one object ("42220.00000000", '
            f'"1.00"): which value was meant cannot be told (the record at line {11 if indent else 1}): ')
    nested = [{**trade, "fee": {"asset": "BNB", "amount": "0.1"}} for trade in trades]
    text = json.dumps(nested).replace('"amount": "0.1"}', '"amount": "0.1", "asset": "BTC"}', 1)
    dump.write_text(text)
    ticks, replay = read(dump)
    assert len(ticks) == 4 and dict(replay.rejected) == {"duplicate_key": 1}
    assert f'{dump} record 1: duplicate_key: key "asset" given more than once' in replay.rejected.examples[
        "duplicate_key"]
    dump.write_text(json.dumps(nested))
    ticks, replay = read(dump)
    assert len(ticks) == 5 and not replay.rejected


def test_a_coinbase_rest_dump_flips_the_makers_side_and_sorts_by_time(tmp_path: Path) -> None:
    """GET /products/BTC-USD/trades: newest first, `side` the maker's (sell: an uptick, a taker's buy)."""
    page = [{"trade_id": 574381025, "side": "sell", "size": "0.01000000", "price": "42220.01",
             "time": "2024-01-02T00:00:01.578544Z"},
            {"trade_id": 574381024, "side": "buy", "size": "0.02000000", "price": "42219.99",
             "time": "2024-01-02T00:00:00.5Z"}]
    dump = tmp_path / "coinbase-BTC-USD.json"
    dump.write_text(json.dumps(page))
    ticks, replay = read(dump)
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == [
        ("BTC-USD", T0 * 1_000_000 + 500_000_000, 42219.99, 0.02, "sell"),
        ("BTC-USD", T0 * 1_000_000 + 1_578_544_000, 42220.01, 0.01, "buy")]
    assert any(n.startswith("coinbase-BTC-USD.json: Coinbase Exchange REST trades (/products/{id}/trades): the "
                            "coinbase-trades preset, side flipped") for n in replay.notes)



def test_a_coinbase_rest_dump_s_note_gives_its_keys_not_its_name_as_the_reason(tmp_path: Path) -> None:
    """review 174, finding 6: ADA-USD-trades.json, known by its JSON keys, was said to have a name that says
    Coinbase. A CSV of those columns is flipped only by its name, and says so."""
    page = [{"trade_id": 9 - i, "side": ("buy", "sell")[i % 2], "size": "0.1", "price": f"{0.45 + i * 0.001:.3f}",
             "time": f"2024-01-02T00:00:0{9 - i}.5Z"} for i in range(10)]
    dump = tmp_path / "ADA-USD-trades.json"
    dump.write_text(json.dumps(page))
    ticks, replay = read(dump)
    assert {t.stream for t in ticks} == {"ADA-USD"}
    said = [n for n in replay.notes if "MAKER's side" in n]
    assert said == ["ADA-USD-trades.json: its records are Coinbase Exchange's REST trades, known by their JSON keys: "
                    "\"side\" is the MAKER's side, read flipped to the aggressor's (buy = sell, sell = buy), as "
                    "--preset coinbase-trades reads it; a full map (--columns "
                    "ts=time,price=price,size=size,side=side) reads the sides as they are"], replay.notes
    csv = tmp_path / "coinbase-ADA-USD.csv"
    csv.write_text("trade_id,side,size,price,time\n" + "".join(
        f"{r['trade_id']},{r['side']},{r['size']},{r['price']},{r['time']}\n" for r in page))
    _, replay = read(csv)
    assert any(n.startswith("coinbase-ADA-USD.csv: its columns are Coinbase Exchange's trades layout and its name "
                            "says Coinbase: \"side\" is the MAKER's side") for n in replay.notes), replay.notes

def test_flattened_okx_kraken_and_bybit_records_read_as_the_docs_say(tmp_path: Path) -> None:
    """What `jq -c '.data[]'` writes of their websocket messages: OKX's epoch ms as a string, Kraken v2's ISO
    times, Bybit's single letters with the map docs/replay.md gives."""
    okx = [{"instId": "BTC-USDT", "tradeId": f"{i}", "px": f"4300{i}.1", "sz": "0.1", "side": "buy",
            "ts": str(T0 + i), "count": "1"} for i in range(3)]
    ticks, replay = read(write_lines(tmp_path / "okx.jsonl", okx))
    assert [(t.stream, t.ts, t.price, t.side) for t in ticks[:1]] == [("BTC-USDT", T0 * 1_000_000, 43000.1, "buy")]
    assert "okx.jsonl: no column map given; read as ts=ts (ms), stream=instId, price=px, size=sz, side=side" \
        in replay.notes
    kraken = [{"symbol": "BTC/USD", "side": "sell", "price": 43000.1 + i, "qty": 0.1, "ord_type": "market",
               "trade_id": i, "timestamp": f"2024-01-02T00:00:0{i}.123456Z"} for i in range(3)]
    ticks, _ = read(write_lines(tmp_path / "kraken.jsonl", kraken))
    assert (ticks[0].stream, ticks[0].ts, ticks[0].side) == ("BTC-USD", T0 * 1_000_000 + 123_456_000, "sell")
    bybit = [{"T": T0 + i, "s": "BTCUSDT", "S": "Sell" if i else "Buy", "v": "0.001", "p": "16578.50",
              "L": "PlusTick", "i": f"id{i}", "BT": False} for i in range(3)]
    ticks, _ = read(write_lines(tmp_path / "bybit.jsonl", bybit),
                    columns={"ts": "T", "stream_col": "s", "price": "p", "size": "v", "side": "S"})
    assert [(t.stream, t.price, t.size, t.side) for t in ticks[:2]] == [("BTCUSDT_PERP", 16578.5, 0.001, "buy"),
                                                                        ("BTCUSDT_PERP", 16578.5, 0.001, "sell")]


QUERIES = "queries:\n  - {name: dir5, streams: ['*'], question: direction_5, kind: choice, trigger: {ticks: 5}}\n"


@pytest.fixture(scope="module")
def engine_files(tmp_path_factory) -> Path:
    return engine_dir(tmp_path_factory.mktemp("jsonl"), QUERIES)


def test_backtest_of_a_jsonl_capture_from_the_cli_with_streams(engine_files: Path, tmp_path: Path, capsys) -> None:
    lines: list[dict | str] = [{"stream": f"{s.lower()}@trade", "data": {**binance_trade(i), "s": s}}
                               for i in range(60) for s in ("BTCUSDT", "ETHUSDT")]
    lines.insert(7, "not json")
    capture = write_lines(tmp_path / "capture.jsonl", lines)
    out = tmp_path / "answers.parquet"
    code = main(["backtest", str(capture), "--queries", str(engine_files / "q.yaml"), "--out", str(out),
                 "--config", str(engine_files / "engine.yaml"), "--quiet", "--streams", "ETH*"])
    printed, err = capsys.readouterr()
    assert code == 0, err
    assert "replayed 60 ticks" in printed, printed
    assert "Binance trade events (inside a combined stream's data)" in err
    assert "not_json: 1" in printed + err and "capture.jsonl line 8" in printed + err
    assert set(pl.read_parquet(out)["stream"].unique()) == {"ETHUSDT"}


def test_backtest_of_a_kraken_capture_and_a_rest_dump_from_the_cli(engine_files: Path, tmp_path: Path,
                                                                    capsys) -> None:
    trades = [(symbol, "buy" if i % 3 else "sell", 26212.2 + i % 5, 0.01) for i in range(40)
              for symbol in ("BTC/USD", "ETH/USD")]
    capture = write_lines(tmp_path / "kraken.jsonl", [KRAKEN_STATUS, KRAKEN_ACK, {"channel": "heartbeat"},
                                                      *(kraken_trades("update", *trades[i:i + 8])
                                                        for i in range(0, 80, 8))])
    out = tmp_path / "answers.parquet"
    argv = ["--queries", str(engine_files / "q.yaml"), "--config", str(engine_files / "engine.yaml"), "--quiet"]
    code = main(["backtest", str(capture), *argv, "--out", str(out), "--streams", "BTC-USD"])
    printed, err = capsys.readouterr()
    assert code == 0, err
    assert "replayed 40 ticks" in printed, printed
    assert "Kraken v2 trade: ts=timestamp (ISO)" in err
    assert set(pl.read_parquet(out)["stream"].unique()) == {"BTC-USD"}
    dump = tmp_path / "trades.json"
    dump.write_text(json.dumps(BINANCE_REST_TRADES))
    code = main(["backtest", str(dump), *argv, "--out", str(tmp_path / "rest.parquet")])
    assert code != 0 and "--columns stream_name=NAME" in capsys.readouterr().err
    code = main(["backtest", str(dump), *argv, "--out", str(tmp_path / "rest.parquet"), "--columns",
                 "stream_name=BTCUSDT"])
    printed, err = capsys.readouterr()
    assert code == 0 and "replayed 2 ticks" in printed, err


def alpaca_records(symbol: str, i0: int, kind: str) -> list[dict]:
    """Alpaca v2 market-data records: trades (t, x, p, s, c, i, z) or quotes (t, ax, ap, as, bx, bp, bs, c, z)."""
    price = {"AAPL": 187.15, "MSFT": 370.60}[symbol]
    stamps = [f"2024-01-02T14:30:0{i0 + i}.12345678{i}Z" for i in range(3)]
    if kind == "trades":
        return [{"t": t, "x": "V", "p": round(price + i / 100, 2), "s": 100 * (i + 1), "c": ["@"], "i": 52983 + i,
                 "z": "C"} for i, t in enumerate(stamps)]
    return [{"t": t, "ax": "V", "ap": round(price + 0.01, 2), "as": 2, "bx": "Q", "bp": round(price - 0.01, 2),
             "bs": i + 1, "c": ["R"], "z": "C"} for i, t in enumerate(stamps)]


@pytest.mark.parametrize("kind", ["trades", "quotes"])
def test_alpaca_responses_keyed_by_symbol_or_beside_it(tmp_path: Path, kind: str) -> None:
    """review231 #6: Alpaca's `{"trades": {"AAPL": [...], "MSFT": [...]}, "next_page_token": null}` was refused
    (`columns found ['trades', 'next_page_token']`), and no map reached the records. Each key is now its records'
    stream; the single-symbol response (`{"trades": [...], "symbol": "AAPL"}`) reads the same; times to the ns."""
    path = tmp_path / f"alpaca_{kind}.json"
    keyed = {"AAPL": alpaca_records("AAPL", 0, kind), "MSFT": alpaca_records("MSFT", 1, kind)}
    path.write_text(json.dumps({kind: keyed, "next_page_token": None}))
    ticks, replay = read(path)
    first = 1_704_205_800_123_456_780  # 2024-01-02T14:30:00.123456780Z
    assert [(t.stream, t.ts) for t in ticks][:3] == [("AAPL", first), ("MSFT", first + 10**9),
                                                     ("AAPL", first + 10**9 + 1)]
    if kind == "trades":
        assert [(t.price, t.size) for t in ticks if t.stream == "MSFT"] == [(370.6, 100), (370.61, 200),
                                                                            (370.62, 300)]
    else:
        assert [(t.bid, t.ask, t.bid_size) for t in ticks if t.stream == "AAPL"][0] == (187.14, 187.16, 1)
    assert any(f"Alpaca {kind}" in n for n in replay.notes)
    one = tmp_path / "alpaca_AAPL.json"
    one.write_text(json.dumps({kind: alpaca_records("AAPL", 0, kind), "symbol": "AAPL", "next_page_token": None}))
    assert [(t.stream, t.ts) for t in read(one)[0]] == [(t.stream, t.ts) for t in ticks if t.stream == "AAPL"]


def htx_trades(ts: int, *trades: tuple[float, float, str]) -> list[dict]:
    return [{"id": 10**20 + ts + k, "ts": T0 + ts, "tradeId": 10**8 + ts + k, "amount": amount, "price": price,
             "direction": side} for k, (price, amount, side) in enumerate(trades)]


def test_htx_trades_nested_in_tick_data_and_in_data_data(tmp_path: Path) -> None:
    """review231 #6: HTX's websocket (`{"ch": "market.btcusdt.trade.detail", "tick": {"data": [...]}}`) and REST
    history (`{"data": [{"data": [...]}, ...]}`, newest first) held their trades where no map reached them; the
    stream is in `ch` alone. Both read: stream btcusdt, ms times, direction as the side, rejects by their line."""
    ch = "market.btcusdt.trade.detail"
    ack = {"id": "id1", "status": "ok", "subbed": ch, "ts": T0}
    ws = write_lines(tmp_path / "htx_ws.jsonl", [ack] + [
        {"ch": ch, "ts": T0 + ts + 3, "tick": {"id": ts, "ts": T0 + ts, "data": htx_trades(ts, *trades)}}
        for ts, trades in ((5, [(42000.1, 0.5, "buy"), (42000.2, 0.25, "sell")]), (9, [(0.0, 1.0, "buy")]))])
    ticks, replay = read(ws)
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == [
        ("btcusdt", (T0 + 5) * 10**6, 42000.1, 0.5, "buy"), ("btcusdt", (T0 + 5) * 10**6, 42000.2, 0.25, "sell")]
    assert dict(replay.rejected) == {"filtered_out": 1, "nonpositive_price": 1}
    assert "htx_ws.jsonl line 3: nonpositive_price" in replay.rejected.examples["nonpositive_price"]
    assert any("only in 'ch'" in n for n in replay.notes)
    rest = tmp_path / "htx_history.json"
    rest.write_text(json.dumps({"ch": ch, "status": "ok", "ts": T0 + 20, "data": [
        {"id": 2, "ts": T0 + 9, "data": htx_trades(9, (42000.4, 0.1, "sell"))},
        {"id": 1, "ts": T0 + 5, "data": htx_trades(5, (42000.3, 0.2, "buy"), (42000.2, 0.3, "buy"))}]}))
    assert [(t.stream, t.ts, t.price, t.side) for t in read(rest)[0]] == [
        ("btcusdt", (T0 + 5) * 10**6, 42000.2, "buy"), ("btcusdt", (T0 + 5) * 10**6, 42000.3, "buy"),
        ("btcusdt", (T0 + 9) * 10**6, 42000.4, "sell")]


def test_ticks_nested_where_nothing_unwraps_them_are_said_with_the_way_out(tmp_path: Path) -> None:
    """review231 #6: a file whose ticks sit in arrays no reading unwraps (Bybit's REST `result.list`) was refused
    with a column map to give, which cannot reach them; the refusal names where they are and how to lift them."""
    trade = {"execTime": "1704153600000", "symbol": "BTCUSDT", "price": "42000.1", "size": "0.1", "side": "Buy"}
    path = tmp_path / "bybit_rest.json"
    path.write_text(json.dumps({"retCode": 0, "result": {"category": "spot", "list": [trade] * 3}}))
    with pytest.raises(ValueError, match=r'arrays of objects under "result\.list".* no column map reaches them') as e:
        FileReplay(path)
    assert "jq -c '.result.list[]' bybit_rest.json > ticks.jsonl" in str(e.value) and "--columns" not in str(e.value)
    pages = tmp_path / "pages.json"
    pages.write_text(json.dumps([{"page": 1, "items": [trade]}]))
    with pytest.raises(ValueError, match=r"jq -c '\.\[\]\.items\[\]' pages\.json"):
        FileReplay(pages)
