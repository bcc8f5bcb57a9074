"""What a start checks and claims when it opens a data directory, before its logs: that the folder is one (not a
folder of the user's files) that no other user can write to, the lock that keeps it to one service, meta.json (the
model and codec the logs were written with: a restart must use the same), the epoch of its answer seqs, the
retention limits against the size of the filesystem, and what a start says of a part it cannot use."""

from __future__ import annotations

import errno
import fcntl
import grp
import os
import pwd
import secrets
import stat
from pathlib import Path
from typing import Any, NamedTuple

from engine.disk_full import DISK_FULL, file_size_limit, space_left
from engine.service.config import ConfigError, LogSection
from engine.service.log_lines import utc_stamp
from engine.service.private_dirs import private
from engine.service.release import this_release
from engine.text_files import ENCODING, read_text


def retention_past_filesystem(root: Path, config: LogSection) -> str | None:
    """Why the logs' retention cannot work on the filesystem that holds ``root``, if it cannot: the limits add up past
    its size, so the disk fills (and ticks are refused, log_unavailable) before retention drops anything."""
    limits = {key: getattr(config, key) for key in ("retention_bytes", "answers_retention_bytes")
              if getattr(config, key) is not None}
    try:
        disk = os.statvfs(root)
    except OSError:
        return None
    size = disk.f_blocks * disk.f_frsize
    if not limits or sum(limits.values()) <= size:
        return None
    named = " + ".join(f"log.{key} {_mib(value)}" for key, value in limits.items())
    return (f"{named} exceed{'s' if len(limits) == 1 else ''} the size of the filesystem holding {root} "
            f"({_mib(size)}): it fills before retention drops a segment, and ticks are then refused (log_unavailable); "
            f"lower them to fit, with room to spare")


def retention_below_segments(config: LogSection) -> list[str]:
    """Each retention limit below its log's segment size, said: retention never drops the segment in use, so the
    log then keeps one segment and a bit more, not the limit (review293: accepted without a word)."""
    pairs = (("retention_bytes", "segment_bytes"), ("answers_retention_bytes", "answers_segment_bytes"))
    return [f"log.{limit} {getattr(config, limit):,} is below log.{segment} {getattr(config, segment):,}: retention "
            f"never drops the segment in use, so the log keeps a whole segment past the limit; set log.{limit} to "
            f"a few segments" for limit, segment in pairs
            if getattr(config, limit) is not None and getattr(config, limit) < getattr(config, segment)]


SMALL_SEGMENT_BYTES = 64 << 10  # below it a segment holds a handful of ticks: surely a unit slip for a service


def small_segments(config: LogSection) -> list[str]:
    """Each log's segment size below SMALL_SEGMENT_BYTES, said (review392 #5: `segment_bytes: 10` made a file per
    tick, each starting with every held stream's state, and nothing said so). Said, not refused: tests and a
    short experiment roll segments on purpose."""
    defaults = LogSection()
    return [f"log.{key} {getattr(config, key):,} makes a segment every few ticks, each a file that starts with every "
            f"stream's state: many files a day and a slower restart; is it a unit slip? (the default is "
            f"{getattr(defaults, key):,}, {_mib(getattr(defaults, key))})"
            for key in ("segment_bytes", "answers_segment_bytes") if getattr(config, key) < SMALL_SEGMENT_BYTES]


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


# A data directory's own parts that a start makes before meta.json (the lock, then the epoch and logs, should
# meta.json's write fail): a folder holding only these is one a start began; anything else there is the user's
MADE_BEFORE_META = frozenset({"lock", "epoch", "epoch.tmp", "ticks", "answers", "written_with.json",
                              "written_with.json.tmp",
                              "meta.json.tmp"})


def refuse_the_users_folder(root: Path) -> None:
    """ConfigError for an existing folder with no meta.json that holds files a data directory does not (`--data-dir
    .` beside a config, a queries file, tick files): the service writes queries.yaml and its state there, which
    would replace the user's file of that name, and its logs and lock would lie among the user's files. An empty
    folder (made for it) is taken, as is one a data directory's start began (MADE_BEFORE_META)."""
    if not root.is_dir() or (root / "meta.json").exists():
        return
    try:
        theirs = sorted(p.name for p in root.iterdir() if p.name not in MADE_BEFORE_META)
    except OSError:  # (unreadable: the lock's open says so, as for any folder it cannot use)
        return
    if theirs:
        named = ", ".join(theirs[:5]) + (f", ... ({len(theirs)} entries)" if len(theirs) > 5 else "")
        raise ConfigError(f"log.dir {root}: an existing folder that is no flashtick data directory (no meta.json): it "
                          f"holds {named}; the service would write queries.yaml, its logs and state among them "
                          f"(replacing a file of such a name): give a new or empty folder, e.g. {root / 'flashtick'}")


# What another user who can write to the data directory can do to it (rename its files away, put theirs in place)
PLANTED = ("replace its queries.yaml, tick and answer logs or lock with their own, and a start serves the queries and "
           "replays the ticks they planted")


