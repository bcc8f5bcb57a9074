"""Notes on a layout that reads, by what its column names say (what a file's values say is content_notes.py's,
venue_notes.py's, correction_notes.py's and instrument_identifiers.py's): a vendor's layout whose fields mean
otherwise (`vendor_notes`: Coinbase's maker sides, bars and their stamps, settlement prices, quote sizes left unread,
the NBBO beside a venue's quote, trades and quotes on one row), a second clock not read (`other_clock_note`), and a
map as the command line writes it (`describe_map`), so that every guess shows at once.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.column_names import (BAR_CLOSES, MID_NAMES, SETTLEMENT_NAMES, SHARE_CLASS_NAMES, TIME_OF_DAY_NAMES,
                                     bar_close, holds_bars)
from connectors.content_notes import trades_alone
from connectors.csv_dialect import Dialect
from connectors.field_names import FIELD_NAMES, normal_name
from connectors.file_names import histdata_frame
from connectors.finer_clock import finer_name_of
from connectors.header_zones import header_unit
from connectors.keep_filter import keep_said
from connectors.layout import databento_book
from connectors.map_vocabulary import QUOTE_FIELDS, VALUE_FIELDS, joined_columns
from connectors.number_separators import CURRENCY_SIGN
from connectors.price_offsets import shown_offset
from connectors.side_maps import (BITSTAMP_TYPE, BUYER_MAKER, FIX_AGGRESSOR, LOBSTER_DIRECTION, MAKER_ROLE, MAKER_SIDE,
                                  YES_NO)
from connectors.shell_words import columns_option
from engine.quoting import quoted, quoted_words


BAR_STAMP = ("; most vendors stamp a bar with its start, so a bar's close shows at its start (--columns "
             "bar_stamp=close stamps it at its close, as a live bar builder sends it)")
# a bar's end: a bar stamped with one of these shows its close when it was known (as a live bar builder sends it)
BAR_END_COLUMNS = frozenset({"close_time", "closetime", "window_end", "end_time", "bar_end", "end"})
BAR_END_STAMP = ", the bar's end: its close shows when it was known, as a live bar builder sends it"
# TradeStation's bar exports (`Date,Time,Open,High,Low,Close,Up,Down`) and NinjaTrader's (no header) are stamped
# with the bar's end; HistData's M1 files, in each platform's layout (NinjaTrader's/ASCII, MetaTrader's,
# MetaStock's: connectors/headerless_csv.py), with its start, as MetaTrader's own exports are
TRADESTATION_BARS = frozenset({"up", "down"})
TRADESTATION_STAMP = "; TradeStation stamps a bar with its end, so a bar's close shows when it was known"
EARLY = "its close shows a bar early: --columns bar_stamp=close stamps it at its close"
# a header-less bar file's stamp by the first column of its layout (MetaTrader's date, MetaStock's symbol, else
# NinjaTrader's time), for a file not named as HistData's: each layout names the platforms that write it
HEADERLESS_BAR_STAMPS = {
    "date": f"; MetaTrader and Kibot stamp a bar with its start, as HistData's MetaTrader files do ({EARLY})",
    "symbol": f"; HistData's MetaStock files, whose layout this is, stamp a bar with its start ({EARLY})",
    "time": f"; NinjaTrader stamps a bar with its end (its close shows when it was known), HistData's M1 files in "
            f"this layout with its start ({EARLY})"}
# Coinbase Exchange's REST trades (`GET /products/{id}/trades`), whose `side` is the maker's: a note names the preset
COINBASE_TRADES = frozenset({"trade_id", "side", "size", "price", "time"})
SIDE_MAPS = {"a buyer-maker flag: true = sell": BUYER_MAKER,
             "the maker's side, read flipped: buy = sell, sell = buy": MAKER_SIDE,
             "the maker's role, read flipped: buyer = sell, seller = buy": MAKER_ROLE,
             "Bitstamp's type: 0 = buy, 1 = sell": BITSTAMP_TYPE,
             "the resting order's side: 1 = sell": LOBSTER_DIRECTION,
             "FIX's AggressorSide: 1 = buy, 2 = sell, 0 = none": FIX_AGGRESSOR,
             "the outcome the taker bought: yes = buy, no = sell of the yes contract": YES_NO}  # named in notes


def trade_bars(cmap: ColumnMap, names: Iterable[str]) -> bool:
    """Whether the map reads a file of bars (OHLC), one of each bar's values as each row's trade price: its close,
    or a column no tick's price is named as in a file holding a bar's open, high, low and close (Yahoo's `Adj
    Close`, a bar's VWAP), which are bars all the same: stamped as bars, their holiday rows and repeated bars read
    as bars' (review430 #1). A `settle` or `ltp` beside a day's open, high and low is a tick's price, as before."""
    if cmap.price is None:
        return False
    columns = {normal_name(n) for n in names}
    return bar_close(cmap.price, columns) or (normal_name(cmap.price) not in FIELD_NAMES["price"] and
                                              holds_bars(columns))


def _coinbase_columns(columns: set[str]) -> bool:
    """Whether a file's columns (normal names) are Coinbase Exchange's REST trades', maybe with the product."""
    return COINBASE_TRADES <= columns <= COINBASE_TRADES | {"product_id"}


def coinbase_sides(path: Path, names: Iterable[str], cmap: ColumnMap) -> ColumnMap:
    """A detected side column in Coinbase's trades layout, in a file its name says is Coinbase's: the MAKER's
    side, read flipped as --preset coinbase-trades reads it (vendor_notes says so). The same columns under any
    other name are most venues' (a taker's side): read as they are, with a caution. Only the file's own name
    counts: a folder's is a project's as often as a vendor's."""
    if cmap.side is None or cmap.side_map is not None or "coinbase" not in path.stem.lower() or \
            not _coinbase_columns({normal_name(n) for n in names}):
        return cmap
    return replace(cmap, side_map=dict(MAKER_SIDE))


BITMEX_CAPTURE = frozenset({"table", "action"})  # a BitMEX realtime message's keys (derivative_streams.py's too)


# words of a column name that may hold sizes, in the languages field_names.py reads (a name it does not know)
SIZE_WORDS = ("size", "qty", "quant", "vol", "menge", "stück", "stueck", "shares", "lots", "amount", "anzahl",
              "cantidad", "contracts", "数量", "量", "수량")


def _size_one_note(path: Path, names: list[str], cmap: ColumnMap) -> str:
    """The note that each price is a trade of size 1, a caution naming the columns not read that may hold the sizes
    (a name of a size word, or one holding a character that did not decode): `St\ufffdck` was no size column, and
    every trade of a German export replayed at size 1 under a note (review373 #3)."""
    read = {*cmap.ts_columns, *cmap.stream_columns, *(getattr(cmap, f) for f in VALUE_FIELDS)}
    maybe = [n for n in names if n not in read and ("\ufffd" in n or any(w in normal_name(n) for w in SIZE_WORDS))]
    if not maybe:
        return (f"{path.name}: no size column: each price is a trade of size 1 (a price series); map size= if the "
                f"file has sizes under another name")
    return Caution(f"{path.name}: no size column found, so each price is read as a trade of size 1, yet "
                   f"{quoted_words(maybe)} {'is' if len(maybe) == 1 else 'are'} not read: if one holds the sizes, "
                   f"give it, e.g. {columns_option(f'size={maybe[0]}')}")


def vendor_notes(path: Path, names: list[str], cmap: ColumnMap, dialect: Dialect | None,
                 by_keys: bool = False) -> list[str]:
    """Notes on a detected layout that reads but is a vendor's whose fields mean otherwise. `by_keys`: the layout
    was known by an exchange's JSON keys (connectors/exchange_shapes.py), not by the file's name."""
    columns = {normal_name(n) for n in names}
    if cmap.side is not None and cmap.side_map == MAKER_SIDE and _coinbase_columns(columns):
        # the signal that flipped the sides: a REST dump's keys (ADA-USD-trades.json's name says no Coinbase)
        known = ("its records are Coinbase Exchange's REST trades, known by their JSON keys" if by_keys else
                 "its columns are Coinbase Exchange's trades layout and its name says Coinbase")
        return [f"{path.name}: {known}: "
                f"{quoted(cmap.side)} is the MAKER's side, read flipped to the aggressor's (buy = sell, sell = buy), "
                "as --preset coinbase-trades reads it; a full map ("
                f"{columns_option(f'ts={cmap.ts}', f'price={cmap.price}', f'size={cmap.size}', f'side={cmap.side}')}) "
                f"reads the sides as they are"]
    if cmap.side is not None and cmap.side_map is None and _coinbase_columns(columns):
        return [Caution(f"{path.name}: its columns are Coinbase Exchange's trades layout, whose side is the MAKER's; "
                        f"read here as the aggressor's. If the file is Coinbase's, give --preset coinbase-trades "
                        f"(sides flipped), or name it so (coinbase-BTC-USD.csv)")]
    stamp = TRADESTATION_STAMP if TRADESTATION_BARS <= columns else BAR_STAMP
    notes = bar_notes(path, names, cmap, stamp)
    if not notes and cmap.bid is not None and bar_close(cmap.bid, columns):
        notes.append(f"{path.name}: read as bid/ask bars: each row is one quote at their closes ({cmap.bid}, "
                     f"{cmap.ask}), stamped with its {quoted(cmap.ts)} column{stamp}")
    if cmap.price is not None and normal_name(cmap.price) in SETTLEMENT_NAMES:
        close = next((n for n in names if normal_name(n) in BAR_CLOSES), None)
        unread = f" ({quoted(close)} beside it is not read: --columns price={close} reads it)" if close else ""
        notes.append(f"{path.name}: read as settlement prices ({cmap.price}){unread}: an exchange's one price a day "
                     f"per contract, each replayed as a trade{' of size 1' if cmap.size is None else ''} stamped with "
                     f"its {quoted(cmap.ts)} column, so a question's horizon of N ticks is N days here")
    elif cmap.price is not None and normal_name(cmap.price) in MID_NAMES and cmap.bid is None:
        notes.append(f"{path.name}: column {quoted(cmap.price)} read as the price of a series of trades"
                     f"{' of size 1' if cmap.size is None else ''}: mid prices, with neither trades nor bid and ask "
                     f"beside them; a model trained on trades and quotes (the built-in one) reads it as a feed of "
                     f"trades only, and answers worse on one (docs/model.md, \"A feed of trades only\")")
    elif cmap.price is not None and cmap.size is None:
        notes.append(_size_one_note(path, names, cmap))
    if cmap.bid is not None and (unread := _unread_quote_sizes(names, cmap)):
        said = ", ".join(f"{quoted(column)} looks like {field}" for field, column in unread)
        example = ",".join(f"{field}={column}" for field, column in unread)
        notes.append(f"{path.name}: {said}, not read: its quotes replay without sizes (--columns ...,{example} "
                     f"reads them)")
    notes += _best_quote_note(path, names, cmap)
    notes += _unit_notes(path, cmap)
    if any(normal_name(c) in SHARE_CLASS_NAMES for c in cmap.stream_columns):
        notes.append(f"{path.name}: each stream is {cmap.stream_columns[0]} with its share class's suffix where the "
                     f"row has one ({'+'.join(cmap.stream_columns)}: BRK.B, BF.A; AAPL without), so two classes of "
                     f"one issuer are two streams")
    if cmap.kind is None and cmap.price is not None and cmap.bid is not None and "kind" not in columns \
            and cmap.quote_sides is None and not by_keys \
            and databento_book(cmap, names) is None:  # a `kind` column (the wire layout): one kind per row
        # (by_keys: an exchange's capture, whose own note says which messages are trades and which quotes)
        notes.append(_bitmex_kinds_note(path, cmap) if BITMEX_CAPTURE <= set(names) else
                     f"{path.name}: it has trade ({cmap.price}) and quote ({cmap.bid}, {cmap.ask}) columns: a row "
                     f"with both replays as two ticks at its time, its quote then its trade; "
                     f"{trades_alone(path, cmap, names, dialect)}")
    return notes


def _bitmex_kinds_note(path: Path, cmap: ColumnMap) -> str:
    """A BitMEX realtime capture's trade and quote tables in one file, said in BitMEX's words: each message is one
    table's, so a row is one kind; only a row holding both (a recorder's merged row) is two ticks."""
    sizes = f", {cmap.bid_size}, {cmap.ask_size}" if cmap.bid_size and cmap.ask_size else ""
    return (f"{path.name}: BitMEX trade and quote messages in one capture (its table field): a trade message's "
            f"{cmap.price}, {cmap.size} and {cmap.side} (the taker's) replay as a trade, a quote message's "
            f"{cmap.bid}, {cmap.ask}{sizes} as a quote, stamped with their {cmap.ts}; a row holding both replays as "
            f"two ticks at its time, its quote then its trade")


def _unit_notes(path: Path, cmap: ColumnMap) -> list[str]:
    """Value columns whose header writes a unit after a known name (LME's `Price (USD/t)`): the unit is said, never
    applied (no price is converted; two files in two units are two series)."""
    units = [(field, column, unit) for field in VALUE_FIELDS if (column := getattr(cmap, field)) is not None
             and (unit := header_unit(column))]
    if not units:
        return []
    said = "; ".join(f"{quoted(column)} as the {field}, in {unit}" for field, column, unit in units)
    return [f"{path.name}: read by the names before their units: {said} (a unit is noted, not applied: values are "
            f"read as written)"]


def currency_notes(path: Path, cmap: ColumnMap, first: Callable[[str], Any], codes: Mapping[str, str],
                   sign_counts: Callable[[str], tuple[int, int]]) -> list[str]:
    """Value columns whose first value writes a currency sign with its number (`61.836,63 €`), or whose every cell
    writes one ISO code after it (`codes`: `61.836,63 EUR`): read without it, said as a header's unit is (a whole
    column was rejected once, each row's cell 'not a number': review259 #7, fix274 #4). A sign on some of a column's
    cells only (`sign_counts`: its signed and its non-empty cells) is counted: a London file's `£0.7250` beside
    bare pence `72.50` (review440 #4; the levels are cautioned by connectors/price_units.py)."""
    signed = [(column, text) for field in VALUE_FIELDS if (column := getattr(cmap, field)) is not None
              and isinstance(text := first(column), str) and (column in codes or
                                                              re.sub(CURRENCY_SIGN, "", text.strip()) != text.strip())]
    if not signed:
        return []

    def shown(column: str, text: str) -> str:
        if column in codes:
            return f"{quoted(column)} ({quoted(text.strip())})"
        count, cells = sign_counts(column)
        some = f", on {count:,} of its {cells:,} cells, the others bare: two units?" if count < cells else ""
        return f"{quoted(column)} ({quoted(text.strip())}{some})"

    said = ", ".join(shown(column, text) for column, text in signed)
    kind = "a currency sign" if not codes else "a currency code" if len(codes) == len(signed) else \
        "a currency sign or code"
    return [f"{path.name}: numbers written with {kind}, read without it: {said} (a unit is noted, not "
            f"applied: values are read as written)"]


def _best_quote_note(path: Path, names: list[str], cmap: ColumnMap) -> list[str]:
    """A quote read from `best_*` columns beside plain ones (`_best_quote`): the plain ones, not read, named."""
    if cmap.bid is None or not normal_name(cmap.bid).startswith("best_"):
        return []
    read = set(cmap.source_columns())
    plain = {field: column for field in QUOTE_FIELDS if (column := next(
        (n for n in names if n not in read and normal_name(n) in FIELD_NAMES[field]
         and not normal_name(n).startswith("best_")), None))}
    if "bid" not in plain or "ask" not in plain:
        return []
    # the venue's sizes are no NBBO's: a best quote without best sizes replays without sizes (never the venue's)
    sizes = "; the file writes no size of the best bid and offer, so its quotes replay without sizes" if \
        cmap.bid_size is None and cmap.ask_size is None else ""
    return [f"{path.name}: quotes read from {cmap.bid}/{cmap.ask} (the best bid and offer across venues, as NBBO "
            f"files write it: WRDS's, NYSE Daily TAQ's), not from {', '.join(plain.values())} beside them (each "
            f"row's quoting venue's, which alternate between venues): "
            f"{columns_option(*(f'{f}={c}' for f, c in plain.items()))} "
            f"reads those{sizes}"]


# Event-time columns: a file with two is stamped on two clocks (an exchange's and the SIP's, an exchange's and the
# collector's); the one not read is named. Days and bars' start and end columns are not clocks of their own.
CLOCK_NAMES = frozenset(FIELD_NAMES["ts"]) - {
    "date", "dates", "trade_date", "business_date", "close_time", "window_end", "end_time", "window_start",
    "open_time", "start_time"} | {"participant_timestamp", "trf_timestamp", "local_timestamp"}


def other_clock_note(path: Path, names: list[str], cmap: ColumnMap) -> list[str]:
    """Time columns beside the one read: named, with the map that reads the stamps of another."""
    others = [n for n in names if n not in cmap.ts_columns and normal_name(n) in CLOCK_NAMES
              and not finer_name_of(cmap.ts, n)]  # Gemini's `timestamp` beside `timestampms` read: one clock
    if not others or len(joined_columns(cmap.ts)) > 1 and any(normal_name(n) in TIME_OF_DAY_NAMES for n in others):
        return []
    return [f"{path.name}: also has time column{'s' if len(others) > 1 else ''} "
            f"{', '.join(map(quoted, others[:3]))}, another clock, not read: its ticks are stamped with "
            f"{quoted(cmap.ts)} ({columns_option(f'ts={others[0]}')} reads them at that one's times; a stream's "
            "trades and quotes read from "
            f"files on two clocks are ordered by two clocks)"]


def bar_notes(path: Path, names: list[str], cmap: ColumnMap, stamp: str = BAR_STAMP) -> list[str]:
    """The note on a file read as bars (`trade_bars`), with what `stamp` says of the time a bar is stamped with:
    a file stamped with its bars' end column (Binance's `close_time`) is said to be so, whatever its layout's
    platforms do (review307 #11: no start-stamp warning, no NinjaTrader, on a klines file)."""
    if not trade_bars(cmap, names):
        return []
    if cmap.ts is not None and normal_name(cmap.ts) in BAR_END_COLUMNS:
        stamp = BAR_END_STAMP
    elif cmap.bar_stamp == "close":  # (connectors/bar_stamps.py's note says by how much)
        stamp = ", moved to the bar's close (bar_stamp close)"
    empty = (f"; a bar of {cmap.price} 0 and {cmap.size} 0 is an interval without trades: left out, counted "
             f"as filtered_out" if cmap.size else "")
    return [f"{path.name}: read as bars: each row is one trade at its close ({cmap.price}, size {cmap.size or 1}, "
            f"no side), stamped with its {quoted(cmap.ts)} column{stamp}{empty}"]


def headerless_bar_stamp(path: Path, cmap: ColumnMap) -> str:
    """What `bar_notes` says of the stamp of a header-less file's bars: HistData's start in a file named as its
    (`histdata_frame`), whichever platform's layout; else what the platforms writing its layout stamp."""
    if histdata_frame(path) is not None:
        return f"; HistData stamps a bar with its start ({EARLY})"
    return HEADERLESS_BAR_STAMPS.get(cmap.names[0] if cmap.names else "time", HEADERLESS_BAR_STAMPS["time"])


# a column that names a quote side and a size (`BIDSIZ`, `Bid Depth`) without being one of FIELD_NAMES' sizes
QUOTE_SIZE_WORDS = re.compile(r"(siz|sz|qty|quantity|vol|amount|depth|lots)")
QUOTE_SIDE_WORDS = {"bid_size": re.compile(r"bid"), "ask_size": re.compile(r"ask|offer|ofr")}


def _unread_quote_sizes(names: list[str], cmap: ColumnMap) -> list[tuple[str, str]]:
    """(field, column) for each quote size a detected layout left unread while the file has a column whose name
    says it is that size: said in a note, since a constant missing size is a feature a model never sees. Beside a
    quote read from `best_*` columns only a `best_*` size is one: a plain `bid_size` is the quoting venue's, which
    `_best_quote_note` names as not the NBBO's (review295 #5: the two notes gave opposite advice)."""
    read = set(cmap.source_columns())
    best = cmap.bid is not None and normal_name(cmap.bid).startswith("best_")
    found = []
    for field, side in QUOTE_SIDE_WORDS.items():
        if getattr(cmap, field) is None and (column := next(
                (n for n in names if n not in read and side.search(normal_name(n)) and
                 QUOTE_SIZE_WORDS.search(normal_name(n)) and (not best or normal_name(n).startswith("best_"))),
                None)):
            found.append((field, column))
    return found


def describe_map(cmap: ColumnMap) -> str:
    """A map as the command line writes it: `ts=time (ms), stream=symbol, price=px, size=qty`."""
    zone = (f", {cmap.tz}" if cmap.tz else "") + (f", day {cmap.date}" if cmap.date else "")
    unit = f" ({cmap.ts_unit}{', ' + cmap.ts_format if cmap.ts_format else ''}{zone})"
    stream = (f"stream={cmap.stream_col}" if cmap.stream_col else
              f"stream_name={cmap.stream or cmap.default_stream}" if cmap.stream or cmap.default_stream else
              "stream from the file's name")  # a preset's map before the file names it (file_names.stream_of)
    scale = [f"price_scale={cmap.price_scale:g}"] if cmap.price_scale is not None else []
    scale += [f"price_offset={shown_offset(cmap.price_offset)}"] if cmap.price_offset is not None else []
    scale += [f"price_format={cmap.price_format}"] if cmap.price_format is not None else []
    scale += [f"zero_bid={cmap.zero_bid} (a 0 bid beside an ask is a price)"] if cmap.zero_bid is not None else []
    scale += [f"sequence={cmap.sequence}"] if cmap.sequence is not None else []
    scale += [f"trade_date={cmap.trade_date}"] if cmap.trade_date is not None else []
    scale += [f"size_scale={cmap.size_scale:g}"] if cmap.size_scale is not None else []
    scale += [f"token_decimals={cmap.token_decimals[0]}/{cmap.token_decimals[1]}, base_token={cmap.base_token}"] \
        if cmap.token_decimals is not None else []
    fields = [f"{f}={getattr(cmap, f)}" for f in VALUE_FIELDS if getattr(cmap, f) is not None]
    if cmap.side_map:
        named = next((name for name, side_map in SIDE_MAPS.items() if side_map == cmap.side_map), None)
        fields = [f + (f" ({named})" if named else f" (side_map {cmap.side_map})") if f.startswith("side=") else f
                  for f in fields]
    if cmap.quote_sides is not None:  # bid, ask and their sizes are the price and size columns, by row
        fields = [f for f in fields if f.split("=")[0] not in QUOTE_FIELDS]
        fields.append(f"quote_sides={cmap.quote_sides} (its bid and ask rows one side of a quote each, the other "
                      f"side the stream's previous one; its trade rows trades)")
    keep = [f"keep {c} {keep_said(values)}" if isinstance(values, Mapping) else
            f"keep {c} in {'|'.join(str(v) for v in values)}" for c, values in (cmap.keep or {}).items()]
    signed = ["signed_size=pool (the pool's amount: negative, a buy)"] if cmap.signed_size == "pool" else \
        ["signed_size (negative: a sell)"] if cmap.signed_size else []
    offset = [f"utc_offset={cmap.utc_offset}"] if cmap.utc_offset else []
    decimal = [f"decimal={cmap.decimal}"] if cmap.decimal else []
    hours = [f"hours {cmap.hours}"] if cmap.hours else []
    return ", ".join([f"ts={cmap.ts}{unit}", *offset, stream, *fields, *signed, *scale, *keep, *decimal, *hours])


NO_MAP_GIVEN = "no column map given"  # a detected layout's note: `FILE: no column map given; read as MAP`
NAMED_ALIKE = 3  # files a note on files read alike names; beyond them, how many more
FIRST_TIME = re.compile(r"^its times \(.*?\) carry")  # the part of a naive-times note that differs by file
# the part of a stream's note that names its own file (`stream BTCUSDT, from the file name "BTCUSDT-trades-
# 2024-03-01"`): a day's files of one symbol say alike past it, and their merged note names them all
OWN_FILE_NAME = re.compile(r'from the file name "[^"]*"')


def alike_reads_once(notes: list[str]) -> list[str]:
    """Every per-file note said alike of several files (`FILE: no column map given; read as MAP`, `FILE: stream
    X, from ...`, `FILE: its times carry their own UTC offset, so --tz ... is not applied to it`, `FILE: also has
    time column ..., another clock, not read`: one per file, 500 lines for 500 days, burying the notes that matter,
    review284 #6 and review382 #5) said once, where the first was, with the count and the first names: `59 files:
    no column map given; read as MAP (A, B, C, ... 56 more)`. Alike past the file's own first time (naive times
    read as UTC) and its own name (a stream named by it). A file said otherwise keeps its own line; a Caution stays
    one per file (a run repeats each at its end)."""
    alike: dict[str, list[int]] = defaultdict(list)  # what the note says past the name -> where each is
    for at, note in enumerate(notes):
        name, sep, said = note.partition(": ")
        if sep and name and type(note) is str:
            alike[OWN_FILE_NAME.sub("from the file names", FIRST_TIME.sub("its times carry", said))].append(at)
    merged, dropped = {}, set()
    for places in alike.values():
        names = list(dict.fromkeys(notes[at].partition(": ")[0] for at in places))
        dropped.update(places[1:])  # (a note said twice of one file: once)
        if len(names) > 1:
            more = f", ... {len(names) - NAMED_ALIKE} more" if len(names) > NAMED_ALIKE else ""
            said = OWN_FILE_NAME.sub("from the file names", notes[places[0]].partition(": ")[2])
            merged[places[0]] = f"{len(names)} files: {said} ({', '.join(names[:NAMED_ALIKE])}{more})"
    return [merged.get(at, note) for at, note in enumerate(notes) if at not in dropped]
