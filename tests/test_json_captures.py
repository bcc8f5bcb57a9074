"""Raw JSON captures review268 found misread or refused: Databento's `dbn --json` (fixed-point prices, the `hd`
header), Bitstamp's live_trades, lists in fields (Polygon v3 trades), Kraken v1's trade arrays, a receive time
before each line (hftbacktest's captures), objects nested in a field (Gate.io's `result`), Alpaca crypto's taker
side. Each is checked against the same trades written as the file its vendor documents, or as a plain CSV. Real
files in tmp_path."""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path

import pytest

from connectors.replay import FileReplay
from engine.service.cli import main

T0 = 1_723_161_255_342_000_000  # 2024-08-09 00:00:55.342 UTC, in ns
TRADES = [(T0 + i * 37_000_000, round(61800 + (i % 17) * 0.37 - (i % 5) * 0.5, 2), round(0.001 * (1 + i % 9), 3),
           "buy" if i % 3 else "sell") for i in range(30)]


def read(path: Path, **kwargs) -> tuple[list, FileReplay]:
    with FileReplay(path, **kwargs) as replay:
        ticks = []
        while not replay.done:
            ticks += replay.next_batch(1000)
    return ticks, replay


def write_lines(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def seen(ticks: list) -> list[tuple]:
    return [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks]


def iso(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_databento_json_reads_its_fixed_point_prices_as_its_csv_does(tmp_path: Path) -> None:
    """review268 #1: `dbn --json` nests the record header under `hd` and writes prices as strings of 1e-9 units;
    it was read as an ordinary table, every price 1e9 too large, and `hd.ts_event` out of reach."""
    csv = tmp_path / "glbx-trades.csv"
    csv.write_text("ts_recv,ts_event,rtype,publisher_id,instrument_id,action,side,depth,price,size,flags,"
                   "ts_in_delta,sequence,symbol\n" + "".join(
                       f"{ns + 500},{ns},0,1,42,T,{'B' if sd == 'buy' else 'A'},0,{round(p * 1e9)},1,0,100,{i},BTCUSD\n"
                       for i, (ns, p, _, sd) in enumerate(TRADES)))
    path = write_lines(tmp_path / "glbx-trades.json", [
        {"ts_recv": str(ns + 500), "hd": {"ts_event": str(ns), "rtype": 0, "publisher_id": 1, "instrument_id": 42},
         "action": "T", "side": "B" if sd == "buy" else "A", "depth": 0, "price": str(round(p * 1e9)), "size": 1,
         "flags": 0, "ts_in_delta": 100, "sequence": i, "symbol": "BTCUSD"} for i, (ns, p, _, sd) in enumerate(TRADES)])
    from_csv, _ = read(csv)
    ticks, _ = read(path)
    assert seen(ticks) == seen(from_csv) and ticks[0].price == TRADES[0][1]
    by_event, _ = read(path, columns={"ts": "ts_event"})  # the event-time clock, as the CSV's
    csv_by_event, _ = read(csv, columns={"ts": "ts_event"})
    assert [t.ts for t in by_event] == [ns for ns, *_ in TRADES] == [t.ts for t in csv_by_event]


def bitstamp_trade(i: int, ns: int, p: float, s: float, sd: str) -> dict:
    us = ns // 1000
    return {"data": {"id": 100 + i, "timestamp": str(us // 10**6), "amount": s, "amount_str": str(s), "price": p,
                     "price_str": str(p), "type": 0 if sd == "buy" else 1, "microtimestamp": str(us),
                     "buy_order_id": 1, "sell_order_id": 2}, "channel": "live_trades_btcusd", "event": "trade"}


@pytest.mark.parametrize("columns", [None, {"side": "type"}])
def test_bitstamp_live_trades_read_their_side_and_microsecond_time(tmp_path: Path, columns: dict | None) -> None:
    """review268 #2: the sides were dropped, times cut to whole seconds, and `side=type` read 0/1 as buy/none."""
    path = write_lines(tmp_path / "bitstamp-ws.jsonl", [
        {"event": "bts:subscription_succeeded", "channel": "live_trades_btcusd", "data": {}},
        *(bitstamp_trade(i, *t) for i, t in enumerate(TRADES))])
    ticks, replay = read(path, columns=columns)
    assert seen(ticks) == [("btcusd", ns, p, s, sd) for ns, p, s, sd in TRADES]
    assert dict(replay.rejected) == {"filtered_out": 1}
    assert any("Bitstamp websocket live_trades: ts=microtimestamp (us)" in n for n in replay.notes)


def test_a_list_in_a_field_is_read_as_text_and_polygon_s_sip_timestamp_as_the_time(tmp_path: Path) -> None:
    """review268 #3: `conditions: [12, 37]` (Polygon v3 trades, as replay's own jq hint writes them) crashed the
    sale-conditions note with a raw polars cast error."""
    path = write_lines(tmp_path / "AAPL-polygon.jsonl", [
        {"conditions": [12, 37], "exchange": 4, "id": str(i), "participant_timestamp": ns - 900, "price": p,
         "sequence_number": i, "sip_timestamp": ns, "size": 100, "tape": 3} for i, (ns, p, _, _) in enumerate(TRADES)])
    ticks, replay = read(path)
    assert seen(ticks) == [("AAPL", ns, p, 100.0, None) for ns, p, _, _ in TRADES]
    assert any("read as ts=sip_timestamp (ns)" in n for n in replay.notes)
    assert any('sale conditions are not read ("conditions" holds "12,37")' in n for n in replay.notes)


def test_kraken_v1_trade_arrays_are_read(tmp_path: Path) -> None:
    """review268 #4: Kraken v1's trades are arrays; the status objects beside them drew a refusal asking for a
    column map over their keys, which no map could satisfy."""
    lines: list = [{"connectionID": 862861539, "event": "systemStatus", "status": "online", "version": "1.0.0"},
                   {"channelID": 337, "channelName": "trade", "event": "subscriptionStatus", "pair": "XBT/USD",
                    "status": "subscribed", "subscription": {"name": "trade"}}]
    for i, (ns, p, s, sd) in enumerate(TRADES):
        lines += [{"event": "heartbeat"}] if i % 10 == 0 else []
        lines.append([337, [[f"{p:.5f}", f"{s:.8f}", f"{ns / 1e9:.6f}", sd[0], "m", ""]], "trade", "XBT/USD"])
    ticks, replay = read(write_lines(tmp_path / "kraken-v1.jsonl", lines))
    assert seen(ticks) == [("XBT-USD", ns, p, s, sd) for ns, p, s, sd in TRADES]
    assert dict(replay.rejected) == {"filtered_out": 5}
    assert any("Kraken v1 trade (arrays: price, volume, time, side, orderType, misc)" in n for n in replay.notes)


def test_kraken_rest_trades_are_read_as_the_pairs_ticks(tmp_path: Path, capsys) -> None:
    """review295 #3: a successful Kraken REST trades body (GET /0/public/Trades: `result.PAIR` arrays of price,
    volume, time, side, orderType, misc, trade_id) was called a failed download ("Download it again"). Its arrays
    are read as the websocket's v1 arrays are: one page a line (paged by `last`), the pair the stream."""
    pages = [{"error": [], "result": {"XXBTZUSD": [
        [f"{p:.5f}", f"{s:.8f}", round(ns / 1e9, 4), sd[0], "l" if i % 2 else "m", "", 70_000 + i]
        for i, (ns, p, s, sd) in enumerate(TRADES) if i // 15 == page], "last": str(TRADES[15 * page + 14][0])}}
        for page in (0, 1)]
    path = write_lines(tmp_path / "kraken-trades.json", pages)
    ticks, replay = read(path)
    assert seen(ticks) == [("XXBTZUSD", ns // 100_000 * 100_000, p, s, sd) for ns, p, s, sd in TRADES]
    assert not replay.rejected
    assert any("Kraken REST trades (result.PAIR" in n for n in replay.notes)
    out = tmp_path / "a.parquet"
    assert main(["backtest", str(write_lines(tmp_path / "one.json", pages[:1])), "--out", str(out), "--quiet",
                 "--max-ticks", "10"]) == 0, capsys.readouterr().err
    # an empty result is still a failed download's body, refused by name; so is an error
    for body in ({"error": [], "result": {}}, {"error": ["EQuery:Unknown asset pair"]}):
        with pytest.raises(ValueError, match="a failed download's error saved as the file"):
            FileReplay(write_lines(tmp_path / "empty.json", [body]))


def test_a_pretty_printed_kraken_rest_body_reads_as_its_one_line_body_does(tmp_path: Path) -> None:
    """fix302 #7: a Kraken REST trades body saved by `curl ... | jq .` (the object spread over lines, two-space
    indents, each trade's array over seven lines) was read line by line, each line `not_json`. It reads as the same
    body on one line does; so do two pages saved one after the other, and a body with CRLF line ends."""
    pages = [{"error": [], "result": {"XXBTZUSD": [
        [f"{p:.5f}", f"{s:.8f}", round(ns / 1e9, 4), sd[0], "l" if i % 2 else "m", "", 70_000 + i]
        for i, (ns, p, s, sd) in enumerate(TRADES) if i // 15 == page], "last": str(TRADES[15 * page + 14][0])}}
        for page in (0, 1)]
    one_line, _ = read(write_lines(tmp_path / "kraken-one-line.json", pages[:1]))
    assert len(one_line) == 15
    pretty = tmp_path / "kraken-pretty.json"
    pretty.write_text(json.dumps(pages[0], indent=2) + "\n")
    assert pretty.read_text().startswith('{\n  "error": [],\n  "result": {\n    "XXBTZUSD": [\n      [\n')
    ticks, replay = read(pretty)
    assert seen(ticks) == seen(one_line) and not replay.rejected
    assert any("Kraken REST trades (result.PAIR" in n for n in replay.notes)
    both = tmp_path / "kraken-pages.json"
    both.write_bytes("".join(json.dumps(page, indent=2) + "\n" for page in pages).replace("\n", "\r\n").encode())
    ticks, replay = read(both)
    assert seen(ticks) == [("XXBTZUSD", ns // 100_000 * 100_000, p, s, sd) for ns, p, s, sd in TRADES]
    assert not replay.rejected
    cut = tmp_path / "kraken-cut.json"  # a body cut short is still refused as no JSON, not read in part
    cut.write_text(json.dumps(pages[0], indent=2)[:300])
    with pytest.raises(ValueError, match="no line is a JSON object"):
        FileReplay(cut)


def test_a_receive_time_before_each_line_is_read_as_local_ts(tmp_path: Path) -> None:
    """review268 #5: hftbacktest's captures write `<ns> <json>` a line; each line was refused as not JSON."""
    trades = write_lines(tmp_path / "btcusdt-capture.jsonl", [
        f"{ns + 1_270_000_000} " + json.dumps({"stream": "btcusdt@trade", "data": {
            "e": "trade", "E": ns // 10**6, "s": "BTCUSDT", "t": i, "p": f"{p:.2f}", "q": f"{s:.5f}",
            "T": ns // 10**6, "m": sd == "sell", "M": True}}) for i, (ns, p, s, sd) in enumerate(TRADES)])
    ticks, replay = read(trades)
    assert seen(ticks) == [("BTCUSDT", ns, p, s, sd) for ns, p, s, sd in TRADES]
    assert any("each line starts with a receive time before its JSON message" in n for n in replay.notes)
    book = write_lines(tmp_path / "book-capture.jsonl", [  # spot bookTicker: the receive time is the only one
        f"{iso(ns)}\t" + json.dumps({"u": i, "s": "BTCUSDT", "b": f"{p:.2f}", "B": "1", "a": f"{p + 0.1:.2f}",
                                     "A": "2"}) for i, (ns, p, _, _) in enumerate(TRADES)])
    quotes, _ = read(book)
    assert [(q.ts // 1000, q.bid) for q in quotes] == [(ns // 1000, p) for ns, p, _, _ in TRADES]


def test_hftbacktest_s_gz_and_log_captures_read_as_their_jsonl_does(tmp_path: Path, capsys) -> None:
    """fix280 #5: hftbacktest's collector writes gzipped `<ns> <json>` lines named `btcusdt_20240809.gz`; that and
    a `.log` of the same lines were refused by suffix ('unsupported file type ".gz"'). Read, their text sniffed, as
    the `.jsonl` is; a folder of them too. A `.log` that is no JSON lines and hftbacktest's `.npz` are refused,
    naming what is read."""
    lines = [f"{ns + 1_270_000_000} " + json.dumps({"stream": "btcusdt@trade", "data": {
        "e": "trade", "E": ns // 10**6, "s": "BTCUSDT", "t": i, "p": f"{p:.2f}", "q": f"{s:.5f}", "T": ns // 10**6,
        "m": sd == "sell", "M": True}}) for i, (ns, p, s, sd) in enumerate(TRADES)]
    expected = seen(read(write_lines(tmp_path / "capture.jsonl", lines))[0])
    assert len(expected) == len(TRADES)
    folder = tmp_path / "collector"
    folder.mkdir()
    (folder / "btcusdt_20240809.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    log = write_lines(tmp_path / "btcusdt_20240809.log", lines)
    for path in (folder / "btcusdt_20240809.gz", log, folder):
        assert seen(read(path)[0]) == expected, path
    notes = write_lines(tmp_path / "collector.log", ["2024-08-09 collector started", "connected"])
    (tmp_path / "btcusdt_20240809.npz").write_bytes(b"PK\x03\x04")
    for path, said in ((notes, 'unsupported file type ".log" (its first line is not a JSON object)'),
                       (tmp_path / "btcusdt_20240809.npz", 'unsupported file type ".npz" (NumPy arrays, as '
                                                           "hftbacktest converts its captures to")):
        assert main(["backtest", str(path), "--out", str(tmp_path / "a.parquet"), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert f"{path}: {said}" in err and "a .gz or .log of JSON lines (hftbacktest's captures)" in err, err


def gate_trade(i: int, ns: int, p: float, s: float, sd: str) -> dict:
    return {"time": ns // 10**9, "time_ms": ns // 10**6, "channel": "spot.trades", "event": "update",
            "result": {"id": i, "create_time": ns // 10**9, "create_time_ms": f"{ns / 1e6:.3f}", "side": sd,
                       "currency_pair": "BTC_USDT", "amount": str(s), "price": str(p), "range": "1-1"}}


def test_a_trade_in_a_nested_object_is_reached_by_its_dotted_path(tmp_path: Path) -> None:
    """review268 #6: Gate.io's trade sits in `result`; the refusal showed `result` as a column and no map reached
    its fields."""
    path = write_lines(tmp_path / "gateio-ws.jsonl", [
        {"time": 1723161250, "channel": "spot.trades", "event": "subscribe", "result": {"status": "success"}},
        *(gate_trade(i, *t) for i, t in enumerate(TRADES))])
    with pytest.raises(ValueError, match=r'columns found \[.*"result\.price"'):
        FileReplay(path)
    ticks, _ = read(path, columns={"ts": "time_ms", "price": "result.price", "size": "result.amount",
                                   "side": "result.side", "stream_col": "result.currency_pair"})
    assert seen(ticks) == [("BTC_USDT", ns // 10**6 * 10**6, p, s, sd) for ns, p, s, sd in TRADES]


def test_alpaca_crypto_trades_read_the_takers_side(tmp_path: Path) -> None:
    """review268 #8: Alpaca crypto trades carry `tks` (B/S), said to have no side."""
    path = tmp_path / "alpaca-crypto.json"
    path.write_text(json.dumps({"trades": {"BTC/USD": [
        {"t": iso(ns), "x": "CBSE", "p": p, "s": s, "i": i, "tks": "B" if sd == "buy" else "S"}
        for i, (ns, p, s, sd) in enumerate(TRADES)]}, "next_page_token": None}))
    ticks, replay = read(path)
    assert [(t.ts // 1000, t.price, t.side) for t in ticks] == [(ns // 1000, p, sd) for ns, p, _, sd in TRADES]
    assert any("side=tks (B/S: the taker's)" in n for n in replay.notes)
    assert not any("no side" in n for n in replay.notes)


def test_a_reconnect_s_repeated_trades_are_said_as_such(tmp_path: Path) -> None:
    """review268 #7: a reconnect repeats trades (Coinbase's new last_match, Kraken v2's new snapshot); the caution
    blamed 'export pages that overlap?'."""
    ack = {"type": "subscriptions", "channels": [{"name": "matches", "product_ids": ["BTC-USD"]}]}
    coinbase: list = [ack]
    kraken: list = [{"method": "subscribe", "result": {"channel": "trade", "symbol": "BTC/USD"}, "success": True}]
    for i, (ns, p, s, sd) in enumerate(TRADES):
        match = {"type": "match", "trade_id": i, "side": "sell" if sd == "buy" else "buy", "size": str(s),
                 "price": str(p), "product_id": "BTC-USD", "sequence": i, "time": iso(ns)}
        trade = {"symbol": "BTC/USD", "side": sd, "price": p, "qty": s, "ord_type": "market", "trade_id": i,
                 "timestamp": iso(ns)}
        coinbase.append(match)
        kraken.append({"channel": "trade", "type": "update", "data": [trade]})
        if i == 20:
            coinbase += [ack, match | {"type": "last_match"}]
            kraken.append({"channel": "trade", "type": "snapshot", "data": [trade]})  # the last trade again
    for name, lines, cause in (("coinbase.jsonl", coinbase, "a reconnect's last_match"),
                               ("kraken.jsonl", kraken, "a reconnect's snapshot")):
        _, replay = read(write_lines(tmp_path / name, lines))
        said = [n for n in replay.notes if "repeat an earlier row of their stream" in n]
        assert said and cause in said[0] and "export pages" not in said[0], name
