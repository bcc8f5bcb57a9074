"""Columns a map does not read whose values look like several instruments' identifiers (a `Code` of 7203 and
9434, a `Name` column, Polymarket's token ids): the streams of a `Name` column (`name_column`), the note when every
row goes to one stream anyway (`unread_identifiers`), and how such an identifier is typed and shown."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.column_names import EVENT_NAMES, RIGHT_NAMES, with_product
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.file_scans import SAMPLE_ROWS, is_csv, scan_file
from connectors.iqfeed_ticks import IQFEED_NAMES, MESSAGE_ID, PROTOCOL_6
from connectors.shell_words import columns_option
from connectors.venue_notes import PROVIDER_NAMES
from engine.quoting import quoted


NAME_COLUMNS = ("name", "security_name", "stock_name", "company_name", "issue_name")  # a symbol's name, maybe
# a symbol, a code, a short name; or digits of any length: Polymarket's token ids (70-77 digits), CUSIPs and
# instrument ids written as numbers (too long for an integer column: polars infers i128 and cannot hold them)
IDENTIFIER = re.compile(r"^(?:[A-Za-z0-9][\w.\-/&: ]{0,23}|\d{1,100})$")
LONG_SHOWN = 24  # an identifier longer than this is shown by its ends: three token ids would fill the screen
FLAG_WORDS = frozenset({"true", "false", "t", "f", "y", "n", "yes", "no", "0", "1"})
FLAG_NAME = re.compile(r"^(is|has|was)_")  # a yes/no column by its name: Binance's is_best_match, is_buyer_maker
# an order's type, never an instrument: Kraken's `market/limit` (m, l), or the words spelled out
ORDER_TYPE_WORDS = frozenset({"m", "l", "market", "limit", "mkt", "lmt", "stop", "stop_limit", "stop_market",
                              "stop_loss", "take_profit", "trailing_stop", "ioc", "fok", "gtc", "post_only",
                              "liquidation"})
# an aggressor's side, never an instrument: MOEX's BUYSELL (B/S), Upbit's ask_bid (ASK/BID) when no map reads them
SIDE_VALUE_WORDS = frozenset({"b", "s", "buy", "sell", "ask", "bid"})
ID_WORDS = re.compile(r"(code|sym|ticker|name|sec|isin|cusip|instrument|contract|stock|ric|id)")
# An instrument trades at its own price level, so a column naming instruments has about one value per level; an
# order id (partial fills share it) or a trade id has a stream's many orders at the stream's one level
LEVEL_WIDTH = 0.01  # a price level: a value's median price, in levels 1% wide
MANY_PER_LEVEL = 5  # a column with this many distinct values per level or more names no instruments
# columns that repeat short values without naming an instrument: said by their own notes, or read as fields
NOT_IDENTIFIERS = frozenset((*EVENT_NAMES, *RIGHT_NAMES, "side", "aggressor_side", "taker_side", "exchange", "venue",
                             "market", "exchange_id", "exchange_code", "ex", "mic", *PROVIDER_NAMES, "currency",
                             "ccy", "flags", "condition", "conditions", "sale_condition", "tr_scond", "tr_corr",
                             "qu_cond", "kind",
                             # IQFeed's fixed fields, named by its layout: a basis code (C, O) is no instrument. Its
                             # request id stays a candidate: a client may use the symbol as the id, one per request
                             *IQFEED_NAMES, *PROTOCOL_6, MESSAGE_ID))


def _identifier_columns(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                        dialect: Dialect | None, columns: list[str]) -> dict[str, list[str]]:
    """Of `columns`, those that look like an instrument's identifier: text (or integers, under a name such as
    `code` or `id`) of 2 to 1,000 distinct short values that repeat (a trade id, one per row, names no instrument),
    in the first SAMPLE_ROWS rows. -> column: up to 5 of its values."""
    candidates = [c for c in columns if c not in cmap.source_columns() and c not in cmap.ts_columns
                  and normal_name(c) not in NOT_IDENTIFIERS and identifier_typed(c, schema[c])]
    if not candidates:
        return {}
    overrides = {c: pl.String for c in candidates} if is_csv(path) else None
    price = cmap.price or cmap.bid
    # text prices stripped first: Sierra Chart's `, ` separators leave a space before every cell
    priced = [pl.col(price).cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False).alias(PRICE)] \
        if price in schema else []
    sample = scan_file(path, names, dialect, overrides).head(SAMPLE_ROWS).select(
        [pl.col(c).cast(pl.String).str.strip_chars() for c in candidates] + priced).collect()
    found = {}
    for column in candidates:
        values = sample[column].drop_nulls()
        values = values.filter(values != "")
        distinct = values.unique(maintain_order=True)
        # true/false (True beside true), Y/N, is_best_match: flags; m/l, market/limit: order types; no instruments
        words = {normal_name(v) for v in distinct.to_list()}
        flags = words <= FLAG_WORDS or words <= ORDER_TYPE_WORDS or words <= SIDE_VALUE_WORDS or \
            FLAG_NAME.match(normal_name(column))
        # text that is all numbers (a price or a count written with a space before it) names instruments only under
        # a name that says so, as an integer column does (`Code` 7203): a column of 6850.25s is a price
        numbers = values.cast(pl.Float64, strict=False).null_count() == 0 and not ID_WORDS.search(normal_name(column))
        if 2 <= len(distinct) <= 1000 and len(distinct) * 2 <= len(values) and not flags and not numbers and \
                all(IDENTIFIER.match(v) for v in distinct.head(100).to_list()) and \
                _values_per_level(sample, column) < MANY_PER_LEVEL:
            found[column] = [shown_identifier(v) for v in distinct.head(5).to_list()]
    return found


def identifier_typed(column: str, dtype: Any) -> bool:
    """Whether a column of this type could name instruments: text, or integers under a name that says so (`Code`
    7203, an `asset_id` of token ids, which a CSV's inference types as integers)."""
    return dtype == pl.String or dtype.is_integer() and normal_name(column) not in NOT_IDENTIFIERS and \
        bool(ID_WORDS.search(normal_name(column)))


def shown_identifier(value: str) -> str:
    """An identifier as a note shows it: a 77-digit token id by its ends, enough to tell two apart."""
    return value if len(value) <= LONG_SHOWN else f"{value[:10]}...{value[-6:]}"


PRICE = "_price"  # the sample's price column (a trade's, or a quote's bid), beside the candidates


def _values_per_level(sample: pl.DataFrame, column: str) -> float:
    """How many distinct values of `column` trade per price level (their median prices, in levels LEVEL_WIDTH
    wide): about one for instruments' identifiers, each at its own level; many for an order id (0 with no price)."""
    if PRICE not in sample.columns:
        return 0.0
    levels = sample.filter((pl.col(PRICE) > 0) & (pl.col(column) != "")).group_by(column).agg(
        level=(pl.col(PRICE).median().log() / math.log1p(LEVEL_WIDTH)).round())
    return levels.height / levels["level"].n_unique() if levels.height else 0.0


def name_column(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                 dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """A detected layout without a symbol column whose `Name` column holds several short names: its streams, with a
    note (a generic name, read so only when it looks like instruments' names and nothing else names them)."""
    column = next((c for c in schema if normal_name(c) in NAME_COLUMNS), None)
    if column is None or not (found := _identifier_columns(path, cmap, schema, names, dialect, [column])):
        return cmap, []
    return replace(cmap, stream_col=column), [
        f"{path.name}: streams from column {quoted(column)} ({', '.join(found[column][:3])}, ...): no symbol column, "
        "and it holds several names (--columns stream=COLUMN or stream_name=NAME says otherwise)"]


def instrument_column(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                      dialect: Dialect | None) -> tuple[str, list[str]] | None:
    """The first column the map does not read whose values look like several instruments' identifiers, with up to 5
    of them; None when none does."""
    found = _identifier_columns(path, cmap, schema, names, dialect, list(schema))
    return next(iter(found.items()), None)


def unread_identifiers(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                        dialect: Dialect | None, named: bool = False) -> list[str]:
    """Every row goes to one stream (the file's name, or a name the map or the file's name gave) while a column the
    map does not read holds several values that look like instruments' identifiers (a `Code` of 7203 and 9434):
    said, since their prices would alternate in one stream, with the map that gives each its stream. `named`: the
    user fixed the stream's name (`--columns stream_name=BTC-PERP` over Tardis' `symbol` of two contracts), which
    says what to call the stream, not that the file holds one instrument."""
    if (found := instrument_column(path, cmap, schema, names, dialect)) is None:
        return []
    column, values = found
    stream = cmap.stream or cmap.default_stream
    stream = f"{stream}, the name the map gives it" if named else stream
    return [Caution(f"{path.name}: every row goes to one stream, {stream}, but column {quoted(column)} holds several "
                    f"values ({', '.join(values[:3])}, ...) that look like instruments: if it names them, give "
                    f"{columns_option(f'stream={with_product(schema, column)}')} (a stream per value; docs/replay.md)")]


CODE_DIGITS = 6  # the widest zero-padded stock code: SSE's, SZSE's and KRX's (HKEX's 5, JPX's and TWSE's 4)


def shorn_codes(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                dialect: Dialect | None) -> list[str]:
    """A caution when the stream column is a number column of codes of mixed widths, up to CODE_DIGITS digits
    (`1`, `300750`, `600519`; HKEX's `700`, `5`): zero-padded stock codes whose zeros the number type dropped, as
    a vendor's CSV saved again by pandas has them. Their streams are named as written (`1`, not `000001`), so
    another file's `000001` is another stream and `--streams 000001` matches none (review433 #1)."""
    column = cmap.stream_columns[0] if len(cmap.stream_columns) == 1 else None
    if column is None or is_csv(path) or not schema[column].is_integer():  # (a CSV's codes are read as text)
        return []
    codes = scan_file(path, names, dialect).head(SAMPLE_ROWS).select(pl.col(column).drop_nulls().unique()).collect()
    codes = sorted(codes.to_series().cast(pl.String).to_list(), key=lambda code: (len(code), code))
    widths = {len(code) for code in codes}
    if len(widths) < 2 or max(widths) > CODE_DIGITS or codes[0].startswith("-"):
        return []
    return [Caution(f"{path.name}: column {quoted(column)}, the streams, holds numbers, not text: codes of "
                    f"{min(widths)} to {max(widths)} digits ({codes[0]}, ..., {codes[-1]}): if they are zero-padded "
                    f"stock codes (000001, 00700) whose leading zeros the number type dropped, each stream is named "
                    f"without them ({codes[0]}), another file's text code names the same stock as another stream and "
                    f"--streams matches the names as read; save the column as text (pandas: read the vendor's CSV "
                    f"with dtype={{{column!r}: str}}) or zero-pad it (.astype(str).str.zfill(N), N the venue's width)")]
