"""MiFID II's Market Model Typology (MMT v3) "Trading Mode" flag, which EU venues' and APAs' trade files carry per
print (Euronext's, Deutsche Börse's, Cboe Europe's `MMT Trading Mode`): `2` continuous trading, `O` and `K` the
scheduled opening and closing auctions' uncrosses, `I` an intraday one, `U` an unscheduled one (a volatility
interruption's), `1` an auction of no stated kind. Detection reads no row by it, so an auction's uncross (45,000
shares among continuous prints of a few hundred) replays as continuous trading; said in a note that counts the
auction prints, as LSEG's `Qualifiers` are (connectors/lseg_qualifiers.py), with the keep that leaves them out
(review440 #10: the EU's standard flag got no word where LSEG's did)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl

from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.file_scans import is_csv, scan_file
from engine.quoting import quoted

MODE_NAMES = ("mmt_trading_mode", "trading_mode", "tradingmode", "mmt_level_2", "mmt_level2")
AUCTION_MODES = {"O": "opening auction", "K": "closing auction", "I": "intraday auction",
                 "U": "unscheduled auction", "1": "auction"}


def trading_mode_note(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                      dialect: Dialect | None) -> list[str]:
    """A detected trades layout beside an MMT `Trading Mode` column that no keep reads, whose trade rows include
    auction prints: said, with their number and modes and the keep filter that leaves them out."""
    column = next((c for c in schema if normal_name(c) in MODE_NAMES), None)
    if cmap.price is None or column is None or column in {*cmap.source_columns(), *(cmap.keep or ())} or \
            schema[column].is_nested():
        return []
    overrides = {column: pl.String, cmap.price: pl.String} if is_csv(path) else None
    modes = pl.col(column).cast(pl.String).str.strip_chars()
    priced = pl.col(cmap.price).cast(pl.String).str.strip_chars().fill_null("") != ""
    auction = priced & modes.is_in(list(AUCTION_MODES)).fill_null(False)
    rows, found = scan_file(path, names, dialect, overrides).select(
        rows=auction.sum(), modes=modes.filter(auction).unique().sort().implode()).collect().row(0)
    if not rows:
        return []
    said = ", ".join(f"{mode} {AUCTION_MODES[mode]}" for mode in found)
    listed = ", ".join(f'"{mode}"' for mode in found)
    return [f"{path.name}: MiFID II trading modes are not read (column {quoted(column)}): {rows} trade row(s) are "
            f"marked as auction prints ({said}), which replay as continuous trading like any other print; to leave "
            f"them out, --columns FILE.yaml with keep: {{{quoted(column)}: {{not: [{listed}]}}}} (docs/replay.md, "
            f"`keep`)"]
