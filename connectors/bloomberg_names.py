"""A Bloomberg security's name as a stream's: the security without its yellow key (`VOD LN Equity`, `ESZ4 Index`,
`EURUSD Curncy` replay as `VOD LN`, `ESZ4`, `EURUSD`), whether a file's name, a ticker column's cells or a BDH
export's title block (`Security,ESZ4 Index` above `Start Date`, `End Date`, `Periodicity` and the table) writes it,
so that one security is one stream however it reached the file.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import polars as pl

from connectors.column_map import ColumnMap
from connectors.column_names import TIME_HEADERS
from connectors.field_names import normal_name
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


def bdh_stream(path: Path, cmap: ColumnMap, banner: tuple[str, ...]) -> tuple[ColumnMap, list[str]]:
    """A map that names no stream takes the security a BDH title block (``banner``, the lines skipped above the
    header) names, less its yellow key, with a note; any other map as it is."""
    security = bdh_security(banner[0]) if banner else None
    if security is None or cmap.stream is not None or cmap.stream_col is not None:
        return cmap, []
    stream = without_yellow_key(security)
    less = ", less its yellow key" if stream != security else ""
    return replace(cmap, stream=stream), [
        f"{path.name}: stream {stream}, the security its BDH title block names ({quoted(security)}{less}), as a file "
        "so named would be (--columns stream_name=NAME to name it otherwise)"]
