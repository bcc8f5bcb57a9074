"""Per-day folders of a capture (`BTCUSDT/2024-08-08/trades.csv`, `data/20240808/`, Hive's `date=2024-08-08/`), and
folders of one kind of data (`BTCUSDT/trades/2024-08-08.csv`): their names say when or what, not which instrument,
so a file's instrument (or, when no name holds one, the stream its folder names)
is looked for in the first folder up its path that is neither. Without this, each day of one instrument
became a stream of its own, named after its date (review 115, finding 2)."""

from __future__ import annotations

import re
from datetime import date as Date
from pathlib import Path
from typing import Iterable, Iterator

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


def date_shaped(digits: str) -> bool:
    """Whether a name of 3 to 6 digits may be a date: a day of the year (DDD), a year the data could have (1970 to
    this one; a year to come holds no ticks), a month of one (YYYYMM), a day (MMDD, YYMMDD). `0700`, `7203`,
    `005930` and `600519` are none: stock codes (Hong Kong's, Tokyo's, Korea's, Shanghai's)."""
    if not re.fullmatch(r"[0-9]{3,6}", digits):
        return False
    year = Date.today().year
    if len(digits) == 3:
        return 1 <= int(digits) <= 366
    if len(digits) == 4:
        return 1970 <= int(digits) <= year or _a_day(2000, digits)  # 2000: a leap year, so 0229 is a day
    if len(digits) == 6:
        return (1970 <= int(digits[:4]) <= year and 1 <= int(digits[4:]) <= 12) or \
            (int(digits[:2]) <= year % 100 and _a_day(2000 + int(digits[:2]), digits[2:]))
    return False  # 5 digits: Hong Kong's 00700, no date


def _a_day(year: int, mmdd: str) -> bool:
    try:
        Date(year, int(mmdd[:2]), int(mmdd[2:]))
    except ValueError:
        return False
    return True


def numeric_code(name: str, beside: Iterable[str] = ()) -> bool:
    """Whether a name of 3 to 6 digits (a file's stem, a folder's) is an instrument's numeric code rather than a
    date: it has no date's shape, or a name beside it of as many digits has none (`2020` beside `0700` is ANTA
    Sports, not a year). `beside` is read only for a date-shaped name."""
    if not re.fullmatch(r"[0-9]{3,6}", name):
        return False
    return not date_shaped(name) or any(
        len(other) == len(name) and re.fullmatch(r"[0-9]+", other) and not date_shaped(other) for other in beside)


def paths_beside(path: Path) -> Iterator[Path]:
    """The folders beside a folder, or the files beside a file, lazily: none when they cannot be listed."""
    try:
        for other in path.parent.iterdir():
            if other != path and other.is_dir() == path.is_dir():
                yield other
    except OSError:
        return


def is_day_folder(name: str, beside: Iterable[str] = ()) -> bool:
    """Whether a folder's name says a date or a number rather than an instrument: no letters in it (or in a Hive
    partition's value, `date=2024-08-08`), or a date with its month as a word. A name of 4 to 6 digits is a day's
    only in a date's shape, and only when the names `beside` it agree: `0700/2024-05-01/` is Tencent's (review 174,
    finding 2: its days were read as the folder above's, and every stock's merged)."""
    value = _partition_value(name)
    if re.fullmatch(r"[0-9]{4,6}", value):
        return not numeric_code(value, map(_partition_value, beside))
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
        if not (is_day_folder(folder.name, (p.name for p in paths_beside(folder))) or is_kind_folder(folder.name)):
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


# A browser's or a copy's mark on a file downloaded twice: `2024-03-11 (1).csv.gz`, `20240311_copy.parquet`
COPY_MARK = re.compile(r"(\s*\(\d+\)|[-_ ]copy(\s*\d+)?)$", re.IGNORECASE)


def date_name(name: str) -> bool:
    """Whether a file's (or folder's) name is a date and nothing else, so names a day, never an instrument:
    8 digits read as YYYYMMDD, DDMMYYYY or MMDDYYYY; an ISO date and its kin (`2024-03-01`, `2024_03_01`,
    `2024.03.01`, `01-03-2024`, `03.01.2024`); a month (`2024-03`, `202403`); a date with its month as a word
    (`01Mar2024`); 4 or 6 digits in a date's shape (`date_shaped`). A copy's mark (`2024-03-11 (1)`) is left out.
    Read as a stream, such a name put every instrument of a day in one stream, and made a new one each day
    (review382 #1: `aapl/20240301.parquet`, `BRK.B/2024-03-01.csv.gz`)."""
    name = COPY_MARK.sub("", name.strip())
    if WORDED_DATE.match(name):
        return True
    parts = re.split(r"[-_. ]", name)
    if not all(p.isdigit() and p.isascii() for p in parts):
        return False
    if len(parts) == 1:
        digits = parts[0]
        if len(digits) == 8:
            return any(_a_full_day(y, m, d) for y, m, d in ((digits[:4], digits[4:6], digits[6:]),
                                                            (digits[4:], digits[2:4], digits[:2]),
                                                            (digits[4:], digits[:2], digits[2:4])))
        return len(digits) in (4, 6) and date_shaped(digits)
    if [len(p) for p in parts] == [4, 2]:
        return 1970 <= int(parts[0]) and 1 <= int(parts[1]) <= 12
    if len(parts) != 3:
        return False
    first, middle, last = parts
    if len(first) == 4:
        return _a_full_day(first, middle, last)
    return len(last) == 4 and (_a_full_day(last, middle, first) or _a_full_day(last, first, middle))


def _a_full_day(year: str, month: str, day: str) -> bool:
    """Whether year, month and day are a date of 1970 to 2200 (the span a tick file's day may be in)."""
    if not (1970 <= int(year) <= 2200):
        return False
    try:
        Date(int(year), int(month), int(day))
    except ValueError:
        return False
    return True
