"""The engine's settings as plain values, without torch: the scheduler's budgets (SchedulerConfig), the KV pool's
size (CacheSpec) and the linears' weight formats. A config file is read and checked against them by code that
never loads a model (`flashtick stats --config ...` starts in a fraction of a second, not after torch's ~2 s
import); engine/scheduler.py, engine/kv_cache.py and engine/models/linear.py use them from here."""

from __future__ import annotations

import math
from engine.quoting import quoted
from engine.roll_fit import DEFAULT_KEEP_FRACTION, DEFAULT_PROBE_RESERVE
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

    from engine.models.config import ModelConfig

WEIGHT_FORMATS = ("float32", "float32-mkl", "float32-onednn", "bfloat16", "torch")


@dataclass(frozen=True)
class SchedulerConfig:
    max_batch_tokens: int = 4096
    max_batch_streams: int = 256
    when_full: Literal["evict", "refuse"] = "evict"
    window: int | None = None  # context limit in tokens; None: the model's max positions
    sink_tokens: int = 0  # leading tokens kept on a roll (at least the header)
    keep_fraction: float = DEFAULT_KEEP_FRACTION  # share of the window kept (most recent tokens) after a roll
    header: tuple[int, ...] = ()  # tokens every session starts with; their KV is computed once and shared
    # positions kept free past a session's tokens for question (+ answer) probes
    probe_reserve: int = DEFAULT_PROBE_RESERVE
    max_probe_tokens: int = 8192  # question tokens per forward (asks + standing queries); the rest wait a forward
    # streams held at once; a new one past it is refused (AdmissionRefused). It bounds admission and host memory
    # (~0.2 MB a stream of ~30 ticks), not KV: the pool's size says how many stay resident (service/stream_capacity)
    max_streams: int = 32_768
    stream_idle_s: float | None = 3600.0  # a stream silent this long (wall clock) is dropped; None: never
    # the expired streams whose ordering guard and last `seq` are kept (the most recently expired); an older one is
    # forgotten everywhere, so a service whose instrument names churn holds bounded state (connectors/stream_table.py)
    expired_streams_kept: int = 100_000
    # a stream far behind goes on past its roll point in the same forward (its kept tokens prefilled as a new
    # sequence, engine/rolls_in_forward.py), so the token budget, not the span between rolls, bounds how far it
    # moves; false: it stops at its roll point and the rest waits for later forwards (the same answers)
    roll_inside_forward: bool = True

    def __post_init__(self) -> None:
        if self.max_batch_tokens <= 0:
            raise ValueError(f"max_batch_tokens must be > 0, got {self.max_batch_tokens}")
        if self.max_batch_streams <= 0:
            raise ValueError(f"max_batch_streams must be > 0, got {self.max_batch_streams}")
        if self.when_full not in ("evict", "refuse"):
            raise ValueError(f"when_full must be \"evict\" or \"refuse\", got {quoted(self.when_full)}")
        if not 0 < self.keep_fraction < 1:
            raise ValueError(f"keep_fraction must be in (0, 1), got {self.keep_fraction}")
        if self.sink_tokens < 0:
            raise ValueError(f"sink_tokens must be >= 0, got {self.sink_tokens}")
        if self.max_probe_tokens <= 0:
            raise ValueError(f"max_probe_tokens must be > 0, got {self.max_probe_tokens}")
        if self.probe_reserve < 0:
            raise ValueError(f"probe_reserve must be >= 0, got {self.probe_reserve}")
        if self.max_streams <= 0:
            raise ValueError(f"max_streams must be > 0, got {self.max_streams}")
        if self.stream_idle_s is not None and not 0 < self.stream_idle_s < math.inf:  # NaN and inf too
            raise ValueError(f"stream_idle_s must be a number of seconds > 0 (or null for never), got "
                             f"{quoted(self.stream_idle_s)}")
        if type(self.expired_streams_kept) is not int or self.expired_streams_kept < 0:
            raise ValueError(f"expired_streams_kept must be an int >= 0, got {quoted(self.expired_streams_kept)}")
        if not isinstance(self.roll_inside_forward, bool):  # YAML's `no` is a bool; a 0 or a string is a mistake
            raise ValueError(f"roll_inside_forward must be true or false, got {quoted(self.roll_inside_forward)}")
        if self.window is not None and self.window <= 0:  # 0 read as "the model's" (falsy) unsaid
            raise ValueError(f"window must be > 0 (or null for the model's positions), got {self.window}")


MAX_KV = 10**15  # cells or bytes: far past any machine's memory, well inside the int64 a tensor size is


@dataclass(frozen=True)
class CacheSpec:
    """How big the pool is: exactly one of ``cells`` or ``bytes`` (the service's default is in bytes, so a model with
    wide cells gets fewer of them: config_kv.py)."""

    block_size: int = 32
    cells: int | None = None
    bytes: int | None = None

    def __post_init__(self) -> None:
        if (self.cells is None) == (self.bytes is None):
            raise ValueError("give the KV capacity as exactly one of cells or bytes")
        if self.block_size <= 0:
            raise ValueError(f"block_size must be > 0, got {self.block_size}")
        for name in ("cells", "bytes"):
            if (value := getattr(self, name)) is not None and value <= 0:
                raise ValueError(f"{name} must be > 0, got {value}")
            if value is not None and value >= MAX_KV:  # past torch's sizes (an overflow, not "cannot allocate")
                raise ValueError(f"{name} must be below {MAX_KV:.0e}, got {value}")

    def num_blocks(self, config: ModelConfig, dtype: torch.dtype) -> int:
        block_bytes = config.kv_bytes_per_token * dtype.itemsize * self.block_size
        blocks = self.cells // self.block_size if self.cells is not None else self.bytes // block_bytes
        if blocks <= 0:
            raise ValueError(f"kv.cells / kv.bytes: KV capacity below one block of {self.block_size} cells "
                             f"({block_bytes} bytes)")
        return blocks
