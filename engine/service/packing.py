"""Serving-exact packing of tick windows and question probes into one forward (training, evaluation and
calibration all score answers this way; a test pins it to a plain "ticks, then question" forward)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch


class Batch(NamedTuple):
    ids: torch.Tensor  # (B, L + K)
    pos: torch.Tensor  # (B, L + K)
    mask: torch.Tensor  # (B, 1, L + K, L + K) bool, True = may attend
    qa_targets: torch.Tensor  # (B, K), -100 = padding


def pack_batch(tick_ids: np.ndarray, q_ids: np.ndarray, q_end: np.ndarray, qa_targets: np.ndarray) -> Batch:
    """Lay out windows exactly as serving sees them: tick tokens at positions 0..L-1 under a causal
    mask, then question tokens, each at position q_end (the number of tick tokens before its answer
    point) seeing only tick tokens < q_end and itself. Tick tokens never see question tokens.

    tick_ids (B, L); q_ids, q_end, qa_targets (B, K); padded questions carry qa_target -100.
    """
    B, L = tick_ids.shape
    K = q_ids.shape[1]
    T = L + K
    ids = torch.from_numpy(np.concatenate([tick_ids, q_ids], axis=1))
    q_end_t = torch.from_numpy(q_end)
    pos = torch.cat([torch.arange(L).expand(B, L), q_end_t], dim=1)
    mask = torch.zeros(B, T, T, dtype=torch.bool)
    mask[:, :L, :L] = torch.ones(L, L, dtype=torch.bool).tril()
    mask[:, L:, :L] = torch.arange(L)[None, None, :] < q_end_t[:, :, None]
    mask[:, torch.arange(L, T), torch.arange(L, T)] = True
    return Batch(ids, pos, mask[:, None], torch.from_numpy(qa_targets))
