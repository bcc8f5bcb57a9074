"""The tallies of live scores (live_scores.py): one query's running sums on a stream or over all (``QueryScore``),
the streams too thin to name pooled (``ThinStreams``), a published answer waiting for its future (``Waiting``),
and the expected hit of the majority guess a score is set beside (``majority_hit``). Plain numbers, kept per stream
in its marks (stream_marks.py) and summed by LiveScores."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from connectors.questions import QuestionSpec


@dataclass
class QueryScore:
    scored: int = 0
    correct: int = 0
    brier: float = 0.0
    prior_brier: float = 0.0
    majority_correct: float = 0.0  # expected hits of the majority guess (a tie: a share of one)
    unscorable: int = 0
    outside_labels: int = 0  # realised, but as a label the query did not ask about (a subset of the answers)
    across_gap: int = 0  # left unlabelled: the horizon crossed a pause of answers.session_gap_s or more
    # the model's own answers (``model_probs``, beside what answers.adapt published), on the same answers
    model_scored: int = 0
    model_correct: int = 0
    model_brier: float = 0.0

    def add(self, correct: bool, brier: float, prior_brier: float, majority_correct: float,
            model: tuple[bool, float] | None = None) -> None:
        self.scored += 1
        self.correct += int(correct)
        self.brier += brier
        self.prior_brier += prior_brier
        self.majority_correct += majority_correct
        if model is not None:
            self.model_scored += 1
            self.model_correct += int(model[0])
            self.model_brier += model[1]

    def mean(self, total: float, count: int | None = None) -> float | None:
        count = self.scored if count is None else count
        return round(total / count, 6) if count else None

    def summary(self, pending: int) -> dict[str, Any]:
        return {"scored": self.scored, "accuracy": self.mean(self.correct), "brier": self.mean(self.brier),
                "prior_brier": self.mean(self.prior_brier), "majority_accuracy": self.mean(self.majority_correct),
                "model_accuracy": self.mean(self.model_correct, self.model_scored),
                "model_brier": self.mean(self.model_brier, self.model_scored),
                "pending": pending, "unscorable": self.unscorable, "outside_labels": self.outside_labels,
                "across_gap": self.across_gap}


@dataclass
class ThinStreams:
    """A query's scores pooled over the streams with fewer than WORST_MIN_SCORED (live_scores.py) answers scored
    each."""

    streams: int = 0
    scored: int = 0
    brier: float = 0.0
    prior_brier: float = 0.0

    def add(self, score: QueryScore) -> None:
        self.streams += 1
        self.scored += score.scored
        self.brier += score.brier
        self.prior_brier += score.prior_brier

    def summary(self) -> dict[str, Any]:
        mean = lambda total: round(total / self.scored, 6) if self.scored else None  # noqa: E731
        return {"streams": self.streams, "scored": self.scored, "brier": mean(self.brier),
                "prior_brier": mean(self.prior_brier)}


class Waiting(NamedTuple):
    """A published answer waiting for its future: what scoring it needs, not the answer (a stream keeps one per
    query for each of its last `horizon` ticks: thousands of streams hold hundreds of thousands of these)."""

    version: int  # the tick count it answered
    spec: QuestionSpec
    labels: tuple[str, ...]  # the query's answers, in its order
    probs: np.ndarray  # (labels,) what was published
    model: np.ndarray | None  # (labels,) the model's own answer, where answers.adapt published a mix


def majority_hit(counts: np.ndarray, y: int) -> float:
    """The expected accuracy on realised label ``y`` of guessing the most frequent label so far (``counts``, in the
    query's label order), a tie broken uniformly: 1/m when ``y`` is one of the m labels seen most often, else 0; so
    1/labels before any label. (``counts.argmax()`` took the first label listed: a stream's first answer counted
    as a hit whenever its label was the query's first, so the score depended on the order the labels are listed.)"""
    most = counts == counts.max()
    return float(most[y]) / int(most.sum())
