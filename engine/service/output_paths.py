"""Output paths checked before any work. Against a command's inputs: `evaluate --points-out trades.csv` (tab
completion, shell history) replaced a shared tick file with a points table, exit 0. Every command that writes a
file names its outputs and inputs here and is refused, naming both, when an output would overwrite an input; and
when an output's name ends in a suffix other than its format's (`--points-out points.csv` and `backtest --out
answers.csv` wrote Parquet under a CSV name, which every CSV reader then fails on). And as paths: `backtest --out
DIR` (an existing folder) ran the whole backtest, then failed on the rename with a raw "[Errno 21]", leaving DIR.tmp
and DIR.parts/; an output that is a folder where a file goes (or the reverse), or that has no folder it can be
written in, is refused in a sentence before the model loads. So is an output that is a FIFO, a socket or a device:
the file is written under a temporary name and renamed onto it, so `backtest --out f.parquet` on a FIFO replaced the
FIFO with a file, exit 0, while its reader waited for ever. That temporary name (``write_atomically``: OUT.tmp) is
checked too: a FIFO there made `ticklog export --out OUT` wait for a reader for ever."""
from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NamedTuple

from engine.disk_full import DiskFull, said_if_disk_full
from engine.path_words import shown_path
from engine.text_files import ENCODING


class FileKind(NamedTuple):
    """What an output file is written as, and the names that say so."""
    name: str  # as a message names it: 'an image'
    suffixes: tuple[str, ...]
    listed: str  # the suffixes as a message lists them
    why: str = ""  # said after "not ... name"


PLOT_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg")  # matplotlib writes the format a plot's suffix names
IMAGE = FileKind("an image", PLOT_SUFFIXES, ".png, .svg, .pdf, .jpg or .jpeg")
# a table with nested columns (a backtest's answers) has no CSV form: these are written as Parquet only
PARQUET = FileKind("a Parquet file", (".parquet", ".pq"), ".parquet (or .pq)",
                   " (this option writes Parquet only, whatever the name says)")
TICK_TABLE = FileKind("a tick file", (".parquet", ".pq", ".csv"), ".parquet (or .pq) or .csv")


class Output(NamedTuple):
    option: str  # as the user gave it: '--points-out', or '--out (its scores beside it)'
    path: Path | None  # None: the option was not given
    is_dir: bool = False  # a directory written into (train --out, backtest's OUT.parts/): no input may lie in it
    kind: FileKind | None = None  # what the file is written as (None: a name of any suffix)
    example: str = ""  # a file name to suggest in it when a file's path names a directory ('answers.parquet')
    makes_parent: bool = False  # the command makes the folders missing above it (backtest's --out): none need exist
    # a directory's files written through a temporary name (write_atomically: train's model.safetensors), checked
    # with the directory: a FIFO at one's temporary name was refused only when the run saved, after its work
    atomic_files: tuple[str, ...] = ()


class OutputOverInput(ValueError):
    """An output path is (or, for a directory, holds) one of the command's input files."""


def input_files(paths: list[Path]) -> list[Path]:
    """Every file ``paths`` stand for: a directory's files (a folder of tick files, a checkpoint, a data directory),
    a replay list and the files it names, a pattern that names no file and the files it matches (as the reader
    expands them: connectors/replay_entries.py's replay_files), a file as it is. Paths that do not exist are kept: the
    command itself says they are missing."""
    found: list[Path] = []
    for path in paths:
        found.append(path)
        if path.is_dir():  # every file, not only the tick files a replay reads: a checkpoint's are inputs too
            found.extend(p for p in path.rglob("*") if p.is_file())
        elif path.suffix.lower() in (".yaml", ".yml") and path.is_file():
            found.extend(files_read(path))
        elif not path.exists():  # first: input_paths imports polars, which a command of existing files never waits on
            from connectors.input_paths import is_pattern

            if is_pattern(path):
                found.extend(files_read(path))
    return found


def files_read(path: Path | str) -> list[Path]:
    """The files a replay of ``path`` reads (a folder's tick files, a pattern's matches, a replay list's files:
    connectors/replay_entries.py's replay_files), or the path itself where they cannot be listed (a queries or
    config YAML, a path gone, a list or pattern the command refuses itself, saying why)."""
    from connectors.replay_entries import replay_files  # here: the CLI imports this module at start, before polars

    try:
        return replay_files([Path(path)])
    except (OSError, ValueError):
        return [Path(path)]


def check_outputs_against(outputs: list[Output], inputs: list[Path]) -> None:
    """Raise (a ValueError naming both) for an output that is, or as a folder holds, one of ``inputs``; then for one
    named with a suffix other than what it is written as, or that the command could only fail to write at its end."""
    refuse_outputs_over_inputs(outputs, inputs)
    check_output_paths(outputs)  # (first: `--out results` is a folder, before it is a name without .parquet)
    refuse_misnamed_outputs(outputs)


