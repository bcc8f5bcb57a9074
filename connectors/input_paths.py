"""Folders and file patterns given as replay inputs, read as the files they stand for (`expanded`). A folder
(`hourly/`) is read as its tick files, those in the folders inside it too, in the order of their paths, as a zip
archive is read as its members; a path holding `*`, `?` or `[` that names no file (a pattern quoted past the
shell, or written in a config or a Makefile, which no shell expands) is read as the files it matches, sorted.
Either is said in a note; a folder without tick files, or a pattern that matches nothing, is refused saying so.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path
from typing import Any, Mapping, NamedTuple

from connectors.archives import is_zip
from connectors.databento_jobs import job_files, job_files_skipped
from connectors.delta_log import current_files
from connectors.file_scans import READ_TYPES, is_tick_file
from connectors.lobster_files import books_beside_messages, books_skipped
from engine.path_words import shown_path

PATTERN_MARKS = re.compile(r"[*?[]")  # what makes a path a shell pattern
SHOWN = 3  # files named in a note, at each end of the list


class Expanded(NamedTuple):
    items: list[Any]  # the items, each folder and pattern replaced by its files
    notes: list[str]  # a note for each folder and pattern
    folder_texts: dict[Path, Path]  # the `.txt` files found in folders (-> the folder given): a readme among them
    # is skipped, as a zip's is


def expanded(items: list[Any]) -> Expanded:
    """`items` (paths, (path, map) pairs, {"path": ..., "columns": ...} entries) with each folder and each pattern
    that names no file replaced by the files it stands for, each keeping its item's map; and a note for each."""
    out, notes, texts = [], [], {}
    for item in items:
        path = item_path(item)
        found = None if path is None else _files_of(path)
        if found is None:
            out.append(item)
            continue
        files, note = found
        out.extend(_with_path(item, file) for file in files)
        notes.append(note)
        if path.is_dir():
            texts.update((file, path) for file in files if file.suffix.lower() == ".txt")
    if books := books_beside_messages(p for item in out if (p := item_path(item)) is not None):  # given in a list
        out = [item for item in out if item_path(item) not in books]
        notes.append(books_skipped(books))
    return Expanded(out, notes, texts)


def item_path(item: Any) -> Path | None:
    """The path an item names (a path, a (path, map) pair, a {"path": ...} entry); None for any other item."""
    if isinstance(item, (str, Path)):
        return Path(item)
    if isinstance(item, tuple) and item:
        return Path(item[0])
    return Path(item["path"]) if isinstance(item, Mapping) and "path" in item else None


def _with_path(item: Any, path: Path) -> Any:
    if isinstance(item, tuple):
        return (path, *item[1:])
    return {**item, "path": path} if isinstance(item, Mapping) else path


def _files_of(path: Path) -> tuple[list[Path], str] | None:
    """The files a folder or a pattern stands for, with the note that says so; None for any other path (a file,
    or a path that is missing: planning says so)."""
    if path.is_dir():
        files, skipped = folder_files(path)
        lake = [p for p in skipped if lake_metadata(path / p, path)]
        other = [p for p in skipped if p not in lake]
        books = books_beside_messages(files)  # (as LOBSTER's archive unpacks)
        job = job_files(files)  # (a Databento batch job's folder)
        files = [file for file in files if file not in books and file not in job]
        said = f"; skipped {_listed(other)}: not tick files" if other else ""
        said += f"; {lake_note(lake)}" if lake else ""
        said += f"; {books_skipped(books)}" if books else ""
        said += f"; {job_files_skipped(job)}" if job else ""
        files, delta_notes = _delta_current(path, files)
        said += "".join(f"; {note}" for note in delta_notes)
        order = " in the order of their paths" if files[1:] else ""
        return files, f"{path}: a folder, read as its {_counted(files)}{order} " \
                      f"({_listed([f.relative_to(path) for f in files])}){said}"
    if not is_pattern(path):
        return None
    matches = sorted(Path(m) for m in glob.glob(str(path.expanduser()), recursive=True))
    if not matches:
        where = "" if path.expanduser().is_absolute() else f" (in {shown_path(Path.cwd())})"
        # quoted as a shell takes it back: pasted unquoted, the shell would expand the pattern itself
        raise FileNotFoundError(f"no file matches {shown_path(path)}{where}: a pattern that names no file is expanded "
                                f"here as a shell would (* any name, ? one character, [abc] one of these, ** folders "
                                f"inside)")
    fixed = Path(*_leading(path.expanduser().parts))  # the folder the pattern starts in
    # (`lake/**/*.parquet` matches a Delta log's checkpoints too)
    files = [file for match in matches for file in (folder_files(match)[0] if match.is_dir() else [match])
             if not (file.is_relative_to(fixed) and lake_metadata(file, fixed))]
    files, delta_notes = _delta_current(path, files)
    if books := books_beside_messages(files):
        files = [file for file in files if file not in books]
        delta_notes.append(books_skipped(books))
    return files, f"{path}: a pattern, read as the {_counted(files)} it matches{', sorted' if files[1:] else ''} " \
                  f"({_listed([f.relative_to(fixed) if f.is_relative_to(fixed) else f for f in files])})" + \
                  "".join(f"; {note}" for note in delta_notes)


