"""Fit a tick model's per-question answer calibration on a validation slice (connectors/calibration.py).

For each codec question, on (answer logits z, realised label y) pairs of validation answer points, probed
exactly as serving probes them (engine/service/evaluation_answers.py `answer_logits`): the temperature T and per-answer
bias b that minimise the mean negative log-likelihood of softmax(z / T + b) (queries.probe_answers.calibrated_logits,
the same transform serving applies), plus `l2` * |b|^2 (which also pins b's free constant: sum b = 0).
L-BFGS in float64 over (log T, b), from T = 1, b = 0; deterministic; T bounded to [1/4, 4] and each bias to
[-3, 3] (smoothly, through tanh), so a fit cannot discard the model's logits (T = 3e8 made every answer the
validation part's class frequencies). A question with fewer than `min_points` labelled points keeps T = 1, b = 0.
Its answer points overlap (1,100 points of a 50-tick horizon are ~22 independent outcomes), so the in-sample NLL
always improves: the fit is kept only if it also beats no calibration out of sample, cross-fitted (fitted on the
first half in time of every stream's points, scored on their second halves, and the other way round: each half
holds every stream, so the check asks whether a fit carries forward or back in time, not from one instrument to
another), on both NLL and Brier, on each half alone; else T = 1, b = 0, and the record says why.

Used by `flashtick train` (after early stopping, on its validation part; engine/service/finetune.py)
and, for the built-in model, by `python -m engine.service.train_builtin --calibrate-only --data-dir DIR`
(`calibrate_builtin`; `--sets` for a model trained on other real sets): validation slices of the data it
was trained on, never a test slice.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from connectors.calibration import AnswerCalibration, Calibration
from connectors.codec import BinnedCodec
from connectors.labels import NO_LABEL, label_series, marks_of
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import Tick
from engine.service.datasets import DEFAULT_SETS, load_real
from engine.service.evaluate import MIN_POINTS, MIN_SECOND_ANSWER, EvalOptions, answer_logits, window_ticks
from engine.service.evaluation_points import chosen_ticks
from engine.service.features import FEATURES, QuestionHead, brier, fit_head
from engine.service.splits import StreamData, StreamSplit
from queries.probe_answers import calibrated_logits, calibrated_probs

L2 = 1e-3
BUILTIN_VALIDATION = (0.7, 0.8)  # of each real set's ticks: inside its training 80%, before its test 20%
BUILTIN_SYNTHETIC_SEED = 3  # trained on seed 1; seed 2 was the earlier quality report's hold-out
BUILTIN_SYNTHETIC_TICKS = 12_000  # 4 streams: about as many answer points as each real set gives


T_BOUND = 4.0  # T in [1 / T_BOUND, T_BOUND]
BIAS_BOUND = 3.0  # each bias in [-BIAS_BOUND, BIAS_BOUND]


def fit_answer_calibration(z: torch.Tensor, y: torch.Tensor, l2: float = L2, min_points: int = MIN_POINTS,
                           stream: np.ndarray | None = None) -> AnswerCalibration:
    """T and b minimising mean NLL(softmax(z / T + b), y) + l2 |b|^2 over (n, labels) logits z, labels y, within
    their bounds; kept only when the cross-fitted halves score better than no calibration (module docstring).
    ``stream``: (n,) each point's stream (points in time order within each stream); None: one stream."""
    z, y = z.to(torch.float64), y.to(torch.int64)
    raw = float(F.cross_entropy(z, y)) if len(y) else math.nan
    if len(y) < min_points or one_answer(y):
        return AnswerCalibration(points=len(y), nll_raw=None if math.isnan(raw) else round(raw, 5))
    second = time_halves(np.zeros(len(y), dtype=np.int64) if stream is None else np.asarray(stream))
    held, every_half = _cross_fitted(z, y, torch.from_numpy(second), l2)
    record = {name: round(value, 5) for name, value in held._asdict().items()}
    if not every_half:
        return AnswerCalibration(points=len(y), nll_raw=round(raw, 5), **record)
    t, b = _fit(z, y, l2)
    nll = float(F.cross_entropy(calibrated_logits(z, t, b), y))
    return AnswerCalibration(temperature=round(t, 6), bias=tuple(round(float(x), 6) for x in b), points=len(y),
                             nll_raw=round(raw, 5), nll_calibrated=round(nll, 5), **record)


