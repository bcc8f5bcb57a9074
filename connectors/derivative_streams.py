"""The stream name of a derivatives market's instrument (review310 #4). A venue that writes its perpetual with the
spot pair's own name (Binance USD-M's `BTCUSDT`, Bybit's linear `BTCUSDT`) would merge two markets, two prices and
two clocks, into one stream beside that venue's spot file. The rule, one for files and for live names alike: a
derivatives market's instrument keeps its venue's name when that name already marks it as one (`BTCUSD_PERP`,
`BTCUSDT_240329`, `BTC-PERPETUAL`, `BTC-USD-SWAP`, an option), else it takes `_PERP` after it (`BTCUSDT_PERP`).
Spot names are never changed.

Only where the input says which market it is: a Binance futures preset, a data.binance.vision `futures/um/` or
`futures/cm/` path, Tardis.dev's `exchange` values (or its file name's first part). A fixed stream given in a map
(`--columns stream_name=BTCUSDT`, a replay list entry's `stream:`) is used as given: the way to merge on purpose.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

import polars as pl

from connectors.column_map import ColumnMap
from connectors.field_names import normal_name
from connectors.map_options import Refine
from connectors.option_names import MARKED

PERP_SUFFIX = "_PERP"  # as Binance writes its COIN-M perpetuals (BTCUSD_PERP), and a `-perp` folder names one
# Tardis.dev's exchange ids of derivatives markets (spot's are `binance`, `bybit-spot`, `okex`, ...)
DERIVATIVE_EXCHANGES = frozenset({
    "binance-futures", "binance-delivery", "binance-options", "bybit", "bybit-options", "okex-swap",
    "okex-futures", "okex-options", "deribit", "bitmex", "huobi-dm", "huobi-dm-swap", "huobi-dm-linear-swap",
    "huobi-dm-options", "gate-io-futures", "bitget-futures", "kucoin-futures", "crypto-com-derivatives",
    "coinbase-international", "cryptofacilities", "kraken-futures", "ftx", "phemex", "delta", "dydx", "dydx-v4",
    "hyperliquid", "bitfinex-derivatives", "ascendex", "woo-x"})
FUTURES_PRESETS = frozenset({"binance-futures-trades", "binance-futures-aggtrades", "binance-futures-bookticker"})
# A spot pair as a derivatives venue writes its spot markets, base and quote apart (BitMEX's XBT_USDT, Deribit's
# BTC_USDC): spot, never renamed (Tardis.dev's files keep these names as the venue writes them)
SPOT_PAIR = r"^[A-Z0-9]{2,}_[A-Z]{3,5}$"
BYBIT_DERIVATIVES = frozenset({"tickdirection", "trdmatchid"})  # public.bybit.com/trading/'s files
# a BitMEX websocket capture's messages (`{"table": "trade", "action": "insert", "data": [...]}`): a derivatives
# venue's, its rows named as Tardis.dev's `bitmex` files name them (XBTUSD_PERP), whatever the file is called
BITMEX_MESSAGE = frozenset({"table", "action"})
# Bybit v5 publicTrade rows of a perpetual or future: `L`, the tick direction, is "unique to perps & futures" (Bybit's
# docs); a spot trade has none. Case matters: `T` is the trade's time, `S` its side
BYBIT_CONTRACT_TRADE = frozenset({"T", "s", "S", "v", "p", "L"})
# Tardis.dev's file names: exchange, data type, day (binance-futures_trades_2024-01-02_BTCUSDT.csv.gz); a name such
# as bybit_spot_trades_2024-01-02 is no Tardis name (its spot exchange is bybit-spot)
TARDIS_NAME = re.compile(r"^(?P<exchange>[a-z0-9-]+)_(trades|quotes|incremental_book_l2|book_snapshot_\d+|book_ticker|"
                         r"derivative_ticker|liquidations|options_chain)_\d{4}-\d\d-\d\d", re.IGNORECASE)
# Bybit's v5 market categories as its websocket paths name them (/v5/public/linear): a book capture's own messages do
# not say which (spot's and linear's orderbook.1 are alike), its file name or a folder above it may
BYBIT_CATEGORY = re.compile(r"(?i)(?:^|[^a-z])(linear|inverse|spot)(?:$|[^a-z])")
BYBIT_BOOK = frozenset({"topic", "s", "b[0].price", "a[0].price"})
# Bybit v5 tickers with a best bid and ask: only a derivatives market's (linear, inverse, option) carry them
BYBIT_TICKERS = frozenset({"topic", "symbol", "bid1Price", "ask1Price"})


def derivative_name(name: str) -> str:
    """The stream of a derivatives market's instrument the venue names `name`: `name` when it already marks it as
    a derivative, else `name` + PERP_SUFFIX."""
    return name if re.search(MARKED, name) or re.match(SPOT_PAIR, name) else name + PERP_SUFFIX


def derivative_market(path: Path, cmap: ColumnMap, schema: Mapping[str, Any]) -> str | None:
    """Which derivatives market a file says it is from, by its preset, its data.binance.vision path, its
    Tardis.dev file name, Bybit's derivatives trading history's own columns (its spot files have none of them), a
    BitMEX capture's message keys or a Bybit perpetual's publicTrade fields; None when it does not say (its rows
    may still: `exchange_column`). One instrument so gets one stream, whichever of these files it comes in."""
    if cmap.preset in FUTURES_PRESETS:
        return "binance-futures"
    if BITMEX_MESSAGE <= set(schema):
        return "bitmex"
    if BYBIT_DERIVATIVES <= {normal_name(n) for n in schema}:  # BitMEX's own trades have the same columns
        return "bitmex" if "bitmex" in path.name.lower() else "bybit"
    if BYBIT_CONTRACT_TRADE <= set(schema) or BYBIT_TICKERS <= set(schema):  # linear, inverse (tickers: or option)
        return "bybit"
    if BYBIT_BOOK <= set(schema):  # a book alone: its category where the path says one, else spot's as written
        return "bybit" if bybit_category(path) in ("linear", "inverse") else None
    parts = [part.lower() for part in path.resolve().parts]
    for above, here in zip(parts, parts[1:]):
        if above == "futures" and here in ("um", "cm"):
            return "binance-futures" if here == "um" else "binance-delivery"
    found = TARDIS_NAME.match(path.name)
    return found["exchange"] if found and found["exchange"] in DERIVATIVE_EXCHANGES else None


def bybit_category(path: Path) -> str | None:
    """The Bybit category (linear, inverse, spot) the file's name says, else one of the two folders above it (a
    recorder's `linear/2025-12-01/`); None when none does."""
    for part in reversed(path.resolve().parts[-3:]):
        if (found := BYBIT_CATEGORY.search(part)) is not None:
            return found[1].lower()
    return None


