"""`backtest --resume` where --out holds a finished run: a no-op when that run is this one (the same files, queries,
model, config and options), so that a scheduler can run one command line unchanged every hour, whether the last
run was killed (it resumes), never started (it starts) or finished (review337 #2: this was an exit-2 error). A
finished run whose record differs is still refused, naming what differs: its answers are not this command's.

A finished run is an --out with no checkpoint folder beside it, its scores file and its manifest written (the
manifest is the last file a run writes, answers.manifest.json); its record is compared with the answers file's own
(Parquet metadata, run_record.PARQUET_KEY), so a file replaced since is not taken for the run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.rust_paths import rust_path
from engine.service.file_changes import file_changes, new_days_hint
from engine.service.run_record import MANIFEST_SUFFIX, PARQUET_KEY, without_file_times

# record keys that may differ in the same run: the CPU thread count (a resume on more cores is the same run;
# AnswerParts tells, not refuses it), whether it was resumed (run_record.resumed_record), and the command line
# (this one has --resume, and may spell the same options otherwise)
_NOT_COMPARED = frozenset({"threads", "resumed", "argv"})
# the flashtick and the platform that computed it: a finished run of the same inputs by another commit (a `git pull`)
# or on another kernel is complete, said with what differs, not refused (review407 #5: a scheduled --resume failed
# after every pull); remove it to recompute with this one
_RELEASE_KEYS = frozenset({"flashtick", "commit", "dirty", "environment"})
_FILE_KEYS = {"files", "readings"}  # said as the files that differ, by name (file_changes.py)


class AlreadyComplete(FileExistsError):
    """--resume on a finished run with this run's record: nothing to do (the CLI says so and exits as the run did:
    0, or 1 where its rows rejected are over --max-rejected-share). A FileExistsError, as the refusal it replaces,
    for a Python caller that caught that. ``taken`` and ``rejected``: the finished run's ticks taken and rejected by
    reason, from its manifest (None for a manifest written before it held them)."""

    def __init__(self, message: str, taken: int | None = None, rejected: dict[str, int] | None = None) -> None:
        super().__init__(message)
        self.taken = taken
        self.rejected = rejected


def finished_report(out: Path, done: AlreadyComplete, test_from: float | None, model_path: str | None) -> Any:
    """The report of the finished run a --resume found (``done``), read back from its manifest and scores file:
    what a Python caller gets from ``run_backtest(..., resume=True)`` then (review354 #9), its counts and scores."""
    from engine.service.backtest_report import BacktestReport
    from engine.service.backtest_scores import QueryScore

    scores = json.loads(out.with_suffix(".scores.json").read_text(encoding="utf-8"))
    return BacktestReport(done.taken or 0, dict(done.rejected or {}), _rows(out), out,
                          [QueryScore.from_json(entry) for entry in scores], test_from=test_from,
                          model_path=model_path, already_complete=done)


def refuse_or_skip_finished(out: Path, record: dict[str, Any]) -> None:
    """Before a --resume: where --out holds a finished run (no checkpoint folder beside it), AlreadyComplete when
    its record is ``record`` (the CPU thread count aside), else FileExistsError saying what differs; nothing where
    it holds none (a checkpoint to resume, or nothing: the run starts)."""
    from engine.service.answer_parts import PARTS_SUFFIX

    directory = out.with_name(out.name + PARTS_SUFFIX)
    if directory.exists() or not out.is_file():
        return
    hints: list[str] = []
    normalised = json.loads(json.dumps(record, sort_keys=True, default=str))
    differs = _differences(out, normalised, hints=hints, ignored=_RELEASE_KEYS)
    if not differs:
        rows = _rows(out)
        computed = _differences(out, normalised, _values, compared=_RELEASE_KEYS)
        by = (f" (written by another flashtick or platform: {computed}: its answers are what that one computed; "
              f"remove {out} to compute them with this one)" if computed else "")
        raise AlreadyComplete(f"already complete: {out} holds every answer of this run ({rows} rows, scored in "
                              f"{out.with_suffix('.scores.json').name}); the same files, queries, model, config and "
                              f"options: nothing to do{by}", *_counts(out))
    raise FileExistsError(f"{out} holds a finished backtest (no checkpoint in {directory}): the run there is "
                          f"complete, but not this command's ({differs}), so there is nothing of it to resume; to run "
                          f"it, remove {out} or give another --out (a dated one, for a scheduled job)"
                          + "".join(f"; {hint}" for hint in hints))


def replaced_note(out: Path, record: dict[str, Any], overwrite: bool = False) -> str | None:
    """Before a run without --resume: what it is about to replace, where ``out`` holds a finished backtest whose
    record differs from ``record`` (review349 #13: an audit trail overwritten without a word); None where it holds
    none, or the same run's. A finished backtest of another model is refused (FileExistsError) unless
    ``overwrite``, as `train` refuses an --out holding a checkpoint: a comparison of two checkpoints run with one
    --out lost the first one's answers and scores to a note (review396 #6)."""
    from engine.service.answer_parts import PARTS_SUFFIX

    if out.with_name(out.name + PARTS_SUFFIX).exists() or not out.is_file():
        return None
    normalised = json.loads(json.dumps(record, sort_keys=True, default=str))
    differs = _differences(out, normalised, _values)
    if not differs:
        return None
    if not overwrite and _model_digest(out) not in (None, normalised["model"].get("digest")):
        raise FileExistsError(f"{out} holds a finished backtest of another model ({differs}): refused so that no "
                              f"run replaces another's answers and scores by accident; give another --out to keep "
                              f"both, or --overwrite to replace it")
    return (f"replacing {out}, a finished backtest of another run ({differs}): its answers, scores, plot and "
            f"manifest are overwritten by this run's (keep them with another --out)")


def _model_digest(out: Path) -> str | None:
    """The model digest the finished run at ``out`` recorded in its manifest (None where it is unreadable: its
    record's differences say so)."""
    try:
        return json.loads(out.with_suffix(MANIFEST_SUFFIX).read_text(encoding="utf-8"))["run"]["model"]["digest"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _values(key: str, then: Any, now: Any) -> str:
    """A differing record key as a note names it: with both values when they are short (`batch_ms 100 then, 50
    now`), else by name alone."""
    shown = [json.dumps(value, default=str) for value in (then, now)]
    return f"{key} {shown[0]} then, {shown[1]} now" if max(map(len, shown)) <= 42 else key  # (a commit's 40 hex)


def _differences(out: Path, record: dict[str, Any],
                 say: Callable[[str, Any, Any], str] = lambda key, then, now: key, hints: list[str] | None = None,
                 ignored: frozenset[str] = frozenset(), compared: frozenset[str] | None = None) -> str:
    """What differs between this run's record and the finished one's, in words ('' when nothing does), of the keys
    ``compared`` (None: all) but those ``ignored``; an input file whose bytes are the same by their digest is the
    same file whatever its modification time (review407 #2: a `touch` or a copy refused a finished run as "its
    files differ", naming none); ``hints`` is given what to do where that helps (files only added: how to answer
    the new ones)."""
    manifest_path = out.with_suffix(MANIFEST_SUFFIX)
    if not out.with_suffix(".scores.json").is_file() or not manifest_path.is_file():
        return f"its scores or manifest, {manifest_path.name}, are missing"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))["run"]
        in_file = json.loads(_metadata(out)[PARQUET_KEY])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"its record is unreadable: {e}"
    if without_file_times(manifest) != without_file_times(in_file):  # (the file keeps none: run_record)
        return f"{out.name} was replaced since {manifest_path.name} was written"
    manifest, record = _identity(manifest), _identity(record)
    skipped = _NOT_COMPARED | ignored
    keys = sorted(k for k in set(record) | set(manifest) - skipped
                  if k not in skipped and (compared is None or k in compared) and record.get(k) != manifest.get(k))
    said = [say(k, manifest.get(k), record.get(k)) for k in keys if k not in _FILE_KEYS]
    changes = file_changes(manifest, record) if _FILE_KEYS & set(keys) else None
    if changes is not None and changes.text():  # the files by name (a folder of days: the day added)
        said.insert(0, f"files ({changes.text()})")
    elif changes is not None:  # (a record whose per-file entries say nothing more)
        said[:0] = [k for k in keys if k in _FILE_KEYS]
    if hints is not None and changes is not None and changes.only_added() and len(said) == 1:
        hints.append(new_days_hint())
    if not said:
        return ""
    plural = len(said) > 1 or said[0].split(" ", 1)[0] in {"files", "readings", "settings", "skipped_files"}
    return f"its {', '.join(said)} {'differ' if plural else 'differs'}"


def _identity(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` as runs are told apart: the input files by their bytes (without_file_times), the queries by their
    digest and text, not the path they were read from (review407 #10: a byte copy under another name, or the same
    text given in Python, was "its queries differs")."""
    record = without_file_times(record)
    queries = record.get("queries")
    return record | {"queries": {k: v for k, v in queries.items() if k != "path"}} if isinstance(queries, dict) \
        else record


def _counts(out: Path) -> tuple[int | None, dict[str, int] | None]:
    """The finished run's ticks taken and rejected by reason, as its manifest says them (Nones where it does not)."""
    try:
        ticks = json.loads(out.with_suffix(MANIFEST_SUFFIX).read_text(encoding="utf-8"))["ticks"]
        taken, rejected = int(ticks["taken"]), {str(k): int(v) for k, v in ticks["rejected"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, None
    return taken, rejected


def _metadata(out: Path) -> dict[str, str]:
    import polars as pl

    return pl.read_parquet_metadata(rust_path(out))


def _rows(out: Path) -> int:
    import polars as pl

    return pl.scan_parquet(rust_path(out)).select(pl.len()).collect().item()
