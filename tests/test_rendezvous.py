"""Rendezvous hashing: a stream's shard is stable, spread evenly, and a shard added or removed moves only
the streams it must."""

from __future__ import annotations

from collections import Counter

import pytest

from engine.service.rendezvous import shard_for

STREAMS = [f"SYM{i}.{venue}" for i in range(500) for venue in ("X", "Y")]


def assign(shards: list[str]) -> dict[str, str]:
    return {stream: shard_for(stream, shards) for stream in STREAMS}


def test_adding_a_shard_moves_only_streams_to_it_and_about_one_in_n() -> None:
    before = assign(["shard-0", "shard-1", "shard-2"])
    after = assign(["shard-0", "shard-1", "shard-2", "shard-3"])
    moved = [s for s in STREAMS if before[s] != after[s]]
    assert all(after[s] == "shard-3" for s in moved)
    assert 0.15 < len(moved) / len(STREAMS) < 0.35  # ~1/4


def test_removing_a_shard_moves_only_its_own_streams() -> None:
    before = assign(["shard-0", "shard-1", "shard-2", "shard-3"])
    after = assign(["shard-0", "shard-1", "shard-3"])
    assert {s for s in STREAMS if before[s] != after[s]} == {s for s in STREAMS if before[s] == "shard-2"}


def test_assignment_is_stable_spread_and_independent_of_order() -> None:
    shards = ["shard-0", "shard-1"]
    assert assign(shards) == assign(list(reversed(shards)))
    counts = Counter(assign(shards).values())
    assert min(counts.values()) > 0.4 * len(STREAMS)
    assert shard_for("SYN.A", shards) == shard_for("SYN.A", shards)
    with pytest.raises(ValueError, match="at least one shard"):
        shard_for("SYN.A", [])
