"""Venues in a file's values: one stream mixing several venues' (or liquidity providers') prices in one file
(`venue_note`, a consolidated tape's quotes among them), and one stream fed by files of several venues across a
replay (`mixed_venues`). Apart from the other content notes since both read a venue the same way (VENUE_NAMES)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.file_plan import FilePlan, source_path
from connectors.file_scans import SAMPLE_ROWS, distinct_text, is_csv, scan_file
from engine.quoting import quoted


VENUE_NAMES = ("exchange", "venue", "market", "exchange_id", "exchange_code", "ex", "mic")
# An FX aggregator's liquidity providers: each quotes its own prices, so one stream of several is a venue mix too.
# Generic words (`source`, `maker`): a column of yes/no or buy/sell values under them is no provider's; a `maker`
# of buyer/seller says which side's order rested (the aggressor's side, flipped), not who quoted
PROVIDER_NAMES = ("lp", "liquidity_provider", "provider", "lp_name", "bank", "ecn", "source", "maker")
NOT_PROVIDERS = frozenset({"true", "false", "t", "f", "y", "n", "yes", "no", "0", "1", "buy", "sell", "b", "s",
                           "bid", "ask", "offer", "maker", "taker", "buyer", "seller", "buyers", "sellers",
                           "bought", "sold", "buy_side", "sell_side"})


def venue_note(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                dialect: Dialect | None) -> list[str]:
    """A detected layout whose streams leave out a venue column holding several named venues: each stream mixes
    them, wrong for one instrument's separate markets (BTC-USD on several crypto exchanges, each at its own price;
    EURUSD from several liquidity providers, PROVIDER_NAMES). Said, with the map for a stream per venue. Exchange
    codes of one or two characters or digits (a consolidated tape's: US equities' prints of one symbol on many
    exchanges, one market) are not, unless each row is a venue's own quote (`_venue_quotes`)."""
    column = next((c for c in schema if normal_name(c) in VENUE_NAMES), None)
    provider = column is None and (column := next((c for c in schema if normal_name(c) in PROVIDER_NAMES), None))
    if column is None or column in cmap.source_columns():
        return []
    values = distinct_text(path, names, dialect, column, 51, SAMPLE_ROWS)
    if not 2 <= len(values) <= 50:
        return []
    # a provider's code is its own (GS, DB), but a maker flag or a side is no provider
    if provider and {v.lower() for v in values} & NOT_PROVIDERS:
        return []
    streams = f"stream={column}+{cmap.stream_col}" if cmap.stream_col else f"stream={column}"
    held = f"{path.name}: column {quoted(column)} holds {len(values)} venues ({', '.join(values[:5])}" \
           f"{', ...' if len(values) > 5 else ''}) and each stream mixes them"
    # a tape's exchange codes are letters or numbers (TAQ's N, P, Q; Polygon's 4, 11): its prints are one market's,
    # but not its quotes
    if not provider and all(len(v) <= 2 or v.isdigit() for v in values):
        return _venue_quotes(path, cmap, names, dialect, column, held, streams)
    mixing, total = _streams_mixing(path, cmap, names, dialect, column)
    if not mixing:  # each stream one venue's (Kaiko's symbol per exchange): a stream per venue already
        return []
    if mixing < total:
        held = held.replace("each stream mixes them", f"{mixing:,} of {total:,} streams mix them (in its first rows)")
    what = "liquidity providers each quoting its own prices" if provider else "separate markets with their own prices"
    return [Caution(f"{held}: right for a consolidated tape, not for {what} (a stream per venue: --columns "
                    f"{streams})")]


def _streams_mixing(path: Path, cmap: ColumnMap, names: Sequence[str] | None, dialect: Dialect | None,
                    column: str) -> tuple[int, int]:
    """How many streams, of how many, hold more than one venue in the first SAMPLE_ROWS rows (a stream named by
    the file: the file's one stream)."""
    text = lambda c: pl.col(c).cast(pl.String).str.strip_chars()  # noqa: E731
    stream = pl.concat_str([text(c) for c in cmap.stream_columns], separator=" ", ignore_nulls=True) \
        if cmap.stream_columns else pl.lit("")
    overrides = {c: pl.String for c in (column, *cmap.stream_columns)} if is_csv(path) else None
    venues = scan_file(path, names, dialect, overrides).head(SAMPLE_ROWS).select(
        stream.alias("stream"), text(column).alias("venue")).filter(pl.col("venue").is_not_null()).group_by(
        "stream").agg(pl.col("venue").n_unique().alias("venues")).collect()
    return int((venues["venues"] > 1).sum()), venues.height


