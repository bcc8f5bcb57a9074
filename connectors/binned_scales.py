"""What a `BinnedCodec` remembers of one stream (`BinnedState`: its last tick, its trade-size EWMA and the running
scales of spec version 2) and the two pieces of arithmetic those scales are kept with.

Apart from connectors/codec.py because this is the per-stream state an encoder copies, commits and a tick log
records (`Codec.state_record`), while the codec is the stateless rules applied to it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class BinnedState:
    """What BinnedCodec remembers about one stream."""

    last_ts: int | None = None
    last_ref: float | None = None
    last_spread: float | None = None
    size_ewma: float | None = None
    ticks: int = 0
    # Version 2 running scales and how many observations each has absorbed (for the warm-up weight).
    move_log2_mean: float | None = None  # of |non-zero move| in bps
    moves_seen: int = 0
    move_sq_mean: float | None = None  # of move^2 in bps^2, zeros included (the scale tag)
    gap_log2_mean: float | None = None  # of positive gaps in ns
    gaps_seen: int = 0
    ticks_moved: int = 0  # ticks with a previous reference price (observations in move_sq_mean)

    def __copy__(self) -> BinnedState:
        """A shallow copy (every field is a scalar), made for every tick encoded (StreamEncoder.encode works on
        one): copy.copy's generic path (__reduce_ex__) was a tenth of a restart's tick log replay (fix349)."""
        new = BinnedState.__new__(BinnedState)
        new.__dict__.update(self.__dict__)
        return new


def log2_ratio(num: float, den: float) -> float:
    """log2(num / den) for num > 0 and den >= 0, also where the quotient under- or overflows a float (a size of
    1e-305 after ones of 1e20): the same bits as math.log2(num / den) wherever that is defined."""
    if den <= 0:
        return math.inf
    q = num / den
    return math.log2(q) if 0 < q < math.inf else math.log2(num) - math.log2(den)


def running_mean(mean: float | None, x: float, n: int, alpha: float) -> float:
    """EWMA with weight max(alpha, 1/n) for the n-th value: the plain mean until n reaches 1/alpha."""
    return x if mean is None else mean + max(alpha, 1.0 / n) * (x - mean)
