"""yfinance's download layout, a pandas MultiIndex of (field, ticker) columns, made one long table a replay reads
by its columns' names: `yf.download(...).to_csv()` writes two or three header rows (`Price,Close,High,Low,Open,
Volume` / `Ticker,AAPL,AAPL,...` / `Datetime,,,,,`), `.to_parquet()` names its columns `('Close', 'AAPL')`
(`group_by="ticker"`: `('AAPL', 'Close')`). Read by position, its `Close,High,Low,Open` order would replay the
Open as the close (review307 #1), so the copy (`long_copy`) names each column by its field, one row per bar and
ticker with a `Ticker` column: one stream per ticker. Read, named and closed as a UTF-16 file's text copy is
(connectors/archives.py's `Unpacked.text_copy`; connectors/opened_files.py opens it).
"""

from __future__ import annotations

import ast
import re
import tempfile
from pathlib import Path

import polars as pl

from connectors.archives import TemporaryFolder, text_opener

TICKER = "Ticker"
# yfinance's fields, as it spells them (a download's; `Ticker.history()` adds the last three)
FIELDS = ("Open", "High", "Low", "Close", "Adj Close", "Volume", "Dividends", "Stock Splits", "Capital Gains")
_FIELD_OF = {f.lower(): f for f in FIELDS}
TIME_NAMES = ("date", "datetime")  # the index's name: `Date` for daily bars, `Datetime` intraday
HEAD_LINES = 3


class LongCopy(TemporaryFolder):
    """A MultiIndex file as a long table in a private folder: `paths` (its one copy, named as the file is),
    `note` (what was done, for the plan's notes); removed by `close`."""

    def __init__(self, path: Path, frame: pl.DataFrame, tickers: list[str], header_rows: int, empty: int) -> None:
        self._dir: str | None = tempfile.mkdtemp(prefix="flashtick-multiindex-")
        copy = Path(self._dir) / path.name  # named as the file is: notes and rejects name the file
        (frame.write_parquet if copy.suffix.lower() == ".parquet" else frame.write_csv)(copy)
        self.paths = [copy]
        rows = f"its {header_rows} header rows" if header_rows else "its columns named as (field, ticker) pairs"
        streams = f"one stream per ticker ({', '.join(tickers)})" if len(tickers) > 1 else f"stream {tickers[0]}"
        left = (f"; {empty} bar(s) of a ticker with every field empty (no bar for it at that time) left out"
                if empty else "")
        where = "; a reject names its row in that table (a bar and ticker), not a line of the file" \
            if len(tickers) > 1 or header_rows else ""
        self.note = (f"{path.name}: yfinance's download layout (a pandas MultiIndex: {rows}): read by the columns' "
                     f"names, not by their position (yfinance writes Close,High,Low,Open), as one table of "
                     f"{', '.join(c for c in frame.columns if c not in (frame.columns[0], TICKER))} beside a "
                     f"{TICKER} column: {streams}{left}{where}")


def long_copy(path: Path) -> LongCopy | None:
    """A yfinance MultiIndex CSV or Parquet file as a long table (`LongCopy`); None for any other file."""
    name = path.name.lower()
    if name.endswith(".parquet"):
        return _parquet_copy(path)
    if name.endswith((".csv", ".txt")):
        return _csv_copy(path)
    return None


