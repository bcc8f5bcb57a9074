"""What a file's side cell means: the side maps of vendors whose side column is not the aggressor's buy/sell (a
buyer-maker flag, the maker's side or role, LOBSTER's direction, Bitstamp's type, FIX's AggressorSide), and
`side_lookup`, which reads a raw cell by a map's `side_map`, else by the words every vendor uses (SIDE_WORDS).
Their own module because the presets, layout detection, the notes on a layout and a file's contents, and the
file plan all read sides, and none of them needs the rest of a column map to do it.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from connectors.field_names import SIDE_WORDS

# A buyer-maker flag (Binance's is_buyer_maker, `m`): true means the buyer's order rested, so the seller aggressed.
BUYER_MAKER: dict[str, str] = {"true": "sell", "false": "buy", "1": "sell", "0": "buy"}
# The maker's (resting order's) side, Coinbase Exchange's `side`: the aggressor took the other side.
MAKER_SIDE: dict[str, str] = {"buy": "sell", "sell": "buy"}
# A `maker` column of the resting order's role (buyer/seller, b/s): a maker buyer means the seller aggressed.
MAKER_ROLE: dict[str, str] = {"buyer": "sell", "seller": "buy", "b": "sell", "s": "buy"}
# LOBSTER's `direction`, the resting limit order's side: an executed buy order (1) was hit by a seller.
LOBSTER_DIRECTION: dict[str, str] = {"1": "sell", "-1": "buy"}
# Upbit's `ask_bid` and Bithumb's `type`: the taker's order side, ASK a sell order that took a bid (the taker sold)
ASK_BID: dict[str, str] = {"ask": "sell", "bid": "buy"}
BITSTAMP_TYPE: dict[str, str] = {"0": "buy", "1": "sell"}  # Bitstamp's transaction `type`: the taker bought (0) or sold
# CryptoCompare's (CCData's legacy streamer) trade flag `F`: 1 the taker sold, 2 bought, 4 unknown
CRYPTOCOMPARE_FLAG: dict[str, str | None] = {"1": "sell", "2": "buy", "4": None}
# FIX AggressorSide (tag 1057/5797: CME MDP 3.0, Eurex EOBI, ...): 1 the buyer aggressed, 2 the seller, 0 neither
FIX_AGGRESSOR: dict[str, str | None] = {"1": "buy", "2": "sell", "0": None}
# IQFeed's TradeAggressor (protocol 6 tick history): as FIX's, and 3 "neither buy nor sell"
IQFEED_AGGRESSOR: dict[str, str | None] = {**FIX_AGGRESSOR, "3": None}
# A prediction market's taker side (Kalshi's `taker_side`): the outcome the taker bought, yes or no. Its prices are
# the yes contract's (yes_price), and buying no is selling yes (no_price = 100 - yes_price), the docs' Kalshi map.
YES_NO: dict[str, str] = {"yes": "buy", "no": "sell"}


def side_lookup(side_map: dict | None) -> Callable[[Any], Any]:
    """Raw side cell -> buy/sell/None by `side_map`, else SIDE_WORDS; an unknown value comes back as it is."""
    # YAML may give `1: sell`, `"1": sell` or `true: sell`; accept any of them for a 1/True/"1" cell. Values the
    # map does not name are read as SIDE_WORDS (BUY, b, A, ...); anything else goes on to be rejected.
    side_map = side_map or {}
    table = SIDE_WORDS | dict(side_map) | {str(k).lower(): v for k, v in side_map.items()}
    table |= {f"{float(k)}": v for k, v in side_map.items() if re.fullmatch(r"[+-]?\d+", str(k))}  # -1.0 as -1
    return lambda raw: table.get(raw, table.get(str(raw).strip().lower(), raw))
