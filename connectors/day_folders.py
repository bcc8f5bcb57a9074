"""Per-day folders of a capture (`BTCUSDT/2024-08-08/trades.csv`, `data/20240808/`, Hive's `date=2024-08-08/`), and
folders of one kind of data (`BTCUSDT/trades/2024-08-08.csv`): their names say when or what, not which instrument,
so a file's instrument (or, when no name holds one, the stream its folder names)
is looked for in the first folder up its path that is neither. Without this, each day of one instrument
became a stream of its own, named after its date (review 115, finding 2)."""

from __future__ import annotations

import re
from pathlib import Path

MONTHS = "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec"
# a date with its month as a word: 2024-Aug-08, 08Aug2024
WORDED_DATE = re.compile(rf"^\d{{1,4}}[-_. ]?({MONTHS})[a-z]*[-_. ]?\d{{1,4}}$", re.IGNORECASE)


# Folders named for the kind of data they hold (`BTCUSDT/trades/2024-08-08.csv`, `ES/bbo/`, Binance's `aggTrades/`,
# Hive's `type=quotes/`): like a day's, their names say what, not which instrument (`trades` was read as a stream)
DATA_KIND_FOLDERS = frozenset({
    "trade", "trades", "quote", "quotes", "bbo", "tbbo", "nbbo", "taq", "tick", "ticks", "tickdata", "book", "books",
    "orderbook", "order_book", "depth", "l1", "l2", "l3", "mbo", "mbp", "bidask", "bid_ask", "aggtrades",
    "agg_trades", "bookticker", "book_ticker"})


def _partition_value(name: str) -> str:
    """A Hive partition's value (`date=2024-08-08`: `2024-08-08`), else the name itself."""
    return name.split("=", 1)[1] if "=" in name else name


def is_day_folder(name: str) -> bool:
    """Whether a folder's name says a date or a number rather than an instrument: no letters in it (or in a Hive
    partition's value, `date=2024-08-08`), or a date with its month as a word."""
    value = _partition_value(name)
    return not re.search(r"[A-Za-z]", value) or bool(WORDED_DATE.match(value))


def is_kind_folder(name: str) -> bool:
    """Whether a folder's name (or a Hive partition's value, `type=trades`) says the kind of data, not an
    instrument: `trades`, `quotes`, `bbo`, `book`, `ticks`, ..."""
    return _partition_value(name).lower() in DATA_KIND_FOLDERS


def named_folder(path: Path) -> Path | None:
    """The folder whose name may name the file's instrument: the file's own, or the first one up its path whose
    name is neither a day's nor a kind of data's; None when every folder up to the root is one (or the root)."""
    for folder in path.resolve().parents:
        if not folder.name:
            return None
        if not (is_day_folder(folder.name) or is_kind_folder(folder.name)):
            return folder
    return None


def folder_chain(path: Path) -> tuple[str, ...]:
    """The names of the folders from `named_folder` down to the file's own (`('BTCUSDT', '2024-08-08')`): what a
    copy of the file (an archive's member) keeps above it so that its instrument is found as the file's is.
    Without a named folder, ("archive", day folders...): never a temporary folder's name."""
    parent = path.resolve().parent
    top = named_folder(path)
    if top is None:
        return ("archive", parent.name) if parent.name else ("archive",)
    return (top.name, *parent.relative_to(top).parts)
