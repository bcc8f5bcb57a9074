"""EvalOptions: how `flashtick evaluate` (and `train`'s evaluation, the calibration's probing) scores a checkpoint.

The budgets (answer points per stream, train points for the logistic fit), the bootstrap's block and resamples, the
probing batch and device, which adapted answers are scored, and `--batch-ms`'s answer points; checked when built.
They live apart from evaluate.py because its parts (the probing, the scores) read them too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EvalOptions:
    max_points: int = 20_000  # answer ticks per stream scored by the model (a CPU budget)
    max_fit_points: int = 200_000  # train-part answer points for the logistic fit
    block: int = 100  # bootstrap block, in consecutive answer points (>= the longest horizon, 50)
    resamples: int = 1000
    seed: int = 0
    batch: int = 4
    device: str = "cpu"
    adapt: bool = True  # also score the adapted answers (what answers.adapt: online publishes)
    # > 0: also `adapted_history`, the adaptation fed first with the model's answers on up to this many ticks of
    # the train part (and every train label), as a stream served since its start has it; costs their forwards
    adapt_history: int = 0
    # None: every labelled tick of the test part is an answer point; a width in ms: only the last tick of each
    # event-time batch of that width, where `backtest --batch-ms` answers (mid-burst ticks are not answered there)
    batch_ms: float | None = None

    def __post_init__(self) -> None:
        for name in ("max_points", "max_fit_points", "block", "resamples", "batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.adapt_history < 0:
            raise ValueError(f"adapt_history must be >= 0, got {self.adapt_history}")
        if self.batch_ms is not None and not 0 < self.batch_ms < np.inf:
            raise ValueError(f"batch_ms (--batch-ms) must be a number of milliseconds > 0, got {self.batch_ms:g}")
