"""The Llama-family decoder (Llama, Mistral, Qwen2) running on flashtick's paged KV cache.

One forward takes a ragged batch: the new tokens of many sequences laid end to
end, (T,). Each layer computes q/k/v for them, writes the advance tokens' K/V
into their cells *before* attention (so a probe in the same batch can read a
prefix that this very forward extends), then runs ragged paged attention.

On the Triton backend (CUDA) the elementwise work between the GEMMs is fused
(flashtick_kernels/fused.py): RoPE + the K/V write in one launch, residual add + RMSNorm
in one, SiLU*up in one. On CPU the torch ops below are the path (and the
fused kernels' oracle).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.models.config import ModelConfig, rope_inv_freq
from flashtick_kernels import RaggedBatch, backend_for, paged_attention, paged_attention_ref, write_kv_ref


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None, fused: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor]:  # (T, H) each: normed, and residual + x
        """norm(residual + x) and the sum itself (x when there is no residual)."""
        if fused:
            from flashtick_kernels.fused import add_rms_norm_triton

            return add_rms_norm_triton(x, self.weight, self.eps, residual)
        summed = x if residual is None else residual + x
        return self.normed(summed), summed

    def normed(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            # F.rms_norm's math in four ops: its CPU path runs ~3x slower on a many-row ingest batch
            return torch.mul(x, torch.rsqrt(torch.mean(x * x, -1, keepdim=True).add_(self.eps))).mul_(self.weight)
        # Same op order as transformers: normalise in fp32, scale in the input dtype.
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


class Rotary(nn.Module):
    """cos/sin tables for every position, built once; a forward looks its positions up once.

    Stored over the full head dim so a layer rotates in three ops: with ``cos`` = [cos, cos] and
    ``sin`` = [-sin, sin], x*cos + roll(x, D/2)*sin is transformers' x*cos + rotate_half(x)*sin.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        with torch.device("cpu"):  # real tables even while a model is laid out on "meta" (loader.build_model)
            positions = torch.arange(config.max_positions, dtype=torch.float32)
            freqs = positions[:, None] * rope_inv_freq(config)[None, :]  # (P, D/2)
        self.register_buffer("cos", torch.cat([freqs.cos(), freqs.cos()], dim=-1), persistent=False)  # (P, D)
        self.register_buffer("sin", torch.cat([-freqs.sin(), freqs.sin()], dim=-1), persistent=False)  # (P, D)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype, fused: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) for these positions, shared by every layer: (T, 1, D) each in `dtype`, or for the fused
        kernel the plain halves, (T, D/2) fp32 each (cos is [cos, cos]; sin is [-sin, sin])."""
        if fused:
            half = self.cos.shape[-1] // 2
            return self.cos[positions][:, :half], self.sin[positions][:, half:]  # (T, D/2) views of (T, D)
        return self.cos[positions].to(dtype)[:, None, :], self.sin[positions].to(dtype)[:, None, :]


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:  # x (T, H, D)
    """transformers' x*cos + rotate_half(x)*sin: the same products, with -sin folded into the table."""
    half = x.shape[-1] // 2
    rolled = torch.cat([x[..., half:], x[..., :half]], dim=-1)  # (T, H, D): x.roll(half), ~25% cheaper on CPU
    return torch.addcmul(rolled.mul_(sin), x, cos)  # (T, H, D)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim = config.num_heads, config.num_kv_heads, config.head_dim
        self.q_size = self.n_heads * self.head_dim
        self.kv_size = self.n_kv * self.head_dim
        # q, k, v fused into one matmul
        self.qkv_proj = nn.Linear(config.hidden_size, self.q_size + 2 * self.kv_size, bias=config.qkv_bias)
        self.o_proj = nn.Linear(self.q_size, config.hidden_size, bias=config.o_bias)
        self.scale = self.head_dim**-0.5

    def forward(
        self,
        x: torch.Tensor,  # (T, hidden)
        rope: tuple[torch.Tensor, torch.Tensor],  # cos, sin: (T, 1, D)
        k_cache: torch.Tensor,  # (Hkv, cells, D)
        v_cache: torch.Tensor,
        meta: RaggedBatch,
        rows: torch.Tensor | None = None,  # (R,) the only rows whose output is wanted; None: all
        fused: bool = False,  # the Triton elementwise kernels (rope: their fp32 half tables)
    ) -> torch.Tensor:  # (T or R, hidden)
        T = x.shape[0]
        if fused:
            from flashtick_kernels.fused import rope_write_kv_triton

            qkv = self.qkv_proj(x).view(T, self.n_heads + 2 * self.n_kv, self.head_dim)  # (T, Hq+2Hkv, D)
            rope_write_kv_triton(qkv, *rope, self.n_heads, self.n_kv, k_cache, v_cache, meta)  # in place
            q, k, v = qkv.split([self.n_heads, self.n_kv, self.n_kv], dim=1)  # views: (T, Hq|Hkv|Hkv, D)
        else:
            qk, v = self.qkv_proj(x).split([self.q_size + self.kv_size, self.kv_size], dim=-1)
            qk = apply_rotary(qk.view(T, self.n_heads + self.n_kv, self.head_dim), *rope)  # (T, Hq+Hkv, D)
            q, k = qk.split([self.n_heads, self.n_kv], dim=1)  # (T, Hq, D), (T, Hkv, D)
            v = v.view(T, self.n_kv, self.head_dim)
            write_kv_ref(k, v, k_cache, v_cache, meta)
        if rows is not None and rows.numel() == 0:  # the K/V were all that was needed
            return x.new_empty(0, x.shape[1])
        if fused:
            out = paged_attention(q, k, v, k_cache, v_cache, meta, self.scale)  # (T, Hq, D)
            out = out if rows is None else out.index_select(0, rows)  # (T or R, Hq, D)
        else:  # not fused means the torch backend (the forward chose once): it attends for `rows` only
            out = paged_attention_ref(q, k, v, k_cache, v_cache, meta, self.scale, rows)  # (T or R, Hq, D)
        return self.o_proj(out.reshape(out.shape[0], self.q_size))  # (T or R, hidden)


class MLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.inter = config.intermediate_size
        self.gate_up_proj = nn.Linear(config.hidden_size, 2 * self.inter, bias=config.mlp_bias)  # gate, up fused
        self.down_proj = nn.Linear(self.inter, config.hidden_size, bias=config.mlp_bias)

    def forward(self, x: torch.Tensor, fused: bool = False) -> torch.Tensor:
        if fused:
            from flashtick_kernels.fused import silu_mul_triton

            return self.down_proj(silu_mul_triton(self.gate_up_proj(x)))  # (T, 2 inter) -> (T, inter) -> (T, hidden)
        gate, up = self.gate_up_proj(x).split(self.inter, dim=-1)  # (T, inter) views of one output
        return self.down_proj(F.silu(gate, inplace=True).mul_(up))


# On CPU the residual, norm and MLP of a many-row batch (a roll's re-prefill, a backtest chunk) run in slices
# of this many rows, so the (rows, 2*inter) MLP intermediate stays in cache: ~1/3 off that part at 8k rows
# (measured on the built-in model's shape), and the same numbers, row by row.
ROW_SLICE = 1024


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config)

    def forward(self, x, rope, k_cache, v_cache, meta, rows: torch.Tensor | None = None, fused: bool = False
                ) -> torch.Tensor:
        """(T, hidden) -> (T, hidden), or (R, hidden) for ``rows`` only (their K/V still written for all T)."""
        normed, _ = self.input_layernorm(x, fused=fused)
        attended = self.self_attn(normed, rope, k_cache, v_cache, meta, rows, fused)  # (T or R, hidden)
        residual = x if rows is None else x.index_select(0, rows)
        if fused:
            normed, x = self.post_attention_layernorm(attended, residual, fused)
            return x.add_(self.mlp(normed, fused))  # x is this layer's own sum
        for a in range(0, attended.shape[0], ROW_SLICE):  # in place: attended becomes this layer's output
            summed = attended[a : a + ROW_SLICE].add_(residual[a : a + ROW_SLICE])  # (rows, hidden)
            summed.add_(self.mlp(self.post_attention_layernorm.normed(summed)))
        return attended


class LlamaModel(nn.Module):
    """Decoder + LM head. ``forward`` returns logits only for ``logit_rows``, and past the K/V of the
    last layer computes nothing for the other rows."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.rotary = Rotary(config)

    @torch.inference_mode()
    def forward(
        self,
        input_ids: torch.Tensor,  # (T,) int64
        positions: torch.Tensor,  # (T,) int64
        kv: torch.Tensor,  # (L, 2, Hkv, cells, D) the paged cache
        meta: RaggedBatch,
        logit_rows: torch.Tensor,  # (R,) rows of T whose logits are wanted
    ) -> torch.Tensor:  # (R, vocab) fp32
        x = self.embed_tokens(input_ids)  # (T, hidden)
        fused = backend_for(x.device) == "triton"
        rope = self.rotary(positions, x.dtype, fused)
        last = len(self.layers) - 1
        for i, (layer, layer_kv) in enumerate(zip(self.layers, kv)):
            # The last layer's output feeds only the logits: it attends and runs its MLP for those rows
            x = layer(x, rope, layer_kv[0], layer_kv[1], meta, logit_rows if i == last else None, fused)
        return self.lm_head(self.norm(x, fused=fused)[0]).float()  # (R, vocab)
