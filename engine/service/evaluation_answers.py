"""The checkpoint's answers at labelled answer points, as `evaluate` (and the calibration) score them.

``answer_logits`` probes the model exactly as serving does (engine/service/packing.py pack_batch: tick tokens, then
each question's token after the tick it asks at), in windows that give every answer at least half a window of
context; ``answer_probs`` reads the logits as serving reads them (queries/probe_answers.py calibrated_probs, or a
plain softmax), and ``headed_probs`` blends in the question's answer head as serving publishes it.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from connectors.codec import TOKENS_PER_TICK, BinnedCodec
from engine.service.evaluation_options import EvalOptions
from engine.service.features import QuestionHead
from engine.service.packing import pack_batch
from engine.service.splits import StreamData
from engine.service.tick_checkpoint import window_ticks
from queries.probe_answers import calibrated_probs


def window_starts(ii: np.ndarray, W: int) -> list[int]:
    """The first answer tick of each window `answer_logits` runs for answer ticks ``ii``: runs of at most
    W - W//2 consecutive answer ticks, one window each (also what a run's scoring is estimated by: train_tail.py)."""
    run = W - W // 2
    starts: list[int] = []
    for t in np.unique(ii):
        if not starts or t >= starts[-1] + run:
            starts.append(int(t))
    return starts


@torch.no_grad()
def answer_logits(model: Any, codec: BinnedCodec, sd: StreamData, ii: np.ndarray, qq: np.ndarray,
                  options: EvalOptions, advance: Callable[[int], None] | None = None) -> list[torch.Tensor]:
    """The model's logits over the answers of question qq[k] at tick ii[k] (float32, uncalibrated: see
    `answer_probs`); each window has W ticks and answers its last W - W//2 ticks, so every answer sees
    at least W//2 ticks of context (or all there is). ``advance``: told the windows each batch ran (progress)."""
    qs = list(codec.questions.values())
    q_tok = np.array([q.tokens[0] for q in qs])
    W = window_ticks(model)
    run = W - W // 2
    out: list[torch.Tensor | None] = [None] * len(ii)
    order = np.argsort(ii, kind="stable")
    sorted_ii = ii[order]
    starts = window_starts(ii, W)
    jobs = [(max(0, t0 - W // 2), order[np.searchsorted(sorted_ii, t0) : np.searchsorted(sorted_ii, t0 + run)])
            for t0 in starts]
    for b0 in range(0, len(jobs), options.batch):
        group = jobs[b0 : b0 + options.batch]
        K = max(len(sel) for _, sel in group)
        tick_ids = np.zeros((len(group), W * TOKENS_PER_TICK), dtype=np.int64)
        q_ids, q_end = np.zeros((len(group), K), dtype=np.int64), np.zeros((len(group), K), dtype=np.int64)
        for b, (s, sel) in enumerate(group):
            toks = sd.tokens[s : s + W].reshape(-1)
            tick_ids[b, : len(toks)] = toks  # a short tail is padding no question token can see
            q_ids[b, : len(sel)] = q_tok[qq[sel]]
            q_end[b, : len(sel)] = (ii[sel] - s + 1) * TOKENS_PER_TICK
        batch = pack_batch(tick_ids, q_ids, q_end, np.full_like(q_ids, -100))
        logits = model(input_ids=batch.ids.to(options.device), attention_mask=batch.mask.to(options.device),
                       position_ids=batch.pos.to(options.device)).logits.float().cpu()
        L = tick_ids.shape[1]
        for b, (_, sel) in enumerate(group):
            for k, idx in enumerate(sel):
                out[idx] = logits[b, L + k, list(qs[qq[idx]].answers.values())]
        if advance is not None:
            advance(len(group))
    return out  # type: ignore[return-value]


def answer_probs(codec: BinnedCodec, qi: int, logits: list[torch.Tensor], calibrated: bool = True) -> np.ndarray:
    """(n, labels) float64 answer distributions of question `qi` from its answer logits, read as serving reads
    them (with the codec's calibration), or raw (softmax) with calibrated=False."""
    if not logits:
        return np.zeros((0, len(list(codec.questions.values())[qi].labels)))
    cal = list(codec.questions.values())[qi].calibration
    z = torch.stack(logits)  # (n, labels) float32
    p = calibrated_probs(z, cal.temperature, cal.bias) if calibrated else torch.softmax(z, dim=-1)
    return p.numpy().astype(np.float64)


def headed_probs(codec: BinnedCodec, qi: int, logits: list[torch.Tensor], x: np.ndarray,
                 head: QuestionHead | None) -> np.ndarray:
    """(n, labels) the checkpoint's answers as serving publishes them before any adaptation: calibrated, then
    blended by the question's answer head (answer_head.json) with the (n, F) features at the same points."""
    p = answer_probs(codec, qi, logits)
    return p if head is None or not len(p) else head.blend(p, x)
