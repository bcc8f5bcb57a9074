"""DiskFull: a full disk, a quota or a file size limit met while writing a file, said in one line naming the file
and the cause (polars' own words name neither). In the engine core, below connectors and the service, so that a
connector's own writes (a JSON-lines file's Parquet copy) are said as the service's outputs are;
engine/service/output_paths.py uses it for every output. Not in connectors/: the CLI imports output_paths before it
can name another project's `connectors` package shadowing ours (tests/test_installation.py)."""

from __future__ import annotations

import errno
import os
import re
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.path_words import shown_path


class DiskFull(OSError):
    """An output could not be written for want of space: the disk or a quota full, or past a file size limit."""


# what each errno of a full disk is said as (EFBIG: with the process's own limit, `file_size_limit`)
DISK_FULL = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exceeded",
             errno.EFBIG: "the file is larger than this process may write"}
_OS_ERROR = re.compile(r"\(os error (\d+)\)")  # polars' (Rust's) form: `No space left on device (os error 28)`
# polars' words for a write that failed inside a page header (Thrift): the OS's error and its errno are not kept
_THRIFT_WRITE = re.compile(r"Invalid thrift: transport error")


def file_size_limit() -> str:
    """Why a write got EFBIG, in words: this process's file size limit (RLIMIT_FSIZE, `ulimit -f`) with its value,
    or, without one, the file system's largest file."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY:
        return "the file system's largest file"
    return f"its file size limit, ulimit -f, is {soft:,} bytes"


# free space under which a write that lost its errno (polars' "Invalid thrift") is taken for a full disk: what one
# Parquet page and its buffers need at most, so a disk with room left never reads as full
NEAR_FULL_BYTES = 16 << 20


def _space(written: Path) -> tuple[int, int, Path] | None:
    """(bytes free to this user, the file system's size, the folder asked) where ``written`` is; None unknown."""
    folder = next((p for p in (written, *written.parents) if p.exists()), None)
    if folder is None:
        return None
    try:
        stats = os.statvfs(folder)
    except OSError:
        return None
    return stats.f_bavail * stats.f_frsize, stats.f_blocks * stats.f_frsize, folder


def free_bytes(written: Path) -> int | None:
    """The bytes free to this user on the file system of ``written``; None where it cannot be told."""
    space = _space(written)
    return None if space is None else space[0]


def space_left(written: Path) -> str:
    """How much space the file system of ``written`` has, in words, for a full disk's message: "0 bytes free of
    16,384 on the file system of /mnt/ticks"; "" when it cannot be told."""
    space = _space(written)
    if space is None:
        return ""
    free, size, folder = space
    return f"{free:,} bytes free of {size:,} on the file system of {folder if folder.is_dir() else folder.parent}"


def _near_full(written: Path) -> bool:
    """Whether the file system of ``written`` has next to no space left: what stopped a write whose error lost its
    errno (polars' "Invalid thrift: transport error", when the disk filled inside a page header)."""
    space = _space(written)
    return space is not None and space[0] < NEAR_FULL_BYTES


def _at_size_limit(written: Path) -> bool:
    """Whether ``written`` reached this process's file size limit: what stopped a write whose error lost its errno
    (polars' "Invalid thrift: transport error", when the limit fell inside a page header)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        return soft != resource.RLIM_INFINITY and written.stat().st_size >= soft
    except OSError:
        return False


@contextmanager
def said_if_disk_full(path: Path, written: Path | None = None) -> Iterator[None]:
    """A full disk while writing ``path`` (through ``written``, its temporary name, removed to give back the space it
    took) raised as DiskFull in one line naming the path and the cause: polars said "parquet: File out of
    specification: underlying IO error: No space left on device (os error 28)", naming no file (review224 #6),
    and, past a file size limit that fell inside a page header, "Invalid thrift: transport error", naming neither
    the file nor the limit; a full disk that stopped it there said the same words (fix302 #3): both are told
    apart by the limit and the free space left, and a full disk's message says how much the file system has."""
    try:
        yield
    except Exception as error:  # noqa: BLE001 - polars' errors are not OSErrors: the errno is read from the text
        # polars' sink_csv raises an OSError with no errno, its cause only in the text: "No space left on device
        # (os error 28)" (review337 #11: `ticklog export` said that alone, naming no file)
        code = error.errno if isinstance(error, OSError) and error.errno is not None else (
            int(found.group(1)) if (found := _OS_ERROR.search(str(error))) else None)
        if code is None and _THRIFT_WRITE.search(str(error)):  # the disk filled inside a page header, or a limit
            code = errno.EFBIG if _at_size_limit(written or path) else \
                errno.ENOSPC if _near_full(written or path) else None
        if code not in DISK_FULL:
            raise
        space = space_left(written or path) if code == errno.ENOSPC else ""  # (before the file gives it back)
        if written is not None:
            written.unlink(missing_ok=True)
        cause = f"{DISK_FULL[code]} ({file_size_limit()})" if code == errno.EFBIG else \
            f"{DISK_FULL[code]} ({space})" if space else DISK_FULL[code]
        full = DiskFull(f"cannot write {shown_path(path)}: {cause}")
        full.errno = code  # (given as OSError's first argument, it would print as "[Errno 28] cannot write ...")
        raise full from None
