"""What `flashtick train` does after its optimisation, sized before it starts: the calibration's forwards over the
validation part and the scoring's over the test part (and the train part's history, with adapt_history). The
optimisation stops in time for them (engine/service/train_stopping.py `StepClock`), so --max-minutes bounds the
whole command as a user reads it: the reading before, the training, and this tail after.

The tail is counted in the windows the scoring runs (evaluation_answers.window_starts) and priced at the training
forward's measured cost per window: an answer window holds the same ticks as a training window, and is run without
gradients, in smaller batches (EvalOptions.batch), with up to four question tokens per answer tick.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from engine.service.evaluate import scored_test_points
from engine.service.evaluation_answers import window_starts
from engine.service.evaluation_options import EvalOptions
from engine.service.evaluation_points import chosen_ticks
from engine.service.splits import StreamData

# an answer window's cost in training windows' forwards, and the scoring's work besides the model (baselines'
# fits, the bootstrap, the plot) in the same units per window: measured on 10k and 60k DEX swaps (fix339)
WINDOW_FORWARDS = 2.0
FIXED_SECONDS = 3.0  # the baselines' fits, the bootstrap, the heads, the checkpoint and the plot, at the least


class Tail(NamedTuple):
    """The windows the calibration (validation part) and the scoring (test part, train history) will run."""

    validation: int
    test: int

    @property
    def windows(self) -> int:
        return self.validation + self.test

    def forwards(self, train_batch: int) -> float:
        """The tail in training forwards (of ``train_batch`` windows each), the unit `StepClock` measures."""
        return self.windows * WINDOW_FORWARDS / train_batch

    def seconds(self, forward_s: float, train_batch: int) -> float:
        return FIXED_SECONDS + self.forwards(train_batch) * forward_s


def tail_of(streams: list[StreamData], W: int, options: EvalOptions, validated: bool) -> Tail:
    """The windows run after training, counted as `validation_pairs` and `evaluate_streams` will pick them."""
    run = W - W // 2
    validation = test = 0
    for sd in streams:
        if validated:
            ii, _ = sd.points("validation")
            validation += len(window_starts(ii[np.isin(ii, chosen_ticks(np.unique(ii), run, options.max_points))], W))
        test += len(window_starts(scored_test_points(sd, W, options)[0], W))
        if options.adapt and options.adapt_history > 0:
            hi, _ = sd.points("train")
            test += len(window_starts(hi[np.isin(hi, chosen_ticks(np.unique(hi), run, options.adapt_history))], W))
    return Tail(validation, test)
