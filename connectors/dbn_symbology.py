"""Which symbol a DBN record's instrument id names at a time: the file's symbology (`Symbology`).

Apart from connectors/dbn.py because the mapping of ids to symbols over dates (rolls, a Sunday evening before a
Monday mapping, a live feed's symbol mapping records) is its own set of rules, read both while decoding records
and from the metadata alone (which streams a file can make, and when).
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any

from connectors.ticks import utc_text
from engine.quoting import quoted

DAY_NS = 86_400 * 10**9


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
                         f"first at {utc_text(first)}; it is {dated}, UTC dates), read as stream "
                         f"{quoted(str(instrument_id))}: a stream apart from its symbol's")
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
