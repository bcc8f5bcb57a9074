"""Folders made for what is the user's alone (a data directory's ticks and answers, a CURVE secret key): 0700;
and the opener that makes such a folder's new files 0600 (`private`).

Kept apart from durability.py and auth.py, which both use it, so that `flashtick keygen` loads neither torch nor
the engine for it. `private` lives here rather than in ticklog.py because the files it opens are the data
directory's others (the answer log's checkpoint, the kept queries, the lock, the epoch and meta.json), not the
tick log's."""

from __future__ import annotations

import os
from pathlib import Path


def file_in_the_way(path: Path) -> Path | None:
    """The part of ``path`` (itself, or the nearest folder above it that exists) that is a file, not a folder; None
    when there is none. mkdir and open say only "[Errno 20] Not a directory" of a path that runs through a file."""
    for part in (path, *path.parents):
        if part.exists():
            return None if part.is_dir() else part
    return None


def make_private_dirs(path: Path) -> None:
    """``path`` and each missing folder above it, made 0700 (what mkdir's ``parents`` makes is 0755 by the umask: a
    default $XDG_STATE_HOME, ~/.local/state, that this makes first is the user's alone, as the XDG base directory
    spec asks). A folder that exists already is the user's: left as it is. A path that runs through a file is
    refused in plain words (NotADirectoryError naming the file)."""
    if (file := file_in_the_way(path)) is not None:
        under = "" if file == path else f", so {path} cannot be made under it"
        raise NotADirectoryError(f"{file} is a file, not a folder{under}")
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    for folder in reversed(missing):  # the outermost first
        folder.mkdir(mode=0o700, exist_ok=True)  # (exist_ok: another process may make it meanwhile)


def private(path: str, flags: int) -> int:
    """An ``open(..., opener=private)`` that makes a new file 0600, as the segments are: what a data directory holds
    is the owner's alone (the umask would make it 0644)."""
    return os.open(path, flags, 0o600)
