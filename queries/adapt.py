"""Online answer adaptation: a stream's answers of one question, mixed with what that stream has done so far.

The built-in tick model carries little skill to an instrument it never saw (issue 16): its answers there are
often worse than the stream's own class frequencies. ``OnlineMix`` keeps, per (stream, query), a convex mix
of four experts, each a distribution over the question's labels:

* ``model``     p, the calibrated model answer;
* ``shift``     p * freq_m / mbar, renormalised: the model corrected for label shift (mbar: the model's mean
                answer over realised answers, p itself before any);
* ``frequency`` freq_m = (n + A*mbar) / (N + A): the stream's label counts with A pseudo-labels at mbar, so an
                empty stream starts at the model, not at uniform;
* ``recent``    (D + A*freq_m) / (sum D + A): counts D forgotten with a half-life of HALF_LIFE label points.

The weights w (on the simplex) minimise, over the answers already realised, the total Brier score of
sum_k w_k E_k plus RIDGE * |w - START_WEIGHTS|^2 (follow-the-regularised-leader; no learning rate), solved
exactly by enumerating the simplex's 15 faces. Its sufficient statistics are G = sum E^T E and b = sum E^T y.
Cold, the answer is the model's own (w = (0.5, 0.5, 0, 0) and shift = p when nothing is realised).

Time convention (connectors/labels.py, engine/service/live_scores.py): *points* are integers, the answer at
point t may use the labels of points i <= t - horizon only (point i's label needs `horizon` more ticks).
The caller delivers every point's label in order, from ``start`` on (``realise``; NO_LABEL where there is
none), and before ``answer`` at t, every label up to t - horizon (``labels_due``). Label counts use every
delivered label; the weights learn only from answers actually given (kept as pending until realised, so
memory is one entry per answer in the last `horizon` points).

The reference is an offline study (``sls4_r500``: docs/model.md, "Online answer adaptation"); its numbers are reproduced
by tests/test_adapt.py. Pure numpy float64; the state serialises exactly to plain JSON-able data.
"""

from __future__ import annotations

import functools
from collections import deque
from itertools import combinations
from typing import Any

import numpy as np

EXPERTS = ("model", "shift", "frequency", "recent")
PRIOR_LABELS = 20.0  # A: pseudo-labels at the model's mean answer behind the stream's counts
RIDGE = 10.0  # lam: pseudo-answers' worth of pull towards START_WEIGHTS
START_WEIGHTS = (0.5, 0.5, 0.0, 0.0)
HALF_LIFE = 500  # label points after which a count of `recent` weighs half
FLOOR = 1e-6  # mbar below this is read as this (shift divides by it)
NO_LABEL = -1  # a point without a realised label (as connectors.labels.NO_LABEL)
FACES = [face for m in range(1, len(EXPERTS) + 1) for face in combinations(range(len(EXPERTS)), m)]
ACTIVE_SET_STEPS = 8  # face moves tried from the last solve's face before enumerating all FACES


def simplex_weights(gram: np.ndarray, target: np.ndarray, face_first: tuple[int, ...] | None = None
                    ) -> tuple[np.ndarray, tuple[int, ...]]:
    """argmin over the simplex of w G w - 2 w b (G (K, K) positive definite, b (K,)), and the face it lies on.

    From ``face_first`` (the last solve's face: the optimum moves little between answers) an active-set walk
    drops an expert whose weight goes negative or adds the one whose gradient says it would lower the
    objective, until the KKT conditions hold; if that takes more than ACTIVE_SET_STEPS, or without a face to
    start from, the KKT system of every face is solved and the feasible solution with the smallest objective
    kept (the first one on ties). The optimum is unique, so both ways give the same weights; a solve or two
    instead of 15 is what makes an answer cheap."""
    face = face_first
    for _ in range(ACTIVE_SET_STEPS if face is not None else 0):  # active set: move to a neighbouring face
        w, lowest = _face_solve(gram, target, face)
        if w[lowest] < -1e-12:  # leaves the simplex: drop the expert that went most negative
            face = tuple(k for k in face if k != lowest)
            if not face:
                break
            continue
        entering = _most_violating(gram, target, w, face)
        if entering is None:  # the KKT conditions hold: the optimum
            return _normalised(w), face
        face = tuple(sorted((*face, entering)))
    best, best_face, best_obj = np.zeros(len(target)), FACES[0], np.inf
    for face in FACES:
        w = _face_solution(gram, target, face)
        if w is None:
            continue
        obj = w @ gram @ w - 2.0 * (w @ target)
        if obj < best_obj:
            best, best_face, best_obj = w, face, obj
    return _normalised(best), best_face


