"""JSON-lines tick files (`.jsonl`, `.ndjson`, `.json` of one object per line, and `.gz` of them): captures of
exchange websocket messages and REST dumps, read as a table of their objects' top-level fields.

A file is parsed once (polars `read_ndjson`, every line's keys unified) into a Parquet copy in a private temporary
folder, one row per line, so that a row number is the line's: the replay's scans, layout detection and rejects
(connectors/replay.py) then read it as any Parquet file, but name the `.jsonl` and its lines. A line that is not
JSON, or not an object, is an empty row there and a reject (`bad_lines`); a blank line is an empty row, skipped.
Numbers written as strings (`"43000.10"`, as exchanges send them) stay text in the copy and are read as numbers
where the map reads them, as a CSV's cells are.

Exchange websocket captures are known by their keys (`shape_of`), and read with their map, said in a note:
Binance trade/aggTrade events (also inside a combined stream's `{"stream": ..., "data": {...}}`), Binance
bookTicker, Coinbase Exchange `match`/`last_match` messages. Arrays of ticks under `data` (OKX, Bybit, Kraken v2)
are refused with the command that flattens them.
"""

from __future__ import annotations

import atexit
import gzip
import io
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import polars as pl

from connectors.column_map import BUYER_MAKER, DETECT, EPOCH, PRESETS, ColumnMap
from connectors.field_names import FIELD_NAMES, normal_name
from connectors.ticks import QUOTE, TRADE

JSON_LINES_SUFFIXES = (".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz")
NOT_JSON = "not_json"  # the reject reason of a line that is not a JSON object
BINANCE_TRADE_KEYS = frozenset({"e", "s", "p", "q", "T", "m"})  # + "t" (trade) or "a" (aggTrade)
BINANCE_TRADE_EVENTS = ("trade", "aggTrade")
BINANCE_BOOK_KEYS = frozenset({"u", "s", "b", "B", "a", "A"})
COINBASE_MATCH_KEYS = frozenset({"type", "product_id", "price", "size", "side", "time"})
COINBASE_MATCHES = ("match", "last_match")
FLATTEN = "flatten them first, one tick a line: jq -c '.data[]' {name} > flat.jsonl"


def is_json_lines(path: Path) -> bool:
    return path.name.lower().endswith(JSON_LINES_SUFFIXES)


@dataclass
class Shape:
    """An exchange's message layout, known by its keys: the map that reads it and the note that says so."""

    name: str
    columns: ColumnMap | None  # None: Binance bookTicker without a time field (`columns_for` asks for one)
    note: str


@dataclass
class JsonLinesTable:
    """One JSON-lines file as a Parquet copy (`copy`), row i its line i + 1; alive until `close`."""

    path: Path
    copy: Path
    bad_lines: dict[int, str]  # row -> why its line is no JSON object
    objects: int  # lines holding an object with at least one field
    shape: Shape | None
    notes: list[str] = field(default_factory=list)  # said however the file is mapped (the shape's: when read so)
    users: int = 0

    def columns_for(self, hints: Mapping[str, Any] | None) -> ColumnMap | None:
        """The map of a known shape (None: none, detect as any file), given the keys a user refines it with."""
        if self.shape is None or self.shape.columns is not None:
            return self.shape and self.shape.columns
        if hints and "ts" in hints:  # a bookTicker capture whose receive time the user named
            return ColumnMap(ts=hints["ts"], ts_unit=DETECT, kind=QUOTE, stream_col="s", bid="b", ask="a",
                             bid_size="B", ask_size="A")
        others = [c for c in pl.read_parquet_schema(self.copy) if c not in BINANCE_BOOK_KEYS]
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
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise ValueError(f"{path}: cannot read it: {e}") from None
    lines = data.removeprefix(b"\xef\xbb\xbf").split(b"\n")
    return lines[:-1] if lines and not lines[-1].strip() else lines


def _objects(path: Path, lines: list[bytes]) -> tuple[pl.DataFrame, dict[int, str]]:
    """One row per line: its object's top-level fields; an empty row for a blank line or one that is no object."""
    data = b"\n".join(lines)
    try:  # most files are clean: polars alone (it skips blank lines, so a height short of the lines is not clean)
        frame = pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
        if frame.height == len(lines):
            return frame, {}
    except pl.exceptions.PolarsError:
        pass
    fixed, bad = [], {}
    for row, line in enumerate(lines):
        text = line.strip()
        if not text:
            fixed.append(b"{}")
            continue
        try:
            value = json.loads(text)
        except ValueError as e:
            why = f"not JSON ({e.msg}, column {e.colno})" if isinstance(e, json.JSONDecodeError) else "not UTF-8"
            bad[row] = f"{why}: {text[:60].decode(errors='replace')!r}"
            fixed.append(b"{}")
            continue
        if not isinstance(value, dict):
            bad[row] = f"a JSON {type(value).__name__.replace('dict', 'object')}, not an object: " \
                       f"{text[:60].decode(errors='replace')!r}"
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
    frame, bad = _objects(path, lines)
    if "data" in frame.columns and isinstance(frame.schema["data"], pl.List):
        raise ValueError(f"{path}: its messages hold their ticks in arrays under 'data' (OKX's, Bybit's, Kraken "
                         f"v2's websocket messages), which replay does not read yet: {FLATTEN.format(name=path.name)}")
    if "data" in frame.columns and isinstance(frame.schema["data"], pl.Struct) and \
            not {f.name for f in frame.schema["data"].fields} & (set(frame.columns) - {"data"}):
        frame = frame.unnest("data")  # Binance's combined stream: {"stream": "btcusdt@trade", "data": {...}}
        wrapped = True
    else:
        wrapped = False
    frame = _epoch_text_as_integers(frame)
    objects = frame.height - frame.select(pl.all_horizontal(pl.all().is_null()).sum()).item() if frame.width else 0
    if bad and objects == 0:
        row, why = next(iter(bad.items()))
        raise ValueError(f"{path}: no line is a JSON object (line {row + 1}: {why}); replay reads one JSON object per "
                         f"line (a file of one JSON array: jq -c '.[]' {path.name} > flat.jsonl)")
    folder = Path(tempfile.mkdtemp(prefix="flashtick-jsonl-"))
    copy = folder / f"{path.name}.parquet"
    frame.write_parquet(copy, compression="lz4")
    shape = shape_of(path, frame, wrapped)
    notes = []
    if bad:
        notes.append(f"{path.name}: {len(bad)} line(s) are not JSON objects: each rejected as {NOT_JSON} (the first "
                     f"is named among the rejects), the others read")
    return JsonLinesTable(path, copy, bad, objects, shape, notes)


