"""A bar file's closed days: Yahoo writes a market holiday as a row of its date and nulls
(`2024-01-15,null,null,null,null,null,null`). Such a row is the vendor's way to say the market was closed, not a
bar with its close missing: it is left out as holding no tick (filtered_out, not an error: file_plan's convert)
and said once, when the file is read, with how many and the first; a bar row that has some values but no close
is still rejected (missing_field).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import polars as pl

from connectors.epoch_counts import scaled_ts
from connectors.ticks import utc_text

VALUE_KEYS = ("price", "size", "bid", "ask")  # what a bar row gives besides its time (and stream)
CLOSED_DAY = "a closed day (a bar row of its time and nulls alone: Yahoo's market holiday), no bar: not an error"


def closed_day(out: dict) -> bool:
    """A bar row read (``out``: the tick's fields so far) that holds its time and no value."""
    return "ts" in out and not any(key in out for key in VALUE_KEYS)


def with_closed_days_note(plan: Any) -> Any:
    """A bar file's plan (a FilePlan, which imports this module for its convert) with a note on its closed-day rows,
    when it has any; other plans as they are."""
    values = [key for key in VALUE_KEYS if key in plan.keys]
    if not plan.bars or not values:
        return plan
    empty = pl.all_horizontal(pl.col(value).is_null() for value in values)
    closed = plan.frame.filter(pl.col("_ts").is_not_null() & empty)
    rows, first = closed.select(pl.len(), pl.col("_ts").min()).collect().row(0)
    if not rows:
        return plan
    many = rows != 1
    return replace(plan, notes=(*plan.notes, (
        f"{plan.path.name}: {rows} row{'s' if many else ''} hold{'' if many else 's'} a date and nulls alone (the "
        f"first {utc_text(scaled_ts(first, plan.ts_factor))}): the vendor's way to write a closed day (a market "
        f"holiday), skipped as holding no bar (counted as left out, filtered_out), not rejected")))
