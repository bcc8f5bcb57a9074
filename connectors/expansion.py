"""Bounded decompression: a `.gz` file's text and a zip archive's members are read through `Bounded` (a `.dbn.zst`'s
records are counted as its decoder decodes them, connectors/dbn.py), which refuses
a decompression bomb (a few MB that expand to GBs of newlines) by name before it fills a disk or a read runs for
minutes, and says on stderr how far a long expansion has come.

The bounds (`ExpansionLimits`) are an absolute size and a ratio to the compressed size, the ratio applied only past
a first `RATIO_FREE_BYTES` (a small file of repeated rows compresses far better than 1000:1 and is no threat). The
defaults are far above what vendors' files reach: a day of Tardis, Binance or Databento data is a few GB unpacked,
text compresses 5-20:1. They are set by environment variables, so that every way a file is replayed (`backtest`,
`feed replay`, `demo`, `replay_ticks`) honours the same ones.
"""

from __future__ import annotations

import io
import os
import sys
import time
from typing import IO, Callable, NamedTuple

from engine.quoting import quoted

UNPACKED_VARIABLE = "FLASHTICK_MAX_UNPACKED_BYTES"
RATIO_VARIABLE = "FLASHTICK_MAX_UNPACK_RATIO"
MEMBERS_VARIABLE = "FLASHTICK_MAX_ZIP_MEMBERS"
DEFAULT_UNPACKED = 64 << 30  # 64 GiB: a day of a busy venue's every trade and quote is a few GB
DEFAULT_RATIO = 200  # Binance trades CSV compresses 7:1 (gzip -9), repetitive quotes ~30:1; a bomb 1000:1
DEFAULT_MEMBERS = 10_000  # a zip's files: a day's per-symbol archive holds thousands; each is planned (~0.1 s)
RATIO_FREE_BYTES = 64 << 20  # the ratio is checked past this much: small, very repetitive files stay readable
PROGRESS_FIRST_S = 3.0  # a decompression still running after this long is said on stderr, then every ...
PROGRESS_EVERY_S = 10.0


class ExpansionLimits(NamedTuple):
    unpacked_bytes: int
    ratio: float
    members: int


class ExpansionRefused(ValueError):
    """A compressed file or member that expands past a limit (a ValueError: said in one line, as bad files are)."""


def _positive(variable: str, default: float, kind: Callable[[str], float]) -> float:
    given = os.environ.get(variable, "").strip()
    if not given:
        return default
    try:
        value = kind(given.replace("_", ""))
    except ValueError:
        value = 0
    if not value > 0:
        raise ValueError(f"{variable} must be a number > 0, got {quoted(given)}")
    return value


def expansion_limits() -> ExpansionLimits:
    """The bounds in force, read from the environment at each file (a test or a user may change them)."""
    return ExpansionLimits(int(_positive(UNPACKED_VARIABLE, DEFAULT_UNPACKED, int)),
                           _positive(RATIO_VARIABLE, DEFAULT_RATIO, float),
                           int(_positive(MEMBERS_VARIABLE, DEFAULT_MEMBERS, int)))


def said_size(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return ""  # (unreachable)


class Progress:
    """Says on stderr how a long step is going: first after PROGRESS_FIRST_S, then every PROGRESS_EVERY_S, so a
    minute of decompressing or planning a zip's thousands of files is never a minute of silence."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self._next = self.started + PROGRESS_FIRST_S

    def tick(self, said: Callable[[], str]) -> None:
        if (now := time.monotonic()) >= self._next:
            self._next = now + PROGRESS_EVERY_S
            print(f"flashtick: note: {said()} ({now - self.started:.0f} s)", file=sys.stderr, flush=True)


def refuse_past_limits(name_said: str, compressed: int, out: int, limits: ExpansionLimits) -> None:
    """Raises ExpansionRefused when `out` bytes decompressed so far from `compressed` bytes are past a limit: the
    file (`name_said`, as the user gave it, or `archive (member inside)`), its compressed size, the limit, and how
    to raise it. `Bounded` checks its reads so; a `.dbn.zst`'s decoder checks what it decodes (connectors/dbn.py)."""
    compressed = max(compressed, 1)
    if out > limits.unpacked_bytes:
        raise ExpansionRefused(
            f"{name_said}: {said_size(compressed)} compressed expands past {said_size(out)}, over "
            f"the limit of {said_size(limits.unpacked_bytes)} unpacked (a decompression bomb, or a file larger "
            f"than any vendor's day); to read it anyway set {UNPACKED_VARIABLE} higher (bytes)")
    if out > RATIO_FREE_BYTES and out > limits.ratio * compressed:
        raise ExpansionRefused(
            f"{name_said}: {said_size(compressed)} compressed expands past {said_size(out)}, over "
            f"{limits.ratio:g} times its compressed size (a decompression bomb: tick data compresses 5-20:1); to "
            f"read it anyway set {RATIO_VARIABLE} higher")


class Bounded(io.RawIOBase):
    """A binary decompressing stream (`gzip.open(..., "rb")`, `ZipFile.open(member)`) read with the limits in force:
    past them a read raises ExpansionRefused naming ``name`` (the file as the user gave it, or `archive (member
    inside)`), its compressed size and the limit, and how to raise it."""

    def __init__(self, raw: IO[bytes], name: str, compressed: int) -> None:
        super().__init__()
        self._raw, self.name_said, self.compressed = raw, name, max(compressed, 1)
        self.limits = expansion_limits()
        self.out = self._at = 0
        self._progress = Progress()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return self._raw.seekable()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """(a gzip file seeks by decompressing again up to the place: bounded alike, by the furthest place read)"""
        self._at = self._raw.seek(offset, whence)
        return self._at

    def tell(self) -> int:
        return self._at

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self._raw.read(len(buffer))
        buffer[: len(data)] = data
        self._at += len(data)
        self.out = max(self.out, self._at)  # the furthest byte read: a file read twice counts once
        self._check()
        return len(data)

    def _check(self) -> None:
        refuse_past_limits(self.name_said, self.compressed, self.out, self.limits)
        self._progress.tick(lambda: f"decompressing {self.name_said}: {said_size(self.out)} so far from "
                                    f"{said_size(self.compressed)} compressed")

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def bounded_gzip(path: str | os.PathLike[str], mode: str = "rb", **text: object) -> IO:
    """`gzip.open` of a `.gz` file, bounded (`Bounded`); "rt" mode takes open's text arguments."""
    import gzip

    raw = Bounded(gzip.open(path, "rb"), str(path), os.path.getsize(path))  # type: ignore[arg-type]
    binary = io.BufferedReader(raw, 1 << 16)
    if "t" not in mode:
        return binary
    return io.TextIOWrapper(binary, **text)  # type: ignore[arg-type]
