"""Lone prints: a price far from both its neighbours, which agree with each other (a fat finger or a bad print:
ten times the stream's level for one trade, then back). Replay takes prices as the files give them, so such a print
moves every label and answer whose horizon spans it. It is said, as a caution, and never dropped: a spike that
reverts at once can be the market's own, and the user decides.

Measured per stream in replay order, trades' prices and quotes' mids apart, in log price. A print is lone when the
move into it and the move out of it go opposite ways, each more than LONE_TIMES the stream's usual large move
around it, and its two neighbours lie within NEIGHBOURS_AGREE of that distance of each other (a jump that stays has
a small move out; one that retraces halfway has neighbours that disagree). The usual large move is the rolling
SCALE_QUANTILE of the nonzero moves, not their median: a crypto pair's median move is one tick (0.01 of BTCUSDT's
61,800), and sweeps print 750 ticks away and back as the market's own (125 times the median move, in the shared
BTCUSDT trades; at most 7.4 times the usual large move there)."""

from __future__ import annotations

from typing import Callable, NamedTuple

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.epoch_counts import scaled_ts
from connectors.keep_filter import kept_rows, planned_keep
from connectors.ticks import QUOTE, TRADE, shown_name, utc_text

LONE_TIMES = 50  # the move into and out of a lone print: each more than this many usual large moves
SCALE_QUANTILE = 0.9  # the usual large move: this quantile of the nonzero moves ...
SCALE_WINDOW = 201  # ... over about this many ticks around the print
SCALE_MOVES = 20  # nonzero moves a scale needs, in the window (else the stream's own over the file; else none)
# a print is looked at closely only when its moves are this many of the stream's usual large moves over the file:
# a quiet hour's own scale may be a tenth of a busy day's
WHOLE_TIMES = LONE_TIMES / 10
NEIGHBOURS_AGREE = 0.25  # the neighbours' distance from each other, at most this share of their distance to it
LISTED_ROWS = 5  # rows a caution names


class LonePrint(NamedTuple):
    stream: str
    kind: str  # trade (its price) or quote (its mid)
    row: int  # file row, as planning.py numbers them
    ts: int  # the frame's time, in its own unit
    price: float
    before: float  # the prices of the ticks of its kind and stream before and after it
    after: float
    times: float  # the smaller of its two moves, in usual large moves


class LonePrints(NamedTuple):
    per_stream: dict[str, int]  # stream -> its lone prints
    first: list[LonePrint]  # the first LISTED_ROWS, in replay order


def priced_rows(frame: pl.LazyFrame, keys: tuple[str, ...], cmap: ColumnMap) -> pl.DataFrame | None:
    """A plan's priced rows as one tall frame (stream, kind, _row, _ts, value), in the frame's (replay) order:
    trades' prices and quotes' mids, each above zero (a crossed or one-sided quote is rejected, not replayed); the
    trades first, then the quotes. None where the plan reads no price."""
    stream = pl.col("stream") if "stream" in keys else pl.lit(cmap.stream or cmap.default_stream or "")
    kept = kept_rows(cmap.keep, frame.collect_schema(), planned_keep)  # (file_plan.py's keep_check, as a filter)
    rows = frame.filter(kept & pl.col("_ts").is_not_null())
    parts = []
    if "price" in keys:
        price = pl.col("price").cast(pl.Float64)
        parts.append(rows.filter(price.is_finite() & (price > 0)).select(
            stream.alias("stream"), pl.lit(TRADE).alias("kind"), "_row", "_ts", price.alias("value")))
    if "bid" in keys and "ask" in keys:
        bid, ask = pl.col("bid").cast(pl.Float64), pl.col("ask").cast(pl.Float64)
        parts.append(rows.filter(bid.is_finite() & ask.is_finite() & (bid > 0) & (bid <= ask)).select(
            stream.alias("stream"), pl.lit(QUOTE).alias("kind"), "_row", "_ts", ((bid + ask) / 2).alias("value")))
    return pl.concat(parts).collect() if parts else None


def _moves(series: pl.DataFrame) -> pl.DataFrame:
    """`series` one stream's kind after another (`_series`: their key), each in replay order, numbered (`_pos`),
    with each tick's log moves in (`_in`) and out (`_out`), its neighbours' prices, and its nonzero move's size."""
    log, key = pl.col("value").log(), pl.col("_series")
    first, last = key.ne_missing(key.shift(1)), key.ne_missing(key.shift(-1))  # a series' first and last tick
    return series.lazy().with_columns(_series=pl.struct("stream", "kind").hash()).sort(
        "_series", maintain_order=True).with_columns(
        _pos=pl.int_range(pl.len()), _in=pl.when(~first).then(log.diff()),
        _out=pl.when(~last).then(log.shift(-1) - log), before=pl.when(~first).then(pl.col("value").shift(1)),
        after=pl.when(~last).then(pl.col("value").shift(-1))).with_columns(
        _move=pl.when(pl.col("_in") != 0).then(pl.col("_in").abs())).collect()


