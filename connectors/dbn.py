"""Databento DBN files (MBO, MBP-1 and trades schemas) reduced to our ticks: trades and top-of-book quotes.

A CME user's order-by-order file replays like a tick file (connectors/replay.py
reads `.dbn` and zstd-compressed `.dbn.zst` through this module), so nobody has
to write a book builder to run a backtest:

* a trade (action `T`) becomes a trade tick: price, size and the aggressor's
  side (`B` buy, `A` sell, `N` none);
* the best bid and offer become a quote tick whenever they change, at the end
  of an exchange event (the `F_LAST` flag), while both sides have a price.
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

The `databento-dbn` package is an optional extra (`pip install 'flashtick[dbn]'`),
imported when a DBN file is opened, so the base install imports this module.
"""

from __future__ import annotations

import heapq
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from connectors.hours_window import Hours
from connectors.price_offsets import PriceOffset, offset_of
from connectors.shifted_prices import shifted
from connectors.ticks import QUOTE, TRADE, InvalidTick, utc_text

PRICE_SCALE = 1e9  # DBN prices are int64 in units of 1e-9
F_LAST = 1 << 7  # DBN's flag on the last record of an exchange event (databento_dbn.F_LAST)
UNDEF_PRICE = (1 << 63) - 1  # DBN's "no price" (an empty book side), as its fixed-point exports write it
SCHEMAS = ("mbo", "mbp-1", "trades")
AGGRESSOR = {"B": "buy", "A": "sell"}  # a trade's side is the aggressor's; N (none) leaves side unset
BOOK_SIDES = ("B", "A")
BOOK_SIDE = {"buy": "B", "sell": "A"}  # a resting order's side, as the reducer is given it -> the book's
MIN_READ_BYTES = 1 << 16
DAY_NS = 86_400 * 10**9


def _dbn() -> Any:
    try:
        import databento_dbn
    except ImportError:
        raise ImportError("reading DBN files needs the databento-dbn package: pip install 'flashtick[dbn]'") from None
    return databento_dbn


class _Book:
    """One instrument's resting orders and the size at each price, with the best bid/ask kept by heaps
    (lazy deletion: an emptied level is popped when it reaches the top)."""

    def __init__(self) -> None:
        self.orders: dict[int, tuple[str, int, int]] = {}  # order id -> (side, price, size)
        self.levels: dict[str, dict[int, int]] = {"B": {}, "A": {}}  # side -> price -> size
        self.heaps: dict[str, list[int]] = {"B": [], "A": []}  # bids stored negated: both heaps are min-heaps

    def clear(self) -> None:
        self.__init__()

    def _level(self, side: str, price: int, delta: int) -> None:
        levels = self.levels[side]
        size = levels.get(price, 0) + delta
        if size > 0:
            if price not in levels:
                heapq.heappush(self.heaps[side], -price if side == "B" else price)
            levels[price] = size
        else:
            levels.pop(price, None)

    def add(self, order_id: int, side: str, price: int, size: int) -> None:
        if side not in BOOK_SIDES:
            return
        if order_id in self.orders:  # a repeated id replaces the order, as a modify would
            self.cancel(order_id, None)
        self.orders[order_id] = (side, price, size)
        self._level(side, price, size)

    def cancel(self, order_id: int, size: int | None) -> None:
        """Remove `size` of the order (None: all of it)."""
        if order_id not in self.orders:
            return
        side, price, resting = self.orders[order_id]
        gone = resting if size is None else min(size, resting)
        self._level(side, price, -gone)
        if gone == resting:
            del self.orders[order_id]
        else:
            self.orders[order_id] = (side, price, resting - gone)

    def modify(self, order_id: int, side: str, price: int, size: int) -> None:
        self.cancel(order_id, None)
        self.add(order_id, side, price, size)

    def best(self, side: str) -> tuple[int, int] | None:
        heap, levels = self.heaps[side], self.levels[side]
        while heap:
            price = -heap[0] if side == "B" else heap[0]
            if price in levels:
                return price, levels[price]
            heapq.heappop(heap)
        return None

    def top(self) -> tuple[int, int, int, int] | None:
        bid, ask = self.best("B"), self.best("A")
        return None if bid is None or ask is None else (bid[0], bid[1], ask[0], ask[1])


