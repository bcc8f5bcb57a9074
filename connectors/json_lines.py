"""JSON-lines tick files (`.jsonl`, `.ndjson`, `.json` of one object per line, and `.gz` of them): captures of
exchange websocket messages, read as a table of their objects' top-level fields; and a file of one JSON array of
objects (a REST response saved as it came), a row per object.

A file is parsed once (polars `read_ndjson`, every line's keys unified; `read_json` for one array) into a Parquet
copy in a private temporary folder, so that the replay's scans, layout detection and rejects (connectors/replay.py)
read it as any Parquet file, but name the `.jsonl` and its lines (`JsonLinesTable.where`: a row is its line, its
message's line when a message holds several ticks, or a REST dump's record). A line that is not JSON, or not an
object, is an empty row there and a reject (`bad_lines`); a blank line is an empty row, skipped. Numbers written
as strings (`"43000.10"`, as exchanges send them) stay text in the copy and are read as numbers where the map reads
them, as a CSV's cells are.

Messages holding their ticks in an array under `data` (OKX, Bybit, Kraken v2) become one row per tick, the
message's fields beside; a message without ticks (a subscription ack, a heartbeat) is an empty row, counted as
filtered_out (`skipped`). Exchange layouts are known by their keys, and read with their map, said in a note:
`shape_of` (Binance trade/aggTrade events, also inside a combined stream's `{"stream": ..., "data": {...}}`,
Binance bookTicker, Coinbase Exchange `match`/`last_match`), `array_shape_of` (OKX trades, bbo-tbt and tickers,
Bybit publicTrade, Kraken v2 trade, by their channel) and `rest_shape_of` (Binance trades and aggTrades, Coinbase
Exchange trades, as their REST endpoints return them).
"""

from __future__ import annotations

