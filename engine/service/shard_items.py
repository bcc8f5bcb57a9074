"""What a sharded front door sends its shards, packed: items (tokens, event time, tick count and mark), a restart's
tail, and a restore's whole share of the tick log, as a few flat numpy arrays Ray ships whole (shard.py unpacks
them).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from connectors.encoder import EncodedTick
from engine.service.move_marks import move_mark

# (stream, tokens, event ts ns, ticks, mark): an accepted, encoded item and its mark (move_marks.move_mark: the price
# a move_bps trigger watches, which a shard cannot read from tokens; None: none)
Item = tuple[str, list[int], int, int, float | None]
# (stream, tokens, ts, ticks, accepted ns, mark): a step's
LiveItem = tuple[str, list[int], int, int, int, float | None]


def pack_items(items: list[Item]) -> dict[str, Any]:
    """Many items (a restore's) as a few flat numpy arrays, which Ray ships whole instead of pickling every
    small list and int: the stream names, each item's stream index and token count, the tokens, event times,
    tick counts and marks (NaN: none)."""
    index: dict[str, int] = {}
    for item in items:
        index.setdefault(item[0], len(index))
    n = len(items)
    lengths = np.fromiter((len(item[1]) for item in items), np.int64, n)
    return {"streams": list(index), "which": np.fromiter((index[item[0]] for item in items), np.int32, n),
            "lengths": lengths, "tokens": np.fromiter((t for item in items for t in item[1]), np.int64,
                                                      int(lengths.sum())),
            "ts": np.fromiter((item[2] for item in items), np.int64, n),
            "ticks": np.fromiter((item[3] for item in items), np.int64, n),
            "marks": np.fromiter((math.nan if item[4] is None else item[4] for item in items), np.float64, n)}


def unpack_items(packed: dict[str, Any]) -> Iterator[Item]:
    """The items ``pack_items`` packed, in order."""
    names, tokens = packed["streams"], packed["tokens"].tolist()
    start = 0
    for which, end, ts, ticks, mark in zip(packed["which"].tolist(), np.cumsum(packed["lengths"]).tolist(),
                                           packed["ts"].tolist(), packed["ticks"].tolist(), packed["marks"].tolist()):
        yield names[which], tokens[start:end], ts, ticks, None if math.isnan(mark) else mark
        start = end


def pack_tail(tail: list[EncodedTick | None]) -> dict[str, Any]:
    """A replay's tail (log_replay.split_log: items, None where a wire message began) as pack_items arrays, with
    the positions of the items that began a message."""
    items: list[Item] = []
    message_starts: list[int] = []
    for entry in tail:
        if entry is None:
            message_starts.append(len(items))
        else:
            items.append((entry.stream, entry.tokens, entry.ts, entry.ticks, move_mark(entry.tick)))
    return {**pack_items(items), "message_starts": np.asarray(message_starts, np.int64)}


def unpack_tail(packed: dict[str, Any]) -> tuple[list[EncodedTick | None], dict[int, float | None]]:
    """The tail ``pack_tail`` packed, in order, and each item's mark by its id (an EncodedTick of no raw tick)."""
    message_starts = set(packed["message_starts"].tolist())
    tail: list[EncodedTick | None] = []
    marks: dict[int, float | None] = {}
    for i, (stream, tokens, ts, ticks, mark) in enumerate(unpack_items(packed)):
        if i in message_starts:
            tail.append(None)
        tail.append(item := EncodedTick(stream, ts, tokens, ticks, None))
        marks[id(item)] = mark
    return tail, marks


def pack_logged(items: list[Item], starts: dict[str, tuple[int, int]], tail: list[EncodedTick | None]
                ) -> dict[str, Any]:
    """What restores a shard's streams (Shard.restore): items to book, retention starts, the tail to compute."""
    return {"items": pack_items(items), "starts": dict(starts), "tail": pack_tail(tail)}
