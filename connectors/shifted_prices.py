"""What a replay's rejects say about prices at zero or below when a price offset was given, or could be.

A price_offset (--price-offset) adds one number to a stream's prices as they are read (`shifted`: to the decimals of
the price and the offset, not binary floating point's sum); a row still at or below zero
after it is rejected by validation (connectors/ticks.py) with the *shifted* value, float noise and all
(`got -0.019999999999999574`). `nonpositive_reading` turns that back into what the user typed and saw: the price as
the file holds it, the offset and the shifted value, rounded; `offset_advice` names the offsets that would do, as
options to paste, from the lowest price of each stream the rejects met (the lowest in the files: every price below
-offset is rejected), whether an offset was given too small or none was given yet.
"""

from __future__ import annotations

import functools
import math
import re
import shlex
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from connectors.column_names import PREDICTION_MARKET_NAMES, PREDICTION_SIDES
from connectors.option_names import is_option_name
from connectors.field_names import normal_name
from connectors.header_zones import header_unit
from connectors.price_offsets import PriceOffset, offset_of, offset_pattern
from connectors.ticks import InvalidTick
from connectors.written_decimals import decimals
from connectors.yield_offsets import YIELD_OFFSET, yield_valued, yield_why

if TYPE_CHECKING:  # polars is imported where a file's prices are scanned: the feed client (`shifted`) and every
    import polars as pl  # control client that imports it (flashtick ask) never pays its import

# validation's own words for a price, bid or ask at or below zero (connectors/ticks.py `_number`)
NONPOSITIVE = re.compile(r"^(price|bid|ask) must be >=? 0, got (\S+)$")  # (>= for a bid where 0 is a price)
# a 0 side is read as no side (connectors/ticks.py `one_sided_quote`) unless an offset says 0 is a price: said with
# such a reject when the files also hold prices below zero (a spread crossing zero), as their nonpositive_price is
ZERO_SIDE = re.compile(r"missing_field: (bid|ask) is 0 beside|missing_field: bid and ask are 0")
ZERO_MAY_BE_A_PRICE = ("; the files hold prices below zero too: if 0 is a price of this instrument (a spread crossing "
                       "zero), --price-offset X shifts its prices so that 0 is one (docs/replay.md)")
LISTED_OFFSETS = 10  # streams whose own --price-offset the advice lists, each; past them, one number for all
SAID_STREAMS = 3  # streams a reject line names (offset advice, per-stream counts: rejected_rows.py), the rest counted
# A stream whose prices (its trades', its quotes' bids and asks) lie within this many of its smallest price step of
# zero trades around zero (a calendar spread at 1/64..6/64, quoted 0.00/0.01): a 0 print one or two steps below its
# others, or a 0 bid beside them, is a price, not bad data nor a missing side, however few there are
NEAR_ZERO_STEPS = 10


def settle_top(cmap: Any, schema_names: Iterable[str]) -> int:
    """The top of the range a file's contracts are priced in as probabilities: 100 for a file recognised as a
    prediction market's (a Kalshi or Polymarket column among ``schema_names``, or the map's side_map of yes / no),
    whose prices may be cents (Kalshi's 1-99); else 1. A [0, 100] range also holds spreads quoted in points, so
    cents are read as a contract's only where the file or the map says it is one."""
    sides = {str(k).strip().lower() for k in (getattr(cmap, "side_map", None) or {})}
    named = PREDICTION_MARKET_NAMES & {normal_name(n) for n in schema_names}
    return 100 if named or sides & PREDICTION_SIDES else 1


def _as_read(field: str, scale: float | None) -> pl.Expr:
    """A plan frame's price, bid or ask as the replay reads it: a fixed-point file's units (`price_scale`:
    Databento's 1e9, LOBSTER's 10000) divided out, as connectors/file_plan.py does. Measured raw, the offset advice
    named Databento's -63125000000 for a spread at -63.125, and pasted, it made every answer flat (review390 #8)."""
    import polars as pl

    return pl.col(field).cast(pl.Float64) / (scale or 1)


