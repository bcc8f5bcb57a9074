"""The baseline a quant fits first: multinomial logistic regression on standard microstructure features.

Features at an answer point (just after tick i) use ticks 0..i of the stream only:

| feature | meaning |
|---|---|
| `ret_1`, `ret_5`, `ret_20`, `ret_50` | mark log-return over the last k ticks, bps (0 before k ticks exist) |
| `vol_20` | realised volatility: sqrt(sum of squared 1-tick mark returns over the last 20 ticks), bps |
| `imbalance_20` | signed trade volume / trade volume over the last 20 ticks (buy +, sell -, unknown 0) |
| `sign_run` | sign of the last signed trade x log(1 + length of its run of same-signed trades) |
| `spread_bps` | last quote's (ask - bid) / mid, bps (0 before the first quote) |
| `quote_imbalance` | last quote's bid_size / (bid_size + ask_size) - 0.5 (0 without sizes) |
| `log_gap_ms` | log(1 + ms since the previous tick) |
| `is_trade` | 1 if the tick is a trade |

The fit: features standardised with the training mean and deviation (then
clipped to +-8 so a single outlier cannot dominate), a bias, an L2 penalty on the
weights (not the bias), mean cross-entropy minimised by L-BFGS in float64. No
scikit-learn: torch is already here.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import torch

from connectors.ticks import TRADE, Tick

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


def fit_logistic(x: np.ndarray, y: np.ndarray, n_classes: int, l2: float = 1e-3,
                 max_iter: int = 200) -> LogisticBaseline:
    """Minimise mean cross-entropy + l2/2 * |W|^2 over (W, b); x (N, F), y (N,) class indices."""
    if len(y) == 0:
        raise ValueError("logistic baseline: no labelled training points")
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 1e-12, scale, 1.0)
    xs = torch.from_numpy(np.clip((x - mean) / scale, -CLIP, CLIP))
    yt = torch.from_numpy(y.astype(np.int64))
    w = torch.zeros(x.shape[1], n_classes, dtype=torch.float64, requires_grad=True)
    b = torch.zeros(n_classes, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=max_iter, tolerance_grad=1e-10, tolerance_change=1e-14,
                            history_size=20, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(xs @ w + b, yt) + 0.5 * l2 * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return LogisticBaseline(mean, scale, w.detach().numpy(), b.detach().numpy())
