"""LSEG Tick History's `Qualifiers` column (`"AUC[GV3_FLAG];Opening auction[TR_TRD_FLAG];..."`): each print's
conditions, the venue's codes with the field each came from in brackets. Detection reads no row by it, so opening
and closing auction prints replay as continuous trading; said in a note, as other vendors' condition columns are
(TAQ's TR_SCOND, Polygon's conditions: connectors/correction_notes.py), naming the auction prints found and the
keep filter that leaves them out (review373 #5). The filter refines the detected map: LSEG's `Type` filter stays
(connectors/detected_map.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl

from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.file_scans import is_csv, scan_file
from engine.quoting import quoted

QUALIFIER_NAMES = ("qualifiers",)
# An auction print's marks: a venue's GV3 code for an auction (AUC opening, CLS closing, ...) or LSEG's words for one
AUCTION = r"(?i)auction|\b(?:AUC|CLS|OPN|CLO|IAU|VAU)\[GV3_FLAG\]"
CODE = r"[A-Za-z0-9_]+\[GV3_FLAG\]"  # the venue's own code for the print, first in the cell


def qualifier_note(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                   dialect: Dialect | None) -> list[str]:
    """A detected trades layout beside LSEG's `Qualifiers` that no keep reads: said, with the number of trade rows
    it marks as auction prints, their codes and the keep filter that leaves them out."""
    column = next((c for c in schema if normal_name(c) in QUALIFIER_NAMES), None)
    if cmap.price is None or column is None or column in {*cmap.source_columns(), *(cmap.keep or ())} or \
            schema[column].is_nested():  # (lists of records: no text of LSEG's to read)
        return []
    overrides = {column: pl.String, cmap.price: pl.String} if is_csv(path) else None
    cells = pl.col(column).cast(pl.String)
    priced = pl.col(cmap.price).cast(pl.String).str.strip_chars().fill_null("") != ""
    auction = priced & cells.str.contains(AUCTION).fill_null(False)
    found = scan_file(path, names, dialect, overrides).select(
        rows=auction.sum(), written=(cells.str.strip_chars().str.strip_chars('"').fill_null("") != "").any(),
        codes=cells.filter(auction).str.extract(f"({CODE})", 1).drop_nulls().unique().sort().implode()).collect()
    rows, written, codes = found.row(0)
    if not written:  # an empty column says nothing of any print
        return []
    if not rows:
        return [f"{path.name}: LSEG's qualifiers are not read (column {quoted(column)}): a print's conditions "
                f"replay as trades like any other; a keep filter on the column leaves prints out by their codes "
                f"(keep: {{{column}: {{not_contains: [CODE[GV3_FLAG]]}}}}, docs/replay.md, `keep`)"]
    listed = ", ".join(f'"{c}"' for c in codes) or '"auction"'
    return [f"{path.name}: LSEG's qualifiers are not read (column {quoted(column)}): {rows} trade row(s) are marked "
            f"as auction prints ({', '.join(codes) or 'auction'}: opening, closing or intraday auctions), which "
            f"replay as continuous trading like any other print; to leave them out, --columns FILE.yaml with "
            f"keep: {{{column}: {{not_contains: [{listed}]}}}} (it refines the detected map, its Type filter kept; "
            f"docs/replay.md, `keep`)"]