def settling_streams(frame: pl.LazyFrame, keys: tuple[str, ...] | list[str], top: int = 1,
                     scale: float | None = None) -> frozenset[str]:
    """The streams of a file's plan whose trade prices all lie within [0, ``top``] (settle_top: 1, or a prediction
    market's 100) and whose prints at 0 all come after its last one above 0: a contract priced as a probability (a
    Polymarket token, a prediction market's share, a Kalshi contract in cents) settling at 0 when it resolves NO. Its
    0 is no price that trades, and an offset would move every price of a 0.01-0.99 contract (and every bps answer
    with it); a spread's zeros come between its other prices. "" for a file without a stream column."""
    import polars as pl

    if "price" not in keys:
        return frozenset()
    stream = pl.col("stream") if "stream" in keys else pl.lit("").alias("stream")
    traded = frame.filter(pl.col("size") > 0) if "size" in keys else frame
    price, at = pl.col("_price"), pl.col("_at")
    ends = traded.select(stream, _as_read("price", scale).alias("_price")).filter(
        price.is_not_null()).with_row_index("_at").group_by("stream").agg(
        low=price.min(), high=price.max(), last_above=at.filter(price > 0).max(),
        first_zero=at.filter(price == 0).min()).collect()
    return frozenset(row["stream"] for row in ends.iter_rows(named=True)
                     if row["low"] == 0 and row["high"] <= top and row["last_above"] is not None
                     and row["first_zero"] > row["last_above"])


class ZeroPrices(NamedTuple):
    """A file's streams with prices at zero or below (`zero_prices`): those priced near zero, and each one's lowest."""

    near_zero: frozenset[str]  # streams priced a few steps above zero, at 0 too ("": the file's one stream)
    lowest: dict[str, float]  # stream -> its lowest price, bid or ask as the file holds it (before any offset)
    cut: frozenset[str]  # streams with a price at or below zero between two above it, in file order: a stretch
    # refused out of their middle unless an offset lifts it (zero_crossings.py)
    steps: dict[str, float]  # stream -> the smallest step between its prices above zero, or below it when none is
    # above (`offset_step_notes`)
    # streams whose prices cross zero as the file holds them or as read, shifted by an offset too small
    crossing: frozenset[str] = frozenset()  # (`crossing_as_read`; FilePlan.crossing_streams)
    yields: frozenset[str] = frozenset()  # of those, the ones priced like a yield in percent (yield_offsets.py)


def zero_prices(frame: pl.LazyFrame, keys: tuple[str, ...] | list[str], cmap: Any) -> ZeroPrices:
    """The streams of a file's plan (`frame`, its wire `keys`, its map `cmap`) with a price at zero or below (a
    trade's, or a quote's bid or ask): those whose median price above zero is within NEAR_ZERO_STEPS of the smallest
    step between those prices ("" for a file without a stream column), and each one's lowest price, which the offset
    advice lifts (every row's, those refused for another reason, an unread time, included: one round of advice).
    Trades and quotes by one rule, so that a spread quoted at 0.00 is pointed at --price-offset as one that prints
    there is. An option is not near zero (`one_sided`: its 0 bids are no price). Prices as read (the map's
    price_scale divided out). Read for reject_hints.py's `near_zero_hint` and rejected_rows.py's advice, only when
    the file has such prices (one more scan; a second, of the shifted streams alone, for `crossing_as_read`)."""
    import polars as pl

    stream = pl.col("stream") if "stream" in keys else pl.lit("").alias("stream")
    frame = frame.with_row_index("_at")  # file order, for the stretches at or below zero between others
    traded = frame.filter(pl.col("size") > 0) if "size" in keys else frame  # a trade of size 0 prints no price
    parts = [(traded if field == "price" else frame).select(
        stream, _as_read(field, cmap.price_scale).alias("_price"), pl.lit(field == "bid").alias("_bid"), "_at")
        for field in ("price", "bid", "ask") if field in keys]
    if not parts:
        return ZeroPrices(frozenset(), {}, frozenset(), {})
    prices = pl.concat(parts)
    rows = [row for row in _price_levels(prices) if row["at_or_below_zero"]]
    near = frozenset(row["stream"] for row in rows if near_zero(row))
    crossing = frozenset(str(row["stream"]) for row in rows if row["stream"] in near or crossing_walk(row)) | \
        crossing_as_read(prices, rows, cmap)
    return ZeroPrices(near, {str(row["stream"]): float(row["lowest"]) for row in rows},
                      frozenset(str(row["stream"]) for row in rows if row["between"]),
                      {str(row["stream"]): float(step) for row in rows if (step := row["step"] or row["step_below"])},
                      crossing,
                      frozenset(str(row["stream"]) for row in rows if row["stream"] in crossing and yield_valued(
                          row, header_unit(cmap.price or cmap.bid or ""))))


