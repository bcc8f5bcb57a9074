"""The on-disk format of a log (the tick log, and the answer log, which uses it too): segment files and the framing
of each record in them, and how a record is checked. What a tool reading a data directory without the service needs.

Segments are files named ``<prefix>-<first record number, 20 digits>.log`` in one directory (prefix ``ticks``; the
answer log's is ``answers``). Records are self-delimiting and checked:

    magic (4 bytes b"FTk1") | length (u32 LE) | crc32 of payload (u32 LE) | payload (length bytes)

Writing them is TickLog's (ticklog.py); reading them back is log_reading.py's.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

MAGIC = b"FTk1"
HEADER = struct.Struct("<4sII")  # magic, payload length, crc32(payload)
MAX_RECORD_BYTES = 64 << 20  # a length past this is damage, not data


def framed(payload: bytes) -> bytes:
    """``payload`` as a record: its header, then it."""
    return HEADER.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload


def segment_name(first: int, prefix: str = "ticks") -> str:
    return f"{prefix}-{first:020d}.log"


def segments(directory: Path, prefix: str = "ticks") -> list[tuple[int, Path]]:
    """(first record number, path) of every segment, oldest first."""
    found = []
    for path in directory.glob(f"{prefix}-*.log"):
        try:
            found.append((int(path.stem.removeprefix(f"{prefix}-")), path))
        except ValueError:
            continue
    return sorted(found)


def damage(data: bytes, offset: int) -> str | None:
    """Why the record at ``offset`` is not valid, or None."""
    if len(data) - offset < HEADER.size:
        return "cut short"
    magic, length, crc = HEADER.unpack_from(data, offset)
    if magic != MAGIC:
        return "bad magic"
    if length > MAX_RECORD_BYTES:
        return "bad length"
    end = offset + HEADER.size + length
    if end > len(data):
        return "cut short"
    if zlib.crc32(data[offset + HEADER.size : end]) != crc:
        return "checksum mismatch"
    return None


def next_valid(data: bytes, offset: int) -> int:
    """The next offset holding a valid record (or the end)."""
    while (offset := data.find(MAGIC, offset)) != -1:
        if damage(data, offset) is None:
            return offset
        offset += 1
    return len(data)