def _csv_copy(path: Path) -> LongCopy | None:
    """The CSV `to_csv` writes: `Price,<fields>` / `Ticker,<tickers>` / `<Date|Datetime>,,,` (the last row left out
    by pandas before 2.x, or when the index has no name), then the rows; `group_by="ticker"` writes its first two
    rows the other way round (`Ticker,AAPL,...` / `Price,Open,...`), read alike."""
    try:
        with text_opener(path)(path, "rt", encoding="utf-8-sig", errors="replace") as f:
            head = [f.readline().rstrip("\r\n") for _ in range(HEAD_LINES)]
    except (OSError, EOFError):
        return None
    fields, tickers = (line.split(",") for line in head[:2])
    if fields[0].strip() == TICKER and tickers[0].strip() == "Price":  # group_by="ticker": the tickers' row first
        fields, tickers = tickers, fields
    if len(fields) < 3 or len(fields) != len(tickers) or fields[0].strip() != "Price" or \
            tickers[0].strip() != TICKER or not _pairs(fields[1:], tickers[1:]):
        return None
    third = head[2].split(",")
    named_index = third[0].strip().lower() in TIME_NAMES and not any(c.strip() for c in third[1:])
    skip = HEAD_LINES if named_index else HEAD_LINES - 1
    time = third[0].strip() if named_index else "Date"
    names = [time, *(f"{f.strip()}|{t.strip()}" for f, t in zip(fields[1:], tickers[1:]))]
    text = pl.read_csv(path, has_header=False, skip_rows=skip, new_columns=names, infer_schema_length=0)
    return _long(path, text, time, skip)


def _parquet_copy(path: Path) -> LongCopy | None:
    try:
        schema = pl.read_parquet_schema(path)
    except (OSError, pl.exceptions.PolarsError):
        return None
    pairs = {c: _tuple_name(c) for c in schema}
    split = {c: p for c, p in pairs.items() if p is not None}
    others = [c for c in schema if c not in split]
    if len(split) < 2 or len(others) != 1 or not _pairs(*zip(*split.values())):
        return None
    frame = pl.read_parquet(path).rename({c: "|".join(_field_first(*p)) for c, p in split.items()})
    return _long(path, frame, others[0], 0)


def _tuple_name(column: str) -> tuple[str, str] | None:
    """`('Close', 'AAPL')` as its two names; None for a plain column name."""
    if not re.fullmatch(r"\(\s*'[^']*'\s*,\s*'[^']*'\s*\)", column):
        return None
    return tuple(ast.literal_eval(column))  # (a literal of two strings: checked by the pattern above)


def _field_first(a: str, b: str) -> tuple[str, str]:
    """A (field, ticker) pair from either order (`group_by="ticker"` writes the ticker first)."""
    return (a, b) if a.strip().lower() in _FIELD_OF else (b, a)


def _pairs(firsts: tuple[str, ...] | list[str], seconds: tuple[str, ...] | list[str]) -> bool:
    """Whether the columns are (field, ticker) pairs, in either order, and the fields hold a close."""
    fields = [_field_first(a, b)[0].strip().lower() for a, b in zip(firsts, seconds)]
    return all(f in _FIELD_OF for f in fields) and "close" in fields and \
        all(b.strip() for a, b in (_field_first(a, b) for a, b in zip(firsts, seconds)))


def _long(path: Path, frame: pl.DataFrame, time: str, header_rows: int) -> LongCopy:
    """One row per (row, ticker), in the file's row order, the tickers in the order the file names them."""
    columns = [c for c in frame.columns if c != time]
    tickers = list(dict.fromkeys(c.split("|", 1)[1].strip() for c in columns))
    parts, empty = [], 0
    for ticker in tickers:
        own = {_FIELD_OF[c.split("|", 1)[0].strip().lower()]: c for c in columns
               if c.split("|", 1)[1].strip() == ticker}
        fields = [f for f in FIELDS if f in own]
        part = frame.select(pl.col(time), pl.lit(ticker).alias(TICKER), *(pl.col(own[f]).alias(f) for f in fields),
                            pl.int_range(pl.len()).alias("_order"))
        blank = pl.all_horizontal(pl.col(f).is_null() | (pl.col(f).cast(pl.String).str.strip_chars() == "")
                                  for f in fields)
        empty += part.filter(blank).height if len(tickers) > 1 else 0
        parts.append(part.filter(~blank) if len(tickers) > 1 else part)
    long = pl.concat(parts, how="diagonal").sort("_order", maintain_order=True).drop("_order")
    return LongCopy(path, long, tickers, header_rows, empty)
