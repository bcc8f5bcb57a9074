"""When the training loop (engine/service/train_loop.py `optimise`) stops: its clock, its validation and early
stopping.

`StepClock` is what --max-minutes bounds (a step starts only while it and a validation fit in the time left);
`Validation` is the fixed batches scored every few steps and the patience; `BestWeights` keeps the best validation
loss's weights and counts the checks since it. The loop itself (losses, the update, the log) lives in
train_loop.py: these are the state it consults to decide whether to go on, and which weights to keep.
"""

from __future__ import annotations

import math
import time
from typing import Callable, NamedTuple

from transformers import LlamaForCausalLM

from connectors.ticks import counted
from engine.service.packing import Batch


class Validation(NamedTuple):
    """Early stopping: fixed batches scored every `every` steps; stop after `patience` scores without a new best."""

    batches: list[Batch]
    every: int
    patience: int


class StepClock:
    """What --max-minutes bounds: the optimisation with its validations, the last weights' score included. A step
    starts only while it and one validation fit in the time left, at the durations measured so far (a step: its
    forward, backward, update and checkpoint hook; a validation: the last one, or before any, its batches at the
    training forward's cost), so a run ends by the limit unless a step or validation runs longer than those before
    it. Checked before each step only: the step just started (the first always runs) and any validation are whole.
    The first step carries one-off costs (thread pools, allocations; on a loaded host it ran 10x the others), so
    once a second is measured the first is left out of the means; and an estimate from the first step alone does
    not stop a run before half its time: the second step runs if it alone fits, and measures again."""

    def __init__(self, budget_s: float, validation_batches: int, now: Callable[[], float] = time.time,
                 started: float | None = None, tail: tuple[float, float] = (0.0, 0.0), tail_windows: int = 0) -> None:
        """``started``: when the budget began (`train`: the command's start, so its reading counts; default now);
        ``tail``: what comes after the optimisation and must fit too, as (seconds, training forwards), priced at
        the forwards measured (engine/service/train_tail.py: the calibration and the scoring); ``tail_windows``:
        the answer windows among it, priced again once their own cost is measured (`tail_measured`)."""
        self.budget_s = budget_s
        self.deadline = (now() if started is None else started) + budget_s
        self.tail_s, self.tail_forwards = tail
        self.tail_windows = tail_windows
        self.tail_window_s: float | None = None  # an answer window's seconds, as measured (None: not yet)
        self.now = now
        self.validation_batches = validation_batches
        self._step_times: list[float] = []  # each step's (validations left out)
        self._forward_times: list[float] = []
        self.validation_s: float | None = None  # the last validation's, once one ran
        self._started = self._forward_started = self._validation_started = self._validation_spent = 0.0

    @staticmethod
    def _typical(times: list[float]) -> float:
        """The mean duration, the first (warm-up) left out once there is another."""
        kept = times[1:] or times
        return sum(kept) / len(kept) if kept else 0.0

    @property
    def step_s(self) -> float:
        return self._typical(self._step_times)

    @property
    def forward_s(self) -> float:
        return self._typical(self._forward_times)

    def _validation_estimate(self) -> float:
        # an eval forward costs no more than a training one
        return self.validation_s if self.validation_s is not None else self.validation_batches * self.forward_s

    @property
    def tail_estimate(self) -> float:
        """The seconds the work after the optimisation is estimated at, at the forwards measured so far."""
        return self.tail_s + self.tail_forwards * self.forward_s

    def tail_measured(self, window_s: float) -> None:
        """The tail's windows priced again at ``window_s`` seconds each, the evaluation of its first chunk timed just
        now (train_tail.first_chunk_seconds), in training forwards at the forward measured now: the estimate then
        follows the forwards the run measures, so a load that rises later raises it too."""
        if self.tail_windows and self.forward_s > 0:
            self.tail_window_s = window_s
            self.tail_forwards = self.tail_windows * window_s / self.forward_s

    def stop_reason(self) -> str | None:
        """None while another step may start; else why not: the time left and what was estimated to need more."""
        to_deadline = self.deadline - self.now()
        left, validation_s = to_deadline - self.tail_estimate, self._validation_estimate()
        if self.step_s + validation_s <= left:
            return None
        budget = self.budget_s
        if len(self._step_times) == 1 and to_deadline > budget / 2 and self.step_s <= to_deadline:
            # one step's estimate (with its warm-up) does not end a run at under half its time, nor does the tail
            # priced at that step's forward (a warm-up's: a 60k-swap run's first put it at 159 s for 95)
            return None
        steps = counted(len(self._step_times), "step")
        measured = "measured" if self.validation_s is not None else f"{self.validation_batches} batches' forwards"
        # a budget under a second (--max-minutes 0.001: 0.06 s) read as "0 s"; 3 digits keep it
        of = f"{budget:.0f}" if budget >= 100 else f"{budget:.3g}"
        # the step that always runs (the first) or a slow one can end past the limit: no time is left, not -2.3 s
        which = "the first step" if len(self._step_times) == 1 else "the last step"
        over = "" if to_deadline >= 0 else f" ({which} ended {-to_deadline:.1f} s past it)"
        after = f" once {self.tail_estimate:.1f} s are kept for the calibration and scoring after training" \
            if self.tail_estimate else ""
        return (f"--max-minutes {budget / 60:g}: {max(left, 0.0):.1f} s of {of} s left{after}{over}, less than the "
                f"next step and a validation, estimated at {self.step_s:.1f} s (from {steps}) + {validation_s:.1f} s "
                f"({measured})")

    def step_started(self) -> None:
        self._started = self._forward_started = self.now()
        self._validation_spent = 0.0

    def forward_done(self) -> None:
        self._forward_times.append(self.now() - self._forward_started)

    def validation_started(self) -> None:
        self._validation_started = self.now()

    def validation_done(self) -> None:
        self.validation_s = self.now() - self._validation_started
        self._validation_spent += self.validation_s

    def step_done(self) -> None:
        self._step_times.append(self.now() - self._started - self._validation_spent)


class BestWeights:
    """Early stopping's state in `optimise`: the best validation loss so far, its step (steps done) and weights
    (None: the model as it is), the checks since it, and every check as (step, loss rounded)."""

    def __init__(self) -> None:
        self.loss, self.state, self.step, self.since = math.inf, None, 0, 0
        self.history: list[tuple[int, float]] = []

    def checked(self, model: LlamaForCausalLM, step: int, loss: float) -> None:
        """A validation during training: a new best keeps a copy of the weights."""
        self.history.append((step, round(loss, 4)))
        if loss < self.loss:
            self.loss, self.step, self.since = loss, step, 0
            self.state = {k: t.detach().clone() for k, t in model.state_dict().items()}
        else:
            self.since += 1

    def checked_last(self, step: int, loss: float) -> None:
        """The validation of the last step once training stopped: a new best is the model as it is now."""
        self.history.append((step, round(loss, 4)))
        if loss < self.loss:
            self.loss, self.step, self.state = loss, step, None