EPOCH_TEXT = r"^[1-9]\d{9,18}$"  # an epoch time in s, ms, us or ns as text: 10 to 19 digits


def _epoch_text_as_integers(frame: pl.DataFrame) -> pl.DataFrame:
    """Text columns holding only integers of an epoch time's magnitude (OKX's `"ts": "1704153600000"`), as
    integers: an epoch time sent as a string is the number, read as any epoch column is. No leading zero, so the
    integer writes back as the text (a code such as "0700" stays text)."""
    texts = [c for c, dtype in frame.schema.items() if dtype == pl.String]
    if not texts:
        return frame
    whole = frame.select(pl.col(c).drop_nulls().str.contains(EPOCH_TEXT).all() & pl.col(c).is_not_null().any()
                         for c in texts).row(0)
    numbers = {c: pl.col(c).cast(pl.Int64, strict=False) for c, yes in zip(texts, whole) if yes}
    cast = frame.with_columns(**numbers)
    return frame.with_columns(**{c: cast[c] for c in numbers if cast[c].null_count() == frame[c].null_count()})


def shape_of(path: Path, frame: pl.DataFrame, wrapped: bool = False) -> Shape | None:
    """The exchange message layout the objects' keys show, else None (read as any table: detected)."""
    columns = set(frame.columns)
    frame = frame.filter(~pl.all_horizontal(pl.all().is_null()))  # blank lines and lines that are no object
    within = " (inside a combined stream's data)" if wrapped else ""
    if BINANCE_TRADE_KEYS <= columns:
        events = _counts(frame, "e", "messages without e (bookTicker's)")
        kept = [e for e in BINANCE_TRADE_EVENTS if e in events]
        if kept:
            others = _said({k: n for k, n in events.items() if k not in kept})
            both = ("; it holds trade AND aggTrade events, each trade twice over: replay one of them (a replay "
                    "list's keep: {e: [trade]})" if len(kept) == 2 else "")
            note = (f"{path.name}: Binance {' and '.join(kept)} events{within}: ts=T (trade time, ms), stream=s, "
                    f"price=p, size=q, side from m (true: the buyer was the maker, so the aggressor sold)"
                    f"{'; other messages left out, counted as filtered_out: ' + others if others else ''}{both}")
            return Shape("binance-trade", ColumnMap(ts="T", ts_unit=EPOCH, kind=TRADE, stream_col="s", price="p",
                                                    size="q", side="m", side_map=BUYER_MAKER,
                                                    keep={"e": kept}), note)
    if BINANCE_BOOK_KEYS <= columns:
        stamp = "T" if "T" in columns else next((c for c in frame.columns if c not in BINANCE_BOOK_KEYS
                                                 and normal_name(c) in FIELD_NAMES["ts"]), None)
        note = (f"{path.name}: Binance bookTicker messages{within}: quotes, bid=b, ask=a, bid_size=B, ask_size=A, "
                f"stream=s, stamped with {stamp or 'the time field given'}")
        columns_map = None if stamp is None else ColumnMap(ts=stamp, ts_unit=DETECT, kind=QUOTE, stream_col="s",
                                                           bid="b", ask="a", bid_size="B", ask_size="A")
        return Shape("binance-bookticker", columns_map, note)
    if COINBASE_MATCH_KEYS <= columns and (types := _counts(frame, "type", "messages without type")) and \
            any(t in types for t in COINBASE_MATCHES):
        others = _said({k: n for k, n in types.items() if k not in COINBASE_MATCHES})
        note = (f"{path.name}: Coinbase Exchange websocket messages: match and last_match read as trades, their "
                f"side flipped (Coinbase's is the maker's), stream=product_id"
                f"{'; other types left out, counted as filtered_out: ' + others if others else ''}")
        return Shape("coinbase-matches", PRESETS["coinbase-matches"], note)
    return None


def _counts(frame: pl.DataFrame, column: str, missing: str) -> dict[str, int]:
    """A text column's values -> their counts (null: `missing`), most frequent first."""
    if column not in frame.columns or frame.schema[column] != pl.String:
        return {}
    counted = frame[column].fill_null(missing).value_counts().sort(["count", column], descending=[True, False])
    return dict(zip(counted[column].to_list(), counted["count"].to_list()))


def _said(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{value} ({n})" for value, n in counts.items())
