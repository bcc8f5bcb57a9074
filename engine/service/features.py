"""The baseline a quant fits first: multinomial logistic regression on standard microstructure features.

Features at an answer point (just after tick i) use ticks 0..i of the stream only:

| feature | meaning |
|---|---|
| `ret_1`, `ret_5`, `ret_20`, `ret_50` | mark log-return over the last k ticks, bps (before k ticks: since the first) |
| `vol_20` | realised volatility: sqrt(sum of squared 1-tick mark returns over the last 20 ticks), bps |
| `imbalance_20` | signed trade volume / trade volume over the last 20 ticks (buy +, sell -, unknown 0) |
| `sign_run` | sign of the last signed trade x log(1 + length of its run of same-signed trades) |
| `spread_bps` | last quote's (ask - bid) / mid, bps (0 before the first quote) |
| `quote_imbalance` | last quote's bid_size / (bid_size + ask_size) - 0.5 (0 without sizes) |
| `log_gap_ms` | log(1 + ms since the previous tick) |
| `is_trade` | 1 if the tick is a trade |

The fit: features standardised with the training mean and deviation (then
clipped to +-8 so a single outlier cannot dominate), a bias, an L2 penalty on the
weights (not the bias), mean cross-entropy minimised by Newton's method in float64
(numpy; no scikit-learn).
"""

from __future__ import annotations

import json
import math
from collections import deque
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np

from connectors.ticks import TRADE, Tick
from engine.quoting import quoted, quoted_list, quoted_words
from engine.text_files import read_text

FEATURES = ("ret_1", "ret_5", "ret_20", "ret_50", "vol_20", "imbalance_20", "sign_run", "spread_bps",
            "quote_imbalance", "log_gap_ms", "is_trade")
RETURN_HORIZONS = (1, 5, 20, 50)
WINDOW = 20
CLIP = 8.0


def _lagged_sum(x: np.ndarray, k: int) -> np.ndarray:
    """sum of x[i-k+1..i] (fewer terms at the start)."""
    cs = np.concatenate([[0.0], np.cumsum(x)])
    lo = np.maximum(np.arange(1, len(x) + 1) - k, 0)
    return cs[1:] - cs[lo]


def microstructure_features(ticks: Sequence[Tick], marks: np.ndarray) -> np.ndarray:
    """(n, len(FEATURES)) float64, row i from ticks 0..i only."""
    n = len(ticks)
    logm = np.log(marks) * 1e4
    r1 = np.diff(logm, prepend=logm[0])
    cols = [logm - logm[np.maximum(np.arange(n) - k, 0)] for k in RETURN_HORIZONS]
    cols.append(np.sqrt(_lagged_sum(r1 * r1, WINDOW)))
    signed, size, run = np.zeros(n), np.zeros(n), np.zeros(n)
    spread, qimb, gap, is_trade = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
    last_sign, run_len, last_spread, last_qimb, prev_ts = 0.0, 0, 0.0, 0.0, None
    for i, t in enumerate(ticks):  # stateful features: one pass
        if t.kind == TRADE:
            is_trade[i] = 1.0
            sign = 1.0 if t.side == "buy" else -1.0 if t.side == "sell" else 0.0
            signed[i], size[i] = sign * t.size, t.size
            if sign:
                run_len = run_len + 1 if sign == last_sign else 1
                last_sign = sign
        else:
            mid = 0.5 * (t.bid + t.ask)
            last_spread = (t.ask - t.bid) / mid * 1e4
            both = (t.bid_size or 0.0) + (t.ask_size or 0.0)
            last_qimb = (t.bid_size or 0.0) / both - 0.5 if t.bid_size is not None and both > 0 else 0.0
        run[i] = last_sign * np.log1p(run_len)
        spread[i], qimb[i] = last_spread, last_qimb
        gap[i] = np.log1p(max(t.ts - prev_ts, 0) / 1e6) if prev_ts is not None else 0.0
        prev_ts = t.ts
    vol = _lagged_sum(size, WINDOW)
    imbalance = np.divide(_lagged_sum(signed, WINDOW), vol, out=np.zeros(n), where=vol > 0)
    cols += [imbalance, run, spread, qimb, gap, is_trade]
    return np.stack(cols, axis=1)


class LogisticBaseline(NamedTuple):
    """A fitted multinomial logistic regression on standardised features."""

    mean: np.ndarray  # (F,)
    scale: np.ndarray  # (F,)
    weights: np.ndarray  # (F, C)
    bias: np.ndarray  # (C,)

    def standardise(self, x: np.ndarray) -> np.ndarray:
        return np.clip((x - self.mean) / self.scale, -CLIP, CLIP)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        z = self.standardise(x) @ self.weights + self.bias
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)


