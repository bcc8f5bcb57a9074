"""Vendor files whose trade side is not the aggressor's, in the layouts the vendors publish: Coinbase Exchange's
REST trades and websocket `match` messages (the MAKER's side). Each is read without options and with the preset
the messages point to, asserting the ticks. Every fixture is written here, from code, into tmp_path."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from connectors.replay import FileReplay
from connectors.ticks import Tick
from test_vendor_files import drain, ns  # one reader of a whole replay, one ISO-time-to-ns
from test_vendor_files_2 import N

COINBASE_T0 = ns("2024-08-08T23:54:00+00:00")


def coinbase_trades(n: int = N) -> list[dict]:
    """Trades as Coinbase Exchange's REST API gives them (`GET /products/{id}/trades`): numbers as text, ISO
    times with a `Z`, `side` the MAKER's."""
    return [{"trade_id": 583219000 + i, "side": "buy" if i % 3 else "sell", "size": f"{0.0012 + i / 10000:.8f}",
             "price": f"{64000.12 + 0.01 * (i % 7):.2f}", "time": f"2024-08-08T23:54:{i:02d}.{123456 + i}Z"}
            for i in range(n)]


def test_coinbase_rest_trades_read_flipped_with_the_preset_the_note_names(tmp_path: Path) -> None:
    trades = coinbase_trades()
    # the API lists the newest trade first, and a dump keeps that order
    pl.DataFrame(trades[::-1]).select("trade_id", "side", "size", "price", "time").write_csv(tmp_path / "BTC-USD.csv")
    as_is = FileReplay(tmp_path / "BTC-USD.csv")
    ticks = drain(as_is)
    assert ticks[0] == Tick("BTC-USD", COINBASE_T0 + 123_456_000, "trade", price=64000.12, size=0.0012, side="sell")
    assert as_is.notes[1] == ("BTC-USD.csv: its columns are Coinbase Exchange's trades layout, whose side is the "
                              "MAKER's; read here as the aggressor's. If the file is Coinbase's, give --preset "
                              "coinbase-trades (sides flipped)")
    replay = FileReplay(tmp_path / "BTC-USD.csv", columns="coinbase-trades")
    flipped = drain(replay)
    assert flipped[:2] == [Tick("BTC-USD", COINBASE_T0 + 123_456_000, "trade", price=64000.12, size=0.0012,
                                side="buy"),
                           Tick("BTC-USD", COINBASE_T0 + 1_123_457_000, "trade", price=64000.13, size=0.0013,
                                side="sell")]
    assert [t.side for t in flipped] == [{"buy": "sell", "sell": "buy"}[t.side] for t in ticks]
    assert replay.sorted_files == [tmp_path / "BTC-USD.csv"] and dict(replay.rejected) == {} and replay.notes == []
    # Parquet straight from the JSON (prices and sizes as text), with the product the request named
    pl.DataFrame(trades).with_columns(product_id=pl.lit("ETH-USD")).write_parquet(tmp_path / "dump.parquet")
    replay = FileReplay(tmp_path / "dump.parquet", columns="coinbase-trades")
    assert drain(replay) == [Tick("ETH-USD", t.ts, "trade", price=t.price, size=t.size, side=t.side)
                             for t in flipped]
    assert replay.notes == ["dump.parquet: streams from column 'product_id'"]
    assert "give --preset coinbase-trades" in FileReplay(tmp_path / "dump.parquet").notes[1]


def coinbase_matches(n: int = N) -> list[dict]:
    """Websocket `matches` channel messages, the first a `last_match`: `side` is the maker order's."""
    return [{"type": "last_match" if i == 0 else "match", "trade_id": 583219000 + i,
             "maker_order_id": f"ac928c66-ca53-498f-9c13-a110027a{i:04d}",
             "taker_order_id": f"132fb6ae-456b-4654-b4e0-d681ac05{i:04d}", "side": "sell" if i % 4 else "buy",
             "size": f"{0.05 + i / 100:.8f}", "price": f"{(64000.5 if i % 2 else 2650.25) + i:.2f}",
             "product_id": "BTC-USD" if i % 2 else "ETH-USD", "sequence": 50 + i,
             "time": f"2024-08-08T23:54:{i:02d}.{500000 + i}Z"} for i in range(n)]


def test_coinbase_websocket_matches_detected_by_their_order_ids_and_flipped(tmp_path: Path) -> None:
    pl.DataFrame(coinbase_matches()).write_csv(tmp_path / "matches.csv")
    replay = FileReplay(tmp_path / "matches.csv")
    ticks = drain(replay)
    assert ticks[:2] == [Tick("ETH-USD", COINBASE_T0 + 500_000_000, "trade", price=2650.25, size=0.05, side="sell"),
                         Tick("BTC-USD", COINBASE_T0 + 1_500_001_000, "trade", price=64001.5, size=0.06,
                              side="buy")]
    assert len(ticks) == N and dict(replay.rejected) == {}
    assert replay.notes == ["matches.csv: no column map given; read as ts=time (datetime), stream=product_id, "
                            "price=price, size=size, side=side (the maker's side, read flipped), "
                            "keep type in match|last_match"]
    # the same messages without their `type` column: the order ids still say whose side it is
    pl.DataFrame(coinbase_matches()).drop("type").write_csv(tmp_path / "untyped.csv")
    assert drain(FileReplay(tmp_path / "untyped.csv")) == ticks
    assert drain(FileReplay(tmp_path / "untyped.csv", columns={"ts_unit": "datetime"})) == ticks  # refined: the same


def test_coinbase_full_channel_dump_keeps_only_the_matches(tmp_path: Path) -> None:
    """The `full` channel in one Parquet table: orders received, opened and done carry a side, price and size
    too, but only the matches are trades; the others are counted as filtered out."""
    match = coinbase_matches(2)[1]
    rows = [{"type": "received", "order_id": "d50ec984", "order_type": "limit", "side": "sell",
             "size": "0.5", "price": "64010.00", "time": "2024-08-08T23:54:00.100000Z"},
            {"type": "open", "order_id": "d50ec984", "side": "sell", "price": "64010.00", "remaining_size": "0.5",
             "time": "2024-08-08T23:54:00.200000Z"},
            match,
            {"type": "done", "order_id": "d50ec984", "side": "sell", "price": "64010.00", "remaining_size": "0",
             "reason": "canceled", "time": "2024-08-08T23:54:02.000000Z"}]
    pl.DataFrame(rows, infer_schema_length=None).with_columns(product_id=pl.lit("BTC-USD")).write_parquet(
        tmp_path / "full.parquet")
    replay = FileReplay(tmp_path / "full.parquet")
    assert drain(replay) == [Tick("BTC-USD", COINBASE_T0 + 1_500_001_000, "trade", price=64001.5, size=0.06,
                                  side="buy")]
    assert dict(replay.rejected) == {"filtered_out": 3}
    assert replay.rejected.examples["filtered_out"].startswith(
        f"{tmp_path / 'full.parquet'} row 1: filtered_out: column 'type' holds received, which the map's keep leaves "
        f"out (it keeps match, last_match); not an error")

