"""Bars repeated in a bar file: two rows of one stream with the same bar time. A bar file holds one bar per
interval, so a second row of a time is a re-download appended to the file (the same values) or a revised bar (a
vendor's correction, the last bar of a day fetched again before it closed): replaying both would count the
interval twice in every horizon, label and score (review307 #4). The last row of each time, in file order, is the
bar replayed; the earlier ones are left out as `filtered_out` (counted, each named among the rejects), and a
caution says how many and names the first. Ticks are not bars: two trades of one time are two trades, and a trade
file's repeats are connectors/repeated_trades.py's (by trade id), left as they are.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from connectors.cautions import Caution
from connectors.epoch_counts import scaled_ts
from connectors.file_plan import FilePlan
from connectors.tick_times import utc_text

ROW = "_row"


def without_repeated_bars(plan: FilePlan) -> FilePlan:
    """The plan with its repeated bars marked (`FilePlan.repeated_bars`: left out, counted as filtered_out) and a
    caution saying so; a plan of ticks, or of bars that never repeat a time, as it is."""
    if not plan.bars or plan.book is not None:
        return plan
    by = ["_ts", *(["stream"] if "stream" in plan.keys else [])]
    values = [k for k in ("price", "size", "bid", "ask") if k in plan.keys]
    # a row without a price is no bar (Yahoo's `null` holiday row beside that day's bar): rejected as it is
    priced = pl.any_horizontal(pl.col(v).is_not_null() for v in values if v != "size") if values else pl.lit(True)
    repeats = (plan.frame.filter(pl.col("_ts").is_not_null() & priced)
               .with_columns(pl.col(ROW).max().over(by).alias("_last"), pl.len().over(by).alias("_times"))
               .filter(pl.col("_times") > 1).collect())
    if repeats.height == 0:
        return plan
    kept = repeats.filter(pl.col(ROW) == pl.col("_last")).select(*by, *(pl.col(v).alias(f"_kept_{v}") for v in values))
    dropped = repeats.filter(pl.col(ROW) != pl.col("_last")).join(kept, on=by, how="left", nulls_equal=True)
    same = pl.all_horizontal((pl.col(v).eq_missing(pl.col(f"_kept_{v}")) for v in values)) if values else pl.lit(True)
    identical = dropped.select(same.sum()).item()
    first = dropped.sort(ROW).row(0, named=True)
    revised = dropped.height - identical
    kinds = ", ".join(filter(None, (f"{identical} with the same values (a re-download appended)" if identical else "",
                                    f"{revised} with other values (a revised bar)" if revised else "")))
    when = utc_text(scaled_ts(first["_ts"], plan.ts_factor))
    caution = Caution(f"{plan.path.name}: {dropped.height} bar(s) repeat the time of a later bar of their stream "
                      f"({kinds}); a bar file holds one bar per interval, so only the last row of each time is "
                      f"replayed, the {dropped.height} earlier one(s) left out as filtered_out; the first: "
                      f"{plan.where(first[ROW])} ({when}), repeated at "
                      f"{plan.where(first['_last']).removeprefix(plan.given_name + ' ')}")
    return replace(plan, repeated_bars=frozenset(dropped[ROW].to_list()), notes=(*plan.notes, caution))
