"""The Python heap of a long-running service, shard or backtest: frozen out of the cyclic collector once it is up
(its full collections stalled the serving loop), thawed when it stops, and freed memory handed back to the OS
after streams expire."""

from __future__ import annotations

import ctypes
import gc


def freeze_heap(ours: bool = False) -> bool:
    """Collect, then exempt every object alive now from Python's cyclic collector (``gc.freeze``): call once
    a service, shard or backtest is up. What is alive then is the imported libraries' state (torch,
    transformers, polars: ~200k objects), the model and the restored streams, and a full collection walks all
    of it: ~145 ms measured on a 2-core AMD EPYC, and Python runs one every so many allocations, so in the
    serving loop it is a stall of every answer behind it (the p99 freshness spikes of benchmarks/streaming).
    Frozen objects are still freed by reference counting; only cycles among them wait for ``thaw_heap``.

    A heap the process's owner froze already is left as it is, uncollected: an app that forks its workers from
    a frozen heap (as ``gc.freeze``'s documentation advises) and runs a backtest in it kept its frozen objects
    frozen only until the backtest's thaw unfroze them all (a thaw cannot tell ours from theirs), and the full
    collection here walked its whole heap first. ``ours``: the heap is frozen by the caller's own earlier call (a
    shard's restore of moved streams): what came since joins it. Returns whether the heap is frozen by this caller
    now, for ``thaw_heap``."""
    if gc.get_freeze_count() and not ours:
        return False
    gc.collect()
    gc.freeze()
    return True


def thaw_heap(frozen_here: bool) -> None:
    """Undo ``freeze_heap`` when a service stops, if it froze the heap: what it leaves behind is collected as
    usual."""
    if frozen_here:
        gc.unfreeze()


def return_memory() -> None:
    """Hand freed heap back to the OS after streams expire (glibc keeps it otherwise; elsewhere a no-op)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
