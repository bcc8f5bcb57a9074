"""One instrument's order book as an MBO feed builds it: resting orders by id, size per price, best bid and ask.

Apart from connectors/book_reducer.py because the book is state with its own invariant (each level's size is the
sum of its resting orders; the heaps' tops are found by lazy deletion), whereas the reducer turns records into
ticks. Only an MBO (order by order) reduction rebuilds a book; MBP-1 records carry their top level.
"""

from __future__ import annotations

import heapq
from typing import Any

BOOK_SIDES = ("B", "A")


class OrderBook:
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


def apply_mbo(book: OrderBook, action: str, side: str | None, order_id: Any, price: Any, size: Any
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
