"""Folders made for what is the user's alone (a data directory's ticks and answers, a CURVE secret key): 0700.

Kept apart from durability.py and auth.py, which both use it, so that `flashtick keygen` loads neither torch nor
the engine for it."""

from __future__ import annotations

from pathlib import Path


def make_private_dirs(path: Path) -> None:
    """``path`` and each missing folder above it, made 0700 (what mkdir's ``parents`` makes is 0755 by the umask: a
    default $XDG_STATE_HOME, ~/.local/state, that this makes first is the user's alone, as the XDG base directory
    spec asks). A folder that exists already is the user's: left as it is."""
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    for folder in reversed(missing):  # the outermost first
        folder.mkdir(mode=0o700, exist_ok=True)  # (exist_ok: another process may make it meanwhile)
