"""The `model` and `codec` sections of the service config: which model runs, how, and how ticks become its tokens.

Kept apart from the other sections so a newcomer looking for model.dtype, model.weights or codec.kind finds them by
name; the checks are the sections' own (engine/service/config.py assembles them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine.quoting import quoted_choices
from engine.service.config_error import ConfigError
from engine.settings import WEIGHT_FORMATS
from queries.limits import excerpt  # values as YAML writes them: got true, got null (not True, None)

DTYPES = ("float32", "bfloat16", "float16")
KERNEL_CACHE = 1024  # oneDNN's own default  # torch dtypes by name (getattr(torch, name)): no torch import here


@dataclass(frozen=True)
class ModelSection:
    path: str | None = None  # Hugging Face checkpoint directory; None: the built-in tick model
    dtype: str = "float32"
    device: str = "cpu"
    id: str | None = None  # model id stamped on answers
    # torch CPU threads for the forward. 1 by measurement (docs/benchmarks.md, benchmarks/threads.py): on a
    # shared machine a second thread spin-waits behind other processes and a small model gains little from it
    threads: int | None = 1
    # The linears' weights on CPU (engine/models/linear.py): float32 (oneDNN or MKL by CPU vendor; float32-mkl,
    # float32-onednn pin one), bfloat16 (bf16 GEMMs with fp32 accumulation; activations and KV stay in dtype),
    # torch (nn.Linear as loaded); null follows dtype
    weights: str | None = None
    # On CUDA: replay probes and small steps as captured graphs (engine/cuda_graphs.py); off: every forward eager
    cuda_graphs: bool = True
    # oneDNN GEMM kernels kept compiled (engine/models/linear.py), ~0.5 MB each. 1,024 holds every one the built-in
    # model can reach (~550); lower caps measured no lower RSS, only recompiles (docs/configuration.md#memory)
    kernel_cache: int = KERNEL_CACHE

    def __post_init__(self) -> None:
        if self.threads is not None and (type(self.threads) is not int or self.threads < 1):
            raise ConfigError(f"model.threads must be an integer >= 1 (or null: torch's default), "
                              f"got {excerpt(self.threads)}")
        if type(self.kernel_cache) is not int or self.kernel_cache < 1:
            raise ConfigError(f"model.kernel_cache must be an integer >= 1, got {excerpt(self.kernel_cache)}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"model.dtype must be one of {quoted_choices(DTYPES)}, got {excerpt(self.dtype)}")
        if self.weights is not None and self.weights not in WEIGHT_FORMATS:
            raise ConfigError(f"model.weights must be one of {quoted_choices(WEIGHT_FORMATS)} (or null: follow "
                              f"model.dtype), got {excerpt(self.weights)}")
        if not (self.device == "cpu" or self.device.startswith("cuda")):
            raise ConfigError(f"model.device must be \"cpu\" or \"cuda[:N]\", got {excerpt(self.device)}")

    @property
    def model_id(self) -> str:
        # the directory's own name, also for `--model .` or `../my-model`
        return self.id or (Path(os.path.abspath(self.path)).name if self.path else "flashtick-tick")


@dataclass(frozen=True)
class CodecSection:
    kind: str = "auto"  # auto: binned for the built-in model, text for a Hugging Face model
    trade_template: str | None = None
    quote_template: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("auto", "binned", "text"):
            raise ConfigError(f"codec.kind must be auto, binned or text, got {excerpt(self.kind)}")
