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
    """The streams with a trade row (a price read) of an empty size, and those with one of a size: file_facts'
    `sizeless_streams` and `sized_streams`, whose difference is the price series (no window over the file's rows:
    a set of names each)."""
    if not columns:
        return {"sizeless_streams": pl.lit(None), "sized_streams": pl.lit(None)}
    priced, stream = pl.col("price").is_not_null(), pl.col(SERIES_STREAM)
    return {"sizeless_streams": stream.filter(priced & pl.col(SIZE_EMPTY)).drop_nulls().unique().implode(),
            "sized_streams": stream.filter(priced & ~pl.col(SIZE_EMPTY)).drop_nulls().unique().implode()}


def sized_as_series(path: Path, cmap: ColumnMap, exprs: list[pl.Expr], keys: list[str],
                    facts: dict[str, Any]) -> list[str]:
    """`exprs` with each price series' trade rows at size 1 (in place), and the note that names those streams."""
    streams = sorted(set(facts.get("sizeless_streams") or ()) - set(facts.get("sized_streams") or ()))
    if not streams:
        return []
    at = keys.index("size") + 1
    size, price = exprs[at], exprs[keys.index("price") + 1]
    exprs[at] = pl.when(size.is_null() & price.is_not_null() & _stream(exprs, keys).is_in(streams)).then(
        pl.lit(1.0)).otherwise(size).alias("size")
    named = [s or cmap.stream or "its stream" for s in streams]  # "": the file's one stream, named by the map
    shown = ", ".join(named[:5]) + (f" and {len(named) - 5} more" if len(named) > 5 else "")
    which = "this stream" if len(streams) == 1 else "these streams"
    return [f"{path.name}: {shown}: no trade row of {which} has a size (column {quoted(cmap.size)} empty on each: "
            f"an index level, an iNAV, a fixing, as LSEG writes an index RIC's ticks), so each is read as a price "
            f"series, each price a trade of size 1, as a file without a size column is; a stream with a size on "
            f"some trade rows still has its empty ones rejected (docs/replay.md#price-series)"]


def _stream(exprs: list[pl.Expr], keys: list[str]) -> pl.Expr:
    return exprs[keys.index("stream") + 1] if "stream" in keys else pl.lit("", dtype=pl.String)
