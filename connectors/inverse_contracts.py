"""Inverse contracts known by their instrument names, for the note that says what their sizes count.

An inverse (coin-margined) contract's size is a count of contracts of a fixed USD value, not of the coin: Binance
COIN-M's `BTCUSD_PERP` and `BTCUSD_240329` (100 USD a contract for BTC, 10 USD for the others), OKX's `BTC-USD-SWAP`
and `BTC-USD-240329` (the same), BitMEX's `XBTUSD` (1 USD a contract), Deribit's `BTC-PERPETUAL` and
`BTC-29MAR24` (`amount` in USD). A linear contract (`BTCUSDT`, `BTC-USDT-SWAP`) counts the coin. Replay reads sizes
as written, never converted: the note says so, so that a user comparing sizes across the two kinds knows the units.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from connectors.file_plan import FilePlan

SAMPLE_ROWS = 10_000  # a file's first rows whose stream names are looked at
NAMES_SHOWN = 3


def _usd_per_contract(coin: str, btc: int, other: int) -> str:
    return f"a contract is {btc if coin in ('BTC', 'XBT') else other} USD"


# (pattern, venue, what its sizes count, given the pattern's coin)
# (BitMEX's first: its perpetual read from a derivatives file is `XBTUSD_PERP`, which is no COIN-M name)
INVERSE = (
    (re.compile(r"^(XBT)(?:USD(?:_PERP)?|[FGHJKMNQUVXZ]\d\d)$"), "BitMEX inverse", lambda coin: "a contract is 1 USD"),
    (re.compile(r"^([A-Z0-9]+)USD_(?:PERP|\d{6})$"), "Binance COIN-M", lambda coin: _usd_per_contract(coin, 100, 10)),
    (re.compile(r"^([A-Z0-9]+)-USD-(?:SWAP|\d{6})$"), "OKX inverse", lambda coin: _usd_per_contract(coin, 100, 10)),
    (re.compile(r"^(BTC|ETH)-(?:PERPETUAL|\d{1,2}[A-Z]{3}\d{2})$"), "Deribit inverse", lambda coin: "amount in USD"),
)


# BitMEX's fields beside its trades (Bybit's history files write them too): with these, or a path naming BitMEX, an
# `XBTUSD` is BitMEX's contract; elsewhere it is Kraken's spot pair, whose sizes are BTC
BITMEX_SIGNS = frozenset({"homeNotional", "foreignNotional"})


def bitmex_file(plan: FilePlan) -> bool:
    return "bitmex" in plan.given_name.lower() or BITMEX_SIGNS <= set(plan.schema)


def inverse_of(stream: str, bitmex: bool = True) -> tuple[str, str] | None:
    """(venue, what its sizes count) for an inverse contract's name; None for any other. ``bitmex``: whether
    the file is BitMEX's (an `XBTUSD` elsewhere is a spot pair)."""
    for pattern, venue, value in INVERSE:
        if venue.startswith("BitMEX") and not bitmex:
            continue
        if (found := pattern.match(stream)) is not None:
            return venue, value(found.group(1))
    return None


def plan_streams(plan: FilePlan) -> list[str]:
    """A file's stream names: its fixed one, or those of its first SAMPLE_ROWS rows."""
    cmap = plan.columns
    if cmap.stream_col is None:
        return [name] if (name := cmap.stream or cmap.default_stream) else []
    try:
        return plan.frame.select(pl.col("stream")).head(SAMPLE_ROWS).unique(maintain_order=True).collect() \
            .to_series().drop_nulls().to_list()
    except pl.exceptions.PolarsError:
        return []  # its rows' errors are named as they are read


def inverse_notes(plans: list[Any]) -> list[str]:
    """A note for each file whose streams include inverse contracts: their sizes are contracts, read as written."""
    notes = []
    for plan in plans:
        if not isinstance(plan, FilePlan) or plan.columns.size is None and plan.columns.bid_size is None:
            continue
        bitmex = bitmex_file(plan)
        found = [(stream, inverse) for stream in plan_streams(plan)
                 if (inverse := inverse_of(stream, bitmex)) is not None]
        if not found:
            continue
        more = f"; and {len(found) - NAMES_SHOWN} more" if len(found) > NAMES_SHOWN else ""
        shown = "; ".join(f"{stream} ({venue}: {value})" for stream, (venue, value) in found[:NAMES_SHOWN]) + more
        notes.append(f"{plan.given_name}: inverse contracts, whose sizes count contracts of a fixed USD value (or "
                     f"USD), not the coin: {shown}. Sizes are read as written, not converted (a size of 3 at 100 USD "
                     f"a contract is 300 USD); a linear contract's (BTCUSDT) count the coin (docs/replay.md, "
                     f"\"Inverse and linear contracts\")")
    return notes
