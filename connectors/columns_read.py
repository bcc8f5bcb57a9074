"""What `layout` (connectors/file_layout.py) reads of a file before any map is applied (`ColumnsRead`): the names
its columns are read by (given, its header's, or a header-less guess), its CSV dialect and its schema; handed to the
detection (connectors/detected_map.py) and to the notes that say how the file was read."""

from __future__ import annotations

from typing import NamedTuple

from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect


class ColumnsRead(NamedTuple):
    """A file's columns as `layout` first reads them: before any map is applied."""

    names: tuple[str, ...] | list[str] | None  # the column names it is read by (None: its header's)
    given_names: tuple[str, ...] | list[str] | None  # the names given (a preset's, --csv-names), if any
    guessed: ColumnMap | None  # a header-less CSV's layout, guessed from its rows
    how: str  # what the guess read it as
    dialect: Dialect | None  # a CSV's
    schema: dict  # its columns and their types
    header_notes: list[str]  # a header skipped for the names given
