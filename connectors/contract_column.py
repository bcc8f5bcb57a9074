"""A contract column beside a root symbol: `symbol` ES next to `contract` ESZ4 / ESH5 (a futures roll, both
contracts trading). Read by the symbol alone, both contracts would replay as one stream, its price jumping between
their levels at every switch. Vendors name such a column in many ways: Interactive Brokers' `localSymbol`, a
Refinitiv RIC beside its root, a Bloomberg `ticker` (`ESZ4 Index`), CME's `instrument`. When the detected stream
column is split by such a column into several contracts trading at once at different price levels (their values
alternate within the symbol, their median prices far apart against their moves), the contract is the stream: taken
alone when its values extend the symbol's (ESZ4 starts with ES), else joined to it as a contract month is
(`ES Z4`), with a note. Values that follow one another and read as futures contracts (a root, a month code and
a year: ESH4 then ESM4; or YYYYMM) are a roll with no overlap: each contract is a stream too, said as a roll. A
renamed ticker (FB then META: never alternating) and a stock's per-venue RICs (VOD.L, VOD.BS: one price level) are
one instrument: the symbol stays the stream, with a note.
Any other column the map does not read whose changes within a stream come with price jumps far beyond the stream's
moves (contracts, currencies under one name) gets a caution naming it (`levels_split_by`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.column_names import CONTRACT_MONTH_NAMES, MONTH_NAMES, PRODUCT_NAMES, with_product
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.futures_codes import DATED_CODE
from connectors.file_scans import is_csv, scan_file
from connectors.instrument_identifiers import identifier_typed, shown_identifier
from connectors.shell_words import columns_option
from engine.quoting import quoted

# A futures contract's name: a root, a month code (F..Z) and a year's last one or two digits (ESH4, CLM24, ES H4),
# or a contract month as YYYYMM (202406): futures_codes' rule for an exchange's dated code; or a contract month as
# ICE's exports write it, the month's name and the year (`Jan25`, `Feb-25`, `MAR 2025`: review441 #5)
MONTH_WORD_YEAR = r"(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[-\s]?(?:20)?\d\d"
CONTRACT_PATTERN = rf"^(?:{DATED_CODE}|{MONTH_WORD_YEAR})$"

# Columns that name one contract of a root (a `stream` column is no such: Binance's names a symbol's channel)
CONTRACT_NAMES = ("contract", "local_symbol", "localsymbol", "instrument", "instrument_name", "contract_symbol",
                  "contract_code", "raw_symbol", "trading_symbol", "tradingsymbol", "full_symbol", "ric", "ticker",
                  "bbg_ticker", "bloomberg_ticker", "security", "security_des", "series", "outright",
                  "kontrakt", "contrat", "contratto", "contrato")  # European exports' contract


def contract_beside_root(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                         dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """The map with the stream read from a contract column beside the detected stream column (one column) when that
    column holds several contracts of one symbol trading at once at different price levels (ES: ESZ4 and ESH5 in a
    roll), and the note that says so; else as it was, with a note when the column splits a symbol without that.
    With no stream column, a product column (`Product` ES) is the root when a contract column beside it reads as
    futures contracts (a roll, or contracts apart in price): the streams are then both, no longer the file's name."""
    normal = {normal_name(n): n for n, dtype in schema.items() if not dtype.is_nested()}  # (lists name no contract)
    product = next((normal[c] for c in PRODUCT_NAMES if c in normal), None) if cmap.stream_col is None else None
    root = cmap.stream_col or product
    if root is None or "+" in root:  # none, or already joined (a contract month, an option's fields)
        return cmap, []
    # any type: YYYYMM integers in a Parquet file (CONTRACT_MONTH_NAMES beside a stream column are joined already)
    months = {normal[c] for c in (*MONTH_NAMES, *CONTRACT_MONTH_NAMES) if c in normal}
    candidates = [normal[c] for c in (*CONTRACT_NAMES, *MONTH_NAMES, *CONTRACT_MONTH_NAMES)
                  if c in normal and normal[c] != root and normal[c] not in cmap.source_columns()
                  and (normal[c] in months or schema[normal[c]] == pl.String or is_csv(path))]
    for column in dict.fromkeys(candidates):
        split = _contracts_of(path, names, dialect, root, column, cmap.price or cmap.bid)
        if split is None or column in months and (not split.contracts or
                                                  _calendar_months(path, names, dialect, column, cmap.ts_columns[0])):
            continue  # a month of no contract's (1..12; a bar's own month) is no part of an instrument's name
        if product is not None and not (split.contracts and not split.interleaved or
                                        split.interleaved and split.levels_differ):
            continue  # no sign of contracts: the product alone names no stream, the file's name still does
        return _split_by(path, cmap if product is None else replace(cmap, stream=None), root, column, split)
    return cmap, []