ABSENT_BIAS = -50.0  # a class the training points never take: exp(-50) ~ 2e-22 of a present class's odds


def fit_logistic(x: np.ndarray, y: np.ndarray, n_classes: int, l2: float = 1e-3,
                 max_iter: int = 100) -> LogisticBaseline:
    """Minimise mean cross-entropy + l2/2 * |W|^2 over (W, b); x (N, F), y (N,) class indices. Newton's method
    with a backtracking line search: (F + 1) * C parameters (42 for 13 features and 3 classes), whose Hessian is
    cheap, so it converges in a few steps where L-BFGS took hundreds of small torch calls (a third of a tiny
    `train`'s or `evaluate`'s CPU time)."""
    if len(y) == 0:
        raise ValueError("logistic baseline: no labelled training points")
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    xb = np.hstack([np.clip((x - mean) / scale, -CLIP, CLIP), np.ones((len(x), 1))])  # (N, F + 1): the bias last
    # a class no training point has: its minimum is at a bias of -inf (probability 0), which Newton's steps would
    # chase for ever; it is left out of the fit and given weights 0 and the bias ABSENT_BIAS (finite, for JSON)
    present = np.flatnonzero(np.bincount(y, minlength=n_classes))
    onehot = np.eye(n_classes)[y][:, present]  # (N, C present)
    penalty = np.r_[np.full(x.shape[1], l2), 0.0][:, None]  # (F + 1, 1): the weights', not the bias's
    theta = np.zeros((xb.shape[1], len(present)))  # (F + 1, C present)
    loss, probs = _penalised_loss(xb, onehot, theta, penalty)
    for _ in range(max_iter):
        grad = xb.T @ (probs - onehot) / len(xb) + penalty * theta  # (F + 1, C)
        if np.abs(grad).max() < 1e-10:
            break
        step = np.linalg.solve(_hessian(xb, probs, penalty), grad.reshape(-1, order="F"))
        step = step.reshape(theta.shape, order="F")
        slope, t = float((grad * step).sum()), 1.0
        while True:  # a full Newton step where it lowers the loss enough, else halved (Armijo)
            new_loss, new_probs = _penalised_loss(xb, onehot, theta - t * step, penalty)
            if new_loss <= loss - 1e-4 * t * slope or t < 1e-8:
                break
            t /= 2
        if new_loss >= loss:
            break
        theta, probs, gained, loss = theta - t * step, new_probs, loss - new_loss, new_loss
        if gained <= 1e-14 * max(1.0, abs(loss)):
            break
    full = np.zeros((xb.shape[1], n_classes))
    full[-1] = ABSENT_BIAS
    full[:, present] = theta
    return LogisticBaseline(mean, scale, full[:-1], full[-1])


def _penalised_loss(xb: np.ndarray, onehot: np.ndarray, theta: np.ndarray, penalty: np.ndarray
                    ) -> tuple[float, np.ndarray]:
    """(mean cross-entropy + l2/2 * |W|^2, the (N, C) probabilities) at ``theta``."""
    z = xb @ theta
    z -= z.max(axis=1, keepdims=True)
    log_probs = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = -float((log_probs * onehot).sum()) / len(xb) + 0.5 * float((penalty * theta * theta).sum())
    return loss, np.exp(log_probs)


def _hessian(xb: np.ndarray, probs: np.ndarray, penalty: np.ndarray) -> np.ndarray:
    """The penalised loss's Hessian in theta's column-major order: block (a, b) is
    xb' diag(p_a (1[a = b] - p_b)) xb / N, plus the penalty on the diagonal; plus u u' for the one direction that
    moves no probability (the same bias added to every class, u), which makes it invertible: the gradient is
    orthogonal to u (each point's probabilities sum to 1), so the step solved is the least-norm Newton step, and
    the biases keep summing to 0 as L-BFGS from 0 kept them."""
    d, c = xb.shape[1], probs.shape[1]
    bias = np.zeros(d * c)
    bias[d - 1::d] = 1 / np.sqrt(c)  # u: each class's bias entry
    hess = np.outer(bias, bias)
    for a in range(c):
        for b in range(a, c):
            w = probs[:, a] * ((a == b) - probs[:, b])
            block = (xb.T * w) @ xb / len(xb)
            if a == b:
                block += np.diag(penalty[:, 0])
            hess[a * d:(a + 1) * d, b * d:(b + 1) * d] += block
            if a != b:
                hess[b * d:(b + 1) * d, a * d:(a + 1) * d] += block.T
    return hess