import atexit
import gzip
import io
import json
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field, replace
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
    records = _one_array(lines)
    frame, bad = (records, {}) if records is not None else _objects(path, lines)
    line_of, tickless, from_arrays = None, {}, False
    if "data" in frame.columns and isinstance(frame.schema["data"], pl.List) and \
            isinstance(frame.schema["data"].inner, pl.Struct):
        frame, line_of, bad, tickless = _ticks_of_messages(frame, bad)
        from_arrays = True
    if "data" in frame.columns and isinstance(frame.schema["data"], pl.Struct) and \
            not {f.name for f in frame.schema["data"].fields} & (set(frame.columns) - {"data"}):
        frame = frame.unnest("data")  # Binance's combined stream: {"stream": "btcusdt@trade", "data": {...}}
        wrapped = True
    else:
        wrapped = False
    frame = _best_levels(_epoch_text_as_integers(frame))
    objects = frame.height - frame.select(pl.all_horizontal(pl.all().is_null()).sum()).item() if frame.width else 0
    if bad and objects == 0 and not tickless:
        row, why = next(iter(bad.items()))
        raise ValueError(f"{path}: no line is a JSON object (line {row + 1}: {why}); replay reads one JSON object per "
                         f"line, or a file of one JSON array of objects")
    folder = Path(tempfile.mkdtemp(prefix="flashtick-jsonl-"))
    copy = folder / f"{path.name}.parquet"
    frame.write_parquet(copy, compression="lz4")
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
    if bad:
        notes.append(f"{path.name}: {len(bad)} line(s) are not JSON objects: each rejected as {NOT_JSON} (the first "
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


TICKLESS = ("event", "op", "method", "channel", "type", "ret_msg")  # what a message without ticks is, first found


def _ticks_of_messages(frame: pl.DataFrame, bad: dict[int, str]
                       ) -> tuple[pl.DataFrame, pl.Series, dict[int, str], dict[int, str]]:
    """Messages holding their ticks in an array under `data` (OKX, Bybit, Kraken v2) as one row per tick: the
    tick's fields, then the message's (its top-level fields and those of a struct such as OKX's `arg`) where the
    tick has none of that name (OKX's bbo-tbt ticks take `instId` from `arg`); Bybit's `topic` gives `channel`,
    its first part (`publicTrade`). Returns the rows, each row's line (0-based), the lines that are no object
    (`bad`) by their row, and what each message without ticks is (an ack, a heartbeat) by its row, an empty one."""
    ticked = pl.col("data").list.len() > 0
    whats = [pl.col(c).cast(pl.String) for c in TICKLESS if c in frame.columns and frame.schema[c] == pl.String]
    frame = frame.with_row_index("_line").with_columns(
        data=pl.when(ticked).then("data"),  # no ticks (null, []): one empty row, which explode would drop for []
        _tickless=pl.when(~ticked.fill_null(False)).then(pl.coalesce(*whats, pl.lit("message without ticks"))))
    frame = frame.explode("data")
    empty = frame.with_row_index("_row").filter(pl.col("data").is_null()).select("_row", "_line", "_tickless")
    tickless = {row: what for row, line, what in empty.iter_rows() if what is not None and line not in bad}
    bad = {row: bad[line] for row, line, _ in empty.iter_rows() if line in bad}
    ticks = frame.select(pl.col("data").struct.unnest())
    message = frame.drop("data", "_line", "_tickless")
    for name, dtype in message.schema.items():
        if isinstance(dtype, pl.Struct):  # OKX's arg: {"channel": "trades", "instId": "BTC-USDT"}
            message = message.drop(name).hstack(message.select(pl.col(name).struct.unnest()).drop(
                [f.name for f in dtype.fields if f.name in message.columns], strict=False))
    if "topic" in message.columns and "channel" not in message.columns and message.schema["topic"] == pl.String:
        message = message.with_columns(channel=pl.col("topic").str.split(".").list.first())
    rows = ticks.hstack(message.drop([c for c in message.columns if c in ticks.columns]))
    has_tick = frame["data"].is_not_null()
    rows = rows.select(pl.when(has_tick).then(pl.col(c)).alias(c) for c in rows.columns)
    return rows, frame["_line"], bad, tickless


def _best_levels(frame: pl.DataFrame) -> pl.DataFrame:
    """Book levels as arrays (OKX's `"bids": [["43000.1", "2", "0", "3"]]`, best first) add the best level's
    price and size as columns of their own: `bids[0].price`, `bids[0].size` (Tardis.dev's names)."""
    levels = [c for c in ("bids", "asks") if c in frame.columns and isinstance(frame.schema[c], pl.List)
              and isinstance(frame.schema[c].inner, pl.List)]
    return frame.with_columns(pl.col(c).list.first().list.get(i, null_on_oob=True).alias(f"{c}[0].{part}")
                              for c in levels for i, part in enumerate(("price", "size")))


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


@dataclass(frozen=True)
class ArrayShape:
    """An exchange's ticks in arrays under `data`: the channels whose ticks it reads, the keys those ticks have,
    and the map that reads them (less its keep, which the channels found make)."""

    name: str
    channels: tuple[str, ...]
    keys: frozenset[str]
    columns: ColumnMap
    says: str


OKX_BOOK = dict(ts="ts", ts_unit=EPOCH, kind=QUOTE, stream_col="instId")
ARRAY_SHAPES = (  # trades first: a capture of several channels replays its trades
    ArrayShape("okx-trades", ("trades", "trades-all"), frozenset({"instId", "px", "sz", "side", "ts"}),
               ColumnMap(ts="ts", ts_unit=EPOCH, kind=TRADE, stream_col="instId", price="px", size="sz",
                         side="side"),
               "OKX trades: ts=ts (ms), stream=instId, price=px, size=sz, side (the taker's)"),
    ArrayShape("bybit-trades", ("publicTrade",), frozenset({"T", "s", "S", "v", "p"}),
               ColumnMap(ts="T", ts_unit=EPOCH, kind=TRADE, stream_col="s", price="p", size="v", side="S"),
               "Bybit publicTrade: ts=T (ms), stream=s, price=p, size=v, side=S (the taker's)"),
    ArrayShape("kraken-trades", ("trade",), frozenset({"symbol", "side", "price", "qty", "timestamp"}),
               ColumnMap(ts="timestamp", ts_unit=DETECT, kind=TRADE, stream_col="symbol", price="price", size="qty",
                         side="side"),
               "Kraken v2 trade: ts=timestamp (ISO), stream=symbol, price, size=qty, side (the taker's), the "
               "snapshot's trades (the last ones before subscribing) included"),
    ArrayShape("okx-bbo", ("bbo-tbt", "books5"), frozenset({"bids[0].price", "asks[0].price", "ts", "instId"}),
               ColumnMap(**OKX_BOOK, bid="bids[0].price", ask="asks[0].price", bid_size="bids[0].size",
                         ask_size="asks[0].size"),
               "OKX bbo-tbt: quotes of the best level, bids[0]/asks[0] price and size, ts=ts (ms), stream=instId"),
    ArrayShape("okx-tickers", ("tickers",), frozenset({"bidPx", "askPx", "bidSz", "askSz", "ts", "instId"}),
               ColumnMap(**OKX_BOOK, bid="bidPx", ask="askPx", bid_size="bidSz", ask_size="askSz"),
               "OKX tickers: quotes bid=bidPx, ask=askPx, bid_size=bidSz, ask_size=askSz, ts=ts (ms), "
               "stream=instId (their last trade is not read)"),
)


def array_shape_of(path: Path, frame: pl.DataFrame, tickless: Mapping[str, int]) -> Shape | None:
    """The exchange whose messages held the ticks in arrays under `data`, by their channel and keys, else None
    (read as any table: detected). Other channels' ticks are left out by the map's keep, counted as filtered_out;
    messages without ticks (`tickless`: what they are -> how many) too; the note names both."""
    frame = frame.filter(~pl.all_horizontal(pl.all().is_null()))  # messages without ticks, lines that are no object
    channels = _counts(frame, "channel", "ticks without a channel")
    for shape in ARRAY_SHAPES:
        kept = [c for c in shape.channels if c in channels]
        if kept and shape.keys <= set(frame.columns):
            others = _said({k: n for k, n in channels.items() if k not in kept})
            left = "".join(f"; {what} left out, counted as filtered_out: {said}" for what, said in (
                ("other channels' ticks", others), ("messages without ticks", _said(tickless))) if said)
            note = f"{path.name}: {shape.says}; one row per tick of each message's data{left}"
            return Shape(shape.name, replace(shape.columns, keep={"channel": kept}), note)
    return None


REST_SHAPES = (  # (name, keys, map, says): REST responses saved as they came, one JSON array of records
    ("binance-rest-trades", frozenset({"id", "price", "qty", "time", "isBuyerMaker"}),
     ColumnMap(ts="time", ts_unit=EPOCH, kind=TRADE, price="price", size="qty", side="isBuyerMaker",
               side_map=BUYER_MAKER),
     "Binance REST trades (/api/v3/trades): ts=time (ms), price, size=qty, side from isBuyerMaker (true: the buyer "
     "was the maker, so the aggressor sold)"),
    ("binance-rest-aggtrades", frozenset({"a", "p", "q", "f", "l", "T", "m"}),
     ColumnMap(ts="T", ts_unit=EPOCH, kind=TRADE, price="p", size="q", side="m", side_map=BUYER_MAKER),
     "Binance REST aggTrades (/api/v3/aggTrades): ts=T (ms), price=p, size=q, side from m (true: the aggressor "
     "sold)"),
    ("coinbase-rest-trades", frozenset({"trade_id", "side", "size", "price", "time"}), PRESETS["coinbase-trades"],
     "Coinbase Exchange REST trades (/products/{id}/trades): the coinbase-trades preset, side flipped (Coinbase's "
     "is the maker's: sell, an uptick, is a taker's buy)"),
)


def rest_shape_of(path: Path, frame: pl.DataFrame) -> Shape | None:
    """The REST response a file of one JSON array holds, by its records' keys, else None (detected)."""
    for name, keys, columns, says in REST_SHAPES:
        if keys <= set(frame.columns):
            return Shape(name, columns, f"{path.name}: {says}; one row per record of its JSON array")
    return None


def _counts(frame: pl.DataFrame, column: str, missing: str) -> dict[str, int]:
    """A text column's values -> their counts (null: `missing`), most frequent first."""
    if column not in frame.columns or frame.schema[column] != pl.String:
        return {}
    counted = frame[column].fill_null(missing).value_counts().sort(["count", column], descending=[True, False])
    return dict(zip(counted[column].to_list(), counted["count"].to_list()))


def _said(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{value} ({n})" for value, n in counts.items())
