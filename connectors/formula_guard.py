"""Stream names in a CSV tick export guarded against spreadsheet formula injection, and the guard undone when
flashtick reads its own export back.

Stream names come from the wire, and a spreadsheet opening a CSV runs a cell beginning with ``=``, ``+``, ``-``, ``@``
(a tab, a CR) as a formula (``=cmd|' /C calc'!A0``), so `flashtick ticklog export` writes such a name with a leading
``'`` (OWASP's advice: the cell is then text). Real symbols begin so (IQFeed's ``@ESM24``, TradeStation's ``@ES``),
and a backtest or feed replay of the export must name the streams as the service did: a CSV whose header is the
export's (the wire's columns, in their order, beginning ``stream,ts,kind``) has one leading ``'`` taken off each such
name. The guard adds one to a name that already begins with ``'`` before such a character too (``'=x`` is written
``''=x``), so taking one off gives back every name exactly.
"""

from __future__ import annotations

import polars as pl

# the wire's columns in their order (connectors/ticks.py's to_wire): an export writes the first three and those of
# the rest that any exported tick has (`seq`, the feed's sequence number, last, as the wire orders it)
EXPORT_COLUMNS = ("stream", "ts", "kind", "price", "size", "side", "bid", "ask", "bid_size", "ask_size", "seq")
EXPORT_SEQ = "seq"
GUARD_NEEDED = r"^'*[=+\-@\t\r]"  # a formula's start, or one guarded already (a spreadsheet shows one ' less)
GUARDED = r"^'('*[=+\-@\t\r])"  # a guarded name: the guard's ', then the name


def guarded(stream: pl.Expr) -> pl.Expr:
    """Stream names as an export's CSV writes them."""
    return pl.when(stream.str.contains(GUARD_NEEDED)).then("'" + stream).otherwise(stream)


def unguarded(stream: pl.Expr) -> pl.Expr:
    """Stream names as the engine had them, from a CSV an export wrote (``is_export_header``)."""
    return stream.str.replace(GUARDED, "${1}")


def is_export_header(columns: list[str]) -> bool:
    """The header a CSV `flashtick ticklog export` writes: ``stream,ts,kind``, then some of the wire's other columns
    in the wire's order."""
    if tuple(columns[:3]) != EXPORT_COLUMNS[:3]:
        return False
    rest = iter(EXPORT_COLUMNS[3:])
    return all(column in rest for column in columns[3:])  # (each found past the one before it)
