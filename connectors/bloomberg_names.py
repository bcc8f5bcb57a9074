"""A Bloomberg security's name as a stream's: the security without its yellow key (`VOD LN Equity`, `ESZ4 Index`,
`EURUSD Curncy` replay as `VOD LN`, `ESZ4`, `EURUSD`), whether a file's name, a ticker column's cells or a BDH
export's title block (`Security,ESZ4 Index` above `Start Date`, `End Date`, `Periodicity` and the table) writes it,
so that one security is one stream however it reached the file.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import polars as pl

from connectors.column_map import ColumnMap
from connectors.column_names import EVENT_NAMES, QUOTE_SIDE_MARKS, TIME_HEADERS
from connectors.field_names import normal_name
from connectors.map_vocabulary import joined_columns
from connectors.shell_words import columns_option
from engine.quoting import quoted

KEYS = "Equity|Index|Curncy|Comdty|Govt|Corp|Mtge|Muni|Pfd|M-Mkt"
# the security (capitals, digits and the marks tickers hold), then its key
YELLOW_KEY = re.compile(rf"^([A-Z0-9][A-Z0-9 /.=-]*?)\s+({KEYS})$")
MAX_TITLE_LINES = 10  # BDH's block: Security, Start Date, End Date, Periodicity, a few options, a blank row
CELLS = re.compile(r"[,;\t|]")


def without_yellow_key(name: str) -> str:
    """A security's name without its yellow key (`VOD LN Equity` -> `VOD LN`); any other name as it is."""
    return m[1] if (m := YELLOW_KEY.match(name.strip())) else name


def yellow_key_dropped(cells: pl.Expr) -> pl.Expr:
    """A column of stream names with each cell's yellow key left out (`ESZ4 Index` -> `ESZ4`), as a file's name
    loses it."""
    return cells.str.replace(YELLOW_KEY.pattern, "${1}")


def has_yellow_key(cells: pl.Expr) -> pl.Expr:
    return cells.str.contains(YELLOW_KEY.pattern)


def bdh_title_lines(lines: list[str]) -> int:
    """How many of a CSV's first lines are a Bloomberg BDH export's title block: a first line `Security,<one
    security>` and, within MAX_TITLE_LINES, a line that names a time column among two or more cells (`Dates,...`),
    the table's header; 0 for any other file."""
    if not lines or bdh_security(lines[0]) is None:
        return 0
    for at, line in enumerate(lines[1:MAX_TITLE_LINES + 1], start=1):
        cells = [normal_name(c.strip().strip('"')) for c in CELLS.split(line)]
        if len(cells) > 1 and any(c in TIME_HEADERS for c in cells):
            return at
    return 0


def bdh_security(line: str) -> str | None:
    """The security a BDH title's first line names (`Security,VOD LN Equity,` -> `VOD LN Equity`), None when the
    line is no such line or names several (a sheet of securities side by side)."""
    cells = [c.strip().strip('"').strip() for c in CELLS.split(line)]
    named = [c for c in cells[1:] if c]
    return named[0] if normal_name(cells[0]) == "security" and len(named) == 1 else None


def lone_security(line: str) -> str | None:
    """The security a first line holding it alone names (`CLK0 Comdty,,,`: an Excel download of a tick history,
    the security above the table's header), None for any other line: its one cell that is not empty must end with a
    yellow key, so a banner's title (`Kursdaten Export;;;`) names nothing."""
    named = [c for c in (c.strip().strip('"').strip() for c in CELLS.split(line)) if c]
    return named[0] if len(named) == 1 and YELLOW_KEY.match(named[0]) else None


def bdh_stream(path: Path, cmap: ColumnMap, banner: tuple[str, ...]) -> tuple[ColumnMap, list[str]]:
    """A map that names no stream takes the security a BDH title block (``banner``, the lines skipped above the
    header) names, or a first line holding a security alone (review374 #5: the stream was the download's name,
    `export (1)`), less its yellow key, with a note; any other map as it is."""
    security = bdh_security(banner[0]) if banner else None
    lone = lone_security(banner[0]) if banner and security is None else None
    if security is None and lone is None or cmap.stream is not None or cmap.stream_col is not None:
        return cmap, []
    stream = without_yellow_key(security or lone or "")
    less = ", less its yellow key" if stream != (security or lone) else ""
    where = "its BDH title block names" if security else "its first line names alone, above the header"
    return replace(cmap, stream=stream), [
        f"{path.name}: stream {stream}, the security {where} ({quoted(security or lone)}{less}), as a file so named "
        "would be (--columns stream_name=NAME to name it otherwise)"]


# The one value column of Bloomberg's tick history (IntradayTickRequest as Excel saves it: `Dates,Type,Value,Size`)
TICK_VALUE_NAMES = ("value",)


def tick_dump_value(by_normal: Mapping[str, str], first: Callable[[str], Any] | None) -> dict[str, str]:
    """Bloomberg's tick history read without a map (review374 #6: `Dates,Type,Value,Size` was refused, though
    `Price` for `Value` is detected): its `Value` is the price when a row-type column (`Type`) beside it starts with
    a trade or quote-side mark (TRADE, BID, ASK, BEST_BID, any case); {} for any other file. Its rows are then read
    by their marks as a `Price` column's are (content_notes.kind_column: quote_sides)."""
    value = next((by_normal[c] for c in TICK_VALUE_NAMES if c in by_normal), None)
    kind = next((by_normal[c] for c in EVENT_NAMES if c in by_normal), None)
    if value is None or kind is None or first is None:
        return {}
    return {"price": value} if str(first(kind) or "").strip().lower() in QUOTE_SIDE_MARKS else {}


def tick_dump_example(names: Sequence[str], ts: str | None, found: Mapping[str, str],
                      first: Callable[[str], Any] | None) -> str | None:
    """The map a refusal gives for a file with a row-type column (`Type`) whose first mark is a trade's or a quote
    side's and no price found: its first column that nothing reads and that holds a number, as the price, a
    refinement that detection completes (the `Type` column's marks read as detected: TRADE rows trades, BID and
    ASK rows one side of a quote), so the map it gives is one that reads the file (review374 #6:
    `ts=time,price=px,size=qty` was refused for Bloomberg's layout); None for other files."""
    kinds = next((n for n in names if normal_name(n) in EVENT_NAMES), None)
    if ts is None or kinds is None or first is None or \
            str(first(kinds) or "").strip().lower() not in QUOTE_SIDE_MARKS:
        return None
    read = {*joined_columns(ts), *found.values(), kinds}
    numbers = [n for n in names if n not in read and n.strip() and _number(first(n))]
    if not numbers:
        return None
    return (f"{columns_option(f'price={numbers[0]}')} (the other columns and the row marks of {quoted(kinds)} read "
            f"as detected: Bloomberg's TRADE rows trades, its BID and ASK rows one side of a quote each; "
            f"docs/replay.md)")


def _number(value: Any) -> bool:
    try:
        float(str(value).strip().replace(",", ""))
    except ValueError:
        return False
    return True
