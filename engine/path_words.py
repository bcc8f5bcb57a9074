"""How a user's paths are read and said: `~` expanded once where a command line is parsed or a Python entry point
(`run_backtest`, `ServiceConfig`) is called (`user_path`, `user_item`), a path in an
error quoted as a shell would take it back (`shown_path`: a name with a space is copy-pasted whole), one wording for
a file that is not there (`file_not_found`), one for an input file the OS refused to read (`cannot_read`), and the
OS's reason in words (`os_reason`), not Python's `[Errno 2]`.
In the engine core so that connectors (a replay file, a replay list) and the service say paths alike.
"""

from __future__ import annotations

import errno
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def user_path(text: str | os.PathLike[str]) -> Path:
    """An argparse type for every path option and positional file: ``text`` with a leading `~` or `~user` expanded,
    as a shell would have: a job runner passes `--out '~/x.parquet'` unexpanded, and a literal `./~` folder made in
    the working directory is an `rm -rf ~` waiting to happen. A `~user` with no such user is left as written."""
    return Path(os.path.expanduser(text))


def user_item(item: Any) -> Any:
    """A replay input with its path's `~` expanded as `user_path` does: a path, a (path, map) pair or a
    {"path": ...} entry, as a Python caller gives them to `run_backtest`; any other item as it is."""
    if isinstance(item, (str, os.PathLike)):
        return user_path(item)
    if isinstance(item, tuple) and item and isinstance(item[0], (str, os.PathLike)):
        return (user_path(item[0]), *item[1:])
    if isinstance(item, Mapping) and isinstance(item.get("path"), (str, os.PathLike)):
        return {**item, "path": user_path(item["path"])}
    return item


def user_path_text(text: str) -> str:
    """`user_path` for an argument that is a path or a word (`evaluate builtin`), kept as text."""
    return os.path.expanduser(text)


def map_or_user_path(text: str) -> str:
    """An argparse type for `--columns`: an inline map (`ts=time,...`) as given, a YAML file's path with its `~`
    expanded (a map names columns with `=`; a path that starts with `~` holds none)."""
    return text if "=" in text else os.path.expanduser(text)


def shown_path(path: str | Path) -> str:
    """``path`` as an error names it: quoted shell-style where it needs it (`'/data/Börse Frankfurt/a.csv'`), as is
    where it does not (`/data/ticks.csv`), so that it can be copy-pasted into a command line."""
    return shlex.quote(str(path))


def os_reason(error: OSError) -> str:
    """The OS's reason for ``error`` in words, `no such file or directory`, without Python's `[Errno 2]` and the
    path it repeats."""
    reason = error.strerror or str(error) or type(error).__name__
    return reason[:1].lower() + reason[1:]


# what to do about an input file (a config, a queries file, a data file) the OS refused to read, by its errno
_NOT_READ_HINTS = {errno.EACCES: "this user may not read it; give a copy this user can read, or have its owner "
                                 "`chmod a+r` it",
                   errno.EISDIR: "give a file"}
_NOT_READ_HINTS[errno.EPERM] = _NOT_READ_HINTS[errno.EACCES]


def cannot_read(error: OSError, what: str = "") -> str:
    """The one wording of an input file (``what``: `query file`, or none) the OS refused to read, every input alike,
    the file named first by the caller: `cannot read: permission denied (this user may not read it; ...)`, not
    Python's `[Errno 13] Permission denied: 'PATH'` (review442 #2)."""
    hint = _NOT_READ_HINTS.get(error.errno, "")
    return f"cannot read{f' {what}' if what else ''}: {os_reason(error)}" + (f" ({hint})" if hint else "")


class NotRead(OSError):
    """An input file the OS refused to read (``cannot_read``'s wording after its name), its ``errno`` and
    ``filename`` set as the OS's own error has them."""

    def __init__(self, path: str | Path, error: OSError) -> None:
        super().__init__(error.errno, f"{shown_path(path)}: {cannot_read(error)}", str(path))

    def __str__(self) -> str:
        return str(self.strerror)


class NotFound(FileNotFoundError):
    """A file a command (or a Python caller) was given that is not there: a FileNotFoundError with ``errno``
    (ENOENT) and ``filename`` set, as the OS's own has them for code that reads them (review354 #13), said in the
    one wording alone (no `[Errno 2]` before it, no repr of the name after it)."""

    def __init__(self, message: str, path: str | Path) -> None:
        super().__init__(errno.ENOENT, message, str(path))

    def __str__(self) -> str:
        return str(self.strerror)


def file_not_found(what: str, path: str | Path, hint: str = "") -> FileNotFoundError:
    """The one wording of a file a command was given that is not there, every command alike: `WHAT not found:
    PATH`, with the folder a relative path was looked for in, and ``hint`` (`; ...`) after it."""
    where = "" if Path(path).is_absolute() else f" (in {shown_path(Path.cwd())})"
    tilde = " (its `~` names no user here, so it was read as written)" if str(path).startswith("~") else ""
    return NotFound(f"{what} not found: {shown_path(path)}{where}{tilde}{hint}", path)