def others_access(root: Path) -> str | None:
    """What other users of this host can do to the existing data directory ``root``, said at the start (a note or a
    warning line), or None when nothing. Writable by every user: refused (ConfigError), as ssh refuses such a home:
    a planted queries.yaml was registered by the next start, and a swapped tick log would be replayed as the
    market's. The sticky bit does not save it: it stops the replacing of files there, not the planting of those a
    start makes later (queries.yaml.tmp). Writable by a group with other members: a warning naming the group (a
    deliberate team share, or a umask of 002). Listable: a note (the names show; every file is 0600)."""
    st = root.stat()
    mode = stat.S_IMODE(st.st_mode)
    if mode & stat.S_IWOTH:
        how = ("every user of this host can add files to it: the sticky bit keeps them from replacing the files "
               "there, not from planting one a start writes and renames into place (queries.yaml.tmp), so a start can "
               "serve queries they planted" if mode & stat.S_ISVTX else
               f"every user of this host can write to it: any of them can {PLANTED}")
        raise ConfigError(f"log.dir {root}: {how} (mode {mode:o}); `chmod 700 {root}` keeps it to you, or give "
                          f"another data directory")
    group = _shared_group(st.st_gid, st.st_uid)
    if mode & stat.S_IWGRP and group is not None:
        return (f"warning: data directory {root} can be written by the members of group {group} (mode {mode:o}): any "
                f"of them can {PLANTED}; `chmod g-w {root}` keeps that to you")
    read_bits = stat.S_IROTH | (stat.S_IRGRP if group is not None else 0)
    if not mode & read_bits:
        return None
    who = "other users of this host" if mode & stat.S_IROTH else f"the members of group {group}"
    # the service makes every file 0600: one readable was made so by hand (or by a flashtick before 0600)
    try:
        readable = sorted(p.name for p in root.iterdir() if p.is_file() and p.stat().st_mode & read_bits)
    except OSError:  # (unlistable by its own user: the lock's open says so)
        readable = []
    held = f"and can read {', '.join(readable)}" if readable else "not what its files hold (each is the owner's alone)"
    return (f"note: data directory {root} can be listed by {who} (mode {mode:o}): they see its files' names, {held}; "
            f"`chmod 700 {root}` hides the names too")


def _shared_group(gid: int, owner: int) -> str | None:
    """The name of group ``gid`` when a user other than ``owner`` may belong to it; None for the owner's own private
    group (Debian's and Ubuntu's user groups: the user's name, the user's primary group, no listed member but the
    user), whose write bit a umask of 002 sets and which lets no one else in."""
    try:
        group, user = grp.getgrgid(gid), pwd.getpwuid(owner)
    except KeyError:  # (a gid or uid the host cannot name: another user may well hold it)
        return str(gid)
    private = group.gr_name == user.pw_name and user.pw_gid == gid and set(group.gr_mem) <= {user.pw_name}
    return None if private else group.gr_name


def unusable_part(root: Path, error: OSError) -> str:
    """What a start says of a data directory part it cannot use (``error`` names the path)."""
    where = Path(error.filename) if error.filename else root
    if isinstance(error, (FileExistsError, NotADirectoryError)) and where.is_file():
        what = f"{where} is a file where the data directory keeps a folder"
    elif isinstance(error, IsADirectoryError):
        what = f"{where} is a folder where the data directory keeps a file"
    else:
        what = f"{where}: {error.strerror or error}"
    return (f"log.dir {root}: {what} (a data directory holds ticks/, answers/, queries.yaml, meta.json, ...: move "
            f"what is in the way, or give another --data-dir)")


# what the lock file says once its service stopped (DataDir.close): a start that finds "pid N, flashtick ..." without
# it follows a run that was killed, crashed or lost power (review351 #15: such a restart looked like any other)
CLEAN_STOP = "stopped cleanly"
# what it says after the pid while its service runs, before the release: a release before 0.2.0 wrote "pid N" alone,
# and no CLEAN_STOP, so its stops, clean or not, read alike (review400 #4)
RUNNING = ", flashtick "
# what it says after the release once a second signal ended the run during its stop (the drain cut short, as the
# docs offer): no crash, though the next start replays as after one (review412 #12: it was said killed or crashed)
ENDED_BY_SIGNAL = "ended by a second"
ROOM_CHECK_BYTES = 4096  # a start writes this much into the directory (then removes it) before replaying the log


class DataDirFull(Exception):
    """The data directory's filesystem cannot take a write at the start (full, a quota, a file size limit): said in
    one line, before the replay, with its own exit status (exit_codes.DATA_DIR_FULL), so a supervisor stops
    restarting a service that could only refuse every tick."""


class DataDirLock(NamedTuple):
    handle: Any  # the lock file, held (flock) until the service stops
    # what it said before this start: "" (new), "pid N, flashtick 0.2.0 ..." (an unclean stop), "pid N stopped
    # cleanly ...", "pid N" (a release before 0.2.0: not known)
    previous: str


