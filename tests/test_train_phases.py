"""`flashtick train --max-minutes` bounds the whole command as a user reads it (review325 #10: `--max-minutes 2` on
60k swaps ran 4.5 minutes, silent after training): the reading before the optimisation counts, and the calibration
and scoring after it are counted in windows before it starts and kept out of its time (engine/service/train_tail.py);
each phase says itself on a pipe, and nothing under --quiet. The budget's arithmetic runs on clocks moved by hand:
no wall clock, no timed assertion."""

from __future__ import annotations

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


def test_the_tail_is_priced_again_from_its_own_first_chunk_and_follows_the_forwards() -> None:
    """fix347 #5: the tail's answer windows were priced at a constant 2 training forwards each, from one run; on a
    loaded host they cost more and the run overran. Once measured (here: 1 s a window, 40 windows, forwards of 0.5 s)
    the tail is 80 forwards, and it moves with the forwards the run measures after: a load that doubles them doubles
    it, and the run stops where the new estimate says."""
    hand = HandClock()
    clock = StepClock(100.0, 0, hand, started=0.0, tail=(5.0, 10.0), tail_windows=40)
    run_step(clock, hand, 0.5, 0.5)
    run_step(clock, hand, 0.5, 0.5)
    assert clock.tail_estimate == 10.0  # 5 s + the constant's 10 forwards of 0.5 s
    clock.tail_measured(1.0)  # the first chunk's evaluation: 1 s a window, under this moment's load
    assert clock.tail_forwards == 80.0 and clock.tail_estimate == 45.0  # 5 s + 40 windows x 1 s
    for _ in range(4):
        run_step(clock, hand, 1.0, 1.0)  # the host's load doubles every cost
    # the first (warm-up) forward left out: (0.5 + 4 x 1.0) / 5 = 0.9 s; the tail 5 s + 80 x 0.9 s
    assert clock.forward_s == 0.9 and clock.tail_estimate == 77.0
    assert clock.stop_reason() is None  # at 10 s: 100 - 10 - 77 = 13 s left, a step of 1.8 s fits
    steps = 6
    while clock.stop_reason() is None:
        run_step(clock, hand, 1.0, 1.0)
        steps += 1
    assert hand.s + clock.step_s + clock.tail_estimate > 100.0 >= hand.s + clock.tail_estimate, (hand.s, steps)
    unmeasured = StepClock(100.0, 0, HandClock(), started=0.0, tail=(5.0, 10.0), tail_windows=40)
    unmeasured._forward_times = clock._forward_times  # the same forwards, the constant's price: a far later stop
    assert unmeasured.tail_estimate < clock.tail_estimate / 4


def test_the_training_loop_times_its_tails_first_chunk_and_stops_in_time_for_it(ticks_file: Path) -> None:
    """The loop and the real probe (train_tail.first_chunk_seconds) on a tiny file, on a clock that moves by each
    forward's cost: a training forward 0.125 s, an answer window's forward 0.5 s (a loaded host's, 4 forwards where
    the constant said 2). The tail is priced from that chunk, said, recorded, and the loop ends in time for it; at
    the constant's price the same loop runs on far longer."""
    from connectors.codec import BinnedCodec
    from engine.service.evaluation_options import EvalOptions
    from engine.service.splits import SplitSpec, prepare
    from engine.service.stream_reading import read_streams
    from engine.service.tick_checkpoint import window_ticks
    from engine.service.train_checkpoint import new_model
    from engine.service.train_data import question_tokens, sample_batch
    from engine.service.train_loop import optimise
    from engine.service.train_stopping import Validation
    from engine.service.train_tail import first_chunk_seconds

    codec, groups, weights, cfg = _tiny_run(ticks_file, steps=50, max_minutes=30 / 60)
    streams, _ = prepare(BinnedCodec(), read_streams([str(ticks_file)])[0], SplitSpec(0.7, 0.15, 0.15), min_ticks=64)

    def run(measured: bool) -> tuple[dict, float, list[str]]:
        model = new_model(cfg, codec.vocab_size)
        batch = sample_batch(groups, weights, question_tokens(codec), cfg, np.random.default_rng(0))
        seconds, probing = [1.0], [False]  # the reading's second; whether the tail's chunk is being timed
        model.register_forward_hook(lambda *_: seconds.__setitem__(0, seconds[0] + (0.5 if probing[0] else 0.125)))
        options = EvalOptions(batch=1)  # a chunk of one window: one forward

        def probe() -> float | None:
            probing[0] = True
            try:
                return first_chunk_seconds(model, codec, streams, window_ticks(model), options, now=lambda: seconds[0])
            finally:
                probing[0] = False

        said: list[str] = []
        stats = optimise(model, groups, weights, question_tokens(codec), cfg, said.append, np.random.default_rng(0),
                         val=Validation([batch] * 10, every=10**6, patience=10**6),
                         on_step=lambda _: seconds.__setitem__(0, seconds[0] + 0.375), now=lambda: seconds[0],
                         started=0.0, tail=(1.0, 10.0), tail_windows=40, time_tail=probe if measured else None)
        return stats, seconds[0], said

    stats, end, said = run(measured=True)
    assert stats["tail_window_seconds"] == 0.5 and stats["tail_estimate_seconds"] == 21.0, stats  # 1 + 160 x 0.125
    # 1 s + 2 steps of 0.5 s + the chunk's 0.5 s, then steps of 0.5 s while one, a validation (10 forwards of
    # 0.125 s) and the tail fit in 30 s: 12 steps, 7.5 s, and the last weights' validation: 8.75 s, 29.75 with the tail
    assert stats["steps_done"] == 12 and end == 8.75, (stats, end)
    assert any("from their first chunk, timed: 500 ms a window" in line for line in said), said
    constant, _, _ = run(measured=False)
    assert constant["tail_estimate_seconds"] == 2.2 and constant["steps_done"] > 40, constant


def test_train_says_each_phase_on_a_pipe_and_nothing_under_quiet(ticks_file: Path, tmp_path: Path, capsys) -> None:
    """One run on a pipe says each phase as it begins, in order (it ran train three times, ~1 min of CPU: fix347 #6);
    --quiet and --json say none of them: every line that run said (its log: the budget, the notes) and every phase it
    ran (reading, training, calibrating, scoring: their progress) is said again through the sayers `train` builds
    from those command lines (cmd_train._train_sayers, which fit is given: all it says goes through them), and
    nothing comes out. A --json run's record on stdout: tests/test_train_evaluate.py's fine-tuning run."""
    from engine.service.cli_parser import build_parser
    from engine.service.cmd_train import _train_sayers

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
    said = [line.removeprefix("flashtick train: ") for line in err.splitlines() if line.startswith("flashtick train: ")]
    progress = [("reading", 1, "files"), ("training", 3, "steps"),
                ("calibrating on the validation part", windows[0], "windows"),
                ("scoring the test part", windows[1], "windows")]
    for flag in ("--quiet", "--json"):
        log, _, bar = _train_sayers(build_parser().parse_args(
            ["train", str(ticks_file), "--out", str(tmp_path / "q"), *run, flag]))
        for line in said:
            log(line)
        for what, total, unit in progress:
            phase = bar(what, total, unit)
            phase.update(total)
            phase.close()
        assert capsys.readouterr() == ("", ""), flag
