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
Deribit and Kraken v2 messages; Binance and Coinbase REST dumps) are known by their keys
(connectors/exchange_shapes.py) and read with their map, said in a note.

Messages reshaped to a row per tick are connectors/json_messages.py; exchange-written values made columns,
connectors/json_columns.py.
"""

from __future__ import annotations

import atexit
import gzip
import io
import itertools
import json
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import polars as pl

from connectors.archives import truncation_named
from connectors.column_map import ColumnMap
from connectors.exchange_shapes import BINANCE_BOOK_KEYS, Shape, array_shape_of, rest_shape_of, shape_of
from connectors.json_columns import best_levels, epoch_text_as_integers
from connectors.json_messages import (
    keyed_records, nested_arrays, subscription_params, symbol_of_channel, ticks_in_arrays, ticks_of_messages,
)
from connectors.map_vocabulary import DETECT
from connectors.ticks import QUOTE
from engine.rust_paths import rust_path

# what other modules import from here (nested_arrays lives in connectors/json_messages.py)
__all__ = ["DUPLICATE_KEY", "JSON_LINES_SUFFIXES", "NOT_JSON", "JsonLinesTable", "Opened", "is_json_lines",
           "nested_arrays", "table"]

JSON_LINES_SUFFIXES = (".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz")
NOT_JSON = "not_json"  # the reject reason of a line that is not a JSON object
DUPLICATE_KEY = "duplicate_key"  # a line with a key twice in one object: the wire's reason for a tick map's


def is_json_lines(path: Path) -> bool:
    return path.name.lower().endswith(JSON_LINES_SUFFIXES)


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


def _lines(path: Path) -> list[bytes]:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    with truncation_named(path):  # a cut .jsonl.gz: named, and said to be cut short
        try:
            with opener(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ValueError(f"{path}: cannot read it: {e}") from None
    lines = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    return lines[:-1] if lines and not lines[-1].strip() else lines


# Every JSON string of a line, a key's with its colon: scanned from the line's start, each match begins at a string's
# opening quote (a quote outside strings opens one), so a key is never read out of a value's text
JSON_STRING = r'"(?:[^"\\]|\\.)*"\s*:?'


def _may_repeat_keys(lines: list[bytes]) -> set[int]:
    """The rows whose line may hold a key twice in one object: a key's text twice in the line (at any depth, so a
    message's array of ticks of the same keys is one), or a backslash (a key written escaped, `"\\u0070"` = `"p"`).
    polars' read keeps the first of two values without a word. A Python parse of every line would tell, at about
    three times polars' read (200k Binance trades: 2.1 s against 0.75 s); this scan costs about polars' read (there,
    +0.6 s on a 2.9 s replay), and only its lines are parsed again to tell (`_unique_pairs`): none of a flat file's
    clean lines, but each line of a file whose messages hold arrays of ticks (200k OKX messages of 3: +4 s on 16 s),
    a trade-off taken for an exact check."""
    try:
        texts = pl.Series(lines, dtype=pl.Binary).cast(pl.String)
    except pl.exceptions.ComputeError:  # a line not UTF-8: a file polars does not read, each line parsed in Python
        return set(range(len(lines)))
    keys = texts.str.extract_all(JSON_STRING).list.eval(
        pl.element().filter(pl.element().str.ends_with(":")).str.strip_chars_end(": \t\r\n"))
    maybe = (keys.list.n_unique() != keys.list.len()) | texts.str.contains("\\", literal=True)
    return set(maybe.arg_true().to_list())


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict:
    """An object's pairs as a dict (json's `object_pairs_hook`), refusing a key given twice in one object."""
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        keys = [key for key, _ in pairs]
        twice = next(key for key in keys if keys.count(key) > 1)
        raise _RepeatedKey(twice, [value for key, value in pairs if key == twice])
    return mapping


def _repeats_a_key(line: bytes) -> bool:
    """Whether a line (that polars read) holds a key twice in one object."""
    try:
        json.loads(line, object_pairs_hook=_unique_pairs)
    except _RepeatedKey:
        return True
    except (ValueError, RecursionError):  # not for polars to have read: the line by line pass says what it is
        return True
    return False


class _RepeatedKey(Exception):
    def __init__(self, key: str, values: list[Any]) -> None:
        shown = ", ".join(repr(value)[:34] for value in values[:4])
        super().__init__(f"key {key[:34]!r} given more than once in one object ({shown}): which value was meant "
                         f"cannot be told")


def _objects(path: Path, lines: list[bytes]) -> tuple[pl.DataFrame, dict[int, tuple[str, str]]]:
    """One row per line: its object's top-level fields; an empty row for a blank line, one that is no object, or
    one with a key twice in an object."""
    data = b"\n".join(lines)
    recheck = _may_repeat_keys(lines)
    try:  # most files are clean: polars alone (it skips blank lines, so a height short of the lines is not clean)
        frame = pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
        if frame.height == len(lines) and not any(_repeats_a_key(lines[row]) for row in sorted(recheck)):
            return frame, {}
    except pl.exceptions.PolarsError:
        pass
    fixed, bad = [], {}
    for row, line in enumerate(lines):
        text = line.strip()
        if not text:
            fixed.append(b"{}")
            continue
        shown = repr(text[:60].decode(errors='replace'))
        try:
            value = json.loads(text, object_pairs_hook=_unique_pairs if row in recheck else None)
        except RecursionError:  # a line of 200,000 '[': one bad row, as a line that is not JSON is, not the file's end
            bad[row] = NOT_JSON, f"nested deeper than a tick's object is read ({len(text):,} bytes): {shown}"
            fixed.append(b"{}")
            continue
        except _RepeatedKey as e:
            bad[row] = DUPLICATE_KEY, f"{e}: {shown}"
            fixed.append(b"{}")
            continue
        except ValueError as e:
            why = f"not JSON ({e.msg}, column {e.colno})" if isinstance(e, json.JSONDecodeError) else "not UTF-8"
            bad[row] = NOT_JSON, f"{why}: {shown}"
            fixed.append(b"{}")
            continue
        if not isinstance(value, dict):
            bad[row] = NOT_JSON, f"a JSON {type(value).__name__.replace('dict', 'object')}, not an object: {shown}"
            fixed.append(b"{}")
            continue
        fixed.append(text)
    try:
        return pl.read_ndjson(io.BytesIO(b"\n".join(fixed)), infer_schema_length=None), bad
    except pl.exceptions.PolarsError as e:
        raise ValueError(f"{path}: its objects do not read as one table ({str(e).splitlines()[0]}): a field holds "
                         f"an object on some lines and a list on others") from None


def _convert(path: Path) -> JsonLinesTable:
    lines = _lines(path)
    records = _one_array(lines)
    frame, bad = _records_read(records, lines) if records is not None else _objects(path, lines)
    line_of, tickless, from_arrays = None, {}, False
    frame = keyed_records(subscription_params(frame))
    named = "symbol" not in frame.columns
    frame = symbol_of_channel(frame)
    named = named and "symbol" in frame.columns  # HTX's: said in a note, as no field of the file holds it
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
    frame = best_levels(epoch_text_as_integers(frame))
    objects = frame.height - frame.select(pl.all_horizontal(pl.all().is_null()).sum()).item() if frame.width else 0
    if bad and objects == 0 and not tickless and all(reason == NOT_JSON for reason, _ in bad.values()):
        row, (_, why) = next(iter(bad.items()))
        raise ValueError(f"{path}: no line is a JSON object (line {row + 1}: {why}); replay reads one JSON object per "
                         f"line, or a file of one JSON array of objects")
    folder = Path(tempfile.mkdtemp(prefix="flashtick-jsonl-"))
    copy = folder / f"{path.name}.parquet"
    frame.write_parquet(rust_path(copy), compression="lz4")
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
    if named:
        notes.append(f"{path.name}: its messages name their instrument only in 'ch' (market.btcusdt.trade.detail): "
                     f"its second part read as their 'symbol'")
    if not_json := sum(reason == NOT_JSON for reason, _ in bad.values()):
        notes.append(f"{path.name}: {not_json} line(s) are not JSON objects: each rejected as {NOT_JSON} (the first "
                     f"is named among the rejects), the others read")
    skipped = {row: f"a message without ticks ({what})" for row, what in tickless.items()}
    return JsonLinesTable(path, copy, bad, objects, shape, notes, line_of=line_of, skipped=skipped,
                          records=records is not None)


def _one_array(lines: list[bytes]) -> pl.DataFrame | None:
    """A file that is one JSON array of objects (a REST dump, `[{...}, {...}]`, on one line or many) as a row per
    object; None for any other file (also one of a JSON array a line: Kraken v1's messages, each a reject)."""
    start = next((line.lstrip()[:1] for line in lines if line.strip()), b"")
    if start != b"[":
        return None
    try:
        return pl.read_json(io.BytesIO(b"\n".join(lines)), infer_schema_length=None)
    except pl.exceptions.PolarsError:  # not one document, or an array of other values than objects
        return None


def _records_read(records: pl.DataFrame, lines: list[bytes]) -> tuple[pl.DataFrame, dict[int, tuple[str, str]]]:
    """A REST dump's records (`_one_array`), each record that holds a key twice in one object an empty row and a
    `duplicate_key` reject by its index, as such a line of a JSON-lines file is: polars kept the first value."""
    bad = _records_with_a_key_twice(b"\n".join(lines))
    if not bad:
        return records, bad
    kept = ~pl.int_range(pl.len()).is_in(list(bad))
    return records.select(pl.when(kept).then(pl.col(c)).alias(c) for c in records.columns), bad


def _records_with_a_key_twice(data: bytes) -> dict[int, tuple[str, str]]:
    """Record index -> (duplicate_key, why) for each record of a JSON array (one polars read) holding a key twice in
    one object, at any depth. The array is parsed again in Python, record by record, to tell: unlike a line of
    JSON lines, a record repeats its keys in the next (on one line) and may spread one object over several lines
    (pretty-printed), so no cheaper scan tells. A REST dump is a page or a few (1,000 records a page; 200k
    Binance trades, 32 MB: 2.4 s against 1.2 s without it)."""
    text = data.decode("utf-8-sig", errors="replace")
    repeats: list[_RepeatedKey] = []

    def pairs(items: list[tuple[str, Any]]) -> dict:
        try:
            return _unique_pairs(items)
        except _RepeatedKey as e:
            repeats.append(e)
            return {}

    decoder, space = json.JSONDecoder(object_pairs_hook=pairs), json.decoder.WHITESPACE
    bad: dict[int, tuple[str, str]] = {}
    at = space.match(text, text.index("[") + 1).end()
    try:
        for record in itertools.count():
            if text.startswith("]", at):
                break
            _, end = decoder.raw_decode(text, at)
            if repeats:
                shown = repr(" ".join(text[at : min(end, at + 200)].split())[:60])  # on one line
                line = text.count("\n", 0, at) + 1
                bad[record] = DUPLICATE_KEY, f"{repeats[0]} (the record at line {line}): {shown}"
                repeats.clear()
            at = space.match(text, end).end()
            at = space.match(text, at + 1).end() if text.startswith(",", at) else at
    except (ValueError, RecursionError):  # not for polars to have read: its read stands
        return bad
    return bad
