"""A backtest's provenance record: what made its outputs, written with them so that the answers file alone says it.

`answers.parquet` holds it as JSON under the Parquet key-value metadata key `flashtick`, and `answers.manifest.json`
beside it holds the same record under `run` (the scores file stays the list of per-query scores its readers index).
It is built from what the run's resume key checks (backtest_resume.run_key), so a `--resume`, which must match that
key, writes the record an uninterrupted run writes. Nothing of the wall clock is in it: two runs of the same inputs
write the same bytes.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

from connectors.codec import Codec
from connectors.replay import FileReplay
from engine.service.config import ServiceConfig
from engine.service.log_provenance import written_by
from engine.service.output_paths import write_atomically

PARQUET_KEY = "flashtick"  # the answers file's key-value metadata key holding the record (JSON)
MANIFEST_SUFFIX = ".manifest.json"  # answers.parquet -> answers.manifest.json


def flashtick_version() -> str:
    try:
        return metadata.version("flashtick")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def run_record(config: ServiceConfig, codec: Codec, replay: FileReplay, queries: Path, key: dict[str, Any],
               test_from: float | None, threads: int) -> dict[str, Any]:
    """The record of a backtest of `replay` asking `queries` under `config`, whose resume key is `key`."""
    model = written_by(config, codec)  # the model id, weights fingerprint, codec: what serve's meta.json holds
    settings = model.pop("settings")
    contents = dict(key["file_contents"])
    return {
        "flashtick": flashtick_version(),
        "model": {"path": config.model.path, **model},
        "config_digest": key["config"], "settings": settings,
        "queries": {"path": str(Path(queries).resolve()), "sha256": key["queries"],
                    "text": Path(queries).read_text(errors="replace")},
        "files": [{"path": path, "size": size, "mtime_ns": mtime_ns, "digest": contents.get(path)}
                  for path, size, mtime_ns in key["file_sizes_and_times"]],
        "readings": [{"file": name, **reading} for name, reading in replay.readings()],  # --tz, --streams, --from ...
        "batch_ms": key["batch_ms"], "max_ticks": key["max_ticks"], "test_from": test_from,
        "session_gap_s": config.answers.session_gap_s, "threads": threads,
        "context_roll_rule": key["context_roll_rule"],
    }


def resumed_from(consumed: int, answers: int, parts: int, answers_whole: bool) -> dict[str, Any]:
    """Whether a backtest went on from a checkpoint (``consumed`` ticks, ``answers`` answers in ``parts`` part files
    kept; ``answers_whole``: stopped while it scored, the answers file whole), for its manifest beside the record.
    Not in the record: a resumed run's answers file holds the bytes of an uninterrupted run's, its record included."""
    if not consumed and not answers_whole:
        return {"resumed": False}
    return {"resumed": True, "resumed_from": {"ticks": consumed, "answers": answers, "parts": parts,
                                              "answers_file_whole": answers_whole}}


def parquet_metadata(record: dict[str, Any]) -> dict[str, str]:
    """The answers file's key-value metadata holding `record`."""
    return {PARQUET_KEY: json.dumps(record, sort_keys=True, default=str)}


def write_manifest(out: Path, record: dict[str, Any], rows: int, resumed: dict[str, Any]) -> None:
    """`answers.manifest.json` beside `out`: the record under `run`, the outputs it describes, and whether the run
    was resumed (resumed_from)."""
    text = json.dumps({"run": record, "answers": {"file": out.name, "rows": rows},
                       "scores": out.with_suffix(".scores.json").name, **resumed}, indent=2, sort_keys=True,
                      default=str) + "\n"
    write_atomically(out.with_suffix(MANIFEST_SUFFIX), lambda path: path.write_text(text))
