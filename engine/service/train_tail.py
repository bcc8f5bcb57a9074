"""What `flashtick train` does after its optimisation, sized before it starts: the calibration's forwards over the
validation part and the scoring's over the test part (and the train part's history, with adapt_history). The
optimisation stops in time for them (engine/service/train_stopping.py `StepClock`), so --max-minutes bounds the
whole command as a user reads it: the reading before, the training, and this tail after.

The tail is counted in the windows the scoring runs (evaluation_answers.window_starts). Until it is measured it is
priced at the training forward's cost per window (WINDOW_FORWARDS): an answer window holds the same ticks as a
training window, and is run without gradients, in smaller batches (EvalOptions.batch), with up to four question
tokens per answer tick. Once the training's forward is measured (its second step), the evaluation of the scoring's
first chunk is timed (`first_chunk_seconds`) and prices the rest (StepClock.tail_measured): that ratio came from one
run on one host, and a loaded one's answer windows cost more forwards than it says (fix347 #5: a run overran its
bound). From then on the tail moves with the training forward as the run measures it, so a load that rises later
moves it too.
"""

from __future__ import annotations

import time
from typing import Any, Callable, NamedTuple

import numpy as np

from connectors.codec import BinnedCodec
from engine.service.evaluate import scored_test_points
from engine.service.evaluation_answers import answer_logits, window_starts
from engine.service.evaluation_options import EvalOptions
from engine.service.evaluation_points import chosen_ticks
from engine.service.splits import StreamData

# an answer window's cost in training windows' forwards until the run measures its own (first_chunk_seconds), and
# the scoring's work besides the model (baselines' fits, the bootstrap, the plot): from 10k and 60k DEX swaps (fix339)
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


def first_chunk_seconds(model: Any, codec: BinnedCodec, streams: list[StreamData], W: int, options: EvalOptions,
                        now: Callable[[], float] = time.perf_counter) -> float | None:
    """Seconds per answer window of the scoring's own forward over its first chunk (one evaluation batch of the
    first test windows), timed on ``now`` as the run goes: what the tail costs on this host under its load of the
    moment. None where no stream has a test window (the tail is then its fixed part). The model is left in the mode
    it was in."""
    run = W - W // 2
    for sd in streams:
        ii, qq = scored_test_points(sd, W, options)[:2]
        starts = window_starts(ii, W)
        if not starts:
            continue
        chunk = min(options.batch, len(starts))
        first = ii < starts[chunk - 1] + run  # the answer points of the first `chunk` windows
        training = model.training
        model.eval()
        began = now()
        answer_logits(model, codec, sd, ii[first], qq[first], options)
        spent = now() - began
        model.train(training)
        return spent / chunk
    return None
