"""A backtest's answers on disk while it runs: part files and a manifest, so an interrupted run keeps what
it computed and `flashtick backtest --resume` continues from the last checkpoint (engine/service/backtest.py).

    OUT.parts/part-000001.parquet ...   answers, unscored, in the order they were made
    OUT.parts/progress.json             the run's key, the replay position the parts cover, the parts' names

The parts are plain Parquet files: `pl.read_parquet("answers.parquet.parts/*.parquet")` reads an unfinished
run's answers so far.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from queries.cache import Answer

PARTS_SUFFIX = ".parts"  # answers.parquet -> answers.parquet.parts/
KEY_WORDS = {  # what each part of a run's key stands for, in the words of the command line
    "files": "files, or ways of reading them (a column map, --preset, --tz, --date, --ts-unit)",
    "file_sizes_and_times": "file contents (sizes or modification times)",
    "queries": "queries (--queries)", "config": "config (--model, --config: the model or engine settings)",
    "batch_ms": "--batch-ms", "max_ticks": "--max-ticks", "context_roll_rule": "context roll rule"}
# a file map's keys that are options of their own on the command line (the others come from --columns or --preset)
MAP_OPTIONS = {"tz": "--tz", "date": "--date", "ts_unit": "--ts-unit", "ts_format": "--ts-format",
               "names": "--csv-names", "price_offset": "--price-offset", "price_format": "--price-format",
               "zero_bid": "--zero-bid",
               "hours": "--hours", "preset": "--preset", "streams": "--streams", "from": "--from", "to": "--to"}
SHOWN_FILES = 5  # files named in a refusal; the rest counted
MANIFEST = "progress.json"
RAW_SCHEMA = {"query": pl.String, "stream": pl.String, "topic": pl.String, "seq": pl.Int64, "ticks": pl.Int64,
              "data_ts": pl.Int64, "answer": pl.String, "expected": pl.Float64, "nll": pl.Float64,
              "text": pl.String, "probs": pl.String, "model_probs": pl.String}  # model_probs: before adaptation


def write_atomically(path: Path, write: Callable[[Path], Any]) -> None:
    """Write to a temporary name, flush to disk, rename: a reader sees the old file or the whole new one."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


