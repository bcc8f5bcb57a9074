"""A backtest's provenance record: what made its outputs, written with them so that the answers file alone says it.

`answers.parquet` holds it as JSON under the Parquet key-value metadata key `flashtick`, and `answers.manifest.json`
beside it holds the same record under `run` (the scores file stays the list of per-query scores its readers index).
It is built from what the run's resume key checks (backtest_resume.run_key), so a `--resume`, which must match that
key, writes the record an uninterrupted run writes. Nothing of the wall clock is in it: two runs of the same inputs
write the same bytes.
"""

from __future__ import annotations

import json
from itertools import zip_longest
from pathlib import Path
from typing import Any, NamedTuple

from connectors.archives import is_zip, member_names
from connectors.codec import Codec
from connectors.file_plan import source_path
from connectors.replay import FileReplay
from engine.models import BUILTIN_MODEL_DIR
from engine.service.config import ModelSection, ServiceConfig
from engine.service.log_provenance import codec_fingerprint, written_by
from engine.service.model_digest import MODEL_DIGEST, file_sha256, model_digest
from engine.service.output_paths import write_atomically
from engine.service.reading_record import INGEST_PRICE_OFFSET
from engine.service.release import this_release
from engine.text_files import ENCODING

PARQUET_KEY = "flashtick"  # the answers file's key-value metadata key holding the record (JSON)
MANIFEST_SUFFIX = ".manifest.json"  # answers.parquet -> answers.manifest.json


def flashtick_version() -> str:
    """The release that made the outputs (pyproject.toml's version in a checkout: release.py)."""
    return this_release().version


class InputFiles(NamedTuple):
    """The files a run read, each stat'ed and digested once: (path, size, mtime_ns) and (path, content digest);
    ``members``: each one's name inside the zip archive its path names (`archive_members`); ``skipped``: the files
    left out whole, (file, why) (FileReplay.skipped_files)."""
    sizes_and_times: list[tuple[str, int, int]]
    contents: list[tuple[str, str]]
    members: tuple[str | None, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()


def input_files(replay: FileReplay) -> InputFiles:
    """The files `replay` reads (a zip archive, not the copy unpacked from it), as a backtest's resume key checks
    them (a file corrected in place keeps its size, and a copy, cp -p or rsync -t, its time: its bytes are checked,
    every one, by the SHA-256 `sha256sum` prints, so a record can be checked against a vendor file inventory) and a
    run's record names them."""
    sources = [source_path(p) for p in replay.plans]
    stats = [(str(path.resolve()), st.st_size, st.st_mtime_ns) for path in sources for st in [path.stat()]]
    return InputFiles(stats, [(str(path.resolve()), file_sha256(path)) for path in sources],
                      archive_members(replay), tuple(replay.skipped_files))


def archive_members(replay: FileReplay) -> tuple[str | None, ...]:
    """Each file's name inside the zip archive it came out of (None: a file read as it is), in `files` order: a
    zip's members share its path, so only this says which one an answer's `file` index is. Not in the resume key,
    which the archive's path and bytes already pin."""
    names: dict[Path, dict[str, str]] = {}
    members: list[str | None] = []
    for plan in replay.plans:
        origin = getattr(plan, "origin", None)
        if origin is None or not is_zip(origin):  # (a text copy's origin is the file itself)
            members.append(None)
            continue
        if origin not in names:  # (the archive's directory read once, whatever its member count)
            names[origin] = member_names(origin)
        members.append(names[origin].get(plan.path.name, plan.path.name))
    return tuple(members)


def files_record(sizes_and_times: list[tuple[str, int, int]], contents: list[tuple[str, str]],
                 members: tuple[str | None, ...] = ()) -> list[dict[str, Any]]:
    """The record's `files`: an archive's member also names its `member` (a plain file's entry has none)."""
    digests = dict(contents)
    return [{"path": path, "size": size, "mtime_ns": mtime_ns, "digest": digests.get(path),
             **({"member": member} if member is not None else {})}
            for (path, size, mtime_ns), member in zip_longest(sizes_and_times, members[:len(sizes_and_times)])]


def evaluation_record(model_dir: Path, codec: Codec, files: InputFiles, reading: dict[str, Any],
                      options: dict[str, Any]) -> dict[str, Any]:
    """The record of a `flashtick evaluate` of the checkpoint in `model_dir`: the backtest's record's parts that
    apply (version, model, input files), how the files were read (`reading`, as training records it) and the
    options that change the scores."""
    return {**release_fields(), "command": "evaluate", "environment": environment(),
            "model": {"path": str(model_dir), "model": evaluated_model_id(Path(model_dir)),
                      "codec": codec_fingerprint(codec), **model_digest(Path(model_dir)).record()},
            "files": files_record(files.sizes_and_times, files.contents, files.members), "reading": reading,
            "options": options, **skipped_record(files.skipped)}


def skipped_record(skipped: Any) -> dict[str, Any]:
    """A record's `skipped_files` (each file left out whole, and why), only when there is one."""
    return {"skipped_files": [{"file": name, "why": why} for name, why in skipped]} if skipped else {}


def evaluated_model_id(model_dir: Path) -> str:
    """The id `serve` and `backtest` give the model in ``model_dir`` (ModelSection.model_id): the built-in model is
    `flashtick-tick` in all three commands, not the name of the folder it ships in (review349 #3)."""
    return ModelSection(path=None if model_dir.resolve() == BUILTIN_MODEL_DIR.resolve() else str(model_dir)).model_id


def environment() -> dict[str, str]:
    """What a run's numbers depend on besides flashtick's code and inputs (review349 #8): Python, torch, numpy and
    the platform (another torch or CPU computes the last float bits otherwise: docs/replay.md)."""
    import platform

    import numpy
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__,
            "platform": platform.platform(), "machine": platform.machine()}


