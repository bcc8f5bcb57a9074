"""ModelRunner: one batched forward that advances many sessions and evaluates many probes.

Items are processed in order within one forward. An ``Advance`` commits its
tokens (plus any K/V the session lost to eviction, rebuilt first); a ``Probe``
evaluates its tokens against the session's prefix *as it stands after the
advances before it in the same batch* and commits nothing. That works because
each layer writes the advance tokens' K/V into the cache before attention
reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch

from engine.kv_cache import CacheSpec, KVCache, PoolExhausted
from engine.models.llama import LlamaModel
from engine.session import Session
from kernels import RaggedBatch

# "last": the last row; "all": one row per token of the item; "none"; an int n: the last n rows.
LogitsWanted = Literal["last", "all", "none"] | int


@dataclass
class Advance:
    session: Session
    tokens: list[int]
    logits: LogitsWanted = "last"


@dataclass
class Probe:
    session: Session
    tokens: list[int]
    logits: LogitsWanted = "all"


@dataclass
class RunnerStats:
    forwards: int = 0
    tokens_advanced: int = 0
    tokens_rebuilt: int = 0
    tokens_probed: int = 0


@dataclass
class _Planned:
    """One sequence of the ragged batch, as laid out for the forward."""

    item: Advance | Probe
    token_ids: list[int]  # rebuilt tail + the item's own tokens
    first_position: int
    prefix_len: int
    own_start: int  # index in token_ids where the item's own tokens begin
    slots: list[int] = field(default_factory=list)
    logit_rows: int = 0  # rows of the forward's logits that belong to this item (set by _forward)


class ModelRunner:
    def __init__(self, model: LlamaModel, cache: CacheSpec, device: str | torch.device | None = None) -> None:
        self.model = model
        self.config = model.config
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype
        self.kv = KVCache(self.config, cache, self.dtype, self.device)
        self.stats = RunnerStats()

    def open_session(self, name: str, tokens: list[int] | None = None) -> Session:
        """A session bound to this runner; ``tokens`` are committed lazily on its first forward."""
        return Session(name, tokens=list(tokens or []), runner=self)

    def blocks_needed(self, items: list[Advance | Probe]) -> int:
        """KV blocks the batch would allocate (admission checks this before submitting)."""
        final_cells: dict[int, tuple[Session, int]] = {}
        for item in items:
            s = item.session
            # the first item touching a session also rebuilds its uncached tail
            cells = final_cells[id(s)][1] if id(s) in final_cells else len(s.tokens)
            cells += len(item.tokens) if isinstance(item, Advance) else 0
            final_cells[id(s)] = (s, cells)
        pool = self.kv.pool
        return sum(max(0, pool.blocks_for(cells) - len(s.blocks)) for s, cells in final_cells.values())

    def run(self, items: list[Advance | Probe]) -> list[torch.Tensor]:
        """One forward; returns each item's logits, (rows, vocab) fp32 (rows may be 0)."""
        needed = self.blocks_needed(items)
        if needed > self.kv.pool.num_free:
            raise PoolExhausted(
                f"batch needs {needed} KV blocks, {self.kv.pool.num_free} of {self.kv.pool.num_blocks} free"
            )
        plan = self._plan(items)
        if not plan:
            return [torch.empty(0, self.config.vocab_size) for _ in items]
        logits = self._forward(plan)
        self._commit(plan)
        return self._split(plan, logits, items)

    def _plan(self, items: list[Advance | Probe]) -> list[_Planned]:
        """Lay out the batch: rebuilds first where needed, cells reserved for advances."""
        plan: list[_Planned] = []
        pending: dict[int, int] = {}  # id(session) -> cached length once earlier items have run
        limit = self.config.max_positions
        for item in items:
            s = item.session
            cached = pending.get(id(s), s.num_cached)
            rebuild = s.tokens[cached:] if id(s) not in pending else []
            if isinstance(item, Probe) and rebuild:
                # The probe needs its prefix in the cache: rebuild it in this same forward.
                plan.append(self._advance_plan(Advance(s, [], "none"), rebuild, cached))
                pending[id(s)] = cached = cached + len(rebuild)
                rebuild = []
            length_after = cached + len(rebuild) + len(item.tokens)
            if length_after > limit:
                raise ValueError(
                    f"session {s.name!r} would reach {length_after} tokens, past the model's {limit} positions"
                )
            if isinstance(item, Advance):
                plan.append(self._advance_plan(item, rebuild, cached))
                pending[id(s)] = length_after
            else:
                plan.append(_Planned(item, list(item.tokens), cached, cached, 0))
        return plan

    def _advance_plan(self, item: Advance, rebuild: list[int], cached: int) -> _Planned:
        planned = _Planned(item, rebuild + list(item.tokens), cached, cached, len(rebuild))
        planned.slots = item.session.reserve(self.kv.pool, cached, len(planned.token_ids))
        return planned

    def _forward(self, plan: list[_Planned]) -> torch.Tensor:
        ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        cu = [0]
        rows: list[int] = []
        for p in plan:
            n = len(p.token_ids)
            ids += p.token_ids
            positions += range(p.first_position, p.first_position + n)
            slots += p.slots if isinstance(p.item, Advance) else [-1] * n
            wanted = self._rows_wanted(p, cu[-1])
            p.logit_rows = len(wanted)
            rows += wanted
            cu.append(cu[-1] + n)
        meta = RaggedBatch(
            cu_seqlens=cu,
            prefix_lens=[p.prefix_len for p in plan],
            block_tables=[list(p.item.session.blocks) for p in plan],
            slot_mapping=slots,
            block_size=self.kv.block_size,
            device=self.device,
            groups=[id(p.item.session) for p in plan],
        )
        to_device = lambda xs: torch.tensor(xs, dtype=torch.int64).to(self.device, non_blocking=True)  # noqa: E731
        self.stats.forwards += 1
        return self.model(to_device(ids), to_device(positions), self.kv.tensor, meta, to_device(rows))

    @staticmethod
    def _rows_wanted(p: _Planned, offset: int) -> list[int]:
        wanted = p.item.logits
        own = range(offset + p.own_start, offset + len(p.token_ids))
        if wanted == "none" or len(p.token_ids) == 0:
            return []
        if wanted == "all":
            return list(own)
        if isinstance(wanted, int):
            return list(own)[-wanted:] if wanted > 0 else []
        return [offset + len(p.token_ids) - 1]

    def _commit(self, plan: list[_Planned]) -> None:
        for p in plan:
            s = p.item.session
            if isinstance(p.item, Advance):
                s.tokens += p.item.tokens
                s.num_cached = p.first_position + len(p.token_ids)
                s.version += 1 if p.item.tokens else 0
                self.stats.tokens_advanced += len(p.item.tokens)
                self.stats.tokens_rebuilt += p.own_start
            else:
                self.stats.tokens_probed += len(p.token_ids)
            s.check()

    def _split(self, plan: list[_Planned], logits: torch.Tensor, items: list[Advance | Probe]) -> list[torch.Tensor]:
        by_item: dict[int, torch.Tensor] = {}
        offset = 0
        for p in plan:
            by_item[id(p.item)] = logits[offset : offset + p.logit_rows]
            offset += p.logit_rows
        return [by_item.get(id(item), logits[:0]) for item in items]
