"""Output paths checked against a command's inputs before any work: `evaluate --points-out trades.csv` (tab
completion, shell history) replaced a shared tick file with a points table, exit 0. Every command that writes a
file names its outputs and inputs here and is refused, naming both, when an output would overwrite an input; and
when an output's name ends in a suffix other than its format's (`--points-out points.csv` and `backtest --out
answers.csv` wrote Parquet under a CSV name, which every CSV reader then fails on)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple


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


class OutputOverInput(ValueError):
    """An output path is (or, for a directory, holds) one of the command's input files."""


def input_files(paths: list[Path]) -> list[Path]:
    """Every file ``paths`` stand for: a replay list and the files it names, a directory's files (a checkpoint,
    a data directory), a file as it is. Paths that do not exist are kept: the command itself says they are missing."""
    found: list[Path] = []
    for path in paths:
        found.append(path)
        if path.is_dir():
            found.extend(p for p in path.rglob("*") if p.is_file())
        elif path.suffix.lower() in (".yaml", ".yml") and path.is_file() and _is_replay_list(path):
            from connectors.replay import replay_list

            found.extend(Path(entry["path"]) for entry in replay_list(path))
    return found


def _is_replay_list(path: Path) -> bool:
    from connectors.replay import replay_list  # here: the CLI imports this module at start, before polars

    try:
        replay_list(path)
    except (OSError, ValueError):  # a queries or config YAML, or a list the command will refuse itself
        return False
    return True


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
        raise ValueError(f"{option} {path} is a directory: give the image's file name, e.g. {path / 'calibration.png'}")
    if not path.parent.is_dir():
        raise ValueError(f"{option} {path}: no directory {path.parent} to write it in")
