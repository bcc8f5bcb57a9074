"""One stream's prices written at two levels at once: its trades in pence beside its quotes in pounds (LSE data's
GBp/GBP mix), or one column's cells in two units interleaved (Excel's `£0.7250` beside bare pence `72.50`).

Replayed as one stream, every step between the two levels is scored as a +-99% move. A step that stays is said by
connectors/price_steps.py and a lone print that reverts by connectors/lone_prints.py (whose usual large move is
itself the jump when a third of the ticks jump); levels that alternate all along are said here, per file, as a
caution naming the stream, the two levels and the first row: never corrected (which unit is meant is the user's to
say). The levels are LEVELS_APART-fold apart or more, as two files' of one stream that get a caution are
(connectors/price_levels.py): a market's own trades print within its quote. Its own ticks may jump that far back and
forth (an auction's power hours at 0.01 EUR/MWh beside 75), but not by one ratio: two units' levels stand a price
unit's ratio apart (UNIT_RATIOS, 100 or 1,000) at every jump, give or take each level's own small move, where a
market's jumps land all over (verify55 R2: OMIE's hours were told they might be pounds beside pence).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import polars as pl

from connectors.cautions import Caution
from connectors.file_scans import SAMPLE_ROWS
from connectors.price_levels import LEVELS_APART
from connectors.price_steps import SPLIT_TOLERANCE, UNIT_RATIOS
from connectors.ticks import QUOTE, TRADE, shown_name

MET_TRADES = 5  # trades a stream needs after a quote of its own for their level against the quotes' to be told
# two levels interleaved: a kind's tick-to-tick jumps by a price unit's ratio (within SPLIT_TOLERANCE), at least this
# many (a lone bad print makes two, in and out), this share of its moves, and this share of its jumps of LEVELS_APART-
# fold or more (the ratio stable: a fat finger's pair beside a unit mix's, not a volatile market's few chance ones)
JUMPS_LEAST = 4
JUMPS_SHARE = 0.05
UNIT_JUMPS_SHARE = 0.75


class TwoLevels(NamedTuple):
    stream: str
    kind: str  # TRADE: trades against the quotes they met; QUOTE or TRADE with `interleaved`: that kind's own ticks
    interleaved: bool
    fold: float  # the median ratio of the two levels (a trade's over its quote's mid, or a jump's, above 1 or below)
    count: int  # the trades that far from their quote, or the jumps
    of: int  # the trades after a quote, or the moves
    row: int  # the first row that shows it (planning.py's numbering)
    price: float  # that row's price (a trade's, or a jump's after)
    against: float  # what it is set against (the mid it met, or the price before the jump)


def two_levels(series: pl.DataFrame) -> list[TwoLevels]:
    """The streams of a plan's priced rows (lone_prints.priced_rows: stream, kind, _row, _ts, value) whose trades
    print LEVELS_APART-fold or more from the quotes they met, as a rule, then those whose ticks of one kind jump
    back and forth by a price unit's ratio (JUMPS_LEAST, JUMPS_SHARE and UNIT_JUMPS_SHARE). Measured on the file's
    first SAMPLE_ROWS rows, as a layout's other heuristics are: levels that alternate show there (all of a
    2-million-row file took 2 s)."""
    apart = pl.lit(LEVELS_APART).log()
    trade = pl.col("kind") == TRADE
    series = series.filter(pl.col("_row") < pl.col("_row").min() + SAMPLE_ROWS)
    wide = series.group_by("stream").agg(wide=pl.col("value").max() >= LEVELS_APART * pl.col("value").min())
    if not wide["wide"].any():  # no stream spans LEVELS_APART-fold: no two levels (most files: the sorts are spared)
        return []
    ordered = series.sort("stream", "_ts", "_row", trade, maintain_order=True)  # a row's quote, then its trade
    met = ordered.with_columns(against=pl.when(~trade).then("value").forward_fill().over("stream")).filter(
        trade & pl.col("against").is_not_null()).with_columns(_log=(pl.col("value") / pl.col("against")).log())
    found = _per_stream(met, pl.col("_log").median().abs() >= apart, pl.col("_log").abs() >= apart, False)
    jumps = ordered.with_columns(against=pl.col("value").shift(1).over("stream", "kind")).filter(
        pl.col("against").is_not_null()).with_columns(_log=(pl.col("value") / pl.col("against")).log())
    far = pl.col("_log").abs() >= apart
    unit = pl.any_horizontal([(pl.col("_log").abs() - math.log(ratio)).abs() <= math.log1p(SPLIT_TOLERANCE)
                              for ratio in UNIT_RATIOS if ratio > 1])
    found += _per_stream(jumps, (unit.sum() >= JUMPS_LEAST) & (unit.mean() >= JUMPS_SHARE) & (
        unit.sum() >= UNIT_JUMPS_SHARE * far.sum()), unit, True)
    return found


def _per_stream(rows: pl.DataFrame, flagged: pl.Expr, far: pl.Expr, interleaved: bool) -> list[TwoLevels]:
    """A TwoLevels per (stream, kind) of `rows` (each with its `_log` ratio to what it is set against) that the
    aggregate `flagged` holds for, its first `far` row named; in stream order."""
    if not rows.height:
        return []
    counted = rows.group_by("stream", "kind", maintain_order=True).agg(
        flagged.alias("_flagged"), far.sum().alias("count"), pl.len().alias("of"),
        pl.col("_log").filter(far).abs().median().exp().alias("fold"),
        pl.col("_row", "value", "against").filter(far).first()).filter(
        pl.col("_flagged") & (pl.col("of") >= (1 if interleaved else MET_TRADES)))
    return [TwoLevels(str(r["stream"]), r["kind"], interleaved, r["fold"], r["count"], r["of"], r["_row"], r["value"],
                      r["against"]) for r in counted.sort("stream", "kind").iter_rows(named=True)]


def two_levels_cautions(name: str, found: list[TwoLevels], where: Callable[[int], str],
                        trades_alone: Callable[[], str]) -> list[Caution]:
    """A caution for the trades far from their quotes, another for the levels interleaved (`two_levels`);
    ``trades_alone`` says how the file is read as its trades alone (content_notes.trades_alone)."""
    return [_caution(name, same, where, trades_alone) for interleaved in (False, True)
            if (same := [f for f in found if f.interleaved == interleaved])]


def _caution(name: str, found: list[TwoLevels], where: Callable[[int], str],
             trades_alone: Callable[[], str]) -> Caution:
    """The caution: the first stream's levels, where they show, and what to do; the others named."""
    first = found[0]
    others = f" (and {len(found) - 1} more: {', '.join(shown_name(f.stream) for f in found[1:4])}" \
             f"{', ...' if len(found) > 4 else ''})" if len(found) > 1 else ""
    if first.interleaved:
        what = "trade prices" if first.kind == TRADE else "quotes' mids"
        said = (f"{shown_name(first.stream)}'s {what} jump about {first.fold:.3g}-fold from one tick to the next "
                f"{first.count:,} times in {first.of:,} (the first, {where(first.row)}: {first.against:.10g} to "
                f"{first.price:.10g}), back and forth between two levels a price unit's ratio apart: one column "
                f"written in two units (pounds beside pence: a currency sign on some cells only)?")
        fix = "write the prices in one unit"
    else:
        said = (f"{shown_name(first.stream)}'s trades print about {first.fold:.3g}-fold "
                f"{'above' if first.price > first.against else 'below'} the quotes they met ({first.count:,} of "
                f"{first.of:,} trades; the first, {where(first.row)}: {first.price:.10g} against a mid of "
                f"{first.against:.10g}): its trades and quotes in two price units (pence beside pounds, as LSE data "
                f"writes GBp trades beside GBP quotes; cents beside dollars) or two instruments under one name?")
        fix = f"write its trades and quotes in one unit, or read one kind only: {trades_alone()}"
    return Caution(f"{name}: {said}{others} Replayed as one stream, each step between the two levels is scored as a "
                   f"move: {fix} (docs/replay.md)")
