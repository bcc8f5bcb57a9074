"""A Databento batch job's download: its data files beside the four files every job ships, `metadata.json` (the
job's request), `symbology.json` (its symbols' instrument ids), `condition.json` (each day's data quality) and
`manifest.json` (its files and their hashes). Those hold no ticks: in a folder or a zip archive beside the data they
are skipped by name with one note (review390 #7: the job's folder and its zip were refused on `condition.json`'s
columns, with the advice to map them)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Iterable

JOB_FILES = frozenset({"metadata.json", "symbology.json", "condition.json", "manifest.json"})


def job_files(paths: Iterable[Path]) -> list[Path]:
    """The job's own files among ``paths`` (a folder's or an archive's): those named as Databento's, where a folder
    holds two or more of them (a job ships all four; a lone `metadata.json` may be anyone's) and a file besides."""
    by_folder: dict[Path, list[Path]] = defaultdict(list)
    for path in paths:
        by_folder[path.parent].append(path)
    named = {folder: [p for p in files if p.name.lower() in JOB_FILES] for folder, files in by_folder.items()}
    return [p for folder, files in named.items() if 2 <= len(files) < len(by_folder[folder]) for p in files]


def job_files_skipped(files: list[Path]) -> str:
    """The clause of a note on a job's own files left out."""
    return (f"skipped {', '.join(sorted(p.name for p in files))}: a Databento batch job's files beside its data "
            f"(its request, symbology, data quality and manifest), not ticks")
