"""What a file's size column holds beyond a trade's size as a plain number.

A running total: a market-snapshot file (Kalshi's every 15 s: `last_price`, the day's `volume` so far,
`yes_bid`/`yes_ask`) read by the names a trades file uses. Each row would replay as a trade at the last price, sized
by the day's total so far, though most snapshots follow no new trade (the total is unchanged). A size that never
decreases within a stream (a reset at a day's start aside) is said in a caution, with the map that reads the
snapshots' quotes instead and the columns of quotes left unread.

A capped size: FINRA TRACE disseminates a corporate bond's trade above a cap as `1MM+` (investment grade) or `5MM+`
(par value of a million, five million, or more). Refused as no number, they were the largest 28% of a file's prints;
they read as their cap, the least the trade can be, with a note that says so.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.layout_notes import trade_bars
from connectors.file_scans import SAMPLE_ROWS, is_csv, scan_file
from connectors.shell_words import columns_option
from engine.quoting import quoted

RISES_SAID = 20  # rises of the size within a stream, at the least, before its never falling says anything
FALLS_PER_RISE = 0.1  # falls allowed per rise: a day's total starts again from 0 (trade sizes fall about half the time)
# A rise on every row is a running total under a volume's name only: test fixtures and short files of trades may hold
# sizes that happen to rise; else a quarter of the rows or more leave it unchanged, snapshots after no new trade
TOTAL_NAMES = frozenset({"volume", "vol", "total_volume", "cum_volume", "cumulative_volume", "day_volume",
                         "daily_volume", "volume_today", "ttq", "total_traded_quantity", "traded_volume"})
UNCHANGED_SHARE = 0.25
CAPPED = r"^(\d+(?:\.\d+)?) ?MM\+$"  # TRACE's capped sizes: 1MM+, 5MM+ (millions, or more)
# yes_bid, no_ask, bid_price, a book's levels bid_price1..bid_price5 (A-share snapshots'), bid_px_00: a quote's column
QUOTE_NAME = re.compile(r"^(?:.+_)?(bid|ask)(?:_?price|_?px)?(?:_?(?P<level>\d{1,2}))?$")


def size_notes(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
               dialect: Dialect | None) -> list[str]:
    """The running-total caution and the capped-size note of the size column read, from one read of its first
    SAMPLE_ROWS rows (with the stream's columns) for both: each check is a pass over a small frame in memory."""
    if cmap.size is None or cmap.size not in schema:
        return []
    totals = cmap.price is not None
    capped = schema[cmap.size] == pl.String or is_csv(path)
    if not (totals or capped):
        return []
    stream = pl.concat_str([pl.col(c).cast(pl.String) for c in cmap.stream_columns], separator=" ",
                           ignore_nulls=True) if cmap.stream_columns else pl.lit("")
    overrides = {c: pl.String for c in (cmap.size, *cmap.stream_columns)} if is_csv(path) else None
    rows = scan_file(path, names, dialect, overrides).select(  # (stream, size's text) per row
        stream.alias("stream"), pl.col(cmap.size).cast(pl.String).str.strip_chars().alias("text"))
    head = rows.head(SAMPLE_ROWS).collect()
    # a bar's volume is the bar's own, not a total: bars of a rising session (or a test's) are no snapshots
    totals = totals and not _bar_file(cmap, names or list(schema))
    return [*(_running_total_note(path, cmap, schema, head, rows) if totals else []),
            *(_capped_size_note(path, cmap, head) if capped else [])]


def _bar_file(cmap: ColumnMap, names: Sequence[str]) -> bool:
    """Whether the map reads bars: a close beside its open, high and low, or a bar's stamp said."""
    return cmap.bar_stamp is not None or cmap.bar_length is not None or trade_bars(cmap, names)


def _size_facts(rows: pl.DataFrame | pl.LazyFrame) -> dict[str, Any]:
    """How the size (its text, read as a number) steps within each stream over ``rows``: rises, falls, unchanged
    steps, rows of a size, the least and the most."""
    size = pl.col("text").str.replace_all(",", "").cast(pl.Float64, strict=False)
    step = pl.col("size").diff().over("stream")
    facts = rows.select("stream", size.alias("size")).filter(pl.col("size").is_not_null()).select(
        rises=(step > 0).sum(), falls=(step < 0).sum(), same=(step == 0).sum(), rows=pl.len(),
        low=pl.col("size").min(), high=pl.col("size").max())
    return (facts.collect() if isinstance(facts, pl.LazyFrame) else facts).row(0, named=True)


def _never_falls(cmap: ColumnMap, facts: dict[str, Any]) -> bool:
    """RISES_SAID rises or more, a reset per 1/FALLS_PER_RISE rises at most, unchanged on UNCHANGED_SHARE of the
    rows or named as a total."""
    return not (facts["rises"] < RISES_SAID or facts["falls"] > FALLS_PER_RISE * facts["rises"] or
                facts["same"] < UNCHANGED_SHARE * facts["rows"] and normal_name(cmap.size) not in TOTAL_NAMES)


def _running_total_note(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], head: pl.DataFrame,
                        rows: pl.LazyFrame) -> list[str]:
    """A caution when the size column read never decreases within a stream (`_never_falls`) in ``head`` and then
    over the whole file (``rows``, read only when the head says so: a file of trades whose first rows happen to
    rise falls later): a running total of volume, not a trade's size."""
    facts = _size_facts(head)
    if not _never_falls(cmap, facts):
        return []
    if head.height >= SAMPLE_ROWS and not _never_falls(cmap, facts := _size_facts(rows)):  # (more rows to read)
        return []
    read = set(cmap.source_columns())
    quotes = [c for c in schema if c not in read and QUOTE_NAME.match(normal_name(c))]
    pair = (cmap.bid, cmap.ask) if cmap.bid and cmap.ask else _top_quote_pair(quotes)
    keys = [f"ts={'+'.join(cmap.ts_columns)}", *([f"stream={cmap.stream_col}"] if cmap.stream_col else []),
            *([f"bid={pair[0]},ask={pair[1]}"] if pair else ["bid=BID,ask=ASK"])]
    unread = f"; its quote columns are not read ({', '.join(quotes[:6])})" if quotes else ""
    return [Caution(
        f"{path.name}: column {quoted(cmap.size)}, read as the size, never decreases within a stream "
        f"({facts['low']:,g} to {facts['high']:,g} over {facts['rows']:,} rows; {facts['same']:,} of them unchanged): "
        "a running total of volume, as a file of snapshots holds (not prints), so each row replays as a trade at "
        f"{quoted(cmap.price)} sized by the total so far, the unchanged rows after no new trade{unread}. To read the "
        f"snapshots as quotes: {columns_option(*keys)}; to read trades, write each row's rise of {quoted(cmap.size)} "
        "as its size and drop the rows without one first (docs/replay.md, running totals)")]


