"""Reading a log back (the tick log, the answer log): every record from a number on (``read``), every record
changing nothing on disk beside a live writer (``read_unchanged``, what an export reads), the oldest record alone
(``first_record``), and one segment's valid records (``segment_records``, which TickLog counts at open).

Damage at the very end of the last segment with no valid record after it (a torn tail: a record cut short as the
process died mid-write, zero bytes to the end as the host died before the file's pages were written, or a last
record or trailing blocks a host crash left half-written or holding old data) is truncated away with a warning and
counted; a damaged record anywhere else (in an older segment, or with valid records after it) stops the read with
the file and byte offset (``CorruptLog``), or, with ``skip_corrupt``, is skipped by scanning to the next valid
record, counted and said, and the segment rewritten without it (the original kept as ``<name>.damaged``); a torn
tail's cut bytes are kept the same way unless they are all zero (log_damage.py).
"""

from __future__ import annotations

import sys
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.service.log_damage import keep_cut_bytes, rewrite, torn_tail
from engine.service.log_format import HEADER, MAGIC, MAX_RECORD_BYTES, damage, next_valid, segments
from engine.service.log_stats import LogStats


class CorruptLog(ValueError):
    """A damaged record before the end of the log."""

    def __init__(self, path: Path, offset: int, why: str) -> None:
        super().__init__(f"{path}: damaged record at byte {offset} ({why}); to start anyway, losing the damaged "
                         f"records, set log.skip_corrupt: true in the config")
        self.path = path
        self.offset = offset
        self.why = why


def read(directory: str | Path, start: int = 0, skip_corrupt: bool = False,
         stats: LogStats | None = None, prefix: str = "ticks") -> Iterator[tuple[int, bytes]]:
    """Every record from number ``start`` on, as (number, payload), oldest first."""
    stats = stats if stats is not None else LogStats()
    existing = segments(Path(directory), prefix)
    for i, (first, path) in enumerate(existing):
        following = existing[i + 1][0] if i + 1 < len(existing) else None
        if following is not None and following <= start:
            continue
        number = first
        # a segment appended to is repaired only where TickLog opens it (_count), before any append
        for payload in segment_records(path, stats, last=following is None, skip_corrupt=skip_corrupt,
                                       repair=following is not None):
            if number >= start:
                yield number, payload
            number += 1


def read_unchanged(directory: str | Path, skip_corrupt: bool = False, stats: LogStats | None = None,
                   prefix: str = "ticks", skip_option: str = "log.skip_corrupt") -> Iterator[tuple[int, bytes]]:
    """Every record as ``read`` gives them, changing nothing on disk (a torn tail is left out, not cut; a segment
    whose damage was skipped is not rewritten), and consistent beside a writer appending meanwhile: the segments
    are opened before the first is read, so retention dropping one is not seen, and the last is read up to its last
    whole record, so the records yielded are the log's first N, as a restart would read them then."""
    stats = stats if stats is not None else LogStats()
    opened = _open_segments(Path(directory), prefix)
    try:
        for i, (first, path, handle) in enumerate(opened):
            number = first
            for payload in segment_records(path, stats, last=i == len(opened) - 1, skip_corrupt=skip_corrupt,
                                           data=handle.read(), skip_option=skip_option):
                yield number, payload
                number += 1
    finally:
        for _, _, handle in opened:
            handle.close()


def first_record(directory: str | Path, prefix: str = "ticks", tries: int = 5) -> tuple[int, bytes] | None:
    """(number, payload) of the oldest segment's first record, reading that record alone (a segment is up to
    ``segment_bytes``); None when there is no segment or that record is not whole and valid. Safe beside a writer
    whose retention drops segments meanwhile."""
    for _ in range(tries):
        existing = segments(Path(directory), prefix)
        if not existing:
            return None
        first, path = existing[0]
        try:
            payload = segment_first_record(path)
        except FileNotFoundError:  # dropped between the listing and the open: the next one is the oldest now
            continue
        return None if payload is None else (first, payload)
    return None


