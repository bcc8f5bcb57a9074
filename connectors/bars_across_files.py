"""Bars repeated across a run's files: two bar files of one stream over the same minutes (a day fetched twice, a
re-download beside the original, a vendor's revised file) would replay every bar of the overlap twice, counting the
interval twice in every horizon, label and score (review315 #10). The rule is a file's own (connectors/
repeated_bars.py) taken across files: of the bars of one stream and bar time, the one of the file given last is
replayed, the earlier files' are left out as `filtered_out` (counted, each named among the rejects), and a caution
says how many were identical and how many revised, and names the first with its file and line. Ticks are not bars:
two trades of one time in two files are left to the across-files notes (file_overlaps.py), as they were.
Files of one bar per stream (Polygon's day aggregates, a file a day) are stamped at their bars' close here too
(`stamped_across_files`): only the run's files together hold a stream's spacing."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import polars as pl

from connectors.bar_stamps import no_length_refusal, stamped_by
from connectors.cautions import Caution
from connectors.file_plan import FilePlan
from connectors.repeated_bars import ROW
from connectors.tick_times import utc_text

VALUES = ("price", "size", "bid", "ask")  # a bar's values, compared to tell a re-download from a revised bar
FILE = "_file"


def _bars(plan: FilePlan, index: int) -> pl.LazyFrame:
    """The bars ``plan`` replays (its own repeats and priceless rows left out), as (stream, `_ns`, values, row,
    file index); the values as floats, null where the file has no such column, so files of other layouts compare."""
    keys = plan.keys
    priced = [v for v in VALUES if v in keys and v != "size"]
    kept = pl.col("_ts").is_not_null() & (pl.any_horizontal(pl.col(v).is_not_null() for v in priced) if priced
                                          else pl.lit(True))
    if plan.repeated_bars:
        kept &= ~pl.col(ROW).is_in(list(plan.repeated_bars))
    stream = plan.columns.stream or plan.columns.default_stream or ""
    return plan.frame.filter(kept).select(
        (pl.col("stream") if "stream" in keys else pl.lit(stream)).cast(pl.String).alias("stream"),
        (pl.col("_ts") * plan.ts_factor).cast(pl.Int64).alias("_ns"),
        *((pl.col(v) if v in keys else pl.lit(None)).cast(pl.Float64).alias(v) for v in VALUES),
        pl.col(ROW).cast(pl.Int64), pl.lit(index, pl.Int64).alias(FILE)).filter(pl.col("stream").is_not_null())


def stamped_across_files(plans: list[Any]) -> list[Any]:
    """``plans`` with each bar file whose `bar_stamp: close` its own bars gave no length (one bar per stream: Polygon's
    day aggregates, a file a day) stamped by the median step of its streams' bars across all the run's bar files
    (review430 #8); a ValueError naming the lengths to give when those tell none either."""
    waiting = [i for i, plan in enumerate(plans) if isinstance(plan, FilePlan) and plan.close_unstamped]
    if not waiting:
        return plans
    bar_plans = [i for i, plan in enumerate(plans) if isinstance(plan, FilePlan) and plan.bars and plan.book is None]
    step = pl.col("_ns").diff().over("stream")
    steps = pl.concat([_bars(plans[i], i) for i in bar_plans]).unique(["stream", "_ns"]).sort("stream", "_ns") \
        .select(step.alias("step")).filter(pl.col("step") > 0).select(pl.col("step").quantile(0.5, "lower"))
    spacing = steps.collect().item()
    if spacing is None:
        raise no_length_refusal(plans[waiting[0]])
    out = list(plans)
    for i in waiting:
        out[i] = stamped_by(plans[i], int(spacing), "the spacing of its streams' bars across the files given with it, "
                                                    "the median step")
    return out


def without_bars_of_later_files(plans: list[Any]) -> tuple[list[Any], list[str]]:
    """``plans`` (in the order the files were given) with each bar that a later file's bar of the same stream and
    bar time replaces marked (`FilePlan.replaced_bars`: left out, counted as filtered_out), and the caution saying
    so; the plans as they are, and no caution, when fewer than two are bar files or none overlap."""
    bar_plans = [i for i, plan in enumerate(plans) if isinstance(plan, FilePlan) and plan.bars and plan.book is None]
    if len(bar_plans) < 2:
        return plans, []
    every = pl.concat([_bars(plans[i], i) for i in bar_plans]).with_columns(
        pl.col(FILE).max().over("stream", "_ns").alias("_last")).collect()  # (one scan of each file)
    replaced = every.filter(pl.col(FILE) < pl.col("_last"))
    if replaced.height == 0:
        return plans, []
    later = every.filter(pl.col(FILE) == pl.col("_last")).select(
        "stream", "_ns", *(pl.col(v).alias(f"_later_{v}") for v in VALUES), pl.col(ROW).alias("_later_row"))
    pairs = replaced.join(later, on=["stream", "_ns"], how="left")
    identical = pairs.select(pl.all_horizontal(pl.col(v).eq_missing(pl.col(f"_later_{v}")) for v in VALUES).sum()
                             ).item()
    first = pairs.sort(FILE, ROW).row(0, named=True)
    out = list(plans)
    for (index,), rows in replaced.group_by(FILE):
        out[index] = replace(out[index], replaced_bars=frozenset(rows[ROW].to_list()))
    return out, [_caution(plans, pairs, identical, first)]


def _caution(plans: list[Any], pairs: pl.DataFrame, identical: int, first: dict[str, Any]) -> Caution:
    revised = pairs.height - identical
    kinds = ", ".join(filter(None, (f"{identical} with the same values (a re-download)" if identical else "",
                                    f"{revised} with other values (a revised bar)" if revised else "")))
    earlier, later = plans[first[FILE]], plans[first["_last"]]
    files = pairs.select(pl.concat_list(FILE, "_last").explode().n_unique()).item()
    return Caution(f"{pairs.height} bar(s) of {files} files repeat the stream and bar time of a bar in a file given "
                   f"after theirs ({kinds}); a bar file holds one bar per interval, so the file given last supplies "
                   f"each bar, the {pairs.height} earlier one(s) left out as filtered_out; the first: "
                   f"{earlier.where(first[ROW])} ({utc_text(first['_ns'])}, {first['stream'] or 'its stream'}), "
                   f"replaced by {later.where(first['_later_row'])}")