def take_lock(path: Path) -> DataDirLock:
    """One service per data directory: two appending to one log would interleave and corrupt it."""
    handle = open(path, "a+", encoding=ENCODING, opener=private)
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise ConfigError(f"data directory {path.parent} is in use by {holder}; stop it, or give this service "
                          f"its own --data-dir (or --no-log)") from None
    handle.seek(0)
    previous = handle.read().strip()
    try:
        _rewrite(handle, f"pid {os.getpid()}{RUNNING}{this_release()}")
    except OSError as e:
        handle.close()
        if e.errno in DISK_FULL:
            raise DataDirFull(_full_words(path.parent, e)) from None
        raise
    return DataDirLock(handle, previous)


def release_lock(lock: DataDirLock, clean: bool | None = True) -> None:
    """The lock let go: marked stopped cleanly (a stop, a start that refused the directory), or, ``clean`` False,
    as it was before this start (a start that failed before it replayed anything), or, None, as this run's, running
    (a service that failed: the next start reads it as a crash)."""
    if clean is not None:
        try:
            _rewrite(lock.handle, f"pid {os.getpid()} {CLEAN_STOP} at {utc_stamp()}" if clean else lock.previous)
        except OSError:  # (a full disk: the next start reads this stop as unclean, which only costs a log line)
            pass
    lock.handle.close()


def mark_ended_by_signal(lock: DataDirLock, signal_name: str) -> None:
    """The lock marked as ended by a second ``signal_name`` during the stop, just before the process ends by it (the
    flock goes with the process), so the next start says so rather than a crash."""
    try:
        _rewrite(lock.handle, f"pid {os.getpid()}{RUNNING}{this_release()}, {ENDED_BY_SIGNAL} {signal_name} at "
                              f"{utc_stamp()}")
    except (OSError, ValueError):  # (a full disk, or the lock let go already: the next start says a crash, or nothing)
        pass


def unclean_stop(previous: str) -> str | None:
    """What a start says of the run before it, whose lock said ``previous``: None after a clean stop (or none: a
    new directory); a crash (counted by a log pipeline) when that run marked no clean stop; a note, no crash, when a
    second signal ended its stop; and when it may have been a release that marks none (``previous`` names no
    release: one before 0.2.0), that it is not known (review400 #4: the first start after an upgrade reported a
    crash)."""
    if not previous or CLEAN_STOP in previous:
        return None
    if ENDED_BY_SIGNAL in previous:
        return (f"flashtick: note: recovering after a stop cut short: the previous run ({previous}) did not finish "
                f"its drain, as an operator or a supervisor chose, not a crash; every tick it accepted is replayed "
                f"from the tick log, and the answers it owed are computed")
    if RUNNING not in previous:
        return (f"flashtick: note: the previous run ({previous}) names no release in the data directory's lock: a "
                f"flashtick before 0.2.0 marks no clean stop there, so whether it stopped cleanly is not known (after "
                f"a 0.2.0 build of 2026-12-06, which marked its clean stops alone, it did not); every tick it "
                f"accepted is replayed from the tick log")
    return (f"flashtick: WARNING: recovering after an unclean stop: the previous run ({previous}) did not stop cleanly "
            f"(killed, crashed or lost power); every tick it accepted is replayed from the tick log")


def _rewrite(handle: Any, text: str) -> None:
    handle.truncate(0)
    handle.write(text + "\n" if text else "")
    handle.flush()


def check_room(root: Path) -> None:
    """Raises DataDirFull when ``root`` cannot take a small write (ROOM_CHECK_BYTES, synced): a start on a full
    disk said a bare "[Errno 28] No space left on device" after replaying the whole log, at every restart
    (review351 #4)."""
    probe = root / ".room-check"
    try:
        with open(probe, "wb", opener=private) as f:
            f.write(b"\0" * ROOM_CHECK_BYTES)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        if e.errno in DISK_FULL:
            raise DataDirFull(_full_words(root, e)) from None
        raise
    finally:
        probe.unlink(missing_ok=True)


def _full_words(root: Path, error: OSError) -> str:
    cause = f"{DISK_FULL[error.errno]} ({file_size_limit()})" if error.errno == errno.EFBIG else \
        f"{DISK_FULL[error.errno]} ({space_left(root) or 'free space unknown'})"
    return (f"log.dir {root}: a {ROOM_CHECK_BYTES:,}-byte write failed before replaying the tick log: {cause}; "
            f"the service would refuse every tick (log_unavailable): free space there (or move log.dir, lower "
            f"log.retention_bytes), then start it again")


def read_epoch(path: Path, renew: bool = False) -> str:
    """The directory's epoch: made at its first start, the same at every later one, so a client that kept seqs can
    tell this directory's answers from another's (a service without one makes a new epoch at each start); made
    anew when ``renew`` (a start with other model files than the logged answers came from)."""
    if not renew:
        try:
            return read_text(path).strip()
        except FileNotFoundError:
            pass
    epoch = new_epoch()
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding=ENCODING, opener=private) as f:
        f.write(epoch + "\n")
    temporary.replace(path)  # (a start killed mid-write leaves the old epoch whole)
    return epoch


def new_epoch() -> str:
    """A fresh epoch id: 16 hex digits, random."""
    return secrets.token_hex(8)