def _delta_current(given: Path, files: list[Path]) -> tuple[list[Path], list[str]]:
    """A folder's or a pattern's files less those no Delta table holds now (read from its log), with its notes;
    a given path that leaves no file (a table emptied by a DELETE) is refused."""
    current, notes = current_files(files)
    if files and not current:
        raise ValueError(f"{given}: {notes[0]}; no tick file is left to read")
    return current, notes


def is_pattern(path: Path) -> bool:
    """Whether ``path`` is read as a pattern: it holds `*`, `?` or `[` and names no file (a file so named is read
    as itself)."""
    return not path.exists() and PATTERN_MARKS.search(str(path)) is not None


def _leading(parts: tuple[str, ...]) -> list[str]:
    """A path's parts before its first that holds a pattern mark."""
    return list(parts[:next(i for i, part in enumerate(parts) if PATTERN_MARKS.search(part))])


# A data lake's metadata beside its Parquet files, by name: Delta Lake's commit log (JSON lines and checkpoint
# Parquet, read as ticks it stopped every command on a Delta table, review284 #2), Spark's streaming sink log and
# unfinished writes, Hudi's timeline, Spark's and Databricks' commit markers. Iceberg's `metadata/` folder is one
# only when it holds a table's `*.metadata.json` (a folder of that name may hold anything).
LAKE_FOLDERS = frozenset({"_delta_log", "_spark_metadata", "_temporary", ".hoodie"})
LAKE_MARKERS = re.compile(r"^(_SUCCESS|_committed_.*|_started_.*|_common_metadata|_metadata|.*\.crc)$")


def lake_metadata(path: Path, top: Path) -> bool:
    """Whether a file found under ``top`` is a data lake's metadata (its log, its markers), no table's rows."""
    parts = path.relative_to(top).parts
    if LAKE_MARKERS.match(parts[-1]) or any(part in LAKE_FOLDERS for part in parts[:-1]):
        return True
    return any(part == "metadata" and any((top.joinpath(*parts[:at + 1])).glob("*.metadata.json"))
               for at, part in enumerate(parts[:-1]))


def lake_note(skipped: list[Path]) -> str:
    """The one note on a lake's metadata left out (``skipped``, relative paths), by folder or marker."""
    held = sorted({next((f"{part}/" for part in p.parts[:-1] if part in LAKE_FOLDERS or part == "metadata"),
                        p.name) for p in skipped})
    return f"skipped {_listed(held)} ({_counted(skipped)}): a data lake's metadata, not ticks"


def folder_files(folder: Path) -> tuple[list[Path], list[Path]]:
    """A folder's tick files and zip archives, in the folders inside it too, sorted by path, and the files left out
    (a readme, a `.DS_Store`). Dotfiles and dot-folders (`.git/`) and macOS's `__MACOSX/` are no one's data: left
    out unsaid; a data lake's metadata (`_delta_log/`, `_SUCCESS`) is left out, said in one note by `_files_of`.
    A folder holding no tick file is refused, naming what it holds."""
    held = folder_held(folder)
    files = [p for p in held if (is_tick_file(p) or is_zip(p)) and not lake_metadata(p, folder)]
    if not files:
        raise no_tick_folder(folder, held)
    return files, [p.relative_to(folder) for p in held if p not in files]


def no_tick_folder(folder: Path, held: list[Path], empty: tuple[Path, ...] = ()) -> ValueError:
    """The refusal of a folder whose files (``held``) hold no tick file; ``empty``: its `.txt` files, read as tick
    files by their suffix, found to hold no data rows (a one-line readme)."""
    said = f"; {_listed([p.relative_to(folder) for p in empty])}: no data rows" if empty else ""
    holds = f"only {_listed([p.relative_to(folder) for p in held])}{said}" if held else "nothing"
    return ValueError(f"{folder} is a folder holding no tick file ({holds}); replay reads {READ_TYPES}: give a "
                      f"folder or files of these")


def folder_held(folder: Path) -> list[Path]:
    """A folder's files, in the folders inside it too, sorted by path; dotfiles, dot-folders (`.git/`) and macOS's
    `__MACOSX/` left out."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not any(
        part.startswith(".") or part == "__MACOSX" for part in p.relative_to(folder).parts))


def _counted(files: list[Path]) -> str:
    return "one file" if len(files) == 1 else f"{len(files)} files"


def _listed(paths: list[Path]) -> str:
    """Up to SHOWN paths at each end of a list, the count between them."""
    if len(paths) <= 2 * SHOWN:
        return ", ".join(map(str, paths))
    return f"{', '.join(map(str, paths[:SHOWN]))}, ... {len(paths) - 2 * SHOWN} more ..., " \
           f"{', '.join(map(str, paths[-SHOWN:]))}"