def _price_levels(prices: pl.LazyFrame) -> list[dict[str, Any]]:
    """Per stream of ``prices`` (stream, _price, _bid, _at), what zero_prices judges it by: how many of its prices
    are at or below zero and how many of those lie between two above it (file order), the nearest to zero of the
    prices above it beside those, its median price above zero and median move, its lowest and highest, its smallest
    step, and whether only its bids are 0."""
    import polars as pl

    price, bid, at = pl.col("_price"), pl.col("_bid"), pl.col("_at")
    above = pl.when(price > 0).then(price)
    # each price at or below zero between two above it: the nearer of its stream's prices above zero either side
    # (file order), where the stream left zero's side from or came back to
    neighbour = pl.min_horizontal(above.forward_fill().over("stream"), above.backward_fill().over("stream"))
    read = prices.filter(price.is_not_null() & price.is_not_nan()).sort("_at", maintain_order=True)
    move = price.diff().abs().over("stream", "_bid")  # from one price (a bid) of the stream to its next
    between = (price <= 0) & (at > at.filter(price > 0).min()) & (at < at.filter(price > 0).max())
    return list(read.with_columns(_neighbour=neighbour, _move=move).group_by("stream").agg(
        at_or_below_zero=(price <= 0).sum(), level=price.filter(price > 0).median(), lowest=price.min(),
        highest=price.max(),
        lowest_above=price.filter(price > 0).min(),
        between=between.sum(), nearest_neighbour=pl.col("_neighbour").filter(between).min(),
        median_move=pl.col("_move").filter(pl.col("_move") > 0).median(),
        # the smallest step between its prices above zero (unique: each above 0); 0's distance to them is no step
        step=price.filter(price > 0).round(9).unique().sort().diff().min(),
        # a stream never above zero (a calendar spread at -63): its step between its prices below zero
        # (review390 #9: it had no step, so the offset that lifts it got no word of its bps)
        step_below=price.filter(price < 0).round(9).unique().sort().diff().min(),
        # never bid above 0, and 0 only as a bid: a market nobody bids (an option's wing), not a spread at zero
        never_bid=(bid & (price > 0)).sum() == 0, zero_bids_only=((price < 0) | ~bid & (price == 0)).sum() == 0
    ).collect().iter_rows(named=True))


def near_zero(row: dict[str, Any]) -> bool:
    """Whether a stream (its `_price_levels` row) is priced a few steps above zero: its median price above zero
    within NEAR_ZERO_STEPS of its smallest step, and no option's (`one_sided`)."""
    return row["level"] is not None and row["step"] is not None and \
        row["level"] <= NEAR_ZERO_STEPS * row["step"] and not one_sided(row)


def crossing_as_read(prices: pl.LazyFrame, rows: list[dict[str, Any]], cmap: Any) -> frozenset[str]:
    """Of the streams of ``rows`` (`_price_levels`' of ``prices`` as the file holds them) that the map's
    price_offset shifts, those whose prices cross zero once shifted, by the rule the file's own prices are judged
    by (near zero, or reached from within its range: `crossing_walk`): a butterfly always below zero
    (-0.13..-0.055) read with an offset too small (0.1) has shifted prices on both sides of zero, and loses the rows
    still at or below it out of its middle, as a spread crossing zero read without one does (review410 #9)."""
    import polars as pl

    offsets = {row["stream"]: offset for row in rows
               if (offset := offset_of(cmap.price_offset, row["stream"] or cmap.stream or cmap.default_stream))}
    if not offsets:
        return frozenset()
    shift = pl.col("stream").replace_strict(offsets, return_dtype=pl.Float64)
    read = prices.filter(pl.col("stream").is_in(list(offsets))).with_columns(_price=pl.col("_price") + shift)
    return frozenset(str(row["stream"]) for row in _price_levels(read)
                     if row["at_or_below_zero"] and (near_zero(row) or crossing_walk(row)))


# A stream whose lowest price above zero is under this share of its median one went most of the way down to zero
# (WTI on 20 April 2020: a median near 15, prints of 0.01 before -37.63): a price below zero there continues it; and
# a 0 print next to a price this near zero is a market trading down to 0 (a power market's hours at 0.00)
TOWARD_ZERO_SHARE = 0.1


