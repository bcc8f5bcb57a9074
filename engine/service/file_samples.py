"""What a file's bytes are, cheaply: a digest of the whole file when it is small, else of fixed blocks spread
through it. A backtest's resume key (backtest_resume.run_key) holds one per input file, so a file corrected in place
with the same size and modification time is told from the one the checkpoint read; a data directory's meta.json
fingerprints a checkpoint's weights files with the same block reader (log_provenance.weights_fingerprint)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, BinaryIO

WHOLE_BYTES = 64 << 20  # a file up to this size is read whole (a fraction of a second, next to its backtest)
SAMPLE_BLOCK = 1 << 20  # past it: this many bytes at each of SAMPLE_BLOCKS offsets, the first and last block included
SAMPLE_BLOCKS = 64  # (64 MiB read per file however large: an edit between two samples of a larger file goes unseen)


def update_with_blocks(digest: Any, f: BinaryIO, size: int, block: int, count: int) -> None:
    """Feed `digest` `count` blocks of `block` bytes of the open file `f` (of `size` bytes), at offsets evenly
    spread from its start to its last block (they overlap in a file shorter than `count` blocks)."""
    last = max(size - block, 0)
    for i in range(count):
        f.seek(0 if count == 1 else last * i // (count - 1))
        digest.update(f.read(block))


def content_digest(path: Path) -> str:
    """A digest of `path`'s bytes: every byte up to WHOLE_BYTES, past it SAMPLE_BLOCKS blocks of SAMPLE_BLOCK bytes
    spread evenly through the file (its first and last included), its size mixed in. docs/replay.md says which."""
    digest = hashlib.sha256()
    size = path.stat().st_size
    digest.update(f"{size}:".encode())
    with open(path, "rb") as f:
        if size <= WHOLE_BYTES:
            while chunk := f.read(SAMPLE_BLOCK):
                digest.update(chunk)
        else:
            update_with_blocks(digest, f, size, SAMPLE_BLOCK, SAMPLE_BLOCKS)
    return digest.hexdigest()[:16]
