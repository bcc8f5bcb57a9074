"""Tick model quality on every shared instrument: zero-shot (leave one instrument out), fine-tuned, built-in.

    nice -n 19 python -m benchmarks.tick_model_quality --models-dir DIR   # ~1 h the first time, then minutes

For each shared instrument X (BTCUSDT, ETHUSDT, EURUSD), three models are scored by
`evaluate_streams` (engine/service/evaluate.py: what `flashtick evaluate --split 70/30`
prints) on the same ticks: the last 30% in time of X's files, less the 50-tick gap,
against `prior`, `majority` and `logistic` fitted on the first 70%, with the block-bootstrap
intervals of model minus each baseline. The rows:

* `zero_shot` - a model whose training never saw X. Where the built-in model's card
  (TRAINING.md) names X among its data, a model of the built-in recipe
  (engine.service.train_builtin: codec v1, 127-tick windows, seed 0, 400-step schedule) on the
  synthetic market and the other shared instruments, cut by `--loo-minutes`, then calibrated
  on validation slices of those instruments (`--calibrate-only --sets`); otherwise (ETHUSDT)
  the built-in model itself.
* `fine_tuned` - `flashtick train X-files --split 60/10/30` (the built-in model fine-tuned on
  the first 60%, early-stopped and calibrated on the next 10%, its defaults otherwise): it
  uses the first 70% only, and its own test slice is checked to be the scored one.
* `builtin` - the shipped model, for reference (for ETHUSDT the zero-shot row, scored once).

Checkpoints are trained into --models-dir when missing and reused when there, so a rerun
only evaluates. The JSON's `bar` says, per instrument and row, whether the model's Brier is
<= the prior's and its accuracy >= the majority class's on every question, and how its
direction_5 / direction_20 scores compare with the logistic regression's.

The older version of this report (the built-in model on held-out synthetic data and the last
20% of each real set, next-token log-loss against n-gram baselines) is gone: a different
split and baselines than `flashtick evaluate` uses; docs/model.md keeps its last table.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import math
import os
import re
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from benchmarks.common import add_data_dir_argument, add_output_arguments, machine, output_dir
from engine.models import BUILTIN_MODEL_DIR
from engine.service import cli
from engine.service.datasets import INSTRUMENTS, LOADERS, data_available
from engine.service.evaluate import EvalOptions, evaluate_streams
from engine.service.features import read_head
from engine.service.splits import SplitSpec, min_part_ticks, prepare
from engine.service.stream_reading import read_streams
from engine.service.tick_checkpoint import load_tick_model, window_ticks
from engine.service.train_builtin import calibrate_only, reproduce_command, train, write_training_md
from engine.service.train_config import TrainConfig

FILES = {"BTCUSDT": ("trades.csv", "bbo.parquet"), "ETHUSDT": ("trades.csv", "bbo.parquet"),
         "EURUSD": ("eurusd_ticks_2019-02-04_05.parquet",)}  # in LOADERS[X][1]
SCORED_SPLIT = "70/30"  # every row's test slice and baselines
FINETUNE_SPLIT = "60/10/30"  # train + validation inside the scored split's 70%; the same test slice
# The built-in mix (synthetic 0.5, BTCUSDT 0.2, EURUSD 0.3), with ETHUSDT in the left-out set's slot: the other
# two instruments in INSTRUMENTS order get 0.2 and 0.3 whichever is left out.
LOO_MIX = (0.5, 0.2, 0.3)
ROWS = ("zero_shot", "fine_tuned", "builtin")
DIRECTIONS = ("direction_5", "direction_20")


@dataclass(frozen=True)
class Settings:
    data_dir: Path
    models_dir: Path
    builtin: Path = BUILTIN_MODEL_DIR
    loo_recipe: TrainConfig = TrainConfig(max_minutes=12.0)  # real_sets and mix are set per instrument
    finetune_minutes: float = 8.0
    finetune_extra: tuple[str, ...] = ()  # more `flashtick train` options (the test's tiny run)
    threads: int = 1
    evaluation: EvalOptions = EvalOptions()
    loo_calibration: EvalOptions | None = None  # the leave-one-out models' answer points (None: --calibrate-only's)


def instrument_files(data_dir: Path, name: str) -> list[Path]:
    return [data_dir / LOADERS[name][1] / f for f in FILES[name]]


def trained_on(card: Path) -> tuple[str, ...]:
    """The real data sets a model card of engine.service.train_builtin lists in its `Data (mix ...)` line."""
    match = re.search(r"^- Data \(mix \([^)]*\) synthetic((?: / \w+)*)\):", card.read_text(), re.MULTILINE)
    if match is None:
        raise ValueError(f"{card}: no '- Data (mix ...) synthetic / ...' line; cannot tell what the model saw")
    return tuple(n for n in match.group(1).split(" / ") if n)


def card_summary(model_dir: Path) -> dict[str, Any]:
    """How a checkpoint trained by engine.service.train_builtin was made, from its TRAINING.md."""
    text = (model_dir / "TRAINING.md").read_text()
    find = lambda pattern: (m.group(1) if (m := re.search(pattern, text)) else None)  # noqa: E731
    return {"command": find(r"- Command: `([^`]+)`"), "steps": int(find(r"- Steps: (\d+)") or 0),
            "optimisation_minutes": round(float(find(r"([\d.]+) s of optimisation") or "nan") / 60, 1),
            "calibration_command": find(r"## Answer calibration\s+- Command: `([^`]+)`"),
            "trained_on": ["synthetic", *trained_on(model_dir / "TRAINING.md")], "card": str(model_dir / "TRAINING.md")}


def nice_prefix() -> str:
    """`nice -n N ` as this process runs (the recorded commands say how they ran), '' when not niced."""
    niceness = os.nice(0)
    return f"nice -n {niceness} " if niceness else ""


def reused(model_dir: Path) -> dict[str, Any] | None:
    """The record of a finished training in `model_dir` (how_trained.json is written last), else None."""
    record = model_dir / "how_trained.json"
    return json.loads(record.read_text()) if record.is_file() else None


def leave_one_out_model(name: str, s: Settings, log: Callable[[str], None]) -> tuple[Path, dict[str, Any]]:
    """The built-in recipe on everything but `name`, calibrated on validation slices of what it trained on."""
    out = s.models_dir / f"loo_{name}"
    if (how := reused(out)) is not None:
        log(f"{name}: reusing the leave-one-out model in {out}")
        return out, how
    sets = tuple(n for n in INSTRUMENTS if n != name)  # instruments, not another view of the one held out
    cfg = dataclasses.replace(s.loo_recipe, real_sets=sets, mix=LOO_MIX, threads=s.threads)
    log(f"{name}: training the built-in recipe without it on synthetic + {', '.join(sets)} "
        f"(at most {cfg.max_minutes:g} min)")
    t0 = time.time()
    stats = train(cfg, out, log, s.data_dir)
    recipe = reproduce_command(cfg, stats["steps_done"], s.data_dir).removeprefix("nice -n 19 ")  # (its advice)
    command = f"{nice_prefix()}{recipe} --out {out}"  # how this one ran
    write_training_md(cfg, stats, out, command)
    t1 = time.time()
    calibrate_only(out, s.data_dir, None, sets, s.loo_calibration)
    how = {"command": command,
           "calibration_command": f"{nice_prefix()}python -m engine.service.train_builtin --calibrate-only "
                                  f"--data-dir {s.data_dir} --sets {','.join(sets)} --out {out}",
           "steps": stats["steps_done"], "schedule_steps": cfg.steps, "stopped": stats["stopped"],
           "optimisation_minutes": round(stats["train_seconds"] / 60, 1), "minutes": round((t1 - t0) / 60, 1),
           "calibration_minutes": round((time.time() - t1) / 60, 1), "trained_on": ["synthetic", *sets],
           "final_losses": {"next_token": stats["final_lm_loss"], "answer": stats["final_qa_loss"]},
           "config": dataclasses.asdict(cfg)}
    if s.loo_calibration is not None:  # (not what the command above runs: say what it was)
        how["calibration_options"] = dataclasses.asdict(s.loo_calibration)
    (out / "how_trained.json").write_text(json.dumps(how, indent=1) + "\n")
    return out, how


def fine_tuned_model(name: str, s: Settings, log: Callable[[str], None]) -> tuple[Path, dict[str, Any]]:
    """`flashtick train` on the instrument's files, fine-tuning the built-in model (its defaults otherwise)."""
    out = s.models_dir / f"finetuned_{name}"
    if (how := reused(out)) is not None:
        log(f"{name}: reusing the fine-tuned model in {out}")
        return out, how
    argv = ["train", *map(str, instrument_files(s.data_dir, name)), "--out", str(out), "--split", FINETUNE_SPLIT,
            "--max-minutes", f"{s.finetune_minutes:g}", "--threads", str(s.threads), "--json", *s.finetune_extra]
    if s.builtin != BUILTIN_MODEL_DIR:
        argv += ["--base", str(s.builtin)]
    log(f"{name}: flashtick {shlex.join(argv)}")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        rc = cli.main(argv)
    if rc != 0:
        raise RuntimeError(f"flashtick train on {name} failed (exit {rc}; its message is above)")
    record = json.loads(printed.getvalue())
    t = record["training"]
    how = {"command": f"{nice_prefix()}flashtick {shlex.join(argv)}", "steps": t["steps_done"],
           "schedule_steps": record["config"]["steps"], "stopped": t["stopped"], "best_step": t["best_step"],
           "optimisation_minutes": round(t["train_seconds"] / 60, 1), "minutes": round(record["total_seconds"] / 60, 1),
           "split": record["split"], "parts": record["evaluation"]["streams"], "base": record["base"],
           "calibration_source": record["calibration"]["source"]}
    (out / "how_trained.json").write_text(json.dumps(how, indent=1) + "\n")
    return out, how


