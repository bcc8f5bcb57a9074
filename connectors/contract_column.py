"""A contract column beside a root symbol: `symbol` ES next to `contract` ESZ4 / ESH5 (a futures roll, both
contracts trading). Read by the symbol alone, both contracts would replay as one stream, its price jumping between
their levels at every switch. Vendors name such a column in many ways: Interactive Brokers' `localSymbol`, a
Refinitiv RIC beside its root, a Bloomberg `ticker` (`ESZ4 Index`), CME's `instrument`. When the detected stream
column is split by such a column into several contracts, the contract is the stream: taken alone when its values
extend the symbol's (ESZ4 starts with ES), else joined to it as a contract month is (`ES Z4`), with a note.
Any other column the map does not read whose changes within a stream come with price jumps far beyond the stream's
moves (contracts, currencies under one name) gets a caution naming it (`levels_split_by`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl

from connectors.column_map import ColumnMap
from connectors.field_names import normal_name
from connectors.file_plan import is_csv, scan_file
from connectors.layout import Caution, Dialect

# Columns that name one contract of a root (a `stream` column is no such: Binance's names a symbol's channel)
CONTRACT_NAMES = ("contract", "local_symbol", "localsymbol", "instrument", "instrument_name", "contract_symbol",
                  "contract_code", "raw_symbol", "trading_symbol", "tradingsymbol", "full_symbol", "ric", "ticker",
                  "bbg_ticker", "bloomberg_ticker", "security", "security_des", "series", "outright")


def contract_beside_root(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                         dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """The map with the stream read from a contract column beside the detected stream column (one column) when that
    column holds several contracts of one symbol (ES: ESZ4 and ESH5), and the note that says so; else as it was."""
    root = cmap.stream_col
    if root is None or "+" in root:  # none, or already joined (a contract month, an option's fields)
        return cmap, []
    normal = {normal_name(n): n for n in schema}
    candidates = [normal[c] for c in CONTRACT_NAMES
                  if c in normal and normal[c] != root and normal[c] not in cmap.source_columns()
                  and (schema[normal[c]] == pl.String or is_csv(path))]
    for column in dict.fromkeys(candidates):
        split = _contracts_of(path, names, dialect, root, column)
        if split is None:
            continue
        extends, examples, roots = split
        shown = ", ".join(examples) + (", ..." if len(examples) == 3 else "")
        if extends:
            return replace(cmap, stream_col=column), [
                f"{path.name}: streams from column {column!r} ({shown}), not {root!r} ({roots}): its values extend "
                f"those of {root!r} and split each into several contracts, whose prices would alternate in one "
                f"stream (--columns stream={root} says otherwise)"]
        return replace(cmap, stream_col=f"{root}+{column}"), [
            f"{path.name}: streams from columns {root!r} and {column!r} joined ({roots} with {shown}): "
            f"{column!r} splits each {root!r} into several contracts, whose prices would alternate in one stream "
            f"(--columns stream={root} says otherwise)"]
    return cmap, []


def _contracts_of(path: Path, names: Sequence[str] | None, dialect: Dialect | None, root: str,
                  column: str) -> tuple[bool, list[str], str] | None:
    """Whether `column` splits some value of `root` into several (over the whole file: a roll's second contract may
    start trading late): (whether every value extends its root's, up to 3 of its values, the roots' values shown);
    None when it splits none (one contract per symbol: an ISIN, a RIC of a stock)."""
    overrides = {root: pl.String, column: pl.String} if is_csv(path) else None
    pairs = scan_file(path, names, dialect, overrides).select(
        root=pl.col(root).cast(pl.String).str.strip_chars(), contract=pl.col(column).cast(pl.String).str.strip_chars())
    pairs = pairs.filter((pl.col("root") != "") & (pl.col("contract") != ""))
    facts = pairs.select(
        split=(pl.col("contract").n_unique().over("root") > 1).any(),
        extends=(pl.col("contract").str.starts_with(pl.col("root"))
                 & (pl.col("contract").str.len_chars() > pl.col("root").str.len_chars())).all(),
        examples=pl.col("contract").unique(maintain_order=True).head(3).implode(),
        roots=pl.col("root").unique(maintain_order=True).head(3).implode(),
    ).collect().row(0, named=True)
    if not facts["split"]:
        return None
    return bool(facts["extends"]), list(facts["examples"]), ", ".join(facts["roots"])


LEVEL_ROWS = 200_000  # rows read to tell a column that splits a stream into price levels (a day of a busy future)
SWITCHES_SAID = 10  # changes of the column within a stream, at the least, before its jumps say anything
JUMP_OVER_MOVE = 20  # the median jump where the column changes, over the median move (nonzero) where it does not


def levels_split_by(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                    dialect: Dialect | None) -> list[str]:
    """A caution for each text column the map does not read whose value, where it changes within a stream, comes
    with a price jump JUMP_OVER_MOVE times the stream's median move or more (at SWITCHES_SAID changes or more): two
    series at different price levels (two contracts, two currencies) interleaved in one stream. A venue or a flag
    column changes where the price does not jump: said nothing."""
    price = cmap.price or cmap.bid
    read = {*cmap.source_columns(), *cmap.ts_columns}
    columns = [c for c in schema if c not in read and schema[c] == pl.String]
    if price is None or not columns:
        return []
    overrides = {c: pl.String for c in (*columns, *cmap.stream_columns)} if is_csv(path) else None
    stream = pl.concat_str([pl.col(c).cast(pl.String) for c in cmap.stream_columns], separator=" ", ignore_nulls=True) \
        if cmap.stream_col else pl.lit("")
    rows = scan_file(path, names, dialect, overrides).head(LEVEL_ROWS).select(
        stream.alias("_stream"), pl.col(price).cast(pl.Float64, strict=False).alias("_price"), *columns,
    ).collect().lazy()  # read once, each column then looked at in memory
    cautions = []
    for column in columns:
        value = pl.col(column).str.strip_chars()
        series = rows.filter(pl.col("_price").is_not_null() & value.is_not_null() & (value != "")).with_columns(
            switch=(value != value.shift(1)).over("_stream"), move=pl.col("_price").diff().abs().over("_stream"))
        facts = series.select(switches=pl.col("switch").sum(), jump=pl.col("move").filter(pl.col("switch")).median(),
                              step=pl.col("move").filter(~pl.col("switch") & (pl.col("move") > 0)).median(),
                              values=value.unique(maintain_order=True).head(3).implode()).collect().row(0, named=True)
        if (facts["switches"] or 0) < SWITCHES_SAID or not facts["step"] or facts["jump"] is None or \
                facts["jump"] < JUMP_OVER_MOVE * facts["step"]:
            continue
        joined = f"{cmap.stream_col}+{column}" if cmap.stream_col else column
        cautions.append(Caution(
            f"{path.name}: column {column!r} ({', '.join(facts['values'])}, ...) is not read, and where it changes "
            f"within a stream ({facts['switches']} times) the price jumps by {facts['jump']:g} at the median, against "
            f"moves of {facts['step']:g}: two series at different price levels (two contracts, two currencies) "
            f"interleaved in one stream? If so, read the column as part of the stream: --columns stream={joined}"))
    return cautions
