"""JSON-lines tick files (`.jsonl`, `.ndjson`, `.json` of one object per line, and `.gz` of them): captures of
exchange websocket messages, read as a table of their objects' top-level fields; and a file of one JSON array of
objects (a REST response saved as it came), a row per object.

A file is parsed once (polars `read_ndjson`, every line's keys unified; `read_json` for one array) into a Parquet
copy in a private temporary folder, so that the replay's scans, layout detection and rejects
(connectors/file_scans.py, file_layout.py, replay.py) read it as any Parquet file, but name the `.jsonl` and its
lines (`JsonLinesTable.where`: a row is its line, its message's line when a message holds several ticks, or a
REST dump's record). A line that is not JSON, or not an object, is an empty row there and a reject
(`bad_lines`), as is one with a key twice in an object (`duplicate_key`, as the wire says it: polars would keep the
first value, Python's json the last); a blank line is an empty row, skipped. Numbers written as strings
(`"43000.10"`, as exchanges send them) stay text in the copy and are read as numbers where the map reads them, as a
CSV's cells are.

Messages holding their ticks in an array under `data` (OKX, Bybit, Kraken v2; Deribit's JSON-RPC subscriptions under
`params.data`, HTX's under `tick.data` and, REST, `data[].data[]`; Alpaca's records under `trades`/`quotes`, keyed
by symbol) become one row per tick, the message's fields beside; a message without ticks (a subscription ack, a
heartbeat) is an empty row, counted as filtered_out (`skipped`). Exchange layouts (Binance, Coinbase, OKX, Bybit,
Deribit, Bitstamp and Kraken v2 messages, Kraken v1's trade arrays; Binance and Coinbase REST dumps) are known by
their keys (connectors/exchange_shapes.py) and read with their map, said in a note. A nested object's fields are
columns named by their path (`result.price`), a list of values is text (`12,37`), and a receive time written
before a line's JSON (hftbacktest's captures) is that message's `local_ts`.

Parsing the lines is connectors/json_objects.py (a key given twice: connectors/json_repeated_keys.py); messages
reshaped to a row per tick, connectors/json_messages.py; exchange-written values made columns,
connectors/json_columns.py. This module holds the table a replay reads and its lifetime. A capture of DTN IQFeed's
Level 1 messages (connectors/iqfeed_level1.py) is made such a table too: a row per line, read by its fixed map.
"""

from __future__ import annotations

import atexit
import functools
import gzip
import shutil
import tempfile
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import polars as pl

from connectors.bar_documents import bar_document, no_bars
from connectors.column_map import ColumnMap
from engine.disk_full import DiskFull, said_if_disk_full
from connectors.exchange_envelopes import book_fields_of_book_tickers, ticker_beside_matches, unwrapped_messages
from connectors.exchange_shapes import BINANCE_BOOK_KEYS, Shape, array_shape_of, rest_shape_of, shape_of
from connectors.json_columns import best_levels, epoch_text_as_integers, lists_as_text, nested_fields
from connectors.json_messages import (
    keyed_records, nested_arrays, subscription_params, symbol_of_bitstamp_channel, symbol_of_channel, ticks_in_arrays,
    ticks_of_messages,
)
from connectors.json_objects import (
    NOT_JSON, RECEIVE_PREFIX, RECEIVED, line_objects, one_array, pretty_documents, read_lines, records_read,
)
from connectors.json_repeated_keys import DUPLICATE_KEY
from connectors.iqfeed_level1 import LEVEL1_MAP, is_level1_capture, level1_table
from connectors.map_vocabulary import DETECT
from connectors.ticks import QUOTE
from engine.quoting import quoted
from engine.rust_paths import rust_path

# what other modules import from here (DUPLICATE_KEY, NOT_JSON and nested_arrays live in the modules above)
__all__ = ["DUPLICATE_KEY", "JSON_LINES_SUFFIXES", "NOT_JSON", "JsonLinesTable", "Opened", "is_json_lines",
           "nested_arrays", "table"]

JSON_LINES_SUFFIXES = (".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz")
# names read as JSON lines when their text is (`_json_text`): hftbacktest's collector writes `btcusdt_20240809.gz`,
# gzipped lines of `local_ts {message}`; a capture's `.log`. A `.gz` of another kind (`.csv.gz`, `.tar.gz`) is not
SNIFFED_SUFFIXES = (".gz", ".log")
OTHER_GZ_KINDS = (".csv.gz", ".tsv.gz", ".txt.gz", ".tar.gz", ".dbn.gz")
SNIFF_BYTES = 1 << 16  # of a sniffed file's text: its first line's start lies in them


