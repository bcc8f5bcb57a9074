"""ModelRunner: holds the model and the KV tensor, and executes a planned ``ForwardBatch`` in ONE forward.

Sequences run in order within the forward. A writing sequence (an advance, or
the rebuild of an evicted prefix) has its K/V written into its reserved cells
*before* attention in every layer, so a probe placed after an advance of the
same session in the same batch sees the new tokens. The runner never
allocates and never changes a session: planning and booking belong to the
scheduler (engine/block_manager.py).

On a GPU a step syncs with the host once: the logits every item wants come back
in one device-to-host copy, so what the scheduler and the queries then read
(surprise, answer probabilities) are host tensors and cost no sync each. Token
ids, positions and logit rows go up through one pinned staging buffer. Probes and
small steps replay a captured CUDA graph per batch-shape bucket (engine/cuda_graphs.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.batch import ForwardBatch
from engine.kv_cache import CacheSpec, KVCache
from engine.models.llama import LlamaModel
from flashtick_kernels import RaggedBatch, backend_for


@dataclass
class RunnerStats:
    forwards: int = 0
    tokens_advanced: int = 0
    tokens_rebuilt: int = 0
    tokens_probed: int = 0


class ModelRunner:
    def __init__(self, model: LlamaModel, cache: CacheSpec, device: str | torch.device | None = None,
                 cuda_graphs: bool | str | None = None, group_attention: bool = True) -> None:
        """`cuda_graphs`: None (the default) captures graphs on CUDA with the Triton kernels and never elsewhere;
        False never; "eager" runs their padded static-buffer path without capturing (the CPU tests' way in).
        `group_attention` False sends every sequence through the torch backend's per-sequence path, whose floats
        do not depend on what else shares the forward (the grouped path pads each sequence to its bucket's):
        tests that compare two packings of the same work bit for bit use it."""
        self.group_attention = group_attention
        self.model = model
        self.config = model.config
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.kv = KVCache(self.config, cache, self.dtype, self.device)
        self.stats = RunnerStats()
        self._staging: torch.Tensor | None = None  # pinned int64 host buffer for uploads (CUDA only)
        if cuda_graphs is None:
            cuda_graphs = self.device.type == "cuda" and backend_for(self.device) == "triton"
        self.graphs = None
        if cuda_graphs:
            from engine.cuda_graphs import CudaGraphs  # imports Triton: only where its kernels run

            self.graphs = CudaGraphs(model, self.kv.tensor, self.kv.block_size, self.config.max_positions,
                                     self.device, mode="eager" if cuda_graphs == "eager" else "capture")

    def run(self, batch: ForwardBatch) -> list[torch.Tensor]:
        """One forward; returns each item's logits, (rows, vocab) fp32 (rows may be 0)."""
        for source, target in batch.copies:
            self.kv.copy_cells(source, target)
        empty = torch.empty(0, self.config.vocab_size)
        if not batch.num_tokens:
            return [empty for _ in batch.item_sequence]
        logits = self._forward(batch).cpu()  # (rows wanted, vocab): the step's one device-to-host copy
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
            groups=[id(seq.session) for seq in batch.sequences] if self.group_attention else None,
        )
        if self.graphs is not None and (logits := self.graphs.run(ids, positions, rows, meta)) is not None:
            return logits
        ids_t, positions_t, rows_t = self._upload(ids, positions, rows)
        return self.model(ids_t, positions_t, self.kv.tensor, meta, rows_t)

    def _upload(self, *lists: list[int]) -> list[torch.Tensor]:
        """int64 device tensors of ``lists``; on CUDA through one pinned buffer and one async copy (the
        previous step's copy has completed: its logits came back synchronously)."""
        host = torch.tensor([x for xs in lists for x in xs], dtype=torch.int64)  # (sum of lengths,)
        if self.device.type == "cuda":
            if self._staging is None or self._staging.numel() < host.numel():
                self._staging = torch.empty(max(host.numel(), 4096) * 2, dtype=torch.int64, pin_memory=True)
            staged = self._staging[: host.numel()]
            staged.copy_(host)
            host = staged
        flat = host.to(self.device, non_blocking=True)
        return list(flat.split([len(xs) for xs in lists]))

    def _count(self, batch: ForwardBatch) -> None:
        self.stats.forwards += 1
        for seq in batch.sequences:
            if seq.writes:
                self.stats.tokens_advanced += len(seq.token_ids) - seq.own_start
                self.stats.tokens_rebuilt += seq.own_start
            else:
                self.stats.tokens_probed += len(seq.token_ids)
