"""ModelRunner: holds the model and the KV tensor, and executes a planned ``ForwardBatch`` in ONE forward.

Sequences run in order within the forward. A writing sequence (an advance, or
the rebuild of an evicted prefix) has its K/V written into its reserved cells
*before* attention in every layer, so a probe placed after an advance of the
same session in the same batch sees the new tokens. The runner never
allocates and never changes a session: planning and booking belong to the
scheduler (engine/block_manager.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.batch import ForwardBatch
from engine.kv_cache import CacheSpec, KVCache
from engine.models.llama import LlamaModel
from kernels import RaggedBatch


@dataclass
class RunnerStats:
    forwards: int = 0
    tokens_advanced: int = 0
    tokens_rebuilt: int = 0
    tokens_probed: int = 0


class ModelRunner:
    def __init__(self, model: LlamaModel, cache: CacheSpec, device: str | torch.device | None = None) -> None:
        self.model = model
        self.config = model.config
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.kv = KVCache(self.config, cache, self.dtype, self.device)
        self.stats = RunnerStats()

    def run(self, batch: ForwardBatch) -> list[torch.Tensor]:
        """One forward; returns each item's logits, (rows, vocab) fp32 (rows may be 0)."""
        for source, target in batch.copies:
            self.kv.copy_cells(source, target)
        empty = torch.empty(0, self.config.vocab_size)
        if not batch.num_tokens:
            return [empty for _ in batch.item_sequence]
        logits = self._forward(batch)  # (rows wanted, vocab)
        self._count(batch)
        per_sequence: list[torch.Tensor] = []
        offset = 0
        for seq in batch.sequences:
            rows = len(seq.logit_rows())
            per_sequence.append(logits[offset : offset + rows])
            offset += rows
        return [per_sequence[i] for i in batch.item_sequence]

    def _forward(self, batch: ForwardBatch) -> torch.Tensor:
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        rows: list[int] = []
        cu = [0]
        for seq in batch.sequences:
            n = len(seq.token_ids)
            ids += seq.token_ids
            positions += range(seq.first_position, seq.first_position + n)
            slots += seq.slots if seq.writes else [-1] * n
            rows += [cu[-1] + r for r in seq.logit_rows()]
            cu.append(cu[-1] + n)
        meta = RaggedBatch(
            cu_seqlens=cu,
            prefix_lens=[seq.first_position for seq in batch.sequences],
            block_tables=[seq.block_table for seq in batch.sequences],
            slot_mapping=slots,
            block_size=self.kv.block_size,
            device=self.device,
            groups=[id(seq.session) for seq in batch.sequences],
        )
        to_device = lambda xs: torch.tensor(xs, dtype=torch.int64).to(self.device, non_blocking=True)  # noqa: E731
        return self.model(to_device(ids), to_device(positions), self.kv.tensor, meta, to_device(rows))

    def _count(self, batch: ForwardBatch) -> None:
        self.stats.forwards += 1
        for seq in batch.sequences:
            if seq.writes:
                self.stats.tokens_advanced += len(seq.token_ids) - seq.own_start
                self.stats.tokens_rebuilt += seq.own_start
            else:
                self.stats.tokens_probed += len(seq.token_ids)
