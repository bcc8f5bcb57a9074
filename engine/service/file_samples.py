"""Blocks spread through a file, fed to a digest: a data directory's meta.json fingerprints a checkpoint's weights
files with them (log_provenance.weights_fingerprint, kept as every release compares it). A backtest's input files
and a model's files are digested whole (model_digest.file_sha256, review349 #2 and #8)."""

from __future__ import annotations

from typing import Any, BinaryIO


def update_with_blocks(digest: Any, f: BinaryIO, size: int, block: int, count: int) -> None:
    """Feed `digest` `count` blocks of `block` bytes of the open file `f` (of `size` bytes), at offsets evenly
    spread from its start to its last block (they overlap in a file shorter than `count` blocks)."""
    last = max(size - block, 0)
    for i in range(count):
        f.seek(0 if count == 1 else last * i // (count - 1))
        digest.update(f.read(block))
