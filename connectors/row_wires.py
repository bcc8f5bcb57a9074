"""A file row's wire maps, as FilePlan (connectors/file_plan.py) shapes them: a row holding a trade and a quote
split in two, a quote with an empty side or a trade with an empty price said as what it lacks, a row whose kind
column marks it a trade or a quote said by that mark, and each stream's price offset looked up once."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from connectors.column_map import ColumnMap
from connectors.column_names import QUOTE_MARKS, TRADE_MARKS
from connectors.map_vocabulary import QUOTE_FIELDS, TRADE_FIELDS
from connectors.price_offsets import offset_of
from connectors.ticks import QUOTE, TRADE, InvalidTick
from engine.quoting import quoted


def offsets_by_stream(per_stream: Mapping[str, float] | None) -> Callable[[Any], float | None]:
    """A stream's price offset (by its name or a glob of the map's), looked up once per stream."""
    offsets_found: dict[Any, float | None] = {}  # stream -> its offset (by name or glob), looked up once

    def offset_by_stream(name: Any) -> float | None:
        if name not in offsets_found:
            offsets_found[name] = offset_of(per_stream, name) or None
        return offsets_found[name]
    return offset_by_stream


def marked_lacking(cmap: ColumnMap, marks: Sequence[str], cells: Sequence[Any],
                    out: dict[str, Any]) -> InvalidTick | None:
    """A row without price, bid or ask whose kind column (LSEG's Type) marks it a trade or a quote: what it lacks
    is said; None when no column marks it."""
    for column, mark in zip(marks, cells):  # the row says its kind: what it lacks is said
        if (kind_of := marked_kind(mark)) is not None:
            lacks = f"no price (column {quoted(cmap.price)})" if kind_of == TRADE else \
                f"neither bid nor ask (columns {quoted(cmap.bid)}, {quoted(cmap.ask)})"
            return InvalidTick("missing_field", f"column {quoted(column)} marks the row {mark} but it has "
                                                f"{lacks}", stream_of(out))
    return None


def stream_of(wire: dict[str, Any]) -> str | None:
    """A row's stream, for a reject made before validation (None: it has none, or not as text)."""
    stream = wire.get("stream")
    return stream if isinstance(stream, str) else None


def error_value_reject(cell: str, stream: str | None) -> InvalidTick:
    """A row whose number cell holds a spreadsheet's or terminal's error value (row_exprs.py's ERROR_VALUE, "field\t
    text"): its own reason, the cell quoted, and what it is (review374 #2: it was unknown_kind, as if empty)."""
    field, text = cell.split("\t", 1)
    return InvalidTick("error_value", f"{field} {quoted(text)} is a spreadsheet's or terminal's error value, not a "
                                      f"number (Bloomberg's #N/A N/A: no value for the field at that time; Excel's "
                                      f"#VALUE!, #REF!): no tick to read; fix or leave out such rows at the source",
                       stream)


UNREAD_SAID = "did not read as a number"  # what the reject below says, for reject_hints.py's cell and its hint


def unread_number_reject(cell: str, stream: str | None) -> InvalidTick:
    """A row whose only price, bid or ask cell is text that reads as no number ("field\ttext"): missing_field, the
    reject's example then quoting the cell with what it may be (`110-16+`: CME's 32nds, naming --price-format
    32nds), where it was unknown_kind ("neither price nor bid/ask present") for a file whose rows are of either
    kind (review374 #8)."""
    field = cell.split("\t", 1)[0]
    return InvalidTick("missing_field", f"{field} {UNREAD_SAID}", stream)


def empty_side_reject(wire: dict[str, Any]) -> InvalidTick:
    """A quote row whose bid or ask cell is empty: no bid (or no offer), a one-sided quote, as a 0 side is
    (connectors/ticks.py one_sided_quote); never the previous quote's side, which may no longer exist."""
    side, other = ("bid", "ask") if "bid" not in wire else ("ask", "bid")
    return InvalidTick("missing_field", f"{side} is empty beside {other} {wire[other]}: a one-sided quote (no {side}), "
                                        f"which the engine does not take (a quote has both sides)")


def marked_kind(mark: Any) -> str | None:
    """The kind a kind column's value names (LSEG's Type: Trade, Quote), else None."""
    text = str(mark).strip().lower() if mark is not None else ""
    return TRADE if text in TRADE_MARKS else QUOTE if text in QUOTE_MARKS else None


def quote_without_its_trade(row: dict[str, Any], traded: str) -> tuple[dict[str, Any], InvalidTick]:
    """A row holding a quote and a trade whose price is empty or not a number: its quote replays, its trade is
    rejected as missing_field on the price, as a row with a 0 bid keeps its trade (never a quote refused for a
    trade field it holds)."""
    quote, _ = trade_and_quote(row)
    return quote, InvalidTick("missing_field", f"price is missing beside {traded} {row[traded]}: the row's trade "
                                               f"is not read (its quote is)", stream_of(row))


def trade_and_quote(row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A row holding a trade and a quote (a trade printed with the book's best bid and offer, Coinbase Advanced
    Trade's, TAQ joined with the NBBO): two ticks at its time, the quote first (the book the trade met)."""
    common = {k: row[k] for k in ("ts", "stream") if k in row}
    quote = {**common, "kind": QUOTE, **{k: row[k] for k in QUOTE_FIELDS if k in row}}
    trade = {**common, "kind": TRADE, **{k: row[k] for k in TRADE_FIELDS if k in row}}
    return quote, trade


NO_TRADE = "no trade in this interval"  # a bar's filtered_out: not an error, nor a price of 0


def one_side_crossed(wire: dict[str, Any]) -> InvalidTick | None:
    """A quote_sides file's quote (Bloomberg's tick history: each BID or ASK row one side, the other carried from the
    stream's previous quote) whose new side crossed the carried one: the book moving one side first (BID 10.02 over
    the last ASK 10.01, its ASK 10.03 on the next row), no bad data. Its crossed quote, a book that never was, is
    left out (filtered_out, not an error; review374 #7: 14-18% of such files were rejected as crossed_quote with a
    "column misread?" warning); the new side still carries, so the other side's next row makes the quote. None for
    any other row."""
    bid, ask = wire.get("bid"), wire.get("ask")
    if not isinstance(bid, (int, float)) or not isinstance(ask, (int, float)) or not bid > ask > 0:
        return None  # (a side at or below 0 is rejected for that, as in any quote)
    return InvalidTick("filtered_out", f"bid {bid} above ask {ask}, one side carried from the stream's previous "
                                       f"quote: {ONE_SIDE_MOVED} before the other's row came (a one-sided update), so "
                                       f"this crossed quote is left out, not an error; the next row of the other "
                                       f"side makes the quote", stream_of(wire))


ONE_SIDE_MOVED = "one side of the book moved"  # its filtered_out's words (rejected_rows.py's LEFT_OUT_CAUSES)
