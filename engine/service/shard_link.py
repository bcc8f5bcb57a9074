"""ShardLink: the front door's side of one engine shard (engine/service/sharded.py drives it).

Its actor handle, the streams rendezvous hashing gave it, the items and ops
waiting to go, the one call in flight (a shard gets one call at a time, so the
order of items, registry changes and asks is the order they were accepted),
and, when its engine state was lost, the restore under way.
"""

from __future__ import annotations

from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from engine.service.shard import GroupEnd
from engine.service.shard_items import Item
from queries.flash import FlashStats


@dataclass(eq=False)
class ShardLink:
    """The front door's side of one shard: its actor, its streams, what waits to go, the call in flight."""

    name: str
    handle: Any
    streams: set[str] = field(default_factory=set)
    buffer: list[Item | GroupEnd] = field(default_factory=list)  # accepted (logged) items not yet sent
    buffered_tokens: int = 0
    ops: list[tuple] = field(default_factory=list)  # registry ops and asks, in order
    call: Any = None  # the ObjectRef of the one call in flight
    call_kind: str = "step"  # or "restore"
    call_tokens: int = 0
    call_version: int = 0  # registry version when the call went out
    call_tickets: list[Any] = field(default_factory=list)
    call_streams: set[str] = field(default_factory=set)  # the streams whose items the call in flight carries
    call_forgets: set[str] = field(default_factory=set)  # streams the call in flight tells the shard to forget
    forgetting: set[str] = field(default_factory=set)  # forgotten here; the shard not told yet (queued or in flight)
    lost: bool = False  # its engine state is gone: nothing goes to it until a restore succeeds
    restore_errors: int = 0  # restores in a row that raised in the shard
    failed: str | None = None  # why it was given up on (restores kept raising); nothing more is tried
    not_before: float = 0.0  # monotonic time before which no restore is tried
    reading: Future | None = None  # the tick log being read for a restore
    reported_pending: int = 0  # the shard's backlog at its last reply
    shard_busy: bool = False
    stats_due: bool = True
    restarts: int = 0
    restores: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    # the counters of its actor's earlier lives (a restarted actor counts from 0): summed in, so no total falls
    retired: dict[str, Any] = field(default_factory=dict)

    def retire_stats(self) -> None:
        """Its actor died: keep what its counters had reached (as of its last stats) under ``retired``."""
        old, now = self.retired, self.stats
        self.retired = {key: _summed([old.get(key, {}), now.get(key, {})]) for key in COUNTED}
        self.retired["query_errors"] = old.get("query_errors", 0) + now.get("query_errors", 0)
        self.stats = {}

    def buffers(self, stream: str) -> bool:
        """Whether items of ``stream`` wait here, not yet sent: what its shard says of it now is older than them."""
        return any(not isinstance(item, GroupEnd) and item[0] == stream for item in self.buffer)

    @property
    def pending_tokens(self) -> int:
        return self.buffered_tokens + self.call_tokens + self.reported_pending

    @property
    def has_work(self) -> bool:
        return bool(self.buffer or self.ops or self.shard_busy or self.stats_due)

    @property
    def state(self) -> str:
        return f"failed: {self.failed}" if self.failed else "restoring" if self.lost else "serving"


def _slowest(percentiles: list[dict[str, float]]) -> dict[str, float]:
    return {q: max(p[q] for p in percentiles) for q in ("p50", "p99")} if percentiles else {}


def gathered_stats(links: list[ShardLink]) -> dict[str, Any]:
    """The shards' figures as of their last replies, summed as if from one engine, and one line per shard."""
    shards = [link.stats for link in links]
    lives = shards + [link.retired for link in links]  # counters: every actor life of every shard
    return {
        "query_errors": sum(s.get("query_errors", 0) for s in lives),
        "speculation": FlashStats(**_summed([s.get("speculation", {}) for s in lives])).summary(),
        # the slowest shard's percentiles (an upper bound on the service's)
        **{key: _slowest([s[key] for s in shards if s.get(key)]) for key in ("freshness_ms", "data_age_ms")},
        **{key: sum(s.get(key, 0) for s in shards) for key in (
            "kv_cells_capacity", "kv_cells_used", "kv_cells_touched", "sessions_resident", "kv_bytes_capacity")},
        "kv_cell_bytes": max((s.get("kv_cell_bytes", 0) for s in shards), default=0),  # one model: the same on each
        "scheduler": _summed([s.get("scheduler", {}) for s in lives]),
        "runner": _summed([s.get("runner", {}) for s in lives]),
        "shards": [{"name": link.name, "state": link.state, "streams": len(link.streams),
                    "pending_tokens": link.pending_tokens, "restarts": link.restarts, "restores": link.restores[-3:],
                    "pid": link.stats.get("pid"), "calls": link.stats.get("calls", 0),
                    "resident_memory_bytes": link.stats.get("resident_memory_bytes")} for link in links],
        # what the shards' processes hold, which the front door's process_resident_memory_bytes does not (review380
        # #4: 0.52 GB said while two shards held 9.3 GB): as of each serving one's last reply (a failed or restoring
        # shard's last figure is of a process gone); None before any says it
        "shards_resident_memory_bytes": sum(rss) if (rss := [link.stats["resident_memory_bytes"] for link in links
                                                            if link.state == "serving"
                                                            and link.stats.get("resident_memory_bytes")]) else None,
    }


COUNTED = ("speculation", "scheduler", "runner")  # counters (dicts of them) that only grow within one actor life


def _summed(dicts: list[dict[str, Any]]) -> dict[str, Any]:
    total: Counter[str] = Counter()
    for d in dicts:
        total.update({k: v for k, v in d.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
    return dict(total)
