"""Which files differ between a finished backtest's record and this run's (run_record: each file's path, size,
modification time and digest, and how it is read), in words: a folder of daily files that gained a day is refused
by `backtest --resume` naming the day's file (review382 #10: "its files, readings differ" named none), and, where
files were only added, how to answer the new days alone.
"""

from __future__ import annotations

from typing import Any, NamedTuple

SHOWN = 3  # files named a kind of change; more are counted


class FileChanges(NamedTuple):
    added: list[str]
    removed: list[str]
    changed: list[str]  # the same path, other bytes (digest, else size)
    read_otherwise: list[str]  # the same bytes, read another way (its column map, stream, time unit)

    def text(self) -> str:
        """`1 file added: /d/AAPL/05032024.csv; 2 files changed: ...`; '' when none differs."""
        said = [_named(paths, verb) for paths, verb in ((self.added, "added"), (self.removed, "removed"),
                                                        (self.changed, "changed (other bytes)"),
                                                        (self.read_otherwise, "read otherwise"))
                if paths]
        return "; ".join(said)

    def only_added(self) -> bool:
        return bool(self.added) and not (self.removed or self.changed or self.read_otherwise)


def file_changes(then: dict[str, Any], now: dict[str, Any]) -> FileChanges:
    """The files of two run records (``then``: the finished run's, ``now``: this one's) that differ."""
    was, are = _by_path(then.get("files")), _by_path(now.get("files"))
    read_was, read_now = _by_path(then.get("readings"), "file"), _by_path(now.get("readings"), "file")
    shared = [p for p in are if p in was]
    changed = [p for p in shared if _bytes_of(was[p]) != _bytes_of(are[p])]
    read_otherwise = [p for p in shared if p not in changed and p in read_was and p in read_now
                      and read_was[p] != read_now[p]]
    return FileChanges([p for p in are if p not in was], [p for p in was if p not in are], changed, read_otherwise)


def new_days_hint() -> str:
    """What to do where files were only added (a new day in the folder)."""
    return ("to answer only the new files, backtest them (or the folder with --from the first new day) to another "
            "--out: each stream's session then starts there, so its answers differ from one run over every file, "
            "the day's first ones most (docs/replay.md, A folder that grows a day at a time)")


def _by_path(entries: Any, key: str = "path") -> dict[str, Any]:
    """A record's list of per-file entries by path (empty where the record holds none)."""
    if not isinstance(entries, list):
        return {}
    return {str(e[key]): e for e in entries if isinstance(e, dict) and key in e}


def _bytes_of(entry: dict[str, Any]) -> Any:
    """What says a file's bytes: its digest where recorded, else its size (a file's mtime alone moves on a copy)."""
    return entry.get("digest") or entry.get("size")


def _named(paths: list[str], verb: str) -> str:
    files = "file" if len(paths) == 1 else "files"
    more = f", and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return f"{len(paths)} {files} {verb}: {', '.join(paths[:SHOWN])}{more}"
