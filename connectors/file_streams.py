"""The streams a file's rows go to, unless the map given names them: a column of names, a Bloomberg title
block's security, a contract beside its root, an LME prompt beside its metal, the file's name; with the notes that
say how, and the refusals of a fixed name that is also a column and of a REST dump that names no instrument.
Split from connectors/file_layout.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from connectors import json_lines
from connectors.column_map import ColumnMap
from connectors.contract_column import contract_beside_root, levels_split_by
from connectors.csv_dialect import Dialect
from connectors.delivery_hours import repeated_delivery_hours
from connectors.bloomberg_names import bdh_stream
from connectors.file_names import stream_of, symbol_in_name
from connectors.instrument_identifiers import instrument_column, name_column, shorn_codes, unread_identifiers
from connectors.lme_prompts import prompt_beside_metal
from connectors.json_lines import is_json_lines
from connectors.map_options import Refine
from connectors.shell_words import columns_option
from engine.quoting import quoted


def stream_of_file(path: Path, spec: ColumnMap | Refine | None, cmap: ColumnMap, schema: Mapping[str, Any],
                   names: Sequence[str] | None, dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """The map with the file's streams named (a column of names, a contract beside its root, the file's name),
    unless the map given names them, with the notes that say how; a ValueError for a fixed name that is also a
    column, or a REST dump that names no instrument."""
    if cmap.stream is not None and cmap.stream_col is None and \
            (column := next((n for n in schema if n.strip().lower() == cmap.stream.strip().lower()), None)):
        raise ValueError(f"{path}: the column map names one fixed stream, {quoted(cmap.stream)}, which is also a "
                         "column of the file: every row would go to that one stream. For a stream per value of the "
                         f"column give stream_col: {column} (inline: --columns ...,stream={column}); a fixed name "
                         "that is no column is stream: NAME (inline: stream_name=NAME)")
    named = _stream_named(spec)
    if not named and cmap.stream is None and cmap.stream_col is None and cmap.default_stream is None:
        cmap, stream_notes = name_column(path, cmap, schema, names, dialect)
    else:
        stream_notes = []
    if not named:  # no ticker column: the security a BDH title block names
        cmap, title_notes = bdh_stream(path, cmap, dialect.banner if dialect is not None else ())
        stream_notes += title_notes
    cmap, found_notes = stream_of(path, cmap, schema, detected=not isinstance(spec, ColumnMap))
    stream_notes += found_notes
    if not named and not isinstance(spec, ColumnMap):  # `symbol` ES beside `contract` ESZ4/ESH5: a stream each
        fixed = cmap.stream
        cmap, prompt_notes = prompt_beside_metal(path, cmap, schema, names, dialect)  # CAD 3M and CAD Cash
        stream_notes += prompt_notes
        cmap, contract_notes = contract_beside_root(path, cmap, schema, names, dialect)
        if fixed is not None and cmap.stream is None:  # a product and its contracts name the streams, not the file
            stream_notes = [n for n in stream_notes if n not in found_notes]
        stream_notes += contract_notes
    if not isinstance(spec, ColumnMap):  # a stream named by --columns may still merge contracts (review441 #7)
        stream_notes += levels_split_by(path, cmap, schema, names, dialect)
    if not named and cmap.stream_col is None and is_json_lines(path) and json_lines.table(path).records and \
            symbol_in_name(path) is None:  # the file's stem would be the stream: "trades" says nothing
        if (found := instrument_column(path, cmap, schema, names, dialect)) is not None:  # a fixed name would merge
            column, values = found
            raise ValueError(f"{path}: a REST dump (one JSON array of records) whose records' column {quoted(column)} "
                             f"holds several values ({', '.join(values[:3])}, ...) that look like instruments, read "
                             f"by no known name: give {columns_option(f'stream={column}')} (a stream per value; "
                             f"docs/replay.md)")
        raise ValueError(f"{path}: a REST dump (one JSON array of records) whose records name no instrument, nor "
                         f"does its file name: give the stream, --columns stream_name=NAME (BTCUSDT, BTC-USD), or "
                         f"name the file after it (BTCUSDT-trades.json)")
    if cmap.stream_col is None:  # a fixed name too: it names the stream, not the file's one instrument
        stream_notes += unread_identifiers(path, cmap, schema, names, dialect, named)
    else:
        # (named by the user too: a delivery hour repeated is two contracts under one name either way)
        stream_notes += shorn_codes(path, cmap, schema, names, dialect) + \
            repeated_delivery_hours(path, cmap, names, dialect)
    return cmap, stream_notes


def _stream_named(spec: ColumnMap | Refine | None) -> bool:
    """Whether the map given names the stream (a fixed name or a column): then it is as the user said."""
    if isinstance(spec, ColumnMap):
        return spec.stream is not None or spec.stream_col is not None
    return isinstance(spec, Refine) and bool({"stream", "stream_col"} & set(spec.keys))