def _venue_quotes(path: Path, cmap: ColumnMap, names: Sequence[str] | None, dialect: Dialect | None, column: str,
                  held: str, streams: str) -> list[str]:
    """A tape's quotes (WRDS's consolidated quotes, `cqm`: each row one exchange's own bid and ask, `EX` its code)
    whose exchange changes within a stream, in the first SAMPLE_ROWS rows: said, since the stream's bid and ask
    then jump from one venue's quote to another's, which is no NBBO. Trades (a tape's prints are one market's) and
    a best bid and offer read from `best_*` columns (WRDS's NBBO files: `EX` the venue that set it) are not."""
    if cmap.price is not None or cmap.bid is None or normal_name(cmap.bid).startswith("best_"):
        return []
    text = lambda c: pl.col(c).cast(pl.String).str.strip_chars()  # noqa: E731
    stream = pl.concat_str([text(c) for c in cmap.stream_columns], separator=" ", ignore_nulls=True) \
        if cmap.stream_columns else pl.lit("")
    overrides = {c: pl.String for c in (column, *cmap.stream_columns)} if is_csv(path) else None
    found = scan_file(path, names, dialect, overrides).head(SAMPLE_ROWS).select(
        stream.alias("stream"), text(column).alias("venue")).select(
        changes=(pl.col("venue") != pl.col("venue").shift(1)).over("stream").sum(),
        changing=pl.col("stream").filter((pl.col("venue") != pl.col("venue").shift(1)).over("stream")).n_unique(),
        streams=pl.col("stream").n_unique()).collect().row(0, named=True)
    if not found["changes"]:  # one venue's quotes per stream
        return []
    return [Caution(f"{held}: its quotes are each venue's own (a consolidated quote file, as WRDS's cqm), and the "
                    f"venue changes {found['changes']:,} times within a stream in its first rows (in "
                    f"{found['changing']:,} of {found['streams']:,} streams): the stream's bid and ask jump from one "
                    f"venue's quote to another's, which is no NBBO (a stream per venue: --columns {streams}; or "
                    f"replay an NBBO file, whose best_* columns are read)")]


# The market a preset's files are from: files of two markets feeding one stream get a note (`mixed_venues`)
PRESET_VENUES = {"binance-trades": "binance", "binance-bbo": "binance", "binance-public-trades": "binance",
                 "binance-public-aggtrades": "binance", "binance-public-klines": "binance",
                 "binance-futures-trades": "binance-futures", "binance-futures-aggtrades": "binance-futures",
                 "binance-futures-bookticker": "binance-futures", "bitstamp-transactions": "bitstamp",
                 "coinbase-trades": "coinbase", "coinbase-matches": "coinbase", "dukascopy": "dukascopy",
                 "lobster-messages": "nasdaq"}
# Vendors' own columns that say whose file it is, when no column names the venue
VENDOR_VENUES = {frozenset({"tickdirection", "trdmatchid"}): "bybit",  # Bybit's public trading history
                 frozenset({"instrument_name", "created_time"}): "okx"}  # OKX's trade history


def _venue_of(plan: Any) -> str | None:
    """The market a file's ticks are from, when its layout says: its preset's, a venue column's one value
    (Tardis.dev's `exchange`: binance-futures), or a vendor's own columns (Bybit's). None when it does not say
    (a DBN file's plan included), and for a tape's one- or two-character exchange codes (one market's prints)."""
    if not isinstance(plan, FilePlan):
        return None
    path, cmap, schema, dialect = plan.path, plan.columns, plan.schema, plan.dialect
    if cmap.preset in PRESET_VENUES:
        return PRESET_VENUES[cmap.preset]
    column = next((c for c in schema if normal_name(c) in VENUE_NAMES), None)
    if column is not None and column not in cmap.stream_columns:
        values = distinct_text(path, cmap.names, dialect, column, 2, SAMPLE_ROWS)
        if len(values) == 1 and len(values[0]) > 2 and not values[0].isdigit():
            return values[0].lower()
    normal = {normal_name(n) for n in schema}
    return next((venue for signs, venue in VENDOR_VENUES.items() if signs <= normal), None)


def _plan_streams(plan: Any) -> set[str]:
    """The streams a plan's rows feed: its fixed stream, else its stream column's values in its first rows. An
    empty name (kdb+'s null symbol) is none: its rows are rejected as missing_stream, so they feed no stream."""
    cmap = getattr(plan, "columns", None)
    if not isinstance(cmap, ColumnMap):
        return set()
    if cmap.stream_col is None:
        return {name} if (name := cmap.stream or cmap.default_stream) else set()
    found = plan.frame.head(SAMPLE_ROWS).select(pl.col("stream").drop_nulls().unique().head(50)).collect()
    return set(found.to_series().to_list()) - {""}


def mixed_venues(plans: Sequence[Any]) -> list[str]:
    """A note per stream fed by files of several venues (Binance spot and Binance futures trades, a Bybit file:
    all `BTCUSDT`): one stream of several markets' prices reads as a jumpy market. Files of one venue (its trades
    and its quotes) are one market's."""
    venued = [(plan, _venue_of(plan)) for plan in plans]
    if len({venue for _, venue in venued if venue is not None}) < 2:
        return []
    fed: dict[str, dict[str | None, list[str]]] = {}
    for plan, venue in venued:
        for stream in _plan_streams(plan):
            fed.setdefault(stream, {}).setdefault(venue, []).append(source_path(plan).name)
    notes = []
    for stream, venues in fed.items():
        known = {venue: files for venue, files in venues.items() if venue is not None}
        if len(known) > 1:  # every file feeding it named, those of no venue its layout tells too
            said = "; ".join(f"{venue} ({', '.join(files)})" for venue, files in known.items())
            if unknown := venues.get(None):
                said += f"; and {len(unknown)} file(s) of no known venue ({', '.join(unknown)})"
            notes.append(Caution(f"stream {stream} is fed by files of {len(known)} venues: {said}; each market has "
                                 f"its own prices, so one stream mixes them: give each file its own stream in a replay "
                                 f"list (an entry's columns with stream: NAME, or stream_col: a venue column plus the "
                                 f"symbol; docs/replay.md)"))
    return notes