def is_json_lines(path: Path) -> bool:
    """A JSON-lines file by its suffix, or a `.gz`/`.log` whose first line is a JSON object (after a receive
    time, as hftbacktest writes one)."""
    name = path.name.lower()
    if name.endswith(JSON_LINES_SUFFIXES) or is_level1_capture(path):  # (IQFeed's messages: a table the same way)
        return True
    if not name.endswith(SNIFFED_SUFFIXES) or name.endswith(OTHER_GZ_KINDS) or not path.is_file():
        return False
    stat = path.stat()
    return _json_text(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _json_text(path: str, size: int, mtime_ns: int) -> bool:
    """Whether a file's first line that is not blank starts a JSON object or array, a receive time before it or
    not; cached by size and modification time (the check is asked of a file many times). A `.gz` that does not
    decompress is not (its refusal names the suffixes replay reads)."""
    try:
        with (gzip.open if path.lower().endswith(".gz") else open)(path, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):
        return False
    first = next((line.strip() for line in head.removeprefix(b"\xef\xbb\xbf").split(b"\n") if line.strip()), b"")
    if (received := RECEIVE_PREFIX.match(first)) is not None:
        first = received[2]
    return first[:1] in (b"{", b"[")


@dataclass
class JsonLinesTable:
    """One JSON-lines file as a Parquet copy (`copy`), a row per line, tick (`line_of`) or record; alive until
    `close`."""

    path: Path
    copy: Path
    bad_lines: dict[int, tuple[str, str]]  # row -> (reason, why) its line is rejected: no JSON object, a key twice
    objects: int  # lines holding an object with at least one field
    shape: Shape | None
    notes: list[str] = field(default_factory=list)  # said however the file is mapped (the shape's: when read so)
    line_of: pl.Series | None = None  # row -> its message's line (0-based) when a message holds several ticks
    skipped: dict[int, str] = field(default_factory=dict)  # row -> why: a message without ticks, filtered_out
    records: bool = False  # the file is one JSON array (a REST dump): a row is a record, not a line
    users: int = 0
    stamp_day: str | None = None  # an IQFeed Level 1 capture's first day by its `T,` lines (YYYY-MM-DD)
    field_day: str | None = None  # ... by its lines' Most Recent Trade Date, where its field list selects it

    def where(self, row: int) -> str:
        """A row as a user finds it in the file: its line, or its record in a REST dump's array."""
        if self.records:
            return f"record {row + 1}"
        return f"line {(row if self.line_of is None else self.line_of[row]) + 1}"

    def columns_for(self, hints: Mapping[str, Any] | None) -> ColumnMap | None:
        """The map of a known shape (None: none, detect as any file), given the keys a user refines it with."""
        if self.shape is None or self.shape.columns is not None:
            return self.shape and self.shape.columns
        if hints and "ts" in hints:  # a bookTicker capture whose receive time the user named
            return ColumnMap(ts=hints["ts"], ts_unit=DETECT, kind=QUOTE, stream_col="s", bid="b", ask="a",
                             bid_size="B", ask_size="A")
        others = [c for c in pl.read_parquet_schema(rust_path(self.copy)) if c not in BINANCE_BOOK_KEYS]
        raise ValueError(f"{self.path}: Binance bookTicker messages (u, s, b, B, a, A) carry no time of their own, "
                         f"and replay orders ticks by time: name the capture's receive-time field with --columns "
                         f"ts=FIELD (fields beside the message's: {others or 'none'}); a capture without one cannot "
                         f"be replayed")

    def close(self) -> None:
        shutil.rmtree(self.copy.parent, ignore_errors=True)


_TABLES: dict[Path, tuple[tuple[int, int], JsonLinesTable]] = {}  # resolved path -> ((size, mtime), table)


def table(path: Path) -> JsonLinesTable:
    """The file's table, parsed on first use and again when the file changed (size or modification time)."""
    key, stat = path.resolve(), path.stat()
    found = _TABLES.get(key)
    if found is not None and found[0] == (stat.st_size, stat.st_mtime_ns):
        return found[1]
    if found is not None:
        found[1].close()
    made = _convert(path)
    _TABLES[key] = ((stat.st_size, stat.st_mtime_ns), made)
    return made


class Opened:
    """A replay's hold on a file's table: `close` removes the copy once no replay holds it (FileReplay.close)."""

    def __init__(self, path: Path) -> None:
        self.key = path.resolve()
        table(path).users += 1

    def close(self) -> None:
        found = _TABLES.get(self.key)
        if found is not None and self.key is not None:
            found[1].users -= 1
            if found[1].users <= 0:
                found[1].close()
                del _TABLES[self.key]
        self.key = None


@atexit.register
def _remove_copies() -> None:
    for _, made in _TABLES.values():
        made.close()


def _convert(path: Path) -> JsonLinesTable:
    lines = read_lines(path)
    if is_level1_capture(path):  # IQFeed's Level 1 messages: their ticks are what changed between them
        return _level1(path, lines)
    lines = pretty_documents(lines) or lines  # a body saved by `jq .`: one object spread over many lines
    lines = unwrapped_messages(lines)  # Coinbase Advanced Trade's events, Kraken v1's spread arrays
    records = one_array(lines)
    if records is None and (records := bar_document(lines)) is not None:  # Binance klines, Polygon aggregates
        frame, bad = records, {}
    else:
        frame, bad = records_read(records, lines) if records is not None else line_objects(path, lines)
    line_of, tickless, from_arrays = None, {}, False
    frame = keyed_records(subscription_params(frame))
    named = "symbol" not in frame.columns
    frame = symbol_of_channel(frame)
    named = named and "symbol" in frame.columns  # HTX's: said in a note, as no field of the file holds it
    frame = symbol_of_bitstamp_channel(frame)  # said in the Bitstamp shape's note
    if ticks_in_arrays(frame):
        frame, line_of, bad, tickless = ticks_of_messages(frame, bad)
        from_arrays = True
    if from_arrays and ticks_in_arrays(frame):  # HTX's REST: arrays of messages in `data`, each with its own
        frame, inner_line_of, bad, inner_tickless = ticks_of_messages(frame, bad)
        tickless = {row: tickless.get(inner, what) for row, (inner, what) in
                    ((row, (inner_line_of[row], what)) for row, what in inner_tickless.items())}
        line_of = line_of.gather(inner_line_of)
    if "data" in frame.columns and isinstance(frame.schema["data"], pl.Struct) and \
            not {f.name for f in frame.schema["data"].fields} & (set(frame.columns) - {"data"}):
        frame = frame.unnest("data")  # Binance's combined stream: {"stream": "btcusdt@trade", "data": {...}}
        wrapped = True
    else:
        wrapped = False
    frame = lists_as_text(best_levels(epoch_text_as_integers(nested_fields(frame))))
    frame = ticker_beside_matches(frame)  # Coinbase Exchange's ticker beside its matches: its quotes only
    frame = book_fields_of_book_tickers(frame)  # Binance's trades beside bookTickers: their ids are no quote
    objects = frame.height - frame.select(pl.all_horizontal(pl.all().is_null()).sum()).item() if frame.width else 0
    if bad and objects == 0 and not tickless and all(reason == NOT_JSON for reason, _ in bad.values()):
        row, (_, why) = next(iter(bad.items()))
        raise ValueError(f"{path}: no line is a JSON object (line {row + 1}: {why}); replay reads one JSON object per "
                         f"line, or a file of one JSON array of objects")
    copy = _written(path, frame)
    if records is not None:
        shape = rest_shape_of(path, frame)
    elif from_arrays:
        shape = array_shape_of(path, frame, dict(Counter(tickless.values()).most_common()))
    else:
        shape = shape_of(path, frame, wrapped)
    notes = []
    if from_arrays and shape is None:
        notes.append(f"{path.name}: its messages hold their ticks in arrays under 'data': one row per tick, with the "
                     f"message's own fields beside (a tick's field of the same name wins)")
    if RECEIVED in frame.columns and any(RECEIVE_PREFIX.match(line.strip()) for line in lines[:100]):
        stamped = shape is not None and shape.columns is not None and shape.columns.ts == RECEIVED
        how = "its ticks stamped with it" if stamped else f"--columns ts={RECEIVED} stamps the ticks with it"
        notes.append(f"{path.name}: each line starts with a receive time before its JSON message: read as the "
                     f"message's field {quoted(RECEIVED)} ({how})")
    if records is not None and no_bars(records):
        notes.append(f"{path.name}: a Polygon aggregates answer with no bars (resultsCount 0, status OK: a day "
                     f"without trading): nothing to replay from it")
    if named:
        notes.append(f"{path.name}: its messages name their instrument only in 'ch' (market.btcusdt.trade.detail): "
                     f"its second part read as their 'symbol'")
    if not_json := sum(reason == NOT_JSON for reason, _ in bad.values()):
        notes.append(f"{path.name}: {not_json} line(s) are not JSON objects: each rejected as {NOT_JSON} (the first "
                     f"is named among the rejects), the others read")
    skipped = {row: f"a message without ticks ({what})" for row, what in tickless.items()}
    return JsonLinesTable(path, copy, bad, objects, shape, notes, line_of=line_of, skipped=skipped,
                          records=records is not None)


def _level1(path: Path, lines: list[bytes]) -> JsonLinesTable:
    """A capture of IQFeed's Level 1 messages as its table (connectors/iqfeed_level1.py): a row per line, read by
    its fixed map."""
    read = level1_table([line.decode("utf-8", "replace").rstrip("\r") for line in lines])
    copy = _written(path, read.frame)
    objects = read.frame.height - read.frame.select(pl.all_horizontal(pl.all().is_null()).sum()).item()
    shape = Shape("iqfeed-level1", LEVEL1_MAP, f"{path.name}: {read.notes[0]}")
    return JsonLinesTable(path, copy, read.bad, objects, shape, read.notes[1:], skipped=read.tickless,
                          stamp_day=read.stamp_day, field_day=read.field_day)


def _written(path: Path, frame: pl.DataFrame) -> Path:
    """A frame's Parquet copy, in a private temporary folder of its own."""
    folder = Path(tempfile.mkdtemp(prefix="flashtick-jsonl-"))
    copy = folder / f"{path.name}.parquet"
    try:
        with said_if_disk_full(copy, copy):  # in the temporary folder (TMPDIR): polars' words named no file
            frame.write_parquet(rust_path(copy), compression="lz4")
    except DiskFull:
        shutil.rmtree(folder, ignore_errors=True)  # (its copy went with the error: no empty folder left behind)
        raise
    return copy
