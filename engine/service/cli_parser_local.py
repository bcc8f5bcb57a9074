"""The parsers of the ``flashtick`` commands that run in this process: `serve`, `ticklog export`, `keygen`,
`backtest`, `train`, `evaluate` and `demo`. One function a subcommand, its options and their help as a user reads
them; what the command does is in its engine/service/cmd_*.py."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from engine.path_words import user_path, user_path_text
from engine.quoting import quoted
from engine.service.cli_common import EXAMPLE_QUERIES
from engine.service.cli_options import FILES_HELP, SESSION_GAP_HELP, SharedOptions
from engine.service.cli_types import GivenOnce, OneQueriesFile, _count, _positive, _session_gap
from engine.service.deferred import Deferred
from engine.service.rejected_share import add_max_rejected_share


def add_serve(sub: Any, shared: SharedOptions, help: str) -> None:
    """`flashtick serve`."""
    p = sub.add_parser("serve", help=help)
    p.add_argument("--config", type=user_path, help="engine YAML config (default: built-in model, default endpoints, "
                                                "and its example queries)")
    p.add_argument("--queries", type=user_path, action=OneQueriesFile, help="queries YAML registered at start, one "
                   "file (overrides the config's; default: the config's queries, and with no --config a tick model's "
                   "examples, queries/examples/tick_model.yaml, a text model none); the queries a data directory "
                   "kept come back either way")
    p.add_argument("--model", type=user_path, metavar="DIR", help="checkpoint directory (overrides the config's "
                   "model.path): a Hugging Face Llama, Mistral or Qwen2, or one written by flashtick train")
    log = p.add_mutually_exclusive_group()
    log.add_argument("--data-dir", type=user_path, help="keep the tick log, the answer log and the registered queries "
                     "here, and recover from them on start (default: the config's log.dir, else "
                     "$XDG_STATE_HOME/flashtick/<model id>, i.e. ~/.local/state/flashtick/<model id>)")
    log.add_argument("--no-log", action="store_true", help="keep nothing on disk: a restart starts empty")
    scale = p.add_argument_group("scale-out (the ray extra: pip install 'flashtick[ray]'; docs/scale-out.md)")
    scale.add_argument("--shards", type=int, default=None, metavar="N",
                       help="run N engine shards as Ray actors behind this process's sockets (default: the config's "
                            "shards.count; 0: one engine in this process)")
    scale.add_argument("--ray-address", default=None, metavar="auto|HOST:PORT",
                       help="join a running Ray cluster (default: the config's shards.ray_address, else a local "
                            "Ray instance)")
    p.set_defaults(run=Deferred("cmd_serve", "cmd_serve"))


def add_ticklog(sub: Any, shared: SharedOptions, help: str) -> None:
    """`flashtick ticklog export`."""
    time_range = shared.time_range
    p = sub.add_parser("ticklog", help=help)
    ticklog_sub = p.add_subparsers(dest="ticklog_command", required=True, metavar="ACTION")
    t = ticklog_sub.add_parser("export", parents=[time_range],
                               help="write every accepted tick to a Parquet or CSV file that `backtest` and `feed "
                                    "replay` read as it is (docs/durability.md)")
    t.add_argument("data_dir", type=user_path, metavar="DATA_DIR", help="the data directory (serve --data-dir); a "
                   "serve may be using it: the export reads what was logged when it began and changes nothing there")
    t.add_argument("--out", type=user_path, required=True, metavar="FILE", help="the tick file: .parquet (or .pq) or "
                   ".csv; - for CSV on stdout")
    t.add_argument("--streams", nargs="+", default=None, metavar="PATTERN",
                   help="export only these streams (names or fnmatch globs, e.g. --streams NQM6 'ES*')")
    t.add_argument("--skip-corrupt", action="store_true", help="export past a damaged record (its ticks are lost; "
                   "the log is left as it is) instead of stopping at it")
    t.add_argument("--tz", action=GivenOnce, metavar="ZONE", help="the clock of --from/--to given without an offset, "
                   "e.g. America/New_York (default UTC), as backtest reads them; the ticks' times are written as "
                   "logged, ns since the epoch")
    t.set_defaults(run=Deferred("cmd_local", "cmd_ticklog_export"))


def add_keygen(sub: Any, shared: SharedOptions, help: str) -> None:
    """`flashtick keygen`."""
    p = sub.add_parser("keygen", help=help)
    p.add_argument("name", help="file name stem, e.g. server or alice")
    p.add_argument("--dir", type=user_path, default=Path("."), help="where to write them (default: here)")
    p.set_defaults(run=Deferred("cmd_local", "cmd_keygen"))


def add_backtest(sub: Any, shared: SharedOptions, help: str) -> None:
    """`flashtick backtest`."""
    reading, time_range = shared.reading, shared.time_range
    p = sub.add_parser("backtest", help=help, parents=[reading, time_range])
    p.add_argument("files", nargs="+", type=user_path, help=FILES_HELP)
    add_max_rejected_share(p)
    p.add_argument("--queries", type=user_path, action=OneQueriesFile, help="queries YAML, one file (default: the "
                   "config's queries, else for a tick model its example queries, queries/examples/tick_model.yaml)")
    p.add_argument("--out", type=user_path, required=True, help="answers Parquet file (.parquet or .pq)")
    p.add_argument("--config", type=user_path, help="service YAML: model, budgets and its replay section")
    p.add_argument("--batch-ms", type=float, default=None, help="event-time width of a batch (default: the "
                                                                 "config's replay.batch_ms, 100); a batch of more "
                                                                 "than 8,192 ticks is answered every 8,192, as `feed "
                                                                 "replay --batch-ms` sends it")
    p.add_argument("--model", type=user_path, metavar="DIR", help="checkpoint directory (overrides the config's "
                   "model.path)")
    p.add_argument("--test-from", type=_test_from, default=None, metavar="FRACTION|TIME|test", help="score only "
                   "the answers after this fraction of each stream's ticks, e.g. 0.7, or from this event time on, "
                   "e.g. 2024-03-13 (on --tz's clock without an offset; every answer is still written); "
                   "test: the --model checkpoint's own test part, as `flashtick evaluate` scores it (its split, "
                   "from its evaluation.json)")
    p.add_argument("--max-ticks", type=_count, default=None, help="stop after N ticks")
    p.add_argument("--resume", action="store_true", help="continue an interrupted backtest of the same files, "
                   "queries and options from its last checkpoint (OUT.parts/)")
    p.add_argument("--overwrite", action="store_true", help="replace a finished backtest of another model at --out "
                   "(without it, one is refused, exit 2, as train refuses an --out holding a checkpoint)")
    p.add_argument("--checkpoint-s", type=float, default=None, help="wall seconds between answer checkpoints "
                   "(default: the config's replay.checkpoint_s, 10)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (it shows only on a terminal anyway)")
    p.add_argument("--no-plot", action="store_true", help="no calibration plot (OUT.calibration.png; one an earlier "
                   "run left there is removed): the scores are written all the same, and a sweep of short runs "
                   "skips about half its time")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads for the forward (default: the "
                   "config's model.threads, 1)")
    p.add_argument("--by-stream", action="store_true", help="also a row per stream (instrument) under each query, "
                   "from the same answers (of several streams, OUT.scores.json has them as `by_stream` either way)")
    p.add_argument("--session-gap", type=_session_gap, default=None, metavar="DURATION",
                   help=SESSION_GAP_HELP + " (overrides the config's answers.session_gap_s; the adaptation's labels "
                   "end there too)")
    p.set_defaults(run=Deferred("cmd_backtest", "cmd_backtest"))


def _test_from(text: str) -> float | str:
    """`backtest --test-from`: a number (its range is checked with the run's other numbers: run_backtest), an event
    time (its text, its syntax checked here: read on --tz's clock once every option is read, test_start.py), or
    `test`, the checkpoint's own split, which cmd_backtest reads from the checkpoint once it knows which."""
    from engine.service.checkpoint_notes import TEST_PART

    if text == TEST_PART:
        return text
    return _test_from_time_or_fraction(text, f", or {quoted(TEST_PART)} (the model's own test part)")


def _evaluate_test_from(text: str) -> float | str:
    """`evaluate --test-from`: a fraction of each stream's ticks, or an event time (its text)."""
    return _test_from_time_or_fraction(text, "")


def _test_from_time_or_fraction(text: str, more: str) -> float | str:
    from connectors.time_range import parse_time
    from engine.service.test_start import looks_like_time

    if looks_like_time(text):
        try:
            parse_time(text, "--test-from")
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a fraction of each stream's ticks in (0, 1), e.g. 0.7, or an "
                                         f"event time, e.g. 2024-03-13{more}, got {quoted(text)}") from None


def _train_data_options() -> argparse.ArgumentParser:
    """What `train` and `evaluate` share: how the files are split, and the scoring knobs."""
    data = argparse.ArgumentParser(add_help=False)
    data.add_argument("--split", default=None, help="train/validation/test percent of each stream, in time "
                      "order (default 70/15/15, evaluate: the split its checkpoint was trained with; 70/30: no "
                      "validation part, so train stops by --steps alone)")
    data.add_argument("--gap", type=int, default=0, help="ticks left out between parts (default and minimum: the "
                      "longest question horizon)")
    data.add_argument("--max-points", type=int, default=20_000, help="about this many test answer ticks scored per "
                      "stream (default 20000; evenly spread runs of half a window, so at least one run)")
    data.add_argument("--block", type=int, default=100, help="bootstrap block, consecutive answer points (default 100)")
    data.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    data.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resamples and of which test points "
                      "are scored (train: of the new weights and the windows trained on too) (default 0)")
    data.add_argument("--device", default="auto", help="auto (CUDA when present, else CPU), cpu or cuda[:N]")
    data.add_argument("--threads", type=int, default=None, help="torch CPU threads (default 1, as backtest's: "
                      "model.threads' default; a second thread spin-waits behind other processes on a shared machine)")
    data.add_argument("--json", action="store_true", help="print the record as JSON instead of the table")
    data.add_argument("--verbose", action="store_true", help="name each stream too short to split, one line each "
                      "(more than a few are otherwise summed up in one line)")
    data.add_argument("--by-stream", action="store_true", help="also a row per stream (instrument) under each "
                      "question, from the same answers (of several streams, the JSON has them as `by_stream` "
                      "either way)")
    data.add_argument("--batch-ms", type=float, default=None, metavar="MS", help="score only the last tick of "
                      "each event-time batch of MS milliseconds, where `backtest --batch-ms MS` answers (cut as it "
                      "cuts them), so the scores compare with `backtest --test-from`'s (default: every tick, "
                      "mid-burst ones included)")
    data.add_argument("--points-out", type=user_path, default=None, metavar="FILE.parquet", help="write every scored "
                      "test answer point here: stream, tick, data_ts, question, realised label and each column's "
                      "probabilities, to recompute the table from")
    data.add_argument("--session-gap", type=_session_gap, default=None, metavar="DURATION",
                      help=SESSION_GAP_HELP + " (train: nor trained, calibrated or fitted on in any part; the "
                      "checkpoint records it, and evaluate or backtest with another says so)")
    return data


