"""Which model answers: a SHA-256 of every byte of every file of a checkpoint directory that can move an answer (the
weights, config.json, codec.json, calibration.json, answer_head.json, a tokenizer: every file but the reports
training writes beside them), each file's digest kept too, so that a change is named by the file it is in.

Full length and unsampled (review349 #2: a fingerprint of each weights file's first and last MiB told neither a
fine-tune of a middle layer nor a recalibration from the model it changed). Reading costs about 1 s per 0.5-1 GB on
one core (docs/replay.md), so a file's digest is kept for the process by its path, inode, size, modification and
change times: a serve's start and its record, or a backtest's key and record, read each file once.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import NamedTuple

# what training and evaluation write beside a checkpoint for a reader, which no load reads: not the model
REPORT_FILES = frozenset({"TRAINING.md", "evaluation.json", "calibration.png", "README.md"})
REPORT_SUFFIXES = (".md", ".png")
READ_BLOCK = 1 << 20  # bytes hashed per read: the file is streamed, never held whole

MODEL_DIGEST = "model_digest"  # the key a data directory's written_with.json and a serve's `health` hold it under
# (resolved path, device, inode, size, mtime_ns, ctime_ns) -> sha256, for this process. The change time too: bytes
# rewritten in place with the size and modification time given back (cp -p, touch -r) move it, and nothing sets it
_known: dict[tuple[str, int, int, int, int, int], str] = {}


class ModelDigest(NamedTuple):
    """``digest``: SHA-256 (64 hex digits) over every answer-moving file's relative name and SHA-256, in name
    order; ``files``: each such file's own SHA-256 by its name relative to the directory."""
    digest: str
    files: dict[str, str]

    def record(self) -> dict[str, object]:
        return {"digest": self.digest, "files": dict(self.files)}


def answer_files(model_dir: Path) -> list[Path]:
    """The files under ``model_dir`` that can move an answer, sorted by relative name: all but REPORT_FILES and
    files named as reports (REPORT_SUFFIXES), and hidden ones (an editor's swap file is no part of the model)."""
    found = []
    for path in sorted(model_dir.rglob("*")):
        relative = path.relative_to(model_dir)
        if not path.is_file() or any(part.startswith(".") for part in relative.parts):
            continue
        if path.name in REPORT_FILES or path.suffix in REPORT_SUFFIXES:
            continue
        found.append(path)
    return found


def file_sha256(path: Path) -> str:
    """The SHA-256 of every byte of ``path`` (what `sha256sum` prints), read in blocks; kept while the file's inode,
    size, modification and change times stay as they were."""
    stat = path.stat()
    known = (str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
    if known not in _known:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while block := f.read(READ_BLOCK):
                digest.update(block)
        _known[known] = digest.hexdigest()
    return _known[known]


def model_digest(model_dir: Path) -> ModelDigest:
    """The identity of the checkpoint in ``model_dir``: same digest, same bytes in every file that moves an answer."""
    files = {path.relative_to(model_dir).as_posix(): file_sha256(path) for path in answer_files(model_dir)}
    whole = hashlib.sha256()
    for name, digest in files.items():
        whole.update(f"{name}\0{digest}\n".encode())
    return ModelDigest(whole.hexdigest(), files)


def files_changed(then: dict[str, str], now: dict[str, str]) -> list[str]:
    """The files of two ModelDigest.files that differ, in words: `calibration.json changed`, `x added`, `y removed`."""
    said = [f"{name} changed" for name in sorted(set(then) & set(now)) if then[name] != now[name]]
    said += [f"{name} added" for name in sorted(set(now) - set(then))]
    return said + [f"{name} removed" for name in sorted(set(then) - set(now))]
