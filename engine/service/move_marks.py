"""Each accepted tick's mark to the price-move triggers (`{move_bps: N}`, queries/price_moves.py), and the due point
it makes where it fires one: the one step every path that accepts or books ticks takes (tick_ingest.py live and at a
restart, backtest_resume.py's rebuild, a shard's items and restore: shard.py), so each moves the references alike.
"""

from __future__ import annotations

from connectors.ticks import Tick
from engine.scheduler import Scheduler
from queries.registry import Registry


def move_mark(tick: Tick | None) -> float | None:
    """The price a `move_bps` trigger watches: a trade's price, a quote's mid when it has both sides; None for a
    one-sided quote and for a pre-tokenized item (no price: it moves no reference and fires nothing)."""
    if tick is None:
        return None
    if tick.is_trade:
        return tick.price
    # (the mid as the codec and labels take it, not Tick.mid's written decimals: ~2.5 us a quote on the ingest path
    # for every quote, move queries or not; bps_moved absorbs the ulp between them)
    return None if tick.bid is None or tick.ask is None else 0.5 * (tick.bid + tick.ask)


def watch_moves(registry: Registry, scheduler: Scheduler, stream: str, ts: int, mark: float | None) -> None:
    """``stream``'s latest accepted item, stamped ``ts``, its mark ``mark``, to the move queries (Registry.moved);
    where it fires one and the item waits for a forward, the item becomes a due point of its own
    (Scheduler.due_point), answered at that tick. An item booked without a forward (a rebuild: answered before the
    stop) moves the references alone. Where no query fires on moves (the usual case), nothing is looked up."""
    if mark is None or not registry.has_move_queries:
        return
    ticks = scheduler.accepted_ticks(stream)
    fired = registry.moved(stream, ticks, ts, mark)
    if fired and scheduler.due_point(stream) is not None:
        registry.due_at(stream, ticks, fired)
