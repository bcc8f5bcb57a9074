"""Tick files that are streams: `-` (standard input), `/dev/stdin`, `/dev/fd/N` (a shell's `<(zcat x.gz)`) and named
pipes. A replay reads each file more than once (its layout, then its rows) and a pipe gives its bytes once, so each
is first copied whole to a temporary file (`copied`), read as the file it stands for, its notes and rejects naming
what was given (connectors/content_names.py). Its format is its name's (`ticks.csv` as a FIFO), else read from its
first bytes: Parquet (`PAR1`), gzip (CSV inside), JSON lines (`{`), else CSV. The CLI copies them before it reads
anything (engine/service/stdin_files.py); `FileReplay`, and `run_backtest` through it, as it opens each file
(review390 #6: the Python entry points refused what docs/replay.md says is read alike). A stream so read is no file
a later run can find again: `--resume` and `feed replay`'s resume from the engine's marks do not apply to it.
"""

from __future__ import annotations

import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO

from connectors.archives import TemporaryFolder
from connectors.content_names import shown_as

STANDARD_INPUT = "-"
_STREAM_NAMES = ("/dev/stdin", "/proc/self/fd/0")
_KNOWN_SUFFIXES = (".csv", ".tsv", ".txt", ".jsonl", ".ndjson", ".json", ".parquet", ".pq", ".gz", ".zst", ".dbn")


def is_stream(path: Path) -> bool:
    """Whether ``path`` names a stream rather than a file: `-`, /dev/stdin, /dev/fd/N or a named pipe."""
    if str(path) == STANDARD_INPUT or str(path) in _STREAM_NAMES or str(path.parent) == "/dev/fd":
        return True
    try:
        return stat.S_ISFIFO(path.stat().st_mode)
    except OSError:
        return False


def copied(path: Path, folder: Path, index: int) -> tuple[Path, str]:
    """The stream ``path`` read whole into a file under ``folder`` (``index``: its place among the inputs, which
    tells two streams of one name apart), and the note that says so."""
    named = str(path) == STANDARD_INPUT
    source: BinaryIO = sys.stdin.buffer if named else open(path, "rb")  # noqa: SIM115 - closed below
    try:
        head = source.read(4)
        suffix = "".join(path.suffixes) if not named and path.suffix.lower() in _KNOWN_SUFFIXES else _sniffed(head)
        stem = "stdin" if named or str(path) in _STREAM_NAMES else f"fd{path.name}" \
            if str(path.parent) == "/dev/fd" else path.name.removesuffix(suffix)
        # a folder of its own named as the file: a stream named from the file's name or folder is named as the stream
        # was (a FIFO `ETHUSDT.csv`: ETHUSDT; standard input: stdin), not after the temporary folder
        target = folder / (stem if not (folder / stem).exists() else f"{stem}-{index}") / f"{stem}{suffix}"
        target.parent.mkdir()
        with open(target, "wb") as out:
            out.write(head)
            shutil.copyfileobj(source, out, 1 << 20)
    finally:
        if not named:
            source.close()
    what = "standard input" if named else str(path)
    shown_as(target, what)  # its rejects and notes name what was given, never the copy removed at the end
    return target, (f"{what}: a stream, read whole ({target.stat().st_size:,} bytes) into a temporary file and "
                    f"replayed from there as {suffix.lstrip('.')}")


def _sniffed(head: bytes) -> str:
    """A stream's format from its first bytes: Parquet, gzip (CSV inside), JSON lines, else CSV."""
    if head.startswith(b"PAR1"):
        return ".parquet"
    if head.startswith(b"\x1f\x8b"):
        return ".csv.gz"
    if head.lstrip().startswith(b"{"):
        return ".jsonl"
    return ".csv"


class StreamCopy(TemporaryFolder):
    """A stream a replay read into a temporary file (`copied`), removed with its folder when the replay closes (or
    when the object is collected)."""

    def __init__(self, path: Path) -> None:
        self._dir = tempfile.mkdtemp(prefix="flashtick-stream-")  # (its own: no other stream's name in it)
        try:
            self.path, self.note = copied(path, Path(self._dir), 0)
        except BaseException:
            self.close()
            raise
