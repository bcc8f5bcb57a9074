"""One stream fed by files whose price levels lie far apart: two instruments under one name (two stocks whose files
named one stream, a file in cents beside one in dollars) more likely than one instrument's move. Replayed as one
stream, the step between them is scored as a market move, and neither the overlap caution (the files may follow each
other) nor the split check (no split ratio) says so: a caution does, naming the stream, the files and their levels.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

import polars as pl

from connectors.cautions import Caution
from connectors.column_names import RIGHT_NAMES, STRIKE_NAMES
from connectors.option_names import is_option_name
from connectors.field_names import normal_name
from connectors.file_plan import FilePlan
from connectors.price_offsets import offset_of
from connectors.stream_selection import StreamSelection, shown
from connectors.ticks import shown_name

# Levels this many times apart in files that follow each other: one instrument rarely moves so far from one file
# (a day, a month) to the next, while two stocks' prices mostly differ by more (HKEX's 0700 at 380, 0005 at 65)
LEVELS_APART = 3.0
LEVEL_ROWS = 50_000  # a file's level: the median price of its first rows (a file's prices move far less than 3x)


def price_levels(plan: Any) -> dict[str, float]:
    """Each stream's price level in a tabular file: the median of its first LEVEL_ROWS rows' positive trade prices
    (a quote's mid where a row has no trade); {} for a DBN file, whose prices are read only as it replays, and for
    an options file (a stream per strike and right, or streams named as options), whose premiums may move
    many-fold from one day to the next."""
    if not isinstance(plan, FilePlan) or any(normal_name(c) in (*STRIKE_NAMES, *RIGHT_NAMES)
                                             for c in plan.columns.stream_columns):
        return {}
    names = plan.frame.collect_schema().names()
    number = {n: pl.col(n).cast(pl.Float64, strict=False) for n in ("price", "bid", "ask") if n in names}
    mid = (number["bid"] + number["ask"]) / 2 if "bid" in number and "ask" in number else None
    price = pl.coalesce(number["price"], mid) if "price" in number and mid is not None else number.get("price", mid)
    if price is None:
        return {}
    # a price offset (--price-offset) is added as the prices are read: a level is the median of the prices read,
    # so a file lifted from 0.9 to 40.9 is not cautioned against its neighbour at 41 (nor are prices the offset
    # lifts above zero left out)
    offset = plan.columns.price_offset
    level = (price.filter(price > 0) if offset is None else price.filter(price != 0)).median().alias("level")
    head = plan.frame.head(LEVEL_ROWS)
    if plan.columns.stream_col is None:
        found = [(plan.columns.stream or plan.columns.default_stream or "", head.select(level).collect().item())]
    else:
        found = head.group_by("stream").agg(level).collect().rows()
    # an option named as one (OSI's `AAPL  261218C00150000`, Deribit's): its premium may move many-fold in a day
    levels = {stream: float(value) + offset_of(offset, stream) for stream, value in found
              if stream is not None and value is not None and not is_option_name(str(stream))}
    return {stream: value for stream, value in levels.items() if value > 0}


def far_apart_levels(plans: Sequence[Any], spans: Sequence[dict[str, tuple[int, int]]],
                     selection: StreamSelection | None = None) -> list[str]:
    """A caution per pair of files, one after the other in time, that feed one stream prices LEVELS_APART or more
    times apart. `spans`: each plan's streams and their first and last times (`file_overlaps.time_spans`); only the
    files of a stream fed by several are read for their levels."""
    fed: dict[str, list[tuple[int, int]]] = defaultdict(list)  # stream -> (its first time, plan index) per file
    for i, plan_spans in enumerate(spans):
        for stream, (first, _) in plan_spans.items():
            if selection is None or selection.matches(stream):
                fed[stream].append((first, i))
    shared = {i for files in fed.values() if len(files) > 1 for _, i in files}
    levels = {i: price_levels(plans[i]) for i in sorted(shared)}
    pairs: dict[tuple[int, int], list[tuple[str, float, float]]] = {}  # (plan, plan) -> (stream, level, level)
    for stream, files in sorted(fed.items()):
        files.sort()
        for (_, one), (_, other) in zip(files, files[1:]):
            before, after = levels[one].get(stream), levels[other].get(stream)
            if before and after and max(before, after) / min(before, after) >= LEVELS_APART:
                pairs.setdefault((one, other), []).append((stream, before, after))
    notes = []
    for (one, other), streams in pairs.items():
        stream, before, after = streams[0]
        named = f"one stream {shown_name(stream)}" if len(streams) == 1 else \
            f"{len(streams)} streams, {shown([s for s, _, _ in streams])}, each"
        apart = max(before, after) / min(before, after)
        notes.append(Caution(
            f"{named} from two files whose prices differ {apart:.1f}-fold: two instruments? "
            f"{plans[one].given_name}'s prices lie near {before:.6g} and {plans[other].given_name}'s, after it, near "
            f"{after:.6g}{' (for ' + shown_name(stream) + ')' if len(streams) > 1 else ''}; replayed as one stream, "
            f"the step between them is scored as a market move. Give each file its own stream in a replay list (an "
            f"entry's columns: {{stream: NAME}}); if they are one instrument, a split or a change of price unit "
            f"between them is not adjusted (docs/replay.md)"))
    return notes
