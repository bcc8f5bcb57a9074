"""Files that cannot be read at all (a download cut short, bytes damaged, an API's error saved as the day, a
Parquet file with no footer): `UnreadableFile`, raised naming the file and why. One such file refuses a replay by
default, as a file one asked for that cannot be read must not pass unnoticed; in a replay of many (a month of daily
files), `skip_bad_files` (the CLI's --skip-bad-files) leaves each out instead, by name, at the start and again at
the end, and the run record keeps them (review382 #2: one truncated day of 36 refused every run over the folder).
A leaf module: the readers that raise it import nothing of the replay."""

from __future__ import annotations

from connectors.cautions import Caution

SKIP_OPTION = "--skip-bad-files"


class UnreadableFile(ValueError):
    """A file that cannot be read (truncated, corrupt, an error page): its message names the file and says why."""


def with_skip_hint(error: UnreadableFile, files: int) -> UnreadableFile:
    """The refusal of one unreadable file among `files` given, saying how to replay the others without it."""
    if files < 2:
        return error
    return UnreadableFile(f"{error}; or, to replay the other files without it, give {SKIP_OPTION} (FileReplay's "
                          f"skip_bad_files=True): each file that cannot be read is then left out, said by name")


def skipped_said(error: UnreadableFile) -> Caution:
    """The caution on an unreadable file left out (said at the start and again at the run's end)."""
    return Caution(f"{error}. Skipped ({SKIP_OPTION}): the other files replay without it")
