"""One tabular file's plan (Parquet, CSV, JSON-lines): `FilePlan`, the file's normalised lazy query and how each
of its rows becomes a wire map (a trade, a quote, both, or a reject said by its row; the shaping of a row's maps and
rejects is in connectors/row_wires.py). The lazy scans that read a
file (`scan_file`, `first_text`, `distinct_text`) and the kinds of tick file are in connectors/file_scans.py.
Plans are made by connectors/planning.py and replayed by connectors/replay.py."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import polars as pl

from connectors import json_lines
from connectors.content_names import SHOWN_AS
from connectors.closed_days import CLOSED_DAY, closed_day
from connectors.column_map import ColumnMap
from connectors.csv_record_lines import record_line
from connectors.csv_dialect import Dialect
from connectors.epoch_counts import scaled_ts
from connectors.file_scans import is_csv, scan_file
from connectors.frame_files import is_frame_copy
from connectors.hours_window import Hours
from connectors.iqfeed_ticks import END_MESSAGE
from connectors.json_lines import is_json_lines
from connectors.keep_filter import SharedKeep, keep_check
from connectors.level_book import TARDIS_L2, LevelBookReducer
from connectors.map_vocabulary import PRICE_FIELDS, QUOTE_FIELDS
from connectors.cut_lines import CUT_LINE
from connectors.price_offsets import offset_of
from connectors.quote_widths import wide_quote_reject
from connectors.row_exprs import TS_BEYOND, UNREAD_CELL
from connectors.row_wires import (NO_TRADE, empty_side_reject, error_value_reject, marked_lacking, offsets_by_stream,
                                  one_side_crossed, quote_without_its_trade, stream_of, trade_and_quote,
                                  unread_number_reject)
from connectors.side_maps import side_lookup
from connectors.shifted_prices import shifted
from connectors.tick_times import beyond_int64_said
from connectors.ticks import QUOTE, TRADE, InvalidTick, one_sided_quote
from connectors.time_range import TimeRange
from engine.quoting import quoted

# what reads a file's 0 bid beside an ask as a price, as a one-sided quote's reject names it (a service's key is
# limits.zero_bid, which a backtest or feed given the service's config reads the files by too)
ZERO_BID_OPTION = "--zero-bid price, or zero_bid: price in the column map"
# a bar file's row that a later bar of its stream and time replaces (connectors/repeated_bars.py)
REPEATED_BAR = ("a bar repeated: a later row of the file has this stream's bar of the same time (a re-download "
                "appended, or a revised bar), and only the last of them is replayed")
# ... or that a bar of its stream and time in a file given after it replaces (connectors/bars_across_files.py)
REPLACED_BAR = ("a bar replaced: a file given after this one has this stream's bar of the same time (a re-download or "
                "a revised bar), and only the later file's is replayed")


@dataclass(frozen=True)
class FilePlan:
    """One file's normalised lazy query (`_ts`, wire fields, `_row`) and how its rows become wire maps."""

    path: Path
    columns: ColumnMap
    frame: pl.LazyFrame
    keys: tuple[str, ...]
    sorted_on_read: bool
    ts_factor: int  # ns per unit of the `_ts` column: 1 when the query computed ns already
    notes: tuple[str, ...] = ()  # what a user should know about how the file was read (a guessed layout, ...)
    origin: Path | None = None  # the zip archive `path` was unpacked from (connectors/archives.py), if any
    given: Path | None = None  # the file as given where `path` is a link named by its content (content_names.py)
    book: str | None = None  # "mbo" / "mbp-1": Databento order-book records, reduced as DBN files are (`_book`)
    empty_sides: bool = False  # an empty bid or ask is a book side with no orders (Tardis.dev's): never filled
    bars: bool = False  # rows are bars (OHLC), each a trade at its close (layout_notes.trade_bars)
    nonpositive_prices: bool = False  # every price of a row that trades is <= 0 (reject_hints.py's `price_offset_hint`)
    nonpositive_rows: tuple[int, int] = (0, 0)  # (rows that trade at a price <= 0, rows that trade) (ditto)
    near_zero_streams: frozenset[str] = frozenset()  # streams priced near zero, at 0 too ("": the file's one) (ditto)
    crossing_streams: frozenset[str] = frozenset()  # prices crossing zero, as held or as read (shifted_prices.py)
    yield_streams: frozenset[str] = frozenset()  # of those, the ones priced or named as a yield (yield_offsets.py)
    # stream -> its lowest price at or below zero as the file holds it ("": the file's one): the offset advice's
    lowest_prices: Mapping[str, float] = field(default_factory=dict)
    cut_streams: frozenset[str] = frozenset()  # of those, the ones with such a price between two above zero
    settling_streams: frozenset[str] = frozenset()  # streams priced within [0, settle_top] ending at 0: settled
    settle_top: int = 1  # ... 1 (a probability), or 100 in a prediction market's file (its cents: shifted_prices.py)
    long_rows: Mapping[int, int] = field(default_factory=dict)  # row -> its fields, for rows with too many
    dialect: Dialect | None = None  # a CSV's, as read
    schema: Mapping[str, Any] = field(default_factory=dict)  # the file's columns and their types
    unit_given: bool = False  # the epoch unit was given (a map's or --ts-unit), not read from the first time
    bad_lines: Mapping[int, tuple[str, str]] = field(default_factory=dict)  # JSON lines' row -> (reason, why)
    tickless: Mapping[int, str] = field(default_factory=dict)  # its row -> why: a message without ticks (an ack)
    footer: tuple[int, str] | None = None  # a CSV's last row that is a line of text, no data (file_facts.footer_line)
    header_rows: frozenset[int] = frozenset()  # a CSV's rows that repeat its header (files concatenated)
    end_messages: frozenset[int] = frozenset()  # IQFeed's `!ENDMSG!` rows, one per answer (file_facts._end_message)
    # (`_row`, `_id` as text) of a trades file with a trade id column (repeated_trades.py), lazy: read only for
    # the rows where another file of one of its streams overlaps it
    trade_ids: pl.LazyFrame | None = None
    junk: Mapping[int, str] = field(default_factory=dict)  # a CSV's row -> why its line is none (junk_lines.py)
    reducers: list = field(default_factory=list)  # a book export's reducer of the last read, for `found_on_read`
    span: tuple[int, int] | None = None  # the first and last time (ns) of its rows; None when not known as numbers
    range_dropped: pl.LazyFrame | None = None  # with a time range pushed into `frame` (`within`): the rows it drops
    repeated_bars: frozenset[int] = frozenset()  # bar rows a later bar of their time replaces (repeated_bars.py)
    replaced_bars: frozenset[int] = frozenset()  # ... that a later file's bar replaces (bars_across_files.py)
    # bar_stamp close of a file of one bar per stream: stamped by the spacing across the run's files (ditto)
    close_unstamped: bool = False
    # a header-less CSV's quotes: one whose ask is past this times its bid is rejected (quote_widths.py), else None
    quote_width_limit: float | None = None
    cut_row: int | None = None  # a CSV's last row, cut short without its newline (cut_lines.py), else None
    # one of several replay list entries of this file that keep other values of one column: the rows it counts
    shared_keep: SharedKeep | None = None

    def describe(self) -> dict[str, Any]:
        """What the replay's fingerprint holds for this file."""
        return self.columns.to_dict()

    def within(self, time_range: TimeRange) -> FilePlan:
        """The plan reading only the rows whose time may fall in `time_range`: the range pushed into the lazy query
        (a Parquet scan then skips row groups by their statistics, and no row outside is converted in Python)
        where the file's times are numbers and each row stands alone: not an order book's rows (the book before
        the range builds the top of book inside it), nor quotes filled from the row before. Replay checks each
        tick's own time after it (a float time rounds to ns there), so a float's bounds are one unit wide."""
        if self.book is not None or self.columns.fill_quotes:
            return self
        ts, dtype = pl.col("_ts"), self.frame.collect_schema()["_ts"]
        if dtype.is_integer():  # exact: raw * factor >= start  <=>  raw >= ceil(start / factor)
            low = None if time_range.start is None else -(-time_range.start // self.ts_factor)
            high = None if time_range.end is None else -(-time_range.end // self.ts_factor)
        elif dtype.is_float():
            low = None if time_range.start is None else time_range.start / self.ts_factor - 1
            high = None if time_range.end is None else time_range.end / self.ts_factor + 1
        else:  # times read as text or dates: each tick is checked as it is read
            return self
        inside = (ts >= low if low is not None else pl.lit(True)) & (ts < high if high is not None else pl.lit(True))
        kept = ts.is_null() | inside  # a row without a time is rejected as missing_field, as without a range
        return replace(self, frame=self.frame.filter(kept), range_dropped=self.frame.filter(~kept))

    def row_count(self) -> int | None:
        return self.frame.select(pl.len()).collect().item()

    @property
    def given_name(self) -> str:
        """The file as the user gave it: its path, or an archive's path and the member's name."""
        if self.given is not None:  # (a link named by its content: the temporary link is never named)
            return str(self.given)
        if str(self.path) in SHOWN_AS:  # a stream's temporary copy (standard input)
            return SHOWN_AS[str(self.path)]
        return str(self.path if self.origin is None else self.origin if self.origin.name == self.path.name else
                   f"{self.origin} ({self.path.name} inside)")  # an archive's member; a UTF-16 file's copy is the file

    def where(self, row: int) -> str:
        """A row as a user finds it: the line of a CSV file (after the header), the row of a Parquet file."""
        return f"{self.given_name} {row_in_file(self.path, self.columns, self.dialect, row)}"

    def column_of(self, tick_field: str) -> str | None:
        return self.columns.column_of(tick_field)

    def cell_text(self, row: int, column: str) -> str | None:
        """A cell's text as written: a CSV's, or a Parquet text column's (`110-15+` in a bid column; None for
        other Parquet columns, or no such column), for the first reject of a reason only: the row read again, so
        that the read itself carries no text beside its numbers."""
        if column not in self.schema or (self.dialect is None and self.schema[column] != pl.String):
            return None
        cell = scan_file(self.path, self.columns.names, self.dialect, {column: pl.String} if self.dialect else None,
                         marks_kept=True).select(pl.col(column).cast(pl.String)).slice(row, 1).collect()
        return cell.item() if cell.height else None

    def found_on_read(self) -> list[str]:
        """What reading the file found that a run says at its end: a book export's cancels and fills of orders
        the book never saw."""
        return [note for reducer in self.reducers for note in reducer.unseen_note(self.given_name)]

    def streams_held(self) -> set[str]:
        return self.stream_names()

    @property
    def price_offset(self) -> float | dict[str, float] | None:
        return self.columns.price_offset

    @property
    def zero_bid_is_price(self) -> bool:
        return self.columns.zero_bid == "price"

    def stream_names(self) -> set[str]:
        """Every stream the file's rows name (a scan of its stream column alone): what a selection is checked
        against."""
        cmap = self.columns
        if cmap.stream_col is None:
            return {cmap.stream or cmap.default_stream or ""}
        rows = self.frame
        if no_ticks := [*self.header_rows, *self.end_messages, *([self.footer[0]] if self.footer else [])]:
            # no stream in them (the row number is the frame's last column)
            rows = rows.filter(~pl.nth(-1).is_in(no_ticks))
        return set(rows.select(pl.col("stream").drop_nulls().unique()).collect().to_series().to_list())

    def batches(self, chunk_rows: int) -> Iterator[list[tuple]]:
        """(row number, wire map) per row, `chunk_rows` rows at a time; with a map's `sequence`, (row number, wire
        map, sequence number), which orders the ticks of a time across files (connectors/replay.py)."""
        self.reducers.clear()  # a read again (a restore) finds afresh
        convert = self._converter()
        if self.bad_lines:  # JSON-lines lines that are no object or hold a key twice: rejects, the rest read
            yield [(row, InvalidTick(reason, why)) for row, (reason, why) in self.bad_lines.items()]
        if self.tickless:  # subscription acks, heartbeats: left out, as rows a keep filter leaves out are
            yield [(row, InvalidTick("filtered_out", why)) for row, why in self.tickless.items()]
        sequenced = self.columns.sequence is not None  # (its number is the row's next to last cell)
        last_row = 0
        for chunk in self.frame.collect_batches(chunk_size=chunk_rows, lazy=True):
            out = []
            for row in chunk.rows():
                wire = convert(row)
                if type(wire) is tuple:  # a trade with the quote it met: the quote, then the trade
                    out += [(row[-1], part, row[-2]) if sequenced else (row[-1], part) for part in wire]
                elif wire is not None:  # None: an order-book record that makes no tick
                    out.append((row[-1], wire, row[-2]) if sequenced else (row[-1], wire))
            last_row = chunk.item(chunk.height - 1, chunk.width - 1) if chunk.height else last_row
            yield out
        # a Tardis L2 book quotes an event when the next row begins: the file's last event, at its last row
        if self.book == TARDIS_L2 and (tail := self.reducers[-1].flush()) is not None:
            yield [(last_row, tail, None) if sequenced else (last_row, tail)]

    def _converter(self) -> Callable[[tuple], dict[str, Any] | tuple[dict[str, Any], ...] | InvalidTick]:
        """The function that makes each row a wire map (or two, or a reject). What it needs of the plan is read
        here once into locals, so that the per-row `convert` does no attribute lookups and no calls but those a
        row needs: it stays one closure for that (the per-row hot path of a replay), its rare cases helpers."""
        cmap, factor = self.columns, self.ts_factor
        # A map with only one kind's columns fixes the kind, so a row missing its price reads as missing_field.
        kind = cmap.kind or (QUOTE if cmap.price is None else TRADE if cmap.bid is None else None)
        stream = cmap.stream or (cmap.default_stream if cmap.stream_col is None else None)
        fixed = {k: v for k, v in (("stream", stream), ("kind", kind)) if v is not None}
        side_of, scale, signed = side_lookup(cmap.side_map), cmap.price_scale, bool(cmap.signed_size)
        offset = cmap.price_offset
        # per stream: each row's own, looked up by its stream (a column's, at `stream_at`, or the fixed name)
        per_stream = offset if isinstance(offset, dict) else None
        offset_by_stream = offsets_by_stream(per_stream)
        stream_at = self.keys.index("stream") + 1 if "stream" in self.keys else None
        pairs = tuple(enumerate(self.keys, start=1))
        kept = len(self.keys) + 1  # the keep columns follow the keys, then the book's (row_exprs.py's `_book_columns`)
        split = kind is None and self.book is None  # a row with a trade and a quote: both (an order book's: `_book`)
        left_out, kept_end = (keep_check(cmap.keep), kept + len(cmap.keep)) if cmap.keep else (None, kept)
        shared_keep = self.shared_keep
        long_rows = self.long_rows
        quotes = cmap.bid is not None  # a 0 side is no side (one_sided_quote), unless an offset says 0 is a price
        zero_bid_is_price = cmap.zero_bid == "price"  # an option nobody bids: a 0 bid beside an ask is a price
        # a quote row with one side empty: no bid (or no offer), unless the map fills it from the previous quote
        empty_side = cmap.bid is not None and not cmap.fill_quotes and (kind == QUOTE or split)
        unreadable = ("bid", "ask") if self.dialect is not None else ()  # a CSV's unreadable bid or ask: NaN
        marks = tuple(cmap.keep) if split and cmap.keep and cmap.price and cmap.bid else None  # LSEG's Type
        # a bar of price 0 and volume 0 (Cboe DataShop's interval without trades): no trade, not a price of 0
        bar_price = self.keys.index("price") + 1 if self.bars and cmap.size is not None else None
        self_bars = self.bars
        one_sided = cmap.quote_sides is not None  # each quote row one side, the other carried: a cross is no error
        width_limit = self.quote_width_limit
        unread_cells = UNREAD_CELL in self.keys
        beyond_int64 = TS_BEYOND in self.keys

        # a footer, a junk line, a header repeated, a row too long: checked on every row only where the file has one
        without_tick = self._line_without_tick if self.footer is not None or self.junk or self.header_rows or \
            self.end_messages or long_rows or self.repeated_bars or self.replaced_bars or self.cut_row is not None \
            else None
        sequence = cmap.sequence  # its number is the row's next to last cell (connectors/row_order.py's SEQ)
        # (planning.py's _table_plan refuses a window without a zone for naive times)
        left_out_hours = Hours.parse(cmap.hours).left_out(cmap.tz or "UTC", cmap.hours) if cmap.hours else None

        def convert(row: tuple) -> dict[str, Any] | tuple[dict[str, Any], ...] | InvalidTick:
            if without_tick is not None and (no_tick := without_tick(row[-1])) is not None:
                return no_tick
            # the row's stream, taken before a filter leaves the row out: its rows are counted under it
            named = stream if stream_at is None else row[stream_at]
            named = named if isinstance(named, str) else None
            if left_out is not None and (why := left_out(row[kept:kept_end])):
                # (a row another entry of the file reads is none of this one's: no tick, nothing counted)
                return InvalidTick("filtered_out", why, named) if shared_keep is None or \
                    shared_keep.counts(row[kept:kept_end]) else ()
            out = dict(fixed)
            if row[0] is not None:
                out["ts"] = scaled_ts(row[0], factor)
                if left_out_hours is not None and type(out["ts"]) is int and (outside := left_out_hours(out["ts"])):
                    return InvalidTick(outside.reason, outside.message, named)
            if sequence is not None and row[-2] is None:  # its place among the rows of its time is unknown
                return InvalidTick("missing_field", f"sequence (column {quoted(sequence)}) is empty or not a whole "
                                                    "number: the row cannot be put among the rows of its time", named)
            unread = False
            row_offset = offset if per_stream is None else \
                offset_by_stream(row[stream_at] if stream_at is not None else stream)
            for i, key in pairs:
                value = row[i]
                if value is not None and key in unreadable and value != value:  # NaN: neither empty nor a number
                    unread, value = True, None
                elif value is not None and key == "side":
                    value = side_of(value)
                elif key in PRICE_FIELDS and type(value) in (int, float) and \
                        (scale is not None or row_offset is not None):
                    if scale is not None:
                        value = value / scale  # fixed point (LOBSTER, Databento); polars' x * (1/scale) is 1 ulp off
                    if row_offset is not None:
                        value = shifted(value, row_offset)
                if value is not None:
                    out[key] = value
            # a time int64 ns do not hold (past 2262), read as null so as not to wrap: taken out of the wire map
            beyond = out.pop(TS_BEYOND, None) if beyond_int64 else None
            if beyond is not None and row[0] is None:
                return InvalidTick("ts_out_of_range", f"ts must be in [0, 2**63): the time is "
                                                      f"{beyond_int64_said(beyond)}", stream_of(out) or named)
            # a number cell that did not read (`#N/A N/A`, `110-16+`), taken out of the wire map before any use
            cell = out.pop(UNREAD_CELL, None) if unread_cells else None
            if cell is not None and cell[0] == "!":
                return error_value_reject(cell[1:], stream_of(out) or named)
            if marks is not None and "price" not in out and "bid" not in out and "ask" not in out and \
                    (lacking := marked_lacking(cmap, marks, row[kept:kept_end], out)) is not None:
                return lacking
            no_side = one_sided_quote(out, zero_bid_is_price, ZERO_BID_OPTION) if quotes and row_offset is None \
                else None
            if no_side is None and empty_side and not unread and ("bid" in out) != ("ask" in out):
                no_side = empty_side_reject(out)
            if no_side is not None:  # the stream named, so that a stream the selection leaves out is filtered_out
                no_side = InvalidTick(no_side.reason, no_side.message, stream_of(out))
                return no_side if not split or "price" not in out else \
                    (no_side, {k: v for k, v in out.items() if k not in QUOTE_FIELDS})
            if bar_price is not None and row[bar_price] == 0 and out.get("size") == 0:
                no_trade = InvalidTick("filtered_out", f"{NO_TRADE} ({cmap.price} 0, {cmap.size} 0): a bar "
                                                       f"without trades, which has no price to replay")
                return (trade_and_quote(out)[0], no_trade) if split and ("bid" in out or "ask" in out) \
                    else no_trade
            if self_bars and closed_day(out):  # Yahoo's holiday row (connectors/closed_days.py)
                return InvalidTick("filtered_out", CLOSED_DAY, named)
            if cell is not None and "price" not in out and "bid" not in out and "ask" not in out:
                return unread_number_reject(cell[1:], stream_of(out) or named)  # (it was unknown_kind)
            if signed and isinstance(size := out.get("size"), (int, float)) and "price" in out:
                out["size"], out["side"] = abs(size), "sell" if size < 0 else "buy" if size > 0 else None
            if one_sided and (crossed := one_side_crossed(out)) is not None:
                return crossed
            if width_limit is not None and (wide := wide_quote_reject(out, width_limit)) is not None:
                return (wide, trade_and_quote(out)[1]) if split and "price" in out else wide
            if split and "price" in out and ("bid" in out or "ask" in out):
                return trade_and_quote(out)
            # (either side: a bid that did not read beside an ask that did is a quote missing its bid, named)
            if split and ("bid" in out or "ask" in out) and \
                    (traded := next((k for k in ("size", "side") if k in out), None)):
                return quote_without_its_trade(out, traded)
            return out

        if self.book == TARDIS_L2:  # (the raw side and snapshot flag follow the keep columns)
            self.reducers.append(reducer := LevelBookReducer())
            return reducer.reading(convert, kept_end)
        return convert if self.book is None else self._book(convert, kept_end)

    def _line_without_tick(self, row: int) -> InvalidTick | None:
        """Why the file's row ``row`` is no tick (its footer, a junk line, the header repeated, a row with more
        fields than the columns); None for a row read as one."""
        if row == self.cut_row:
            return InvalidTick("truncated_line", CUT_LINE)
        if self.footer is not None and row == self.footer[0]:
            return InvalidTick("filtered_out", f"a footer line ({quoted(self.footer[1])}), no tick: not an error")
        if self.end_messages and row in self.end_messages:  # an answer's end, mid-file: files of several joined
            return InvalidTick("filtered_out", f"IQFeed's end of an answer ({quoted(END_MESSAGE)}), no tick: not an "
                                               "error")
        if self.junk and (why := self.junk.get(row)):
            return InvalidTick("missing_field", why)
        if self.header_rows and row in self.header_rows:
            return InvalidTick("filtered_out", "the line repeats the header row (files joined one after another, "
                                               "a concatenated export), no tick")
        if self.repeated_bars and row in self.repeated_bars:
            return InvalidTick("filtered_out", REPEATED_BAR)
        if self.replaced_bars and row in self.replaced_bars:
            return InvalidTick("filtered_out", REPLACED_BAR)
        if self.long_rows and (fields := self.long_rows.get(row)):
            return InvalidTick("extra_fields", f"the row has {fields} fields, more than the file's columns (a "
                                               f"stray separator?): its cells cannot be told apart")
        return None

    def _book(self, convert: Callable[[tuple], Any], first: int) -> Callable[[tuple], Any]:
        """Rows of a Databento order-book export (the columns row_exprs.py's `_book_columns` adds from ``first``
        on) through the DBN reader's reduction (connectors/book_reducer.py): a trade for action T, a quote when
        the top of book changed at the end of an event, nothing for the other records."""
        from connectors.book_reducer import F_LAST, UNDEF_PRICE, BookReducer

        # a fixed-point export's empty side or trade without a price, as read (shifted as its stream's prices are)
        unshifted = UNDEF_PRICE / (self.columns.price_scale or 1)
        reducer = BookReducer(rebuild=self.book == "mbo", scale=1.0, undefined=unshifted)
        self.reducers.append(reducer)

        def reduce(row: tuple) -> dict[str, Any] | InvalidTick | None:
            wire = convert(row)
            if isinstance(wire, InvalidTick) or "ts" not in wire or "stream" not in wire:
                return wire  # rejected as it is
            action, flags, order = row[first : first + 3]
            quote = wire.get("bid"), wire.get("bid_size"), wire.get("ask"), wire.get("ask_size")
            undefined = shifted(unshifted, offset_of(self.columns.price_offset, wire["stream"]))  # as convert shifts
            empty = None in quote or undefined in (quote[0], quote[2])
            return reducer.record(wire["stream"], wire["stream"], wire["ts"], str(action), wire.get("side"),
                                  wire.get("price"), wire.get("size", 0.0), flags is None or bool(flags & F_LAST),
                                  order, None if empty else quote, undefined=undefined)

        return reduce


def source_path(plan: Any) -> Path:
    """The file a user gave for a plan: the zip archive its file came out of, else the file itself."""
    return getattr(plan, "origin", None) or plan.path


def row_in_file(path: Path, cmap: ColumnMap, dialect: Dialect | None, row: int) -> str:
    """A file row number (ROW) as a user finds it in the file: `line 7` of a CSV (after its header and a banner
    above it), a JSON-lines file's line (or a message's, a REST dump's record), `row 7` of a Parquet file."""
    if is_csv(path):
        header = cmap.names is None or dialect is not None and dialect.header
        skipped = dialect.skipped if dialect is not None else 0  # a banner above the header
        return f"line {record_line(path, row + (1 if header else 0) + skipped)}"  # (quoted line breaks counted)
    if is_json_lines(path):  # a line, a message's line (several ticks), a REST dump's record
        return json_lines.table(path).where(row)
    if is_frame_copy(path):  # a DataFrame's: its position, as df.iloc and the answers' `row` count (0 first)
        return f"position {row}"
    return f"row {row + 1}"