class BookReducer:
    """The reduction above, one order-book record at a time: a trade for action `T`, a quote when the top of
    book changed at the end of an event. DBN files and Databento's CSV/Parquet exports of the same schemas
    (connectors/file_plan.py) go through it, so one feed replays alike from either. ``rebuild``: MBO (the book
    rebuilt from its orders), else MBP-1 (each record carries its top level). Prices are in units of
    ``scale`` (DBN's 1e-9 fixed point: 1e9; an export already read as prices: 1), ``undefined`` Databento's
    "no price" in those units; ``offset`` is added to each price, bid and ask after scaling (price_offset: one for
    every stream, or a stream's own); sides are "buy" (the bid, or a buying aggressor), "sell" or None.
    ``unseen``: MBO cancels and fills of an order id the book never saw added (a file that starts mid-session),
    which leave the book as it was; ``first_unseen`` the first such (stream, order id)."""

    def __init__(self, rebuild: bool, scale: float, undefined: float = UNDEF_PRICE,
                 offset: PriceOffset | None = None) -> None:
        self.rebuild, self.scale, self.undefined, self.offset = rebuild, scale, undefined, offset
        self.books: dict[Any, _Book] = {}
        self.shown: dict[Any, tuple[Any, Any, Any, Any]] = {}  # instrument -> last top of book emitted
        self.unseen = 0
        self.first_unseen: tuple[str, Any] | None = None

    def record(self, key: Any, stream: str, ts: int, action: str, side: str | None, price: Any, size: Any,
               last: bool, order_id: Any = None, top: tuple[Any, Any, Any, Any] | None = None,
               undefined: Any = None) -> dict[str, Any] | InvalidTick | None:
        """The tick one record makes (None: it makes none; InvalidTick: a trade without a price). ``top``: MBP-1's
        (bid, bid size, ask, ask size), None while a side is empty. ``undefined``: the "no price" of this record's
        stream, where prices were shifted before (an export's rows), else the reducer's."""
        if self.rebuild:
            book = self.books.setdefault(key, _Book())
            if action in ("C", "F") and order_id not in book.orders:
                self.unseen += 1
                self.first_unseen = self.first_unseen or (stream, order_id)
            top = _apply_mbo(book, action, BOOK_SIDE.get(side), order_id, price, size)
        offset = offset_of(self.offset, stream)
        if action == "T":
            if price == (self.undefined if undefined is None else undefined):  # as an empty book side is
                return InvalidTick("missing_field", f"a trade record with Databento's undefined price "
                                                    f"(UNDEF_PRICE, {UNDEF_PRICE}): the trade has no price", stream)
            wire = {"kind": TRADE, "stream": stream, "ts": ts, "price": shifted(price / self.scale, offset),
                    "size": float(size)}
            if side is not None:
                wire["side"] = side
            return wire
        if action != "F" and last and top is not None and self.shown.get(key) != top:
            self.shown[key] = top
            bid, bid_size, ask, ask_size = top
            return {"kind": QUOTE, "stream": stream, "ts": ts, "bid": shifted(bid / self.scale, offset),
                    "ask": shifted(ask / self.scale, offset), "bid_size": float(bid_size), "ask_size": float(ask_size)}
        return None

    def unseen_note(self, name: str) -> list[str]:
        """The note on cancels and fills of orders the book never saw: said once, at the end of a run."""
        if not self.unseen:
            return []
        stream, order_id = self.first_unseen
        return [f"{name}: {self.unseen} cancel or fill record(s) of an order the book never saw added (the first: "
                f"{stream}, order {order_id}): the file seems to start mid-session, so the top of book may miss "
                f"orders resting from before it until they trade or cancel"]


class Symbology:
    """Instrument id -> symbol at a time. The metadata's mappings hold over UTC dates, start included and end
    excluded (Databento's intervals): a continuous symbol (ES.c.0) names one contract until its roll and the next
    one after. An id outside every interval of its mappings is its numeric id, also on the days another interval
    names it: the day before a roll both contracts trade, and only the one ES.c.0 maps is ES.c.0 (its prices
    would otherwise interleave with the next contract's). A symbol mapping record (a live feed's) holds from
    that record on and takes its symbol from the id that had it."""

    def __init__(self, mappings: dict[str, Any]) -> None:
        self.dated: dict[int, list[tuple[int, int, str]]] = {}  # id -> [(start ns, end ns, symbol)]
        for symbol, intervals in mappings.items():
            for interval in intervals:
                start, end, target = (_field(interval, name) for name in ("start_date", "end_date", "symbol"))
                if isinstance(target, str) and target.isdigit():
                    span = (_day_ns(start, 0), _day_ns(end, 1 << 63), symbol)
                    self.dated.setdefault(int(target), []).append(span)
        self.live: dict[int, str] = {}  # id -> symbol, from symbol mapping records: ahead of the dated ones
        self.holder: dict[str, int] = {}  # a mapping record's symbol -> the id it names now
        self.outside: dict[int, list[int]] = {}  # a mapped id -> [ticks named by the id, first ts] (`tick_outside`)

    def map(self, instrument_id: int, symbol: str) -> None:
        previous = self.holder.get(symbol)
        if previous is not None and previous != instrument_id and self.live.get(previous) == symbol:
            self.live[previous] = str(previous)  # no longer this symbol's contract
        self.holder[symbol], self.live[instrument_id] = instrument_id, symbol

    def at(self, instrument_id: int, ts: int) -> str:
        if (symbol := self.live.get(instrument_id)) is not None:
            return symbol
        spans = self.dated.get(instrument_id, ())
        for start, end, symbol in spans:
            if start <= ts < end:
                return symbol
        return str(instrument_id)

    def tick_outside(self, instrument_id: int, stream: str, ts: int) -> None:
        """A tick (kept by the reading, not left out by --hours) named by its instrument id though the file maps
        the id at other dates (a Sunday evening's session before its first UTC date): counted, said at the end."""
        if stream == str(instrument_id) and instrument_id in self.dated and instrument_id not in self.live:
            self.outside.setdefault(instrument_id, [0, ts])[0] += 1

    def outside_notes(self, name: str) -> list[str]:
        """A note per mapped instrument some of whose ticks fell outside its mapping's dates, named by its id."""
        notes = []
        for instrument_id, (ticks, first) in sorted(self.outside.items()):
            dated = "; ".join(f"{symbol} from {_date_of(start)}" + (f" to {_date_of(end)} (excluded)"
                                                                    if end < 1 << 63 else "")
                              for start, end, symbol in sorted(self.dated[instrument_id]))
            notes.append(f"{name}: instrument {instrument_id} has {ticks} tick(s) outside its mapping's dates (the "
                         f"first at {utc_text(first)}; it is {dated}, UTC dates), read as stream '{instrument_id}': a "
                         f"stream apart from its symbol's")
        return notes


