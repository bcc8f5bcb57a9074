"""Bar (OHLCV) REST responses saved as they came, made a table of one row per bar for connectors/json_lines.py:
Binance's `/api/v3/klines` (one JSON array of 12-value arrays, no keys: named as the public klines files name
them) and Polygon's aggregates (`/v2/aggs/ticker/.../range/...`: one object whose `results` holds the bars under
Polygon's short keys `t,o,h,l,c,v,vw,n`, the symbol in `ticker`; the grouped daily answer,
`/v2/aggs/grouped/...`, names each bar's symbol in its own `T`). Polygon's pages (`next_url`) saved one after
another read as one answer, and an answer with no bars (`resultsCount: 0`, a weekend) as an empty table. Their maps
and notes are connectors/exchange_shapes.py's REST shapes; what a bar replays as is docs/replay.md's.
"""

from __future__ import annotations

import io
import json

import polars as pl

from connectors.presets import PRESET_MAPS

KLINE_NAMES = PRESET_MAPS["binance-public-klines"]["names"]
AGGREGATE_KEYS = frozenset({"t", "o", "h", "l", "c"})  # Polygon's bar keys (`v`, `vw`, `n` may be missing)
TICKER = "ticker"  # the column a Polygon response's symbol is written to, beside each bar
GROUPED_TICKER = "T"  # a grouped daily bar's own symbol (/v2/aggs/grouped/locale/us/market/stocks/{date})


def bar_document(lines: list[bytes]) -> pl.DataFrame | None:
    """A Binance klines or Polygon aggregates response (Polygon's: one page, or pages one after another) as a row
    per bar; None for any other file."""
    start = next((line.lstrip()[:1] for line in lines if line.strip()), b"")
    if start not in (b"[", b"{"):
        return None
    try:
        value = json.loads(b"\n".join(lines))
    except (ValueError, RecursionError):  # not one document: Polygon's pages a line each, else JSON lines
        return _aggregate_pages([line for line in lines if line.strip()])
    if isinstance(value, list) and value and all(_kline(row) for row in value):
        # values as Binance writes them (prices as text, times as ms): read where the map reads them, as a CSV's
        return pl.DataFrame([[str(v) for v in row] for row in value], schema=list(KLINE_NAMES), orient="row")
    return _aggregate_pages([b"\n".join(lines)])


def no_bars(frame: pl.DataFrame) -> bool:
    """Whether a table bar_document made is Polygon's answer with no bars (resultsCount 0: a day without trading)."""
    return frame.height == 0 and TICKER in frame.columns


def _aggregate_pages(pages: list[bytes]) -> pl.DataFrame | None:
    """Polygon aggregates answers (each a whole JSON object; a page with `next_url` followed by the next) as one
    table of their bars, each with its symbol: the answer's `ticker`, else the bar's own `T` (grouped daily); None
    unless every page is one, with at least one bar or a valid empty answer among them."""
    frames, empty = [], False
    for page in pages:
        try:
            value = json.loads(page)
        except (ValueError, RecursionError):
            return None
        if not isinstance(value, dict):
            return None
        bars = value.get("results")
        if bars is None and value.get("resultsCount") == 0 and value.get("status") == "OK":
            empty = True  # (Polygon leaves `results` out of an answer with none)
            continue
        if not isinstance(bars, list) or not all(isinstance(bar, dict) and AGGREGATE_KEYS <= bar.keys()
                                                 for bar in bars):
            return None
        if not bars:
            empty = True
            continue
        frame = pl.read_json(io.BytesIO(json.dumps(bars).encode()), infer_schema_length=None)
        ticker = value.get(TICKER)
        symbol = pl.lit(ticker, pl.String) if isinstance(ticker, str) else \
            pl.col(GROUPED_TICKER).cast(pl.String) if GROUPED_TICKER in frame.columns else pl.lit(None, pl.String)
        frames.append(frame.with_columns(symbol.alias(TICKER)))
    if frames:
        return pl.concat(frames, how="diagonal_relaxed")
    if empty:
        bar_keys = sorted(AGGREGATE_KEYS | {"v"})
        schema = {key: pl.Int64 if key == "t" else pl.Float64 for key in bar_keys}
        return pl.DataFrame(schema=schema | {TICKER: pl.String})
    return None


def _kline(row: object) -> bool:
    """A Binance kline: 12 values, the open and close times integers (ms; us from 2025)."""
    return isinstance(row, list) and len(row) == len(KLINE_NAMES) and isinstance(row[0], int) and \
        isinstance(row[6], int)
