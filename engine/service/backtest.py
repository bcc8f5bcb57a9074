"""Backtests: replay tick files through the very engine that serves live, and score every answer.

In-process, without sockets. Batches are cut by EVENT time (every
``batch_ms`` of tick timestamps the pending ticks are run to completion), so
the answers depend only on the files and the config: the same inputs give a
byte-identical Parquet file. Wall-clock fields are left out of it for that reason.

Scoring: a choice or expectation query that names a codec question is scored
against what the market did next (connectors/labels.py, the one definition used
by training too): accuracy, Brier score, log-loss, and a calibration table and
plot per query, next to the best naive baseline (majority class, "same as the
last interval").

Service glue like server.py (it imports connectors/ and queries/), in a file
of its own because the CLI and tests drive it directly. This file holds the run,
run_backtest, from arguments to report; its parts live beside it:
backtest_loop.py (the replay loop), backtest_resume.py (--resume), answers_file.py
(the answers Parquet file), backtest_scores.py (the scores), unscored_notes.py
(why answers went unscored), backtest_report.py (the summary printed),
calibration_plot.py and replay_progress.py.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Mapping, NamedTuple, NoReturn

import polars as pl
import torch

from connectors.cautions import Caution
from connectors.labels import MarkSeries
from connectors.frame_files import NamedFrame, file_items, holds_frame
from connectors.replay import FileReplay
from connectors.time_range import TimeRange
from connectors.zero_crossings import holes_refusal, planned_refusal
from engine.path_words import user_item, user_path
from engine.quoting import quoted
from engine.rust_paths import rust_path
from engine.service.answer_parts import AnswerParts
from engine.service.backtest_in_sample import in_sample_notes, reads_as_trained, scored_from
from engine.service.answers_file import write_answers
from engine.service.backtest_loop import BacktestInterrupted, replay_from
from engine.service.backtest_outputs import backtest_outputs
from engine.service.backtest_queries import BacktestQueries, backtest_queries
from engine.service.backtest_report import BacktestReport
from engine.service.backtest_resume import (marks_to_score, resume_at_checkpoint, rolls_inside_changed, run_key,
                                           scores_owed)
from engine.service.answer_context import backtest_context_lines
from engine.service.backtest_scores import QueryScore, later_slice, question_of, score_query
from engine.service.calibration_plot import plot_backtest_calibration
from engine.service.checkpoint_notes import (TEST_PART, checkpoint_evaluation, own_test_from, own_test_note,
                                             test_part_starts)
from engine.service.cli_reading import configured_column_map
from engine.service.config import ServiceConfig
from engine.service.ctrl_c_stop import CtrlCStop
from engine.service.finished_backtest import AlreadyComplete, finished_report, refuse_or_skip_finished, replaced_note
from engine.service.heap_memory import freeze_heap, thaw_heap
from engine.service.market_caveat import backtest_caveat
from engine.service.no_data import NoData, refuse_absent_inputs
from engine.service.output_paths import check_outputs_against, write_text_atomically
from engine.service.pipeline import TickPipeline
from engine.service.process_state import process_state_kept
from engine.service.rejections import rejected_lines
from engine.service.run_record import parquet_metadata, resumed_from, resumed_record, run_record, write_manifest
from engine.service.replay_progress import progress_bar
from engine.service.session_gaps import gap_notes, split_cautions
from engine.service.test_start import TestStart, test_start_given
from engine.service.tick_origins import TickOrigins
from engine.service.trained_streams import TrainedStreams
from engine.service.unscored_notes import UnscoredWhy, bar_streams, say_silent_queries, unscored_reasons
from queries.trigger import TRIGGER_TABLE
from queries.yaml_loader import no_query

# the Python API (docs/replay.md); BacktestInterrupted is raised by the loop and resume (backtest_loop.py) and is
# imported from here by cmd_backtest.py, tests and users' scripts alike
__all__ = ["AlreadyComplete", "BacktestInterrupted", "BacktestReport", "FilesHoldNoTicks", "NamedFrame", "NoData",
           "NothingReplayed", "run_backtest"]

class _Configured:
    """run_backtest's `columns` not given: the config's replay section's reading (a caller's None is no map: each file
    read as detected)."""

    def __repr__(self) -> str:
        return "CONFIGURED"


CONFIGURED: Any = _Configured()


class NothingReplayed(ValueError):
    """Every row of the files was rejected: there is nothing to backtest."""


class FilesHoldNoTicks(NothingReplayed, NoData):
    """The files hold no data row (each a header alone or zero bytes): no data yet, exit_codes.NO_DATA
    (no_data.py); a NothingReplayed too, as it was."""


def run_backtest(config: ServiceConfig, files: Any, queries: Any, out: str | Path,
                 columns: Any = CONFIGURED, batch_ms: float | None = None, max_ticks: int | None = None,
                 progress: bool | None = None, resume: bool = False, checkpoint_s: float | None = None,
                 stop: Callable[[], bool] = lambda: False, test_from: float | str | None = None,
                 chunked: bool = True, note: Callable[[str], None] = lambda _: None,
                 streams: list[str] | None = None, time_range: TimeRange | tuple[Any, Any] | None = None,
                 scoring: Callable[[], None] = lambda: None,
                 replaying: Callable[[], None] = lambda: None,
                 test_starts: Mapping[str, tuple[int, int]] | None = None,
                 command_line: list[str] | None = None, plot: bool = True,
                 skip_bad_files: bool = False, overwrite: bool = False) -> BacktestReport:
    """Replay `files` through the engine with `queries` standing; answers to `out` (Parquet), scores beside it.

    What `flashtick backtest` runs, alike (docs/replay.md, "From Python"): `config` is run as an in-process run,
    never opening its service's data directory (``log.dir``: ServiceConfig.in_process). `files`: a path, a list of
    paths and entries, or a DataFrame held in memory (polars DataFrame or LazyFrame, pandas DataFrame,
    connectors.frame_files.NamedFrame). `queries`: a queries file's path, its YAML text, or the document parsed
    (a dict, or the list of queries): backtest_queries.py. `progress`: None shows a bar on a terminal or in a
    notebook and none in a pipe, True always, False never (replay_progress.py). A Ctrl-C (a notebook's interrupt)
    once the replay began stops as `stop` does (ctrl_c_stop.py). Torch's thread count and the environment the run
    sets are put back when it returns (process_state.py).

    `columns`, `batch_ms`, `checkpoint_s` and `streams` not given are the config's replay section's, as
    `backtest --config` reads them (its columns and preset, names, ts_unit, tz, date, ts_format; a default
    ServiceConfig's: each file read as detected, 100 ms batches, a checkpoint each 10 s, every stream).

    `chunked`: one forward advances many event-time batches, each answered at its own cut: the same answers
    as running the engine to idle after every batch (`chunked=False`), in fewer, fuller forwards.

    Answers are checkpointed as part files every `checkpoint_s` seconds in ``OUT.parts/``, at the first
    event-time batch boundary after a multiple of FLUSH_TICKS ticks (a fixed grid: the answers' bits never
    depend on the wall clock); `resume` continues an interrupted run from its last checkpoint, and `stop` (polled
    at each boundary) ends a run there with BacktestInterrupted (its fields: what was kept, and where). The parts
    are scored one at a time into the final file, so memory does not grow with the answers. Once that file is
    whole, `scoring` is called and the scores and plot are made from it: a `stop` then ends the run before them
    (BacktestInterrupted, the answers kept), and `resume` makes them from that file, reading the ticks again but
    computing no answer. `resume` on a run that finished with these arguments runs nothing: it returns that run's
    report, read back (its ``already_complete`` set; the CLI says so and exits as the run did).
    `test_from` (a fraction in (0, 1)) scores only answers after that fraction of each stream's ticks: every
    answer is still computed and written, and the realised answers of the scored ones lie wholly after the cut;
    At a checkpoint's own split share (0.85 of the default 70/15/15), each stream it trained on is cut where its
    test part starts instead, after the gap training left, as `evaluate` scores it (``test_starts``, None: from the
    checkpoint's evaluation.json, checkpoint_notes.test_part_starts). `test_from="test"` (the CLI's `--test-from
    test`) is that share, read from the checkpoint (checkpoint_notes.own_test_from) and said. An event time (a
    date or ISO 8601 text as `--test-from 2024-03-15` reads it, in UTC without an offset; a datetime, a pandas
    Timestamp, a numpy datetime64, an int of ns; a TestStart) scores every stream from its first tick stamped then on.
    `note` is told, before the run, what a user should know about how the files are read (FileReplay.notes), and
    after its scores why they are not out of sample, if they are not (the report's ``in_sample``: the model scored
    on ticks it trained on, backtest_in_sample.py).
    `replaying` is called once the model is loaded and the files are opened, before the checkpoint is: a stop from
    then on is one at a batch boundary (before it, the CLI ends the run at once: nothing is on disk to keep).
    `streams` (names or globs) reads those streams of the files alone; a resume must select the same.
    `time_range`, a TimeRange or a ``(start, end)`` pair (TimeRange.of's: ISO 8601 text, ns, datetimes, pandas
    Timestamps, numpy datetime64s; None: open on that side), reads the ticks stamped inside it alone
    (connectors/time_range.py); a resume must read the same.
    `command_line` (the CLI's argv) is written as the manifest's `argv`; None from Python.
    `plot`: False draws no calibration plot (the CLI's `--no-plot`), and removes one an earlier run left at `out`:
    the scores are written all the same, and a sweep of many runs skips the drawing, about half of a short run.
    `skip_bad_files` leaves out a file that cannot be read (cut short, damaged), said by name, rather than refusing
    the run (FileReplay's; the record's `skipped_files` names each). `overwrite` replaces a finished backtest of
    another model at `out`, which is refused (FileExistsError) without it (finished_backtest.replaced_note).
    """
    if not isinstance(config, ServiceConfig):
        raise TypeError(f"config: expected a ServiceConfig (ServiceConfig.load(PATH), ServiceConfig() or "
                        f"ServiceConfig.from_dict(...)), got {type(config).__qualname__}")
    config = config.in_process()  # as the CLI's service_config makes it: a service's data directory is its own
    # what an argument does not say, the config's replay section does, as `backtest --config` reads it (review420 #9:
    # from Python its batch_ms, reading, price offsets, streams and checkpoint_s were dropped without a word)
    section = config.replay
    batch_ms = section.batch_ms if batch_ms is None else batch_ms
    checkpoint_s = section.checkpoint_s if checkpoint_s is None else checkpoint_s
    columns = configured_column_map(config) if columns is CONFIGURED else columns
    streams = (list(section.streams) if section.streams else None) if streams is None else streams
    test_from = test_start_given(test_from)  # a date, as --test-from DATE, or a datetime a notebook holds
    time_range = TimeRange.given(time_range)  # a (start, end) pair as well as a TimeRange
    evaluation = checkpoint_evaluation(Path(config.model.path)) if config.model.path is not None else None
    if test_from == TEST_PART:  # as the CLI's --test-from test: the number it stands for, said
        test_from = own_test_from(evaluation, config.model.path)
        note(own_test_note(test_from))
    _check_numbers(batch_ms, checkpoint_s, test_from, max_ticks)
    if test_starts is None:  # at the checkpoint's own split, whether given as "test" or as its number (review420 #7)
        test_starts = test_part_starts(evaluation, scored_from(test_from))
    asked = backtest_queries(queries)
    _, files = file_items(files)  # (a str is one path, not its letters; a DataFrame one frame, not its columns)
    # `~/x` read as the CLI reads it (path_words): a Python caller's paths are a user's too
    files, out = [user_item(f) for f in files], user_path(out)
    check_outputs_against(backtest_outputs(out, "out"), _input_paths(config, files, asked.path, columns))
    ctrl_c = CtrlCStop(note)

    def began() -> None:  # the replay begins: from here a Ctrl-C stops at a batch boundary, after a checkpoint
        ctrl_c.arm()
        replaying()

    with process_state_kept():
        try:
            report = _run(config, files, asked, out, columns, batch_ms, max_ticks, progress, resume, checkpoint_s,
                          lambda: ctrl_c.requested or stop(), test_from, chunked, note, streams, time_range, scoring,
                          began, test_starts, command_line, plot, skip_bad_files, overwrite)
        finally:
            ctrl_c.disarm()
    if report.already_complete is None:  # (a finished run read back: its notes were said when it ran)
        # said before the scores they are about, to the CLI's user and a notebook's alike (review420 #6)
        report.in_sample = in_sample_notes(report, _file_paths(files), max_ticks,
                                           reads_as_trained(config.model.path, columns, streams, time_range))
        for line in report.in_sample:
            note(line)
        if (caveat := backtest_caveat(config.model.path, list(report.stream_ticks))) is not None:
            report.cautions.append(Caution(caveat))  # (the summary says it again at its end, as the live caveat)
            note(report.cautions[-1])
        if (stranger := TrainedStreams(config.model.path).note(report.stream_ticks)) is not None:  # (review443 #2)
            report.cautions.append(stranger)
            note(stranger)
    return report


def _input_paths(config: ServiceConfig, files: list[Any], queries: Path | None, columns: Any) -> list[Path]:
    """The paths a run reads, which its outputs must not be (review420 #1: from Python, ``out`` given as its tick
    file replaced it with the answers): the files (a (path, map) pair's, a {"path": ...} entry's; not a frame), the
    queries file (backtest_queries' path: None for text), a columns file, the model's directory."""
    paths = [Path(f[0] if isinstance(f, tuple) else f["path"] if isinstance(f, Mapping) else f)
             for f in files if not holds_frame(f) and isinstance(f, (str, os.PathLike, tuple, Mapping))]
    paths += [queries] if queries is not None else []
    # (os.path.isfile: False, not OSError, for a map's inline text too long for a file name)
    if isinstance(columns, (str, os.PathLike)) and os.path.isfile(columns):
        paths.append(Path(columns))
    return paths + ([Path(config.model.path)] if config.model.path is not None else [])


def _file_paths(files: list[Any]) -> list[Path]:
    """The tick files' paths among run_backtest's `files`: a (path, map) pair's, a {"path": ...} entry's; not a
    frame's."""
    return [Path(f[0] if isinstance(f, tuple) else f["path"] if isinstance(f, Mapping) else f)
            for f in files if not holds_frame(f) and isinstance(f, (str, os.PathLike, tuple, Mapping))]


def _run(config: ServiceConfig, files: list[Any], queries: BacktestQueries, out: Path, columns: Any,
         batch_ms: float, max_ticks: int | None, progress: bool | None, resume: bool, checkpoint_s: float,
         stop: Callable[[], bool], test_from: float | None, chunked: bool, note: Callable[[str], None],
         streams: list[str] | None, time_range: TimeRange | None, scoring: Callable[[], None],
         replaying: Callable[[], None], test_starts: Mapping[str, tuple[int, int]] | None,
         command_line: list[str] | None, plot: bool, skip_bad_files: bool, overwrite: bool) -> BacktestReport:
    """run_backtest once its arguments are checked and read: the replay, its answers, scores and report."""
    pipeline = _standing_pipeline(config, queries, note)
    # a pattern that matches no file yet, an empty folder: no data yet (NoData); a frame is no file to look for
    refuse_absent_inputs([f for f in files if not holds_frame(f)])
    replay = FileReplay(list(files), columns=columns, streams=streams, time_range=time_range,
                        skip_bad_files=skip_bad_files)
    for line in replay.notes:
        note(line)
    # a stream whose prices cross zero, foreseen by the files' plans: refused before the model runs (a time range
    # may leave the stretch below zero out, so then the rejects' own count decides, below)
    if time_range is None and (refused := planned_refusal(replay.plans, replay.selection, "backtest")) is not None:
        raise ValueError(refused)
    key = run_key(config, replay, queries.data(), batch_ms, max_ticks)
    threads = torch.get_num_threads()  # as the pipeline set it (model.threads, --threads)
    recorded_from = test_from.text() if isinstance(test_from, TestStart) else test_from  # (JSON: a time as text)
    record = run_record(config, pipeline.codec, replay, queries.shown(), queries.data(), key, recorded_from, threads,
                        chunked)
    replaying()
    if resume:  # a finished run: done already when it is this one (its report read back), else refused
        try:
            refuse_or_skip_finished(out, record)
        except AlreadyComplete as done:
            return finished_report(out, done, test_from, config.model.path)
    elif (replacing := replaced_note(out, record, overwrite)) is not None:  # (replaced, as documented: but said)
        note(replacing)
    rolls_inside = config.scheduler.roll_inside_forward
    parts = AnswerParts.open(out, key, resume, readings=replay.readings(), threads=threads, rolls_inside=rolls_inside,
                             note=note)
    resumed = resumed_from(parts.consumed, parts.answers, len(parts.parts), parts.written is not None)
    if parts.written is None:  # (stopped while it scored: the answers file and its record were written whole)
        record = resumed_record(record, parts.consumed)
    try:  # from here on, any raise (a note, a bad file found late, an interrupt) lets go of the parts' lock at once
        scores_only = _said_resumption(parts, out, threads, rolls_inside, scoring, note)
        marks: dict[str, MarkSeries] = defaultdict(MarkSeries)  # each stream's accepted ticks, as labelling needs them
        origins = TickOrigins()  # and each one's file and row, named in the answers made after it
        _replay_ticks(pipeline, replay, parts, out, marks, origins, scores_only, progress, max_ticks, stop,
                      batch_ms, checkpoint_s, chunked)
        for caveat in pipeline.untrained.held_caveat():  # (its words: `health`'s, which `feed replay` prints)
            note(Caution(caveat["text"]))
        rejected, examples, streams = _rejects(pipeline, replay)
        if (holes := holes_refusal(replay.rejected, "backtest")) is not None:  # before any label is made: no
            parts.remove()  # checkpoint of a run refused as a whole (its --resume would read the files so again)
            raise ValueError(holes)
        if pipeline.ticks_in == 0:
            _refuse_nothing_replayed(parts, rejected, examples, streams, replay.range_left_out, time_range, resume)
        if not scores_only:  # (marks the checkpoint whole with the answers file: see write_answers)
            write_answers(pipeline, parts, marks, out, config.answers.session_gap_ns, parquet_metadata(record))
            scoring()  # at once: a stop from here on is said as one before the scores, not at a batch boundary
        scored = _score(pipeline, out, marks, test_from, config.answers.session_gap_ns, stop, note, replay,
                        bar_streams(replay.plans, origins, marks), test_starts, plot)
        # (after the scores it names; before the parts go)
        write_manifest(out, record, parts.written["rows"], resumed, pipeline.ticks_in, rejected, command_line)
    except BaseException as e:
        _release_and_raise(parts, e)
    parts.remove()  # the answers, scores and plot are whole beside `out` now (and the lock released with the folder)
    return BacktestReport(pipeline.ticks_in, rejected, parts.written["rows"], out, scored.scores, examples,
                          parts.resumed_at, test_from, config.model.path, scored.stream_ticks, replay.cautions,
                          scored.why.unscored_why, scored.why.partly_scored_why, replay.found_notes,
                          None if time_range is None else time_range.text(), replay.range_left_out,
                          scored.split_times, streams, scored.why.stream_unscored_why, scored.why.saturated_why,
                          scored.gap_notes, scored.step_cautions, scores_only, scored.split_ends,
                          scored.test_part, replay.stats().get("left_out", {}).get("sequence_repeat", 0),
                          backtest_context_lines(pipeline, out, config.scheduler.window is not None),
                          one_class_why=scored.why.one_class_why)


def _standing_pipeline(config: ServiceConfig, queries: BacktestQueries, note: Callable[[str], None]) -> TickPipeline:
    """The engine with `queries` registered; on_demand ones are never asked here (said), and the answers table is
    scored whole at the end. A document that registers nothing is refused before the files are read."""
    # the config's own queries are not registered by the pipeline: `queries` is the file this backtest asks (the
    # config's by default, --queries' in its place; both were asked when --queries came beside a config's)
    pipeline = TickPipeline(dataclasses.replace(config, queries=None), live_scores=False, asks_on_demand=False)
    pipeline.answer_context = {}  # each answer's context, into the answers file
    # streams sending a token the model never trained on: said once the ticks are read, every one (`_run`), not as
    # the live log says the first (review440 #7: the backtest named SAPG.DE alone, feed replay all three)
    pipeline.untrained.say = None
    registry = pipeline.registry
    if not registry.register(queries.text(registry.limits), queries.source):  # (as register_file reads a file)
        raise no_query(queries.source, "the backtest would ask nothing; give a file that lists the queries to ask")
    if on_demand := [spec.name for spec in pipeline.registry.list() if not spec.trigger.fires_by_itself]:
        note(f"skipping on_demand {'query' if len(on_demand) == 1 else 'queries'} "
             f"{', '.join(map(quoted, on_demand))}: answered when asked, live; a backtest answers standing triggers "
             f"only ({', '.join(kind for kind, row in TRIGGER_TABLE.items() if row.fires_by_itself)})")
    return pipeline


def _said_resumption(parts: AnswerParts, out: Path, threads: int, rolls_inside: bool,
                     scoring: Callable[[], None], note: Callable[[str], None]) -> bool:
    """Whether the run resumes with its answers whole and their scores owed (then `scoring` is called now: a stop
    while the ticks are read again is one before the scores); what a resume should know, said."""
    if parts.written is not None:  # stopped while it scored
        rows = parts.written_rows(out)  # (a changed OUT is refused before anything is said to begin)
        scoring()
        note(f"{out} holds every answer of this run ({rows} rows), but not their scores: "
             f"reading the files again to score them (no answer is computed again)")
        return True
    if parts.consumed and parts.threads_before not in (None, threads):
        note(f"resuming at {threads} CPU threads (--threads) a run checkpointed at {parts.threads_before}: the "
             f"answers after the resume point ({parts.consumed} ticks) may differ in their last float bits from a "
             f"run at {parts.threads_before} (runs are byte-identical only at the same thread count)")
    if parts.consumed and parts.rolls_inside_before not in (None, rolls_inside):
        note(rolls_inside_changed(rolls_inside, parts.consumed))
    return False


def _replay_ticks(pipeline: TickPipeline, replay: FileReplay, parts: AnswerParts, out: Path,
                  marks: dict[str, MarkSeries], origins: TickOrigins, scores_only: bool, progress: bool,
                  max_ticks: int | None, stop: Callable[[], bool], batch_ms: float, checkpoint_s: float,
                  chunked: bool) -> None:
    """Every tick through the engine (from the checkpoint on, when resumed), or, when only the scores are owed,
    read again for their marks alone; with the progress bar, and the heap frozen meanwhile."""
    bar = progress_bar(progress, replay, max_ticks)
    heap_frozen = freeze_heap()  # the libraries and the model: the run's full collections walk only what it made
    try:
        if scores_only:
            marks_to_score(pipeline, replay, parts, out, marks, bar, stop, max_ticks)
        else:
            consumed = (resume_at_checkpoint(pipeline, replay, parts, marks, origins, bar, stop)
                        if parts.consumed else 0)
            replay_from(pipeline, replay, parts, consumed, marks, origins, batch_ns=int(batch_ms * 1e6),
                        max_ticks=max_ticks, checkpoint_s=checkpoint_s, stop=stop, bar=bar, chunked=chunked)
    finally:
        bar.close()
        thaw_heap(heap_frozen)


def _rejects(pipeline: TickPipeline, replay: FileReplay) -> tuple[dict, dict, dict]:
    """The run's rejected rows by reason (the files' and the engine's), each reason's first row located, and the
    files' rejects by stream (a reason the engine's pipeline also counted would be said short of its count)."""
    rejected = dict(Counter(replay.rejected) + pipeline.rejected)
    examples = {**pipeline.reject_examples, **replay.rejected.examples}
    streams = {reason: said for reason, said in replay.rejected.streams_of().items()
               if reason not in pipeline.rejected}
    return rejected, examples, streams


class _Scored(NamedTuple):
    """A run's scores and the notes that explain them, for its report."""
    scores: list[QueryScore]
    split_times: dict[str, int]  # stream -> its first graded answer's event time
    split_ends: dict[str, int]  # and its last's
    stream_ticks: dict[str, int]
    why: UnscoredWhy
    gap_notes: list[str]
    step_cautions: list[str]
    test_part: bool  # some stream was cut at its test part's first tick (test_starts), not at the fraction


def _score(pipeline: TickPipeline, out: Path, marks: dict[str, MarkSeries], test_from: float | None,
           session_gap_ns: int | None, stop: Callable[[], bool], note: Callable[[str], None],
           replay: FileReplay, bar_spacing: Mapping[str, int],
           test_starts: Mapping[str, tuple[int, int]] | None = None, plot: bool = True) -> _Scored:
    """Score the whole answers file `out` a query at a time (memory holds one query's scores), then write the
    scores and the plot beside it. `stop` is polled between queries and before each file: once it returns true
    the run ends with BacktestInterrupted before its scores (the answers are safe; a --resume makes them)."""
    def stop_here() -> None:
        if stop():
            raise scores_owed(out, pipeline.ticks_in, table.select(pl.len()).collect().item())

    table = pl.scan_parquet(rust_path(out))
    answered = set(table.select(pl.col("query").unique()).collect()["query"])
    graded = table if test_from is None else later_slice(table, marks, test_from, test_starts)
    test_part = test_from is not None and any(
        name in marks and len(marks[name]) == ticks for name, (ticks, _) in (test_starts or {}).items())
    spans = graded.group_by("stream").agg(pl.col("data_ts").min().alias("first"), pl.col("data_ts").max().alias("last"))
    spans = spans.sort("stream").collect()
    split_times, split_ends = (dict(zip(spans["stream"], spans[end])) for end in ("first", "last"))
    scores = []
    for name in sorted(answered):
        stop_here()
        scores.append(score_query(name, graded.filter(pl.col("query") == name)))
    stream_ticks = {name: len(m) for name, m in marks.items()}
    why = unscored_reasons(pipeline, scores, graded, answered, stream_ticks, marks, session_gap_ns, bar_spacing)
    say_silent_queries(pipeline, answered, sorted(marks), note, replay.rejected)
    asked = {name: question.spec for name in sorted(answered) if (question := question_of(pipeline, name)) is not None}
    gaps_said = gap_notes(asked, graded, marks, session_gap_ns)
    steps_said = split_cautions(marks, session_gap_ns, replay.price_offset_of)
    stop_here()
    text = json.dumps([s.to_json() for s in scores], indent=2) + "\n"
    write_text_atomically(out.with_suffix(".scores.json"), text)
    stop_here()
    if not plot:  # (an earlier run's plot beside these answers would be taken for theirs)
        out.with_suffix(".calibration.png").unlink(missing_ok=True)
        return _Scored(scores, split_times, split_ends, stream_ticks, why, gaps_said, steps_said, test_part)
    try:  # last: the answers and scores are on disk whatever happens here
        plot_backtest_calibration(out, scores)
    except Exception as e:  # a plotting problem must not turn a finished backtest into a failure
        print(f"flashtick backtest: calibration plot skipped: {e}", file=sys.stderr)
    return _Scored(scores, split_times, split_ends, stream_ticks, why, gaps_said, steps_said, test_part)


def _check_numbers(batch_ms: float, checkpoint_s: float, test_from: float | None, max_ticks: int | None) -> None:
    """run_backtest's numeric arguments, refused with the option's name before anything is read."""
    if max_ticks is not None and (isinstance(max_ticks, bool) or not isinstance(max_ticks, int) or max_ticks < 1):
        raise ValueError(f"max_ticks (--max-ticks) must be a whole number of ticks >= 1, or None for every tick, got "
                         f"{max_ticks!r}")
    if isinstance(batch_ms, bool) or not isinstance(batch_ms, (int, float)) or not 0 < batch_ms < math.inf:
        raise ValueError(f"batch_ms (--batch-ms) must be a number of milliseconds > 0, got {quoted(batch_ms)}")
    # (NaN passed `<= 0` and turned checkpointing off for good: review420 #4)
    if isinstance(checkpoint_s, bool) or not isinstance(checkpoint_s, (int, float)) or not checkpoint_s > 0:
        raise ValueError(f"checkpoint_s must be a number of seconds > 0, got {quoted(checkpoint_s)}")
    if test_from is not None and not isinstance(test_from, TestStart) and (
            isinstance(test_from, bool) or not isinstance(test_from, (int, float)) or not 0 < test_from < 1):
        wrong = ValueError if isinstance(test_from, (str, int, float)) else TypeError
        raise wrong(f"test_from (--test-from) must be a fraction in (0, 1), an event time (ISO 8601 text such as "
                    f"\"2024-03-15\", a datetime, a pandas Timestamp, a numpy datetime64 or a TestStart) or "
                    f"{quoted(TEST_PART)} (the model's own test part), got {quoted(test_from)}")


def _refuse_nothing_replayed(parts: AnswerParts, rejected: dict[str, int], examples: dict[str, str],
                             streams: dict[str, str], range_left_out: int, time_range: TimeRange | None,
                             resume: bool) -> None:
    """A run that took no tick at all: raise NothingReplayed saying why (the time range left every row out, every
    row was rejected or filtered out, the files hold none), its parts removed; a resume with none left returns."""
    if time_range is not None and range_left_out and not resume:
        parts.remove()
        raise NothingReplayed(f"{time_range.text()} left out every row the files hold ({range_left_out}): "
                              f"nothing to backtest")
    if rejected:
        parts.remove()
        every = ("every row was left out by a filter" if set(rejected) == {"filtered_out"} else
                 "every row was rejected")
        raise NothingReplayed(f"{every}, so there is nothing to backtest:\n"
                              + "\n".join(rejected_lines(rejected, examples, streams=streams)))
    if not resume:
        parts.remove()
        raise FilesHoldNoTicks("the files hold no ticks (no data rows, or none before --max-ticks): nothing to "
                               "backtest")


def _release_and_raise(parts: AnswerParts, error: BaseException) -> NoReturn:
    """A run that ends in `error` lets go of its parts' lock at once (a --resume may follow before the error's
    traceback, which holds the run's frame, is gone); a part file that vanished, or a full disk, is said in one line."""
    parts.release()
    if (said := parts.gone(error) or parts.disk_full(error)) is not None:
        raise said from None
    raise error