def _field(interval: Any, name: str) -> Any:
    return interval.get(name) if isinstance(interval, dict) else getattr(interval, name, None)


def _date_of(ns: int) -> str:
    return datetime.fromtimestamp(ns // 10**9, timezone.utc).date().isoformat()


def _day_ns(day: date | str | None, open_end: int) -> int:
    """A mapping's date as ns since the epoch at its UTC midnight; ``open_end`` where it has none."""
    if day is None:
        return open_end
    day = date.fromisoformat(day) if isinstance(day, str) else day
    return (day - date(1970, 1, 1)).days * DAY_NS


class DbnPlan:
    """One DBN file as replay reads it: decoded a block at a time, (record number, wire map) per tick."""

    sorted_on_read = False

    def __init__(self, path: Path, price_offset: PriceOffset | None = None, hours: str | None = None,
                 zero_bid: str | None = None) -> None:
        self.path, self.price_offset, self.hours = path, price_offset, hours
        self.zero_bid_is_price = zero_bid == "price"  # OPRA's 0 bid: a price, or (the default) no bid
        # what the last read found, for the notes said at the end (`found_on_read`)
        self.symbols: Symbology | None = None
        self.reducer: BookReducer | None = None
        self.streams_read: set[str] = set()
        dbn = _dbn()
        metadata = _read_metadata(dbn, path)
        self.schema = str(metadata.schema.value) if metadata.schema is not None else None
        if self.schema not in SCHEMAS:
            raise ValueError(f"{path}: DBN schema {self.schema!r} is not supported; replay reads {', '.join(SCHEMAS)} "
                             f"(order by order, top of book or trades)")
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
        """The file as the user gave it: the zip archive it came out of, else its path."""
        return str(getattr(self, "origin", None) or self.path)

    def where(self, row: int) -> str:
        return f"{self.path} record {row + 1}"

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
        decoder = _decoder(dbn, self.path)
        symbols = self.symbols = Symbology(self.mappings)
        reducer = self.reducer = BookReducer(rebuild=self.schema == "mbo", scale=PRICE_SCALE, offset=self.price_offset)
        streams_read = self.streams_read = set()
        # DBN times are UTC: a window without a zone is UTC's
        left_out = Hours.parse(self.hours).left_out("UTC", self.hours) if self.hours is not None else None
        number = -1  # record number in the file, metadata excluded
        with open(self.path, "rb") as f:
            while block := f.read(max(MIN_READ_BYTES, chunk_rows * 64)):
                decoder.write(block)
                out: list[tuple[int, dict[str, Any]]] = []
                for record in decoder.decode():
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
                    if isinstance(tick, dict):
                        symbols.tick_outside(record.instrument_id, stream, record.ts_recv)
                    if tick is not None:
                        out.append((number, tick))
                if out:
                    yield out


def _apply_mbo(book: _Book, action: str, side: str | None, order_id: Any, price: Any, size: Any
               ) -> tuple[Any, Any, Any, Any] | None:
    """Apply one MBO record (``side`` "B", "A" or None) to the instrument's book; the top of book after it."""
    if action == "A":
        book.add(order_id, side, price, size)
    elif action == "C":
        book.cancel(order_id, size)
    elif action == "M":
        book.modify(order_id, side, price, size)
    elif action == "R":
        book.clear()
    return book.top()


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
    decoder = _decoder(dbn, path)
    with open(path, "rb") as f:
        while block := f.read(MIN_READ_BYTES):
            decoder.write(block)
            if any(not isinstance(record, dbn.Metadata) for record in decoder.decode()):
                return True
    return False


def _read_metadata(dbn: Any, path: Path) -> Any:
    """The file's metadata header, read from its first blocks."""
    decoder = _decoder(dbn, path)
    try:
        with open(path, "rb") as f:
            while block := f.read(MIN_READ_BYTES):
                decoder.write(block)
                records = decoder.decode()
                if records:
                    return records[0]
    except Exception as e:  # the decoder's own error type, e.g. a file that is not DBN at all
        raise ValueError(f"{path}: not a readable DBN file: {e}") from None
    raise ValueError(f"{path}: not a DBN file (no metadata header)")
