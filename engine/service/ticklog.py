"""TickLog: the append-only, segmented on-disk log of every accepted ingest item.

The service appends an item *before* it reaches a session, so a process that dies loses nothing it accepted: a
restart replays the log. Its records are self-delimiting and checked, in segment files (log_format.py: the on-disk
format); a new segment starts past ``segment_bytes``. Durability is the ``fsync`` policy: ``always`` (fsync every
append), ``group`` (a background thread fsyncs every ``group_ms`` while appends are pending, so the caller never
waits on the disk: a host crash loses at most that window, a killed process loses nothing, since every append is a
completed write(2)) or ``never`` (the OS decides). Retention drops whole old segments by total size or age.

A failed append (disk full, a file size limit, an I/O error) raises ``LogWriteError`` and leaves the log as it was
before the append: the caller refuses the item. Reading the log back, torn tails and damaged records included, is
log_reading.py's (log_damage.py: what it does with damage).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from engine.quoting import quoted
from engine.service.log_format import MAX_RECORD_BYTES, framed, segment_name, segments
from engine.service.log_reading import segment_records
from engine.service.log_stats import LogStats

FsyncPolicy = Literal["always", "group", "never"]


class LogWriteError(OSError):
    """An append failed; nothing of it is in the log."""


# The tick log's own records beside the ticks (durability.py and segment_starts.py write them; log_replay.py and
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
    # False: an append never rolls; the owner calls roll_if_full where what before_roll writes is what the log holds
    # (the answer log: its checkpoint is its cache, which holds a step's answers before their records are written)
    roll_on_append: bool = True
    # the payload of each new segment's first record (what a reader needs of the segments retention may drop)
    segment_start: Callable[[], bytes] | None = None
    skip_corrupt: bool = False  # counting the last segment's records at open skips damaged ones (as its reader will)
    # whether retention may drop the segments before the one at this path (whose start record says what they held):
    # False keeps them and every later one (their ticks' answers are not logged yet: durability.py); None: always
    droppable: Callable[[Path], bool] | None = None
    stats: LogStats = field(default_factory=LogStats)

    def __post_init__(self) -> None:
        if self.fsync not in ("always", "group", "never"):
            raise ValueError(f'fsync must be "always", "group" or "never", got {quoted(self.fsync)}')
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
        self.latched_kind: str | None = None  # what latched it, in a word: moved, deleted, removed (fsync: failed)
        if existing:
            self._open(existing[-1][1])
        else:
            self._open(self.directory / segment_name(self.next_record, self.prefix))
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
        return first + sum(1 for _ in segment_records(path, self.stats, last=True,
                                                      skip_corrupt=self.skip_corrupt, repair=True))

    def _open(self, path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # the desk's ticks: the owner's alone
        self._fd, self._size, self._path = fd, os.fstat(fd).st_size, path
        # the bytes of the open segment's start record (0: none written by this process): a segment holds
        # segment_bytes of records past it, so a start record near segment_bytes never rolls the log every tick
        self._start_bytes = 0
        self._checked_at = time.monotonic()

    def append(self, payload: bytes, *more: bytes) -> int:
        """Write one record, or with ``more`` several in one write(2) and one segment (a reader finds all of them, or
        after a torn tail the first ones only: the answer log's pairs, answer_log.py); returns the last one's number.
        Raises LogWriteError, leaving the log as it was."""
        payloads = (payload, *more)
        for each in payloads:
            if len(each) > MAX_RECORD_BYTES:
                raise LogWriteError(f"record of {len(each)} bytes is larger than {MAX_RECORD_BYTES}")
        records = b"".join(map(framed, payloads))
        with self._lock:
            if self._sync_error is not None:
                self.stats.append_errors += 1
                raise LogWriteError(f"{self.name} {self._path}: {self._sync_error}; {self._refused} until the "
                                    f"service restarts")
            try:
                if self.roll_on_append and self._full():
                    self._roll()
                self._check_not_deleted()
                number = self._write_records(records, len(payloads))
                self.stats.appended += len(payloads)
            except OSError as e:
                self.stats.append_errors += 1
                self._undo()
                raise LogWriteError(f"{self.name} {self._path}: {e.strerror or e}") from None
            if self.fsync == "always":
                self._sync_locked()
        return number

    def _full(self) -> bool:
        return self._size - self._start_bytes >= self.segment_bytes  # (records past the start record)

    def roll_if_full(self) -> None:
        """A new segment if the open one is full (a log made with ``roll_on_append`` False). Raises OSError where
        the checkpoint or the new segment cannot be written: the open segment stays in use, tried again next time."""
        with self._lock:
            if self._sync_error is None and self._fd is not None and self._full():
                self._roll()

    def _write_records(self, records: bytes, count: int = 1) -> int:
        """``count`` records, ``framed`` and joined, at the end of the open segment in one write (the lock held);
        returns the last one's number. Raises OSError."""
        written = os.write(self._fd, records)
        if written != len(records):
            raise OSError(f"short write: {written} of {len(records)} bytes (is the disk full?)")
        self._size += len(records)
        self._dirty = True
        self.next_record += count
        return self.next_record - 1

    def append_closing(self, payload: bytes) -> int:
        """Write a record that closes what this file holds already (a message's end record, after the items of it
        logged here), even once appends are refused: a directory moved away still holds this file, which a restart
        on the moved directory reads, and there the record keeps the message's accepted items (message_ends.py).
        Raises LogWriteError, leaving the log as it was."""
        with self._lock:
            if self._fd is None:
                raise LogWriteError(f"{self.name} {self._path}: closed")
            try:
                number = self._write_records(framed(payload))
                self.stats.appended += 1
                if self.fsync == "always":
                    self._sync_locked()
            except OSError as e:
                self.stats.append_errors += 1
                self._undo()
                raise LogWriteError(f"{self.name} {self._path}: {e.strerror or e}") from None
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
            self._latch("its file was deleted (was the data directory removed?)", "deleted")
        if _identity(self.directory) != self._directory_id:  # moved or renamed away: the file lives on elsewhere
            self._latch(f"{self.directory} is no longer the directory it writes into (was the data directory moved "
                        f"or renamed?): a restart would read {self.directory}, not what is written", "moved")

    def _latch(self, why: str, kind: str) -> None:
        """From now on every append is refused (until a restart), and stderr says why, once; ``kind`` names it in a
        word (``latched_kind``)."""
        self._sync_error, self.latched_kind = why, kind
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
                self._sync_error, self.latched_kind = f"an fsync failed ({e.strerror or e})", "fsync"
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
            self._latch("its directory was removed", "removed")  # start a log there that a restart takes as whole
        # the new segment first: if it cannot be made (a read-only remount, no fds left) the old one stays
        # open and in use, and no closed descriptor number is kept to be written or closed later
        self._open(self.directory / segment_name(self.next_record, self.prefix))
        os.close(old)
        if self.segment_start is not None:
            before = self._size
            self._write_records(framed(self.segment_start()))
            self._start_bytes = self._size - before
        self._retain()

    def retain(self) -> None:
        """Retention now (a restart's, once it knows what ``droppable`` needs), under the lock."""
        with self._lock:
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
        following = [path for _, path in existing[1:]] + [self._path]
        for (_, path), after in zip(existing, following):
            too_big = self.retention_bytes is not None and total > self.retention_bytes
            too_old = self.retention_s is not None and now - path.stat().st_mtime > self.retention_s
            if not (too_big or too_old) or (self.droppable is not None and not self.droppable(after)):
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