def add_train(sub: Any, shared: SharedOptions, help: str) -> None:
    """`flashtick train`: the files, how to read and split them (`_train_data_options`), the optimisation and the
    model's size."""
    reading, time_range = shared.reading, shared.time_range
    data = _train_data_options()
    p = sub.add_parser("train", parents=[reading, time_range, data], help=help)
    p.add_argument("files", nargs="+", type=user_path, help=FILES_HELP)
    p.add_argument("--out", type=user_path, required=True, help="checkpoint directory to write (new or empty)")
    p.add_argument("--overwrite", action="store_true", help="replace the checkpoint already in --out (without it, "
                   "an --out that holds one is refused, exit 2: a re-run after a success never replaces its model)")
    add_max_rejected_share(p)
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-scratch", action="store_true", help="a new model instead of fine-tuning")
    start.add_argument("--base", type=user_path, metavar="DIR", help="checkpoint to fine-tune (default: the built-in "
                       "model)")
    p.add_argument("--steps", type=int, default=300, help="optimiser steps (default 300)")
    p.add_argument("--batch", type=int, default=8, help="windows per step (default 8)")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default 5e-4 fine-tuning, 2e-3 new)")
    p.add_argument("--max-minutes", type=float, default=10.0,
                   help="end the whole run by N minutes (default 10): reading the files counts, and "
                   "training stops in time for the calibration and scoring after it (counted in windows, priced at "
                   "its own forwards); the first step always runs")
    p.add_argument("--eval-every", type=int, default=20, help="steps between validation checks (default 20)")
    p.add_argument("--patience", type=int, default=5, help="checks without a better validation loss before "
                   "stopping (default 5)")
    # The answers are what users act on: weighting their loss 3x, over 128 answer points a window, lifted the
    # fine-tuned direction_20 accuracy on all three shared instruments (docs/model.md, "Training on your own ticks")
    p.add_argument("--answer-weight", type=float, default=3.0, help="weight of the answer loss beside the "
                   "next-token loss (default 3)")
    p.add_argument("--questions-per-window", type=int, default=128, help="answer points trained per window "
                   "(default 128)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or log lines, only the final table (and "
                   "one line on the streams too short to split, and one on the rows the files' reading rejected, if "
                   "any; the notes on what the split and scores mean, and the reading's cautions such as two "
                   "instruments in one stream, are said still)")
    from engine.service.cmd_train import SIZE_FLAGS

    size = p.add_argument_group("model size (with --from-scratch)")
    for flag, default in SIZE_FLAGS.items():
        size.add_argument(f"--{flag.replace('_', '-')}", type=int, default=None, help=f"(default {default})")
    p.add_argument("--window-ticks", type=int, default=127, help="ticks per training window (default 127)")
    p.add_argument("--no-head", action="store_true", help="answers from the model alone: no answer head (a "
                   "logistic regression on microstructure features blended with the model's answers, fitted on the "
                   "train and validation parts)")
    size.add_argument("--codec-version", type=int, choices=(1, 2), default=None,
                      help="BinnedCodec spec: 1 absolute bins, 2 relative to each stream's scales (default: the "
                      "built-in model's)")
    p.set_defaults(run=Deferred("cmd_train", "cmd_train"))