def _split_by(path: Path, cmap: ColumnMap, root: str, column: str, split: Split) -> tuple[ColumnMap, list[str]]:
    """The map (and its note) for a contract column that splits the root's values: a stream per contract when they
    roll or trade at once at levels apart, else the root's as it was, said."""
    shown = ", ".join(split.examples) + (", ..." if len(split.examples) == 3 else "")
    if not split.interleaved and split.contracts:
        return _rolled(path, cmap, root, column, split)
    if not split.interleaved or not split.levels_differ:
        return cmap, [f"{path.name}: streams from column {quoted(root)} ({split.roots}), though {quoted(column)} "
                      f"({shown}) splits some into several values: {_why_not_split(split)}, so they read as one "
                      f"instrument ({columns_option(f'stream={root}+{column}')} reads a stream per value)"]
    measured = f"alternating {split.interleaved} times, {split.levels}"
    if split.extends:
        return replace(cmap, stream_col=column), [
            f"{path.name}: streams from column {quoted(column)} ({shown}), not {quoted(root)} ({split.roots}): its "
            f"values extend those of {quoted(root)} and split each into contracts trading at once at different price "
            f"levels ({measured}) ({columns_option(f'stream={root}')} says otherwise)"]
    return replace(cmap, stream_col=f"{root}+{column}"), [
        f"{path.name}: streams from columns {quoted(root)} and {quoted(column)} joined ({split.roots} with {shown}): "
        f"{quoted(column)} splits each {quoted(root)} into contracts trading at once at different price levels "
        f"({measured}) ({columns_option(f'stream={root}')} says otherwise)"]


def _calendar_months(path: Path, names: Sequence[str] | None, dialect: Dialect | None, column: str,
                     ts: str) -> bool:
    """Whether a month column holds its rows' own months (the YYYYMM its time's text starts with, `2024-03-11...`):
    a calendar month, as a bar file's, no contract month (ES's March contract trades from December)."""
    overrides = {c: pl.String for c in (column, ts)} if is_csv(path) else None
    own = pl.col(ts).cast(pl.String).str.replace_all(r"\D", "").str.slice(0, 6)
    same = scan_file(path, names, dialect, overrides).head(LEVEL_ROWS).select(
        (pl.col(column).cast(pl.String).str.strip_chars() == own).mean()).collect().item()
    return (same or 0) > 0.5


def _rolled(path: Path, cmap: ColumnMap, root: str, column: str, split: Split) -> tuple[ColumnMap, list[str]]:
    """The map that reads a stream per contract of a roll (ESH4 then ESM4 beside ES), and its note: read as one
    stream, the roll's step between the two contracts' levels would be scored as a move."""
    roll = " -> ".join(split.examples[:2])
    shown = f"{', '.join(split.examples)}{', ...' if len(split.examples) == 3 else ''}"
    one = columns_option(f"stream={root}")
    said = (f"a futures roll ({roll}), {split.levels}, so each contract is a stream ({one} reads "
            f"them as one, its step at the roll scored as a move)")
    # each column named once: "from column 'Contract': 'Contract' (ESH4, ESM4) changes" said it twice
    if split.extends:
        return replace(cmap, stream_col=column), [
            f"{path.name}: streams from column {quoted(column)} ({shown}), whose values change from one contract to "
            f"the next within {quoted(root)} ({split.roots}): {said}"]
    return replace(cmap, stream_col=f"{root}+{column}"), [
        f"{path.name}: streams from columns {quoted(root)} and {quoted(column)} joined ({split.roots} with {shown}), "
        f"the contracts changing from one to the next: {said}"]