def crossing_walk(row: dict[str, Any]) -> bool:
    """Whether a stream's prices at or below zero (its aggregated row) are its market's rather than bad prints: a
    spread near zero is `near_zero`; an outright crosses when it also traded far below its usual level above zero,
    or when zero lies within its own range of prices from where it left for zero's side (`reaches_zero`: a power
    market jumping from 40 to a block of negative hours, WTI's daily close from 18.27 to -37.63; review441 #1). A
    stock at 100 with a row of -1 or a vendor's -999 "no price" sentinel, or an outright's lone 0 print, is a bad
    row (rejected and counted, the run goes on), not a stream crossing zero."""
    if row["level"] is None or row["lowest_above"] is None or one_sided(row):
        return False
    walked = row["lowest"] < 0 and row["lowest_above"] <= TOWARD_ZERO_SHARE * row["level"]
    return walked or reaches_zero(row)


def reaches_zero(row: dict[str, Any]) -> bool:
    """Whether a stream's price at or below zero between two above it was reached from a price above zero that is
    no farther from zero than the stream's own range above zero (its highest less its lowest): the market moves
    that far, so it went there. Below zero, that is all; at 0 (no price below it, where 0 is also a vendor's "no
    price"), the price beside it is also within TOWARD_ZERO_SHARE of the stream's median. A stock at 95..105 with
    a -1 or a 0 between two prints of 100 is 100 away from zero, ten times its range: a bad print."""
    beside, moves = row["nearest_neighbour"], row["highest"] - row["lowest_above"]
    # a drop past zero by more than the stream's range is no market's move: a vendor's -999 "no price" sentinel in
    # a series that went from 10 to 100
    if beside is None or beside > moves or row["lowest"] < -moves:
        return False
    return row["lowest"] < 0 or beside <= TOWARD_ZERO_SHARE * row["level"]


def one_sided(row: dict[str, Any]) -> bool:
    """Whether a stream of `near_zero_streams` (its aggregated row) is an option's, whose 0 bid is a one-sided
    quote (zero_bid's advice), not a price to lift: named as an option (`is_option_name`: an option is never
    priced below zero, so its 0 bid is nobody bidding a worthless wing), or a market nobody bids
    whose only price at or below zero is its 0 bid."""
    return is_option_name(str(row["stream"])) or row["never_bid"] and row["zero_bids_only"]


def shifted(price: float, offset: float) -> float:
    """`price + offset` rounded to the decimals the two are written with, the more of them: -37.63 + 46 is 8.37,
    not binary floating point's 8.369999999999997, so a shifted price logged, exported or answered has the file's
    decimals to reconcile it with the vendor's. No offset: the price as it is."""
    if not offset:
        return price
    return round(price + offset, max(decimals(price), _offset_decimals(offset), 0))


_offset_decimals = functools.lru_cache(maxsize=256)(decimals)  # a file's few offsets, met on every row


class Shifted(NamedTuple):
    field: str  # price, bid or ask
    stream: str
    read: float  # as the file holds it (after price_scale)
    offset: float
    shifted: float


def shown(value: float) -> str:
    """A price without the float noise of adding an offset: -37.63 + 30 is -7.63, not -7.630000000000001."""
    return f"{round(value, 9) + 0.0:.9f}".rstrip("0").rstrip(".")


def nonpositive_reading(err: InvalidTick, price_offset: PriceOffset | None) -> Shifted | None:
    """A nonpositive_price reject's price as read (a file's, or a wire tick's as sent), with the offset of
    ``price_offset`` that shifted it (0: none for its stream), else None (another reject, or one naming no stream)."""
    found = NONPOSITIVE.match(err.message) if err.reason == "nonpositive_price" else None
    if found is None or not isinstance(err.stream, str):
        return None
    offset = offset_of(price_offset, err.stream) or 0.0
    shifted = float(found[2])
    return Shifted(found[1], err.stream, shifted - offset, offset, shifted)


def shifted_message(reject: Shifted) -> str:
    return f"nonpositive_price: {shifted_text(reject)}"


def shifted_text(reject: Shifted, offset_named: str = "the price offset") -> str:
    """What a price shifted and still at or below zero was: as read, the offset (``offset_named``) and the sum."""
    return (f"{reject.field} {shown(reject.read)} shifted by {offset_named} {shown(reject.offset)} is "
            f"{shown(reject.shifted)}, still not above zero")


def lifting_offset(lowest: float) -> float:
    """A whole offset that lifts a price at or below zero above it: -37.63 -> 38, 0 or -0.01 -> 1."""
    return math.floor(-lowest) + 1


