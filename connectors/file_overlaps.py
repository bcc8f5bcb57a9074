"""Files of a replay that feed one stream ticks of one kind over overlapping times (`overlapping_files`), with
what it reads to say so: each stream's first and last times (`time_spans`) and the kinds of tick a plan makes
(`tick_kinds`). A concept across files, apart from the notes on one file's content."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.epoch_counts import scaled_ts
from connectors.file_plan import FilePlan
from connectors.keep_filter import kept_rows, planned_keep
from connectors.repeated_trades import (across_caution, identical_caution, identical_rows, repeated_across,
                                        same_trades_refusal)
from connectors.stream_selection import StreamSelection, shown
from connectors.ticks import QUOTE, TRADE, utc_text


def time_spans(plan: Any) -> dict[str, tuple[int, int]]:
    """Each stream's first and last time (ns) in a tabular file, from a scan of its time and stream columns; of a
    DBN file, from its metadata (its start and end, each symbol's mappings: dbn.DbnPlan.time_spans), {} when that
    says no end."""
    if not isinstance(plan, FilePlan):
        return plan.time_spans() or {}
    cmap, ts = plan.columns, pl.col("_ts").drop_nulls()
    # (bars a later file replaces are not replayed: the files then follow each other, bars_across_files.py)
    frame = plan.frame.filter(~pl.col("_row").is_in(list(plan.replaced_bars))) if plan.replaced_bars else plan.frame
    if cmap.keep:  # the rows the map keeps: one file read twice, each map keeping its venue's streams (review440 #8)
        frame = frame.filter(kept_rows(cmap.keep, frame.collect_schema(), planned_keep))
    if cmap.stream_col is None:
        first, last = frame.select(ts.min().alias("first"), ts.max().alias("last")).collect().row(0)
        found = [(cmap.stream or cmap.default_stream or "", first, last)]
    else:
        found = frame.group_by("stream").agg(ts.min().alias("first"), ts.max().alias("last")).collect().rows()
    return {stream: (scaled_ts(first, plan.ts_factor), scaled_ts(last, plan.ts_factor)) for stream, first, last in found
            if stream is not None and first is not None}


def tick_kinds(plan: Any) -> set[str]:
    """The kinds of tick a plan's rows make: a trades file and a quotes file of one stream are one market's."""
    cmap = getattr(plan, "columns", None)
    if not isinstance(cmap, ColumnMap):  # a DBN file: its schema says (mbo and mbp-1 make both)
        return {TRADE} if getattr(plan, "schema", None) == "trades" else {TRADE, QUOTE}
    return {cmap.kind} if cmap.kind else {k for k, column in ((TRADE, cmap.price), (QUOTE, cmap.bid)) if column}


def overlapping_files(plans: Sequence[Any], selection: StreamSelection | None = None,
                      spans: Sequence[dict[str, tuple[int, int]]] | None = None) -> list[str]:
    """A caution per pair of files that feed one stream ticks of one kind over overlapping times (two vendors'
    EURUSD): merged by time, their ticks interleave into one stream as if from one source, each price beside the
    other vendor's. Files that follow each other (consecutive days) and a trades file beside a quotes file (one
    market's) are no concern; a pair whose overlap repeats trades by trade id (pages that overlap) gets that caution
    instead, and Binance's trades beside its aggTrades are refused. `spans`: each plan's `time_spans`, when already
    scanned."""
    fed: dict[str, list[tuple[int, int, Any]]] = defaultdict(list)
    for plan, plan_spans in zip(plans, spans if spans is not None else [time_spans(plan) for plan in plans]):
        for stream, (first, last) in plan_spans.items():
            if selection is None or selection.matches(stream):
                fed[stream].append((first, last, plan))
    pairs: dict[tuple[str, str], list[tuple[str, int, int]]] = {}  # (file, file) -> (stream, overlap start, end)
    repeats: list[str] = []  # the pairs whose overlap is trades repeated, by trade id (repeated_trades.py)
    for stream, spans in sorted(fed.items()):
        spans.sort(key=lambda span: span[:2])
        for i, (first, last, plan) in enumerate(spans):
            for other_first, other_last, other in spans[i + 1:]:
                if other_first >= last:  # sorted by start: none after this one overlaps it either
                    break
                if not tick_kinds(plan) & tick_kinds(other):
                    continue
                end = min(last, other_last)
                if refused := same_trades_refusal(plan, other, stream, other_first, end):
                    raise ValueError(refused)
                if repeated := repeated_across(plan, other, stream, other_first, end):  # pages overlapping
                    first = other.where(repeated.first_repeat).removeprefix(f"{other.given_name} ")
                    sequence = getattr(getattr(other, "columns", None), "sequence", None)
                    repeats.append(across_caution(stream, plan.given_name, other.given_name, repeated, first, sequence))
                elif rows := identical_rows(plan, other, stream, other_first, end):  # one day given twice
                    repeats.append(identical_caution(stream, plan.given_name, other.given_name, rows, other_first,
                                                     end))
                else:
                    pairs.setdefault((plan.given_name, other.given_name), []).append((stream, other_first, end))
    notes: list[str] = list(repeats)
    for (one, other), streams in pairs.items():
        stream, start, end = streams[0]
        named = f"stream {stream}" if len(streams) == 1 else \
            f"streams {shown([s for s, _, _ in streams])} ({len(streams)})"
        notes.append(Caution(f"{named} fed by both {one} and {other}, whose times overlap ({utc_text(start)} to "
                             f"{utc_text(end)}{' for ' + stream if len(streams) > 1 else ''}): their ticks interleave "
                             f"into one stream by time, as one source's; if they are two sources of it (two vendors), "
                             f"give each its own stream in a replay list (an entry's columns: {{stream: NAME}}), or "
                             f"replay one (files that follow each other, day after day, are no concern)"))
    return notes
