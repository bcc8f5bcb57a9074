"""What a start checks and claims when it opens a data directory, before its logs: that the folder is one (not a
folder of the user's files) that no other user can write to, the lock that keeps it to one service, meta.json (the
model and codec the logs were written with: a restart must use the same), the epoch of its answer seqs, the
retention limits against the size of the filesystem, and what a start says of a part it cannot use."""

from __future__ import annotations

import fcntl
import grp
import json
import os
import pwd
import secrets
import stat
import sys
from pathlib import Path
from typing import Any

from engine.service.answer_settings import ANSWER_SETTINGS, RESOLVED_AT_START, settings_changed, shown
from engine.service.config import ConfigError, LogSection
from engine.service.private_dirs import private
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


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f} MiB"


# A data directory's own parts that a start makes before meta.json (the lock, then the epoch and logs, should
# meta.json's write fail): a folder holding only these is one a start began; anything else there is the user's
MADE_BEFORE_META = frozenset({"lock", "epoch", "ticks", "answers"})


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


def take_lock(path: Path) -> Any:
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
    handle.truncate(0)
    handle.write(f"pid {os.getpid()}\n")
    handle.flush()
    return handle


def read_epoch(path: Path) -> str:
    """The directory's epoch: made at its first start, the same at every later one, so a client that kept seqs can
    tell this directory's answers from another's (a service without one makes a new epoch at each start)."""
    try:
        return read_text(path).strip()
    except FileNotFoundError:
        epoch = new_epoch()
        with open(path, "w", encoding=ENCODING, opener=private) as f:
            f.write(epoch + "\n")
        return epoch


def new_epoch() -> str:
    """A fresh epoch id: 16 hex digits, random."""
    return secrets.token_hex(8)


# What a change of a meta.json key means, said when a restart is refused for it (the others name themselves)
_META_CHANGES = {"text_encoding": "the same ticks now encode to other tokens: this flashtick writes or tokenizes a "
                                  "tick's line otherwise than the one that wrote the directory (the encoding before "
                                  "the colon, e.g. a SentencePiece tokenizer's lines as continuations; the digest "
                                  "after it covers number formatting), so replaying its logged ticks would build "
                                  "other sessions than its live run had",
                "ingest_price_offset": "its logged ticks hold prices shifted at ingest by the model's training "
                                       "--price-offset, `health`'s ingest_price_offset: under another offset its "
                                       "sessions and `ticklog export` would read them at other levels"}


# meta.json keys a restart may change, said at the start rather than refused: the logged ticks replay into the same
# tokens and sessions, only the numbers computed from them differ (an operator comparing answers across the restart
# must know why they do); the change is recorded, so the next start says nothing. Key -> (config key, what differs)
_META_NOTED = {"dtype": ("model.dtype", "that precision's rounding"),
               "linear_weights": ("model.weights", "the linears' rounding (their weight format, engine/models/"
                                                   "linear.py)")}
SETTINGS = "settings"  # meta.json's answer_settings.ANSWER_SETTINGS, noted a key at a time as _META_NOTED's are


def _resolved_kept(before: dict[str, Any], written_by: dict[str, Any]) -> dict[str, Any]:
    """meta.json's settings as rewritten: a setting resolved where the engine runs (RESOLVED_AT_START) that this
    start writes unresolved (null: a sharded front door before its shards said theirs) keeps the value recorded, so
    a rewrite for another key never erases it ({} when there are no settings to merge)."""
    if not isinstance(before.get(SETTINGS), dict) or SETTINGS not in written_by:
        return {}
    kept = {key: before[SETTINGS][key] for key in RESOLVED_AT_START
            if written_by[SETTINGS].get(key, 0) is None and before[SETTINGS].get(key) is not None}
    return {SETTINGS: written_by[SETTINGS] | kept}


def check_meta(path: Path, written_by: dict[str, Any]) -> None:
    if not path.is_file():
        with open(path, "w", encoding=ENCODING, opener=private) as f:
            f.write(json.dumps(written_by, indent=2) + "\n")
        return
    before = json.loads(read_text(path))
    # a key the directory lacks was added by a later version: recorded now, not a difference
    changes = [k for k in sorted(set(before) | set(written_by)) if k in before and before[k] != written_by.get(k)]
    noted = [k for k in changes if (k in _META_NOTED or k == SETTINGS) and k in written_by]
    differ = [k for k in changes if k not in noted]
    if differ:
        changed = ", ".join(f"{k}: {before.get(k)!r} -> {written_by.get(k)!r}" for k in differ)
        why = "".join(f" ({k}: {_META_CHANGES[k]})" for k in differ if k in _META_CHANGES)
        raise ConfigError(f"data directory {path.parent} was written by another model, weights or codec ({changed})"
                          f"{why}; its sessions and answers belong to that one. Use another --data-dir, move this one "
                          f"away, or restart with what wrote it. To carry its ticks over to this model: `flashtick "
                          f"ticklog export {path.parent} --out ticks.parquet`, then `flashtick feed replay "
                          f"ticks.parquet` into this service on another --data-dir (docs/durability.md, Reading the "
                          f"tick log back)")
    # (the dtype's note covers the linears' format it brings: one cause, one line)
    said = [(_META_NOTED[k][0], before[k], written_by[k], _META_NOTED[k][1])
            for k in noted if k != SETTINGS and not (k == "linear_weights" and "dtype" in noted)]
    if SETTINGS in noted:
        said += [(key, then, now, ANSWER_SETTINGS[key])
                 for key, then, now in settings_changed(before[SETTINGS], written_by[SETTINGS])]
    for setting, then, now, differ_by in said:
        print(f"flashtick: note: data directory {path.parent}: its logged answers were computed under "
              f"{setting} {shown(then)}, this start computes under {shown(now)}: answers after the "
              f"restart (those it owes included) may differ from the logged ones by {differ_by}",
              file=sys.stderr, flush=True)
    if set(written_by) - set(before) or noted:
        path.write_text(json.dumps(before | written_by | _resolved_kept(before, written_by), indent=2) + "\n",
                        encoding=ENCODING)
    if "text_encoding" in written_by and "text_encoding" not in before:
        print(f"flashtick: note: data directory {path.parent} does not say how its text codec encoded ticks (written "
              f"before meta.json recorded text_encoding): its logged ticks are taken as encoded the way this flashtick "
              f"encodes them ({written_by['text_encoding']}), which is recorded now. A directory written before the "
              f"text codec wrote SentencePiece lines as continuations and floats without exponents (docs/model.md) "
              f"may replay into other tokens than its live run had: start it over on a fresh --data-dir if so",
              file=sys.stderr, flush=True)
