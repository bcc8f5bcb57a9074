"""The `log` section of the service config: the on-disk tick and answer logs (where, fsync, segments, retention),
each numeric key refused with its unit when written as suffixed text ('64MB', '7d').
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.service.config_error import ConfigError
from queries.limits import excerpt  # values as YAML writes them: got true, got null (not True, None)

# the log section's numeric keys: each one's unit, with an example in that unit beside the suffixed text a user may
# write for it (a duration's "7d" is refused with a duration's example, not a size's)
LOG_NUMBER_UNITS = {
    "group_ms": "milliseconds (e.g. 5, not \"5ms\")",
    "segment_bytes": "bytes (e.g. 67108864, not \"64MB\")",
    "retention_bytes": "bytes (e.g. 1073741824, not \"1GB\")",
    "retention_s": "seconds (e.g. 604800, not \"7d\")",
    "answers_keep": "answers (e.g. 100000, not \"100k\")",
    "answers_segment_bytes": "bytes (e.g. 16777216, not \"16MB\")",
    "answers_retention_bytes": "bytes (e.g. 268435456, not \"256MB\")",
}


@dataclass(frozen=True)
class LogSection:
    """The on-disk tick and answer logs (engine/service/durability.py). `serve` keeps them unless --no-log or
    ``enabled: false``, in ``dir`` (default: the user's state directory); in-process runs never do."""

    enabled: bool = True
    dir: str | None = None  # data directory: ticks/, answers/, queries.yaml
    fsync: str = "group"  # always | group (at most every group_ms) | never
    group_ms: float = 5.0
    segment_bytes: int = 64 << 20
    # drop the oldest segments past this total (~5M ticks: a restart replays it, ~5 minutes of a core; None: keep all)
    retention_bytes: int | None = 512 << 20
    retention_s: float | None = None  # drop segments older than this; None: keep all
    skip_corrupt: bool = False  # on start, skip damaged records (counted) instead of refusing to start
    answers_keep: int = 100_000  # published answers kept in memory for the `answers` op (gap fills)
    answers_segment_bytes: int = 16 << 20
    answers_retention_bytes: int | None = 256 << 20  # the answer log on disk (seqs survive it: checkpointed)
    # the service's stderr lines: text (`flashtick: LEVEL: message`) or json (one object a line: ts, level, event,
    # fields), engine/service/log_levels.py
    format: str = "text"

    def __post_init__(self) -> None:
        if self.format not in ("text", "json"):
            raise ConfigError(f"log.format must be text or json, got {excerpt(self.format)}")
        if self.fsync not in ("always", "group", "never"):
            raise ConfigError(f"log.fsync must be always, group or never, got {excerpt(self.fsync)}")
        for name, unit in LOG_NUMBER_UNITS.items():
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ConfigError(f"log.{name} must be a number of {unit}, got {excerpt(value)}")
            if value is not None and not 0 < value < math.inf:  # NaN too: group_ms NaN spun the fsync threads
                raise ConfigError(f"log.{name} must be a finite number > 0, got {excerpt(value)}")
        for name in ("enabled", "skip_corrupt"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"log.{name} must be true or false, got {excerpt(getattr(self, name))}")
