"""A `BinnedCodec`'s tick vocabulary: `TokenBin` (what one token means: its slot, name and value range) and the
table of tick tokens a `BinnedSpec` defines, in id order (pad, event, gap, move, size, imbalance).

Apart from connectors/codec.py because the vocabulary is fixed by the spec alone and read on its own (token names,
`describe`), while the codec encodes ticks into it.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from connectors.binned_spec import BinnedSpec

ZERO_BPS = 1e-6


class TokenBin(NamedTuple):
    """What one tick token means: its slot and the half-open value range (lo, hi] (a move's negative token, the
    mirror of its positive one, holds the moves whose |move| is in (-hi, -lo]: -1 bp exactly is `-6`, as 1 is `+6`)."""

    slot: str
    name: str
    lo: float
    hi: float


def signed_bins(edges: tuple[float, ...]) -> list[tuple[str, float, float]]:
    bounds = (0.0, *edges, math.inf)
    pos = [(f"+{i}", bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
    neg = [(f"-{i}", -bounds[i + 1], -bounds[i]) for i in range(len(bounds) - 1)]
    return [("zero", -ZERO_BPS, ZERO_BPS)] + pos + neg


def bins(edges: tuple[float, ...], lo: float) -> list[tuple[str, float, float]]:
    bounds = (lo, *edges, math.inf)
    return [(str(i), bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def tick_tokens(s: BinnedSpec) -> list[TokenBin]:
    """The tick tokens of spec ``s``, in id order from 0 (the pad); question and answer tokens follow them."""
    table: list[TokenBin] = [TokenBin("special", "<pad>", math.nan, math.nan)]
    events = ("buy", "sell", "trade", "q_narrow", "q_same", "q_wide")
    if s.version == 1:
        table += [TokenBin("event", n, math.nan, math.nan) for n in events]
    else:  # event x scale tag; lo/hi carry the tag's range of the per-tick RMS move in bps
        table += [TokenBin("event", f"{n}/s{k}", lo, hi)
                  for k, (_, lo, hi) in enumerate(bins(s.scale_tag_edges_bps, 0.0)) for n in events]
    table += [TokenBin("gap", "start", math.nan, math.nan), TokenBin("gap", "zero", -math.inf, 0.0)]
    if s.version == 1:
        table += [TokenBin("gap", n, lo, hi) for n, lo, hi in bins(s.gap_edges_ns, 0.0)]
        table += [TokenBin("move", n, lo, hi) for n, lo, hi in signed_bins(s.move_edges_bps)]
    else:  # log2 of gap and |move| over their running geometric means
        table += [TokenBin("gap", n, lo, hi) for n, lo, hi in bins(s.gap_log2_edges, -math.inf)]
        table += [TokenBin("move", "zero", math.nan, math.nan)]
        table += [TokenBin("move", f"{sign}{n}", lo, hi) for sign in "+-"
                  for n, lo, hi in bins(s.move_log2_edges, -math.inf)]
    table += [TokenBin("size", "zero", -math.inf, 0.0)]
    table += [TokenBin("size", n, lo, hi) for n, lo, hi in bins(s.size_log2_edges, -math.inf)]
    table += [TokenBin("imbalance", "na", math.nan, math.nan)]
    table += [TokenBin("imbalance", n, lo, hi) for n, lo, hi in bins(s.imbalance_edges, -math.inf)]
    return table