def exchange_column(cmap: ColumnMap, schema: Mapping[str, Any]) -> str | None:
    """A Tardis.dev file's `exchange` column, when the stream is not named by it already."""
    if not {"exchange", "symbol"} <= {normal_name(n) for n in schema}:
        return None
    column = next(c for c in schema if normal_name(c) == "exchange")
    return None if column in cmap.stream_columns or schema[column].is_nested() else column  # (lists name no venue)


def given_stream(given: Any) -> bool:
    """Whether the map a user gave names the file's fixed stream (merging on purpose)."""
    if isinstance(given, Refine):
        return given.keys.get("stream") is not None
    return isinstance(given, ColumnMap) and given.stream is not None


def derivative_stream(path: Path, given: Any, cmap: ColumnMap,
                      schema: Mapping[str, Any]) -> tuple[ColumnMap, list[str]]:
    """The map with a derivatives market's fixed stream named by the rule, with a note when it changed."""
    market = derivative_market(path, cmap, schema)
    fixed = cmap.stream or (cmap.default_stream if cmap.stream_col is None else None)
    if market is None or fixed is None or given_stream(given) or (named := derivative_name(fixed)) == fixed:
        return cmap, []
    return replace(cmap, stream=named), [
        f"{path.name}: stream {named}, not {fixed}: a {market} file, a derivatives market whose instrument the "
        f"venue names as its spot pair, so it is a stream of its own (docs/replay.md, Derivatives' streams; "
        f"--columns stream_name={fixed} merges it with the spot stream on purpose)"]