def release_fields() -> dict[str, Any]:
    """A record's `flashtick` version, `commit` (null for an installed wheel) and, with a commit, `dirty`: whether the
    checkout was modified from it (release.py), so that "reproduce with this commit" is known to hold."""
    release = this_release()
    return {"flashtick": release.version, "commit": release.commit} | (
        {"dirty": release.dirty} if release.commit else {})


def run_record(config: ServiceConfig, codec: Codec, replay: FileReplay, queries: str, queries_data: bytes,
               key: dict[str, Any], test_from: float | None, threads: int, chunked: bool = True) -> dict[str, Any]:
    """The record of a backtest of `replay` asking the queries of `queries` (a file's resolved path, or where they
    were given in Python: backtest_queries.py) under `config`, whose resume key is `key`."""
    model = written_by(config, codec)  # the model id, codec, dtype: what serve's meta.json holds
    settings = model.pop("settings")
    model.pop(INGEST_PRICE_OFFSET, None)  # (a serve's: a backtest reads its files with it, as `readings` say)
    # the model's identity is the full digest of its files (key["model"], which a resume checks), not meta.json's
    # sampled `weights`, kept there for the releases that compare it (review349 #2)
    model.pop("weights", None)
    model.pop(MODEL_DIGEST, None)
    return {
        **release_fields(), "environment": environment(),
        "model": {"path": key["config_values"]["model.path"], **model, **key["model"]},  # (resolved: run_key)
        # the effective config (the keys that can move answers, as backtest_resume.effective_values takes them) and
        # its digest, which a reader recomputes from them (review349 #6)
        "config": key["config_values"], "config_digest": key["config"], "settings": settings,
        "queries": {"path": queries, "sha256": key["queries"],
                    "text": queries_data.decode(ENCODING, errors="replace")},
        "files": files_record(key["file_sizes_and_times"], key["file_contents"], archive_members(replay)),
        "readings": [{"file": name, **reading} for name, reading in replay.readings()],  # --tz, --streams, --from ...
        "batch_ms": key["batch_ms"], "max_ticks": key["max_ticks"], "test_from": test_from,
        "session_gap_s": config.answers.session_gap_s, "threads": threads,
        "context_roll_rule": key["context_roll_rule"],
        # files left out whole (a file that cannot be read, --skip-bad-files; a second copy of a file's bytes)
        **skipped_record(replay.skipped_files),
        # run_backtest(chunked=False): a forward a batch, packed otherwise, answers equal to ~1e-6 (review407 #7)
        **({} if chunked else {"chunked": False}),
    }


