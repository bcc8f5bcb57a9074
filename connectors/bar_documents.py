"""Bar (OHLCV) REST responses saved as they came, made a table of one row per bar for connectors/json_lines.py:
Binance's `/api/v3/klines` (one JSON array of 12-value arrays, no keys: named as the public klines files name
them) and Polygon's aggregates (`/v2/aggs/ticker/.../range/...`: one object whose `results` holds the bars under
Polygon's short keys `t,o,h,l,c,v,vw,n`, the symbol in `ticker`). Their maps and notes are connectors/
exchange_shapes.py's REST shapes; what a bar replays as is docs/replay.md's.
"""

from __future__ import annotations

import io
import json

import polars as pl

from connectors.presets import PRESET_MAPS

KLINE_NAMES = PRESET_MAPS["binance-public-klines"]["names"]
AGGREGATE_KEYS = frozenset({"t", "o", "h", "l", "c"})  # Polygon's bar keys (`v`, `vw`, `n` may be missing)
TICKER = "ticker"  # the column a Polygon response's symbol is written to, beside each bar


def bar_document(lines: list[bytes]) -> pl.DataFrame | None:
    """A Binance klines or Polygon aggregates response as a row per bar; None for any other file."""
    start = next((line.lstrip()[:1] for line in lines if line.strip()), b"")
    if start not in (b"[", b"{"):
        return None
    try:
        value = json.loads(b"\n".join(lines))
    except (ValueError, RecursionError):  # not one document (JSON lines): read as such elsewhere
        return None
    if isinstance(value, list) and value and all(_kline(row) for row in value):
        # values as Binance writes them (prices as text, times as ms): read where the map reads them, as a CSV's
        return pl.DataFrame([[str(v) for v in row] for row in value], schema=list(KLINE_NAMES), orient="row")
    if isinstance(value, dict) and isinstance(bars := value.get("results"), list) and bars and \
            all(isinstance(bar, dict) and AGGREGATE_KEYS <= bar.keys() for bar in bars):
        frame = pl.read_json(io.BytesIO(json.dumps(bars).encode()), infer_schema_length=None)
        ticker = value.get(TICKER)
        return frame.with_columns(pl.lit(ticker if isinstance(ticker, str) else None, pl.String).alias(TICKER))
    return None


def _kline(row: object) -> bool:
    """A Binance kline: 12 values, the open and close times integers (ms; us from 2025)."""
    return isinstance(row, list) and len(row) == len(KLINE_NAMES) and isinstance(row[0], int) and \
        isinstance(row[6], int)
