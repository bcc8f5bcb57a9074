"""The real data sets in ../shared/data load as valid, ordered ticks (skipped when absent)."""

from __future__ import annotations

import pytest

from connectors.codec import TOKENS_PER_TICK, BinnedCodec
from engine.service.datasets import data_available, load_btcusdt, load_eurusd
from connectors.ticks import OrderingGuard

pytestmark = pytest.mark.skipif(not data_available(), reason="../shared/data is absent (real market data not checked out)")


def test_btcusdt_merges_trades_and_quotes_in_collector_time() -> None:
    ds = load_btcusdt()
    assert ds.rejected == 0 and len(ds.ticks) == 19_904 + 73_174
    guard = OrderingGuard()
    for t in ds.ticks:
        guard.check(t)
    kinds = {t.kind for t in ds.ticks}
    assert kinds == {"trade", "quote"} and {t.side for t in ds.ticks if t.kind == "trade"} == {"buy", "sell"}
    train, heldout = ds.split()
    assert train[-1].ts <= heldout[0].ts and len(heldout) == len(ds.ticks) - int(len(ds.ticks) * 0.8)


def test_eurusd_quotes_encode_with_fixed_tokens_per_tick() -> None:
    ds = load_eurusd()
    assert ds.rejected == 0 and len(ds.ticks) == 266_219 and ds.ticks[0].ts == 1_549_238_400_994_000_000
    codec = BinnedCodec()
    tokens = codec.encode_stream(ds.ticks[:5000])
    assert len(tokens) == TOKENS_PER_TICK * 5000