def resumed_from(consumed: int, answers: int, parts: int, answers_whole: bool) -> dict[str, Any]:
    """Whether a backtest went on from a checkpoint (``consumed`` ticks, ``answers`` answers in ``parts`` part files
    kept; ``answers_whole``: stopped while it scored, the answers file whole), for its manifest beside the record.
    The record itself says it too (resumed_record): a resumed file's numbers are an uninterrupted run's only to
    float32 rounding, so a file apart from its manifest must still say it was resumed (review349 #7)."""
    if not consumed and not answers_whole:
        return {"resumed": False}
    return {"resumed": True, "resumed_from": {"ticks": consumed, "answers": answers, "parts": parts,
                                              "answers_file_whole": answers_whole}}


def resumed_record(record: dict[str, Any], consumed: int) -> dict[str, Any]:
    """``record`` of a run whose answers were computed in two processes, the second from tick ``consumed`` on:
    `resumed` names that tick. A run stopped while it scored wrote its answers file whole in one process: none."""
    return record | {"resumed": {"after_ticks": consumed}} if consumed else record


def parquet_metadata(record: dict[str, Any]) -> dict[str, str]:
    """The answers file's key-value metadata holding `record`, less its input files' modification times (the
    manifest keeps them): a wall-clock value, which a copy or a `touch` of an input moves while its bytes, by their
    digest, stay (review407 #3: the answers file's bytes changed on a touch)."""
    return {PARQUET_KEY: json.dumps(without_file_times(record), sort_keys=True, default=str)}


def without_file_times(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with each input file's `mtime_ns` left out where its `digest` says its bytes."""
    if not isinstance(record.get("files"), list):
        return record
    return record | {"files": [{k: v for k, v in entry.items() if not (k == "mtime_ns" and entry.get("digest"))}
                               if isinstance(entry, dict) else entry for entry in record["files"]]}


def write_manifest(out: Path, record: dict[str, Any], rows: int, resumed: dict[str, Any], taken: int,
                   rejected: dict[str, int], command_line: list[str] | None = None) -> None:
    """`answers.manifest.json` beside `out`: the record under `run`, the outputs it describes, whether the run
    was resumed (resumed_from), the ticks it took and rejected (by reason): a no-op `--resume` of the finished
    run checks --max-rejected-share against them, and exits as the run did (finished_backtest.py); and `argv`, the
    command line that wrote it (the CLI's; null from Python): beside the record, not in it, as `--out` is in it, and
    two runs of the same inputs to two files write the same answers file bytes (review349 #8)."""
    text = manifest_text(record, command_line, answers={"file": out.name, "rows": rows},
                         ticks={"taken": taken, "rejected": rejected}, scores=out.with_suffix(".scores.json").name,
                         **resumed)
    write_atomically(out.with_suffix(MANIFEST_SUFFIX), lambda path: path.write_text(text))


def manifest_text(record: dict[str, Any], command_line: list[str] | None, **beside: Any) -> str:
    """A run's manifest as written (a backtest's, `evaluate --points-out`'s): ``record`` under `run`, `argv` the
    command line that made it (the CLI's; null from Python), beside the record and not in it, and what ``beside``
    names (the outputs it describes)."""
    return json.dumps({"run": record, "argv": command_line, **beside}, indent=2, sort_keys=True, default=str) + "\n"
