"""How many streams the KV pool holds resident, against how many admission takes (scheduler.max_streams): said once
at the start when the second is larger, so a pool sized for ~2,000 instruments is not found out by `KV thrash` an
hour into an options chain. Apart from the `KV pool` start line, which says the pool's size (cmd_serve.py)."""

from __future__ import annotations


def full_window_cells(block_size: int, window: int) -> int:
    """The cells a stream holds at a full ``window``: its blocks, plus the one a roll may straddle."""
    return (-(-window // block_size) + 1) * block_size


def resident_streams(cells: int, block_size: int, window: int) -> tuple[int, int]:
    """The streams a pool of ``cells`` holds at once: at one ``block_size`` block each (a new, quiet stream), and at a
    full ``window`` each (full_window_cells: where every stream held grows, a quiet one only slower)."""
    return cells // block_size, cells // full_window_cells(block_size, window)


def capacity_note(max_streams: int, when_full: str, cells: int, block_size: int, window: int,
                  shards: int = 0) -> str | None:
    """The start's warning when scheduler.max_streams admits more streams than the pool holds resident at a block
    each (None when it does not, or under when_full: refuse, whose admission is bounded by the pool itself)."""
    at_block, at_window = resident_streams(cells, block_size, window)
    if when_full != "evict" or max_streams <= at_block:
        return None
    each = " on each shard" if shards else ""
    return (f"warning: scheduler.max_streams {max_streams:,} admits more streams than kv.cells {cells:,} holds "
            f"resident{each}: "
            f"{at_block:,} at one {block_size}-cell block each, {at_window:,} once their contexts fill the "
            f"{window}-token window ({full_window_cells(block_size, window)} cells each); past that, idle sessions are "
            f"evicted and recomputed when they next tick, and answers come late (`KV thrash`). Size kv.cells as "
            f"streams x {full_window_cells(block_size, window)} for the streams you feed (docs/configuration.md, "
            f"kv.cells)")
