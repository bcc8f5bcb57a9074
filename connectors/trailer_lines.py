"""A CSV's trailer: the last line NYSE writes under its Daily TAQ files' rows, `END|20240308|1166` (END, the day,
the record count). Read as a row it was a phantom stream named for the count and a venue named for the date, its
ticks rejected (review355 #9); it is skipped (polars is told it is a comment line), with one note."""

from __future__ import annotations

from pathlib import Path

from connectors.archives import text_opener
from engine.quoting import quoted

TRAILER_WORD = "END"  # the first field of NYSE's trailer
TRAILER_SEPARATOR = "|"  # NYSE's files' delimiter
TAIL_BYTES = 4096  # of a plain file's end read to find its last line (a trailer is a few dozen characters)
CHUNK_BYTES = 1 << 20


def _last_line(path: Path) -> str:
    """A text file's last non-blank line. A compressed file is read through (no seeking in gzip); a plain one
    from its end."""
    if text_opener(path) is open:
        with open(path, "rb") as f:
            f.seek(max(0, f.seek(0, 2) - TAIL_BYTES))
            tail = f.read()
    else:
        tail = b""
        with text_opener(path)(path, "rb") as f:
            while chunk := f.read(CHUNK_BYTES):
                tail = (tail + chunk)[-TAIL_BYTES:]
    lines = [line for line in tail.decode("utf-8", "replace").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def trailer_line(path: Path, separator: str, first_cells: list[str]) -> str:
    """The file's trailer line (`END|20240308|1166`), when its last line's first field is END and no row of its
    first lines (`first_cells`: their first cells) but the trailer itself starts so; "" otherwise."""
    if text_opener(path) is not open and separator != TRAILER_SEPARATOR:
        return ""  # a compressed file's end costs reading it all: only NYSE's pipe-delimited files are looked at
    try:
        last = _last_line(path)
    except (OSError, EOFError):  # (the read that plans it says why)
        return ""
    cells = [c.strip() for c in first_cells]
    if separator not in last or last.split(separator)[0].strip() != TRAILER_WORD:
        return ""
    # a small file's first lines are all its lines, the trailer the last of them: only another END is a row's
    return "" if cells.count(TRAILER_WORD) > (cells[-1:] == [TRAILER_WORD]) else last
    return last


def trailer_prefix(trailer: str, separator: str) -> str | None:
    """The comment prefix that has polars skip the trailer line, None without one."""
    return f"{TRAILER_WORD}{separator}" if trailer else None


def trailer_note(path: Path, trailer: str) -> list[str]:
    """The note on a trailer skipped."""
    if not trailer:
        return []
    return [f"{path.name}: its last line, {quoted(trailer[:60])}, is a trailer (NYSE's: END, the day, the record "
            f"count), not a row: skipped"]
