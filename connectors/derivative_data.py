"""Files of a derivative's data that holds no trades nor quotes, known by their columns or the vendor's file name
before a layout is detected: funding rates (Tardis.dev `derivative_ticker`, Binance `fundingRate` CSVs and REST
answers), mark, index and premium-index price bars (Binance `markPriceKlines`, `indexPriceKlines`,
`premiumIndexKlines`), and liquidations (Tardis.dev `liquidations`, Binance `forceOrder` captures).

Read by their layouts they would pass for trades: a funding file's `last_price` or a mark price bar's close as a
print of size 1 or 0, a liquidation as a trade the venue's trade feed already holds. flashtick's questions are about
trades and quotes (a funding rate or a mark price is neither an input nor a question), so connectors/opened_files.py
skips such a file with a caution while the run's other files replay, and refuses a run of nothing else. A
liquidations file is read when its own map names its stream (`columns: {stream: BTCUSDT-LIQ}`): a stream apart.
Funding and price-bar files are refused under any map, one given in full too: none of their columns is a trade.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import polars as pl

from connectors.archives import text_opener
from connectors.column_map import ColumnMap
from connectors.csv_dialect import first_lines, sniff_csv
from connectors.field_names import normal_name
from connectors.file_scans import is_csv
from connectors.file_suffixes import PARQUET_SUFFIXES
from connectors.json_lines import is_json_lines
from connectors.map_options import Refine
from engine.rust_paths import rust_path

QUESTIONS = ("flashtick's questions are about trades and quotes: a funding rate or a mark, index or premium price "
             "is neither an input nor a question, under any column map")
FUNDING_NAMES = frozenset({"funding_rate", "last_funding_rate", "fundingrate", "lastfundingrate"})
# a column of these beside a funding rate makes the file a trades or quotes file that also carries it
TICK_NAMES = frozenset({"amount", "size", "qty", "quantity", "volume", "sz", "bid", "ask", "bid_price", "ask_price",
                        "best_bid_price", "best_ask_price", "bid1price", "ask1price", "bidpx", "askpx"})
PRICE_BARS = {"markPriceKlines": "mark price", "indexPriceKlines": "index price",
              "premiumIndexKlines": "premium index"}
TARDIS_SIGNS = frozenset({"exchange", "symbol", "timestamp", "local_timestamp"})


class NotTicks(ValueError):
    """A file of a derivative's data that holds no trades nor quotes: skipped among other files, refused alone."""


def _csv_header(path: Path) -> list[str]:
    dialect = sniff_csv(path)
    if not dialect.header:
        return []
    with text_opener(path)(path, "rt", encoding="utf-8-sig", errors="replace", newline="") as f:
        lines, _ = first_lines(f, path, dialect.skipped + 1)
    return [name.strip() for name in next(csv.reader([lines[-1]], delimiter=dialect.separator), [])] if lines else []


def _first_object(path: Path) -> dict[str, Any]:
    """A JSON-lines file's first object, with the fields of its `data` (or `o`, Binance's order) beside its own."""
    with text_opener(path)(path, "rt", encoding="utf-8-sig", errors="replace") as f:
        line = next((line for line in f if line.strip()), "")
    try:
        message = json.loads(line)
    except ValueError:
        return {}
    if not isinstance(message, dict):
        return {}
    inner = message.get("data")
    inner = inner[0] if isinstance(inner, list) and inner and isinstance(inner[0], dict) else inner
    return message | (inner if isinstance(inner, dict) else {})


def _columns(path: Path) -> tuple[list[str], dict[str, Any]]:
    """The file's column names (a JSON-lines file's first object's keys) and that first object."""
    try:
        if is_csv(path):
            return _csv_header(path), {}
        if path.suffix.lower() in PARQUET_SUFFIXES:
            return list(pl.read_parquet_schema(rust_path(path))), {}
        if is_json_lines(path):
            first = _first_object(path)
            return list(first), first
    except (OSError, ValueError, pl.exceptions.PolarsError):
        pass  # planning names what is wrong with the file
    return [], {}


def not_ticks(path: Path, cmap: ColumnMap | Refine | None, named: str, archive: Path | None = None) -> str | None:
    """Why the file holds no trades nor quotes (the note's text, naming it as ``named``); None for any other.

    ``archive``: the zip ``path`` was unpacked from, whose own name and folders say what it holds as a file's do
    (data.binance.vision's `.../markPriceKlines/BTCUSDT/1m/BTCUSDT-1m-2024-01-01.zip` holds a plain
    `BTCUSDT-1m-...csv`).
    """
    if not path.is_file():
        return None
    parts = {*path.parent.parts[-3:], *re.split(r"[-_.]", path.name)}
    if archive is not None:
        parts |= {*archive.parent.parts[-3:], *re.split(r"[-_.]", archive.name)}
    bars = next((kind for kind in PRICE_BARS if kind in parts), None)
    if bars is not None:
        return (f"{named}: Binance {bars} ({PRICE_BARS[bars]} bars, no trades: their volume is 0); {QUESTIONS}; "
                f"replay the symbol's trades (`trades`, `aggTrades`) and `bookTicker` files")
    columns, first = _columns(path)
    names = {normal_name(n) for n in columns}
    if names & FUNDING_NAMES and not names & TICK_NAMES:
        tardis = TARDIS_SIGNS <= names
        what = "a Tardis.dev derivative_ticker file (funding rate, mark and index prices, open interest)" if tardis \
            else "funding rates"
        files = "Tardis.dev `trades` and `quotes`" if tardis else "Binance `trades`/`aggTrades` and `bookTicker`"
        return f"{named}: {what}, no trades nor quotes; {QUESTIONS}; replay the instrument's {files} files"
    if isinstance(cmap, ColumnMap) or isinstance(cmap, Refine) and "stream" in cmap.keys:  # a liquidation: read
        return None
    force_order = first.get("e") == "forceOrder" or str(first.get("stream", "")).endswith("@forceOrder")
    if force_order or "liquidations" in parts and TARDIS_SIGNS <= names:
        source = "Binance forceOrder messages" if force_order else "Tardis.dev liquidations"
        return (f"{named}: {source} (forced orders), left out by default: on most venues their fills are in the "
                f"trade feed already and reading them would count those trades twice; to replay them as a stream "
                f"apart, give the file its own map naming one: `{{path: FILE, columns: {{stream: SYMBOL-LIQ}}}}` "
                f"(docs/replay.md)")
    return None
