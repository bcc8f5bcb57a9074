"""`flashtick train`: fit a tick model to tick files and score it; and what it shares with `evaluate` (the split
and scoring options, the notes on streams left out, rows rejected and labels across pauses).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from engine.disk_full import said_if_disk_full
from engine.path_words import file_not_found, shown_path
from engine.service.cli_common import (check_outputs, exit_status, interrupted_status, printable_json,
                                       raise_interrupted, restore_handlers)
from engine.service.cli_reading import column_map_of, time_range_of
from engine.service.output_lock import take_lock
from engine.service.output_paths import PARQUET, Output, staged_file
from engine.service.staged_dir import staged_directory


def train_common(args: argparse.Namespace) -> tuple[Any, Any]:
    """(SplitSpec, EvalOptions) from the options `train` and `evaluate` share; files must exist, those a folder or a
    pattern stands for too (read as backtest reads them: connectors/input_paths.py)."""
    import torch

    from connectors.replay_entries import replay_files
    from engine.service.config import ModelSection
    from engine.service.evaluate import EvalOptions
    from engine.service.no_data import refuse_absent_inputs
    from engine.service.splits import SplitSpec

    refuse_absent_inputs(args.files)  # a pattern that matches no file yet, an empty folder: exit NO_DATA
    for f in replay_files(args.files):  # before the model loads: a missing file is said at once
        if not f.is_file():
            raise file_not_found("replay file", f)
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads must be >= 1, got {args.threads}")
    # backtest's default (model.threads): torch's own took every core of a shared machine
    torch.set_num_threads(args.threads if args.threads is not None else ModelSection().threads)
    if args.batch_ms is not None and not 0 < args.batch_ms < math.inf:
        raise ValueError(f"--batch-ms must be a number of milliseconds > 0, got {args.batch_ms:g}")
    if args.split is None:
        args.split = DEFAULT_SPLIT
    return SplitSpec.parse(args.split, gap=args.gap), EvalOptions(
        max_points=args.max_points, block=args.block, resamples=args.resamples, seed=args.seed,
        batch_ms=args.batch_ms)


DEFAULT_SPLIT = "70/15/15"  # --split's (reading_record.DEFAULT_SPLIT: a split recorded as nothing)
SIZE_FLAGS = {"hidden": 256, "layers": 4, "heads": 8, "kv_heads": 4, "intermediate": 512}  # a new model's
# held in --out while a run writes it: two runs on one --out both passed the "new or empty" check at their start, and
# the later one replaced the earlier one's checkpoint file by file, without --overwrite (review224 #2)
OUT_LOCK = ".lock"
# the model card, the last file `fit` writes: an --out holding it holds a whole checkpoint (one a swap put in place)
MODEL_CARD = "TRAINING.md"


@contextmanager
def out_held(out: Path) -> Iterator[None]:
    """--out made if missing and locked for this run (backtest's lock, output_lock.take_lock): a second train on it
    is refused at once, naming this one's pid. The lock file goes at the end, and the folders this run made if it
    left them empty (a run refused before it wrote anything)."""
    made: list[Path] = []  # the folders this run makes, --out first
    try:
        # a disk with no byte free for the lock: said as a full disk with its space, not as "[Errno 28]" alone
        with said_if_disk_full(out / OUT_LOCK):
            while True:  # again when the folder or its lock went away before it was locked: its run had finished
                made = [p for p in (out, *out.parents) if not p.exists()]
                out.mkdir(parents=True, exist_ok=True)
                if (fd := take_lock(out / OUT_LOCK, lambda holder: (  # (train runs one to a process: the CLI's)
                        f"--out {shown_path(out)} is being written by a running train{holder.pid}: one run writes a "
                        f"checkpoint at a time; wait for it to end (then --overwrite replaces its checkpoint), stop "
                        f"it ({holder.stop}), or give another --out"))) is not None:
                    break
    except OSError:
        _remove_empty(made)
        raise
    try:
        yield
    finally:
        (out / OUT_LOCK).unlink(missing_ok=True)
        os.close(fd)
        _remove_empty(made)


def _remove_empty(made: list[Path]) -> None:
    """The folders a run made (--out first, then its parents), each removed while it is left empty."""
    for folder in made:
        if not folder.exists() or any(folder.iterdir()):
            break
        folder.rmdir()


def _check_train_out(out: Path, overwrite: bool) -> None:
    """--out is a new or empty directory, or with --overwrite one that holds a checkpoint (whose files are replaced;
    what else it holds is kept: staged_dir.staged_directory)."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {shown_path(out)} is a file: give a directory to write the checkpoint in")
    held = sorted(p.name for p in out.iterdir() if p.name != OUT_LOCK) if out.is_dir() else []
    if not held:
        return
    if not overwrite:
        # a re-run after a success is refused, never a no-op: a train is not repeatable bit for bit (--max-minutes
        # ends it by the clock), so "the same model" cannot be told; a scheduled job gives --overwrite or a dated
        # --out (docs/cli.md)
        finished = " (a finished train's checkpoint: its model card TRAINING.md is there)" if MODEL_CARD in held else ""
        raise ValueError(f"--out {shown_path(out)} already holds {', '.join(held[:5])}"
                         f"{', ...' if len(held) > 5 else ''}{finished}: give a new or empty directory, or "
                         f"--overwrite to replace the checkpoint there (a service whose data directory was written "
                         f"with it will refuse the new weights); refused so that no re-run replaces a model by "
                         f"accident")
    if not (out / "config.json").is_file():
        raise ValueError(f"--out {shown_path(out)} holds files but no checkpoint (no config.json): --overwrite only "
                         f"replaces a "
                         f"checkpoint; give a new or empty directory")