def refuse_outputs_over_inputs(outputs: list[Output], inputs: list[Path]) -> None:
    """Raise OutputOverInput when an output file is an input file (the same path after links are followed, or the
    same file by another name), or an output directory is or holds an input."""
    files = input_files(inputs)
    for output in outputs:
        target = output.path.expanduser().resolve()
        for source in files:
            resolved = source.expanduser().resolve()
            if output.is_dir:
                clash = resolved == target or resolved.is_relative_to(target)
            else:
                clash = resolved == target or _same_file(resolved, target)
            if clash:
                what = "holds" if output.is_dir and resolved != target else "is"
                raise OutputOverInput(f"{output.option} {output.path} {what} the input {source}: writing there would "
                                      f"destroy that input; give another path")


def refuse_misnamed_outputs(outputs: list[Output]) -> None:
    """Raise ValueError when an output's name does not end in a suffix of what it is written as."""
    for output in outputs:
        if output.kind is not None and output.path.suffix.lower() not in output.kind.suffixes:
            raise ValueError(f"{output.option} {output.path}: not {output.kind.name} name{output.kind.why}; give a "
                             f"file ending in {output.kind.listed}")


class OutputPathUnusable(ValueError):
    """An output path the command could not write at its end: a directory where a file goes, a file where a folder
    goes, no folder to write it in, a folder this user may not write in."""


def check_output_paths(outputs: list[Output]) -> None:
    """Raise OutputPathUnusable, in a sentence naming the option, for an output the command would fail to write only
    after its work."""
    for output in outputs:
        option, path = output.option, output.path
        special = _special_kind(path)
        if output.is_dir:
            if path.exists() and not path.is_dir():
                raise OutputPathUnusable(f"{option} {shown_path(path)} is {special or 'a file'}: give a directory")
            for name in output.atomic_files:
                if (problem := temporary_name_problem(path / name)) is not None:
                    raise OutputPathUnusable(f"{option} {problem}")
        elif special is not None:
            raise OutputPathUnusable(f"{option} {shown_path(path)} is {special}, not a regular file: the output is "
                                     f"written whole "
                                     f"under a temporary name, then renamed onto the path, so it cannot be streamed "
                                     f"into a pipe or a device (a reader would wait for ever); give a file's path and "
                                     f"read the file once the command is done")
        elif path.is_dir():
            such_as = f"a file name, such as {path / output.example}" if output.example else "another --out"
            raise OutputPathUnusable(f"{option} {shown_path(path)} is a directory: give {such_as}")
        elif (problem := temporary_name_problem(path)) is not None:
            raise OutputPathUnusable(f"{option} {problem}")
        makes_parent = output.makes_parent or output.is_dir  # made with the folders missing above it
        if (problem := parent_problem(path, makes_parent)) is not None:
            raise OutputPathUnusable(f"{option} {shown_path(path)}: {problem}")
        folder = next(p for p in (path.parent, *path.parent.parents) if p.exists()) if makes_parent else path.parent
        if not os.access(folder, os.W_OK | os.X_OK):
            raise OutputPathUnusable(f"{option} {shown_path(path)}: {_why_unwritable(folder)}")


def parent_problem(path: Path, makes_parent: bool) -> str | None:
    """Why ``path`` cannot be written for the folder it is in: a file where a folder of its path should be (said so
    alike by every output: `afile/p.parquet` was "no directory afile" for one and "afile is a file" for another), or,
    for an output whose folders are not made (`makes_parent`), no such folder; None when neither."""
    from engine.service.private_dirs import file_in_the_way  # light: no torch

    if (file := file_in_the_way(path.parent)) is not None:
        return f"{file} is a file, not a folder, so {path} cannot be written under it"
    if not makes_parent and not path.parent.is_dir():
        return f"no directory {path.parent} to write it in"
    return None


def _why_unwritable(folder: Path) -> str:
    """Why nothing can be written in ``folder``, os.access having said so: a read-only mount (a container's read-only
    root, a read-only NFS export) was reported as "this user may not write", which sent root looking at permissions
    (review224 #7)."""
    if os.statvfs(folder).f_flag & os.ST_RDONLY:
        return f"{folder} is on a read-only file system; give a path on a writable one"
    return f"this user may not write in {folder}; give a path in a folder of yours"


def temporary_name(path: Path) -> Path:
    """Where ``write_atomically`` writes ``path`` before renaming it into place."""
    return path.with_name(path.name + ".tmp")


