"""A CSV's lines that hold text but no cell of the file's columns: a junk line between rows (`xxxx`, a crashed
writer's run of NULs, a word alone). polars reads each as a row of empty cells (its one field, not of the first
column's type, read as null), exactly as it reads a blank line, which is skipped as no row at all: without this
such a line would vanish uncounted. `junk_lines` tells the two apart, and the file's plan rejects each junk line
as missing_field, named by its line (connectors/file_plan.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import polars as pl

from connectors.csv_dialect import Dialect
from connectors.file_scans import scan_file
from engine.quoting import quoted

SHOWN_CHARS = 40  # of a junk line's text in its reject


def junk_lines(path: Path, names: Sequence[str] | None, dialect: Dialect,
               overrides: dict[str, pl.DataType] | None, row: str) -> dict[int, tuple[str, ...]]:
    """Row (`row`, polars' count: a blank line is one) -> the non-blank cells of each CSV line that reads as no
    cell as typed (`overrides`) though it holds text. A line of spaces and separators alone (`,,,`) is blank.
    Only the rows the typed read finds empty are read again as text: a file without empty rows pays one scan."""
    typed = scan_file(path, names, dialect, overrides).with_row_index(row)
    empty = typed.filter(~pl.any_horizontal(pl.all().exclude(row).is_not_null())).select(row).collect()[row]
    if empty.is_empty():
        return {}
    columns = [name for name in typed.collect_schema() if name != row]
    texts = scan_file(path, names, dialect, dict.fromkeys(columns, pl.String)).with_row_index(row)
    found = texts.filter(pl.col(row).is_in(empty.implode())).collect()
    junk = {}
    for number, *cells in found.iter_rows():
        # str.strip leaves NULs: a run of them is text, not a blank line
        if written := tuple(cell.strip() for cell in cells if cell is not None and cell.strip()):
            junk[number] = written
    return junk


def junk_reason(cells: tuple[str, ...], separator: str, columns: int) -> str:
    """Why a junk line is rejected (as missing_field): what it holds, as text quoted as JSON writes it (a NUL as
    `\\u0000`; NULs alone counted)."""
    text = separator.join(cells)
    if not text.strip("\x00"):
        shown = f"{len(text):,} NUL character(s) alone"
    else:
        # as JSON writes it, every character past ASCII escaped (a NUL as \u0000), as the wire's errors quote
        shown = quoted(text[:SHOWN_CHARS], SHOWN_CHARS, ascii_only=True) + \
            (f" ... ({len(text):,} characters)" if len(text) > SHOWN_CHARS else "")
    return (f"the line holds {shown}, nothing that reads as a cell of the file's {columns} columns (a junk line "
            f"between rows: a stray word, a crashed writer's NULs?): no tick")
