"""The `kv` section of the service config: the KV pool's size (cells or bytes) and block size, with its defaults.

The checks are CacheSpec's (engine/settings.py), run here without a model so a bad size is refused with the
config's key when the file is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.service.config_error import ConfigError, keyed
from engine.settings import CacheSpec

# The default KV pool: 65536 cells is 256 MiB of the built-in model's 4 KiB cells (fp32); a checkpoint with wider
# cells gets as many as 256 MiB holds (64 KiB cells, Llama-3-8B's per-layer width x 8 layers: 4096), not GiBs
DEFAULT_KV_CELLS = 65536
DEFAULT_KV_MAX_BYTES = 256 * 2**20


@dataclass(frozen=True)
class KVSection:
    cells: int | None = None  # neither cells nor bytes: DEFAULT_KV_CELLS, at most DEFAULT_KV_MAX_BYTES
    bytes: int | None = None
    block_size: int = 32

    def __post_init__(self) -> None:  # CacheSpec's checks need no model: refused here, with the config's name
        self.spec()

    @property
    def is_default(self) -> bool:
        return self.cells is None and self.bytes is None

    def spec(self) -> CacheSpec:
        cells = DEFAULT_KV_CELLS if self.is_default else None if self.bytes is not None else self.cells
        try:
            return CacheSpec(block_size=self.block_size, cells=cells, bytes=self.bytes,
                             max_bytes=DEFAULT_KV_MAX_BYTES if self.is_default else None)
        except ValueError as e:
            raise ConfigError(keyed("kv", KVSection, str(e))) from None
