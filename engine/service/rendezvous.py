"""Which shard serves a stream: rendezvous (highest-random-weight) hashing on the stream name.

Every (shard, stream) pair gets a pseudo-random weight from a stable hash; a
stream goes to the shard with the highest weight. Adding a shard moves to it
exactly the streams for which it now has the highest weight (about 1/N of
them) and nothing else; removing one moves only its own streams, each to its
runner-up. No ring, no virtual nodes, no state: the same names give the same
answer on every host and in every process (``hash()`` is salted per process,
so a keyed blake2b is used instead).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def weight(shard: str, stream: str) -> int:
    """The pseudo-random weight of ``stream`` on ``shard`` (64 bits, stable across processes and hosts)."""
    digest = hashlib.blake2b(stream.encode("utf-8"), digest_size=8, key=shard.encode("utf-8")[:64])
    return int.from_bytes(digest.digest(), "little")


def shard_for(stream: str, shards: Sequence[str]) -> str:
    """The shard of ``stream`` among ``shards`` (names; ties, which need a 64-bit collision, go to the first)."""
    if not shards:
        raise ValueError("shard_for needs at least one shard")
    return max(shards, key=lambda shard: weight(shard, stream))
