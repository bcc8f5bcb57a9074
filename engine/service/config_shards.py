"""The `shards` section of the service config: scale-out over Ray actors (how many shards, where, their restarts
and pacing).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.service.config_error import ConfigError
from queries.limits import excerpt  # values as YAML writes them: got true, got null (not True, None)

@dataclass(frozen=True)
class ShardsSection:
    """Scale-out (engine/service/sharded.py, docs/scale-out.md): ``count`` engine shards as Ray actors behind
    this process's sockets; 0 runs the one engine in this process. Engine budgets (kv, scheduler) are per shard."""

    count: int = 0
    ray_address: str | None = None  # None: a local Ray instance; "auto" or HOST:PORT: join a running cluster
    cpus: float = 1.0  # CPUs Ray reserves for each shard (each also gets one GPU when model.device is cuda)
    max_restarts: int = -1  # times Ray restarts a shard that died (-1: always); each restart rebuilds from the log
    step_ms: float = 20.0  # a shard call steps its engine until idle or this long, then returns its answers
    start_timeout_s: float = 300.0  # how long the shards may take to start (model load) before serve gives up

    def __post_init__(self) -> None:
        if type(self.count) is not int or self.count < 0:
            raise ConfigError(f"shards.count must be an integer >= 0, got {excerpt(self.count)}")
        if self.ray_address is not None and (not isinstance(self.ray_address, str) or not self.ray_address):
            raise ConfigError(f"shards.ray_address must be \"auto\" or HOST:PORT, got {excerpt(self.ray_address)}")
        if type(self.max_restarts) is not int or self.max_restarts < -1:
            raise ConfigError(f"shards.max_restarts must be an integer >= -1, got {excerpt(self.max_restarts)}")
        for name in ("cpus", "step_ms", "start_timeout_s"):
            value, least = getattr(self, name), 0 if name == "cpus" else None
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (
                    value == 0 and least is None):
                raise ConfigError(f"shards.{name} must be a number {'>= 0' if least == 0 else '> 0'}, "
                                  f"got {excerpt(value)}")
