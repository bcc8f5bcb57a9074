"""CPU linear layers laid out once at load for the engine's small-M forwards (a 16-token probe, a tick).

Weight formats, chosen by ``model.weights`` (engine/service/config.py):

  float32   W kept transposed, (in, out) contiguous, and multiplied with ``torch.mm``: MKL's sgemm
            runs x @ W_t 1.1-1.8x faster than ``F.linear``'s x @ W^T at M <= 64 rows on this CPU, the
            same GEMM otherwise (benchmarks/forward_speed.py measures it). The parity reference.
  bfloat16  W in bf16, reordered once into oneDNN's blocked layout; x is rounded to bf16, products
            accumulate in fp32 (AVX512-BF16 / AMX), the bf16 result is returned in x's dtype. Half
            the weight bytes; 3.5-6x faster than fp32 from ~64 rows (ingest), ~25% faster at 16 rows,
            slower below (a fixed ~20 us per call). Logits move by ~1e-2 vs fp32.
  torch     the ``nn.Linear`` modules as loaded (``F.linear``): the earlier path, kept as the
            benchmarks' baseline and as a way out.

``prepare_linears`` swaps a model's ``nn.Linear`` modules for these after its weights are loaded;
the result is inference-only (no autograd, no ``load_state_dict``). On CUDA nothing is swapped.
"""

from __future__ import annotations

import torch
from torch import nn

WEIGHT_FORMATS = ("float32", "bfloat16", "torch")


class TransposedLinear(nn.Module):
    """y = x @ W_t (+ b) with W_t = W^T stored contiguous, (in, out)."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.register_buffer("weight_t", linear.weight.detach().t().contiguous())  # (in, out)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (M, in) -> (M, out)
        if self.bias is None:
            return torch.mm(x, self.weight_t)
        return torch.addmm(self.bias, x, self.weight_t)


class OneDNNBf16Linear(nn.Module):
    """y = bf16(x) @ bf16(W)^T (+ b), fp32 accumulation, through a weight prepacked for oneDNN."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        weight = linear.weight.detach().to(torch.bfloat16)  # (out, in)
        # An opaque oneDNN tensor: a plain attribute, so that .to()/state_dict never touch it
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight)
        self.bias = None if linear.bias is None else linear.bias.detach().to(torch.bfloat16)
        self.out_features = weight.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (M, in) -> (M, out), x's dtype
        y = torch.ops.mkldnn._linear_pointwise(x.to(torch.bfloat16), self.packed, self.bias, "none", [], "")
        return y.to(x.dtype)


def bf16_linear_supported() -> bool:
    """oneDNN built in and a CPU with native bf16 dot products (else its bf16 GEMM is emulated and slow)."""
    is_bf16 = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return torch.backends.mkldnn.is_available() and (is_bf16 is None or bool(is_bf16()))


def prepare_linears(model: nn.Module, weights: str) -> nn.Module:
    """Replace every ``nn.Linear`` of a CPU model by the ``weights`` format's layer, in place."""
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights must be one of {WEIGHT_FORMATS}, got {weights!r}")
    if weights == "bfloat16" and not bf16_linear_supported():
        raise ValueError("weights='bfloat16' needs torch with oneDNN on a CPU with bf16 support")
    if weights == "torch" or next(model.parameters()).device.type != "cpu":
        return model
    layer = TransposedLinear if weights == "float32" else OneDNNBf16Linear
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, layer(child))
    return model
