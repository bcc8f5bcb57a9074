"""A price move in basis points as the decimal prices say it (review410 #6).

(price - reference) / reference x 10,000 of two prices written in decimals comes out of binary floating point a few
ulps off the decimal answer, either way, by how the decimals round in binary: 100 to 100.01 is 1.0000000000005116
bps, 1.0 to 1.0001 is 0.9999999999998899, both exactly 1 bp. The error is absolute, up to about 2e-12 bp whatever
the move's size (it is the prices' last bits over the price), so `bps_moved` takes a move to BPS_DECIMALS places of
a basis point: far above that noise, far below any price's own decimals (1e-9 bp is a price's 13th significant
digit). A price-move trigger of N bps then fires at a move of exactly N (queries/price_moves.py), and a bin (lo, hi]
in bps holds a move of exactly hi at every price level (the binned codec's move slot, the move_bps_* labels).
"""

from __future__ import annotations

from typing import Any

BPS = 10_000
BPS_DECIMALS = 9
# Past this many bps a move has no 9th decimal left to round (a float's 16 digits end above it), and numpy rounds by
# multiplying by 10^9, which would overflow a finite move past 1e299 bps to inf
_ROUNDED_BELOW = 1e9


def bps_moved(price: Any, reference: Any) -> Any:
    """(price - reference) / reference in basis points, to BPS_DECIMALS places (`decimal_bps`): floats, or numpy
    arrays elementwise."""
    return decimal_bps((price - reference) / reference * BPS)


def decimal_bps(move: Any) -> Any:
    """A move in bps computed from decimal prices, to BPS_DECIMALS places: a float, or a numpy array elementwise (an
    inf or NaN, a move float64 cannot hold, stays as it is)."""
    if isinstance(move, float):
        return round(move, BPS_DECIMALS)
    import numpy as np  # (arrays are the labels'; a control client that reads a move trigger never imports numpy)

    bounded = np.clip(move, -_ROUNDED_BELOW, _ROUNDED_BELOW)
    return np.where(np.abs(move) < _ROUNDED_BELOW, np.round(bounded, BPS_DECIMALS), move)