def add_evaluate(sub: Any, shared: SharedOptions, help: str) -> None:
    """`flashtick evaluate`: a checkpoint scored on the files' test part, read and split as `train` does."""
    reading, time_range = shared.reading, shared.time_range
    data = _train_data_options()
    p = sub.add_parser("evaluate", parents=[reading, time_range, data], help=help)
    p.add_argument("model", type=user_path_text, help="checkpoint directory (with codec.json, or a Hugging Face "
                   "text model with --queries), or 'builtin'")
    p.add_argument("files", nargs="+", type=user_path, help=FILES_HELP)
    p.add_argument("--queries", type=user_path, default=None, metavar="YAML", help="a Hugging Face text model: "
                   "backtest these queries and score their scored_as answers on each stream's test part "
                   "(docs/queries.md); a tick model is scored on its codec's questions")
    add_max_rejected_share(p)
    p.add_argument("--test-from", type=_evaluate_test_from, default=None, metavar="TIME|FRACTION", help="score each "
                   "stream from this event time on, e.g. 2024-03-13 (on --tz's clock without an offset): files the "
                   "model never saw are scored whole; the ticks before it, less the gap, fit the baselines, so "
                   "give files from before it too (the training files serve); or from this fraction of each "
                   "stream's ticks, e.g. 0.8 (the split's train and validation share the rest)")
    p.add_argument("--plot", type=user_path, metavar="PNG", help="write the calibration diagram here (needs "
                   "matplotlib): a .png, .svg, .pdf, .jpg or .jpeg name, checked before the run")
    p.add_argument("--quiet", action="store_true", help="no notes on how the files were read, only the table (and "
                   "one line on the streams too short to split, and one on the rows the files' reading rejected, if "
                   "any; the notes on what the split and scores mean, and the reading's cautions such as two "
                   "instruments in one stream, are said still)")
    # a text model's evaluation is a backtest of its --queries (text_evaluation.py): given backtest's own parser
    p.set_defaults(run=Deferred("cmd_evaluate", "cmd_evaluate"), backtest_parser=sub.choices.get("backtest"))


def add_demo(sub: Any, shared: SharedOptions, help: str) -> None:
    """`flashtick demo`."""
    reading = shared.reading
    # the reading options (--streams, --price-offset, ...) read the --replay files, as `feed replay` reads its own
    p = sub.add_parser("demo", help=help, parents=[reading])
    p.add_argument("--seconds", type=_positive, default=20.0, help="how long it feeds (default 20)")
    p.add_argument("--replay", type=user_path, nargs="+",
                   help="replay these files (or folders of them) instead of the synthetic market")
    p.add_argument("--rate", type=_positive, default=None, help="ticks per second fed (default 400, halved while "
                   "the engine falls behind on this CPU; a rate given here is kept)")
    p.add_argument("--queries", type=user_path, action=OneQueriesFile, default=EXAMPLE_QUERIES,
                   help="the standing queries, one file (default: the built-in model's examples)")
    p.set_defaults(run=Deferred("cmd_serve", "cmd_demo"))
