"""A bar's stamp: the time its one trade (its close) replays at. Most vendors stamp a bar with its start (Yahoo's
`Date`, Polygon's `t`, HistData, Dukascopy, MetaTrader, TradingView, stooq), so its close shows a bar early, before
it was known; a live bar builder sends a bar when it closes, and Binance's klines are stamped with `close_time`.
A map's `bar_stamp: close` (`--columns bar_stamp=close`) stamps a start-stamped file's bars at their close: each
bar's start plus its length, `bar_length` (`1m`, `5m`, `1h`, `1d`, ...), else the period the vendor's file name
writes (`EURUSD_M1`, `BATS_AAPL, 1`, `aapl_us_d`, `EURUSD60`), else the file's own spacing (the median step between
a stream's bars; of a file holding one bar per stream, as Polygon's day aggregates do a file a day, the
median step of its streams' bars across the files given with it: connectors/bars_across_files.py), said in a
note. The range a replay reads (`--from`/`--to`, `--hours`' days) is then cut at those
stamps (the shifted `_ts` is what connectors/file_plan.py's `within` and the replay's own check compare). A file
already stamped at its bars' end (`close_time`, `window_end`) is left as it is. `bar_stamp: start` is each vendor's
stamp as written (the default). A `bar_stamp: close` given for a file not read as bars is said in a caution.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from connectors.bar_file_names import period_in_name
from connectors.bar_lengths import length_ns, shown_length
from connectors.cautions import Caution
from connectors.file_plan import FilePlan
from connectors.file_suffixes import file_stem
from connectors.field_names import normal_name
from connectors.layout_notes import BAR_END_COLUMNS
from engine.quoting import quoted


def spacing_ns(plan: FilePlan) -> int | None:
    """The median step between a stream's bars, over the file's streams, in ns (the lower of two middle steps: a
    step the file takes); None with fewer than 2 bars."""
    by = ["stream"] if "stream" in plan.keys else []
    steps = plan.frame.select(*by, "_ts").drop_nulls("_ts")
    step = pl.col("_ts").diff().over(by) if by else pl.col("_ts").diff()
    median = steps.select(step.alias("step")).filter(pl.col("step") > 0) \
        .select(pl.col("step").quantile(0.5, "lower")).collect()
    value = median.item() if median.height else None
    return None if value is None else int(round(value * plan.ts_factor))


def stamped_at_close(plan: FilePlan) -> FilePlan:
    """A start-stamped bar file's plan with each bar stamped at its close (`bar_stamp: close`), with its note; any
    other plan as it is."""
    cmap = plan.columns
    if cmap.bar_stamp != "close":
        return plan
    name = plan.path.name
    if not plan.bars:  # said, never dropped without a word: the ticks keep the stamps the user asked to move
        return replace(plan, notes=(*plan.notes, Caution(
            f"{name}: bar_stamp close moves a bar file's stamps to its bars' close, and this file is not read as "
            f"bars (no open, high, low and close columns beside its price): its ticks keep their "
            f"{quoted(cmap.ts)} times")))
    if normal_name(cmap.ts) in BAR_END_COLUMNS:
        return replace(plan, notes=(*plan.notes, f"{name}: bar_stamp close: its bars are stamped with their end "
                                                 f"({quoted(cmap.ts)}) already, left as they are"))
    if cmap.bar_length is not None:
        length, source = length_ns(cmap.bar_length), f"bar_length {cmap.bar_length}"
    elif (period := period_in_name(file_stem(plan.path))) is not None:
        length, source = period[0], f"the period {quoted(period[1])} its file name writes"
    elif (spacing := spacing_ns(plan)) is not None:
        length, source = spacing, "the file's spacing, the median step between its bars"
    else:  # one bar per stream (Polygon's day aggregates, a file a day): the run's files say it together
        return replace(plan, close_unstamped=True)
    return stamped_by(plan, length, source)


def stamped_by(plan: FilePlan, length: int, source: str) -> FilePlan:
    """The plan with each bar stamped `length` ns after its start, with the note naming `source`, the length's."""
    cmap = plan.columns
    shift = length // plan.ts_factor if length % plan.ts_factor == 0 else length / plan.ts_factor
    span = None if plan.span is None else (plan.span[0] + length, plan.span[1] + length)
    note = (f"{plan.path.name}: bars stamped at their close (bar_stamp close): each bar's start ({quoted(cmap.ts)}) "
            f"plus its length, {shown_length(length)}, from "
            f"{source}{'' if cmap.bar_length else ' (bar_length=... says otherwise)'}; a time range (--from/--to) "
            "cuts at these stamps")
    return replace(plan, frame=plan.frame.with_columns(pl.col("_ts") + shift), span=span, notes=(*plan.notes, note),
                   close_unstamped=False)


def no_length_refusal(plan: FilePlan) -> ValueError:
    """The refusal of `bar_stamp: close` for a file whose streams hold one bar each, in it and in every file given
    with it: the lengths it names are a day's and a minute's, as the file in hand may hold either."""
    return ValueError(f"{plan.path.name}: bar_stamp close needs each bar's length, and its streams hold one bar each, "
                      f"in it and in the files given with it: give it, --bar-length 1d for a bar a day (Polygon's "
                      f"day aggregates, a file a day), 1m for minute bars (the map's bar_stamp=close,bar_length=1d)")