def _top_quote_pair(quotes: Sequence[str]) -> tuple[str, str] | None:
    """(bid, ask) columns of one name but their side (`yes_bid`/`yes_ask`), of the book's top level where the names
    number levels (`bid_price1`/`ask_price1` of five: review433 #2, whose caution said `bid=BID,ask=ASK`); else None."""
    def level(column: str) -> int:
        return int(QUOTE_NAME.match(normal_name(column))["level"] or 0)

    for bid in sorted(quotes, key=level):
        name = normal_name(bid)
        side = QUOTE_NAME.match(name)
        if side[1] == "bid":
            ask = name[:side.start(1)] + "ask" + name[side.end(1):]
            if (found := next((a for a in quotes if normal_name(a) == ask), None)) is not None:
                return bid, found
    return None


def capped_size(text: pl.Expr, number: pl.Expr) -> pl.Expr:
    """A size cell's number (`number`, read from its `text`), a capped one (`5MM+`) as its cap: 5,000,000."""
    return pl.when(text.str.contains(CAPPED)).then(text.str.extract(CAPPED, 1).cast(pl.Float64) * 1e6) \
        .otherwise(number)


def _capped_size_note(path: Path, cmap: ColumnMap, head: pl.DataFrame) -> list[str]:
    """A note when the size column holds capped sizes (`1MM+`) in ``head``: read as their cap, so the size of
    such a trade is a lower bound."""
    found = head.filter(pl.col("text").str.contains(CAPPED)).select(
        rows=pl.len(), values=pl.col("text").unique().sort().head(4).implode()).row(0, named=True)
    if not found["rows"]:
        return []
    read = ", ".join(f"{v} as {float(re.match(CAPPED, v)[1]) * 1e6:,.0f}" for v in found["values"])
    return [f"{path.name}: column {quoted(cmap.size)} holds capped sizes on {found['rows']:,} rows (FINRA TRACE's, "
            f"disseminated so above a cap): read {read}, the least each can be, so such a trade's size is a lower "
            f"bound"]
