"""How far a quote's ask may stand from its bid before its second number is no ask: the width a header-less
file's guess reads two numbers as a quote to (QUOTE_SPREAD_LIMIT), the judgement over the guess's whole sample
that a second number is a trade's size in round lots (`size_beside_price`), and the per-row reject of a quote
read from a header-less file that is wider than that limit (`wide_quote_reject`): a row whose "ask" is ten times
its bid (a lot of 1,000 beside a bond at 99.5) is counted and left out, never replayed as a market.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, NamedTuple, Sequence

from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.ticks import InvalidTick

# a header-less file's two numbers read as a quote: the second above the first by under 20% (an exotic's spread at
# a reopen is 2%); a quote row of such a file wider than this is rejected as wide_quote
QUOTE_SPREAD_LIMIT = 1.2
FAR_RATIO = 2.0  # a second number at least twice the first: no quote's ask, whatever the market
FAR_SHARE = 0.05  # ... on this share of the sampled rows (and two rows at least): not a bad row or two
MIN_SAMPLE = 5  # rows below which the sample says nothing of a column's values
REPEAT_SHARE = 0.9  # a size in round lots: this share of the rows hold a value other rows hold too


class SecondNumber(NamedTuple):
    """What a header-less file's second number is, by its sampled rows: a size (`is_size`) or neither a size nor
    an ask (refused), and why, for the note or the refusal."""
    is_size: bool
    said: str


def size_beside_price(rows: Sequence[tuple[str, ...]], read: Sequence[int]) -> SecondNumber | None:
    """Whether the second of two numbers (at `read`) is a trade's size rather than a quote's ask, weighed over
    every sampled row, not the first few (a blotter's first rows may all be 100-lots, which sit within 1% of a
    bond at 99.5): written whole where the first has decimals on most rows, at least twice the first on some
    (FAR_SHARE: no quote is that wide), and in a few values that repeat (100, 250, 500, 1000: round lots): a
    size. Whole and that far but not repeating: neither reading is sure (`is_size` False). None when the rows do
    not say so (a quote, or a trade `_size_said` tells)."""
    cells = [(row[read[0]], row[read[1]]) for row in rows if len(row) > max(read)]
    pairs = [(first, second, _number(first), _number(second)) for first, second in cells]
    pairs = [pair for pair in pairs if pair[2] > 0 and pair[3] >= 0]
    if len(pairs) < MIN_SAMPLE:
        return None
    whole = sum(bool(re.fullmatch(r"\d+", second)) and bool(re.search(r"[.,]\d*[1-9]", first))
                for first, second, _, _ in pairs)
    far = [(low, high) for _, _, low, high in pairs if high >= FAR_RATIO * low]
    if 2 * whole <= len(pairs) or len(far) < max(2, FAR_SHARE * len(pairs)):
        return None
    values = Counter(second for _, _, _, second in pairs)
    repeating = sum(count for count in values.values() if count > 1)
    low, high = far[0]
    far_said = (f"on {len(far)} of the {len(pairs)} rows sampled it is at least {FAR_RATIO:g}x the first "
                f"({low:g} / {high:g}), which no quote's ask is")
    if repeating >= REPEAT_SHARE * len(pairs):
        lots = ", ".join(f"{value:g}" for value in sorted(value for value, _ in values.most_common(4)))
        return SecondNumber(True, f"the second number written whole in a few values that repeat ({lots}: round "
                                  f"lots), and {far_said}: a size, not the ask of a quote")
    return SecondNumber(False, f"the second number is written whole where the first has decimals, and {far_said}, "
                               f"yet its values do not repeat as a size's round lots do")


def wide_quote_reject(wire: dict[str, Any], limit: float) -> InvalidTick | None:
    """A header-less file's quote row whose ask is past `limit` times its bid (QUOTE_SPREAD_LIMIT, the width the
    layout's guess reads a quote to): rejected as wide_quote, its own reason, as no market quotes so wide and its
    columns may hold something else (a trade's size as the ask). None for any other row (a 0 bid, an option
    nobody bids, is not measured)."""
    bid, ask = wire.get("bid"), wire.get("ask")
    if not isinstance(bid, (int, float)) or not isinstance(ask, (int, float)) or not 0 < bid * limit < ask:
        return None
    stream = wire.get("stream")
    return InvalidTick("wide_quote", f"ask {ask} is {ask / bid:.2f}x its bid {bid}, past the {limit - 1:.0%} "
                                     f"a header-less file's quote is read to: no quote is that wide, so its columns "
                                     f"may be no bid and ask (a trade's price and size?); --csv-names names them "
                                     f"(docs/replay.md)", stream if isinstance(stream, str) else None)


def _number(text: str) -> float:
    try:
        return float(text.replace(",", "."))
    except ValueError:
        return float("nan")


def headerless_quotes(cmap: ColumnMap, dialect: Dialect | None) -> bool:
    """Whether a file's quotes come from a CSV without a header (a guessed layout, or names given by position):
    no header vouches that its columns are a bid and an ask, so wide_quote_reject measures them."""
    return dialect is not None and not dialect.header and cmap.bid is not None and cmap.ask is not None
