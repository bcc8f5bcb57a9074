"""`--resume`: what a backtest's answers depend on (its run key), and picking an interrupted run up where it stopped.

A checkpoint (answer_parts.py) holds every answer before a tick count. Resuming rebuilds the sessions, codec state,
ordering guards, triggers and seqs to that tick without recomputing the answers, then the loop (backtest_loop.py)
carries on: the answers file has an uninterrupted run's rows, every key, seq, label and answer equal, but not its
bytes: probabilities and values are equal to float32 rounding (the rebuilt KV comes from other forwards, which moves
its last bits; measured about 5e-6, tests allow 1e-4: docs/replay.md, *Backtests*). A resume whose run key differs
from the checkpoint's is refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from connectors.encoder import EncodedTick
from connectors.labels import MarkSeries
from connectors.replay import FileReplay
from connectors.ticks import InvalidTick
from engine.context_rolls import ROLL_RULE
from engine.rust_paths import rust_path
from engine.scheduler import AdmissionRefused
from engine.service.answer_parts import AnswerParts
from engine.service.answer_settings import answer_settings
from engine.service.backtest_loop import READ_TICKS, BacktestInterrupted, ingest_tick
from engine.service.config import ReplaySection, ServiceConfig
from engine.service.log_provenance import checkpoint_dir
from engine.service.model_digest import model_digest
from engine.service.pipeline import TickPipeline
from engine.service.replay_progress import show_read
from engine.service.run_record import input_files
from engine.service.move_marks import move_mark, watch_moves
from engine.service.tick_origins import TickOrigins


def resume_at_checkpoint(pipeline: TickPipeline, replay: FileReplay, parts: AnswerParts,
                         marks: dict[str, MarkSeries], origins: TickOrigins, bar: Any, stop: Callable[[], bool]) -> int:
    """Bring `pipeline` to the checkpoint of `parts` (the answers so far re-feed the adaptation, the first ticks
    rebuild the sessions, triggers and seqs continue); returns the replay ticks consumed up to it."""
    bar.set_description("rebuilding sessions")
    for path in parts.paths():  # a part at a time: a day's answers need not fit in memory
        for row in pl.read_parquet(rust_path(path), columns=["query", "stream", "ticks", "model_probs"]).iter_rows():
            if row[3] is not None:  # the answers so far re-feed the adaptation as the rebuild reaches them
                pipeline.adaptation.owed(*row[:3], {"model_probs": json.loads(row[3])})
    stopped = BacktestInterrupted(f"interrupted while rebuilding sessions; {parts_note(parts.consumed)}",
                                  ticks=parts.consumed, answers=parts.answers, kept=parts.dir)
    consumed = _rebuild(pipeline, replay, parts.consumed, marks, origins, bar, stop, stopped)
    _restore_answer_state(pipeline, parts)
    bar.set_description("replaying")
    return consumed


def marks_to_score(pipeline: TickPipeline, replay: FileReplay, parts: AnswerParts, out: Path,
                   marks: dict[str, MarkSeries], bar: Any, stop: Callable[[], bool], max_ticks: int | None) -> int:
    """For a run stopped while it scored its whole answers file `out`: what the market did after each answer, read
    again as the run read it (the same ticks through the same encoders, refused and counted alike, no forward);
    returns the replay ticks consumed, all of the run's."""
    bar.set_description("reading the ticks to score the answers")
    consumed = _rebuild(pipeline, replay, parts.consumed, marks, TickOrigins(), bar, stop,
                        scores_owed(out, parts.consumed, parts.written["rows"]), compute=False)
    while not replay.done and (max_ticks is None or pipeline.ticks_in < max_ticks):  # as the run's loop ended
        if replay.next_batch(READ_TICKS):  # (rows it rejected past its last tick are counted, as the run's were)
            raise ValueError(f"the files hold more than the {consumed} ticks the answers in {out} were made from: "
                             f"did they change?")
    return consumed


