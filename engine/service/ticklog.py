"""TickLog: the append-only, segmented on-disk log of every accepted ingest item.

The service appends an item *before* it reaches a session, so a process that
dies loses nothing it accepted: a restart replays the log. Records are
self-delimiting and checked:

    magic (4 bytes b"FTk1") | length (u32 LE) | crc32 of payload (u32 LE) | payload (length bytes)

Segments are files named ``<prefix>-<first record number, 20 digits>.log`` in
one directory (prefix ``ticks``; the answer log uses the same format with
``answers``); a new one starts past ``segment_bytes``. Durability is the
``fsync`` policy: ``always`` (fsync every append), ``group`` (a background
thread fsyncs every ``group_ms`` while appends are pending, so the caller never
waits on the disk: a host crash loses at most that window, a killed process
loses nothing, since every append is a completed write(2)) or ``never`` (the OS
decides). Retention drops whole old segments by total size or age.

Reading back (``read``): damage at the very end of the last segment with no
valid record after it (a torn tail: a record cut short as the process died
mid-write, zero bytes to the end as the host died before the file's pages were
written, or a last record or trailing blocks a host crash left half-written or
holding old data) is truncated away with a warning and counted; a damaged
record anywhere else (in an older segment, or with valid records after it)
stops the read with the file and byte offset (``CorruptLog``), or, with ``skip_corrupt``, is skipped by
scanning to the next valid record, counted and said, and the segment rewritten
without it (the original kept as ``<name>.damaged``); a torn tail's cut bytes are kept the same way unless they
are all zero. A failed append (disk full, a
file size limit, an I/O error) raises ``LogWriteError`` and leaves the log as it
was before the append: the caller refuses the item.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

MAGIC = b"FTk1"
HEADER = struct.Struct("<4sII")  # magic, payload length, crc32(payload)
MAX_RECORD_BYTES = 64 << 20  # a length past this is damage, not data
FsyncPolicy = Literal["always", "group", "never"]


class LogWriteError(OSError):
    """An append failed; nothing of it is in the log."""


class CorruptLog(ValueError):
    """A damaged record before the end of the log."""

    def __init__(self, path: Path, offset: int, why: str) -> None:
        super().__init__(f"{path}: damaged record at byte {offset} ({why}); to start anyway, losing the damaged "
                         f"records, set log.skip_corrupt: true in the config")
        self.path = path
        self.offset = offset
        self.why = why


# The tick log's own records beside the ticks (engine/service/durability.py writes them; log_replay.py and
# tick_export.py read them; where messages begin and end: message_ends.py):
SEGMENT_START = "start"  # each tick log segment's first record: {start: {stream: [ticks, last_ts, codec state,
#                          session (tokens, chunk boundaries, next roll point) or nil, ticks stamped last_ts]}}
# beside SEGMENT_START: the ticks logged before the segment since the log began (what retention drops of them is
# counted from the first kept one; the streams' counts miss the ticks of streams expired before it)
LOGGED = "logged"
# a record of its own, {forgotten: stream}: an operator had the live run forget the stream here (the `forget`
# control op), its ordering guard too, so a restart does not bring back a guard a forged tick set; the stream's ticks
# logged before it are in no session after it (a restart drops them there, an export leaves them out)
FORGOTTEN = "forgotten"


@dataclass
class LogStats:
    appended: int = 0
    append_errors: int = 0
    fsyncs: int = 0
    torn_tails: int = 0  # damage at the end of the last segment with nothing valid after it, truncated on read
    corrupt_skipped: int = 0
    corrupt_records: int = 0  # the records that began in the damaged regions skipped (about: a payload may hold one)
    segments_dropped: int = 0  # by retention
    # a replay's: the ticks of its streams that segments retention dropped had held (the first kept segment's start
    # record counts them), which a restart no longer recovers
    ticks_dropped_by_retention: int = 0
    # a replay's: the ticks of messages whose end the log lacks (a kill while one was read in), not booked
    # (message_ends.py): the feed's resend brings them again whole
    ticks_dropped_unended_message: int = 0


def private(path: str, flags: int) -> int:
    """An ``open(..., opener=private)`` that makes a new file 0600, as the segments are: what a data directory holds
    is the owner's alone (the umask would make it 0644)."""
    return os.open(path, flags, 0o600)