def offset_option(stream: str | None, offset: float) -> str:
    """--price-offset as a shell takes it: `--price-offset 'CLK0=38'` for one stream (a name the option's syntax
    reads otherwise as its pattern: offset_pattern), `--price-offset 38` for all."""
    if stream is None:
        return f"--price-offset {shown(offset)}"
    value = f"{offset_pattern(stream)}={shown(offset)}"
    quoted = f"'{value}'" if "'" not in value else shlex.quote(value)  # quoted always, as docs/replay.md writes it
    return f"--price-offset {quoted}"


def offset_advice(lowest: dict[str, float], one_for_all: bool = False, yields: Iterable[str] = ()) -> str:
    """The offsets that lift every price the rejects met above zero, to paste: each stream's own (only the
    streams that need one: a plain number would flatten the others' moves), or, where one offset was given for
    every stream (``one_for_all``), one number again. ``lowest``: stream -> its lowest price as read. A stream of
    ``yields`` (priced like a yield in percent: yield_offsets.py) is lifted by 100, and the advice says why."""
    said_yields = sorted(set(yields) & lowest.keys())
    why = f"; {yield_why(said_yields)}" if said_yields else ""

    def lifting(stream: str, low: float) -> float:
        return max(YIELD_OFFSET, lifting_offset(low)) if stream in said_yields else lifting_offset(low)
    said = sorted(lowest.items(), key=lambda kv: kv[1])[:SAID_STREAMS]
    more = f" and {len(lowest) - SAID_STREAMS} more" if len(lowest) > SAID_STREAMS else ""
    prices = ", ".join(f"{stream} {shown(low)}" for stream, low in said) + more
    if one_for_all:
        return (f"; the lowest price in the files: {prices}: to lift them all above zero, "
                f"{offset_option(None, lifting(said[0][0], said[0][1]))} (docs/replay.md){why}")
    ranked = sorted(lowest.items(), key=lambda kv: kv[1])
    if len(ranked) <= LISTED_OFFSETS:  # every one, to paste
        options = " ".join(offset_option(stream, lifting(stream, low)) for stream, low in ranked)
        return f"; the lowest price in the files: {prices}: to lift each stream above zero, {options} " \
               f"(docs/replay.md){why}"
    # a line of 28 options is no advice: one number lifts them all (an EPEX day's delivery periods, each a stream)
    first = offset_option(said[0][0], lifting(said[0][0], said[0][1]))
    return (f"; the lowest price in the files: {prices}: to lift all {len(ranked)} streams above zero, "
            f"{offset_option(None, lifting(said[0][0], said[0][1]))} (one number for every stream of the files, each "
            f"one's moves in bps then relative to its shifted level; or one per stream, the next whole number above "
            f"its lowest price, {first} and so on) (docs/replay.md){why}")


# One step of a stream's price, in bps of its lowest price once shifted, at or past which a shifted instrument's
# bps questions say more of the offset than of the market: volatility_50's top bucket starts at 10 bps, so one step
# alone fills it (CLK0 lifted by 38 to 0.38: one 0.01 step is 263 bps, review374 #9)
STEP_BPS_SAID = 10


def offset_step_notes(name: str, cmap: Any, zero: ZeroPrices) -> list[Any]:
    """A caution per stream of a file (``name``) whose --price-offset (its map ``cmap``'s) lifts its lowest price
    so little above zero that one step of its price is STEP_BPS_SAID bps or more there: its volatility_* and
    move_bps_* answers then count the offset's level, not the market's moves (docs/replay.md)."""
    from connectors.cautions import Caution

    said = []
    for stream, low in zero.lowest.items():
        named = stream or cmap.stream or cmap.default_stream  # "": the file's one stream, named by the map
        lifted = shifted(low, offset_of(cmap.price_offset, named))
        step = zero.steps.get(stream)
        if step is None or lifted <= 0 or low == lifted or step / lifted * 1e4 < STEP_BPS_SAID:
            continue
        whose = f"{named}'s" if named else "its"
        said.append(Caution(
            f"{name}: --price-offset lifts {whose} lowest price {shown(low)} to {shown(lifted)}, where one step of "
            f"its price ({shown(step)}) is {step / lifted * 1e4:.0f} bps: volatility_* and move_bps_* count bps of "
            f"the shifted level, so there they measure the offset, not the market; ask direction_5/direction_20 of "
            f"it (a larger offset only hides this: docs/replay.md)"))
    return said