def derivative_rows(stream: pl.Expr, path: Path, cmap: ColumnMap, schema: Mapping[str, Any],
                    rows: pl.LazyFrame) -> tuple[pl.Expr, list[str]]:
    """A stream column's names by the rule, for the rows of a derivatives market: every row of a file that says
    which (`derivative_market`, with a note naming the file's own first symbol from ``rows``), else those whose
    Tardis.dev `exchange` is one."""
    plain = stream.is_not_null() & ~stream.str.contains(MARKED) & ~stream.str.contains(SPOT_PAIR)
    notes = []
    if (market := derivative_market(path, cmap, schema)) is not None:
        notes.append(_derivatives_note(path, market, stream, plain, rows))
        rows = plain
    elif (column := exchange_column(cmap, schema)) is not None:
        venue = pl.col(column).cast(pl.String).str.strip_chars().str.to_lowercase()
        rows = plain & venue.is_in(sorted(DERIVATIVE_EXCHANGES))
    else:
        return stream, unsaid_bybit_book(path, schema)
    return pl.when(rows).then(stream + PERP_SUFFIX).otherwise(stream), notes


def _derivatives_note(path: Path, market: str, stream: pl.Expr, plain: pl.Expr, rows: pl.LazyFrame) -> str:
    """The note on a derivatives market's file, its example the file's own first symbol: one renamed when a row
    has one (BitMEX's XBTUSD, not Binance's BTCUSDT), else one kept."""
    first = rows.select(stream.alias("name"), plain.alias("plain")).drop_nulls("name").group_by(
        "plain", maintain_order=True).first().collect()
    named = dict(zip(first["plain"].to_list(), first["name"].to_list()))
    lead = f"{path.name}: a {market} file, a derivatives market: "
    kept = ("a name that says its contract (BTCUSD_PERP, a dated future's XBTZ25, BitMEX's up and down contracts' "
            "XBT7D_U110) or a spot pair written apart (XBT_USDT) is kept")
    where = "(docs/replay.md, Derivatives' streams)"
    if (renamed := named.get(True)) is not None:
        return (f"{lead}a symbol the venue writes as its spot pair's ({renamed}) is stream {renamed}{PERP_SUFFIX}, "
                f"apart from the spot stream {where}; {kept}")
    if (own := named.get(False)) is not None:
        return f"{lead}its symbols name their contracts ({own}) and are kept as written {where}"
    return f"{lead}a symbol the venue writes as its spot pair's is a stream of its own, NAME{PERP_SUFFIX} {where}"


UNSAID_BOOK = "Bybit book messages do not say their market"


def split_market_notes(plans: list[Any], streams_of: Callable[[Any], list[str]]) -> list[str]:
    """A caution for each Bybit book file read as written whose instrument another file of the run reads as a
    derivative (`BTCUSDT` quotes beside `BTCUSDT_PERP` trades): one instrument on two streams, unless the book is
    spot's (review336 #2)."""
    books = [plan for plan in plans if any(UNSAID_BOOK in note for note in getattr(plan, "notes", ()))]
    if not books:
        return []
    derived = {name: plan for plan in plans if plan not in books for name in streams_of(plan)
               if name.endswith(PERP_SUFFIX)}
    notes = []
    for plan in books:
        split = [(name, derived[name + PERP_SUFFIX]) for name in streams_of(plan) if name + PERP_SUFFIX in derived]
        if split:
            name, other = split[0]
            notes.append(f"{plan.given_name}: its {name} quotes are stream {name}, while {other.given_name} reads "
                         f"{name}{PERP_SUFFIX}: if this is the {name} perpetual's book, the two are one market on two "
                         f"streams: name the book's file for its category (bybit_linear_ob.jsonl) or give it "
                         f"--columns stream_name={name}{PERP_SUFFIX} in a replay list entry")
    return notes


def unsaid_bybit_book(path: Path, schema: Mapping[str, Any]) -> list[str]:
    """A note for a Bybit book capture whose category nothing says: read as written, as spot's names are."""
    if not BYBIT_BOOK <= set(schema) or bybit_category(path) is not None:
        return []
    return [f"{path.name}: {UNSAID_BOOK} (spot's and linear's orderbook.1 are alike, "
            f"BTCUSDT), nor does the file's name or a folder above it: read as written, the spot stream BTCUSDT. A "
            f"capture of the linear or inverse book (wss://stream.bybit.com/v5/public/linear) is that market's "
            f"stream, BTCUSDT{PERP_SUFFIX}, beside its trades, where its name or folder says linear or inverse "
            f"(bybit_linear_ob.jsonl, linear/ob.jsonl) (docs/replay.md, Derivatives' streams)"]