def score(model_dir: Path, name: str, s: Settings) -> dict[str, Any]:
    """`flashtick evaluate MODEL X-files --split 70/30`, the instrument's files read as one stream named `name`."""
    model, codec = load_tick_model(model_dir)
    streams, rejected = read_streams([str(f) for f in instrument_files(s.data_dir, name)])
    if len(streams) != 1:
        raise ValueError(f"{name}: expected one stream in its files, got {sorted(streams)}")
    prepared, left_out = prepare(codec, {name: next(iter(streams.values()))}, SplitSpec.parse(SCORED_SPLIT),
                                 min_part_ticks(codec, window_ticks(model)), training=False)  # as `flashtick evaluate`
    if not prepared:
        raise ValueError(f"{name}: nothing to score: {'; '.join(left_out)}")
    started = time.time()
    result = evaluate_streams(model, codec, prepared, s.evaluation, read_head(model_dir, codec))
    seconds = round(time.time() - started, 1)  # (the benchmark times it: evaluate's record holds no wall time)
    stream = result["streams"][name]
    return {"test_ticks": {"stream": name, "ticks": stream["ticks"], "train": stream["train"], "test": stream["test"],
                           "rejected_rows": rejected},
            "questions": result["questions"], "calibration_source": result["calibration_source"],
            "seconds": seconds}


