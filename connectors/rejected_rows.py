"""Rejected replay rows counted: `RejectCounter` counts a replay's rows refused by reason, by stream and, for the
rows left out on purpose (filtered_out), by the filter that left them out (`LEFT_OUT_CAUSES`), keeping the first
row of each as a user finds it (its words are connectors/reject_hints.py's); `streams_said` says a reason's rows by
stream. One bad row never stops a replay: it is counted here and said at the run's end.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from typing import Any

from connectors.hours_window import HOURS_LEFT_OUT
from connectors.keep_filter import KEEP_LEAVES_OUT
from connectors.reject_hints import needing_offsets, price_offset_hint, reject_example, settled
from connectors.row_wires import ONE_SIDE_MOVED
from connectors.zero_crossings import crosses_zero, is_yield
from connectors.shifted_prices import (
    SAID_STREAMS,
    ZERO_MAY_BE_A_PRICE,
    ZERO_SIDE,
    nonpositive_reading,
    offset_advice,
    shifted_message,
)
from connectors.ticks import InvalidTick, counted
from engine.quoting import quoted

NOT_SELECTED = "is not among the streams selected"  # a selection's filtered_out (LEFT_OUT_CAUSES)


class RejectCounter(Counter):
    """Rejected rows by reason, with the first row of each reason as a user finds it (file, line or row,
    column): a Counter, so `replay.rejected == {"missing_field": 3}` reads as before. Each reason's rows are
    counted by stream too (`by_stream`), where the row got as far as naming one."""

    def __init__(self) -> None:
        super().__init__()
        self.examples: dict[str, str] = {}
        self.by_stream: defaultdict[str, Counter] = defaultdict(Counter)
        self.streams_read: set[str] = set()  # streams with a tick read (the cursors add them)
        # nonpositive_price rows: each stream's lowest price as read (before any offset), the first row as said, and
        # once an offset is the way out, why (a price below zero, many at zero: `price_offset_hint`; '' for an
        # offset given too small, which the row says) and whether the offset given was one for every stream
        self.lowest_nonpositive: dict[str, float] = {}
        self._first_nonpositive = ""
        self._offset_why: str | None = None  # None: no offset advised (yet): a lone 0 is bad data
        self._one_offset_for_all = False
        self.below_zero = False  # a price below zero was rejected (not shifted by an offset)
        # stream -> its lowest price as read, of the streams whose rows at or below zero an offset should lift
        # (needing_offsets: below zero, or at 0 where 0 is a price; not a contract's settlement, nor a lone 0 print):
        # (zero_crossings.py: one with such rows between two of its ticks read, `cut`, has holes cut out of it)
        self.to_lift: dict[str, float] = {}
        self.cut: set[str] = set()  # streams with a price at or below zero refused between two of their ticks read
        self.crossing: set[str] = set()  # of to_lift, those whose prices cross zero: below it, or a spread near it
        self.yields: set[str] = set()  # of to_lift, those priced or named as a yield (zero_crossings.is_yield)
        # filtered_out by cause (LEFT_OUT_CAUSES): rows, rows by stream, the first row
        self.left_out_rows: Counter = Counter()
        self.left_out_streams: defaultdict[str, Counter] = defaultdict(Counter)
        self.left_out_examples: dict[str, str] = {}

    def add(self, err: InvalidTick, plan: Any, row: int) -> None:
        self[err.reason] += 1
        if isinstance(err.stream, str):
            self.by_stream[err.reason][err.stream] += 1
        if err.reason == "filtered_out":  # each filter's rows under their streams, with their own first row
            cause = left_out_cause(err)
            self.left_out_rows[cause] += 1
            if isinstance(err.stream, str):
                self.left_out_streams[cause][err.stream] += 1
            if cause not in self.left_out_examples:
                self.left_out_examples[cause] = reject_example(err, plan, row, cause)
                self.examples["filtered_out"] = self._left_out_example()
            return
        if err.reason == "nonpositive_price":
            self._add_nonpositive(err, plan, row)
        elif err.reason not in self.examples:
            self.examples[err.reason] = reject_example(err, plan, row)
        self._zero_may_be_a_price(err)

    @property
    def one_offset_for_all(self) -> bool:
        """Whether the offset that left prices at or below zero was one number for every stream."""
        return self._one_offset_for_all

    def _left_out_example(self) -> str:
        """The first row each filter left out: the first cause's as it is, each other's named by its cause."""
        (first, example), *others = self.left_out_examples.items()
        return "; ".join([example, *(f"first {LEFT_OUT_CAUSES[cause]}: {said}" for cause, said in others)])

    def _zero_may_be_a_price(self, err: InvalidTick) -> None:
        """A 0 bid or ask is no side (TAQ's "no bid"), but in files that also hold prices below zero it is likely
        a price of a spread crossing zero: the one-sided quotes' reject then names --price-offset, whichever of
        the two reasons came first (one cause, the offset, for both)."""
        if err.reason not in ("nonpositive_price", "missing_field"):  # (every reject passes here: a file of
            return  # millions of filtered-out rows does no regex work for them)
        self.below_zero = self.below_zero or (err.reason == "nonpositive_price"
                                              and re.search(r"got -\d", err.message) is not None)
        example = self.examples.get("missing_field", "")
        if self.below_zero and ZERO_SIDE.search(example) and "--price-offset" not in example:  # (near zero: named)
            self.examples["missing_field"] = example + ZERO_MAY_BE_A_PRICE

    def _add_nonpositive(self, err: InvalidTick, plan: Any, row: int) -> None:
        """A price at or below zero: the first such row, said with the price as read (and the offset and shifted
        price, where an offset left it there); once an offset is the way out, the lowest price of each stream
        refused and the offsets to paste that lift them above zero, the same advice whether none was given yet or
        one too small (shifted_prices.offset_advice), updated as lower ones come."""
        reading = nonpositive_reading(err, getattr(plan, "price_offset", None))
        shifted = reading is not None and reading.offset != 0
        # the file's lowest, not only the rows refused so far: rows refused for another reason first (an unread
        # time) hold prices too, and advice from the others left them below zero for a second round
        low = None if reading is None else min(reading.read, _file_lowest(plan, reading.stream))
        lower = low is not None and low < self.lowest_nonpositive.get(reading.stream, math.inf)
        if lower:
            self.lowest_nonpositive[reading.stream] = low
        if reading is not None and not settled(err, plan) and needing_offsets({reading.stream: low}, plan):
            self.to_lift[reading.stream] = min(low, self.to_lift.get(reading.stream, math.inf))
            if crosses_zero(reading.stream, plan, low):
                self.crossing.add(reading.stream)
            if is_yield(reading.stream, plan):
                self.yields.add(reading.stream)
        first = not self._first_nonpositive
        if first and shifted:
            column = plan.column_of(reading.field)
            self._first_nonpositive = f"{plan.where(row)}: {shifted_message(reading)}" + \
                (f" (column {quoted(column)})" if column else "")
        elif first:
            self._first_nonpositive = reject_example(err, plan, row)
        advised = self._offset_why is not None
        if not advised:
            self._offset_why = "" if shifted else (price_offset_hint(err, plan) or None)
        if shifted:  # a number for every stream given too small: a number again, not one per stream
            self._one_offset_for_all = not isinstance(getattr(plan, "price_offset", None), dict)
        if not (first or (lower and self._offset_why is not None) or advised != (self._offset_why is not None)):
            return
        said = self._first_nonpositive
        if self._offset_why is not None:
            lowest = needing_offsets(self.lowest_nonpositive, plan)
            said += self._offset_why + (offset_advice(lowest, self._one_offset_for_all, self.yields)
                                        if lowest else ": --price-offset X (docs/replay.md)")
        self.examples["nonpositive_price"] = said

    def streams_of(self) -> dict[str, str]:
        """Per reason, the streams that lost rows to it, the most first (``CLK0 1750, CLM6-N6 59``), when the
        files hold several streams: which contract of a file lost its rows, not only how many. Empty for one.
        Rows the reason refused before they named a stream (a one-sided quote whose symbol cell is empty) are said
        after them, so the numbers add up to the reason's count."""
        rejected = set().union(*self.by_stream.values())
        if len(self.streams_read | rejected) < 2:
            return {}
        said = {reason: streams_said(counts, self[reason]) + self._lost_every_tick(counts)
                for reason, counts in self.by_stream.items() if reason != "filtered_out"}
        if len(self.left_out_rows) > 1:  # each filter's rows apart: a keep filter's are not the selection's
            said["filtered_out"] = "; ".join(  # (a footer or a heartbeat names no stream: its count alone)
                f"{count} {LEFT_OUT_CAUSES[cause]}" + (f": {streams_said(self.left_out_streams[cause], count)}"
                                                       if self.left_out_streams[cause] else "")
                for cause, count in self.left_out_rows.items())
        elif "filtered_out" in self.by_stream:
            said["filtered_out"] = streams_said(self.by_stream["filtered_out"], self["filtered_out"])
        return said

    def _lost_every_tick(self, counts: Counter) -> str:
        """Of a reason's streams, those with no tick read at all, said by number: a whole instrument (an option
        series whose every quote was refused) must not vanish from a run as a share of its ticks."""
        lost = [stream for stream, _ in counts.most_common() if stream not in self.streams_read]
        if not lost or not self.streams_read:  # none read at all: the run's error says every row was rejected
            return ""
        named = ", ".join(lost[:SAID_STREAMS])
        return (f"; {counted(len(lost), 'stream')} lost every tick (none read), e.g. {named}" if len(lost) > 1
                else f"; {named} lost every tick (none read)")

    def clear(self) -> None:
        super().clear()
        self.examples.clear()
        self.by_stream.clear()
        self.streams_read.clear()
        self.lowest_nonpositive.clear()
        self._first_nonpositive = ""
        self._offset_why = None
        self._one_offset_for_all = False
        self.below_zero = False
        self.to_lift.clear()
        self.cut.clear()
        self.crossing.clear()
        self.yields.clear()
        self.left_out_rows.clear()
        self.left_out_streams.clear()
        self.left_out_examples.clear()


# why a row was left out (filtered_out), as a summary says it: a stream selection's, a keep filter's, --hours',
# or a row holding no tick (a footer, a bar without trades, a heartbeat)
LEFT_OUT_CAUSES = {"selection": "of streams not selected", "keep": "by the map's keep",
                   "hours": "outside the hours kept", "no_tick": "holding no tick",
                   "one_side": "crossed by one side moving first"}


def left_out_cause(err: InvalidTick) -> str:
    """The filter that left a row out (a key of LEFT_OUT_CAUSES), by the words its reject is made with."""
    if NOT_SELECTED in err.message:
        return "selection"
    if KEEP_LEAVES_OUT in err.message:
        return "keep"
    if ONE_SIDE_MOVED in err.message:  # a quote_sides file's crossed book (connectors/row_wires.py)
        return "one_side"
    return "hours" if HOURS_LEFT_OUT in err.message else "no_tick"


def streams_said(counts: Counter, total: int) -> str:
    """A reason's rejected rows by stream, the most first, SAID_STREAMS of them and a count of the others, then
    those of its ``total`` rows that named no stream."""
    top = counts.most_common()
    said = ", ".join(f"{stream} {count}" for stream, count in top[:SAID_STREAMS])
    rest = top[SAID_STREAMS:]
    nameless = total - sum(counts.values())
    return said + (f", {sum(c for _, c in rest)} in {len(rest)} other stream{'s' * (len(rest) > 1)}" if rest else "") \
        + (f" and {counted(nameless, 'row')} with no stream" if nameless > 0 else "")


def _file_lowest(plan: Any, stream: str) -> float:
    """A stream's lowest price at or below zero in a file's plan (FilePlan.lowest_prices; "": a file of one stream,
    named by the map), inf where the plan does not say."""
    lowest = getattr(plan, "lowest_prices", None) or {}
    return lowest.get(stream, lowest.get("", math.inf))
