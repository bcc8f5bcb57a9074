"""A tick file whose name says no kind replay reads, known by its content as standard input is: NYSE ships its Daily
TAQ files as `EQY_US_ALL_TRADE_20240308.gz` (a pipe-delimited CSV inside) and, gunzipped, with no extension at all;
both were refused as an unsupported file type (review355 #8). Its first bytes say what it is (Parquet's `PAR1`,
gzip's magic with JSON lines or CSV inside, JSON lines, else text: CSV), and it is read through a link named as
that kind (`EQY_US_ALL_TRADE_20240308.csv`, `.csv.gz`): no copy, however large, and polars streams a gzip as it
does a `.csv.gz`. The link sits under the same folder names as the file (a stream or day named by a folder is
found as the file's is), and every message names the file as given (`NamedByContent.given`), never the link."""

from __future__ import annotations

import gzip
import os
import tempfile
import zlib
from pathlib import Path

from connectors.archives import TemporaryFolder, is_zip
from connectors.day_folders import folder_chain
from connectors.file_scans import is_tick_file

# temporary copies of streams (standard input, a pipe: connectors/stream_copies.py) -> the name the user gave it,
# so that no reject example or note names a temporary file removed when the command ends
SHOWN_AS: dict[str, str] = {}
HEAD_BYTES = 4096  # of the file (decompressed, for a gzip) read to tell its kind
LINK_PREFIX = "flashtick-named-"


def shown_as(path: Path, name: str) -> None:
    """Name a temporary copy of a stream, wherever a message names its file, as the user gave it (`standard input`)."""
    SHOWN_AS[str(path)] = name


def _kind(head: bytes) -> str | None:
    """A text file's kind from its first bytes: JSON lines, CSV for text of no NUL byte, None for other bytes."""
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if text[:1] in (b"{", b"["):
        return ".jsonl"
    return ".csv" if text and b"\x00" not in text else None


def content_suffix(path: Path) -> str | None:
    """The suffix a file's content says it has, for a file whose name says no kind replay reads (no extension, a
    `.gz` of CSV); None for a name replay reads as it is, a zip archive, or bytes of no known kind."""
    if is_tick_file(path) or is_zip(path) or path.name.startswith("."):
        return None
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
        if head.startswith(b"PAR1"):
            return ".parquet"
        if head.startswith(b"\x1f\x8b"):
            with gzip.open(path, "rb") as f:
                inner = _kind(f.read(HEAD_BYTES))
            return None if inner is None else f"{inner}.gz"
    except (OSError, EOFError, zlib.error):  # (the read that plans it says why)
        return None
    return _kind(head) if not path.suffix or path.suffix.lower() in (".gz", ".dat", ".asc", ".psv") else None


class NamedByContent(TemporaryFolder):
    """A link to ``given`` named as its content's kind (``path``), under the folders above the file; removed on
    close."""

    def __init__(self, given: Path, suffix: str) -> None:
        self.given = given
        self._dir = tempfile.mkdtemp(prefix=LINK_PREFIX)
        folder = Path(self._dir).joinpath(*folder_chain(given))
        folder.mkdir(parents=True, exist_ok=True)
        stem = given.name[: -len(".gz")] if given.name.lower().endswith(".gz") else given.name
        self.path = folder / f"{stem}{suffix}"
        os.symlink(given.resolve(), self.path)

    def note(self) -> str:
        return (f"{self.given}: its name says no kind of file replay reads; its content does: read as "
                f"{self.path.name.removeprefix(self.given.name.removesuffix('.gz'))[1:]} (in place, not copied)")

    def named(self, text: str) -> str:
        """A message with the link's path (or name) written as the file given."""
        return text.replace(str(self.path), str(self.given)).replace(self.path.name, self.given.name)
