"""An empty stream name (kdb+'s null symbol, written as "" in a Parquet export; a blank cell) is refused as
missing_stream saying it is an empty name, on the wire and in a file (where the hint counts the column's empty
values and names the ways to read the file anyway), and it is no stream a venue caution counts. Real files in
tmp_path."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from conftest import drain
from connectors.replay import FileReplay
from connectors.ticks import InvalidTick, validate

T0 = 1_704_153_601_000  # 2024-01-02 00:00:01 UTC, in ms


def test_an_empty_stream_on_the_wire_is_said_to_be_an_empty_name() -> None:
    with pytest.raises(InvalidTick) as err:
        validate({"stream": "", "ts": T0 * 10**6, "price": 1.0, "size": 1.0})
    assert err.value.reason == "missing_stream"
    assert err.value.message == 'field "stream" is an empty name ("", as kdb+ writes its null symbol): a stream name ' \
                             'is required'
    with pytest.raises(InvalidTick) as err:  # absent is not empty
        validate({"ts": T0 * 10**6, "price": 1.0, "size": 1.0})
    assert err.value.reason == "missing_stream" and "empty name" not in str(err.value)


def test_a_files_empty_symbols_are_counted_with_the_ways_to_read_it(tmp_path: Path) -> None:
    syms = ["AAPL", "", "AAPL", "", "", "MSFT"]
    pl.DataFrame({"time": [(T0 + i) * 10**6 for i in range(6)], "sym": syms, "price": [100.0 + i for i in range(6)],
                  "size": [1.0] * 6}).write_parquet(tmp_path / "kdb.parquet")
    replay = FileReplay(tmp_path / "kdb.parquet")
    assert [t.stream for t in drain(replay)] == ["AAPL", "AAPL", "MSFT"]
    assert replay.rejected["missing_stream"] == 3
    example = replay.rejected.examples["missing_stream"]
    assert 'field "stream" is an empty name' in example, example
    assert 'column "sym" has 3 empty values' in example and "--columns stream_name=NAME" in example, example
    # the filter it names: a selection leaves them out, counted as filtered_out
    selected = FileReplay(tmp_path / "kdb.parquet", streams=["AAPL", "MSFT"])
    assert len(drain(selected)) == 3 and selected.rejected["missing_stream"] == 0


def test_an_empty_symbol_is_no_stream_fed_by_two_venues(tmp_path: Path) -> None:
    """Two venues' captures whose only shared name is the empty one: no caution that a stream mixes markets."""
    for venue, symbol in (("bybit-spot", "BTCUSDT"), ("binance", "ETHUSDT")):
        pl.DataFrame({"exchange": [venue] * 2, "symbol": [symbol, ""],
                      "timestamp": [(T0 + 1) * 1000, (T0 + 2) * 1000], "local_timestamp": [(T0 + 3) * 1000] * 2,
                      "id": ["1", "2"], "side": ["buy", "sell"], "price": [42500.5, 42501.0],
                      "amount": [0.1, 0.2]}).write_parquet(tmp_path / f"{venue}.parquet")
    replay = FileReplay([tmp_path / "bybit-spot.parquet", tmp_path / "binance.parquet"])
    assert len(drain(replay)) == 2 and replay.rejected["missing_stream"] == 2
    assert not [n for n in replay.notes if "is fed by files of" in n], replay.notes