class FeatureTracker:
    """`microstructure_features`, one tick at a time: ``update(tick, mark)`` returns the row the batch function
    gives for that tick (within float rounding: windows here are running sums of the last WINDOW terms, there
    differences of cumulative sums). What a served stream keeps to answer with the head (AnswerHead)."""

    def __init__(self) -> None:
        self._logm: deque[float] = deque(maxlen=max(RETURN_HORIZONS) + 1)  # log marks x 1e4, newest last
        self._sq: deque[float] = deque(maxlen=WINDOW)  # squared 1-tick returns
        self._signed: deque[float] = deque(maxlen=WINDOW)
        self._size: deque[float] = deque(maxlen=WINDOW)
        self._last_sign, self._run_len, self._spread, self._qimb = 0.0, 0, 0.0, 0.0
        self._prev_ts: int | None = None

    def update(self, tick: Tick, mark: float) -> np.ndarray:  # (len(FEATURES),)
        logm = math.log(mark) * 1e4
        r1 = logm - self._logm[-1] if self._logm else 0.0
        self._logm.append(logm)
        last = len(self._logm) - 1  # this tick's; up to max(RETURN_HORIZONS) before it
        rets = [logm - self._logm[max(last - k, 0)] for k in RETURN_HORIZONS]
        self._sq.append(r1 * r1)
        signed = size = 0.0
        is_trade = 0.0
        if tick.kind == TRADE:
            is_trade = 1.0
            sign = 1.0 if tick.side == "buy" else -1.0 if tick.side == "sell" else 0.0
            signed, size = sign * tick.size, tick.size
            if sign:
                self._run_len = self._run_len + 1 if sign == self._last_sign else 1
                self._last_sign = sign
        else:
            mid = 0.5 * (tick.bid + tick.ask)
            self._spread = (tick.ask - tick.bid) / mid * 1e4
            both = (tick.bid_size or 0.0) + (tick.ask_size or 0.0)
            self._qimb = (tick.bid_size or 0.0) / both - 0.5 if tick.bid_size is not None and both > 0 else 0.0
        self._signed.append(signed)
        self._size.append(size)
        volume = sum(self._size)
        gap = math.log1p(max(tick.ts - self._prev_ts, 0) / 1e6) if self._prev_ts is not None else 0.0
        self._prev_ts = tick.ts
        return np.array([*rets, math.sqrt(sum(self._sq)), sum(self._signed) / volume if volume > 0 else 0.0,
                         self._last_sign * math.log1p(self._run_len), self._spread, self._qimb, gap, is_trade])


HEAD_FILE = "answer_head.json"  # beside calibration.json in a checkpoint `flashtick train` writes
HEAD_FORMAT = "flashtick.answer_head/1"
BLEND_GRID = 21  # model weights tried on the validation part: 0, 0.05, ..., 1


class QuestionHead(NamedTuple):
    """One question's answer head: the calibrated model answer blended with a logistic regression on the
    stream's microstructure features, ``model_weight * p_model + (1 - model_weight) * p_logistic(x)``; both
    fitted by `flashtick train` (the regression on the train part, the weight on the validation part)."""

    logistic: LogisticBaseline
    model_weight: float
    points: int  # train answer points the regression was fitted on
    validation_points: int  # where the weight was chosen
    brier_model: float  # on those validation points: the calibrated model alone, and blended
    brier_blend: float

    def blend(self, p_model: np.ndarray, x: np.ndarray) -> np.ndarray:
        """(n, C) model answers and (n, F) features -> (n, C) blended answers."""
        w = self.model_weight
        return p_model if w == 1.0 else w * p_model + (1.0 - w) * self.logistic.predict_proba(x)

    def to_dict(self) -> dict:
        lg = self.logistic
        return {"model_weight": self.model_weight, "mean": lg.mean.tolist(), "scale": lg.scale.tolist(),
                "weights": lg.weights.tolist(), "bias": lg.bias.tolist(), "points": self.points,
                "validation_points": self.validation_points, "brier_model": self.brier_model,
                "brier_blend": self.brier_blend}

    @classmethod
    def from_dict(cls, d: dict, where: str) -> "QuestionHead":
        keys = set(cls._fields) - {"logistic"} | {"mean", "scale", "weights", "bias"}
        if not isinstance(d, dict) or set(d) != keys:
            raise ValueError(f"{where}: needs exactly the keys {quoted_words(sorted(keys))}")
        arrays = [np.asarray(d[k], dtype=np.float64) for k in ("mean", "scale", "weights", "bias")]
        mean, scale, weights, bias = arrays
        n_features = len(FEATURES)
        if mean.shape != (n_features,) or scale.shape != (n_features,) or weights.ndim != 2 \
                or weights.shape[0] != n_features or bias.shape != (weights.shape[1],) \
                or not all(np.isfinite(a).all() for a in arrays) or (scale <= 0).any():
            raise ValueError(f"{where}: mean and scale are {n_features} finite numbers (scale > 0), weights "
                             f"{n_features} rows of one weight per answer, bias one per answer")
        w = d["model_weight"]
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0.0 <= w <= 1.0:
            raise ValueError(f"{where}: model_weight must be a number in [0, 1], got {quoted(w)}")
        return cls(LogisticBaseline(mean, scale, weights, bias), float(w), int(d["points"]),
                   int(d["validation_points"]), float(d["brier_model"]), float(d["brier_blend"]))


