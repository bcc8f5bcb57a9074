"""The `kv` section of the service config: the KV pool's size (cells or bytes) and block size, with its defaults.

The checks are CacheSpec's (engine/settings.py), run here without a model so a bad size is refused with the
config's key when the file is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.memory_limit import usable_memory_bytes
from engine.service.config_error import ConfigError, keyed
from engine.settings import CacheSpec

# The default KV pool: a quarter of the memory this process may use (its cgroup's limit, else the host's RAM), shared
# by the shards, at most 4 GiB (1,048,576 of the built-in model's 4 KiB cells: ~1,900 streams at a full window). On
# the CPU the pool's pages are committed as its cells are first written (kv_cache.py), so an idle service holds none
# of it and a pool sized for the streams that come costs nothing until they come; a fixed 256 MiB (65,536 cells)
# made 200 live streams thrash on a 24 GiB host (review376: tick to answer 6 ms -> 4.6 s)
DEFAULT_KV_MEMORY_SHARE = 4
DEFAULT_KV_MAX_BYTES = 4 * 2**30
# where the memory cannot be read (no /proc, no sysconf): the former fixed default
DEFAULT_KV_UNKNOWN_MEMORY_BYTES = 256 * 2**20


@dataclass(frozen=True)
class KVSection:
    cells: int | None = None  # neither cells nor bytes: default_kv_bytes()
    bytes: int | None = None
    block_size: int = 32

    def __post_init__(self) -> None:  # CacheSpec's checks need no model: refused here, with the config's name
        self.spec()

    @property
    def is_default(self) -> bool:
        return self.cells is None and self.bytes is None

    def spec(self, shards: int = 0) -> CacheSpec:
        """The pool's size for one engine; with ``shards`` engines the default is split among them."""
        size = default_kv_bytes(shards) if self.is_default else self.bytes
        try:
            return CacheSpec(block_size=self.block_size, cells=self.cells, bytes=size)
        except ValueError as e:
            raise ConfigError(keyed("kv", KVSection, str(e))) from None


def default_kv_bytes(shards: int = 0, memory: int | None = None) -> int:
    """The default pool of one engine, in bytes: DEFAULT_KV_MEMORY_SHARE of ``memory`` (default: what this process
    may use) split among ``shards`` engines (0: one), at most DEFAULT_KV_MAX_BYTES."""
    memory = usable_memory_bytes() if memory is None else memory
    if not memory:
        return DEFAULT_KV_UNKNOWN_MEMORY_BYTES
    return min(DEFAULT_KV_MAX_BYTES, memory // DEFAULT_KV_MEMORY_SHARE // max(1, shards))
