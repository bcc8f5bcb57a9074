"""JSON-lines tick files (`.jsonl`, `.ndjson`, `.json` of one object per line, `.gz` of them): read as the table of
their objects' fields through the same detection, maps, rejects and notes as a CSV; exchange websocket captures
(Binance trade/aggTrade/bookTicker, Coinbase Exchange matches) known by their keys. Real files in tmp_path."""

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
    assert dict(replay.rejected) == {"filtered_out": 1}  # the bookTicker message: no time of its own
    assert "combined.jsonl line 2: filtered_out" in replay.rejected.examples["filtered_out"]
    note = next(n for n in replay.notes if "Binance trade events (inside a combined stream's data)" in n)
    assert "messages without e (bookTicker's) (1)" in note


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
    assert [(t.stream, t.price, t.side) for t in ticks] == [("BTC-USD", 42290.12, "buy"),  # maker sold: a buy
                                                           ("BTC-USD", 42291.12, "sell"), ("BTC-USD", 42292.12, "buy")]
    assert ticks[0].ts == 1_704_153_600_123_456_000
    assert dict(replay.rejected) == {"filtered_out": 4}
    note = next(n for n in replay.notes if "Coinbase Exchange websocket messages" in n)
    assert note.endswith("other types left out, counted as filtered_out: heartbeat (2), subscriptions (1), ticker (1)")


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


def test_arrays_of_ticks_under_data_are_refused_with_the_command_that_flattens_them(tmp_path: Path) -> None:
    okx = {"arg": {"channel": "trades", "instId": "BTC-USDT"},
           "data": [{"instId": "BTC-USDT", "tradeId": "1", "px": "43000.1", "sz": "0.1", "side": "buy",
                     "ts": str(T0)}]}
    with pytest.raises(ValueError, match=r"arrays under 'data' .* jq -c '.data\[\]' okx.jsonl > flat.jsonl"):
        FileReplay(write_lines(tmp_path / "okx.jsonl", [okx, okx]))
    with pytest.raises(ValueError, match=r"no line is a JSON object"):
        FileReplay(write_lines(tmp_path / "kraken.jsonl", [[0, [["43000.1", "0.1"]], "trade", "XBT/USD"]] * 2))


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
    assert [(t.stream, t.price, t.size, t.side) for t in ticks[:2]] == [("BTCUSDT", 16578.5, 0.001, "buy"),
                                                                        ("BTCUSDT", 16578.5, 0.001, "sell")]


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