def _fit(z: torch.Tensor, y: torch.Tensor, l2: float) -> tuple[float, torch.Tensor]:
    """(T, b) minimising the penalised NLL, each within its bound."""
    u = torch.zeros((), dtype=torch.float64, requires_grad=True)  # log T = log(T_BOUND) tanh(u)
    v = torch.zeros(z.shape[1], dtype=torch.float64, requires_grad=True)  # b = BIAS_BOUND tanh(v)
    opt = torch.optim.LBFGS([u, v], lr=1.0, max_iter=200, tolerance_grad=1e-10, tolerance_change=1e-12,
                            history_size=20, line_search_fn="strong_wolfe")
    bounded = lambda: ((math.log(T_BOUND) * torch.tanh(u)).exp(), BIAS_BOUND * torch.tanh(v))  # noqa: E731

    def closure() -> torch.Tensor:
        opt.zero_grad()
        t, bias = bounded()
        loss = F.cross_entropy(calibrated_logits(z, t, bias), y) + l2 * bias.square().sum()
        loss.backward()
        return loss

    opt.step(closure)
    t, bias = bounded()
    return float(t.detach()), bias.detach()


class HeldOut(NamedTuple):
    """Mean NLL (nats) and Brier over every point, each scored by the fit on the other half, and uncalibrated."""

    heldout_nll_raw: float
    heldout_nll_calibrated: float
    heldout_brier_raw: float
    heldout_brier_calibrated: float


def time_halves(stream: np.ndarray) -> np.ndarray:
    """(n,) bool: whether each point is in the second half in time of its own stream's points (``stream``: (n,)
    each point's stream, points in time order within each stream). Both halves hold every stream of 2 points or
    more; an odd count's first half is the smaller, so one stream is split at n // 2 as before. The points halved
    as they came (stream after stream) were mostly different streams on a multi-stream fit (the built-in model's
    BTCUSDT and EURUSD against the synthetic market): the check asked whether a fit carries to other instruments.
    Contiguous halves, not interleaved blocks, since neighbouring points share their futures: on review226's
    seed-43 walk, 4 to 10 alternating blocks kept a direction_5 fit that raised test Brier 0.647 -> 0.655
    (benchmarks/results/calibration_time_halves.json)."""
    _, index, counts = np.unique(stream, return_inverse=True, return_counts=True)
    rank = np.empty(len(stream), dtype=np.int64)  # each point's position among its own stream's points
    order = np.argsort(index, kind="stable")
    rank[order] = np.arange(len(stream)) - np.repeat(np.cumsum(counts) - counts, counts)
    return rank >= counts[index] // 2


def _cross_fitted(z: torch.Tensor, y: torch.Tensor, second: torch.Tensor, l2: float) -> tuple[HeldOut, bool]:
    """Fit on each half of the points (``second``: (n,) bool, time_halves), score the other half: the scores pooled
    over both halves, and whether the fit beat no calibration on each half alone, on NLL and Brier (pooled, one
    half's large gain hid the other's loss: review226's seed-42 walk, move_bps_50 NLL 1.591 -> 1.475 and 1.751 ->
    1.865)."""
    calibrated = torch.empty_like(z)

    def brier_of(logits: torch.Tensor, part: torch.Tensor | slice) -> float:
        return brier(torch.softmax(logits[part], -1).numpy(), y[part].numpy())

    every_half = True
    for fit_on, score_on in ((~second, second), (second, ~second)):
        t, b = _fit(z[fit_on], y[fit_on], l2)
        calibrated[score_on] = calibrated_logits(z[score_on], t, b)
        every_half &= (float(F.cross_entropy(calibrated[score_on], y[score_on])) <
                       float(F.cross_entropy(z[score_on], y[score_on])) and
                       brier_of(calibrated, score_on) <= brier_of(z, score_on))
    whole = slice(None)
    return HeldOut(float(F.cross_entropy(z, y)), float(F.cross_entropy(calibrated, y)), brier_of(z, whole),
                   brier_of(calibrated, whole)), every_half