def temporary_name_problem(path: Path) -> str | None:
    """Why ``path`` cannot be written through its temporary name: something other than a regular file is there (a
    FIFO: opening it to write waits for a reader for ever; a link: the write goes where it points, and the rename
    puts the link in the output's place; a folder: the write fails after the work). A regular file there is what an
    interrupted write left: overwritten. None when the name is free."""
    tmp = temporary_name(path)
    try:
        mode = tmp.lstat().st_mode
    except OSError:  # nothing there (or no folder: the checks of the path itself say so)
        return None
    if stat.S_ISREG(mode):
        return None
    kind = "a symbolic link" if stat.S_ISLNK(mode) else "a directory" if stat.S_ISDIR(mode) else _special_kind(tmp)
    return (f"{path}: {tmp} is {kind}, not a regular file; the output is written under that temporary name and then "
            f"renamed onto {path.name}, so nothing is written while it is there: remove it (or give another path)")


def write_atomically(path: Path, write: Callable[[Path], Any],
                     before_rename: Callable[[Path], Any] = lambda _: None) -> None:
    """Write to a temporary name, flush to disk, rename: a reader sees the old file or the whole new one. Raises
    OutputPathUnusable, writing nothing, when the temporary name is taken by other than a regular file.
    `before_rename` is given the whole temporary file just before the rename (to record it: see AnswerParts)."""
    if (problem := temporary_name_problem(path)) is not None:
        raise OutputPathUnusable(problem)
    tmp = temporary_name(path)
    # a write that failed otherwise (polars' EFBIG: "Invalid thrift") left half a file under that name; not once
    # whole: `before_rename` may have recorded it so (a backtest's --resume renames it into place)
    with _removed_if_raised(tmp), said_if_refused(path, tmp), said_if_disk_full(path, tmp):
        write(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
    before_rename(tmp)
    os.replace(tmp, path)


@contextmanager
def _removed_if_raised(tmp: Path) -> Iterator[None]:
    """``tmp`` removed when the body raises (a Ctrl-C too), the error going on as it came."""
    try:
        yield
    except BaseException:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


@contextmanager
def staged_file(path: Path | None) -> Iterator[Path | None]:
    """A file the body writes under ``path``'s temporary name, renamed onto ``path`` only when the body returns, and
    removed when it raises: an output that must not outlive a run that failed after writing it (`train
    --points-out`, whose points were left beside a checkpoint that was never put in place). None: no such output."""
    if path is None:
        yield None
        return
    tmp = temporary_name(path)
    with suppress(OSError):  # a killed run's (check_output_paths refused anything there but a regular file)
        tmp.unlink()
    with _removed_if_raised(tmp):
        yield tmp
    if tmp.exists():  # (a run that scores nothing writes no points)
        os.replace(tmp, path)


def write_text_atomically(path: Path, text: str) -> None:
    """A text output (UTF-8) written as every output is (write_atomically): a full disk or a folder that refuses
    the write is said naming the file. `train` wrote config.json, evaluation.json and TRAINING.md with a plain
    write: a full disk said "[Errno 28] No space left on device", no file named, where the weights were named."""
    write_atomically(path, lambda tmp: tmp.write_text(text, encoding=ENCODING))


# what each errno of a folder that refuses a write (after the checks before the run let it through: a file system
# remounted read-only mid-run, its permissions changed) is said as
REFUSED = {errno.EROFS: "its file system is read-only", errno.EACCES: "permission denied",
           errno.EPERM: "the operation is not permitted"}


class OutputRefused(OSError):
    """An output the file system refused to take (read-only, no permission), said naming the output."""


@contextmanager
def said_if_refused(path: Path, written: Path) -> Iterator[None]:
    """A write of ``path`` (through ``written``, removed if made) refused by the file system raised as OutputRefused
    in one line naming ``path``: it said "[Errno 30] Read-only file system: 'PATH.tmp'", the temporary name."""
    try:
        yield
    except OSError as error:
        if error.errno not in REFUSED or isinstance(error, (DiskFull, OutputRefused)):
            raise
        with suppress(OSError):
            written.unlink(missing_ok=True)
        refused = OutputRefused(f"cannot write {path}: {REFUSED[error.errno]}")
        refused.errno = error.errno
        raise refused from None


def _special_kind(path: Path) -> str | None:
    """What ``path`` is (a link followed) when it is there and neither a regular file nor a folder: 'a FIFO (named
    pipe)', 'a socket', a device; None otherwise."""
    try:
        mode = path.stat().st_mode
    except OSError:  # nothing there (or not reachable: the folder checks below say why)
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else
            "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else
            "an unknown kind of file")


def _same_file(a: Path, b: Path) -> bool:
    """One file under two names (a hard link)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist yet: not the same
        return False


def check_plot_path(option: str, path: Path) -> None:
    """A plot's name is refused before the run, not by matplotlib after it: a suffix it cannot write, no directory
    to write it in, or a directory in its place."""
    refuse_misnamed_outputs([Output(option, path, kind=IMAGE)])
    if path.is_dir():
        raise ValueError(f"{option} {shown_path(path)} is a directory: give the image's file name, e.g. "
                         f"{shown_path(path / 'calibration.png')}")
    if (problem := parent_problem(path, makes_parent=False)) is not None:
        raise ValueError(f"{option} {shown_path(path)}: {problem}")