def scores_owed(out: Path, ticks: int | None, answers: int | None) -> BacktestInterrupted:
    """A run stopped while it scored its whole answers file `out` (of ``answers`` rows, made from ``ticks``): why it
    ends, and how to get its scores."""
    return BacktestInterrupted(f"stopped before the scores: the answers are whole in {out}; run the same command "
                               f"with --resume (resume=True from Python) to score them", ticks=ticks,
                               answers=answers, kept=out, scores_owed=True)


def _rebuild(pipeline: TickPipeline, replay: FileReplay, upto: int, marks: dict[str, MarkSeries],
             origins: TickOrigins, bar: Any, stop: Callable[[], bool], stopped: BacktestInterrupted,
             compute: bool = True) -> int:
    """Bring sessions, codec state and ordering guards to where the interrupted run checkpointed, as `serve`
    recovers from its tick log (engine/service/log_replay.py): the first `upto` ticks go through the same
    encoders and are booked on their streams without computing them (Scheduler.restore: token logs and rolls
    end exactly where the run's forwards left them), then (`compute`) each window's KV is computed once. Answers
    before `upto` are in the parts already. A `stop` raises `stopped`."""
    scheduler = pipeline.engine.scheduler

    def book(item: EncodedTick) -> None:
        try:
            scheduler.restore(item.stream, item.tokens, item.ts, item.ticks)
        except AdmissionRefused as e:  # refused by the run too, the same way: counted alike
            raise InvalidTick("stream_refused", str(e), item.stream) from None
        pipeline.adaptation.accepted(item)
        # the move queries' references, as the run moved them (booked: no due point)
        watch_moves(pipeline.registry, scheduler, item.stream, item.ts, move_mark(item.tick))

    done = 0
    while done < upto and not replay.done:
        if stop():  # the checkpoint on disk is still the one to resume from
            raise stopped
        ticks = replay.next_batch(min(READ_TICKS, upto - done))
        for tick, origin in zip(ticks, replay.origins):
            ingest_tick(pipeline, tick, marks, origins, origin, book)
        done += len(ticks)
        show_read(bar, replay, done)
    if done < upto:
        raise ValueError(f"the checkpoint is at tick {upto} but the files hold {done}: did they change?")
    if compute:
        pipeline.engine.rebuild()
    return done


def parts_note(consumed: int) -> str:
    return (f"the checkpoint after {consumed} ticks is kept; run the same command with --resume (resume=True from "
            f"Python) to continue")


def _restore_answer_state(pipeline: TickPipeline, parts: AnswerParts) -> None:
    """Triggers and seqs as the run left them: each (query, stream) last fired at its last answer's tick count
    and event time, and each topic's seqs continue from the last one written."""
    written = parts.scan().select("query", "stream", "ticks", "data_ts")
    last = written.sort("ticks", "data_ts").unique(["query", "stream"], keep="last", maintain_order=True).collect()
    for query, stream, ticks, data_ts in last.iter_rows():
        pipeline.registry.restore_fired(query, stream, ticks, data_ts)
    pipeline.cache.restore([], parts.last_seq)


def rolls_inside_changed(now: bool, consumed: int) -> str:
    """What a resume under the other scheduler.roll_inside_forward is told: not refused (sessions roll at the same
    points either way, context_rolls.ROLL_RULE), but the answers after the resume point come from forwards packed
    otherwise, which round otherwise (docs/configuration.md: ~1e-6)."""
    then = "false" if now else "true"
    return (f"resuming with scheduler.roll_inside_forward {str(now).lower()} a run checkpointed with {then}: the "
            f"answers after the resume point ({consumed} ticks) come from forwards packed otherwise (the same rolls, "
            f"the same ticks) and may differ from an uninterrupted run's by that packing's rounding (~1e-6)")


