"""Databento DBN files (MBO, MBP-1 and trades schemas) reduced to our ticks: trades and top-of-book quotes.

A CME user's order-by-order file replays like a tick file (connectors/replay.py
reads `.dbn` and zstd-compressed `.dbn.zst` through this module), so nobody has
to write a book builder to run a backtest:

* a trade (action `T`) becomes a trade tick: price, size and the aggressor's
  side (`B` buy, `A` sell, `N` none);
* the best bid and offer become a quote tick whenever they change, at the end
  of an exchange event (the `F_LAST` flag), whatever record ends it (after a
  trade that does, at its record), while both sides have a price.
  MBO rebuilds the book from adds, cancels, modifies and clears (fills and
  trades leave the book alone: the venue sends the cancels); MBP-1 carries the
  top level in every record; the trades schema has trades alone.

Event time is `ts_recv`, the order a DBN file is sorted in; records of one ts_recv keep the file's order (the
capture's): their `sequence` is the venue's number per channel, no order across channels. The stream is the
instrument's symbol at the record's time, from the file's symbology (`Symbology`:
its metadata mappings, which hold over dates, or symbol mapping records), else the
numeric instrument id (an id mapped at other dates only is said at the end of a run: `Symbology.outside_notes`).
Prices are DBN's fixed-point integers (1e-9 units) turned into floats, plus a column map's `price_offset` when
given, for every stream or a stream's own (a calendar spread's prices below zero; with `hours`, the keys of a map
that apply to DBN's fixed layout). MBO cancels and fills of orders never added (a file that starts mid-session)
are counted and said at the end (`BookReducer.unseen_note`).

Beside it: the reduction of records to ticks (connectors/book_reducer.py, shared with Databento's CSV and
Parquet exports), the MBO order book it rebuilds (order_book.py) and the file's symbology (dbn_symbology.py).

The `databento-dbn` package is an optional extra (`pip install 'flashtick[dbn]'`),
imported when a DBN file is opened, so the base install imports this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from connectors.archives import TRUNCATED, truncation_named
from connectors.unreadable_files import UnreadableFile
from connectors.book_reducer import F_LAST, BookReducer
from connectors.expansion import expansion_limits, refuse_past_limits
from connectors.dbn_symbology import Symbology
from connectors.hours_window import Hours
from connectors.price_offsets import PriceOffset
from connectors.zstd_frames import cut_short
from engine.quoting import quoted

PRICE_SCALE = 1e9  # DBN prices are int64 in units of 1e-9
SCHEMAS = ("mbo", "mbp-1", "trades")
AGGRESSOR = {"B": "buy", "A": "sell"}  # a trade's side is the aggressor's; N (none) leaves side unset
MIN_READ_BYTES = 1 << 16
# compressed bytes of a .dbn.zst its decoder is given at a time: zstd expands at most ~32,768:1 (a 4-byte RLE block
# regenerates 128 KiB), so a bomb is refused within 128 MiB past a limit, never GBs of it held
ZST_STEP = 1 << 12


def _dbn() -> Any:
    try:
        import databento_dbn
    except ImportError:
        raise ImportError("reading DBN files needs the databento-dbn package: pip install 'flashtick[dbn]'") from None
    return databento_dbn


class DbnPlan:
    """One DBN file as replay reads it: decoded a block at a time, (record number, wire map) per tick."""

    sorted_on_read = False

    def __init__(self, path: Path, price_offset: PriceOffset | None = None, hours: str | None = None,
                 zero_bid: str | None = None) -> None:
        self.path, self.price_offset, self.hours = path, price_offset, hours
        self.origin: Path | None = None  # the zip archive it was unpacked from (connectors/opened_files.py)
        self.zero_bid_is_price = zero_bid == "price"  # OPRA's 0 bid: a price, or (the default) no bid
        # what the last read found, for the notes said at the end (`found_on_read`)
        self.symbols: Symbology | None = None
        self.reducer: BookReducer | None = None
        self.streams_read: set[str] = set()
        dbn = _dbn()
        metadata = _read_metadata(dbn, path)
        self.schema = str(metadata.schema.value) if metadata.schema is not None else None
        if self.schema not in SCHEMAS:
            raise ValueError(f"{path}: DBN schema {quoted(self.schema)} is not supported; replay reads "
                             f"{', '.join(SCHEMAS)} (order by order, top of book or trades)")
        self.mappings = metadata.mappings or {}
        # the times the file covers, as its metadata says (end None: not said, a live capture's)
        self.start, self.end = metadata.start, metadata.end

    def describe(self) -> dict[str, Any]:
        offset = {} if self.price_offset is None else {"price_offset": self.price_offset}  # a float, or per stream
        hours = {} if self.hours is None else {"hours": self.hours}
        zero_bid = {"zero_bid": "price"} if self.zero_bid_is_price else {}
        return {"format": "dbn", "schema": self.schema, **offset, **hours, **zero_bid}

    def row_count(self) -> None:
        return None  # unknown without decoding the whole (often compressed) file

    def stream_names(self) -> set[str] | None:
        """Every stream the file can make, as its metadata says: each mapped symbol, and the id of each mapped
        instrument whose mappings leave some of the file's times uncovered (its records then are named by its id:
        Sunday evening's session before a mapping that starts on Monday); None without mappings (ids alone: not
        known without decoding the file)."""
        spans = self.time_spans()
        if spans is not None:
            return set(spans)
        dated = Symbology(self.mappings).dated
        if not dated:
            return None
        # no end said: any mapped instrument may trade outside its mappings, so its id is a stream it can make
        return {symbol for spans in dated.values() for _, _, symbol in spans} | {str(i) for i in dated}

    @property
    def span(self) -> tuple[int, int] | None:
        """The first and last of the file's times, as its metadata says (None: it says no end)."""
        return None if self.end is None else (self.start, self.end - 1)

    def within(self, time_range: Any) -> DbnPlan:
        """A DBN file is decoded whole (its book builds from every record): replay checks each tick's time."""
        return self

    def time_spans(self) -> dict[str, tuple[int, int]] | None:
        """Each stream the file can make -> the first and last of the file's times (metadata start and end, ns) it
        can be named at: a mapped symbol over its intervals, a mapped instrument's id outside them. None when the
        metadata says no end, or the file maps no symbol (its ids are known only once decoded). Ends are
        exclusive (Databento's): the last time is the one before."""
        dated = Symbology(self.mappings).dated
        if self.end is None or not dated:
            return None
        spans: dict[str, tuple[int, int]] = {}

        def widen(stream: str, first: int, last: int) -> None:
            known = spans.get(stream, (first, last - 1))
            spans[stream] = (min(known[0], first), max(known[1], last - 1))

        for instrument_id, intervals in dated.items():
            uncovered = self.start  # the earliest of the file's times no interval seen so far covers
            for start, end, symbol in sorted(intervals):
                first, last = max(start, self.start), min(end, self.end)
                if first < last:
                    widen(symbol, first, last)
                if first > uncovered:
                    widen(str(instrument_id), uncovered, min(first, self.end))
                uncovered = max(uncovered, end)
            if uncovered < self.end:
                widen(str(instrument_id), uncovered, self.end)
        return spans

    def symbols_of_ids(self) -> dict[str, list[str]]:
        """Each mapped instrument id (as text) -> the symbols it is named by: a selection by id is pointed to them."""
        dated = Symbology(self.mappings).dated
        return {str(i): sorted({symbol for _, _, symbol in spans}) for i, spans in dated.items()}

    @property
    def given_name(self) -> str:
        """The file as the user gave it: its path, or the zip archive it came out of and the member's name, as a
        FilePlan names one (never the temporary copy it is read from)."""
        return str(self.path) if self.origin is None else f"{self.origin} ({self.path.name} inside)"

    def where(self, row: int) -> str:
        return f"{self.given_name} record {row + 1}"

    def found_on_read(self) -> list[str]:
        """What reading the file found that a run says at its end: instruments named by their id outside their
        mapping's dates, cancels and fills of orders the book never saw."""
        name = self.given_name
        symbols = self.symbols.outside_notes(name) if self.symbols is not None else []
        return symbols + (self.reducer.unseen_note(name) if self.reducer is not None else [])

    def streams_held(self) -> set[str]:
        """The streams the file holds as far as known: its symbology's, and those read so far."""
        return (self.stream_names() or set()) | self.streams_read

    def column_of(self, tick_field: str) -> None:
        return None  # records, not columns: a reject names the record (`where`); a quote's bid is the book's

    def batches(self, chunk_rows: int) -> Iterator[list[tuple[int, dict[str, Any]]]]:
        dbn = _dbn()
        symbols = self.symbols = Symbology(self.mappings)
        reducer = self.reducer = BookReducer(rebuild=self.schema == "mbo", scale=PRICE_SCALE, offset=self.price_offset)
        streams_read = self.streams_read = set()
        # DBN times are UTC: a window without a zone is UTC's
        left_out = Hours.parse(self.hours).left_out("UTC", self.hours) if self.hours is not None else None
        number = -1  # record number in the file, metadata excluded
        for records in _decoded(dbn, self.path, max(MIN_READ_BYTES, chunk_rows * 64), self.given_name):
            out: list[tuple[int, dict[str, Any]]] = []
            for record in records:
                if isinstance(record, dbn.Metadata):
                    continue
                number += 1
                if isinstance(record, dbn.SymbolMappingMsg):
                    symbols.map(record.instrument_id, record.stype_in_symbol)
                    continue
                if isinstance(record, (dbn.MBOMsg, dbn.TradeMsg)):  # a TradeMsg: action T, a trade tick
                    top = None
                elif isinstance(record, dbn.MBP1Msg):
                    top = _top_of_mbp(record, dbn.UNDEF_PRICE)
                else:  # status, definition, system and error records carry no ticks
                    continue
                stream = symbols.at(record.instrument_id, record.ts_recv)
                streams_read.add(stream)
                tick = reducer.record(record.instrument_id, stream, record.ts_recv, str(record.action),
                                      AGGRESSOR.get(str(record.side)), record.price, record.size,
                                      bool(record.flags & F_LAST), getattr(record, "order_id", None), top)
                if tick is not None and left_out is not None:
                    # after the reducer: the book outside the window still builds the top seen inside it
                    tick = left_out(record.ts_recv) or tick
                if isinstance(tick, (dict, tuple)):
                    symbols.tick_outside(record.instrument_id, stream, record.ts_recv)
                if isinstance(tick, tuple):  # a trade that ended its event, and the event's quote: one record's
                    out.extend((number, made) for made in tick)
                elif tick is not None:
                    out.append((number, tick))
            if out:
                yield out