def _segment_name(first: int, prefix: str = "ticks") -> str:
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


DELETED_CHECK_S = 1.0  # how often an append checks that the segment file still exists


def _identity(directory: Path) -> tuple[int, int] | None:
    """(device, inode) of a directory; None when it is gone."""
    try:
        st = os.stat(directory)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


@dataclass
class TickLog:
    directory: Path
    fsync: FsyncPolicy = "group"
    group_ms: float = 5.0
    segment_bytes: int = 64 << 20
    retention_bytes: int | None = None
    retention_s: float | None = None
    prefix: str = "ticks"
    before_roll: Callable[[int], None] | None = None  # called with the next record's number before a new segment
    # the payload of each new segment's first record (what a reader needs of the segments retention may drop)
    segment_start: Callable[[], bytes] | None = None
    skip_corrupt: bool = False  # counting the last segment's records at open skips damaged ones (as its reader will)
    stats: LogStats = field(default_factory=LogStats)

    def __post_init__(self) -> None:
        if self.fsync not in ("always", "group", "never"):
            raise ValueError(f"fsync must be 'always', 'group' or 'never', got {self.fsync!r}")
        self.directory = Path(self.directory)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)  # its files are the owner's alone: so is it
        self._directory_id = _identity(self.directory)  # a directory removed and made again is not this one
        existing = segments(self.directory, self.prefix)
        self.next_record = self._count(existing)
        self._fd: int | None = None
        self._size = 0
        self._dirty = False
        self._lock = threading.Lock()  # the fd and _dirty, shared with the group-commit thread
        self._sync_error: str | None = None  # a failed background fsync: appends are refused from then on
        if existing:
            self._open(existing[-1][1])
        else:
            self._open(self.directory / _segment_name(self.next_record, self.prefix))
        # a service that was down past retention_s (or restarts with a smaller retention) drops what it would
        # have dropped live, before a restart replays it; the segment in use stays, as on a roll
        self._retain()
        self._closing = threading.Event()
        self._syncer: threading.Thread | None = None
        if self.fsync == "group":
            self._syncer = threading.Thread(target=self._group_commit, name=f"{self.prefix}-log-fsync", daemon=True)
            self._syncer.start()

    @property
    def name(self) -> str:
        """What errors call this log: "tick log", "answer log"."""
        return f"{self.prefix.removesuffix('s')} log"

    def _count(self, existing: list[tuple[int, Path]]) -> int:
        """Records in the log (reading the last segment; a torn tail there is cut first)."""
        if not existing:
            return 0
        first, path = existing[-1]
        return first + sum(1 for _ in _records(path, self.stats, last=True, skip_corrupt=self.skip_corrupt,
                                               repair=True))

    def _open(self, path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # the desk's ticks: the owner's alone
        self._fd, self._size, self._path = fd, os.fstat(fd).st_size, path
        self._checked_at = time.monotonic()

    def append(self, payload: bytes) -> int:
        """Write one record; returns its number. Raises LogWriteError, leaving the log as it was."""
        if len(payload) > MAX_RECORD_BYTES:
            raise LogWriteError(f"record of {len(payload)} bytes is larger than {MAX_RECORD_BYTES}")
        record = HEADER.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload
        with self._lock:
            if self._sync_error is not None:
                self.stats.append_errors += 1
                raise LogWriteError(f"{self.name} {self._path}: {self._sync_error}; {self._refused} until the "
                                    f"service restarts")
            try:
                if self._size >= self.segment_bytes:
                    self._roll()
                self._check_not_deleted()
                number = self._write_record(payload, record)
                self.stats.appended += 1
            except OSError as e:
                self.stats.append_errors += 1
                self._undo()
                raise LogWriteError(f"{self.name} {self._path}: {e.strerror or e}") from None
            if self.fsync == "always":
                self._sync_locked()
        return number

    def _write_record(self, payload: bytes, record: bytes | None = None) -> int:
        """One record at the end of the open segment (the lock held); returns its number. Raises OSError."""
        record = record or HEADER.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload
        written = os.write(self._fd, record)
        if written != len(record):
            raise OSError(f"short write: {written} of {len(record)} bytes (is the disk full?)")
        self._size += len(record)
        self._dirty = True
        number = self.next_record
        self.next_record += 1
        return number

    @property
    def latched(self) -> str | None:
        """Why every append is refused until a restart (a deleted file, a failed fsync), or None."""
        return None if self._sync_error is None else f"{self.name} {self._path}: {self._sync_error}"

    @property
    def _refused(self) -> str:
        """What a latched failure means for this log's writers."""
        if self.prefix == "answers":
            return "answers are still published, but not logged, and new ticks are refused"
        return "nothing more is accepted"

    def check(self) -> None:
        """The deleted-file check of every append, for an idle service (its heartbeat): a removed data
        directory is said within a heartbeat even while no tick arrives."""
        with self._lock:
            if self._sync_error is None and self._fd is not None:
                try:
                    self._check_not_deleted(force=True)
                except OSError:
                    pass  # latched and said; the next append is refused

    def _check_not_deleted(self, force: bool = False) -> None:
        """At most once a second: a segment file that was deleted (its data directory removed) still takes
        writes, into nothing a restart could read, and one whose directory was moved, into a place a restart
        does not read; from then on appends are refused, and the service says so."""
        now = time.monotonic()
        if not force and now - self._checked_at < DELETED_CHECK_S:
            return
        self._checked_at = now
        if os.fstat(self._fd).st_nlink == 0:
            self._latch("its file was deleted (was the data directory removed?)")
        if _identity(self.directory) != self._directory_id:  # moved or renamed away: the file lives on elsewhere
            self._latch(f"{self.directory} is no longer the directory it writes into (was the data directory moved "
                        f"or renamed?): a restart would read {self.directory}, not what is written")

    def _latch(self, why: str) -> None:
        """From now on every append is refused (until a restart), and stderr says why, once."""
        self._sync_error = why
        print(f"flashtick: {self.name} {self._path}: {why}; {self._refused} until the service restarts",
              file=sys.stderr, flush=True)
        raise OSError(why)

    def _undo(self) -> None:
        """Cut whatever part of a failed record reached the file."""
        try:
            os.ftruncate(self._fd, self._size)
        except OSError:
            pass

    def _group_commit(self) -> None:
        """The group-commit thread: every group_ms, fsync what was appended since the last one. It fsyncs a
        duplicate of the fd outside the lock, so appends (and a segment roll) never wait for the disk."""
        while not self._closing.wait(self.group_ms / 1e3):
            with self._lock:
                if not self._dirty or self._fd is None:
                    continue
                fd = os.dup(self._fd)
                self._dirty = False
            try:
                os.fsync(fd)
                self.stats.fsyncs += 1
            except OSError as e:
                self._sync_error = f"an fsync failed ({e.strerror or e})"
                print(f"flashtick: {self.name} {self._path}: {self._sync_error}; {self._refused} until the "
                      f"service restarts", file=sys.stderr, flush=True)
            finally:
                os.close(fd)

    def sync(self) -> None:
        """fsync now (what every policy does on close and on a segment roll)."""
        with self._lock:
            self._sync_locked()

    def _sync_locked(self) -> None:
        if self._fd is not None and self._dirty:
            os.fsync(self._fd)
            self.stats.fsyncs += 1
            self._dirty = False

    def _roll(self) -> None:
        self._sync_locked()
        if self.before_roll is not None:
            self.before_roll(self.next_record)
        old = self._fd
        if _identity(self.directory) != self._directory_id:  # removed (and perhaps made again, empty): never
            self._latch("its directory was removed")        # start a log there that a restart would take as whole
        # the new segment first: if it cannot be made (a read-only remount, no fds left) the old one stays
        # open and in use, and no closed descriptor number is kept to be written or closed later
        self._open(self.directory / _segment_name(self.next_record, self.prefix))
        os.close(old)
        if self.segment_start is not None:
            self._write_record(self.segment_start())
        self._retain()

    def _retain(self) -> None:
        """Retention, at open and at each roll; a failure is said and tried again at the next roll."""
        try:
            self._apply_retention()
        except OSError as e:
            print(f"flashtick: {self.name}: dropping old segments failed: {e}", file=sys.stderr, flush=True)

    def _apply_retention(self) -> None:
        existing = segments(self.directory, self.prefix)[:-1]  # never the segment being written
        sizes = {path: path.stat().st_size for _, path in existing}
        total = sum(sizes.values()) + self._size
        now = time.time()
        for _, path in existing:
            too_big = self.retention_bytes is not None and total > self.retention_bytes
            too_old = self.retention_s is not None and now - path.stat().st_mtime > self.retention_s
            if not (too_big or too_old):
                break
            total -= sizes[path]
            path.unlink()
            self.stats.segments_dropped += 1

    def close(self) -> None:
        self._closing.set()
        if self._syncer is not None:
            self._syncer.join()
            self._syncer = None
        with self._lock:
            if self._fd is not None:
                self._sync_locked()
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> TickLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read(directory: str | Path, start: int = 0, skip_corrupt: bool = False,
         stats: LogStats | None = None, prefix: str = "ticks") -> Iterator[tuple[int, bytes]]:
    """Every record from number ``start`` on, as (number, payload), oldest first."""
    stats = stats if stats is not None else LogStats()
    existing = segments(Path(directory), prefix)
    for i, (first, path) in enumerate(existing):
        following = existing[i + 1][0] if i + 1 < len(existing) else None
        if following is not None and following <= start:
            continue
        number = first
        # a segment appended to is repaired only where TickLog opens it (_count), before any append
        for payload in _records(path, stats, last=following is None, skip_corrupt=skip_corrupt,
                                repair=following is not None):
            if number >= start:
                yield number, payload
            number += 1


def read_unchanged(directory: str | Path, skip_corrupt: bool = False, stats: LogStats | None = None,
                   prefix: str = "ticks", skip_option: str = "log.skip_corrupt") -> Iterator[tuple[int, bytes]]:
    """Every record as ``read`` gives them, changing nothing on disk (a torn tail is left out, not cut; a segment
    whose damage was skipped is not rewritten), and consistent beside a writer appending meanwhile: the segments
    are opened before the first is read, so retention dropping one is not seen, and the last is read up to its last
    whole record, so the records yielded are the log's first N, as a restart would read them then."""
    stats = stats if stats is not None else LogStats()
    opened = _open_segments(Path(directory), prefix)
    try:
        for i, (first, path, handle) in enumerate(opened):
            number = first
            for payload in _records(path, stats, last=i == len(opened) - 1, skip_corrupt=skip_corrupt,
                                    data=handle.read(), skip_option=skip_option):
                yield number, payload
                number += 1
    finally:
        for _, _, handle in opened:
            handle.close()


def first_record(directory: str | Path, prefix: str = "ticks", tries: int = 5) -> tuple[int, bytes] | None:
    """(number, payload) of the oldest segment's first record, reading that record alone (a segment is up to
    ``segment_bytes``); None when there is no segment or that record is not whole and valid. Safe beside a writer
    whose retention drops segments meanwhile."""
    for _ in range(tries):
        existing = segments(Path(directory), prefix)
        if not existing:
            return None
        first, path = existing[0]
        try:
            with open(path, "rb") as handle:
                header = handle.read(HEADER.size)
                if len(header) < HEADER.size or HEADER.unpack(header)[0] != MAGIC:
                    return None
                payload = handle.read(min(HEADER.unpack(header)[1], MAX_RECORD_BYTES + 1))
        except FileNotFoundError:  # dropped between the listing and the open: the next one is the oldest now
            continue
        return (first, payload) if _damage(header + payload, 0) is None else None
    return None


def _open_segments(directory: Path, prefix: str, tries: int = 5) -> list[tuple[int, Path, Any]]:
    """(first record number, path, open file) of every segment: what a reader holds while retention may unlink
    the oldest (a segment gone between the listing and its open is listed again)."""
    for _ in range(tries):
        opened = []
        try:
            for first, path in segments(directory, prefix):
                opened.append((first, path, open(path, "rb")))
            return opened
        except FileNotFoundError:
            for _, _, handle in opened:
                handle.close()
    raise OSError(f"{directory}: its segments kept changing while they were opened ({tries} tries)")


def _records(path: Path, stats: LogStats, last: bool, skip_corrupt: bool, repair: bool = False,
             data: bytes | None = None, skip_option: str = "log.skip_corrupt") -> Iterator[bytes]:
    """The valid records of one segment. ``repair`` (with ``skip_corrupt``; never on a segment being appended to):
    once read to its end, a segment whose damage was skipped is rewritten with its valid records alone, so the
    next start reads it clean without ``skip_corrupt``. ``data``: the segment's bytes, read by a reader that
    changes nothing (read_unchanged): a torn tail is left in the file, only not yielded."""
    unchanged = data is not None
    data = path.read_bytes() if data is None else data
    offset = 0
    skipped: list[tuple[int, int]] = []  # (start, end) of each damaged region skipped, for a repair
    while offset < len(data):
        why = _damage(data, offset)
        if why is None:
            length = HEADER.unpack_from(data, offset)[1]
            yield data[offset + HEADER.size : offset + HEADER.size + length]
            offset += HEADER.size + length
            continue
        if last and (torn := _torn_tail(data, offset, why)) is not None:
            stats.torn_tails += 1
            if unchanged:  # (a running service may be writing that record now: it is whole on the next read)
                print(f"flashtick: log {path}: {torn} at byte {offset} ({len(data) - offset} bytes: a torn tail, or "
                      f"a record being written) is left out; the file is left as it is", file=sys.stderr, flush=True)
                break
            kept = _keep_cut_bytes(path, data[offset:])
            print(f"flashtick: log {path}: {torn} at byte {offset} (torn tail: {len(data) - offset} bytes) is cut away"
                  f"{kept}", file=sys.stderr, flush=True)
            with open(path, "r+b") as f:
                f.truncate(offset)
            data = data[:offset]
            break
        if not skip_corrupt:
            raise CorruptLog(path, offset, why)
        stats.corrupt_skipped += 1
        resume = _next_valid(data, offset + 1)
        records = data.count(MAGIC, offset, resume)  # each record that began there (a payload may hold one too)
        stats.corrupt_records += records
        # the ticks of those records are lost: the operator must hear which bytes, not only a counter
        print(f"flashtick: log {path}: skipped {resume - offset} damaged bytes at byte {offset} ({why}; "
              f"{'about ' * (records > 1)}{records} record{'s' * (records != 1)} lost; {skip_option})",
              file=sys.stderr, flush=True)
        skipped.append((offset, resume))
        offset = resume
    if repair and skipped:
        try:
            _rewrite(path, data, skipped)
        except OSError as e:  # the records read are good all the same: this start goes on, the next skips again
            print(f"flashtick: log {path}: could not rewrite it without its damaged bytes ({e.strerror or e}); "
                  f"the next start needs log.skip_corrupt again", file=sys.stderr, flush=True)


def _torn_tail(data: bytes, offset: int, why: str) -> str | None:
    """What the damage at ``offset`` of the last segment is when it is the tail a dying writer or host leaves, or
    None: damage with no valid record (magic, length, checksum) after it. A record cut short (the process died
    mid-append); bytes that are zero to the end of the file (the host died after the file grew but before its
    pages were written) or a record running into them; or any other damage: a last record whose page was partly
    written, or blocks allocated but never written that hold old data (ext4 data=writeback, a disk without
    power-loss protection). Cutting it loses no record a reader could read; damage with a valid record after it
    (accepted data that cutting would lose) is not a tail."""
    if _next_valid(data, offset + 1) != len(data):
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


def _keep_cut_bytes(path: Path, cut: bytes) -> str:
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


def _rewrite(path: Path, data: bytes, skipped: list[tuple[int, int]]) -> None:
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


def _damage(data: bytes, offset: int) -> str | None:
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


def _next_valid(data: bytes, offset: int) -> int:
    """The next offset holding a valid record (or the end)."""
    while (offset := data.find(MAGIC, offset)) != -1:
        if _damage(data, offset) is None:
            return offset
        offset += 1
    return len(data)
