"""Damage a reader finds in a log, and what it does with it: whether damage at the end is a torn tail (cut away),
the damaged copies kept for forensics (a torn tail's non-zero cut bytes, the original of a segment rewritten
without its damaged regions under ``skip_corrupt``), and the listing of those copies, which retention never drops.
Reading a segment is log_reading.py's; it calls on these when a record fails its check (log_format.damage)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from engine.service.log_format import HEADER, next_valid


def damaged_copies(directory: Path) -> dict[Path, int]:
    """The damaged copies kept in ``directory`` (``<segment>.damaged``, ``.damaged-2``, ...: the originals a
    ``skip_corrupt`` repair rewrote, the non-zero bytes a torn tail's cut took) and their sizes: retention never
    drops them (forensics), so they stay until someone removes them."""
    sizes = {}
    for path in sorted(Path(directory).glob("*.log.damaged*")):
        try:
            sizes[path] = path.stat().st_size
        except FileNotFoundError:  # removed meanwhile, as it should be once looked at
            continue
    return sizes


def torn_tail(data: bytes, offset: int, why: str) -> str | None:
    """What the damage at ``offset`` of the last segment is when it is the tail a dying writer or host leaves, or
    None: damage with no valid record (magic, length, checksum) after it. A record cut short (the process died
    mid-append); bytes that are zero to the end of the file (the host died after the file grew but before its
    pages were written) or a record running into them; or any other damage: a last record whose page was partly
    written, or blocks allocated but never written that hold old data (ext4 data=writeback, a disk without
    power-loss protection). Cutting it loses no record a reader could read; damage with a valid record after it
    (accepted data that cutting would lose) is not a tail."""
    if next_valid(data, offset + 1) != len(data):
        return None
    if why == "cut short":
        return "a record cut short"
    zeros_from = len(data.rstrip(b"\0"))
    if offset >= zeros_from:
        return "zero bytes to the end of the file"
    if why == "checksum mismatch" and offset + HEADER.size + HEADER.unpack_from(data, offset)[1] > zeros_from:
        return "a record ending in zero bytes to the end of the file"
    return f"damaged bytes ({why}; no valid record after them)"


def _damaged_name(path: Path) -> Path:
    """Where a damaged copy of segment ``path`` goes: ``<name>.damaged``, or ``.damaged-2``, ... when damage was
    found in the same segment before (every copy is kept)."""
    damaged = path.with_name(path.name + ".damaged")
    number = 1
    while damaged.exists():
        number += 1
        damaged = path.with_name(f"{path.name}.damaged-{number}")
    return damaged


def keep_cut_bytes(path: Path, cut: bytes) -> str:
    """A torn tail's ``cut`` bytes kept as a damaged copy beside ``path`` before they are cut, unless they are all
    zero (pages a host crash never wrote: nothing to look at). Non-zero ones may be a half-written record or old
    blocks, which someone investigating a host crash wants. Returns what the cut's stderr line adds: where the
    copy is, or why none could be kept (a full disk must not stop a start the cut lets go on)."""
    if not any(cut):
        return ""
    damaged = _damaged_name(path)
    try:
        fd = os.open(damaged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        return f"; its bytes could not be kept as {damaged} ({e.strerror or e})"
    try:
        if os.write(fd, cut) != len(cut):
            raise OSError("short write (is the disk full?)")
        os.fsync(fd)  # on disk before the truncate leaves them nowhere else
    except OSError as e:
        damaged.unlink(missing_ok=True)  # a part of them would pass for all of them
        return f"; its bytes could not be kept as {damaged} ({e.strerror or e})"
    finally:
        os.close(fd)
    return f"; the cut bytes are kept as {damaged}"


def rewrite(path: Path, data: bytes, skipped: list[tuple[int, int]]) -> None:
    """``path`` holding only its valid records (``data`` less its ``skipped`` regions), the original kept beside it as
    ``<name>.damaged`` for forensics. The original's name holds the old or the new content at every moment (a
    hard link keeps the original, then the rewrite replaces the name atomically)."""
    damaged = _damaged_name(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        starts, ends = [0] + [end for _, end in skipped], [start for start, _ in skipped] + [len(data)]
        valid = b"".join(data[start:end] for start, end in zip(starts, ends))
        if os.write(fd, valid) != len(valid):
            raise OSError(f"short write rewriting {path} (is the disk full?)")
        os.fsync(fd)
    finally:
        os.close(fd)
    os.link(path, damaged)
    os.replace(tmp, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    print(f"flashtick: log {path}: rewritten with its valid records alone, so later starts need no "
          f"log.skip_corrupt; the damaged original is kept as {damaged.name}", file=sys.stderr, flush=True)