def _usual_large_move() -> pl.Expr:
    """The SCALE_QUANTILE of the nonzero moves (`_move`) aggregated, where there are SCALE_MOVES of them."""
    return pl.when(pl.col("_move").count() >= SCALE_MOVES).then(pl.col("_move").quantile(SCALE_QUANTILE))


def _flagged(series: pl.DataFrame) -> pl.DataFrame:
    """The lone prints of `series` (stream, kind, _row, _ts, value), with their neighbours and `times`. The rolling
    scale is taken only around the few prints already far beyond the stream's own scale over the file: a rolling
    quantile over every row took twice as long as the rest of a file's plan (2 million trades: 2.8 s, 1.2 s)."""
    moves = _moves(series).lazy()
    whole = moves.group_by("_series").agg(_whole=_usual_large_move())
    distance = pl.min_horizontal(pl.col("_in").abs(), pl.col("_out").abs())
    neighbours_gap = (pl.col("_in") + pl.col("_out")).abs()
    candidates = moves.filter((pl.col("_in") * pl.col("_out") < 0) & (neighbours_gap <= NEIGHBOURS_AGREE * distance)
                              ).join(whole, on="_series").filter(distance > WHOLE_TIMES * pl.col("_whole"))
    # each candidate's window: the moves into the SCALE_WINDOW // 2 ticks before it to as many after the tick after it
    half = SCALE_WINDOW // 2
    window = candidates.select("_series", "_pos", _at=pl.int_ranges(pl.col("_pos") - half, pl.col("_pos") + half + 2))
    local = window.explode("_at").join(moves.select("_series", "_move", _at="_pos"), on=["_series", "_at"]).group_by(
        "_series", "_pos").agg(_local=_usual_large_move())
    scale = pl.coalesce("_local", "_whole")
    return candidates.join(local, on=["_series", "_pos"], how="left").filter(distance > LONE_TIMES * scale).select(
        "stream", "kind", "_row", "_ts", "value", "before", "after", (distance / scale).alias("times")).collect()


def lone_prints(series: pl.DataFrame) -> LonePrints | None:
    """The lone prints of a tabular file's plan (its `priced_rows`), None where there are none."""
    flagged = _flagged(series)
    if not flagged.height:
        return None
    per_stream = dict(sorted(flagged.group_by("stream").len().iter_rows(), key=lambda kv: (-kv[1], str(kv[0]))))
    first = flagged.sort("_ts", "_row").head(LISTED_ROWS)
    return LonePrints(per_stream, [LonePrint(r["stream"], r["kind"], r["_row"], r["_ts"], r["value"], r["before"],
                                             r["after"], r["times"]) for r in first.iter_rows(named=True)])


def _shown(price: float) -> str:
    return f"{price:.10g}"


def lone_caution(name: str, found: LonePrints, where: Callable[[int], str], ts_factor: int) -> Caution:
    """The caution: how many per stream, the first with its time, price and neighbours, the rows to leave out."""
    total = sum(found.per_stream.values())
    streams = ", ".join(f"{shown_name(str(s))} {n}" for s, n in list(found.per_stream.items())[:3])
    more = f" and {len(found.per_stream) - 3} more streams" if len(found.per_stream) > 3 else ""
    first = found.first[0]
    what = "trade price" if first.kind == TRADE else "quote's mid"
    rows = ", ".join(where(p.row) for p in found.first) + (", ..." if total > len(found.first) else "")
    return Caution(
        f"{name}: {total} lone print(s) far from both neighbours, which agree with each other (a fat finger or bad "
        f"print?): {streams}{more}. The first, {where(first.row)} ({shown_name(str(first.stream))}, "
        f"{utc_text(scaled_ts(first.ts, ts_factor))}), a {what} of {_shown(first.price)} between "
        f"{_shown(first.before)} and {_shown(first.after)}: {first.times:,.0f} times the stream's usual large move "
        f"around it. They replay as read, not dropped (a spike that reverts at once may be the market's own), each "
        f"moving the labels and answers whose horizon spans it; if they are bad prints, write the file without those "
        f"rows ({rows}), or leave them out with a keep filter on a column that marks them (docs/replay.md)")