def _face_solve(gram: np.ndarray, target: np.ndarray, face: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """The minimiser (K,) on the affine hull of ``face`` (sum w = 1, w = 0 off it), and its face's lowest
    weight's expert."""
    m = len(face)
    index = list(face)
    kkt = np.zeros((m + 1, m + 1))  # (m+1, m+1): G restricted to the face, bordered by sum w = 1
    kkt[:m, :m] = gram[index][:, index]
    kkt[:m, m] = 1.0
    kkt[m, :m] = 1.0
    solution = np.linalg.solve(kkt, np.append(target[index], 1.0))  # (m+1,): weights, multiplier
    w = np.zeros(len(target))
    w[index] = solution[:m]
    return w, face[int(np.argmin(solution[:m]))]


def _face_solution(gram: np.ndarray, target: np.ndarray, face: tuple[int, ...]) -> np.ndarray | None:
    """``_face_solve``'s weights, or None when they leave the simplex."""
    w, lowest = _face_solve(gram, target, face)
    return None if w[lowest] < -1e-12 else w


def _most_violating(gram: np.ndarray, target: np.ndarray, w: np.ndarray, face: tuple[int, ...]) -> int | None:
    """The expert off ``face`` whose weight would lower the objective most (KKT: its gradient component below
    the face's common one), None when there is none (``w`` is the optimum)."""
    gradient = gram @ w - target  # (K,): half the objective's gradient
    level = gradient[list(face)].mean()  # equal on the face, by construction
    off = [k for k in range(len(target)) if k not in face]
    worst = min(off, key=lambda k: gradient[k], default=None)
    return worst if worst is not None and gradient[worst] < level - 1e-12 * (1.0 + abs(level)) else None


@functools.cache
def _cold_weights() -> tuple[np.ndarray, tuple[int, ...]]:
    """The weights and face before any answer is realised (G and b the ridge's alone: START_WEIGHTS, face (0, 1)),
    solved once a process: each new stream's first answer solved all 15 faces for them (~1-4 ms; 25% of the CPU of a
    feed of churning option names, where most answers are a new stream's first). Read only: callers copy them."""
    return simplex_weights(RIDGE * np.eye(len(EXPERTS)), RIDGE * np.asarray(START_WEIGHTS))


def _normalised(w: np.ndarray) -> np.ndarray:
    w = np.clip(w, 0.0, None)
    return w / w.sum()


class OnlineMix:
    """One (stream, query)'s adaptation state. ``answer`` then, as labels arrive, ``realise``."""

    def __init__(self, n_classes: int, horizon: int, start: int) -> None:
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {n_classes}")
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        self.n_classes, self.horizon = n_classes, horizon
        self.next_point = start  # the next point whose label is due
        self.counts = np.zeros(n_classes)  # (C,) labels realised since start
        self.recent = np.zeros(n_classes)  # (C,) the same, forgotten with HALF_LIFE
        self.realised = 0  # answers realised (with a label)
        self.model_sum = np.zeros(n_classes)  # (C,) sum of their model answers
        self.gram = np.zeros((len(EXPERTS), len(EXPERTS)))  # (K, K) sum E^T E over realised answers
        self.target = np.zeros(len(EXPERTS))  # (K,) sum E^T y
        self.pending: deque[tuple[int, np.ndarray]] = deque()  # (point, experts (C, K)) of answers not realised
        self.face: tuple[int, ...] | None = None  # the experts the last weights solve left non-zero
        self._weights: np.ndarray | None = None  # (K,) those weights, until an answer is realised

    # -- labels ------------------------------------------------------------------------------------

    def labels_due(self, point: int) -> range:
        """The points whose labels must be realised before answering at ``point``."""
        return range(self.next_point, point - self.horizon + 1)

    def realise(self, point: int, label: int) -> None:
        """The label (class index, or NO_LABEL) of ``point``, the next one due; realises the answers there."""
        if point != self.next_point:
            raise ValueError(f"labels come in order: point {self.next_point} is due, got {point}")
        self.next_point += 1
        self.recent *= 0.5 ** (1.0 / HALF_LIFE)
        if label != NO_LABEL:
            self.counts[label] += 1.0
            self.recent[label] += 1.0
        while self.pending and self.pending[0][0] <= point:
            at, experts = self.pending.popleft()  # (C, K)
            if at == point and label != NO_LABEL:
                self.realised += 1
                self.model_sum += experts[:, 0]
                self.gram += np.einsum("ck,cj->kj", experts, experts)
                self.target += experts[label]
                self._weights = None

    # -- answers -----------------------------------------------------------------------------------

    def experts(self, p: np.ndarray) -> np.ndarray:
        """(C, K) the four experts' distributions for the model answer p (C,)."""
        mean = self.model_sum / self.realised if self.realised else p  # (C,) mbar
        frequency = (self.counts + PRIOR_LABELS * mean) / (self.counts.sum() + PRIOR_LABELS)
        shift = p * frequency / np.maximum(mean, FLOOR)
        shift = shift / shift.sum()
        recent = (self.recent + PRIOR_LABELS * frequency) / (self.recent.sum() + PRIOR_LABELS)
        return np.stack([p, shift, frequency, recent], axis=1)

    def weights(self) -> np.ndarray:
        """(K,) the experts' weights now (solved again only after an answer was realised)."""
        if self._weights is None:
            if self.realised == 0:  # gram and target still zero: every new (stream, query) solves this very problem
                weights, self.face = _cold_weights()
                self._weights = weights.copy()
                return self._weights
            ridge = RIDGE * np.eye(len(EXPERTS))
            self._weights, self.face = simplex_weights(self.gram + ridge, self.target + RIDGE * np.asarray(
                START_WEIGHTS), self.face)
        return self._weights

    def answer(self, p: np.ndarray, point: int, keep: bool = True, publish: bool = True) -> np.ndarray | None:
        """The published distribution (C,) for the model answer ``p`` at ``point``, kept until realised; with
        ``keep=False`` the mix as it stands, the state untouched (an on-demand ask); with ``publish=False`` kept
        and nothing returned: an answer published before a restart, re-fed (the experts' weights are solved
        when an answer is next published, from the same statistics)."""
        experts = self.experts(np.asarray(p, dtype=np.float64))  # (C, K)
        if not keep:
            return experts @ self.weights()
        if self.next_point <= point - self.horizon:
            raise ValueError(f"an answer at point {point} needs the labels up to {point - self.horizon} first "
                             f"(next due: {self.next_point})")
        if self.pending and point < self.pending[-1][0]:
            raise ValueError(f"answers come in point order: {point} after {self.pending[-1][0]}")
        self.pending.append((point, experts))
        return experts @ self.weights() if publish else None

    # -- durability --------------------------------------------------------------------------------

    def to_state(self) -> dict[str, Any]:
        """Plain JSON-able data (Python floats round-trip float64 exactly through JSON and msgpack)."""
        return {"n_classes": self.n_classes, "horizon": self.horizon, "next_point": self.next_point,
                "counts": self.counts.tolist(), "recent": self.recent.tolist(), "realised": self.realised,
                "model_sum": self.model_sum.tolist(), "gram": self.gram.tolist(), "target": self.target.tolist(),
                "pending": [[point, experts.tolist()] for point, experts in self.pending],
                "face": None if self.face is None else list(self.face)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> OnlineMix:
        mix = cls(int(state["n_classes"]), int(state["horizon"]), int(state["next_point"]))
        mix.counts = np.array(state["counts"], dtype=np.float64)
        mix.recent = np.array(state["recent"], dtype=np.float64)
        mix.realised = int(state["realised"])
        mix.model_sum = np.array(state["model_sum"], dtype=np.float64)
        mix.gram = np.array(state["gram"], dtype=np.float64)
        mix.target = np.array(state["target"], dtype=np.float64)
        mix.pending = deque((int(point), np.array(e, dtype=np.float64)) for point, e in state["pending"])
        mix.face = None if state.get("face") is None else tuple(int(k) for k in state["face"])
        return mix


def adapt_series(points: np.ndarray, probs: np.ndarray, labels: np.ndarray, start: int, horizon: int
                 ) -> np.ndarray:
    """Offline: the distributions a stream would have published for model answers probs (n, C) at the sorted
    points (n,), with labels (ticks,) per point (NO_LABEL where none) counted from ``start`` on (evaluate)."""
    mix = OnlineMix(probs.shape[1], horizon, start)
    out = np.empty_like(probs, dtype=np.float64)  # (n, C)
    for k, (point, p) in enumerate(zip(points.tolist(), probs)):
        for due in mix.labels_due(point):
            mix.realise(due, int(labels[due]) if due < len(labels) else NO_LABEL)
        out[k] = mix.answer(p, point)
    return out