def _top_of_mbp(record: Any, undefined: int) -> tuple[int, int, int, int] | None:
    level = record.levels[0]
    if level.bid_px == undefined or level.ask_px == undefined:
        return None
    return level.bid_px, level.bid_sz, level.ask_px, level.ask_sz


def _decoder(dbn: Any, path: Path) -> Any:
    compressed = path.name.lower().endswith(".zst")
    return dbn.DBNDecoder(compression=dbn.Compression.ZSTD if compressed else dbn.Compression.NONE)


def has_records(path: Path) -> bool:
    """Whether a DBN file holds a record after its metadata header (a download of a day with no data holds the
    header alone). Reads only up to the first record. A schema replay does not read counts as holding records, so
    that opening it says so rather than skipping it as empty."""
    dbn = _dbn()
    metadata = _read_metadata(dbn, path)
    if metadata.schema is None or str(metadata.schema.value) not in SCHEMAS:
        return True
    return any(not isinstance(record, dbn.Metadata) for records in _decoded(dbn, path, MIN_READ_BYTES)
               for record in records)


def _read_metadata(dbn: Any, path: Path) -> Any:
    """The file's metadata header, read from its first blocks."""
    return next(records[0] for records in _decoded(dbn, path, MIN_READ_BYTES) if records)


def _decoded(dbn: Any, path: Path, read_bytes: int, name: str | None = None) -> Iterator[list[Any]]:
    """The file's records, a block's at a time, the metadata header first. A file that ends inside a record or a
    zstd block, or a .dbn.zst whose zstd frame lacks its last block or checksum (connectors/zstd_frames.py: a cut at
    a block's end that falls on a record's end decodes to whole records), is said to be truncated, and one whose
    zstd data fails its checksum to be damaged (connectors/archives.py `truncation_named`), not read as far as it
    goes or called "not DBN". ``name``: the file as its errors name it (an archive's member), else its path."""
    decoder = _decoder(dbn, path)
    decoded = False
    zst = path.name.lower().endswith(".zst")
    # a .dbn.zst is bounded as a .gz is (connectors/expansion.py): its decoder decompresses all it is given at once,
    # so it is given ZST_STEP bytes at a time and what it made is counted after each
    counted = _Unpacked(path, name or str(path)) if zst else None
    with truncation_named(path, name), open(path, "rb") as f:
        while block := f.read(read_bytes):
            records: list[Any] = []
            for at in range(0, len(block), ZST_STEP if zst else len(block)):
                decoder.write(block[at: at + (ZST_STEP if zst else len(block))])
                try:
                    new = decoder.decode()
                except dbn.DBNError as e:  # e.g. "invalid DBN header": a file that is not DBN at all
                    raise ValueError(f"{name or path}: not a readable DBN file: {e}") from None
                records += new
                if counted is not None:
                    counted.check(new, decoder)
            decoded = decoded or bool(records)
            yield records
        left = decoder.buffer()  # bytes of a record (or of the header) still waiting for the rest of it
        # the decoder checks the 8-byte "DBN" + version prefix once it has it and keeps the metadata's bytes after it
        if not decoded and (not (left or zst) or len(left) < 8 and not b"DBN".startswith(left[:3])):
            raise ValueError(f"{name or path}: not a DBN file (no metadata header)")
        if left or not decoded:  # a zstd block cut short decodes to nothing: a .dbn.zst cut in its first one
            where = f"inside a record (its first {len(left)} bytes)" if decoded else "inside its metadata header"
            if zst:
                raise EOFError(f"it ends {where}")
            raise UnreadableFile(f"{name or path}: it ends {where}; {TRUNCATED}")
        if zst and (cut := cut_short(path)) is not None:  # cut at a block's end on a record's: whole records decoded
            raise EOFError(f"it ends {cut}")


class _Unpacked:
    """How far a `.dbn.zst` has expanded as its decoder decodes it: its records' bytes and those waiting in the
    decoder (the metadata header's few aside), checked against the limits in force (`refuse_past_limits`: a zstd bomb is
    refused by name, in the words a `.gz` one is). No progress notes: it is decoded as the replay goes, so its
    time is the replay's, said by the replay's own."""

    def __init__(self, path: Path, name: str) -> None:
        self.path, self.name, self.compressed = path, name, path.stat().st_size
        self.limits = expansion_limits()
        self.records_bytes = 0  # of the records decoded so far (the metadata header's are few)

    def check(self, records: list[Any], decoder: Any) -> None:
        """`records`: those the decoder gave since the last check."""
        first = 1 if records and not hasattr(records[0], "record_size") else 0  # the metadata header, first of all
        self.records_bytes += sum(r.record_size() for r in records[first:])
        out = self.records_bytes + len(decoder.buffer())
        refuse_past_limits(self.name, self.compressed, out, self.limits)
