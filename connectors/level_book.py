"""Tardis.dev `incremental_book_L2` rows (`exchange,symbol,timestamp,local_timestamp,is_snapshot,side,price,amount`)
reduced to top-of-book quotes. Each row sets one price level's size (`amount` is the level's new size, not a
change; 0 deletes the level); rows flagged `is_snapshot` rebuild a side from nothing. These rows are never trades:
read as trades (its `side` bid/ask mapped to buy/sell) every level update would print a made-up trade.

Apart from connectors/book_reducer.py because the records differ: Databento's carry an action and an event flag
(F_LAST), Tardis's rows are levels with a snapshot flag, and an event is the run of rows of one stream at one
timestamp. A quote is made when that run ends (the next row is of another stream or time, or the file ends) and
the best bid, the best ask or their sizes changed, stamped with the run's timestamp.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable

from connectors.ticks import QUOTE, InvalidTick
from engine.quoting import quoted

TARDIS_L2 = "tardis-l2"  # FilePlan.book's value for these files
L2_SIGNS = frozenset({"is_snapshot", "side", "price", "amount"})  # beside Tardis's exchange, symbol, timestamp
BOOK_SIDES = {"bid": "bid", "ask": "ask", "buy": "bid", "sell": "ask"}  # a side map's buy/sell read as bid/ask


class LevelSide:
    """One side of a book: size by price, its best found by a heap with lazy deletion (an emptied level is popped
    when it reaches the top)."""

    def __init__(self, highest_first: bool) -> None:
        self.sign = -1.0 if highest_first else 1.0
        self.sizes: dict[float, float] = {}
        self.heap: list[float] = []

    def set(self, price: float, size: float) -> None:
        if size == 0:
            self.sizes.pop(price, None)
            return
        if price not in self.sizes:
            heapq.heappush(self.heap, self.sign * price)
        self.sizes[price] = size

    def best(self) -> tuple[float, float] | None:
        while self.heap and (price := self.sign * self.heap[0]) not in self.sizes:
            heapq.heappop(self.heap)
        return (price, self.sizes[price]) if self.heap else None


class LevelBook:
    """One stream's two sides, and whether each is being rebuilt by a snapshot now."""

    def __init__(self) -> None:
        self.sides = {"bid": LevelSide(highest_first=True), "ask": LevelSide(highest_first=False)}
        self.in_snapshot = {"bid": False, "ask": False}

    def apply(self, side: str, price: float, size: float, snapshot: bool) -> None:
        if snapshot and not self.in_snapshot[side]:  # a snapshot begins (the file's first, or after a reconnect)
            self.sides[side] = LevelSide(highest_first=side == "bid")
        self.in_snapshot[side] = snapshot
        if not snapshot:
            self.in_snapshot = {"bid": False, "ask": False}
        self.sides[side].set(price, size)

    def top(self) -> tuple[float, float, float, float] | None:
        """(bid, bid size, ask, ask size); None while a side is empty."""
        bid, ask = self.sides["bid"].best(), self.sides["ask"].best()
        return None if bid is None or ask is None else (bid[0], bid[1], ask[0], ask[1])


class LevelBookReducer:
    """Level rows in, quotes out, one event late: `row` returns the quote of the event the row ends (None when the
    top did not change), `flush` the last event's at the end of the file."""

    def __init__(self) -> None:
        self.books: dict[str, LevelBook] = {}
        self.shown: dict[str, tuple[float, float, float, float]] = {}  # stream -> last top of book quoted
        self.event: tuple[str, int] | None = None  # (stream, ts) of the rows applied and not yet quoted

    def reading(self, convert: Callable[[tuple], Any], first: int) -> Callable[[tuple], Any]:
        """A plan's row converter (connectors/file_plan.py) made to pass its rows through the book: ``first`` is
        where the raw side and snapshot flag (row_exprs.py's `_level_columns`) stand in a row."""
        def reduce(row: tuple) -> dict[str, Any] | tuple | InvalidTick | None:
            wire = convert(row)
            return wire if isinstance(wire, InvalidTick) else self.row(wire, row[first], bool(row[first + 1]))

        return reduce

    def row(self, wire: dict[str, Any], side: Any, snapshot: bool) -> dict[str, Any] | InvalidTick | None:
        """``wire``: the row read as a trade would be (stream, ts, price, size), ``side`` the file's raw cell."""
        stream, ts = wire.get("stream"), wire.get("ts")
        book_side = BOOK_SIDES.get(str(side).strip().lower()) if side is not None else None
        price, size = wire.get("price"), wire.get("size")
        if book_side is None or type(price) not in (int, float) or type(size) not in (int, float) or \
                stream is None or ts is None:
            ended = self.flush()  # (rows before it stay quoted in order)
            why = InvalidTick("missing_field", f"a book level row needs a side bid/ask, a price and an amount, got "
                                               f"side {quoted(side)}, price {quoted(price)}, amount {quoted(size)}",
                              stream)
            return why if ended is None else (ended, why)
        ended = self.flush() if self.event is not None and self.event != (stream, ts) else None
        self.event = (stream, ts)
        self.books.setdefault(stream, LevelBook()).apply(book_side, float(price), float(size), snapshot)
        return ended

    def flush(self) -> dict[str, Any] | None:
        """The quote of the event applied last, if its top of book changed; the event is then closed."""
        if self.event is None:
            return None
        (stream, ts), self.event = self.event, None
        top = self.books[stream].top()
        if top is None or self.shown.get(stream) == top:
            return None
        self.shown[stream] = top
        return {"kind": QUOTE, "stream": stream, "ts": ts, "bid": top[0], "bid_size": top[1], "ask": top[2],
                "ask_size": top[3]}

    def unseen_note(self, name: str) -> list[str]:  # as BookReducer's: FilePlan.found_on_read asks every reducer
        return []