def one_answer(y: torch.Tensor | np.ndarray) -> bool:
    """Whether labels ``y`` hold fewer than MIN_SECOND_ANSWER of any answer but the most common one."""
    counts = np.sort(np.bincount(np.asarray(y, dtype=np.int64)))
    return len(counts) < 2 or counts[-2] < MIN_SECOND_ANSWER


class AnswerPoints(NamedTuple):
    """One question's labelled answer points of a part, in time order within each stream, stream after stream."""

    logits: torch.Tensor  # (n, labels) answer logits
    labels: torch.Tensor  # (n,) realised answers
    features: np.ndarray  # (n, F) microstructure features
    stream: np.ndarray  # (n,) each point's stream: its index in the streams given


ValidationPairs = list[AnswerPoints]  # per question


def validation_pairs(model: Any, codec: BinnedCodec, streams: list[StreamData], options: EvalOptions,
                     part: str = "validation", advance: Callable[[int], None] | None = None) -> ValidationPairs:
    """Per question: its AnswerPoints at the labelled points of `part` of every stream (at most
    `options.max_points` answer ticks per stream, as evenly spread runs); ``advance``: told the windows run."""
    W = window_ticks(model)
    zs: list[list[torch.Tensor]] = [[] for _ in codec.questions]
    ys: list[list[int]] = [[] for _ in codec.questions]
    xs: list[list[np.ndarray]] = [[] for _ in codec.questions]
    ss: list[list[int]] = [[] for _ in codec.questions]
    for si, sd in enumerate(streams):
        ii, qq = sd.points(part)
        keep = np.isin(ii, chosen_ticks(np.unique(ii), W - W // 2, options.max_points))
        ii, qq = ii[keep], qq[keep]
        logits = answer_logits(model, codec, sd, ii, qq, options, advance)
        features = sd.features
        for k, (i, q) in enumerate(zip(ii, qq)):
            zs[q].append(logits[k])
            ys[q].append(int(sd.labels[i, q]))
            xs[q].append(features[i])
            ss[q].append(si)
    return [AnswerPoints(torch.stack(z) if z else torch.zeros(0, len(q.labels)), torch.tensor(y, dtype=torch.int64),
                         np.array(x).reshape(len(y), len(FEATURES)), np.array(s, dtype=np.int64))
            for z, y, x, s, q in zip(zs, ys, xs, ss, codec.questions.values())]


def calibrate_streams(model: Any, codec: BinnedCodec, streams: list[StreamData], source: str,
                      options: EvalOptions | None = None, part: str = "validation",
                      pairs: ValidationPairs | None = None) -> Calibration:
    """The calibration of `model` fitted on `part` of `streams` (`source` says what that was, for the record);
    ``pairs``: validation_pairs already computed."""
    options = options or EvalOptions()
    pairs = pairs if pairs is not None else validation_pairs(model, codec, streams, options, part)
    fitted = {q.name: fit_answer_calibration(p.logits, p.labels, stream=p.stream)
              for q, p in zip(codec.questions.values(), pairs)}
    return Calibration({n: c for n, c in fitted.items() if c.points}, source)


def fit_heads(codec: BinnedCodec, streams: list[StreamData], pairs: ValidationPairs,
              options: EvalOptions) -> dict[str, QuestionHead]:
    """Per question with enough validation points: the answer head (features.fit_head), its regression fitted
    on the train part's answer points of `streams`, its weight on the validation ``pairs`` read through
    ``codec``'s calibration (the one just fitted)."""
    heads = {}
    features = [sd.features for sd in streams]
    for qi, (q, (z, y, x, _)) in enumerate(zip(codec.questions.values(), pairs)):
        if len(y) < MIN_POINTS or q.spec.kind == "regime" or one_answer(y):
            continue
        train = [(f[ii[qq == qi]], sd.labels[ii[qq == qi], qi]) for sd, f in zip(streams, features)
                 for ii, qq in [sd.points("train")]]
        train_x = np.concatenate([t[0] for t in train])
        train_y = np.concatenate([t[1] for t in train])
        if len(train_y) < MIN_POINTS:
            continue
        rows = chosen_ticks(np.arange(len(train_y)), 1000, options.max_fit_points)
        cal = q.calibration
        p_model = calibrated_probs(z, cal.temperature, cal.bias).numpy().astype(np.float64)  # (n, labels)
        heads[q.name] = fit_head(train_x[rows], train_y[rows], x, y.numpy(), p_model, len(q.labels))
    return heads


def validation_stream(name: str, codec: BinnedCodec, ticks: list[Tick], start: int,
                      regimes: np.ndarray | None = None) -> StreamData:
    """A stream whose only labelled part is ticks [start, len(ticks)): labels from those ticks' marks alone;
    the ticks before it are context only. Nothing after the last tick given exists here."""
    n = len(ticks)
    tokens = np.array(codec.encode_stream(ticks), dtype=np.int64).reshape(n, -1)
    marks = marks_of(ticks)
    parts = StreamSplit(range(0, 0), range(start, n), range(n, n))
    labels = np.full((n, len(codec.questions)), NO_LABEL, dtype=np.int64)
    for qi, q in enumerate(codec.questions.values()):
        labels[start:, qi] = label_series(q.spec, marks[start:], None if regimes is None else regimes[start:])
    return StreamData(name, ticks, tokens, marks, parts, labels)


def builtin_validation_streams(codec: BinnedCodec, data_dir: Path | None, gap: int, first_context: int,
                               sets: tuple[str, ...] = DEFAULT_SETS) -> tuple[list[StreamData], list[str]]:
    """The built-in recipe's calibration slices: ticks [70%, 80%) of each real set it trained on (`sets`; after a
    `gap`; only the first 80% is read past this point, so no test tick is seen), and held-out synthetic seed 3."""
    streams, notes = [], []
    for ds in [] if data_dir is None else load_real(data_dir, sets):
        lo, hi = (int(len(ds.ticks) * f) for f in BUILTIN_VALIDATION)
        streams.append(validation_stream(ds.name, codec, ds.ticks[:hi], lo + gap))
        notes.append(f"{ds.name} ticks [{lo + gap}, {hi}) of {len(ds.ticks)} (trained on [0, {hi}); test from {hi})")
    market = SyntheticMarket(SyntheticConfig(seed=BUILTIN_SYNTHETIC_SEED)).generate(BUILTIN_SYNTHETIC_TICKS)
    for name, (ticks, truths) in market.by_stream().items():
        streams.append(validation_stream(name, codec, ticks, first_context, np.array([t.regime for t in truths])))
    notes.append(f"synthetic market seed {BUILTIN_SYNTHETIC_SEED} (held out): {BUILTIN_SYNTHETIC_TICKS} ticks, "
                 f"answer points from tick {first_context} of each stream")
    return streams, notes


def calibrate_builtin(model: Any, codec: BinnedCodec, data_dir: Path | None, log: Callable[[str], None],
                      options: EvalOptions | None = None, sets: tuple[str, ...] = DEFAULT_SETS) -> Calibration:
    """The calibration of a model trained by the built-in recipe on the real `sets` (see
    `builtin_validation_streams`); without data: synthetic only."""
    options = options or EvalOptions(max_points=10_000)
    gap = max(q.spec.horizon for q in codec.questions.values())
    streams, notes = builtin_validation_streams(codec, data_dir, gap, window_ticks(model), sets)
    if data_dir is None:
        notes.append("no real data (--data-dir not given)")
    log("calibrating on " + "; ".join(notes))
    return calibrate_streams(model, codec, streams, "validation slices of the training data: " + "; ".join(notes),
                             options)


def calibration_table(calibration: Calibration) -> str:
    """A markdown table of the fitted values, for model cards."""
    rows = ["| question | points | temperature | bias | NLL raw | NLL calibrated | held out: NLL raw -> calibrated, "
            "Brier raw -> calibrated |", "|---|---|---|---|---|---|---|"]
    for name, c in calibration.questions.items():
        bias = ", ".join(f"{b:+.3f}" for b in c.bias) or "0"
        held = ("-" if c.heldout_nll_raw is None else
                f"{c.heldout_nll_raw} -> {c.heldout_nll_calibrated}, {c.heldout_brier_raw} -> "
                f"{c.heldout_brier_calibrated}" + ("" if c.nll_calibrated is not None else " (not kept)"))
        rows.append(f"| {name} | {c.points} | {c.temperature:.3f} | {bias} | {c.nll_raw} | {c.nll_calibrated} | "
                    f"{held} |")
    return "\n".join(rows)