def run_key(config: ServiceConfig, replay: FileReplay, queries: bytes, batch_ms: float,
            max_ticks: int | None) -> dict[str, Any]:
    """What a run's answers depend on; a resume must match it exactly. ``queries``: the queries document's bytes
    (a file's as on disk; text or a parsed document given in Python, as backtest_queries.py writes it)."""
    read = input_files(replay)
    # the replay section's effects are the column maps (in `files`) and batch_ms; its checkpoint_s is not one; nor
    # is model.threads (--threads): how fast, not what (a resume on more cores finishes sooner); it moves the last
    # float bits, so AnswerParts keeps it beside the key and a resume at another count is told.
    # answers.session_gap_s is a key of its own (below), so that a refusal names --session-gap, not the config;
    # nor is scheduler.roll_inside_forward: rolls land where they did (ROLL_RULE), only a forward's packing and
    # rounding (~1e-6) move; AnswerParts keeps it beside the key and a resume under the other is told
    # (model.path resolved, as the input files are: `runs/m1` and `../runs/m1` from another folder are one model,
    # review407 #10: they were two config digests, and --resume refused its own finished run)
    model = dataclasses.replace(config.model, threads=None, path=resolved_model_path(config.model.path))
    keyed = dataclasses.replace(config, replay=ReplaySection(), model=model,
                                scheduler=dataclasses.replace(config.scheduler, roll_inside_forward=True),
                                answers=dataclasses.replace(config.answers, session_gap_s=None))
    values = effective_values(keyed)
    return {"files": replay.snapshot()["fingerprint"], "file_sizes_and_times": read.sizes_and_times,
            "file_contents": read.contents,
            "queries": hashlib.sha256(queries).hexdigest(),
            # every byte of every model file that moves an answer, by file: the config holds only the model's path,
            # so a recalibration or fine-tune in place left the key as it was (review349 #1)
            "model": model_digest(checkpoint_dir(config.model.path)).record(),
            "config": values_digest(values),
            # what the digest covers, key by key: a refusal for `config` names the keys that differ (review321 #4)
            "config_values": values,
            # it ends the adaptation's labels (answers.adapt) as well as the scores': the published answers move
            "session_gap_ns": config.answers.session_gap_ns,
            # the settings that change answers (in `config` too): a refusal for `config` names those that differ
            "settings": {k: v for k, v in answer_settings(config).items() if k != "answers.session_gap_s"},
            "batch_ms": batch_ms,
            "max_ticks": max_ticks,
            "context_roll_rule": ROLL_RULE}  # an upgrade that moves rolls moves every answer after one


# config sections a backtest never uses (it opens no socket, writes no data directory, runs one engine): their keys
# are no part of the effective config a run records and digests, so that a serve's config with its endpoints backtests
# under the digest of one without (review349 #6)
SERVE_ONLY_SECTIONS = ("endpoints", "curve", "log", "shards")


def resolved_model_path(path: str | None) -> str | None:
    """A model directory's path as the record keeps it: absolute, links followed (None: the built-in model)."""
    return None if path is None else os.path.realpath(path)


def effective_values(config: ServiceConfig) -> dict[str, Any]:
    """The config's keys that can move a backtest's answers (config_values, less SERVE_ONLY_SECTIONS and the
    top-level `queries` path, whose text a run records itself)."""
    return {key: value for key, value in config_values(config).items()
            if key.split(".", 1)[0] not in SERVE_ONLY_SECTIONS and key != "queries"}


def values_digest(values: dict[str, Any]) -> str:
    """The config digest a record holds: SHA-256 of ``values`` as compact JSON with sorted keys, which anyone can
    recompute from the record's `config` (`json.dumps(config, sort_keys=True, separators=(",", ":"))`)."""
    return hashlib.sha256(json.dumps(values, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def config_values(config: Any) -> dict[str, Any]:
    """Every key of ``config`` (a ServiceConfig) as the YAML names it (`limits.max_queries`), with its value as JSON
    writes it (a tuple as a list, a path as text)."""
    values: dict[str, Any] = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            values |= {f"{field.name}.{key}": item for key, item in config_values(value).items()}
        else:
            values[field.name] = json.loads(json.dumps(value, default=str))
    return values
