"""The real data sets in ../shared/data load as valid, ordered ticks (skipped when absent: conftest.shared_data).
Each set is read once here (EURUSD's 266,219 quotes were most of this file's time, read twice)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.codec import TOKENS_PER_TICK, BinnedCodec
from engine.service.builtin_in_sample import TRAINED_SPANS
from engine.service.datasets import data_available, load_real


def test_btcusdt_merges_trades_and_quotes_in_collector_time_and_its_trades_only_set_is_its_trades(
        shared_data: Path) -> None:
    """BTCUSDT's trades and quotes merged in collector time. `BTCUSDT-trades` is what a feed without quotes looks
    like: the merged set's trades, in the same order (both read by one load_real: load_btcusdt's set and the
    trades-only view)."""
    ds, trades_only = load_real(shared_data, ("BTCUSDT", "BTCUSDT-trades"))
    assert ds.name == "BTCUSDT"
    assert ds.rejected == 0 and len(ds.ticks) == 19_904 + 73_174
    for stream in {t.stream for t in ds.ticks}:  # in event-time order per stream, as the service's encoders want
        times = [t.ts for t in ds.ticks if t.stream == stream]
        assert times == sorted(times), stream
    kinds = {t.kind for t in ds.ticks}
    assert kinds == {"trade", "quote"} and {t.side for t in ds.ticks if t.kind == "trade"} == {"buy", "sell"}
    train, heldout = ds.split()
    assert train[-1].ts <= heldout[0].ts and len(heldout) == len(ds.ticks) - int(len(ds.ticks) * 0.8)
    assert TRAINED_SPANS["BTCUSDT"] == (train[0].ts, train[-1].ts)  # the built-in model's, as its caution says
    assert {t.kind for t in trades_only.ticks} == {"trade"} and len(trades_only.ticks) == 19_904
    assert trades_only.ticks == [t for t in ds.ticks if t.kind == "trade"]


def test_eurusd_quotes_encode_with_fixed_tokens_per_tick_and_ethusdt_loads_like_btcusdt_under_its_own_name(
        shared_data: Path) -> None:
    """EURUSD's quotes encode at a fixed count of tokens a tick; ETHUSDT (when its folder is there: skipped after
    EURUSD's checks otherwise) loads as BTCUSDT does, under its own name, and load_real keeps the order asked for
    (one load_real reads both sets)."""
    with_eth = (shared_data / "binance-ethusdt-spot").is_dir()
    loaded = load_real(shared_data, ("EURUSD", "ETHUSDT") if with_eth else ("EURUSD",))
    ds = loaded[0]
    assert ds.rejected == 0 and len(ds.ticks) == 266_219 and ds.ticks[0].ts == 1_549_238_400_994_000_000
    train, _ = ds.split()
    assert TRAINED_SPANS["EURUSD"] == (train[0].ts, train[-1].ts)
    codec = BinnedCodec()
    tokens = codec.encode_stream(ds.ticks[:5000])
    assert len(tokens) == TOKENS_PER_TICK * 5000
    if not with_eth:
        pytest.skip("binance-ethusdt-spot/ not in the shared data folder")
    eth = loaded[1]
    assert eth.rejected == 0 and len(eth.ticks) == 14_515 + 58_758
    assert {t.stream for t in eth.ticks} == {"ETHUSDT"} and {t.kind for t in eth.ticks} == {"trade", "quote"}
    assert [d.name for d in loaded] == ["EURUSD", "ETHUSDT"]


def test_the_data_directory_is_the_callers(shared_data: Path, tmp_path: Path) -> None:
    assert data_available(shared_data)
    assert not data_available(tmp_path) and load_real(tmp_path) == []


def test_unknown_data_set_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown data sets"):
        load_real(tmp_path, ("SPX",))