def brier(p: np.ndarray, y: np.ndarray) -> float:
    """Mean Brier score of (n, C) answers against (n,) class indices."""
    return float(((p - np.eye(p.shape[1])[y]) ** 2).sum(axis=1).mean())


def fit_head(train_x: np.ndarray, train_y: np.ndarray, val_x: np.ndarray, val_y: np.ndarray,
             val_model: np.ndarray, n_classes: int) -> QuestionHead:
    """The regression on the train part's answer points, then the model weight (of BLEND_GRID) whose blend has
    the lowest Brier on the validation part; ties keep the larger model weight."""
    logistic = fit_logistic(train_x, train_y, n_classes)
    p_logistic = logistic.predict_proba(val_x)  # (n, C)
    scored = [(brier(w * val_model + (1 - w) * p_logistic, val_y), -w) for w in np.linspace(0.0, 1.0, BLEND_GRID)]
    best, minus_w = min(scored)
    return QuestionHead(logistic, round(-minus_w, 4), len(train_y), len(val_y), round(brier(val_model, val_y), 6),
                        round(best, 6))


def write_head(model_dir: str | Path, heads: dict[str, QuestionHead], source: str) -> None:
    doc = {"format": HEAD_FORMAT, "source": source, "features": list(FEATURES),
           "questions": {name: head.to_dict() for name, head in heads.items()}}
    from engine.service.output_paths import write_text_atomically  # (train's one writer: a full disk named)

    write_text_atomically(Path(model_dir) / HEAD_FILE, json.dumps(doc, indent=1) + "\n")


HEAD_KEYS = ("format", "source", "features", "questions")


def read_head(model_dir: str | Path, codec: Any = None) -> dict[str, QuestionHead]:
    """A checkpoint's answer heads by question name; none (an empty dict) without answer_head.json. With
    ``codec`` (the checkpoint's BinnedCodec) each head must name one of its questions with realised answers
    and have one weight column per answer."""
    path = Path(model_dir) / HEAD_FILE
    if not path.is_file():
        return {}
    try:
        doc = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != HEAD_FORMAT:
        raise ValueError(f"{path}: not an answer head file (format {quoted(HEAD_FORMAT)})")
    if unknown := sorted(set(doc) - set(HEAD_KEYS)):
        raise ValueError(f"{path}: unknown keys {quoted_words(unknown)} (known: {quoted_words(HEAD_KEYS)})")
    if doc.get("features") != list(FEATURES):
        raise ValueError(f"{path}: its features {quoted(doc.get('features'))} are not this version's "
                         f"{quoted_list(FEATURES)}")
    if not isinstance(doc.get("questions"), dict):
        raise ValueError(f"{path}: questions must be a mapping of question name -> head")
    heads = {name: QuestionHead.from_dict(d, f"{path}: question {quoted(name)}")
             for name, d in doc["questions"].items()}
    questions = getattr(codec, "questions", None)
    for name, head in heads.items() if questions is not None else ():
        question = questions.get(name)
        if question is None or question.spec.kind == "regime":
            named = [n for n, q in questions.items() if q.spec.kind != "regime"]
            raise ValueError(f"{path}: a head for {quoted(name)}, which is no question of this checkpoint with "
                             f"realised answers ({quoted_words(named)})")
        if head.logistic.weights.shape[1] != len(question.labels):
            raise ValueError(f"{path}: question {quoted(name)} has {len(question.labels)} answers, its head "
                             f"{head.logistic.weights.shape[1]} weight columns")
    return heads
