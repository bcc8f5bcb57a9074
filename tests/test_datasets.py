"""The real data sets in ../shared/data load as valid, ordered ticks (skipped when absent: conftest.shared_data)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.codec import TOKENS_PER_TICK, BinnedCodec
from engine.service.datasets import data_available, load_btcusdt, load_ethusdt, load_eurusd, load_real


def test_btcusdt_merges_trades_and_quotes_in_collector_time(shared_data: Path) -> None:
    ds = load_btcusdt(shared_data)
    assert ds.rejected == 0 and len(ds.ticks) == 19_904 + 73_174
    for stream in {t.stream for t in ds.ticks}:  # in event-time order per stream, as the service's encoders want
        times = [t.ts for t in ds.ticks if t.stream == stream]
        assert times == sorted(times), stream
    kinds = {t.kind for t in ds.ticks}
    assert kinds == {"trade", "quote"} and {t.side for t in ds.ticks if t.kind == "trade"} == {"buy", "sell"}
    train, heldout = ds.split()
    assert train[-1].ts <= heldout[0].ts and len(heldout) == len(ds.ticks) - int(len(ds.ticks) * 0.8)


def test_eurusd_quotes_encode_with_fixed_tokens_per_tick(shared_data: Path) -> None:
    ds = load_eurusd(shared_data)
    assert ds.rejected == 0 and len(ds.ticks) == 266_219 and ds.ticks[0].ts == 1_549_238_400_994_000_000
    codec = BinnedCodec()
    tokens = codec.encode_stream(ds.ticks[:5000])
    assert len(tokens) == TOKENS_PER_TICK * 5000


def test_the_data_directory_is_the_callers(shared_data: Path, tmp_path: Path) -> None:
    assert data_available(shared_data)
    assert not data_available(tmp_path) and load_real(tmp_path) == []


def test_ethusdt_loads_like_btcusdt_under_its_own_name(shared_data: Path) -> None:
    if not (shared_data / "binance-ethusdt-spot").is_dir():
        pytest.skip("binance-ethusdt-spot/ not in the shared data folder")
    ds = load_ethusdt(shared_data)
    assert ds.rejected == 0 and len(ds.ticks) == 14_515 + 58_758
    assert {t.stream for t in ds.ticks} == {"ETHUSDT"} and {t.kind for t in ds.ticks} == {"trade", "quote"}
    assert [d.name for d in load_real(shared_data, ("EURUSD", "ETHUSDT"))] == ["EURUSD", "ETHUSDT"]


def test_unknown_data_set_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown data sets"):
        load_real(tmp_path, ("SPX",))


def test_trades_only_sets_are_the_same_trades_without_the_quotes(shared_data: Path) -> None:
    """`BTCUSDT-trades` is what a feed without quotes looks like: the merged set's trades, in the same order."""
    merged, trades_only = load_real(shared_data, ("BTCUSDT", "BTCUSDT-trades"))
    assert {t.kind for t in trades_only.ticks} == {"trade"} and len(trades_only.ticks) == 19_904
    assert trades_only.ticks == [t for t in merged.ticks if t.kind == "trade"]
