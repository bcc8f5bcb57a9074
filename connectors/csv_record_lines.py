"""The line a CSV record starts on, where quoted fields hold line breaks.

A file row's number (`_row`, an answer's `row`) counts records, as polars reads them: a record is a line unless a
quoted field holds a line break (`"first line\nsecond"`, a free-text note column), when it spans several. The line
a user finds a record on is then its record number plus the lines the quoted breaks before it added, not the
number plus the header's one. Found by one pass over the file's lines (a quote's parity per line: a doubled quote,
`""`, leaves it as it was), made only when a row is named (a reject's example, a note), and kept per file version.
"""

from __future__ import annotations

import bisect
from functools import lru_cache
from pathlib import Path

from connectors.archives import text_opener

QUOTE = ord('"')


def record_line(path: Path, record: int) -> int:
    """The 1-based line record ``record`` (0-based, counting every record from the file's start: a banner line,
    the header, then the data rows; a blank line is a record too) starts on."""
    stat = path.stat()
    records, extra = _spanning_records(path, stat.st_size, stat.st_mtime_ns)
    # (extra[i]: lines added by quoted breaks in the records before records[i] + 1; 0 for a record before the first)
    at = bisect.bisect_right(records, record - 1)
    return record + 1 + (extra[at - 1] if at else 0)


@lru_cache(maxsize=16)  # (size and mtime in the key: a file written again is read again)
def _spanning_records(path: Path, _size: int, _mtime_ns: int) -> tuple[list[int], list[int]]:
    """The records that span lines, in file order, and the lines added up to and including each."""
    records: list[int] = []
    added: list[int] = []
    record = extra = 0
    open_quote = False
    if not _has_quote(path):  # every record a line (the common file): no line-by-line pass
        return records, added
    with text_opener(path)(path, "rb") as lines:  # (a .csv.gz's lines, not gzip's bytes)
        for line in lines:
            if line.count(QUOTE) % 2:
                open_quote = not open_quote
            if open_quote:  # the record goes on past this line's break
                extra += 1
                if not records or records[-1] != record:
                    records.append(record)
                    added.append(extra)
                else:
                    added[-1] = extra
            else:
                record += 1
    return records, added


def _has_quote(path: Path, chunk: int = 1 << 20) -> bool:
    with text_opener(path)(path, "rb") as data:
        while block := data.read(chunk):
            if QUOTE in block:
                return True
    return False