def segment_first_record(path: Path) -> bytes | None:
    """The payload of the segment file ``path``'s first record, reading that record alone; None when it is not whole
    and valid. Raises FileNotFoundError for a segment gone."""
    with open(path, "rb") as handle:
        header = handle.read(HEADER.size)
        if len(header) < HEADER.size or HEADER.unpack(header)[0] != MAGIC:
            return None
        payload = handle.read(min(HEADER.unpack(header)[1], MAX_RECORD_BYTES + 1))
    return payload if damage(header + payload, 0) is None else None


def _open_segments(directory: Path, prefix: str, tries: int = 5) -> list[tuple[int, Path, Any]]:
    """(first record number, path, open file) of every segment: what a reader holds while retention may unlink
    the oldest (a segment gone between the listing and its open is listed again)."""
    for _ in range(tries):
        opened = []
        try:
            for first, path in segments(directory, prefix):
                opened.append((first, path, open(path, "rb")))
            return opened
        except FileNotFoundError:
            for _, _, handle in opened:
                handle.close()
    raise OSError(f"{directory}: its segments kept changing while they were opened ({tries} tries)")


def segment_records(path: Path, stats: LogStats, last: bool, skip_corrupt: bool, repair: bool = False,
                    data: bytes | None = None, skip_option: str = "log.skip_corrupt") -> Iterator[bytes]:
    """The valid records of one segment. ``repair`` (with ``skip_corrupt``; never on a segment being appended to):
    once read to its end, a segment whose damage was skipped is rewritten with its valid records alone, so the
    next start reads it clean without ``skip_corrupt``. ``data``: the segment's bytes, read by a reader that
    changes nothing (read_unchanged): a torn tail is left in the file, only not yielded."""
    unchanged = data is not None
    data = path.read_bytes() if data is None else data
    offset = 0
    skipped: list[tuple[int, int]] = []  # (start, end) of each damaged region skipped, for a repair
    view, unpack, size = memoryview(data), HEADER.unpack_from, HEADER.size
    while offset < len(data):
        # a valid record, checked inline as ``damage`` checks it (its checksum over a view, not a copy): a restart
        # reads every record of both logs, and this was a fifth of a replay's time; damage is named below
        if len(data) - offset >= size:
            magic, length, crc = unpack(data, offset)
            end = offset + size + length
            if magic == MAGIC and length <= MAX_RECORD_BYTES and end <= len(data) and \
                    zlib.crc32(view[offset + size : end]) == crc:
                yield data[offset + size : end]
                offset = end
                continue
        why = damage(data, offset)
        if last and (torn := torn_tail(data, offset, why)) is not None:
            stats.torn_tails += 1
            if unchanged:  # (a running service may be writing that record now: it is whole on the next read)
                print(f"flashtick: log {path}: {torn} at byte {offset} ({len(data) - offset} bytes: a torn tail, or "
                      f"a record being written) is left out; the file is left as it is", file=sys.stderr, flush=True)
                break
            kept = keep_cut_bytes(path, data[offset:])
            print(f"flashtick: log {path}: {torn} at byte {offset} (torn tail: {len(data) - offset} bytes) is cut away"
                  f"{kept}", file=sys.stderr, flush=True)
            with open(path, "r+b") as f:
                f.truncate(offset)
            data = data[:offset]
            break
        if not skip_corrupt:
            raise CorruptLog(path, offset, why)
        stats.corrupt_skipped += 1
        resume = next_valid(data, offset + 1)
        records = data.count(MAGIC, offset, resume)  # each record that began there (a payload may hold one too)
        stats.corrupt_records += records
        # the ticks of those records are lost: the operator must hear which bytes, not only a counter
        print(f"flashtick: log {path}: skipped {resume - offset} damaged bytes at byte {offset} ({why}; "
              f"{'about ' * (records > 1)}{records} record{'s' * (records != 1)} lost; {skip_option})",
              file=sys.stderr, flush=True)
        skipped.append((offset, resume))
        offset = resume
    if repair and skipped:
        try:
            rewrite(path, data, skipped)
        except OSError as e:  # the records read are good all the same: this start goes on, the next skips again
            print(f"flashtick: log {path}: could not rewrite it without its damaged bytes ({e.strerror or e}); "
                  f"the next start needs log.skip_corrupt again", file=sys.stderr, flush=True)
