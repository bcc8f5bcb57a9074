"""Price offsets: a column map's `price_offset` (`--price-offset`), one number added to every price, bid and ask
read, or one per stream (by name or glob). Checked as given (`checked_price_offset`), looked up per stream
(`offset_of`), matched against the streams a replay holds (`offset_names`) and written back as the command line
writes it (`shown_offset`). Their own module because the map (connectors/column_map.py), the file and DBN plans,
the reading record and the feed all read an offset, and none of them needs the rest of a map to do it.
"""

from __future__ import annotations

import fnmatch
import math
import re
from typing import Any, Mapping

from connectors.map_vocabulary import as_written
from connectors.stream_names import dashed_name
from engine.quoting import quoted
from engine.stream_patterns import GLOB_CHARS, glob_escaped, unclosed_bracket

PriceOffset = float | dict[str, float]  # one offset for every stream, or stream name -> its own (others: none)
# The '|' that joins the inline form's NAME=X items: one outside a glob's set (`BZN[|]FR=1` names the stream BZN|FR)
JOINING_BAR = re.compile(r"\|(?![^\[]*\])")


def checked_price_offset(value: Any) -> PriceOffset | None:
    """A map's price_offset: a number for every stream (None: not given), or a mapping of stream name or glob ->
    offset for those streams alone (`{ZNH6-ZNM6: 10}`, `{'SPY   250620*': 0.01}`; inline `ZNH6-ZNM6=10|6EH6=1`, a
    name's own `|` in a set, `A[|]B=1`: offset_pattern);
    a ValueError for anything else, an offset of 0 included (it shifts nothing: said, never taken silently). A
    name's '/' is the '-' its stream replays with (EUR/USD is stream EUR-USD)."""
    if value is None:
        return None
    if isinstance(value, str) and "=" in value:  # the inline form (--price-offset NAME=X repeated joins by '|')
        pairs = [part.rpartition("=") for part in JOINING_BAR.split(value)]
        if not all(eq for _, eq, _ in pairs):
            raise ValueError(f"price_offset per stream is NAME=X (several joined by '|'), got {quoted(value)}")
        items = [(name.strip(), number.strip()) for name, _, number in pairs]
    elif isinstance(value, Mapping):
        items = list(value.items())
    else:
        return _offset_number(value, "")
    if not items or not all(isinstance(name, str) and name.strip() for name, _ in items):
        raise ValueError(f"price_offset per stream maps stream names to numbers, e.g. {{ZNH6-ZNM6: 10}}, "
                         f"got {quoted(value)}")
    offsets: dict[str, float] = {}
    for name, number in items:
        stream, offset = dashed_name(name.strip()), _offset_number(number, f" (stream {name})")
        if why := unclosed_bracket(stream):
            raise ValueError(f"price_offset: {quoted(stream)} is not a valid glob: {why}")
        if offsets.get(stream, offset) != offset:  # (ZNH6/ZNM6 is stream ZNH6-ZNM6): which one was meant?
            raise ValueError(f"price_offset gives stream {quoted(stream)} two offsets, {offsets[stream]:g} and "
                             f"{offset:g}: give it one")
        offsets[stream] = offset
    return offsets


def _offset_number(value: Any, whose: str) -> float:
    try:
        offset = float(value)
    except (TypeError, ValueError):
        offset = math.nan
    if not math.isfinite(offset) or isinstance(value, bool):
        raise ValueError(f"price_offset{whose} must be a number (added to every price, bid and ask read), or "
                         f"stream names mapped to numbers ({{ZNH6-ZNM6: 10}}; inline ZNH6-ZNM6=10), got "
                         f"{as_written(value)}")
    if offset == 0:
        raise ValueError(f"price_offset{whose} is 0, which shifts nothing: prices stay as read, and a 0 bid stays "
                         f"no bid (a one-sided quote, rejected). To read an option's 0 bid as a price give zero_bid: "
                         f"price (--zero-bid price); to lift prices at or below zero, an offset above the lowest "
                         f"one's distance from zero")
    return offset


def offset_of(offset: PriceOffset | None, stream: Any) -> float:
    """The offset a stream's prices take: the one for every stream, its own (by name, else by the first glob that
    matches it), or 0."""
    if isinstance(offset, dict):
        found = offset.get(stream)
        if found is None and isinstance(stream, str):
            found = next((number for name, number in offset.items()
                          if GLOB_CHARS & set(name) and fnmatch.fnmatchcase(stream, name)), None)
        return found or 0.0
    return offset or 0.0


def offset_names(offset: dict[str, float], held: set[str]) -> list[str]:
    """The names and globs of a per-stream offset that match none of the ``held`` streams."""
    return [name for name in offset if name not in held and not (
        GLOB_CHARS & set(name) and any(fnmatch.fnmatchcase(stream, name) for stream in held))]


def offset_pattern(stream: str) -> str:
    """A stream's name as --price-offset's NAME matches it alone: its glob characters and its `|`, which joins
    several offsets, each in a set of its own (`BZN|FR` -> `BZN[|]FR`); most names as they are."""
    return glob_escaped(stream, reserved="|")


def shown_offset(offset: PriceOffset) -> str:
    """A price_offset as the command line writes it: `10`, or `ZNH6-ZNM6=10|6EH6=1` (a map's name holding a `|`
    with it in a set: `BZN[|]FR=1`)."""
    if isinstance(offset, dict):
        return "|".join(f"{JOINING_BAR.sub('[|]', name)}={number:g}" for name, number in offset.items())
    return f"{offset:g}"
