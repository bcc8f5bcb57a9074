"""review336 #1-#4: one instrument, one stream, whatever the message type and the file's name. A Bybit capture of
publicTrade and orderbook.1 in one file reads both on one stream; the evidence of a derivatives market is the data's
own (Bybit's tick direction `L`, BitMEX's message keys) or a path that says its Bybit category, never a file name
that merely starts with "bybit"; a spot pair and a dated future keep the names the venue (and Tardis.dev) gives
them. Every file is written here in the venue's own layout."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from conftest import drain
from connectors.replay import FileReplay

T0_MS = 1_764_547_200_000  # 2025-12-01 00:00:00 UTC


def trade(i: int, tick_direction: bool = True) -> dict:
    tick = {"T": T0_MS + i * 100 - 2, "s": "BTCUSDT", "S": "Buy" if i % 2 else "Sell", "v": "0.010",
            "p": f"{91000 + i / 10:.2f}", "i": f"id{i}", "BT": False}
    if tick_direction:  # Bybit: "unique to perps & futures"
        tick["L"] = "PlusTick"
    return {"topic": "publicTrade.BTCUSDT", "type": "snapshot", "ts": T0_MS + i * 100, "data": [tick]}


def book(i: int, bid: str | None, ask: str | None) -> dict:
    data = {"s": "BTCUSDT", "b": [[bid, "1.5"]] if bid else [], "a": [[ask, "2.0"]] if ask else [], "u": i,
            "seq": 1000 + i}
    return {"topic": "orderbook.1.BTCUSDT", "type": "snapshot" if i == 1 else "delta", "ts": T0_MS + i * 100,
            "data": data, "cts": T0_MS + i * 100 - 1}


def write(path: Path, messages: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(m) + "\n" for m in messages))
    return path


def read(path: Path) -> tuple[list, list[str]]:
    replay = FileReplay(path)
    return drain(replay), replay.notes


def test_a_bybit_capture_of_trades_and_top_of_book_reads_both_on_one_stream(tmp_path: Path) -> None:
    pong = {"success": True, "ret_msg": "pong", "conn_id": "c1", "op": "ping"}
    capture = write(tmp_path / "bybit_capture_2025-12-01.jsonl", [
        pong, trade(0), book(1, "91000.00", "91000.10"), trade(2), book(3, "91000.05", None), trade(4),
        book(5, None, "91000.20")])
    ticks, notes = read(capture)
    assert Counter((t.stream, t.kind) for t in ticks) == {("BTCUSDT_PERP", "trade"): 3, ("BTCUSDT_PERP", "quote"): 3}
    quotes = [t for t in ticks if t.kind == "quote"]
    # each delta's unchanged side from the stream's last quote; a quote stamped with its message's ts
    assert [(q.bid, q.ask) for q in quotes] == [(91000.0, 91000.1), (91000.05, 91000.1), (91000.05, 91000.2)]
    assert quotes[0].ts == (T0_MS + 100) * 10**6
    trades = [t for t in ticks if t.kind == "trade"]
    assert [t.ts for t in trades] == [(T0_MS + i * 100 - 2) * 10**6 for i in (0, 2, 4)]
    assert any("Bybit publicTrade and Bybit orderbook.1 messages in one capture" in n for n in notes)
    assert not any("supertype" in n for n in notes)
    assert not any("another clock, not read" in n for n in notes), notes  # (review431 #2: its quotes' stamp)


def test_a_bybit_tickers_capture_reads_its_top_of_book_as_quotes_of_the_linear_contract(tmp_path: Path) -> None:
    """review431 #4: Bybit v5 tickers (top of book beside mark, index and funding) were not recognised; read with a
    map, the subscribe ack was a rejection and the linear contract the spot stream. Now: quotes of the best level
    stamped with the message's ts, a delta's unchanged fields kept, a mark/funding-only delta and the ack no tick
    (filtered_out), on BTCUSDT_PERP as the capture's trades are."""
    def ticker(i: int, **fields: str) -> dict:
        kind = "snapshot" if i == 0 else "delta"
        return {"topic": "tickers.BTCUSDT", "type": kind, "data": {"symbol": "BTCUSDT", **fields}, "cs": i,
                "ts": T0_MS + i * 100}

    ack = {"success": True, "ret_msg": "", "conn_id": "c1", "op": "subscribe"}
    capture = write(tmp_path / "linear" / "tickers.jsonl", [
        ack, ticker(0, bid1Price="91000.0", bid1Size="1.5", ask1Price="91000.1", ask1Size="2.0", markPrice="91000.2",
                    fundingRate="0.0001"),
        ticker(1, bid1Price="91000.05", bid1Size="0.5"), ticker(2, markPrice="91000.3", fundingRate="0.0002")])
    replay = FileReplay(capture)
    assert [(t.stream, t.kind, t.ts // 10**6, t.bid, t.bid_size, t.ask, t.ask_size) for t in drain(replay)] == [
        ("BTCUSDT_PERP", "quote", T0_MS, 91000.0, 1.5, 91000.1, 2.0),
        ("BTCUSDT_PERP", "quote", T0_MS + 100, 91000.05, 0.5, 91000.1, 2.0)]
    assert replay.stats()["rejected"] == {"filtered_out": 2}
    assert any("Bybit tickers: quotes of the best level" in note for note in replay.notes), replay.notes
    assert not any("another clock" in note for note in replay.notes), replay.notes


def test_a_bybit_capture_of_trades_and_a_deeper_book_reads_its_trades_and_says_why(tmp_path: Path) -> None:
    deep = book(1, "91000.00", "91000.10") | {"topic": "orderbook.50.BTCUSDT"}
    ticks, notes = read(write(tmp_path / "capture.jsonl", [trade(0), deep, trade(2)]))
    assert Counter((t.stream, t.kind) for t in ticks) == {("BTCUSDT_PERP", "trade"): 2}
    assert any("orderbook.50 (1)" in n and "filtered_out" in n for n in notes)


def test_a_bybit_book_alone_takes_its_market_from_its_path_not_from_a_bybit_name(tmp_path: Path) -> None:
    books = [book(1, "91000.00", "91000.10"), book(2, "91000.05", None)]
    trades, _ = read(write(tmp_path / "linear_trades_2025-12-01.jsonl", [trade(0), trade(3)]))
    in_folder, _ = read(write(tmp_path / "linear" / "2025-12-01" / "ob.jsonl", books))
    named, _ = read(write(tmp_path / "bybit_linear_ob_2025-12-01.jsonl", books))
    assert {t.stream for t in trades} == {t.stream for t in in_folder} == {t.stream for t in named} \
        == {"BTCUSDT_PERP"}
    for name in ("capture_ob_2025-12-01.jsonl", "bybit_ob_2025-12-01.jsonl"):  # "bybit" alone says no market
        ticks, notes = read(write(tmp_path / name, books))
        assert {t.stream for t in ticks} == {"BTCUSDT"}
        assert any(n.startswith(f"{name}: Bybit book messages do not say their market") for n in notes)
        assert not any("a derivatives market" in n for n in notes)
    # read beside the linear trades, the unsaid book is cautioned as one market on two streams
    both = FileReplay([tmp_path / "linear_trades_2025-12-01.jsonl", tmp_path / "capture_ob_2025-12-01.jsonl"])
    assert {t.stream for t in drain(both)} == {"BTCUSDT_PERP", "BTCUSDT"}
    assert any("capture_ob_2025-12-01.jsonl: its BTCUSDT quotes are stream BTCUSDT, while " in str(n) and
               "linear_trades_2025-12-01.jsonl reads BTCUSDT_PERP" in str(n) for n in both.notes), both.notes


def test_bybit_files_named_for_the_spot_category_keep_the_venue_name(tmp_path: Path) -> None:
    trades, trade_notes = read(write(tmp_path / "bybit_spot_trades_2025-12-01.jsonl",
                                     [trade(0, tick_direction=False), trade(1, tick_direction=False)]))
    books, book_notes = read(write(tmp_path / "bybit_spot_ob_2025-12-01.jsonl", [book(1, "91000.00", "91000.10")]))
    assert {t.stream for t in trades} == {t.stream for t in books} == {"BTCUSDT"}
    assert not any("derivatives market" in n or "do not say their market" in n for n in trade_notes + book_notes)
    # a tick direction is the data's own word: a linear capture misnamed spot is still the perpetual
    misnamed, _ = read(write(tmp_path / "bybit_spot_mixed.jsonl", [trade(0), book(1, "91000.00", "91000.10")]))
    assert {t.stream for t in misnamed} == {"BTCUSDT_PERP"}


def test_bitmex_perpetual_dated_future_and_pair_keep_their_own_names(tmp_path: Path) -> None:
    def iso(i: int) -> str:
        return f"2025-12-01T00:00:0{i}.000Z"

    messages = [{"info": "Welcome to the BitMEX Realtime API.", "version": "2.0.0"},
                {"success": True, "subscribe": "trade:XBTUSD"}]
    for i, symbol in enumerate(("XBTUSD", "XBTZ25", "XBT_USDT")):
        messages.append({"table": "trade", "action": "insert", "data": [{
            "timestamp": iso(i), "symbol": symbol, "side": "Buy", "size": 100, "price": 91000.5,
            "tickDirection": "PlusTick", "trdMatchID": f"00000000-006d-1000-0000-00000000000{i}"}]})
        messages.append({"table": "quote", "action": "insert", "data": [{
            "timestamp": iso(i), "symbol": symbol, "bidSize": 1000, "bidPrice": 91000.0, "askPrice": 91000.5,
            "askSize": 2000}]})
    ticks, notes = read(write(tmp_path / "bitmex_2025-12-01.jsonl", messages))
    assert Counter(t.stream for t in ticks) == {"XBTUSD_PERP": 2, "XBTZ25": 2, "XBT_USDT": 2}
    # Tardis.dev's bitmex file (exchange column) names them the same way
    tardis = tmp_path / "bitmex_trades_2025-12-01.csv"
    tardis.write_text("exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n" + "".join(
        f"bitmex,{s},{(T0_MS + i) * 1000},{(T0_MS + i) * 1000 + 5},a{i},buy,91000.5,100\n"
        for i, s in enumerate(("XBTUSD", "XBTZ25", "XBT_USDT"))))
    tardis_ticks, _ = read(tardis)
    assert {t.stream for t in tardis_ticks} == {"XBTUSD_PERP", "XBTZ25", "XBT_USDT"}


def test_a_capture_of_channels_no_one_table_holds_is_refused_naming_the_field_and_the_way_out(tmp_path: Path) -> None:
    ticker = {"topic": "tickers.BTCUSDT", "type": "snapshot", "ts": T0_MS + 100,
              "data": {"symbol": "BTCUSDT", "lastPrice": "91000.10", "bid1Price": "91000.00"}}
    capture = write(tmp_path / "capture.jsonl", [trade(0), ticker])
    try:
        FileReplay(capture)
    except ValueError as e:
        said = str(e)
    else:
        raise AssertionError("a capture of trade lists and ticker objects was read")
    assert '"data", a list on line 1, an object on line 2' in said
    assert "replay each channel from a file of its own" in said and "supertype" not in said


def bitmex_trades(symbols: tuple[str, ...]) -> list[dict]:
    """A BitMEX realtime capture's trade messages, one a symbol, a second apart."""
    return [{"table": "trade", "action": "insert", "data": [{
        "timestamp": f"2025-12-01T00:00:0{i}.000Z", "symbol": symbol, "side": "Buy", "size": 100,
        "price": 0.55 if "_" in symbol else 91000.5, "tickDirection": "PlusTick",
        "trdMatchID": f"00000000-006d-1000-0000-00000000000{i}"}]} for i, symbol in enumerate(symbols)]


def test_bitmex_up_and_down_contracts_keep_their_names_never_a_perpetual_s(tmp_path: Path) -> None:
    """review344 #5: BitMEX's weekly binary contracts (XBT7D_U110: up, XBT7D_D95: down) expire: they were named
    XBT7D_U110_PERP, a perpetual's name; they keep the venue's symbol as a dated future does. The note's example is
    the file's own first symbol renamed (XBTUSD), not Binance's BTCUSDT."""
    symbols = ("XBT7D_U110", "XBT7D_D95", "ETH7D_U105", "XBTUSD")
    ticks, notes = read(write(tmp_path / "bitmex_2025-12-01.jsonl", bitmex_trades(symbols)))
    assert Counter(t.stream for t in ticks) == {"XBT7D_U110": 1, "XBT7D_D95": 1, "ETH7D_U105": 1, "XBTUSD_PERP": 1}
    said = [n for n in notes if "a derivatives market" in n]
    assert said and "(XBTUSD) is stream XBTUSD_PERP" in said[0] and "BTCUSDT" not in said[0], said
    tardis = tmp_path / "bitmex_trades_2025-12-01.csv"
    tardis.write_text("exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n" + "".join(
        f"bitmex,{s},{(T0_MS + i) * 1000},{(T0_MS + i) * 1000 + 5},a{i},buy,0.5,100\n" for i, s in enumerate(symbols)))
    assert {t.stream for t in read(tardis)[0]} == {"XBT7D_U110", "XBT7D_D95", "ETH7D_U105", "XBTUSD_PERP"}


def test_a_bitmex_file_of_contracts_alone_names_its_own_symbol_in_the_note(tmp_path: Path) -> None:
    ticks, notes = read(write(tmp_path / "bitmex_2025-12-01.jsonl", bitmex_trades(("XBTZ25", "XBT7D_U110"))))
    assert {t.stream for t in ticks} == {"XBTZ25", "XBT7D_U110"}
    said = [n for n in notes if "a derivatives market" in n]
    assert said and "its symbols name their contracts (XBTZ25) and are kept" in said[0], said
    assert "BTCUSDT" not in said[0] and "_PERP" not in said[0], said


def test_a_capture_of_trades_and_book_says_its_kinds_once_in_the_venue_s_words(tmp_path: Path) -> None:
    """review344 #6: a Bybit or BitMEX capture of trades and quotes in one file got the generic note of a CSV whose
    rows may hold both ("it has trade (p) and quote (b[0].price, a[0].price) columns: a row with both replays as two
    ticks"); each message is one kind: the venue's own words say which columns read which, once a file."""
    _, notes = read(write(tmp_path / "bybit_capture_2025-12-01.jsonl",
                          [trade(0), book(1, "91000.00", "91000.10"), trade(2)]))
    assert not any("a row with both" in n or "it has trade (" in n for n in notes), notes
    assert sum("Bybit publicTrade and Bybit orderbook.1 messages in one capture: trades" in n for n in notes) == 1
    quotes = [{"table": "quote", "action": "insert", "data": [{
        "timestamp": f"2025-12-01T00:00:0{i}.500Z", "symbol": "XBTUSD", "bidSize": 1000, "bidPrice": 91000.0,
        "askPrice": 91000.5, "askSize": 2000}]} for i in range(2)]
    path = write(tmp_path / "bitmex_2025-12-01.jsonl", bitmex_trades(("XBTUSD", "XBTUSD")) + quotes)
    ticks, notes = read(path)
    assert Counter(t.kind for t in ticks) == {"trade": 2, "quote": 2}
    said = [n for n in notes if "two ticks" in n]
    assert len(said) == 1 and said[0].startswith(
        "bitmex_2025-12-01.jsonl: BitMEX trade and quote messages in one capture (its table field): a trade "
        "message's price, size and side (the taker's) replay as a trade, a quote message's bidPrice, askPrice, "
        "bidSize, askSize as a quote, stamped with their timestamp"), notes