def _why_not_split(split: Split) -> str:
    if not split.interleaved:  # FB then META: a ticker renamed, one series
        return "each value follows the one before and never alternates with it (a renamed ticker)"
    # VOD.L, VOD.BS, VOD.DE: one stock on several venues trades at one price; its venues' prints are one series
    return f"their values alternate ({split.interleaved} changes) at one price level ({split.levels})"


class Split(NamedTuple):
    extends: bool  # every value extends its root's (ESZ4 starts with ES)
    examples: list[str]  # up to 3 of the column's values
    roots: str  # up to 3 of the roots, shown
    interleaved: int  # changes of value within a root beyond one per value (0: each replaces the one before)
    levels_differ: bool  # the values' price levels lie far apart against the moves within each
    levels: str  # what was measured, said
    contracts: bool  # every value reads as a futures contract (CONTRACT_PATTERN): a roll when they follow one another


def _contracts_of(path: Path, names: Sequence[str] | None, dialect: Dialect | None, root: str, column: str,
                  price: str | None) -> Split | None:
    """How `column` splits the values of `root` (over the whole file: a roll's second contract may start trading
    late); None when it splits none (one contract per symbol: an ISIN, a RIC of a stock). Contracts of a roll trade
    at once, so their values alternate within the root, and at levels apart (ESZ4 and ESH5 60 points apart against
    quarter-point moves); a renamed ticker's values follow one another, a stock's venues trade at one level."""
    overrides = {c: pl.String for c in (root, column, *([price] if price else []))} if is_csv(path) else None
    value = pl.col(price).cast(pl.String).str.replace_all(",", "").cast(pl.Float64, strict=False) if price else \
        pl.lit(None, dtype=pl.Float64)
    pairs = scan_file(path, names, dialect, overrides).select(
        root=pl.col(root).cast(pl.String).str.strip_chars(), contract=pl.col(column).cast(pl.String).str.strip_chars(),
        price=value)
    pairs = pairs.filter((pl.col("root") != "") & (pl.col("contract") != ""))
    changes = (pl.col("contract") != pl.col("contract").shift(1)).over("root").fill_null(False)
    facts = pairs.with_columns(change=changes).select(
        split=(pl.col("contract").n_unique().over("root") > 1).any(),
        extends=(pl.col("contract").str.starts_with(pl.col("root"))
                 & (pl.col("contract").str.len_chars() > pl.col("root").str.len_chars())).all(),
        examples=pl.col("contract").unique(maintain_order=True).head(3).implode(),
        roots=pl.col("root").unique(maintain_order=True).head(3).implode(),
        changes=pl.col("change").sum(), values=pl.struct("root", "contract").n_unique(),
        roots_n=pl.col("root").n_unique(), contracts=pl.col("contract").str.contains(CONTRACT_PATTERN).all(),
    ).collect().row(0, named=True)
    if not facts["split"]:
        return None
    interleaved = max(0, facts["changes"] - (facts["values"] - facts["roots_n"]))
    differ, levels = _levels(pairs) if price else (True, "no price to compare")
    return Split(bool(facts["extends"]), list(facts["examples"]), ", ".join(facts["roots"]), interleaved, differ,
                 levels, bool(facts["contracts"]))


def _levels(pairs: pl.LazyFrame) -> tuple[bool, str]:
    """Whether the column's values of a root trade at price levels apart: the widest gap between two values' median
    prices JUMP_OVER_MOVE times their median move (nonzero, each value's own ticks in turn) or more; and it said."""
    priced = pairs.filter(pl.col("price").is_not_null())
    gap = priced.group_by("root", "contract").agg(level=pl.col("price").median()).group_by("root").agg(
        gap=pl.col("level").max() - pl.col("level").min()).select(pl.col("gap").max()).collect().item()
    step = priced.with_columns(move=pl.col("price").diff().abs().over("root", "contract")).select(
        pl.col("move").filter(pl.col("move") > 0).median()).collect().item()
    if gap is None:
        return True, "no price to compare"
    differ = gap > 0 if not step else gap >= JUMP_OVER_MOVE * step
    return differ, f"median prices {gap:g} apart, moves of {step or 0:g}"


