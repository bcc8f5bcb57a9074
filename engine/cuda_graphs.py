"""CUDA graphs for the forward: a probe or a small step replayed as one graph instead of ~30 launches a layer.

A 16-token probe on a GPU is launch- and Python-bound (hundreds of small kernels, ~4x more host time than
GPU time). A graph is captured per *bucket* of batch shape and replayed with the batch's values copied into
static buffers first:

    bucket = (sequences S_b, tokens T_b, logit rows R_b, longest new run M_b: powers of two >= the batch's;
              and for few rows over a long prefix, the split-KV kernel with the prefix rounded up to P_b)

Why a padded batch computes the same answer:
  * the kernels read every per-sequence value (row offsets, prefix lengths, block tables, write slots) from
    device tensors at run time, so the buffers can change between replays; only the launch grid is baked
    in, and it is sized by the bucket (a sequence shorter than M_b, or a prefix shorter than P_b, leaves
    programs that find no rows or no keys and exit);
  * pad sequences have no tokens; pad token rows belong to no sequence: attention never reads them and
    writes nothing for them (slot -1), and every other op of the decoder is row-wise, so they cannot leak
    into a real row; the pad logit rows point at row 0 and are dropped.
The grid-defining metadata at capture is a synthetic RaggedBatch with the bucket's extremes
(`_bucket_shape`); the kernels get the static buffers instead of uploading its lists.

Capture needs CUDA. `mode="eager"` runs the same padding and static-buffer path without capturing, which is
how the CPU tests check it (Triton interpreter, tests/test_cuda_graphs.py). Shapes past the largest bucket,
and every batch after a capture that failed, run eagerly. Graph memory comes from one shared pool; the
number of graphs is bounded (`max_graphs`) and `stats()` reports both.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import torch

from engine.quoting import quoted
from flashtick_kernels import RaggedBatch
from flashtick_kernels.split_kv import use_split_kv


def _pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


@dataclass(frozen=True)
class Bucket:
    seqs: int
    tokens: int
    rows: int
    max_new: int
    split_prefix: int  # 0: the paged kernel; else the split-KV kernel over this many prefix cells at most


@dataclass
class GraphStats:
    graphs: int = 0
    replays: int = 0
    eager: int = 0  # batches past the largest bucket or the graph bound
    capture_failed: str | None = None
    pool_bytes: int = 0  # CUDA memory the captures took (reserved before -> after)


class CudaGraphs:
    """Static buffers and one captured forward per bucket, for one ModelRunner's model and KV cache."""

    def __init__(self, model: torch.nn.Module, kv: torch.Tensor, block_size: int, max_prefix: int,
                 device: torch.device, *, max_seqs: int = 64, max_tokens: int = 1024, max_graphs: int = 48,
                 mode: str = "capture") -> None:
        if mode not in ("capture", "eager"):
            raise ValueError(f'mode must be "capture" or "eager", got {quoted(mode)}')
        if mode == "capture" and device.type != "cuda":
            raise ValueError(f"CUDA graphs need a CUDA device, got {device}")
        self.model, self.kv, self.block_size, self.device, self.mode = model, kv, block_size, device, mode
        self.max_seqs, self.max_tokens, self.max_graphs = _pow2(max_seqs), _pow2(max_tokens), max_graphs
        self.max_prefix = max_prefix
        self.width = -(-max_prefix // block_size) + 1  # block-table entries a sequence can need
        # One flat int64 buffer (ids | positions | slots | logit rows) and one int32 (cu | prefix | tables):
        # two host-to-device copies a replay. Offsets are fixed, so captured views stay valid.
        T, S = self.max_tokens, self.max_seqs
        self._i64 = torch.zeros(4 * T, dtype=torch.int64, device=device)
        self._i32 = torch.zeros(2 * S + 1 + S * self.width, dtype=torch.int32, device=device)
        pin = device.type == "cuda"
        self._host_i64 = torch.zeros(4 * T, dtype=torch.int64, pin_memory=pin)
        self._host_i32 = torch.zeros(2 * S + 1 + S * self.width, dtype=torch.int32, pin_memory=pin)
        # per bucket: its graph and output buffer (None, None in eager mode: the buckets used)
        self._graphs: dict[Bucket, tuple[torch.cuda.CUDAGraph | None, torch.Tensor | None]] = {}
        self._pool = torch.cuda.graph_pool_handle() if mode == "capture" else None
        self.stats = GraphStats()

    # -- bucketing ---------------------------------------------------------------------------------

    @property
    def buckets(self) -> list[Bucket]:
        return list(self._graphs)

    def bucket(self, meta: RaggedBatch, rows: int) -> Bucket | None:
        """The bucket this batch replays in, or None (eager): too many sequences or tokens, or a prefix past
        the buffers' block tables."""
        if meta.num_seqs > self.max_seqs or meta.num_tokens > self.max_tokens or meta.num_tokens == 0:
            return None
        if any(len(t) > self.width for t in meta.block_tables):
            return None
        split = 0
        if use_split_kv(meta):
            split = min(_pow2(max(meta.prefix_lens)), self.width * self.block_size)
        return Bucket(_pow2(meta.num_seqs), _pow2(meta.num_tokens), _pow2(max(rows, 1)), _pow2(meta.max_new), split)

    def _bucket_shape(self, b: Bucket) -> RaggedBatch:
        """Host metadata with the bucket's extremes, for the launch grids: one sequence of M_b tokens over a
        prefix of P_b cells (the split-KV kernel's choice and split count), the rest spread over the others
        (each at most M_b; S_b * M_b >= T_b holds for powers of two covering a real batch)."""
        lengths, left = [], b.tokens
        for _ in range(b.seqs):
            n = min(b.max_new, left)
            lengths.append(n)
            left -= n
        if left:  # cannot happen for a bucket of a real batch (see above)
            raise AssertionError(f"bucket {b} cannot hold its tokens")
        cu = [0]
        for n in lengths:
            cu.append(cu[-1] + n)
        prefix = [b.split_prefix] + [0] * (b.seqs - 1)
        tables = [[0] * -(-b.split_prefix // self.block_size)] + [[] for _ in range(b.seqs - 1)]
        meta = RaggedBatch(cu_seqlens=cu, prefix_lens=prefix, block_tables=tables, slot_mapping=[-1] * b.tokens,
                           block_size=self.block_size, device=self.device)
        if use_split_kv(meta) != bool(b.split_prefix):  # the kernel choice must be the real batch's
            raise AssertionError(f"bucket {b} would launch another attention kernel than its batches")
        return meta.use_device_tensors(self._views(b))

    # -- static buffers --------------------------------------------------------------------------------

    def _views(self, b: Bucket) -> dict[str, torch.Tensor]:
        T, S = self.max_tokens, self.max_seqs
        return {
            "cu_seqlens": self._i32[: b.seqs + 1],
            "prefix_lens": self._i32[S + 1 : S + 1 + b.seqs],
            "block_tables": self._i32[2 * S + 1 :].view(S, self.width)[: b.seqs],  # (S_b, width), row stride width
            "slot_mapping": self._i64[2 * T : 2 * T + b.tokens],
        }

    def _inputs(self, b: Bucket) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        T = self.max_tokens
        return self._i64[: b.tokens], self._i64[T : T + b.tokens], self._i64[3 * T : 3 * T + b.rows]

    def _fill(self, b: Bucket, ids: list[int], positions: list[int], rows: list[int], meta: RaggedBatch) -> None:
        """The batch's values, padded to the bucket, into the static buffers (two async copies)."""
        T, S, n = self.max_tokens, self.max_seqs, meta.num_tokens
        h64, h32 = self._host_i64, self._host_i32
        h64[:n] = torch.tensor(ids, dtype=torch.int64)
        h64[n : b.tokens] = 0
        h64[T : T + n] = torch.tensor(positions, dtype=torch.int64)
        h64[T + n : T + b.tokens] = 0
        h64[2 * T : 2 * T + n] = torch.tensor(meta.slot_mapping, dtype=torch.int64)
        h64[2 * T + n : 2 * T + b.tokens] = -1  # pad rows write nothing
        h64[3 * T : 3 * T + len(rows)] = torch.tensor(rows, dtype=torch.int64)
        h64[3 * T + len(rows) : 3 * T + b.rows] = 0  # pad logit rows read row 0, dropped after
        s = meta.num_seqs
        h32[: s + 1] = torch.tensor(meta.cu_seqlens, dtype=torch.int32)
        h32[s + 1 : b.seqs + 1] = n  # pad sequences: no tokens
        h32[S + 1 : S + 1 + s] = torch.tensor(meta.prefix_lens, dtype=torch.int32)
        h32[S + 1 + s : S + 1 + b.seqs] = 0
        tables = h32[2 * S + 1 :].view(S, self.width)
        tables[: b.seqs] = 0
        for i, table in enumerate(meta.block_tables):
            if table:
                tables[i, : len(table)] = torch.tensor(table, dtype=torch.int32)
        self._i64[: 4 * T].copy_(h64, non_blocking=True)
        used32 = 2 * S + 1 + b.seqs * self.width
        self._i32[:used32].copy_(h32[:used32], non_blocking=True)

    # -- run ---------------------------------------------------------------------------------------------

    def run(self, ids: list[int], positions: list[int], rows: list[int], meta: RaggedBatch) -> torch.Tensor | None:
        """(rows, vocab) logits through the bucket's graph, or None when this batch runs eagerly."""
        if self.stats.capture_failed is not None:
            return None
        b = self.bucket(meta, len(rows))
        if b is None or (b not in self._graphs and len(self._graphs) >= self.max_graphs):
            self.stats.eager += 1
            return None
        self._fill(b, ids, positions, rows, meta)
        if self.mode == "eager":  # the padded path without a graph: what the CPU tests check
            self._graphs.setdefault(b, (None, None))
            ids_v, positions_v, rows_v = self._inputs(b)
            return self.model(ids_v, positions_v, self.kv, self._bucket_shape(b), rows_v)[: len(rows)]
        if b not in self._graphs:
            try:
                self._capture(b)
            except Exception as e:  # a capture problem must never stop the engine: run eagerly from now on
                self.stats.capture_failed = f"{type(e).__name__}: {e}"
                print(f"flashtick: CUDA graph capture failed, running eagerly: {self.stats.capture_failed}",
                      file=sys.stderr)
                return None
        graph, out = self._graphs[b]
        graph.replay()
        self.stats.replays += 1
        return out[: len(rows)]

    def _capture(self, b: Bucket) -> None:
        """Warm up (Triton compiles here), then capture; the buffers already hold a real batch, so the K/V the
        warm-up writes are the ones the replay writes again."""
        before = torch.cuda.memory_reserved(self.device)
        ids_v, positions_v, rows_v = self._inputs(b)
        shape = self._bucket_shape(b)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            self.model(ids_v, positions_v, self.kv, shape, rows_v)
        torch.cuda.current_stream(self.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            out = self.model(ids_v, positions_v, self.kv, shape, rows_v)  # (R_b, vocab) fp32, a pool tensor
        self._graphs[b] = (graph, out)
        self.stats.graphs += 1
        self.stats.pool_bytes += torch.cuda.memory_reserved(self.device) - before

