"""Attention metadata for one ragged batch, built once per forward and shared by all layers.

A ragged batch is B sequences. Sequence i brings ``n_i`` new tokens (rows
``cu_seqlens[i]:cu_seqlens[i+1]`` of q/k/v) that attend to the first
``prefix_lens[i]`` cells of its paged prefix (cells named by its block table)
and causally to each other. Some sequences write their new K/V into the cache
(an advance); others do not (a probe): ``slot_mapping[t] == -1`` means "do not
write token t".
A probe's prefix may stop short of the cells its table holds (a *cut* inside a
chunk an advance of the same batch writes): it reads exactly ``prefix_lens[i]``.

Both kernel backends read this object: the Triton kernels its device tensors,
the torch reference its host-side lists (so it never syncs per layer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class RaggedBatch:
    cu_seqlens: list[int]  # (B+1,) row offsets of each sequence's new tokens
    prefix_lens: list[int]  # (B,) cached prefix length each sequence attends to
    block_tables: list[list[int]]  # per sequence: physical block ids, enough for its prefix
    slot_mapping: list[int]  # (T,) flat cell index to write each new token to, -1: don't
    block_size: int
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    # Optional: sequences with the same group id read the same session's blocks (an advance and the
    # probes after it). The torch backend uses it to gather that prefix once; kernels may ignore it.
    groups: list[int] | None = None

    def __post_init__(self) -> None:
        if len(self.cu_seqlens) != len(self.prefix_lens) + 1 or self.cu_seqlens[0] != 0:
            raise ValueError("cu_seqlens must have B+1 entries starting at 0")
        if any(b < a for a, b in zip(self.cu_seqlens, self.cu_seqlens[1:])):
            raise ValueError(f"cu_seqlens must not decrease, got {self.cu_seqlens}")
        if any(n < 0 for n in self.prefix_lens):
            raise ValueError(f"prefix_lens must be >= 0, got {self.prefix_lens}")
        if len(self.block_tables) != len(self.prefix_lens):
            raise ValueError("one block table per sequence is required")
        if len(self.slot_mapping) != self.cu_seqlens[-1]:
            raise ValueError(f"slot_mapping has {len(self.slot_mapping)} entries for {self.cu_seqlens[-1]} tokens")
        for i, (n, table) in enumerate(zip(self.prefix_lens, self.block_tables)):
            if n > len(table) * self.block_size:
                raise ValueError(f"sequence {i}: prefix of {n} cells needs more than {len(table)} blocks")
        self._tensors: dict[str, torch.Tensor] | None = None
        self._runs: dict[int, list[tuple[int, int]]] = {}  # per sequence, built on first use
        self._write_rows: tuple[torch.Tensor, torch.Tensor] | None = None
        self._memo: dict[str, Any] = {}
        if self.groups is not None and len(self.groups) != self.num_seqs:
            raise ValueError(f"groups has {len(self.groups)} entries for {self.num_seqs} sequences")

    @property
    def num_seqs(self) -> int:
        return len(self.prefix_lens)

    @property
    def num_tokens(self) -> int:
        return self.cu_seqlens[-1]

    @property
    def max_new(self) -> int:
        return max((b - a for a, b in zip(self.cu_seqlens, self.cu_seqlens[1:])), default=0)

    def tensors(self) -> dict[str, torch.Tensor]:
        """Device tensors for the Triton kernels (built once, cached)."""
        if self._tensors is None:
            width = max((len(t) for t in self.block_tables), default=0) or 1
            tables = torch.full((self.num_seqs, width), 0, dtype=torch.int32)
            for i, table in enumerate(self.block_tables):
                tables[i, : len(table)] = torch.tensor(table, dtype=torch.int32)
            self._tensors = {
                "cu_seqlens": torch.tensor(self.cu_seqlens, dtype=torch.int32).to(self.device),
                "prefix_lens": torch.tensor(self.prefix_lens, dtype=torch.int32).to(self.device),
                "block_tables": tables.to(self.device),  # (B, max_blocks)
                "slot_mapping": torch.tensor(self.slot_mapping, dtype=torch.int64).to(self.device),
            }
        return self._tensors

    def use_device_tensors(self, tensors: dict[str, torch.Tensor]) -> RaggedBatch:
        """The Triton kernels read these instead of uploading the lists: static buffers a CUDA graph is captured
        on (engine/cuda_graphs.py), whose values the caller keeps current; the lists then only shape the launch."""
        self._tensors = tensors
        return self

    def prefix_runs(self, seq: int) -> list[tuple[int, int]]:
        """Sequence ``seq``'s prefix as maximal runs of physically contiguous cells [start, end).

        The block pool prefers handing a session the block after its last one,
        so a long session is usually one or a few runs: the torch backend then
        reads its KV through views, without gathering a copy. Built on first
        use per sequence: a grouped batch asks only for its long appends'.
        """
        if seq not in self._runs:
            self._runs[seq] = self._runs_of(self.block_tables[seq], self.prefix_lens[seq])
        return self._runs[seq]

    def _runs_of(self, table: list[int], n_cells: int) -> list[tuple[int, int]]:
        runs: list[tuple[int, int]] = []
        bs = self.block_size
        for j in range((n_cells + bs - 1) // bs):
            start = table[j] * bs
            end = start + min(bs, n_cells - j * bs)
            if runs and runs[-1][1] == start:
                runs[-1] = (runs[-1][0], end)
            else:
                runs.append((start, end))
        return runs

    def memo(self, key: str, build: Callable[[], Any]) -> Any:
        """A per-forward value (a backend's plan) built once and shared by every layer."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def write_rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows of new tokens to write, their cells): the advance tokens only."""
        if self._write_rows is None:
            rows = [t for t, s in enumerate(self.slot_mapping) if s >= 0]
            cells = [self.slot_mapping[t] for t in rows]
            self._write_rows = (
                torch.tensor(rows, dtype=torch.int64, device=self.device),
                torch.tensor(cells, dtype=torch.int64, device=self.device),
            )
        return self._write_rows
