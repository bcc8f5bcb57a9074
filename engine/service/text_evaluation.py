"""`flashtick evaluate` of a Hugging Face text model: its scored_as queries (queries/scored_as.py) backtested over
the files and scored on each stream's test part, as `train`/`evaluate` split it.

A text model has no codec questions of its own (no codec.json): what it is asked, and which realised label each
answer means, is the user's query file. So evaluate runs the very backtest a user would (`backtest FILES --model DIR
--queries Q --test-from F`, F the split's test start: 0.85 of 70/15/15) and prints its summary: the same scores,
baselines and notes as that backtest, answers written to --points-out when given. Nothing is fitted on the train
part (there is no head to fit): its baselines are the test part's class frequencies and persistence, in hindsight.
And `train` refuses a text model with what to do instead (`text_model_refusal`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import tempfile
from pathlib import Path

# evaluate's options that mean something else to backtest, or that it sets itself
_OWN = frozenset({"command", "command_name", "run", "files", "model", "queries", "out", "test_from", "json", "quiet",
                  "plot", "points_out", "backtest_parser"})


def is_text_model(model_dir: Path) -> bool:
    """A Hugging Face checkpoint folder without codec.json: a text model, not a tick model."""
    return (model_dir / "config.json").is_file() and not (model_dir / "codec.json").is_file()


def text_model_refusal(model_dir: Path, command: str) -> str:
    """Why ``command`` (train, evaluate without --queries) does not take a text model, and what to do instead."""
    head = f"{model_dir} is a Hugging Face text model (no codec.json): "
    score = ("a choice query that says which realised label its choices mean (scored_as: direction_5, "
             "docs/queries.md)")
    if command == "evaluate":
        return (head + f"evaluate scores it on the answers of {score}: give them with --queries Q.yaml (a tick "
                       f"model is scored on its codec's named questions without)")
    return (head + f"{command} fits tick models only; fine-tune it in transformers (Trainer or your own loop), "
                   f"save_pretrained to a folder and serve or backtest that folder with --model; score its answers "
                   f"with {score}, in `backtest --queries Q` or `evaluate DIR FILES --queries Q`")


def evaluate_text_model(args: argparse.Namespace, model_dir: Path, test_start: float | str) -> int:
    """Backtest ``args.queries`` with the text model over ``args.files``, scoring each stream's ticks from
    ``test_start`` on (its share of ticks before the test part, or an event time: --test-from's text); returns
    backtest's exit status."""
    from engine.service.cmd_backtest import cmd_backtest

    with tempfile.TemporaryDirectory(prefix="flashtick-evaluate-") as scratch:
        out = args.points_out or Path(scratch) / "answers.parquet"
        argv = ["backtest", *map(str, args.files), "--model", str(model_dir), "--queries", str(args.queries),
                "--out", str(out), "--test-from", test_start if isinstance(test_start, str) else f"{test_start:g}",
                *(["--quiet"] if args.quiet else [])]
        # the command a user would run names an answers file of theirs, not this run's scratch one (removed below)
        shown = argv if args.points_out else [*argv[:argv.index("--out") + 1], "ANSWERS.parquet",
                                              *argv[argv.index("--out") + 2:]]
        # backtest's own parser (cli_parser_local gives it to evaluate): its options' defaults and checks
        backtest = args.backtest_parser.parse_args(argv[1:])
        backtest.command, backtest.command_name = "backtest", "flashtick backtest"
        backtest.command_line = getattr(args, "command_line", None)  # its manifest's `argv`: the evaluate that ran it
        for name, value in vars(args).items():  # the reading options they share (--columns, --streams, ...)
            if name not in _OWN and hasattr(backtest, name):
                setattr(backtest, name, value)
        print(f"flashtick evaluate: {model_dir} is a text model: backtesting {args.queries} over the files and "
              f"scoring each stream's test part ({_test_part(test_start, args.split)}), as "
              f"`{shlex.join(['flashtick', *shown])}` does", file=sys.stderr)  # (pasted whole: review442 #9)
        # under --json, stdout holds the JSON alone: the backtest's table goes to stderr with its notes
        with contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext():
            status = cmd_backtest(backtest)
        if args.json and Path(out).with_suffix(".scores.json").is_file():
            print(json.dumps({"model": str(model_dir), "queries": str(args.queries), "split": args.split,
                              "test_from": test_start,
                              "scores": json.loads(Path(out).with_suffix(".scores.json").read_text())}, indent=1))
        if args.points_out is None:  # the backtest named it as its --out: a user looked for a file gone (review396 #5)
            print(f"flashtick evaluate: note: the answers file named above ({out}) was this run's scratch copy and "
                  f"is removed now; --points-out FILE.parquet keeps the answers", file=sys.stderr)
        return status


def _test_part(test_start: float | str, split: str) -> str:
    """Where the scored part starts, in words: a share of each stream's ticks, or --test-from's time."""
    if isinstance(test_start, str):
        return f"its ticks from {test_start} on, --test-from"
    return f"its ticks after the first {100 * test_start:g}%; --split {split}"
