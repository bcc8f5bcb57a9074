"""Databento order-book records reduced to our ticks: a trade per trade record, a quote when the top of book changes.

Apart from connectors/dbn.py because two readers share it: the DBN file reader and Databento's CSV/Parquet exports
of the same schemas (connectors/file_plan.py), so one feed replays alike from either. It holds Databento's record
conventions both readers need (the F_LAST flag, the undefined price).
"""

from __future__ import annotations

from typing import Any

from connectors.order_book import OrderBook, apply_mbo
from connectors.price_offsets import PriceOffset, offset_of
from connectors.shifted_prices import shifted
from connectors.ticks import QUOTE, TRADE, InvalidTick

F_LAST = 1 << 7  # DBN's flag on the last record of an exchange event (databento_dbn.F_LAST)
UNDEF_PRICE = (1 << 63) - 1  # DBN's "no price" (an empty book side), as its fixed-point exports write it
BOOK_SIDE = {"buy": "B", "sell": "A"}  # a resting order's side, as the reducer is given it -> the book's


class BookReducer:
    """The reduction connectors/dbn.py describes, one record at a time: a trade for action `T`, a quote when the top of
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
        self.books: dict[Any, OrderBook] = {}
        self.shown: dict[Any, tuple[Any, Any, Any, Any]] = {}  # instrument -> last top of book emitted
        self.unseen = 0
        self.first_unseen: tuple[str, Any] | None = None

    def record(self, key: Any, stream: str, ts: int, action: str, side: str | None, price: Any, size: Any,
               last: bool, order_id: Any = None, top: tuple[Any, Any, Any, Any] | None = None,
               undefined: Any = None) -> dict[str, Any] | tuple[dict[str, Any], dict[str, Any]] | InvalidTick | None:
        """The tick one record makes (None: it makes none; InvalidTick: a trade without a price; a trade that ends
        its event, its trade and the event's quote, in that order, where the top of book changed). ``top``: MBP-1's
        (bid, bid size, ask, ask size), None while a side is empty. ``undefined``: the "no price" of this record's
        stream, where prices were shifted before (an export's rows), else the reducer's."""
        if self.rebuild:
            book = self.books.setdefault(key, OrderBook())
            if action in ("C", "F") and order_id not in book.orders:
                self.unseen += 1
                self.first_unseen = self.first_unseen or (stream, order_id)
            top = apply_mbo(book, action, BOOK_SIDE.get(side), order_id, price, size)
        offset = offset_of(self.offset, stream)
        trade = None
        if action == "T":
            if price == (self.undefined if undefined is None else undefined):  # as an empty book side is
                return InvalidTick("missing_field", f"a trade record with Databento's undefined price "
                                                    f"(UNDEF_PRICE, {UNDEF_PRICE}): the trade has no price", stream)
            trade = {"kind": TRADE, "stream": stream, "ts": ts, "price": shifted(price / self.scale, offset),
                     "size": float(size)}
            if side is not None:
                trade["side"] = side
        # the event's top of book, when it ends, whatever record ends it: an event ending on a trade or a fill
        # (F_LAST on its T or F) held the quote of its cancels and adds back until a later event ended
        quote = self._quote(key, stream, ts, top, offset) if last else None
        if trade is not None and quote is not None:
            return trade, quote
        return trade or quote

    def _quote(self, key: Any, stream: str, ts: int, top: tuple[Any, Any, Any, Any] | None, offset: Any
               ) -> dict[str, Any] | None:
        """A quote of the top of book ``top`` when it is not the one last shown for ``key``, else None."""
        if top is None or self.shown.get(key) == top:
            return None
        self.shown[key] = top
        bid, bid_size, ask, ask_size = top
        return {"kind": QUOTE, "stream": stream, "ts": ts, "bid": shifted(bid / self.scale, offset),
                "ask": shifted(ask / self.scale, offset), "bid_size": float(bid_size), "ask_size": float(ask_size)}

    def unseen_note(self, name: str) -> list[str]:
        """The note on cancels and fills of orders the book never saw: said once, at the end of a run."""
        if not self.unseen:
            return []
        stream, order_id = self.first_unseen
        return [f"{name}: {self.unseen} cancel or fill record(s) of an order the book never saw added (the first: "
                f"{stream}, order {order_id}): the file seems to start mid-session, so the top of book may miss "
                f"orders resting from before it until they trade or cancel"]
