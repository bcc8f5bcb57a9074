"""A CSV whose quote (`"`) opens and never closes (a hand-edited row, a symbol written `"BTCUSDT`): polars reads
the rest of the file as one cell and stops with a 24-line error that echoes the file and advises its own options
(review309 #6). Asked only once a read of a CSV failed: which line opened the quote left open, so the refusal is
one line naming the file and that line."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from connectors.archives import text_opener

QUOTE_SCAN_BYTES = 1 << 22  # bytes of the file looked through at a time
POLARS_PARSE = re.compile(r"could not parse|unterminated|quote", re.I)


def unclosed_quote_line(path: Path) -> int | None:
    """The line whose `"` opens a quoted cell that the file never closes; None when every quote closes. A doubled
    `""` inside a quoted cell toggles twice: it stays open, as CSV escapes a quote."""
    line, opened_at, inside = 1, 0, False
    with text_opener(path)(path, "rb") as f:
        while chunk := f.read(QUOTE_SCAN_BYTES):
            at = 0
            for quote in re.finditer(rb'"', chunk):
                line += chunk.count(b"\n", at, quote.start())
                at = quote.start()
                inside = not inside
                opened_at = line if inside else opened_at
            line += chunk.count(b"\n", at)
    return opened_at if inside else None


def unclosed_quote_refusal(path: Path, error: Exception) -> ValueError | None:
    """polars' error reading a CSV, said in one line when a quote left open caused it; None otherwise."""
    if not isinstance(error, pl.exceptions.ComputeError) or not POLARS_PARSE.search(str(error)):
        return None
    if (line := unclosed_quote_line(path)) is None:
        return None
    return ValueError(f"{path}: line {line} opens a quote (\") that no later line closes, so the rest of the file "
                      f"reads as one cell: remove that quote or close it (e.g. sed -i '{line}s/\"//g' on a copy), and "
                      f"replay the file again")