class AnswerParts:
    """A backtest's answers so far: ``OUT.parts/part-NNNNNN.parquet`` and ``progress.json``.

    A part is written whole (temporary name, fsync, rename) before the manifest that lists it, so a run
    killed at any moment leaves a manifest naming only whole parts, and the replay position
    (`consumed`: ticks taken from the files) those parts cover, and each topic's last seq (`last_seq`), from
    which a resumed run's answer cache continues.
    """

    def __init__(self, out: Path, key: dict[str, Any], manifest: dict[str, Any] | None,
                 readings: list | None = None, threads: int | None = None) -> None:
        self.dir = out.with_name(out.name + PARTS_SUFFIX)
        self.key = key
        self.readings = _as_json(readings or [])  # how each file is read: not in the key, said when it differs
        # torch's CPU threads: not in the key (how fast, not what), but they move the answers' last float bits, so
        # a resume at another count is told that it will not be byte-identical to an uninterrupted run
        self.threads = threads
        self.threads_before: int | None = (manifest or {}).get("threads")
        manifest = manifest or {"key": key, "consumed": 0, "parts": [], "answers": 0, "last_seq": {}}
        self.consumed: int = manifest["consumed"]
        self.resumed_at = self.consumed
        self.parts: list[str] = manifest["parts"]
        self.answers: int = manifest["answers"]
        self.last_seq: dict[str, int] = manifest["last_seq"]

    @classmethod
    def open(cls, out: Path, key: dict[str, Any], resume: bool, readings: list | None = None,
             threads: int | None = None) -> AnswerParts:
        """The run's parts; `readings` ((file, its column map) per file, FileReplay.readings) are kept beside the
        key, so a resume with other files or options can say which (a checkpoint without them says less)."""
        directory = out.with_name(out.name + PARTS_SUFFIX)
        manifest_path = directory / MANIFEST
        if not resume:
            if directory.exists():
                raise FileExistsError(f"{directory} holds an unfinished backtest; add --resume (resume=True from "
                                      f"Python) to continue it, or delete it to start over")
            directory.mkdir(parents=True)
            return cls(out, key, None, readings, threads)
        if not directory.exists() and out.is_file():  # a finished run: nothing to continue, and not to replace
            raise FileExistsError(f"{out} holds a finished backtest (no checkpoint in {directory}): the run there is "
                                  f"complete, so there is nothing to resume; to run it again, remove {out} or "
                                  f"give another --out")
        if not manifest_path.is_file():  # nothing to resume: start afresh (so a script may always pass --resume)
            print(f"flashtick backtest: no checkpoint in {directory}; starting from the beginning", file=sys.stderr)
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            return cls(out, key, None, readings, threads)
        try:
            manifest = json.loads(manifest_path.read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{manifest_path}: unreadable checkpoint ({e}); delete {directory} to start over") from None
        changed = [k for k in key if manifest.get("key", {}).get(k) != _as_json(key[k])]
        if changed:
            upgrade = " (written by a flashtick that rolled sessions elsewhere)" if "context_roll_rule" in changed else ""
            files = {"files", "file_sizes_and_times"} & set(changed)
            said = _files_differ(manifest, key, _as_json(readings or [])) if files else []
            named = ", ".join(said + [KEY_WORDS.get(k, k) + _key_values(manifest.get("key", {}).get(k), key[k])
                                      for k in changed if k not in files])
            raise ValueError(f"{directory} was written by a backtest with different {named}{upgrade}; "
                             f"resume with the same files, queries, config and options, or delete it to start over")
        for stray in set(p.name for p in directory.iterdir()) - set(manifest["parts"]) - {MANIFEST}:
            (directory / stray).unlink()  # written after the last checkpoint: those answers come again
        return cls(out, key, manifest, readings, threads)

    def save(self, answers: list[Answer], consumed: int) -> None:
        """Checkpoint: the answers since the last one as a part, then the manifest at `consumed`."""
        if answers:
            rows = [_raw_row(a) for a in answers]
            name = f"part-{len(self.parts) + 1:06d}.parquet"
            write_atomically(self.dir / name, pl.DataFrame(rows, schema=RAW_SCHEMA, orient="row").write_parquet)
            self.parts.append(name)
            self.answers += len(rows)
            for row in rows:
                self.last_seq[row[2]] = row[3]
        self.consumed = consumed
        manifest = {"key": self.key, "consumed": consumed, "parts": self.parts, "answers": self.answers,
                    "last_seq": self.last_seq, "readings": self.readings, "threads": self.threads}
        write_atomically(self.dir / MANIFEST, lambda p: p.write_text(json.dumps(manifest, indent=1) + "\n"))

    def paths(self) -> list[Path]:
        """The part files checkpointed so far, in the order they were written."""
        return [self.dir / name for name in self.parts]

    def scan(self) -> pl.LazyFrame:
        """Every answer checkpointed so far, unscored, read lazily (a day's answers need not fit in memory)."""
        paths = self.paths()
        return pl.scan_parquet(paths) if paths else pl.LazyFrame(schema=RAW_SCHEMA)

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def _then_now(then: Any, now: Any, show: Callable[[Any], str] = repr) -> str:
    """A changed value's two sides, as a refusal says them: `'A' then, not given now`."""
    said = lambda value: "not given" if value is None else show(value)  # noqa: E731
    return f"{said(then)} then, {said(now)} now"


def _key_values(then: Any, now: Any) -> str:
    """A changed run-key option's values (`--batch-ms`: ` (100 then, 50 now)`); nothing for a digest."""
    plain = lambda value: value is None or isinstance(value, (int, float))  # noqa: E731
    return f" ({_then_now(then, now, lambda v: f'{v:g}')})" if plain(then) and plain(now) else ""


def _as_json(value: Any) -> Any:
    """As a manifest holds it: tuples as lists, anything else JSON cannot write as its text."""
    return json.loads(json.dumps(value, default=str))


def _shown(paths: list[str]) -> str:
    more = f", and {len(paths) - SHOWN_FILES} more" if len(paths) > SHOWN_FILES else ""
    return ", ".join(paths[:SHOWN_FILES]) + more


def _files_differ(manifest: dict[str, Any], key: dict[str, Any], readings: list) -> list[str]:
    """What differs in the files, in words: files added or removed, the same files in another order (ties go to
    the earlier file), contents changed, or a file read another way (the option named). A checkpoint written
    before it recorded how each file is read cannot tell that last one: it says every way it may differ."""
    was_stats = manifest.get("key", {}).get("file_sizes_and_times") or []
    now_stats = _as_json(key["file_sizes_and_times"])
    was, now = list(dict.fromkeys(row[0] for row in was_stats)), list(dict.fromkeys(row[0] for row in now_stats))
    said = []
    if added := [p for p in now if p not in was]:
        said.append(f"files (added: {_shown(added)})")
    if removed := [p for p in was if p not in now]:
        said.append(f"files (removed: {_shown(removed)})")
    if not added and not removed and was != now:
        first = next(i for i, (p, q) in enumerate(zip(now, was)) if p != q)
        said.append(f"file order (file {first + 1} was {was[first]}, now {now[first]}: equal times replay in "
                    f"the order the files are given)")
    sizes = {row[0]: row[1:] for row in was_stats}
    if edited := [row[0] for row in now_stats if row[0] in sizes and sizes[row[0]] != row[1:]]:
        said.append(f"file contents (size or modification time changed: {_shown(list(dict.fromkeys(edited)))})")
    if "readings" not in manifest:
        reordered = bool(added or removed) or was != now  # explains the fingerprint; else reading may differ
        fingerprint_moved = manifest.get("key", {}).get("files") != key["files"]
        return said + ([KEY_WORDS["files"]] if fingerprint_moved and not reordered else [])
    before = {name: reading for name, reading in manifest["readings"]}
    files_by_change: dict[str, list[str]] = {}  # one option changed for every file is said once
    for name, reading in readings:
        old = before.get(name)
        if old is None or old == reading:
            continue
        keys = sorted(k for k in set(old) | set(reading) if old.get(k) != reading.get(k))
        change = "; ".join(f"{MAP_OPTIONS.get(k, f'the column map key {k}')} {_then_now(old.get(k), reading.get(k))}"
                           for k in keys)
        files_by_change.setdefault(change, []).append(name)
    return said + [f"ways of reading {_shown(names)} ({change})" for change, names in files_by_change.items()]


def _raw_row(a: Answer) -> tuple:
    probs = a.value.get("probs")
    return (a.query, a.stream, a.topic, a.seq, a.version, a.data_ts,
            a.value.get("answer") or (max(probs, key=probs.get) if probs else None),
            a.value.get("expected"), a.value.get("nll"), a.value.get("text"),
            json.dumps(probs, sort_keys=True) if probs else None,
            json.dumps(a.value["model_probs"], sort_keys=True) if "model_probs" in a.value else None)