def bar(questions: dict[str, Any], predictor: str = "model") -> dict[str, Any] | None:
    """The issue's bar from evaluate_streams's per-question scores, for the model's answers (``model``) or what
    serving publishes with answers.adapt: online (``adapted``, mixed from the start of the test part: cold);
    None when a question lacks that predictor."""
    sc = {q: r["scores"] for q, r in questions.items()}
    if any(predictor not in x for x in sc.values()):
        return None
    both = [q for q, x in sc.items() if x[predictor]["brier"] <= x["prior"]["brier"]
            and x[predictor]["accuracy"] >= x["majority"]["accuracy"]]
    return {"brier_le_prior_all": all(x[predictor]["brier"] <= x["prior"]["brier"] for x in sc.values()),
            "accuracy_ge_majority_all": all(x[predictor]["accuracy"] >= x["majority"]["accuracy"]
                                            for x in sc.values()),
            "questions_meeting_both": f"{len(both)}/{len(sc)}",
            "direction_acc_ge_logistic": {q: sc[q][predictor]["accuracy"] >= sc[q]["logistic"]["accuracy"]
                                          for q in DIRECTIONS if q in sc},
            "brier_lt_logistic": {q: sc[q][predictor]["brier"] < sc[q]["logistic"]["brier"]
                                  for q in DIRECTIONS if q in sc}}


