"""`flashtick train --max-minutes` bounds the whole command as a user reads it (review325 #10: `--max-minutes 2` on
60k swaps ran 4.5 minutes, silent after training): the reading before the optimisation counts, and the calibration
and scoring after it are counted in windows before it starts and kept out of its time (engine/service/train_tail.py);
each phase says itself on a pipe, and nothing under --quiet. The budget's arithmetic runs on clocks moved by hand:
no wall clock, no timed assertion."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine.service.cli import main
from engine.service.train_stopping import StepClock
from test_train_evaluate import TINY, _tiny_run, write_ticks
from test_train_step_clock import HandClock, run_step


@pytest.fixture(scope="module")
def ticks_file(tmp_path_factory) -> Path:
    return write_ticks(tmp_path_factory.mktemp("phases") / "ticks.parquet", 3000)


def test_the_reading_before_and_the_tail_after_come_out_of_the_optimisations_time() -> None:
    """A 60 s budget begun 10 s before the loop (the reading), with a tail of 5 s plus 20 forwards of 0.5 s: the
    steps (2 s, a forward of 0.5 s) stop where the next one, a validation and the tail would pass 60 s."""
    hand = HandClock()
    hand.s = 10.0  # the reading took 10 s of the budget
    clock = StepClock(60.0, 4, hand, started=0.0, tail=(5.0, 20.0))
    steps = 0
    while steps == 0 or clock.stop_reason() is None:
        run_step(clock, hand, 0.5, 1.5)
        steps += 1
    assert clock.tail_estimate == 15.0  # 5 s + 20 x 0.5 s
    # 10 s + 16 x 2 s = 42 s; a 17th step and a validation (2 + 2 s) would end at 46 s, the tail at 61 s
    assert steps == 16 and hand.s == 42.0
    assert hand.s + clock._validation_estimate() + clock.tail_estimate <= 60.0
    assert clock.stop_reason() == ("--max-minutes 1: 3.0 s of 60 s left once 15.0 s are kept for the calibration and "
                                   "scoring after training, less than the next step and a validation, estimated at "
                                   "2.0 s (from 16 steps) + 2.0 s (4 batches' forwards)")


def test_the_training_loop_ends_in_time_for_its_tail_on_a_hand_moved_clock(ticks_file: Path) -> None:
    """The loop itself, its forwards moving the clock: it ends with room for the last validation and the tail."""
    from engine.service.train_checkpoint import new_model
    from engine.service.train_data import question_tokens, sample_batch
    from engine.service.train_loop import optimise
    from engine.service.train_stopping import Validation

    codec, groups, weights, cfg = _tiny_run(ticks_file, steps=1000, max_minutes=6 / 60)
    model = new_model(cfg, codec.vocab_size)
    batch = sample_batch(groups, weights, question_tokens(codec), cfg, np.random.default_rng(0))
    # a second of reading before the loop; a forward costs 0.125 s, a checkpoint hook 0.375 s (binary fractions:
    # the sums are exact)
    seconds = [1.0]
    model.register_forward_hook(lambda *_: seconds.__setitem__(0, seconds[0] + 0.125))
    val = Validation([batch] * 10, every=10**6, patience=10**6)
    said: list[str] = []
    stats = optimise(model, groups, weights, question_tokens(codec), cfg, said.append, np.random.default_rng(0),
                     val=val, on_step=lambda _: seconds.__setitem__(0, seconds[0] + 0.375), now=lambda: seconds[0],
                     started=0.0, tail=(1.0, 10.0))
    assert stats["tail_estimate_seconds"] == 2.2  # 1 s + 10 forwards of 0.125 s (2.25, rounded)
    # 1 s + 3 steps of 0.5 s + the last weights' validation (1.25 s) = 3.75 s, and the tail's 2.25 s: 6 s; a fourth
    # step would have ended it at 6.5 s
    assert seconds[0] == 3.75 and stats["steps_done"] == 3, (seconds, stats)
    assert "kept for the calibration and scoring" in stats["stopped"]
    assert any(line.startswith("budget: the calibration and scoring after training estimated at") for line in said)


def test_train_says_each_phase_on_a_pipe_and_nothing_under_quiet(ticks_file: Path, tmp_path: Path, capsys) -> None:
    run = [*TINY, "--steps", "3", "--batch", "2", "--max-minutes", "1", "--eval-every", "2", "--resamples", "20"]
    assert main(["train", str(ticks_file), "--out", str(tmp_path / "m"), *run]) == 0
    err = capsys.readouterr().err  # (capsys: not a terminal, so lines, not bars)
    phases = ["flashtick train: reading: 1 files", "flashtick train: budget: --max-minutes 1 bounds the whole run",
              "flashtick train: training: 3 steps", "flashtick train: calibrating on the validation part: ",
              "flashtick train: scoring the test part: "]
    at = [err.find(line) for line in phases]
    assert -1 not in at and at == sorted(at), err
    windows = [int(err[i + len(line):].split(" ")[0]) for i, line in zip(at[3:], phases[3:])]
    assert all(n > 0 for n in windows), err
    assert main(["train", str(ticks_file), "--out", str(tmp_path / "q"), *run, "--quiet"]) == 0
    quiet = capsys.readouterr().err
    said = ["train: reading:", "train: budget:", "train: training:", "train: calibrating", "train: scoring"]
    assert not any(phase in quiet for phase in said), quiet
    assert main(["train", str(ticks_file), "--out", str(tmp_path / "j"), *run, "--json"]) == 0
    out, err = capsys.readouterr()
    assert not any(phase in err for phase in said), err
    assert json.loads(out)["training"]["steps_done"] == 3
