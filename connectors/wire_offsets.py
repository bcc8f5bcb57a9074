"""Price offsets on the wire: the served model's training offset (`--price-offset`) that an engine adds to each raw
wire tick at ingest, once, whatever sent it (connectors/encoder.py), and that a feed reading its files with it takes
off again as it sends (connectors/feed.py), so the engine gets prices as the venue prints them from every feed."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from connectors.price_offsets import PriceOffset, offset_of
from connectors.shifted_prices import shifted


def shifted_wire_tick(obj: Any, offset: PriceOffset | None) -> Any:
    """A wire tick map with its stream's ``offset`` added to its price, bid and ask (numbers only: anything else is
    left for the tick check to refuse), rounded as a file's shifted prices are (shifted_prices.shifted); ``obj``
    itself when no offset applies. An engine serving a model trained on shifted prices applies it at ingest, once,
    to every tick whatever sent it (a feed then sends prices as the venue prints them)."""
    if offset is None or not isinstance(obj, dict) or not isinstance(obj.get("stream"), str):
        return obj
    by = offset_of(offset, obj["stream"])
    if not by:
        return obj
    return {key: shifted(value, by) if key in ("price", "bid", "ask") and type(value) in (int, float) else value
            for key, value in obj.items()}


def unshifted_tick(tick: Any, offset: PriceOffset | None) -> Any:
    """A tick read with ``offset`` (a Tick or a wire map) as the venue printed it: its stream's offset taken off its
    price, bid and ask (rounded as shifted_wire_tick rounds, so the engine that adds it back gets the file's shifted
    value); ``tick`` itself when no offset applies. A feed sends it so to an engine that shifts at ingest."""
    stream = tick.get("stream") if isinstance(tick, dict) else getattr(tick, "stream", None)
    by = offset_of(offset, stream) if offset is not None else 0.0
    if not by:
        return tick
    if isinstance(tick, dict):
        return shifted_wire_tick(tick, {stream: -by})
    return replace(tick, **{key: shifted(value, -by) for key in ("price", "bid", "ask")
                            if type(value := getattr(tick, key)) in (int, float)})