def instrument_rows(name: str, s: Settings, log: Callable[[str], None]) -> dict[str, Any]:
    builtin_how = card_summary(s.builtin)
    builtin_saw = name in builtin_how["trained_on"]
    models = {"builtin": (s.builtin, builtin_how),
              "zero_shot": leave_one_out_model(name, s, log) if builtin_saw else (s.builtin, builtin_how),
              "fine_tuned": fine_tuned_model(name, s, log)}
    scored: dict[Path, dict[str, Any]] = {}
    rows = {}
    for row in ROWS:
        model_dir, how = models[row]
        if model_dir not in scored:  # ETHUSDT: zero_shot is the built-in model, scored once
            log(f"{name}: scoring {row} ({model_dir})")
            scored[model_dir] = score(model_dir, name, s)
        rows[row] = {"model_dir": str(model_dir), "how_trained": how, **scored[model_dir]}
    tests = {row: tuple(r["test_ticks"]["test"]) for row, r in rows.items()}
    (tuned_parts,) = rows["fine_tuned"]["how_trained"]["parts"].values()  # its split of the one stream
    if len(set(tests.values())) != 1 or tuple(tuned_parts["test"]) != tests["fine_tuned"]:
        raise RuntimeError(f"{name}: the rows' test slices differ: {tests}; the fine-tune's own {tuned_parts}")
    return rows


def caveats(result: dict[str, Any]) -> list[str]:
    notes = []
    for name, rows in result["instruments"].items():
        zs, bi = rows["zero_shot"]["how_trained"], rows["builtin"]["how_trained"]
        if rows["zero_shot"]["model_dir"] == rows["builtin"]["model_dir"]:
            notes.append(f"{name} zero_shot is the built-in model itself ({bi['steps']} steps"
                         f"{_took(bi, ' of optimisation')})")
            continue
        cut = " (cut before the end of its learning-rate schedule)" if zs["steps"] < zs["schedule_steps"] else ""
        notes.append(f"{name} zero_shot: {zs['steps']} of a {zs['schedule_steps']}-step schedule{cut}"
                     f"{_took(zs, ' of optimisation')} under a {zs['config']['max_minutes']:g}-min "
                     f"budget ({zs['stopped']}); the built-in model got {bi['steps']} steps"
                     f"{_took(bi)}{_paces(zs, bi)}")
    notes += ["builtin on BTCUSDT and EURUSD is not held out: it trained on the first 80% of each, which covers the "
              "first third of the scored test slice (70% + gap to 100%); fine_tuned starts from it on every instrument",
              "BTCUSDT and ETHUSDT are the same 11 minutes of one exchange: a model trained on one has seen the "
              "other's market moves at the same times (including the time of its test slice), so their zero_shot "
              "rows are leave-one-instrument-out, not leave-one-market-out",
              "fine_tuned: flashtick train's defaults (300 steps, a validation check every 20 steps, patience 5) "
              f"under --max-minutes on one thread ({nice_prefix().strip() or 'not niced'}) of a shared 2-core CPU; "
              "see each row's steps and stopped"]
    return notes


def _took(how: dict[str, Any], what: str = "") -> str:
    """' in N min' of a training's optimisation; a card without its time reads nan there, which is no number to
    print, so the caveat says the time is missing instead."""
    minutes = how["optimisation_minutes"]
    return ", its time not recorded" if math.isnan(minutes) else f" in {minutes} min{what}"


def _paces(zero_shot: dict[str, Any], builtin: dict[str, Any]) -> str:
    """Each training's steps per minute of optimisation, as measured ("" where a time is missing): the two ran
    on whatever machines they ran on, so their own numbers say how comparable the step counts are."""
    rates = [how["steps"] / how["optimisation_minutes"] for how in (builtin, zero_shot)
             if how["optimisation_minutes"] > 0]  # (nan: a card without its time; 0.0: under 3 s)
    return "" if len(rates) < 2 else f" ({rates[0]:.1f} steps/min, against zero_shot's {rates[1]:.1f})"