def _train_settings(args: argparse.Namespace) -> tuple[Any, Any]:
    """(TrainConfig, FitOptions) of `train`'s options, each checked before any data is read."""
    import torch

    from engine.models import BUILTIN_MODEL_DIR
    from engine.service.finetune_options import FitOptions
    from engine.service.text_evaluation import is_text_model, text_model_refusal
    from engine.service.train_config import TrainConfig

    if args.max_minutes <= 0 or args.steps < 1:
        raise ValueError(f"--max-minutes must be > 0 and --steps >= 1, got {args.max_minutes:g} and {args.steps}")
    base = None if args.from_scratch else (args.base or BUILTIN_MODEL_DIR)
    if base is not None and is_text_model(Path(base)):  # said before any data is read, with what to do instead
        raise ValueError(text_model_refusal(Path(base), "train"))
    if base is not None and (given := [f"--{k.replace('_', '-')}" for k in SIZE_FLAGS if getattr(args, k) is not None]):
        raise ValueError(f"{', '.join(given)} set the size of a new model: give --from-scratch, or leave them out "
                         f"(a fine-tuned model keeps its base's size)")
    for k, default in SIZE_FLAGS.items():
        setattr(args, k, default if getattr(args, k) is None else getattr(args, k))
    split, evaluation = train_common(args)
    if args.window_ticks < 63:  # the scheduler keeps room for rolls and probes: 256 positions at least
        raise ValueError(f"--window-ticks must be >= 63 for a model that serves, got {args.window_ticks}")
    lr = args.lr if args.lr is not None else (2e-3 if base is None else 5e-4)
    cfg = TrainConfig(seed=args.seed, steps=args.steps, batch=args.batch, lr=lr, warmup=min(40, args.steps // 10),
                      max_minutes=args.max_minutes, hidden=args.hidden, layers=args.layers, heads=args.heads,
                      kv_heads=args.kv_heads, intermediate=args.intermediate, window_ticks=args.window_ticks,
                      max_positions=(args.window_ticks + 1) * 4, threads=torch.get_num_threads(),
                      qa_weight=args.answer_weight, questions_per_window=args.questions_per_window)
    if args.answer_weight < 0 or args.questions_per_window < 1:
        raise ValueError(f"--answer-weight must be >= 0 and --questions-per-window >= 1, got {args.answer_weight} "
                         f"and {args.questions_per_window}")
    if args.codec_version is not None and base is not None:
        raise ValueError("--codec-version applies to --from-scratch; a fine-tuned model keeps its base's codec")
    options = FitOptions(split=split, base=base, eval_every=args.eval_every, patience=args.patience,
                         device=args.device, evaluation=evaluation, codec_version=args.codec_version,
                         head=not args.no_head, streams=tuple(args.streams) if args.streams else None,
                         name_left_out=args.verbose, points_out=args.points_out, session_gap_ns=args.session_gap,
                         time_range=time_range_of(args), skip_bad_files=args.skip_bad_files)
    return cfg, options


def _train_sayers(args: argparse.Namespace) -> tuple[Callable[[str], None], Callable[[str], None],
                                                     Callable[[str, int, str], Any]]:
    """`fit`'s log (progress and notes), caution (what changes the results' meaning) and progress bar, as --quiet,
    --json and a terminal on stderr have them."""
    interactive = not args.quiet and not args.json and sys.stderr.isatty()

    def log(message: str) -> None:
        # how files were read, why it stopped, what --max-minutes bounds: said on a pipe too (--quiet: not)
        said = message.startswith(("note: ", "interrupted", "budget: "))
        if interactive or (said and not args.quiet and not args.json):
            from tqdm import tqdm

            tqdm.write(f"flashtick train: {message}", file=sys.stderr)

    def caution(message: str) -> None:
        """A note that changes what the results mean or what to do: said under --quiet too (as backtest's are),
        which quiets progress only; --json's record holds them."""
        if not args.json:
            from tqdm import tqdm

            tqdm.write(f"flashtick train: {message}", file=sys.stderr)

    def bar(what: str, total: int, unit: str) -> Any:
        """A phase's progress: a bar on a terminal, a line now and then on a pipe (phase_progress.py)."""
        from tqdm import tqdm

        from engine.service.phase_progress import PhaseProgress, phase_mode

        return PhaseProgress(what, total, unit, phase_mode(args.quiet, args.json, sys.stderr.isatty()),
                             lambda line: tqdm.write(f"flashtick train: {line}", file=sys.stderr))

    return log, caution, bar


def _say_trained(record: dict[str, Any], args: argparse.Namespace, paused: list[str]) -> None:
    """What a run did, its scores table and its notes, as text (not --json)."""
    from engine.service.evaluation_report import format_table
    from engine.service.finetune_card import start_kept

    t = record["training"]
    best = (f"best validation loss {t['best_validation_loss']} at step {t['best_step']}{start_kept(t)}"
            if t["best_validation_loss"] is not None else "no validation part: the last step's weights")
    trained_on = _streams_named(list(record["evaluation"]["streams"]))
    steps = f"{t['steps_done']} step{'' if t['steps_done'] == 1 else 's'}"
    print(f"trained {steps} ({t['stopped']}) on {trained_on} in {t['train_seconds']} s on "
          f"{record['device']}; {best} -> {args.out}")
    print(format_table(record["evaluation"], args.by_stream))
    # a file given on purpose whose stream was not trained on: said, not only on the model card
    say_left_out(record["skipped"], record["left_out"], args,
                 lambda line: print(f"flashtick train: note: left out {line}", file=sys.stderr))
    say_rejected_if_quiet(record["rejected"], record["ticks_read"], args, "flashtick train")
    for note in paused:  # what the scores mean: said under --quiet too
        print(f"flashtick train: note: {note}", file=sys.stderr)


def cmd_train(args: argparse.Namespace) -> int | None:
    """`train`, stopped by SIGTERM as by a Ctrl-C (a scheduler sends SIGTERM: it killed the run at once, its work
    and lock left behind, review337 #3): at the next step the best weights so far are kept and written, and the run
    exits 128 + the signal (130, 143) after saying so; a signal before training, or a second one, leaves --out as
    it was, said too."""
    inherited = _stop_on_sigterm()
    try:
        return _train(args)
    except KeyboardInterrupt as e:
        print(f"flashtick train: interrupted before the checkpoint was written: --out {shlex.quote(str(args.out))} "
              f"is as it was (no checkpoint written, the lock released); run the same command to train again",
              file=sys.stderr, flush=True)
        return interrupted_status(e)
    finally:
        restore_handlers(inherited)


def _stop_on_sigterm() -> dict[int, Any]:
    """SIGTERM raised as a KeyboardInterrupt of its own (Interrupted) while `train` runs, unless the process was
    started ignoring it; the handler it replaced, to put back."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():  # (only the main thread sets handlers)
        return {}
    inherited = {signal.SIGTERM: signal.getsignal(signal.SIGTERM)}
    if inherited[signal.SIGTERM] is not signal.SIG_IGN:
        signal.signal(signal.SIGTERM, raise_interrupted)
    return inherited


def _train(args: argparse.Namespace) -> int | None:
    started = time.time()  # --max-minutes bounds the command from here: its reading and scoring too (train_tail.py)
    from engine.models import BUILTIN_MODEL_DIR
    from engine.service.installation import user_train_refusal

    if (refusal := user_train_refusal(args.out, BUILTIN_MODEL_DIR)) is not None:  # even with --overwrite
        raise ValueError(refusal)  # (before importing the training: transformers, most of a refusal's seconds)
    from engine.service.finetune import CHECKPOINT_FILES, fit
    from engine.service.train_checkpoint import WEIGHTS_FILE

    check_outputs(args, [Output("--out", args.out, is_dir=True, atomic_files=(WEIGHTS_FILE,)),
                         Output("--points-out", args.points_out, kind=PARQUET, example="points.parquet")])
    with out_held(args.out):  # checked once this run holds it: no other run can fill it after the check
        _check_train_out(args.out, args.overwrite)  # before any data is read: a long run must not end in a refusal
        cfg, options = _train_settings(args)
        log, caution, bar = _train_sayers(args)
        # written beside --out and renamed into place once whole: a run that fails part way (a full disk) leaves
        # --out as it was, never a partial checkpoint for `serve --model` to load; what --out holds besides a
        # checkpoint's files is kept (an --overwrite deleted a user's notes and backtests/ folder: review272 #1)
        on_disk: list[str] = []  # what was removed or left beside --out: said always, and in --json's record
        # --points-out too, under a temporary name put in place after the checkpoint: a run that failed after
        # writing the points left them beside an --out that was left as it was
        with staged_file(args.points_out) as points, \
                staged_directory(args.out, carried=(OUT_LOCK,), owned=CHECKPOINT_FILES, marker=MODEL_CARD,
                                 note=lambda line: _say_on_disk(f"note: {line}", on_disk),
                                 caution=lambda line: _say_on_disk(line, on_disk)) as staging:
            record = fit([str(f) for f in args.files], column_map_of(args), staging, cfg,
                         dataclasses.replace(options, points_out=points), log, bar, caution=caution,
                         started=started)
    paused = pause_notes(record["evaluation"], args.session_gap, "out of training and scoring")
    record["cautions"] += on_disk + [f"note: {note}" for note in paused]
    if args.json:
        print(printable_json(record, indent=1, default=str))
    else:
        _say_trained(record, args, paused)
    if (signum := record["training"].get("interrupted_by")) is not None:  # a stopped run must not pass as finished
        print(f"flashtick train: interrupted: the best weights of {record['training']['steps_done']} steps were kept "
              f"and written to {shlex.quote(str(args.out))}; exit {exit_status(signum)}", file=sys.stderr, flush=True)
        return exit_status(signum)
    return rejected_status(record["rejected"], record["ticks_read"], args, "flashtick train")


def _say_on_disk(line: str, said: list[str]) -> None:
    """A folder beside --out removed or left there (a killed run's): on stderr under --quiet and --json too, as a
    change on disk is a warning, not progress (a user under --quiet never learnt a folder had been removed)."""
    from tqdm import tqdm

    said.append(line)
    tqdm.write(f"flashtick train: {line}", file=sys.stderr)


def _streams_named(names: list[str]) -> str:
    """`1 stream (SPY)`, or, of more than a message names, how many."""
    from connectors.stream_selection import SHOWN_STREAMS
    from connectors.ticks import counted, shown_name

    named = f" ({', '.join(map(shown_name, names))})" if len(names) <= SHOWN_STREAMS else ""
    return counted(len(names), "stream") + named


def say_left_out(skipped: list[str], summed_up: str | None, args: argparse.Namespace,
                 say: Callable[[str], None]) -> None:
    """The streams too short to split: one line each when few or --verbose, else in one line; that one line under
    --quiet too (a model of one series of a 1,557-series chain must not pass as one of the chain)."""
    from engine.service.splits import SHORT_NAMED

    if args.verbose or (len(skipped) <= SHORT_NAMED and not args.quiet):
        for line in skipped:
            say(line)
    elif summed_up is not None:
        say(summed_up)


def rejected_status(rejected: dict[str, int], taken: int, args: argparse.Namespace, command: str) -> int | None:
    """--max-rejected-share's exit status for `train` and `evaluate` (rejected_share.rejected_share_status)."""
    from engine.service.rejected_share import rejected_share_status

    return rejected_share_status(rejected, taken, args.max_rejected_share, command)


def say_rejected_if_quiet(rejected: dict[str, int], read: int, args: argparse.Namespace, command: str) -> None:
    """Under --quiet, which drops the reading's notes (a line per reason), the rows rejected in one line: a model
    trained or scored on a file 6% of whose rows were dropped must not pass as trained on all of it."""
    from engine.service.rejections import rejected_in_one_line

    if args.quiet and (line := rejected_in_one_line(rejected, read)) is not None:
        print(f"{command}: {line}", file=sys.stderr)


def pause_notes(result: dict[str, Any], session_gap: int | None, leaves: str) -> list[str]:
    """The notes on an evaluation ``result``'s pauses of an hour or more: its streams sampled that far apart as a
    rule (the backtest's note, in its words: `sampled_note`), and its scored answer points labelled across such a
    pause (within ``session_gap``, if given), with what --session-gap 1h does to them in words (``leaves``)."""
    from connectors.labels import session_gap_text

    points = result["answer_points"]
    notes = [points["sampled_note"]] if points.get("sampled_note") else []
    if not (across := points["across_pauses"]):
        return notes
    within = "" if session_gap is None else f" (within --session-gap {session_gap_text(session_gap)})"
    return notes + [f"{across} scored answer points are labelled across a pause of an hour or more in their stream's "
                    f"event times{within}: an answer before a close is scored against the reopen; --session-gap 1h "
                    f"leaves such points {leaves}"]
