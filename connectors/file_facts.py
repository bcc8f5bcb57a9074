"""What one pass over a tabular file finds, for its plan's notes and refusals: rows out of time order (or of
sequence), its first and last times, stream names with '/' or not in NFC, prices at zero or below, crossed quotes,
header rows repeated, the zone names its times are written with; and a CSV's footer line. connectors/planning.py
gathers them once per file (`file_facts`) and connectors/plan_notes.py words them."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Mapping

import polars as pl

from connectors.zero_sizes import zero_size_facts
from connectors.bloomberg_names import has_yellow_key
from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.datetime_column import EPOCH_CODE
from connectors.local_times import time_column
from connectors.iqfeed_ticks import END_MESSAGE, IQFEED_NAMES, MESSAGE_ID
from connectors.keep_filter import kept_rows, source_keep
from connectors.leap_seconds import leap_text_facts
from connectors.market_zones import MARKET_NAME
from connectors.misread_times import time_facts
from connectors.price_notation import fractional_facts
from connectors.price_series import series_columns, series_fact
from connectors.row_exprs import ROW
from connectors.row_order import rows_out_of_sequence
from connectors.utc_offsets import SUMMER_CHECKED, in_us_summer, zone_name_of
from engine.quoting import quoted

MARKET_STREAMS = 64  # the streams named per file, at most: enough to name a few of each market


def zone_named(cmap: ColumnMap, ts_type: pl.DataType) -> bool:
    """Whether the times are text that may name their zone (CST: several zones'), said once per file; a format
    that writes the name as text (`... EST`) reads no zone from it."""
    return ts_type == pl.String and cmap.ts_unit == "datetime" and EPOCH_CODE not in (cmap.ts_format or "") \
        and (cmap.ts_format is None or "%Z" in cmap.ts_format)


def file_facts(path: Path, cmap: ColumnMap, rows: pl.LazyFrame, exprs: list[pl.Expr], keys: list[str],
                raw_stream: pl.Expr, price_texts: Mapping[str, pl.Expr], dialect: Dialect | None, factor: int,
                named: bool, first: str | None, sixtieth: pl.Expr | None = None) -> dict[str, Any]:
    """What one pass over the file finds, for its notes and refusals: rows out of time order (or of sequence),
    its first and last times, names with '/' or not in NFC, prices at zero or below, crossed quotes, repeated
    header rows, the zone names its times are written with; with `sixtieth` (whether a row's time text is in a
    leap second, connectors/leap_seconds.py), those rows and their days."""
    # a price column that is zero or below wherever a row trades: an instrument that trades there (a spread)
    prices = [e for e, key in zip(exprs[1:], keys) if key in ("price", "size")] if cmap.price is not None else []
    traded = (pl.col("price").filter(pl.col("size") > 0) if cmap.size is not None else pl.col("price")).drop_nulls()
    # a quote's bid above its ask: a yield quote's, if the columns are yields mapped as they are named
    sides = [e for e, key in zip(exprs[1:], keys) if key in ("bid", "ask")] if cmap.bid and cmap.ask else []
    # a quote's sizes: a share of them at 0 is an indicative quote, no firm one (zero_sizes.py)
    sized = [key for key in keys if key in ("bid_size", "ask_size")] if sides else []
    quote_sizes = [e for e, key in zip(exprs[1:], keys) if key in sized]
    dates = [pl.col(cmap.ts_columns[0])] if len(cmap.ts_columns) == 2 else []  # for a trade date's steps back
    sequence = [exprs[-1]] if cmap.sequence is not None else []
    zones = [zone_name_of(time_column(cmap).str.strip_chars()).alias("_zone")] if named else []
    leap = [sixtieth.alias("_sixtieth")] if sixtieth is not None else []
    series = series_columns(cmap, exprs, keys)  # streams whose trades have no size: an index's levels
    kept = kept_rows(cmap.keep, rows.collect_schema(), source_keep) if cmap.keep else pl.lit(True)
    facts = rows.select(exprs[0], raw_stream.alias("_stream"), kept.alias("_kept"), *prices, *sides, *quote_sizes,
                        *dates, *sequence, *zones, *leap, *series, pl.col(ROW),
                        _header_repeats(rows, dialect).alias("_header"), _end_message(rows).alias("_end"),
                        *(cells.alias(f"_text_{key}") for key, cells in price_texts.items())).select(
        unsorted=(pl.col("_ts").drop_nulls().diff() < 0).any(), timed=pl.col("_ts").is_not_null().any(),
        untimed=pl.col("_ts").is_null().any(),  # (rows of a time past 2262 among them: planning's `_past_int64`)
        back_rows=(pl.col("_ts").drop_nulls().diff() < 0).sum(), largest_back=-pl.col("_ts").drop_nulls().diff().min(),
        # the first step back: its row and time (a clock stepped back once is named by them, connectors/leap_seconds)
        first_back_row=pl.col(ROW).filter(pl.col("_ts").is_not_null()).filter(
            pl.col("_ts").drop_nulls().diff() < 0).first(),
        first_back_ts=pl.col("_ts").drop_nulls().filter(pl.col("_ts").drop_nulls().diff() < 0).first(),
        forward_rows=(pl.col("_ts").drop_nulls().diff() > 0).sum(),
        # steps back within a stream's own rows: none in a file grouped by stream (LSEG's, by RIC), each in order
        stream_back_rows=(pl.col("_ts").forward_fill().diff().over("_stream") < 0).sum(),
        streams=pl.col("_stream").drop_nulls().n_unique(),
        # streams whose names point at their exchange (`0005.HK`): a zone given is checked against theirs (those
        # the map keeps: one file read a venue's streams in each zone, review440 #8)
        market_streams=pl.col("_stream").filter(pl.col("_kept") & pl.col("_stream").str.contains(MARKET_NAME)).unique(
            maintain_order=True).head(MARKET_STREAMS).implode(),
        min_ts=pl.col("_ts").min(), max_ts=pl.col("_ts").max(),
        first_ts=pl.col("_ts").drop_nulls().first(), slashes=pl.col("_stream").str.contains("/", literal=True).any(),
        denormalized=(pl.col("_stream") != pl.col("_stream").str.normalize("NFC")).any(),
        yellow_keys=has_yellow_key(pl.col("_stream")).any() if len(cmap.stream_columns) == 1 else pl.lit(False),
        nonpositive_prices=(traded.max() <= 0) if prices else pl.lit(False),
        nonpositive_rows=(traded <= 0).sum() if prices else pl.lit(0),
        trading_rows=traded.len() if prices else pl.lit(0),
        crossed_rows=(pl.col("bid") > pl.col("ask")).sum() if sides else pl.lit(0),
        zero_sides=((pl.col("bid") <= 0) | (pl.col("ask") <= 0)).sum() if sides else pl.lit(0),
        out_of_sequence=rows_out_of_sequence() if sequence else pl.lit(0),
        header_rows=pl.col(ROW).filter(pl.col("_header")).implode(),
        end_messages=pl.col(ROW).filter(pl.col("_end")).implode(),
        zone_names=pl.col("_zone").drop_nulls().unique().implode() if named else pl.lit(None),
        *fractional_facts({key: pl.col(f"_text_{key}") for key in price_texts}), *time_facts(cmap, factor),
        **(_us_summer_facts() if named else {}), **(leap_text_facts(pl.col("_sixtieth")) if leap else {}),
        **series_fact(series), **zero_size_facts(sized, cmap.zero_bid == "price"),
    )
    try:
        return facts.collect().row(0, named=True)
    except pl.exceptions.ComputeError as e:  # polars' own words are several lines, about its API, not the file
        raise ValueError(unparsed_times(path, cmap, first, e)) from e


def _us_summer_facts() -> dict[str, pl.Expr]:
    """Per SUMMER_CHECKED name, its rows on dates its US zone keeps summer time (CST in July): count, first time."""
    facts = {}
    for name in SUMMER_CHECKED:
        summer = in_us_summer(pl.col("_ts"), pl.col("_zone"), name).fill_null(False)
        facts |= {f"summer_{name}": summer.sum(), f"summer_first_{name}": pl.col("_ts").filter(summer).min()}
    return facts


def unparsed_times(path: Path, cmap: ColumnMap, first: str | None, error: Exception) -> str:
    """One line for a read that polars stopped: the file, the time column, a value, the option that says how."""
    said = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return (f"{path}: its times could not be read (column {quoted(cmap.ts)}, e.g. {quoted(first or '', 40)}: {said}): "
            "give their format with strftime codes, e.g. --ts-format '%Y-%m-%d %H:%M:%S%.f%z'")


def time_span(first: Any, last: Any, factor: int) -> tuple[int, int] | None:
    """A file's first and last time in ns, when its times are numbers (a time range is checked against it)."""
    if not all(type(t) in (int, float) and math.isfinite(t) for t in (first, last)):
        return None
    return round(first * factor), round(last * factor)


FOOTER_TEXT = re.compile(r"[A-Za-z]{3}")  # words: "Downloaded from Barchart.com as of ...", "Total", ...


def footer_line(rows: pl.LazyFrame, ts: pl.Expr, separator: str,
            junk: Mapping[int, tuple[str, ...]]) -> tuple[int, str] | None:
    """(row, its text) when a CSV's last row is a line of words in its first cell, whose time does not read
    (Barchart's `Downloaded from Barchart.com as of 03-06-2026 04:34pm CST`), and nothing else but the digits of a
    number its delimiter split (`Total rows: 3,000` in a comma file), or IQFeed's `!ENDMSG!`: a footer, left out
    as filtered_out rather than rejected as a tick missing its time, nor its pieces taken for a stream's name. A
    junk line's cells (`junk_lines`) are its text as written: its cells as typed are empty."""
    last = rows.tail(1).select(pl.all(), ts.alias("_ts")).collect()
    if not last.height:
        return None
    cells = list(junk.get(last[ROW][0], ())) or [str(v).strip() for k, v in last.row(0, named=True).items()
                                                if k not in (ROW, "_ts") and v not in (None, "")]
    text = cells[0] if cells and all(cell.isdigit() for cell in cells[1:]) else ""
    if END_MESSAGE in cells:  # IQFeed's end of an answer, after the request's id or not (`ESZ26,!ENDMSG!,`)
        text = END_MESSAGE
    if last["_ts"][0] is not None or not FOOTER_TEXT.search(text):
        return None
    return int(last[ROW][0]), separator.join(cells)[:60]


def _end_message(rows: pl.LazyFrame) -> pl.Expr:
    """Whether a row of IQFeed's tick history is its `!ENDMSG!` line, the end of a request's answer (in the time
    field, or in the one `LH` stands in, after the request's id or not): wherever it stands, as files of several
    answers joined hold one after each, no tick and no error."""
    schema = rows.collect_schema()
    if not {"tick_id", "trade_market_center"} <= set(schema):  # not IQFeed's layout (connectors/iqfeed_ticks.py)
        return pl.lit(False)
    cells = [pl.col(name).str.strip_chars() == END_MESSAGE for name in (MESSAGE_ID, IQFEED_NAMES[0])
             if schema.get(name) == pl.String]
    return pl.any_horizontal(cells).fill_null(False) if cells else pl.lit(False)


def _header_repeats(rows: pl.LazyFrame, dialect: Dialect | None) -> pl.Expr:
    """Whether a row of a CSV with a header repeats it (each text cell its column's name): files joined one after
    another (a concatenated export), a line that is no tick, nor its `symbol` a stream."""
    if dialect is None or not dialect.header:
        return pl.lit(False)
    names = [name for name, dtype in rows.collect_schema().items() if dtype == pl.String and name != ROW]
    if len(names) < 2:
        return pl.lit(False)
    return pl.all_horizontal([pl.col(name).str.strip_chars() == name for name in names]).fill_null(False)
