"""Rows of a trade file that repeat an earlier row's trade id within their stream: REST pages concatenated with
an overlap (page two starts a few trades before page one ended). Each such row would replay as one more tick and
move every count, label and score after it, as a file named twice would (connectors/replay.py reads that once).
They are said, as a caution, not dropped: the id column is known by its name only (no map names it), and a
column of that name that is no unique trade id (an `id` that numbers something else, ids that restart each day)
would lose real trades if its repeats were dropped."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import polars as pl

from connectors.column_map import ColumnMap
from connectors.field_names import normal_name
from connectors.layout import Caution

# Coinbase's `trade_id`, Binance's `id` / `agg_trade_id`, OKX's and Bitget's `tradeId`, Bybit's `trdMatchID`,
# Kraken's and Bitfinex's `id`, Bitstamp's `tid`, Deribit's `trade_id`
TRADE_ID_NAMES = ("trade_id", "tradeid", "trdmatchid", "trd_match_id", "agg_trade_id", "aggtradeid", "match_id",
                  "tid", "id")


def trade_id_column(cmap: ColumnMap, schema: dict[str, Any]) -> str | None:
    """The column of a trades-only map's trade ids, by its name; None for a file with quotes (an `id` there may
    be an order's, which many rows share) or with no such column."""
    if cmap.bid is not None or cmap.price is None:
        return None
    by_name = {normal_name(name): name for name in schema}
    return next((by_name[name] for name in TRADE_ID_NAMES if name in by_name), None)


class RepeatedIds(NamedTuple):
    column: str
    rows: int  # rows whose (stream, id) an earlier row has
    first_repeat: int  # row numbers (file order): the first such row, and the earlier row it repeats
    first_seen: int
    trade_id: Any


def repeated_ids(rows: pl.LazyFrame, stream: pl.Expr, column: str, row: str) -> RepeatedIds | None:
    """The rows (of `rows`, numbered in column `row`) whose (stream, trade id) an earlier row already has."""
    ids = rows.select(stream.alias("_stream"), pl.col(column).alias("_id"), pl.col(row).alias("_row"))
    ids = ids.filter(pl.col("_id").is_not_null()).with_columns(_seen=pl.col("_row").min().over("_stream", "_id"))
    repeats = ids.filter(pl.col("_row") != pl.col("_seen")).sort("_row")
    found = repeats.select(n=pl.len(), row=pl.col("_row").first(), seen=pl.col("_seen").first(),
                           id=pl.col("_id").first()).collect().row(0, named=True)
    if not found["n"]:
        return None
    return RepeatedIds(column, found["n"], found["row"], found["seen"], found["id"])


def repeated_caution(name: str, repeated: RepeatedIds, where: Callable[[int], str]) -> Caution:
    return Caution(f"{name}: {repeated.rows} row(s) repeat the trade id (column {repeated.column!r}) of an earlier "
                   f"row of their stream, the first {where(repeated.first_repeat)} (id {repeated.trade_id!r}, as "
                   f"{where(repeated.first_seen)}): each replays as one more tick, moving every count, label and "
                   f"score after it (export pages that overlap?); write the file without the repeats")
