"""Streams whose trade rows never have a size beside a size column that other streams fill: LSEG's index levels
(`.GDAXI` `Trade` rows with a `Price` and an empty `Volume`, beside `VOD.L`'s trades), an iNAV, a benchmark's
fixings. Each is a price series, read as a file without a size column is: each price a trade of size 1, with a note
(review373 #4: every such row was rejected as missing_field, a whole instrument lost, with advice for a wire
client). A stream that has a size on some of its trade rows and none on others is not one: its empty sizes are
still rejected, as a cell lost in the middle of real trades is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from connectors.column_map import ColumnMap
from engine.quoting import quoted

SIZE_EMPTY = "_size_empty"  # a row's size cell, as written: empty (or null)
SERIES_STREAM = "_series_stream"  # a row's stream, as replayed


def series_columns(cmap: ColumnMap, exprs: list[pl.Expr], keys: list[str]) -> list[pl.Expr]:
    """The columns file_facts reads beside the price and size to find the price series (none when the map has no
    trade size column); `exprs[0]` is the time, then one per key."""
    if cmap.price is None or cmap.size is None or "size" not in keys or "price" not in keys:
        return []
    empty = pl.col(cmap.size).cast(pl.String).str.strip_chars().fill_null("") == ""
    return [_stream(exprs, keys).alias(SERIES_STREAM), empty.alias(SIZE_EMPTY)]


def series_fact(columns: list[pl.Expr]) -> dict[str, pl.Expr]:
    """The streams whose every trade row (a price read) has an empty size: file_facts' `price_series`."""
    if not columns:
        return {"price_series": pl.lit(None)}
    bare = (pl.col(SIZE_EMPTY) | pl.col("price").is_null()).all().over(SERIES_STREAM)
    priced = pl.col("price").is_not_null()
    return {"price_series": pl.col(SERIES_STREAM).filter(bare & priced).drop_nulls().unique().sort().implode()}


def sized_as_series(path: Path, cmap: ColumnMap, exprs: list[pl.Expr], keys: list[str],
                    facts: dict[str, Any]) -> list[str]:
    """`exprs` with each price series' trade rows at size 1 (in place), and the note that names those streams."""
    streams = [s for s in facts.get("price_series") or () if s is not None]
    if not streams:
        return []
    at = keys.index("size") + 1
    size, price = exprs[at], exprs[keys.index("price") + 1]
    exprs[at] = pl.when(size.is_null() & price.is_not_null() & _stream(exprs, keys).is_in(streams)).then(
        pl.lit(1.0)).otherwise(size).alias("size")
    shown = ", ".join(streams[:5]) + (f" and {len(streams) - 5} more" if len(streams) > 5 else "")
    which = "this stream" if len(streams) == 1 else "these streams"
    return [f"{path.name}: {shown}: no trade row of {which} has a size (column {quoted(cmap.size)} empty on each: "
            f"an index level, an iNAV, a fixing, as LSEG writes an index RIC's ticks), so each is read as a price "
            f"series, each price a trade of size 1, as a file without a size column is; other streams' empty sizes "
            f"are still rejected (docs/replay.md#price-series)"]


def _stream(exprs: list[pl.Expr], keys: list[str]) -> pl.Expr:
    return exprs[keys.index("stream") + 1] if "stream" in keys else pl.lit("", dtype=pl.String)
