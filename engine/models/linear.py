"""CPU linear layers laid out once at load for the engine's small-M forwards (a 16-token probe, a tick).

Weight formats, chosen by ``model.weights`` (engine/service/config_model.py):

  float32         fp32 weights, the parity reference, through the GEMM library that is fastest on this
                  CPU family (``fp32_gemm_library``): oneDNN on x86 CPUs not made by Intel, MKL otherwise.
  float32-mkl     W kept transposed, (in, out) contiguous, and multiplied with ``torch.mm``: on Intel CPUs
                  MKL's sgemm runs x @ W_t 1.1-1.8x faster than ``F.linear``'s x @ W^T at M <= 64 rows
                  (benchmarks/forward_speed.py measures it). MKL dispatches its AVX-512 kernels on Intel
                  CPUs only: on an AMD EPYC with AVX-512 it ran 2-3x slower than oneDNN at 4..512 rows.
  float32-onednn  W reordered once into oneDNN's blocked layout (``_reorder_linear_weight``), multiplied
                  by oneDNN's own JIT kernels: exact fp32, sums in another order than MKL (~1e-6).
  bfloat16        W in bf16, reordered once for oneDNN; x is rounded to bf16, products accumulate in fp32
                  (AVX512-BF16 / AMX), the bf16 result is returned in x's dtype. Half the weight bytes;
                  3.5-6x faster than MKL fp32 from ~64 rows (ingest), ~25% faster at 16 rows. Logits move
                  by ~1e-2 vs fp32.
  torch           the ``nn.Linear`` modules as loaded (``F.linear``): the earlier path, kept as the
                  benchmarks' baseline and as a way out.

oneDNN builds (JIT-compiles) a kernel per input shape, ~0.3-0.9 ms each on this CPU: a live batch's row
count changes every forward, so the oneDNN layers round it up to one of ~110 row buckets (``padded_rows``).
Each kernel stays resident, ~0.5 MB of heap between oneDNN's own cache and ideep's (torch's oneDNN wrapper)
until evicted; both caches keep 1,024 by default, which for the built-in model (5 weight shapes x 110
buckets) let a service grow by ~0.3 GB, in steps, as bursts walked through new row counts. ``bound_kernel_cache``
caps both (``model.kernel_cache``), and ``kernel_cache_summary`` mirrors what
they hold for ``stats``.

``prepare_linears`` swaps a model's ``nn.Linear`` modules for these after its weights are loaded;
the result is inference-only (no autograd, no ``load_state_dict``). On CUDA nothing is swapped.
"""

from __future__ import annotations

import functools
import os
import platform
from collections import OrderedDict
from pathlib import Path

import torch
from torch import nn

from engine.quoting import quoted, quoted_choices
from engine.settings import WEIGHT_FORMATS


