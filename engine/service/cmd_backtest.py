"""`flashtick backtest`: replay files through the engine in this process and score every answer; its inputs,
outputs, checkpoint for --resume and its stop on a signal.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from connectors.cautions import labelled
from engine.service.checkpoint_notes import (TEST_PART, checkpoint_evaluation, compared_reading, current_reading,
                                             own_test_from, own_test_note, read_as_trained, session_gap_mismatch)
from engine.service.cli_common import (EXAMPLE_QUERIES, TEXT_EXAMPLE_QUERIES, WorkWhole, check_outputs,
                                       configured_queries_file, exit_status, interrupted_status, is_tick_model,
                                       raise_interrupted, restore_handlers, service_config)
from engine.service.cli_reading import column_map_of, streams_to_read, time_range_of
from engine.service.backtest_outputs import backtest_outputs
from engine.text_files import read_text


def _backtest_inputs(args: argparse.Namespace) -> tuple[Any, Path]:
    """The config (with --threads) and the queries file a backtest runs."""
    config = service_config(args.config, model=args.model)
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"--threads must be >= 1, got {args.threads}")
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, threads=args.threads))
    if args.session_gap is not None:
        config = dataclasses.replace(config, answers=dataclasses.replace(config.answers,
                                                                         session_gap_s=args.session_gap / 1e9))
    queries = args.queries or configured_queries_file(config, args.config)
    if queries is None:
        if not is_tick_model(config):
            raise ValueError(f"a text model's questions are free text: give them with --queries FILE (an example: "
                             f"{TEXT_EXAMPLE_QUERIES})")
        print(f"flashtick backtest: note: no --queries: asking {EXAMPLE_QUERIES.name} (the built-in model's example "
              f"queries: direction, volatility and move over the next ticks)", file=sys.stderr, flush=True)
        queries = EXAMPLE_QUERIES
    return config, Path(queries)


def cmd_backtest(args: argparse.Namespace) -> int:
    # From its first line to the process's exit a signal is said in one line: a run ended by one, or by an error,
    # keeps its handlers noting signals through the exit (WorkWhole, cli._run), whose teardown (seconds, with torch
    # loaded) a Ctrl-C otherwise killed by the signal (rc -2, no line) or met with a traceback.
    at_start = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _backtest(args)
    except KeyboardInterrupt as e:  # before the replay began: the libraries, the config, the model, the files
        args.work_whole = WorkWhole(None, at_start)
        print(_before_any_tick(args), file=sys.stderr)
        return interrupted_status(e)  # (SIGTERM's too: raise_interrupted, from the CLI's start or the abort below)
    except Exception:  # said by cli._run
        if getattr(args, "work_whole", None) is None:
            args.work_whole = WorkWhole(ERROR_EXIT_LINE, at_start)
        raise


def _backtest(args: argparse.Namespace) -> int:
    """`flashtick backtest` once cmd_backtest has said what a signal or an error does to its exit."""
    # the libraries and the config load with Python's own signal handling: a Ctrl-C is a KeyboardInterrupt (and a
    # SIGTERM one of its own, Interrupted: the CLI set raise_interrupted for a backtest)
    from engine.service.backtest import BacktestInterrupted

    time_range = time_range_of(args)  # a mistyped time is said before the model loads
    if isinstance(args.test_from, str) and args.test_from != TEST_PART:  # --test-from TIME, on --tz's clock
        from engine.service.test_start import test_start_of

        args.test_from = test_start_of(args.test_from, args.tz, args.command_name)
    config, queries = _backtest_inputs(args)
    _own_test_part(args, config)
    check_outputs(args, backtest_outputs(Path(args.out)), queries,
                               *([Path(config.model.path)] if config.model.path else []))
    signals = _StopSignals(args)
    _reading_notes(args, config)
    report = None
    try:
        report = _run(args, config, queries, time_range, signals)
        if (done := report.already_complete) is not None:  # --resume of a finished run that is this one: done, as
            report = None  # a scheduler re-runs it (run_backtest returns the finished run's report, read back)
            print(f"flashtick backtest: {done}", file=sys.stderr, flush=True)
            return _finished_status(args, done)
    except BacktestInterrupted as e:
        args.work_whole = WorkWhole(None, signals.inherited)  # a signal more, in the exit too, changes nothing
        print(f"flashtick backtest: {e}", file=sys.stderr)
        return exit_status(signals.stopped_by[0] if signals.stopped_by else None)  # the signal that asked to stop
    except KeyboardInterrupt as e:  # the second signal: aborted where it was, but what is on disk is whole
        args.work_whole = WorkWhole(None, signals.inherited)
        print(f"flashtick backtest: aborted; {_kept_on_disk(Path(args.out))}" if signals.began.is_set() else
              _before_any_tick(args), file=sys.stderr)
        return interrupted_status(e)
    except Exception:  # a file refused, a model that does not load: said by cli._run, signals noted until the exit
        args.work_whole = WorkWhole(ERROR_EXIT_LINE, signals.inherited)
        raise
    finally:  # as the process had them (a library's own included), unless the run ended: see WorkWhole
        if report is None and getattr(args, "work_whole", None) is None:
            restore_handlers(signals.inherited)
    return _after_run(args, report, signals)


def _own_test_part(args: argparse.Namespace, config: Any) -> None:
    """`--test-from test`: from here on the number it stands for, as if given (cut, notes and record alike); said
    before the model loads (run_backtest says it so to a Python caller)."""
    if args.test_from == TEST_PART:
        model = config.model.path
        args.test_from = own_test_from(checkpoint_evaluation(Path(model)) if model is not None else None, model)
        print(f"flashtick backtest: note: {own_test_note(args.test_from)}", file=sys.stderr, flush=True)


class _StopSignals:
    """What SIGINT and SIGTERM do during a backtest. While the model loads and the files open (seconds) there is
    no boundary to stop at and nothing to keep: a signal ends the run at once, said in one line (a stop there
    replayed a batch and left a checkpoint). Once the replay begins, the first signal ends the run at the next
    batch boundary, after a checkpoint (once the answers file is whole: before their scores); a second one (of
    either kind) aborts where it is, for a user (or a supervisor's second SIGTERM) who cannot wait. A signal the
    process was started ignoring (SIGINT under `cmd &` in a script, nohup) stays ignored: a Ctrl-C at the terminal
    must not stop a background run once its ticks flow, when it could not while it loaded."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.out = args.out
        self.stop = threading.Event()
        self.began = threading.Event()  # set once the model is loaded and the files opened: the replay begins
        self.scoring = threading.Event()  # set once the answers file is whole: a stop then ends it before scores
        self.stopped_by: list[int] = []
        self.inherited = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
        self._handle_with(raise_interrupted)
        if self.inherited[signal.SIGINT] is signal.SIG_IGN:  # (review349 #10: a `kill -INT` was ignored unsaid)
            print("flashtick backtest: note: started with SIGINT ignored (a script's \"cmd &\", or nohup): Ctrl-C "
                  "and kill -INT do not stop it; kill -TERM PID does, at the next batch boundary, exit 143",
                  file=sys.stderr, flush=True)

    def _handle_with(self, handler: Any) -> None:
        for signum, before in self.inherited.items():
            if before is not signal.SIG_IGN:
                signal.signal(signum, handler)

    def request_stop(self, signum: int, _: Any) -> None:
        self.stop.set()
        self.stopped_by.append(signum)
        for again in (signal.SIGINT, signal.SIGTERM):
            if self.inherited[again] is not signal.SIG_IGN:
                signal.signal(again, raise_interrupted)
        # while the answers file is scored there is no batch boundary left, and nothing to lose: said in those words
        said = (f"the answers are written to {self.out}; stopping the scores" if self.scoring.is_set() else
                "stopping at the next batch boundary")
        print(f"flashtick backtest: {said} (again to abort now)", file=sys.stderr, flush=True)

    def scoring_begins(self) -> None:
        self.scoring.set()
        print(f"flashtick backtest: answers written to {self.out}; scoring them", file=sys.stderr, flush=True)

    def replay_begins(self) -> None:  # from here a signal stops at a batch boundary, after a checkpoint
        self.began.set()
        self._handle_with(self.request_stop)


def _reading_notes(args: argparse.Namespace, config: Any) -> None:
    """The reading the model was trained on, taken for its own files, and how this run's differs from it, said
    (whether the in-sample note may count in training's tick positions is run_backtest's: reads_as_trained)."""
    from engine.service.reading_record import FILE_READING, reading_mismatch

    said = lambda line: print(f"flashtick backtest: note: {line}", file=sys.stderr, flush=True)  # noqa: E731
    # its price options on any file, its layout on its own files (trained_options: evaluate's rule, no split)
    recorded = read_as_trained(args, config.model.path, said, splits=False, config=config)
    reading_now = current_reading(args, config)
    compared = compared_reading(config.model.path, args.files, FILE_READING)  # (other files' layout is their own)
    if (mismatch := reading_mismatch(recorded, reading_now, compared)) is not None:
        said(mismatch)
    # (apart: other labelled points leave the ticks, and so training's tick positions, as they were)
    if (labelled_otherwise := session_gap_mismatch(recorded, config.answers.session_gap_ns)) is not None:
        said(labelled_otherwise)


def _run(args: argparse.Namespace, config: Any, queries: Path, time_range: Any, signals: _StopSignals) -> Any:
    """The replay and its scores (engine/service/backtest.py), with the command line's options."""
    from engine.service.backtest import run_backtest

    return run_backtest(config, [str(f) for f in args.files], queries, args.out,
                        columns=column_map_of(args, config),
                        batch_ms=args.batch_ms if args.batch_ms is not None else config.replay.batch_ms,
                        max_ticks=args.max_ticks, progress=False if args.quiet else None, resume=args.resume,
                        overwrite=args.overwrite,
                        checkpoint_s=args.checkpoint_s if args.checkpoint_s is not None
                        else config.replay.checkpoint_s, stop=signals.stop.is_set, test_from=args.test_from,
                        note=lambda line: print(f"flashtick backtest: {labelled(line)}", file=sys.stderr),
                        streams=streams_to_read(args, config), time_range=time_range,
                        scoring=signals.scoring_begins, replaying=signals.replay_begins,
                        command_line=getattr(args, "command_line", None), plot=not getattr(args, "no_plot", False),
                        skip_bad_files=args.skip_bad_files)


def _after_run(args: argparse.Namespace, report: Any, signals: _StopSignals) -> int:
    """The report of a run whose answers, scores and plot are on disk (and its in-sample notes said, through the
    run's `note`): a signal from here until the process ends (or main returns) is said in one line, exit 130
    (143), and cuts nothing short. The CLI's handlers stay until then (cli._run)."""
    args.work_whole = whole = WorkWhole(_whole_line(report), signals.inherited)
    if signals.stopped_by:  # came after the last point the run polled `stop` (its plot being drawn)
        whole.signum = signals.stopped_by[0]
    print(report.summary(by_stream=args.by_stream), flush=True)
    from engine.service.rejected_share import rejected_share_status

    return whole.ended(rejected_share_status(report.rejected, report.ticks, args.max_rejected_share,
                                             "flashtick backtest") or 0)


def _finished_status(args: argparse.Namespace, done: Any) -> int:
    """The status of a no-op --resume (``done``: finished_backtest.AlreadyComplete): the finished run's, its rows
    rejected checked against this command's --max-rejected-share, so that an hourly re-run exits as the run did."""
    from engine.service.rejected_share import rejected_share_status

    if args.max_rejected_share is None:
        return 0
    if done.rejected is None:  # a manifest from before it kept the counts: nothing to check them against
        print("flashtick backtest: note: the finished run's manifest does not hold its rows rejected (written by an "
              "older flashtick): --max-rejected-share is not checked", file=sys.stderr, flush=True)
        return 0
    return rejected_share_status(done.rejected, done.taken, args.max_rejected_share, "flashtick backtest") or 0


def _before_any_tick(args: argparse.Namespace) -> str:
    """What a signal before the replay began says (with --resume, the checkpoint it resumes is kept as it was)."""
    return "flashtick backtest: interrupted before any tick; " + (
        f"nothing changed: {_kept_on_disk(Path(args.out))}" if args.resume else "nothing kept")


# What a signal says once a backtest has failed (its error said, or about to be): what its checkpoint holds stays
ERROR_EXIT_LINE = "flashtick backtest: interrupted while exiting on the error above; what was on disk is kept"


def _whole_line(report: Any) -> str:
    """What a signal after the run says: nothing of it is lost."""
    out = Path(report.out)
    return (f"flashtick backtest: interrupted after the run: nothing lost, the answers are whole in {out}, their "
            f"scores in {out.with_suffix('.scores.json')}")


def _kept_on_disk(out: Path) -> str:
    """What an aborted backtest left, from its checkpoint (parts are written whole before the manifest names
    them, so the manifest is the truth whenever the abort came), and what --resume does with it."""
    from engine.service.answer_parts import MANIFEST, PARTS_SUFFIX

    parts = out.with_name(out.name + PARTS_SUFFIX)
    try:
        kept = json.loads(read_text(parts / MANIFEST))
    except (OSError, ValueError):
        kept = None
    if isinstance(kept, dict) and kept.get("written"):  # aborted while it scored (AnswerParts.answers_written)
        return (f"the answers are whole in {out}, but not their scores and plot: run the same command with --resume "
                f"to make them")
    if isinstance(kept, dict) and kept.get("consumed"):
        return (f"{kept.get('answers', 0)} answers of the first {kept['consumed']} ticks kept in {parts} (the last "
                f"checkpoint); run the same command with --resume to continue from there")
    if parts.is_dir():
        return "no checkpoint was written yet: nothing kept; --resume starts from the beginning"
    return (f"no checkpoint in {parts}: aborted before replaying began, or after the answers and their scores were "
            f"written to {out}")
