"""How `evaluate` scores each predictor's answers to a question: accuracy and Brier per answer point, model minus
each baseline with a 95% block-bootstrap interval, a calibration table, and the same scores stream by stream.

The answer points (per question, streams one after another, in time order) are cut into blocks of `block`
consecutive points, resampled with replacement, so neighbouring answers whose futures overlap stay together.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.service.backtest_scores import calibration_table
from engine.service.evaluation_options import EvalOptions

BASELINES = ("raw", "prior", "majority", "logistic", "hindsight")


def accuracy_brier(p: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per point: 1.0 if the most likely class (first on ties) is the realised one; Brier = sum_c (p_c - [c = y])^2."""
    onehot = np.eye(p.shape[1])[y]
    return (p.argmax(axis=1) == y).astype(np.float64), np.square(p - onehot).sum(axis=1)


def block_bootstrap(d: np.ndarray, block: int, resamples: int, rng: np.random.Generator) -> dict[str, float]:
    """Mean of d and a 95% percentile interval from resampling blocks of `block` consecutive values."""
    starts = np.arange(0, len(d), block)
    sums = np.add.reduceat(d, starts)
    counts = np.diff(np.append(starts, len(d)))
    pick = rng.integers(0, len(starts), size=(resamples, len(starts)))
    means = sums[pick].sum(axis=1) / counts[pick].sum(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return {"diff": float(d.mean()), "lo": float(lo), "hi": float(hi)}


def score_question(probs: dict[str, np.ndarray], y: np.ndarray, options: EvalOptions,
                   rng: np.random.Generator) -> dict[str, Any]:
    """Accuracy and Brier per predictor (probs: name -> (n, C)), model-minus-baseline intervals, calibration."""
    per = {name: accuracy_brier(p, y) for name, p in probs.items()}
    scores = {name: {"accuracy": float(a.mean()), "brier": float(b.mean())} for name, (a, b) in per.items()}
    diffs = {}
    for base in BASELINES:
        if base in per:
            diffs[base] = {"accuracy": block_bootstrap(per["model"][0] - per[base][0], options.block,
                                                       options.resamples, rng),
                           "brier": block_bootstrap(per["model"][1] - per[base][1], options.block,
                                                    options.resamples, rng)}
    p = probs["model"]
    calibration = calibration_table(p.reshape(-1), np.eye(p.shape[1])[y].reshape(-1))
    return {"n": int(len(y)), "blocks": -(-len(y) // options.block), "scores": scores, "model_minus": diffs,
            "calibration": calibration}


def scores_by_stream(probs: dict[str, np.ndarray], y: np.ndarray, sizes: list[tuple[str, int]]
                     ) -> dict[str, dict[str, Any]]:
    """Each stream's accuracy and Brier per predictor, read off the pooled rows (``sizes``: each stream's
    answer points, in the order they were pooled), nothing refitted: weighted by n, they add up to the pooled."""
    out, start = {}, 0
    for name, n in sizes:
        if n:
            rows = slice(start, start + n)
            out[name] = {"n": n, "scores": {}}
            for predictor, p in probs.items():
                accuracy, brier = accuracy_brier(p[rows], y[rows])
                out[name]["scores"][predictor] = {"accuracy": float(accuracy.mean()), "brier": float(brier.mean())}
        start += n
    return out