class TransposedLinear(nn.Module):
    """y = x @ W_t (+ b) with W_t = W^T stored contiguous, (in, out): MKL's sgemm through ``torch.mm``."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.register_buffer("weight_t", linear.weight.detach().t().contiguous())  # (in, out)
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (M, in) -> (M, out)
        if self.bias is None:
            return torch.mm(x, self.weight_t)
        return torch.addmm(self.bias, x, self.weight_t)


def padded_rows(rows: int) -> int:
    """The row bucket a oneDNN GEMM of ``rows`` rows runs at: exact to 16, then multiples of 4 to 64,
    of 16 to 512, of 64 to 4,096, of 256 beyond: at most ~23% padded rows, ~120 shapes below 4,096."""
    if rows <= 16:
        return rows
    step = 4 if rows <= 64 else 16 if rows <= 512 else 64 if rows <= 4096 else 256
    return -(-rows // step) * step


# oneDNN spends ~11 us a call before any arithmetic (measured on an AMD EPYC: a 16x16 weight takes as long as
# a 256x256 one), MKL ~1 us: at one or two rows (a question's last layer, its LM head, a one-token tick) an fp32
# weight up to this size also keeps a plain transposed copy for MKL (3.7 vs 13 us for 256x256 at one row).
# Above it a row's GEMV is bound by reading the weight, where the fixed cost no longer matters, and the
# copy would double a large model's memory.
FEW_ROWS = 2
FEW_ROWS_COPY_MAX_BYTES = 4 << 20


# The environment variables oneDNN and ideep read their caches' capacities from, once, at their first kernel
KERNEL_CACHE_VARIABLES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
ONEDNN_DEFAULT_CAPACITY = 1024


def bound_kernel_cache(kernels: int) -> None:
    """Cap oneDNN's compiled kernels at ``kernels`` in this process. Both caches read the capacity once, when
    the first kernel is made (a model's first oneDNN layer): call it before any model loads; a later call
    changes nothing that has been read, so the first engine of a process sets it for all of them."""
    if type(kernels) is not int or kernels < 1:  # ideep's cache crashes the process at 0
        raise ValueError(f"kernel_cache must be an integer >= 1, got {quoted(kernels)}")
    if _KERNELS.capacity is None:
        for name in KERNEL_CACHE_VARIABLES:  # (one the operator exported stays: theirs is the deliberate one)
            os.environ.setdefault(name, str(kernels))


class KernelCacheMirror:
    """What oneDNN's kernel cache holds for these layers, mirrored: oneDNN exports no count of it. An LRU of
    (in, out, dtype, rows) keys at the capacity oneDNN read, and how many kernels were compiled (its misses)."""

    def __init__(self) -> None:
        self.capacity: int | None = None  # read from the environment with oneDNN's, at the first layer built
        self.keys: OrderedDict[tuple[int, int, torch.dtype, int], None] = OrderedDict()
        self.compiled = 0

    def start(self) -> None:
        if self.capacity is None:
            value = os.environ.get(KERNEL_CACHE_VARIABLES[0], "")
            self.capacity = int(value) if value.isdigit() else ONEDNN_DEFAULT_CAPACITY

    def use(self, key: tuple[int, int, torch.dtype, int]) -> None:
        if key in self.keys:
            self.keys.move_to_end(key)
            return
        self.compiled += 1
        self.keys[key] = None
        if len(self.keys) > (self.capacity or ONEDNN_DEFAULT_CAPACITY):
            self.keys.popitem(last=False)


_KERNELS = KernelCacheMirror()  # process-wide, as oneDNN's own cache is


def kernel_cache_summary() -> dict[str, int]:
    """For ``stats``: oneDNN GEMM kernels held now, compiled since the start, and the cap; none without them."""
    if _KERNELS.capacity is None:
        return {}
    return {"gemm_kernels": len(_KERNELS.keys), "gemm_kernels_compiled": _KERNELS.compiled,
            "gemm_kernel_cache": _KERNELS.capacity}


class OneDNNLinear(nn.Module):
    """y = x @ W^T (+ b) through a weight prepacked once for oneDNN, in ``dtype`` (fp32, or bf16 with fp32
    accumulation); the result comes back in x's dtype."""

    def __init__(self, linear: nn.Linear, dtype: torch.dtype) -> None:
        super().__init__()
        weight = linear.weight.detach().to(dtype)  # (out, in)
        _KERNELS.start()  # before the reorder below, oneDNN's first kernel, reads the capacity
        # An opaque oneDNN tensor: a plain attribute, so that .to()/state_dict never touch it
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight)
        self.bias = None if linear.bias is None else linear.bias.detach().to(dtype)
        self.dtype = dtype
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        small = dtype == torch.float32 and weight.numel() * weight.element_size() <= FEW_ROWS_COPY_MAX_BYTES
        self.weight_t = weight.t().contiguous() if small else None  # (in, out) for MKL at FEW_ROWS rows

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (M, in) -> (M, out), x's dtype
        rows = x.shape[0]
        if rows <= FEW_ROWS and self.weight_t is not None and x.dtype == torch.float32:
            return torch.mm(x, self.weight_t) if self.bias is None else torch.addmm(self.bias, x, self.weight_t)
        bucket = padded_rows(rows)
        _KERNELS.use((self.in_features, self.out_features, self.dtype, bucket))
        if bucket == rows:
            x_in = x if x.dtype == self.dtype else x.to(self.dtype)  # (~1 us a no-op call saved: 17 a probe)
        else:  # pad rows are zeros: every output row depends on its own input row only
            x_in = x.new_zeros(bucket, self.in_features, dtype=self.dtype)  # (bucket, in)
            x_in[:rows] = x
        y = torch.ops.mkldnn._linear_pointwise(x_in, self.packed, self.bias, "none", [], "")  # (bucket, out)
        y = y if bucket == rows else y[:rows]  # (M, out)
        return y if y.dtype == x.dtype else y.to(x.dtype)


def bf16_linear_supported() -> bool:
    """oneDNN built in and a CPU with native bf16 dot products (else its bf16 GEMM is emulated and slow)."""
    is_bf16 = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return torch.backends.mkldnn.is_available() and (is_bf16 is None or bool(is_bf16()))


@functools.cache
def cpu_vendor() -> str | None:
    """The x86 ``vendor_id`` of /proc/cpuinfo (GenuineIntel, AuthenticAMD, ...); None where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def fp32_gemm_library() -> str:
    """``onednn`` on an x86 CPU not made by Intel (MKL keeps its fastest kernels for Intel's), else ``mkl``."""
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    vendor = cpu_vendor()
    if x86 and vendor is not None and vendor != "GenuineIntel" and torch.backends.mkldnn.is_available():
        return "onednn"
    return "mkl"


def resolve_format(weights: str) -> str:
    """``weights`` with ``float32`` made concrete for this CPU (float32-mkl or float32-onednn)."""
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights must be one of {quoted_choices(WEIGHT_FORMATS)}, got {quoted(weights)}")
    return f"float32-{fp32_gemm_library()}" if weights == "float32" else weights


def prepare_linears(model: nn.Module, weights: str) -> nn.Module:
    """Replace every ``nn.Linear`` of a CPU model by the ``weights`` format's layer, in place."""
    weights = resolve_format(weights)
    if weights == "torch" or next(model.parameters()).device.type != "cpu":  # on CUDA the GEMMs are cuBLAS's
        return model
    if weights in ("bfloat16", "float32-onednn") and not torch.backends.mkldnn.is_available():
        raise ValueError(f"weights {quoted(weights)} needs torch built with oneDNN")
    if weights == "bfloat16" and not bf16_linear_supported():
        raise ValueError("weights \"bfloat16\" needs torch with oneDNN on a CPU with bf16 support")
    layer = {
        "float32-mkl": TransposedLinear,
        "float32-onednn": lambda linear: OneDNNLinear(linear, torch.float32),
        "bfloat16": lambda linear: OneDNNLinear(linear, torch.bfloat16),
    }[weights]
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, layer(child))
    return model
