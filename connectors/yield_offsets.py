"""The price offset for a yield that crosses zero (a Bund's or a JGB's in 2019-2021): 100, not the next whole
number above its lowest price. Validation takes prices above zero only, so such a stream is read shifted
(--price-offset); shifted by 1, a 1 bp move of a yield near 0 is 1 bp of a price near 1, but shifted by 100 one
basis point of yield is one bp of the shifted price (0.01 / 100), so every move_bps_* and volatility_* answer reads
in yield bp, as a rates desk counts. A stream looks like a yield when a price column's name says so (`yield`,
`yld`, `ytm`, `rate`), or, whatever its columns' names, when its prices lie within YIELD_RANGE on both sides of
zero, move by basis points rather than whole units, its name is no spread of two legs (`CLZ4-CLF5`, whose advice
stays the next whole number) and its price column's unit is no currency (`EUR/MWh`: a power market's price). Asked by
shifted_prices.offset_advice and zero_crossings.crossing_refusal, which name the offset.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

YIELD_OFFSET = 100
YIELD_RANGE = (-5.0, 30.0)  # yields in percent: the lowest a government's went (-1%), the highest an EM's (~30%)
RATE_NAMES = re.compile(r"(^|[^a-z])(yield|yld|ytm|rate)([^a-z]|$)", re.IGNORECASE)
SPREAD_LEGS = re.compile(r"\w[-\s:/]\w")  # `CLZ4-CLF5`, `EPEX:DE H13`: two legs or a venue's product, no yield


def rate_columns(columns: Iterable[str | None]) -> list[str]:
    """The price columns of a map whose names say they hold yields or rates (`bid_yield`, `yld`, `Rate`)."""
    return [column for column in columns if column and RATE_NAMES.search(column)]


# A yield in percent moves by basis points: a stream whose median move between its prices is past this (half a
# point of yield, at every print) is a price, however near zero (a power market's hours at -3..25 EUR/MWh, moving
# 1.59 EUR an hour: review441 #6)
YIELD_MOVE_MAX = 0.5
# a price column's unit in a currency (`Price (EUR)`, `Day-ahead Price [EUR/MWh]`, `Price (USD/t)`): a price, no yield
CURRENCY_UNIT = re.compile(r"(^|[^A-Za-z])[A-Z]{3}([^A-Za-z]|$)|[€$£¥]")


def yield_valued(row: dict[str, Any], unit: str | None = None) -> bool:
    """Whether a stream's prices (zero_prices' aggregated row: its lowest, highest and median move) look like a
    yield in percent: below zero and above it, all within YIELD_RANGE, moving by less than YIELD_MOVE_MAX at the
    median, under a name that is no spread's and a price column whose ``unit`` (its header's) is no currency."""
    low, high, move = row.get("lowest"), row.get("highest"), row.get("median_move")
    return low is not None and high is not None and YIELD_RANGE[0] <= low < 0 < high <= YIELD_RANGE[1] and \
        not SPREAD_LEGS.search(str(row.get("stream") or "")) and (move is None or move <= YIELD_MOVE_MAX) and \
        not (unit and CURRENCY_UNIT.search(unit))


def yield_why(streams: list[str]) -> str:
    """Why the offset named for yield-like ``streams`` is 100, and what its answers then mean."""
    them = f"{streams[0]} looks" if len(streams) == 1 else f"{', '.join(streams)} look"
    low, high = (f"{bound:g}" for bound in YIELD_RANGE)
    return (f"{them} like a yield in percent (a price column named as a yield or rate, or prices between {low} and "
            f"{high} on both sides of zero): on a yield in percent an offset of {YIELD_OFFSET} makes one basis point "
            f"of yield one bp of the shifted price, so move_bps_* and volatility_* read in yield bp, and `up` means "
            f"the yield rose (docs/replay.md, yields)")
