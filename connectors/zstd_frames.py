"""Whether a zstd file (`.dbn.zst`) holds its frames whole, told from their structure alone (RFC 8878, section 3.1):
each frame's header, its blocks' 3-byte headers and sizes up to the one marked last, and the 4-byte content
checksum the header promises. A download cut at a block's end, where the data before it also ends on a record's
end, decodes to whole records and nothing left over: the decoder cannot tell it from a complete file (about 1 in 56
cuts of an MBO file), while the missing last block or checksum says it at once. A cut exactly between two whole
frames of a file of several is the one the format cannot show. Only headers are read: blocks are skipped by seeking.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

ZSTD_MAGIC = 0xFD2FB528
SKIPPABLE_MAGIC = 0x184D2A50  # .. 0x184D2A5F: a frame of user data with its 4-byte size, no blocks
BLOCK_HEADER_BYTES = 3
CHECKSUM_BYTES = 4
_RLE = 1  # a block type whose data is one byte, whatever its size field says
_RESERVED = 3
_ID_BYTES = (0, 1, 2, 4)  # Dictionary_ID_flag -> the dictionary id's bytes
_SIZE_BYTES = (0, 2, 4, 8)  # Frame_Content_Size_flag -> the content size's bytes (flag 0: 1 in a single segment)


def cut_short(path: Path) -> str | None:
    """Where a zstd file ends before its last frame does ("inside a zstd frame's header", "after block 12 of its
    frame, before the block marked last", "before its frame's content checksum"); None for a file whose frames are
    whole, or for bytes this reader does not take for zstd (the decoder's own error says what they are)."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        frames = 0
        while f.tell() < size:
            frames += 1
            if (said := _frame_cut(f, size)) is not None:
                return said if frames == 1 else f"{said} (frame {frames})"
    return None


def _frame_cut(f: BinaryIO, size: int) -> str | None:
    """Reads one frame from `f`'s position to its end; why it is cut, or None when whole (or no zstd frame)."""
    magic = f.read(4)
    if len(magic) < 4:
        return "inside a zstd frame's magic number"
    number = int.from_bytes(magic, "little")
    if number & 0xFFFFFFF0 == SKIPPABLE_MAGIC:
        length = f.read(4)
        if len(length) < 4 or f.tell() + int.from_bytes(length, "little") > size:
            return "inside a skippable zstd frame"
        f.seek(int.from_bytes(length, "little"), 1)
        return None
    if number != ZSTD_MAGIC:
        f.seek(0, 2)  # not zstd (or damaged): left to the decoder, which names it
        return None
    descriptor = f.read(1)
    if not descriptor:
        return "inside a zstd frame's header"
    flags = descriptor[0]
    single_segment = bool(flags & 0x20)
    content_size = _SIZE_BYTES[flags >> 6] or (1 if single_segment else 0)
    header = (0 if single_segment else 1) + _ID_BYTES[flags & 0x03] + content_size
    if len(f.read(header)) < header:
        return "inside a zstd frame's header"
    blocks = 0
    while True:
        head = f.read(BLOCK_HEADER_BYTES)
        if not head:
            return (f"after block {blocks} of its zstd frame, before the block marked last (the frame's end)"
                    if blocks else "after a zstd frame's header, before its first block")
        if len(head) < BLOCK_HEADER_BYTES:
            return f"inside the header of block {blocks + 1} of its zstd frame"
        value = int.from_bytes(head, "little")
        kind, length = (value >> 1) & 0x03, value >> 3
        if kind == _RESERVED:
            f.seek(0, 2)  # damaged: the decoder says so
            return None
        data = 1 if kind == _RLE else length
        if f.tell() + data > size:
            return f"inside block {blocks + 1} of its zstd frame"
        f.seek(data, 1)
        blocks += 1
        if value & 1:
            break
    if flags & 0x04:
        left = size - f.tell()
        if left < CHECKSUM_BYTES:
            return (f"after its zstd frame's last block, inside the {CHECKSUM_BYTES}-byte content checksum its "
                    f"header promises ({max(left, 0)} of its bytes there)")
        f.seek(CHECKSUM_BYTES, 1)
    return None
