"""Quotes of size 0: an indicative quote (a liquidity provider's price it does not stand behind, as LMAX's and
other FX venues' feeds show around the 17:00 New York rollover), not a firm one. Replay reads such a quote as any
other: it sets the mark (the mid) and so every label after it. `zero_size_note` says so once per file when more
than ZERO_SIZE_SHARE of its quotes carry a size of 0, naming the way to leave the rollover out (--hours). A side
priced 0 is no side (connectors/ticks.py `one_sided_quote`: an option nobody bids), so its size of 0 is not an
indicative price: such quotes are rejected as one-sided, or, with --zero-bid price, taken with the 0 bid as a price
nobody stands behind by definition; neither is counted (review410 #8: an option's no-bid quotes got FX advice).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import polars as pl

ZERO_SIZE_SHARE = 0.03  # of a file's quotes with a size of 0: more than a stray row or two


def zero_size_facts(sized: list[str], zero_bid_is_price: bool = False) -> dict[str, pl.Expr]:
    """file_facts' counts of a file's quotes read as quotes (rows with a bid and an ask, neither 0, or only the bid
    0 where ``zero_bid_is_price``: --zero-bid price) and of those with a size of 0 on a side priced other than 0;
    `sized`: the quote size fields the file maps (bid_size, ask_size), none: nothing counted."""
    if not sized:
        return {"quote_rows": pl.lit(0), "zero_size_quotes": pl.lit(0)}
    bid, ask = pl.col("bid"), pl.col("ask")
    quote = bid.is_not_null() & ask.is_not_null() & (ask != 0) & ((bid != 0) | zero_bid_is_price)
    zero = pl.any_horizontal(*((pl.col(key) == 0) & (pl.col(key.removesuffix("_size")) != 0)
                               for key in sized)).fill_null(False)
    return {"quote_rows": quote.sum(), "zero_size_quotes": (quote & zero).sum()}


def zero_size_note(path: Path, facts: Mapping[str, Any], hours_given: bool = False) -> list[str]:
    """A note when more than ZERO_SIZE_SHARE of a file's quotes have a size of 0 (docs/replay.md, zero-size
    quotes), naming --hours unless a window is given (`hours_given`); none otherwise."""
    quotes, zero = int(facts.get("quote_rows") or 0), int(facts.get("zero_size_quotes") or 0)
    if not quotes or zero <= ZERO_SIZE_SHARE * quotes:
        return []
    hours = "" if hours_given else (" To leave the rollover out, --hours '17:10-40:55 America/New_York' keeps "
                                    "17:10 to 16:55 the next day")
    return [f"{path.name}: {zero:,} of its {quotes:,} quotes ({zero / quotes:.0%}) have a bid or ask size of 0: "
            f"indicative quotes (a venue's price no one stands behind, as around the 17:00 New York rollover), "
            f"read as any quote: each sets the mark (its mid) and the labels after it.{hours} (docs/replay.md, "
            f"zero-size quotes)"]
