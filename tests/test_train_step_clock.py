"""The rule --max-minutes stops `train` by (engine/service/train_stopping.py's StepClock), on a clock moved by hand: a
loaded host's slow first step (thread pools, allocations) must not stop a run at under half its time, and a stop
says the time left and the estimates it rests on. No wall clock, no timed assertion."""

from __future__ import annotations

from engine.service.train_stopping import StepClock


class HandClock:
    def __init__(self) -> None:
        self.s = 0.0

    def __call__(self) -> float:
        return self.s


def run_step(clock: StepClock, hand: HandClock, forward_s: float, rest_s: float) -> None:
    clock.step_started()
    hand.s += forward_s
    clock.forward_done()
    hand.s += rest_s
    clock.step_done()


def test_a_slow_first_step_does_not_stop_a_run_with_more_than_half_its_time_left() -> None:
    # the review's run: --max-minutes 4, 12 validation batches; a first step of 60 s (forward 20 s) on a loaded
    # host made the next step and a validation look like 60 + 12 x 20 = 300 s with 180 s left
    hand = HandClock()
    clock = StepClock(240.0, 12, hand)
    run_step(clock, hand, 20.0, 40.0)
    assert clock.stop_reason() is None  # measured again: one step's estimate does not end it at 25% of its time
    steps = 1
    while clock.stop_reason() is None:
        run_step(clock, hand, 0.5, 1.5)  # the steady steps: the first is left out of the means now
        steps += 1
    assert steps == 88  # 60 s + 87 x 2 s = 234 s; an 89th step and a validation (2 + 6 s) would end past 240 s
    assert clock.stop_reason() == ("--max-minutes 4: 6.0 s of 240 s left, less than the next step and a "
                                   "validation, estimated at 2.0 s (from 88 steps) + 6.0 s (12 batches' forwards)")


def test_one_step_estimate_stops_a_run_past_half_its_time_and_says_what_it_estimated() -> None:
    hand = HandClock()
    clock = StepClock(100.0, 8, hand)
    run_step(clock, hand, 10.0, 50.0)  # 60 s: 40 s left, under half
    assert clock.stop_reason() == ("--max-minutes 1.66667: 40.0 s of 100 s left, less than the next step and a "
                                   "validation, estimated at 60.0 s (from 1 step) + 80.0 s (8 batches' forwards)")


def test_a_measured_validation_is_the_estimate_once_one_ran() -> None:
    hand = HandClock()
    clock = StepClock(60.0, 8, hand)
    run_step(clock, hand, 1.0, 1.0)
    clock.step_started()
    hand.s += 2.0
    clock.forward_done()
    clock.validation_started()
    hand.s += 50.0  # a validation far dearer than its batches' forwards
    clock.validation_done()
    clock.step_done()
    assert clock.step_s == 2.0  # the validation is no part of a step's time
    assert clock.stop_reason() == ("--max-minutes 1: 6.0 s of 60 s left, less than the next step and a validation, "
                                   "estimated at 2.0 s (from 2 steps) + 50.0 s (measured)")


def test_a_first_step_past_a_tiny_budget_leaves_no_time_rather_than_a_negative_one() -> None:
    # --max-minutes 0.001 (0.06 s): the review read "-2.3 s of 0 s left"
    hand = HandClock()
    clock = StepClock(0.06, 4, hand)
    run_step(clock, hand, 0.5, 1.86)
    assert clock.stop_reason() == ("--max-minutes 0.001: 0.0 s of 0.06 s left (the first step ended 2.3 s past "
                                   "it), less than the next step and a validation, estimated at 2.4 s (from 1 step) "
                                   "+ 2.0 s (4 batches' forwards)")
    run_step(clock, hand, 0.5, 0.5)  # a later step past the limit says so
    assert "0.0 s of 0.06 s left (the last step ended 3.3 s past it)" in clock.stop_reason()
