"""Where every reading of a map's event times starts: the time column as one expression (a date column and a time
column joined as text, `ts: Date+Time`), and naive wall-clock datetimes read as instants in a zone, summer time's
skipped and repeated hours included. Split from connectors/event_time.py, which builds the expressions that read
the times."""

from __future__ import annotations

import polars as pl

from connectors.column_map import ColumnMap


def local_instants(expr: pl.Expr, tz: str | None, second_pass: pl.Expr | None = None) -> pl.Expr:
    """Naive wall-clock datetimes -> instants in `tz` (None: UTC). A time skipped by the switch forward to summer
    time becomes null (missing_field). A time in the hour repeated when it ends is read at the earlier instant,
    or at the later one on the rows `second_pass` marks (connectors/repeated_hour.py tells them)."""
    if tz is None:
        return expr
    ambiguous = "earliest" if second_pass is None else \
        pl.when(second_pass).then(pl.lit("latest")).otherwise(pl.lit("earliest"))
    return expr.dt.replace_time_zone(tz, ambiguous=ambiguous, non_existent="null")


def time_column(cmap: ColumnMap) -> pl.Expr:
    """The time column, or the text of date and time columns joined by a space (`ts: Date+Time`)."""
    if len(cmap.ts_columns) == 1:
        return pl.col(cmap.ts)
    return pl.concat_str([pl.col(c).cast(pl.String).str.strip_chars() for c in cmap.ts_columns], separator=" ")
