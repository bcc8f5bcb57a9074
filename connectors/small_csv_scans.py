"""A small CSV's rows parsed once per way of reading them, held in memory while its plan is made.

Planning a file asks polars some 25 questions of it (its first time, its layout, lone prints, the clock beside a
date, its facts, currency codes): each a scan of the file from disk with its own CSV parse. For a file of a few
rows that parse setup is all of the cost: a zip of 300 small daily files took 13-16 s of CPU to plan (fix327).
A CSV of at most SMALL_CSV_BYTES is parsed once for each set of reading options (`scan_file`'s arguments) and the
scans read that frame instead; the answers are those of the scan itself, which is collected in full to make it.
A file whose full read fails (a cell a type refuses, a ragged row) is not held: its scans read the file as before,
so a question that never looks at the failing column answers as before, and an error is the scan's own.
Keyed on the file's size and mtime as well as its path, as connectors/csv_record_lines.py is: a file written again
(a temporary copy's name reused) is read again.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Callable, Hashable

import polars as pl

SMALL_CSV_BYTES = 256 * 1024  # past this a scan's early stop (a `head(1)`) saves more than a parse costs
HELD_FRAMES = 64  # a member's few reading options, for the member being planned and its neighbours


_held: OrderedDict[Hashable, pl.DataFrame] = OrderedDict()


def held_scan(path: Path, options: Hashable, scan: Callable[[], pl.LazyFrame]) -> pl.LazyFrame:
    """``scan()``, or for a small file the frame it collects to, held for the next scan with the same ``options``
    (everything besides the path that the scan depends on, hashable)."""
    try:
        stat = path.stat()
    except OSError:
        return scan()  # (the scan says what is wrong with it)
    if stat.st_size > SMALL_CSV_BYTES:
        return scan()
    key = (str(path), stat.st_size, stat.st_mtime_ns, options)
    if (frame := _held.get(key)) is not None:
        _held.move_to_end(key)
        return frame.lazy()
    lazy = scan()
    try:
        frame = lazy.collect()
    except (Exception, pl.exceptions.PanicException):  # noqa: BLE001 - whatever the full read meets, the scan says
        return lazy  # read as before: its error, if any, is raised by the question that meets it
    _held[key] = frame
    while len(_held) > HELD_FRAMES:
        _held.popitem(last=False)
    return frame.lazy()