LEVEL_ROWS = 200_000  # rows read to tell a column that splits a stream into price levels (a day of a busy future)
SWITCHES_SAID = 10  # changes of the column within a stream, at the least, before its jumps say anything
JUMP_OVER_MOVE = 20  # the median jump where the column changes, over the median move (nonzero) where it does not


def _changing(rows: pl.DataFrame, columns: Sequence[str]) -> list[str]:
    """The columns that could change SWITCHES_SAID times: two values or more and that many cells that are not
    empty, all told in one pass over the frame (a vendor export's hundreds of empty or constant columns skipped)."""
    value = pl.col(*columns).str.strip_chars()
    kept = pl.when(value != "").then(value)
    counts = rows.select(kept.count().name.suffix("\0n"), kept.drop_nulls().n_unique().name.suffix("\0u")).row(0)
    return [c for c, n, u in zip(columns, counts[:len(columns)], counts[len(columns):]) if n > SWITCHES_SAID and u > 1]


def levels_split_by(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                    dialect: Dialect | None) -> list[str]:
    """A caution for each text column the map does not read whose value, where it changes within a stream, comes
    with a price jump JUMP_OVER_MOVE times the median move of each value's own rows or more (at SWITCHES_SAID changes
    or more): two series at different price levels (two contracts, two currencies) interleaved in one stream. A
    venue or a flag column changes where the price does not jump: said nothing."""
    price = cmap.price or cmap.bid
    read = {*cmap.source_columns(), *cmap.ts_columns}
    columns = [c for c in schema if c not in read and identifier_typed(c, schema[c])]  # token ids too: integers
    if price is None or not columns:
        return []
    overrides = {c: pl.String for c in (*columns, *cmap.stream_columns)} if is_csv(path) else None
    stream = pl.concat_str([pl.col(c).cast(pl.String) for c in cmap.stream_columns], separator=" ", ignore_nulls=True) \
        if cmap.stream_col else pl.lit("")
    rows = scan_file(path, names, dialect, overrides).head(LEVEL_ROWS).select(
        stream.alias("_stream"), pl.col(price).cast(pl.Float64, strict=False).alias("_price"),
        *(pl.col(c).cast(pl.String) for c in columns),  # a Parquet file's integer ids as text
    ).collect()  # read once, each column then looked at in memory
    cautions = []
    for column in _changing(rows, columns):
        value = pl.col(column).str.strip_chars()
        # a frame of its own: a query over the whole frame costs its width, so a column at a time was quadratic
        # a value's own moves are those between its rows within a stream, whatever comes between them: measured
        # only where the value does not change, they held the jumps of two other series interleaved under one value
        # (an hour's and a quarter-hour's, 3A's and 3B's) and outgrew the jumps at the switches (review441 #7)
        series = rows.select("_stream", "_price", column).lazy().filter(
            pl.col("_price").is_not_null() & value.is_not_null() & (value != "")).with_columns(
            switch=(value != value.shift(1)).over("_stream"), move=pl.col("_price").diff().abs().over("_stream"),
            own=pl.col("_price").diff().abs().over("_stream", column))
        facts = series.select(switches=pl.col("switch").sum(), jump=pl.col("move").filter(pl.col("switch")).median(),
                              step=pl.col("own").filter(pl.col("own") > 0).median(),
                              values=value.unique(maintain_order=True).head(3).implode()).collect().row(0, named=True)
        shown = ", ".join(shown_identifier(v) for v in facts["values"])
        if (facts["switches"] or 0) < SWITCHES_SAID or not facts["step"] or facts["jump"] is None or \
                facts["jump"] < JUMP_OVER_MOVE * facts["step"]:
            continue
        joined = f"{cmap.stream_col}+{column}" if cmap.stream_col else with_product(schema, column)
        cautions.append(Caution(
            f"{path.name}: column {quoted(column)} ({shown}, ...) is not read, and where it changes "
            f"within a stream ({facts['switches']} times) the price jumps by {facts['jump']:g} at the median, against "
            f"moves of {facts['step']:g}: two series at different price levels (two contracts, two currencies) "
            f"interleaved in one stream? If so, read the column as part of the stream: "
            f"{columns_option(f'stream={joined}')}"))
    return cautions
