"""A file's bytes given twice under two names (a browser's re-download, `2024-03-11 (1).csv.gz` beside
`2024-03-11.csv.gz`; a day copied into a second folder of the same instrument): read once. Replayed twice, every
tick of the day was two, each label and score after it moved, and the repeated-trades check blamed overlapping
export pages (review382 #3). Files alike in part (pages that overlap, a day that starts with the last minutes of
the one before) are not this case: connectors/repeated_trades.py says theirs, and they replay as given."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from pathlib import Path
from typing import Any

from connectors.cautions import Caution
from connectors.day_folders import COPY_MARK
from connectors.file_plan import source_path
from connectors.file_suffixes import file_stem

READ_BLOCK = 1 << 20  # bytes hashed at a time


def same_content_once(plans: list[Any]) -> tuple[list[Any], list[str], list[tuple[str, str]]]:
    """The plans with those of a file whose bytes equal an earlier one's, read alike (same streams, same map), left
    out; a caution naming both per file left out, and (file, why) of each, for the run record. Of two copies the one
    without a copy's mark (` (1)`, `_copy`) is kept, else the first given. Only files of one size are hashed."""
    sources: dict[Path, list[Any]] = defaultdict(list)
    for plan in plans:
        sources[source_path(plan)].append(plan)
    by_size: dict[int, list[Path]] = defaultdict(list)
    for path in sources:
        by_size[_size(path)].append(path)
    dropped: dict[Path, Path] = {}  # a copy -> the file kept in its place
    for size, paths in by_size.items():
        if size <= 0 or len(paths) < 2:
            continue
        alike: dict[tuple[str, str], list[Path]] = defaultdict(list)
        for path in paths:
            alike[(_sha256(path), repr([p.describe() for p in sources[path]]))].append(path)
        for copies in alike.values():
            kept = min(copies, key=lambda p: (COPY_MARK.search(file_stem(p)) is not None, copies.index(p)))
            dropped |= {path: kept for path in copies if path != kept}
    notes = [Caution(f"{copy}: its bytes are those of {kept} (the same SHA-256): the same data under two names (a "
                     f"re-download, a copy?); read once, from {kept.name}, so that its ticks are not replayed twice")
             for copy, kept in dropped.items()]
    skipped = [(str(copy), f"the same bytes as {kept}") for copy, kept in dropped.items()]
    return [plan for plan in plans if source_path(plan) not in dropped], notes, skipped


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(READ_BLOCK):
            digest.update(block)
    return digest.hexdigest()
