"""A plain CSV cut mid-row: its last line has no newline and fewer fields than the file's columns, the mark of a
download or copy that died (`2024-03-04T16:51:35.284962Z,17` where a row holds five fields). A `.gz` cut so is
refused by its decompressor; a plain file would read as a short day with one missing_field reject and exit 0.
`cut_row` finds that line, so that the file's plan rejects it as truncated_line (connectors/file_plan.py) and the
run warns, at its start and again at its end, that the file is probably truncated; the rows before it are read.
"""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl

from connectors.cautions import Caution
from connectors.csv_dialect import Dialect
from engine.quoting import quoted

COMPRESSED = (".gz", ".zst", ".bz2", ".xz", ".zip")
TAIL_BYTES = 1 << 16  # of a file's end read to find its last line: a tick row is far shorter
CUT_LINE = ("the file's last line ends without a newline and holds fewer fields than its columns: the file was "
            "probably cut short (a download or copy that died), so this row is not read; fetch the file again")


def cut_row(path: Path, dialect: Dialect | None, width: int, rows: pl.LazyFrame, row: str) -> tuple[int | None,
                                                                                                     list[str]]:
    """The row (`row`, the plan's count) of a plain CSV's last line when it is cut (no newline after it, fewer
    than `width` fields), and the warning that names the file as probably truncated; (None, []) for any other
    file. Only such a file pays the scan that numbers its last row."""
    if dialect is None or dialect.trailer or (last := _unended_last_line(path)) is None:
        return None, []
    fields = next(csv.reader([last], delimiter=dialect.separator), [])
    if not last.strip() or len(fields) >= width:
        return None, []
    number = rows.select(pl.col(row).max()).collect().item()
    if number is None:
        return None, []
    shown = quoted(last[:60], 60) + (" ..." if len(last) > 60 else "")
    return number, [Caution(f"{path.name}: its last line ({shown}) ends without a newline and holds {len(fields)} "
                            f"of its {width} fields: the file is probably truncated (a download or copy that "
                            f"died); its rows before that line are read, that line rejected as truncated_line")]


def _unended_last_line(path: Path) -> str | None:
    """A plain file's last line when no newline ends it (None when one does, or the file is compressed or holds
    one line alone: a header or a lone row is no cut download)."""
    if path.name.lower().endswith(COMPRESSED):  # (a cut `.gz` is refused by its decompressor)
        return None
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(max(0, size - TAIL_BYTES))
            tail = f.read()
    except OSError:
        return None
    if not tail or tail.endswith((b"\n", b"\r")):
        return None
    cut = max(tail.rfind(b"\n"), tail.rfind(b"\r"))
    if cut < 0:
        return None
    return tail[cut + 1:].decode("utf-8", errors="replace")
