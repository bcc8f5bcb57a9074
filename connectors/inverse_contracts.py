"""Contracts whose sizes do not count the coin, known by their instrument names (and the file's venue where it says
one), for the note that says what their sizes count.

An inverse (coin-margined) contract's size is a count of contracts of a fixed USD value, not of the coin: Binance
COIN-M's `BTCUSD_PERP` and `BTCUSD_240329` (100 USD a contract for BTC, 10 USD for the others), OKX's `BTC-USD-SWAP`
and `BTC-USD-240329` (the same), Bybit's `BTCUSD` and `BTCUSDZ25` (1 USD), Kraken Futures' `PI_XBTUSD` and
`FI_XBTUSD_240329` (1 USD), BitMEX's `XBTUSD` (1 USD), Deribit's `BTC-PERPETUAL` and `BTC-29MAR24` (`amount` in
USD). OKX's linear swaps and futures (`BTC-USDT-SWAP`) count contracts too, of a fixed amount of the coin (its
`ctVal`: 0.01 BTC, 0.1 ETH). Binance's and Bybit's linear contracts (`BTCUSDT`) count the coin. Replay reads sizes
as written, never converted: the note says so, so that a user comparing sizes across kinds knows the units.

A name's venue is the file's where the file says it (connectors/derivative_streams.py `derivative_market`: Bybit's
inverse `BTCUSD` is stream `BTCUSD_PERP`, as Binance COIN-M's is named): only that venue's rules are then looked at
(review431 #1: a Bybit file's `BTCUSD_PERP` was said to be Binance COIN-M's, 100 USD a contract). Elsewhere a name
is told by its shape alone, Bybit's excepted (its names are another venue's shapes).
"""

from __future__ import annotations

import re
from typing import Any, Callable, NamedTuple

import polars as pl

from connectors.derivative_streams import derivative_market
from connectors.file_plan import FilePlan

SAMPLE_ROWS = 10_000  # a file's first rows whose stream names are looked at
NAMES_SHOWN = 3


def _usd_per_contract(coin: str, btc: int, other: int) -> str:
    return f"a contract is {btc if coin in ('BTC', 'XBT') else other} USD"


def _coin_per_contract(coin: str) -> str:
    """An OKX linear contract's value (`ctVal`), its instrument list's for the others."""
    value = {"BTC": "0.01 BTC", "ETH": "0.1 ETH"}.get(coin)
    return f"a contract is {value}" if value else f"a contract is its ctVal of {coin} (OKX's instrument list)"


class ContractRule(NamedTuple):
    pattern: re.Pattern[str]  # group 1: the coin
    venue: str
    value: Callable[[str], str]  # what its sizes count, given the coin
    markets: frozenset[str]  # the venue's `derivative_market` names: a file of another venue is not looked at so
    by_name: bool = True  # told by the name alone where the file says no venue


# (BitMEX's first: its perpetual read from a derivatives file is `XBTUSD_PERP`, which is no COIN-M name)
CONTRACT_RULES = (
    ContractRule(re.compile(r"^(XBT)(?:USD(?:_PERP)?|[FGHJKMNQUVXZ]\d\d)$"), "BitMEX inverse",
                 lambda coin: "a contract is 1 USD", frozenset({"bitmex"})),
    ContractRule(re.compile(r"^([A-Z0-9]+)USD(?:_PERP|[FGHJKMNQUVXZ]\d\d)?$"), "Bybit inverse",
                 lambda coin: "a contract is 1 USD", frozenset({"bybit"}), by_name=False),
    ContractRule(re.compile(r"^(?:PI|FI)_([A-Z0-9]+)USD(?:_\d{6})?$"), "Kraken Futures inverse",
                 lambda coin: "a contract is 1 USD", frozenset({"kraken-futures", "cryptofacilities"})),
    ContractRule(re.compile(r"^([A-Z0-9]+)USD_(?:PERP|\d{6})$"), "Binance COIN-M",
                 lambda coin: _usd_per_contract(coin, 100, 10),  # (a futures preset says no more than Binance's)
                 frozenset({"binance-delivery", "binance-futures"})),
    ContractRule(re.compile(r"^([A-Z0-9]+)-USD-(?:SWAP|\d{6})$"), "OKX inverse",
                 lambda coin: _usd_per_contract(coin, 100, 10), frozenset({"okex-swap", "okex-futures"})),
    ContractRule(re.compile(r"^([A-Z0-9]+)-USD[TC]-(?:SWAP|\d{6})$"), "OKX linear", _coin_per_contract,
                 frozenset({"okex-swap", "okex-futures"})),
    ContractRule(re.compile(r"^(BTC|ETH)-(?:PERPETUAL|\d{1,2}[A-Z]{3}\d{2})$"), "Deribit inverse",
                 lambda coin: "amount in USD", frozenset({"deribit"})),
)


# BitMEX's fields beside its trades (Bybit's history files write them too): with these, or a path naming BitMEX, an
# `XBTUSD` is BitMEX's contract; elsewhere it is Kraken's spot pair, whose sizes are BTC
BITMEX_SIGNS = frozenset({"homeNotional", "foreignNotional"})


def bitmex_file(plan: FilePlan) -> bool:
    return "bitmex" in plan.given_name.lower() or BITMEX_SIGNS <= set(plan.schema)


def contract_of(stream: str, market: str | None = None, bitmex: bool = True) -> tuple[str, str] | None:
    """(venue, what its sizes count) for a contract whose sizes are not the coin; None for any other. ``market``:
    the file's derivatives venue (`derivative_market`), None where it says none; ``bitmex``: whether the file is
    BitMEX's (an `XBTUSD` elsewhere is a spot pair)."""
    for rule in CONTRACT_RULES:
        if market is not None and market not in rule.markets \
                or market is None and (not rule.by_name or rule.venue.startswith("BitMEX") and not bitmex):
            continue
        if (found := rule.pattern.match(stream)) is not None:
            return rule.venue, rule.value(found.group(1))
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
    """A note for each file whose streams include contracts whose sizes are not the coin (CONTRACT_RULES): their
    sizes are contracts (or USD), read as written."""
    notes = []
    for plan in plans:
        if not isinstance(plan, FilePlan) or plan.columns.size is None and plan.columns.bid_size is None:
            continue
        market, bitmex = derivative_market(plan.path, plan.columns, plan.schema), bitmex_file(plan)
        found = [(stream, contract) for stream in plan_streams(plan)
                 if (contract := contract_of(stream, market, bitmex)) is not None]
        if not found:
            continue
        more = f"; and {len(found) - NAMES_SHOWN} more" if len(found) > NAMES_SHOWN else ""
        shown = "; ".join(f"{stream} ({venue}: {value})" for stream, (venue, value) in found[:NAMES_SHOWN]) + more
        notes.append(f"{plan.given_name}: contracts whose sizes are not in the coin: {shown}. Sizes are read as "
                     f"written, not converted (a size of 3 at 100 USD a contract is 300 USD, at 0.01 BTC 0.03 BTC); "
                     f"Binance's and Bybit's linear contracts (BTCUSDT) count the coin (docs/replay.md, \"Inverse "
                     f"and linear contracts\")")
    return notes
