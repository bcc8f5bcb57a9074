"""Streams whose prices cross zero, read without an offset that lifts them (review374 #4).

Validation refuses a price at or below zero (connectors/ticks.py), one row at a time. For a lone bad print that is
right; but a calendar spread at -0.08..+0.15 or CL on 20 April 2020 then loses every stretch below zero out of the
middle of its stream, and the ticks either side become neighbours: each direction, move and volatility label
across the hole scores a jump from the last print above zero straight to the next, which the market never made.
So a run that labels ticks (`backtest`, `evaluate`, `train`) refuses such a stream as a whole, naming the offset
that reads it whole (`--price-offset 'CLZ4-CLF5=1'`), instead of scoring or training on the doctored series.

Which rows an offset should lift is the reject advice's rule (reject_hints.needing_offsets: a price below zero, or 0
where 0 is a price; never a contract settling at 0 nor an outright's lone 0 print), counted by RejectCounter
(`to_lift`); a stream is holed when its prices cross zero (a spread a few steps above it with one at or below it, or
an outright that got there from a price within its own range of zero, walking down or jumping: `crosses_zero`), as
the file holds them or as read (a butterfly always below zero read with an offset too small: review410 #9), and such
a row was refused between two of its ticks read (FileCursor counts it, RejectCounter.cut). A stock at 100 with a bad
print of -1 is no crossing. Many 0 prints of a stream far from zero (a corrupt column) get the advice as before but
are no crossing: the run goes on. A stretch at the start or the end of a stream, or a stream with every price at or
below zero as read, leaves no label across a hole (the ticks before it, or after, are all there is) and is no reason
to refuse (the rejects say it), but the refusal's advice lifts such streams too, so that the options pasted read
every stream of the files whole. A backtest foresees the holes from its files' plans (FilePlan.cut_streams, in file
order) and refuses before its model runs; where it cannot (an offset given too small, a time range, a DBN file), the
count after the read decides, before any label is made.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from connectors.price_offsets import offset_of
from connectors.reject_hints import needing_offsets
from connectors.shifted_prices import SAID_STREAMS, offset_advice, shifted
from connectors.ticks import counted, shown_name


class Lifts(NamedTuple):
    """The streams of a replay whose rows at or below zero an offset should lift (needing_offsets), and of them
    those holed: with ticks above zero kept around the rows refused."""

    lowest: dict[str, float]  # stream -> its lowest price as read (the offset advice lifts it)
    holed: frozenset[str]
    yields: frozenset[str] = frozenset()  # of `lowest`, those priced or named as a yield: lifted by 100


def crosses_zero(stream: str, plan: Any, low: float | None = None) -> bool:
    """Whether a stream's prices cross zero (FilePlan.crossing_streams), as the file holds them or as read (shifted
    by the plan's offset: shifted_prices.crossing_as_read): a spread a few price steps above zero, where 0 is one of
    its prices, or an outright that got there from a price within its own range of zero (a walk down to it, a power
    day's jump to its negative hours or hours at 0.00: shifted_prices.crossing_walk). A stream far from zero whose
    file has many 0 prints (a corrupt column), or a stock at 100 with a bad print of -1, gets the offset advice but
    is no crossing: its bad rows are rejected and the run goes on. A plan that does not scan its prices ahead (a
    DBN file's) has no such set: a ``low`` below zero crosses there."""
    crossing = getattr(plan, "crossing_streams", None)
    if crossing is None:
        return low is not None and low < 0
    return stream in crossing or "" in crossing


def is_yield(stream: str, plan: Any) -> bool:
    """Whether a stream of a file's plan is priced or named as a yield (FilePlan.yield_streams): lifted by 100."""
    yields = getattr(plan, "yield_streams", frozenset())
    return stream in yields or "" in yields


def read_lifts(rejected: Any) -> Lifts:
    """Lifts of a replay read (its RejectCounter): the streams that lost rows an offset should lift, holed where
    their prices cross zero (below it, or a spread at it) and such a row was refused between two of their ticks."""
    lowest = dict(getattr(rejected, "to_lift", {}))
    crossing = getattr(rejected, "crossing", set())
    return Lifts(lowest, frozenset(lowest.keys() & getattr(rejected, "cut", set()) & crossing),
                 frozenset(lowest.keys() & getattr(rejected, "yields", set())))


def planned_lifts(plans: list[Any], selection: Any = None) -> Lifts:
    """read_lifts foreseen from the files' plans before a tick is read (a backtest refuses before its model runs):
    of the streams ``selection`` (a StreamSelection; None: all) reads, those whose lowest price after the plan's
    offset is at or below zero by the advice's rule (needing_offsets), holed where their prices cross zero and the
    file holds such a price between two above zero and no offset is given for the stream (one given too small is
    left to the rejects' count, as is a file whose plan does not say: DBN)."""
    lowest: dict[str, float] = {}
    holed: set[str] = set()
    yields: set[str] = set()
    for plan in plans:
        cut = getattr(plan, "cut_streams", frozenset())
        settling = getattr(plan, "settling_streams", frozenset())
        for stream, low in needing_offsets(dict(getattr(plan, "lowest_prices", {})), plan).items():
            name = stream or plan.columns.stream or plan.columns.default_stream  # "": the file's one stream
            if stream in settling or "" in settling or name is None or (
                    selection is not None and not selection.matches(name)):
                continue
            offset = offset_of(plan.price_offset, name)
            if shifted(low, offset) > 0:
                continue
            lowest[name] = min(low, lowest.get(name, math.inf))
            if is_yield(stream, plan):
                yields.add(name)
            if stream in cut and not offset and crosses_zero(stream, plan):
                holed.add(name)
    return Lifts(lowest, frozenset(holed), frozenset(yields))


def planned_refusal(plans: list[Any], selection: Any, command: str) -> str | None:
    """holes_refusal foreseen from the files' plans (planned_lifts), None when they foresee no hole."""
    lifts = planned_lifts(plans, selection)
    # a number given for every stream and too small: a number again (rejected_rows.py's advice alike)
    one_for_all = any(isinstance(getattr(plan, "price_offset", None), (int, float)) for plan in plans)
    return crossing_refusal(lifts, command, one_for_all=one_for_all) if lifts.holed else None


def holes_refusal(rejected: Any, command: str) -> str | None:
    """Why ``command`` (`backtest`, `evaluate`, `train`) refuses the files: their streams whose prices cross zero
    lost the rows at or below it out of their middle, with the offset that reads each whole; None when none did."""
    lifts = read_lifts(rejected)
    if not lifts.holed:
        return None
    lost = rejected.by_stream.get("nonpositive_price", {})
    return crossing_refusal(lifts, command, {stream: f"{counted(lost.get(stream, 0), 'row')} refused"
                                             for stream in lifts.holed}, rejected.one_offset_for_all)


def crossing_refusal(lifts: Lifts, command: str, said_of: dict[str, str] | None = None,
                     one_for_all: bool = False) -> str:
    """The refusal of the holed streams of ``lifts``, each said with ``said_of`` (its rows refused), and the offsets
    that read every stream of ``lifts`` whole, to paste (one number where one was given for every stream:
    ``one_for_all``)."""
    ranked = sorted(lifts.holed, key=lambda stream: lifts.lowest[stream])
    said = ", ".join(shown_name(stream) + (f" ({said_of[stream]})" if said_of and stream in said_of else "")
                     for stream in ranked[:SAID_STREAMS])
    more = f" and {counted(len(ranked) - SAID_STREAMS, 'stream')} more" if len(ranked) > SAID_STREAMS else ""
    one = len(ranked) == 1
    advice = offset_advice(lifts.lowest, one_for_all, lifts.yields).removeprefix("; ")
    them = "it" if one else "them"
    # shifted by 100, a yield's bps answers are yield bp (the advice says why); by a small number, the offset's
    shifted = "" if lifts.holed <= lifts.yields else (" Shifted, direction_* questions mean what they say; "
                                                      "volatility_* and move_bps_* measure the offset's level, not "
                                                      "the market (docs/replay.md, prices at or below zero)")
    return (f"{'stream' if one else 'streams'} {said}{more} {'has' if one else 'have'} prices on both sides of zero, "
            f"and those at or below it are refused, out of the middle of {them}: {command} labels each tick by the "
            f"ticks after it, so every label across such a hole would score a jump from the last price above zero "
            f"straight to the next, which the market never made. Read {them} whole: {advice}; or leave {them} out "
            f"(--streams naming the others).{shifted}")