def summary_line(result: dict[str, Any]) -> str:
    """Per instrument and row: questions with Brier <= prior and accuracy >= majority, direction accuracies vs
    logistic."""
    parts = []
    for name, rows in result["instruments"].items():
        cells = []
        for row in ROWS:
            q = rows[row]["questions"]
            dirs = " ".join(f"d{d.split('_')[1]} {q[d]['scores']['model']['accuracy']:.3f}/"
                            f"{q[d]['scores']['logistic']['accuracy']:.3f}" for d in DIRECTIONS if d in q)
            adapted = [result.get(f"bar_{p}", {}).get(name, {}).get(row) for p in ("adapted", "adapted_history")]
            also = (f" (adapted: cold {adapted[0]['questions_meeting_both'] if adapted[0] else '-'}, with history "
                    f"{adapted[1]['questions_meeting_both'] if adapted[1] else '-'})")
            cells.append(f"{row} {result['bar'][name][row]['questions_meeting_both']}{also} {dirs}")
        parts.append(f"{name}: " + ", ".join(cells))
    return "tick_model_quality: " + " | ".join(parts) + " (Brier<=prior & acc>=majority; direction acc model/logistic)"


def report(s: Settings, instruments: tuple[str, ...] = tuple(FILES), log: Callable[[str], None] = print,
           command: str = "") -> dict[str, Any]:
    """Train what --models-dir lacks, score every row of every instrument; the JSON record."""
    torch.set_num_threads(s.threads)
    s.models_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    result: dict[str, Any] = {"command": command, "machine": machine(), "threads": s.threads,
                              "data_dir": str(s.data_dir), "models_dir": str(s.models_dir),
                              "scored_split": f"{SCORED_SPLIT} (gap: the longest question horizon, 50 ticks)",
                              "evaluation": dataclasses.asdict(s.evaluation), "instruments": {}}
    for name in instruments:
        result["instruments"][name] = instrument_rows(name, s, log)
    result["bar"] = {name: {row: bar(r["questions"]) for row, r in rows.items()}
                     for name, rows in result["instruments"].items()}
    for predictor in ("adapted", "adapted_history"):  # cold at the test part; fed the train part first
        result[f"bar_{predictor}"] = {name: {row: bar(r["questions"], predictor) for row, r in rows.items()}
                                      for name, rows in result["instruments"].items()}
    result["caveats"] = caveats(result)
    result["wall_seconds"] = round(time.time() - t0, 1)
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_data_dir_argument(parser)
    parser.add_argument("--models-dir", type=Path, default=Path(tempfile.gettempdir()) / "flashtick-quality-models",
                        help="trained checkpoints: made when missing, reused when there (default %(default)s)")
    parser.add_argument("--loo-minutes", type=float, default=12.0, help="optimisation budget per leave-one-out model")
    parser.add_argument("--finetune-minutes", type=float, default=8.0, help="flashtick train --max-minutes")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: a shared CPU)")
    parser.add_argument("--max-points", type=int, default=EvalOptions.max_points, help="test answer ticks scored")
    parser.add_argument("--instruments", default=",".join(FILES), help="comma-separated (default %(default)s)")
    parser.add_argument("--adapt-history", type=int, default=10_000, help="train-part answer ticks that feed the "
                        "adaptation before the test part (adapted_history: a stream served since its start); 0: off")
    parser.add_argument("--out", type=Path, default=None,
                        help="the JSON file (default: tick_model_quality.json in --out-dir's folder)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if not data_available(args.data_dir) or not all(f.is_file() for n in FILES for f in instrument_files(args.data_dir,
                                                                                                         n)):
        print(f"tick_model_quality: skipped: the shared instruments' files are not in {args.data_dir} (pass "
              f"--data-dir)")
        return
    s = Settings(args.data_dir, args.models_dir, loo_recipe=TrainConfig(max_minutes=args.loo_minutes),
                 finetune_minutes=args.finetune_minutes, threads=args.threads,
                 evaluation=EvalOptions(max_points=args.max_points, adapt_history=args.adapt_history))
    command = f"{nice_prefix()}python -m benchmarks.tick_model_quality " + shlex.join(sys.argv[1:] if argv is None
                                                                                      else argv)
    log = lambda message: print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)  # noqa: E731
    result = report(s, tuple(n for n in args.instruments.split(",") if n), log, command.strip())
    out = args.out or output_dir(args) / "tick_model_quality.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(summary_line(result) + f"; wall {result['wall_seconds']} s -> {out}")


if __name__ == "__main__":
    main()
