"""What a file's values say about how its columns are read, from a sample of its rows, while its layout is settled
(connectors/file_layout.py): a column marking each row's kind (`kind_column`: trades only, or trades and quotes),
and side columns whose values call for a side map (`fix_sides`: FIX's 1/2, a prediction market's yes/no;
`maker_sides`: the resting order's role or side). The other notes on a file's content live beside it:
venue_notes.py, correction_notes.py, instrument_identifiers.py; across a replay's files, file_overlaps.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from connectors.column_map import ColumnMap
from connectors.column_names import (
    ASK_ROWS,
    BID_ROWS,
    EVENT_NAMES,
    MAKER_NAMES,
    PREDICTION_MARKET_NAMES,
    QUOTE_MARKS,
    QUOTE_SIDE_MARKS,
    TRADE_MARKS,
)
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.file_scans import SAMPLE_ROWS, distinct_text
from connectors.side_maps import ASK_BID, FIX_AGGRESSOR, MAKER_ROLE, MAKER_SIDE, YES_NO
from engine.quoting import quoted


NO_AGGRESSOR = frozenset({"auction", "block"})  # Gemini's trade types that no taker's order made


def kind_column(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                 dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """A detected layout with a column saying which kind each row is. Of trade columns alone (`event`: X trade,
    B bid, A ask): only its trade rows are read, the others counted as filtered_out, with a note. Of trade and
    quote columns (LSEG's `Type`: Trade, Quote, Correction, Market Condition): its trade and quote rows are read,
    rows of any other kind (a correction's price would replay as a new trade) counted as filtered_out, with a
    note. A column of such a name whose values are not known marks gets a note only; one of buy and sell alone
    (Gemini's trades' `type`) is the side of each trade's aggressor, read as the map's side (the map's note says
    so)."""
    column = next((c for c in schema if normal_name(c) in EVENT_NAMES), None)
    if column is None or cmap.price is None:
        return cmap, []
    values = distinct_text(path, names, dialect, column, 51)
    if len(values) < 2 or len(values) > 50:
        return cmap, []
    marks = {v.lower() for v in values}
    if cmap.side is None and marks & {"buy", "sell"} and marks <= {"buy", "sell", *NO_AGGRESSOR}:
        # Gemini's `type`: the taker's side; its auction and block trades (a cross, a negotiated print) have none.
        # Read so with a keep filter on that column too (review218 #2: one auction row turned every side off)
        crosses = sorted(v for v in values if v.lower() in NO_AGGRESSOR)
        note = [f"{path.name}: column {quoted(column)} read as the taker's side; its {', '.join(crosses)} trades have "
                "no aggressor: read with no side"] if crosses else []
        return replace(cmap, side=column, side_map=dict.fromkeys(crosses) or None), note
    if (sides := quote_side_rows(values)) and cmap.side is None and cmap.bid is None and cmap.keep is None:
        # Bloomberg's tick dump (`type` TRADE, BID, ASK beside one `value`): each row one field, read so (review291)
        trades = [v for v in values if v.strip().lower() in TRADE_MARKS]
        return replace(cmap, quote_sides=column), [
            f"{path.name}: column {quoted(column)} marks each row's one field ({', '.join(values)}): its {sides} rows "
            f"are quote sides, read as quotes each taking its other side from the stream's previous quote (as "
            f"--columns ...,quote_sides={column} reads them, Bloomberg's tick layout)"
            + (f"; its {', '.join(trades)} rows are trades" if trades else "")]
    if cmap.side is None and cmap.bid is None and marks == set(ASK_BID):
        # Bithumb's transaction history (`type`: bid 매수, ask 매도): the taker's order side, as Upbit's `ask_bid`;
        # a type of bid and ask alone marks no kind of row (a quote's bid and ask are columns, never rows)
        return replace(cmap, side=column, side_map=dict(ASK_BID)), [
            f"{path.name}: column {quoted(column)} holds bid and ask alone: read as the taker's side, Bithumb's "
            "transaction history's (bid: a buy order took the ask, buy; ask: a sell order hit the bid, sell); a map "
            "given in full reads it otherwise"]
    if cmap.keep is not None:
        return cmap, []
    trades = [v for v in values if v.lower() in TRADE_MARKS]
    others = [v for v in values if v.lower() in QUOTE_MARKS]
    if cmap.bid is not None:  # trades and quotes are read: only rows of some other kind are left out
        left = [v for v in values if v not in trades and v not in others]
        if not (trades and others and left):
            return cmap, []
        note = (f"{path.name}: column {quoted(column)} marks each row's kind: its {', '.join(trades + others)} rows "
                f"are read, its {', '.join(left)} rows left out and counted as filtered_out (a correction or a status "
                f"message is no new trade or quote; a map given in full reads every row)")
        return replace(cmap, keep={column: trades + others}), [note]
    if trades and others and len(trades) + len(others) == len(values):
        note = (f"{path.name}: column {quoted(column)} marks each row's kind ({', '.join(values)}): its trade rows "
                f"({', '.join(trades)}) are read, the others left out and counted as filtered_out (a map given in "
                f"full reads them otherwise)")
        return replace(cmap, keep={column: trades}), [note]
    return cmap, [f"{path.name}: column {quoted(column)} holds {', '.join(values[:10])}: if it marks kinds of rows "
                  "(trades and quotes), read only the trades with a keep filter (--columns FILE.yaml with keep: "
                  f"{{{column}: [...]}}, docs/replay.md); every row is read as a trade now"]


def trades_alone(path: Path, cmap: ColumnMap, columns: Iterable[str], dialect: Dialect | None) -> str:
    """How a file of trade and quote rows (its `columns`, read by `cmap`) is read as its trades alone: a keep on the
    column marking each row's kind (LSEG's `Type`), which refines the detected map and leaves the quote rows out as
    filtered; without one, a map of the trades' columns, whose quote rows are then rejected (verify55 R4: that map,
    advised for LSEG's file, left its Type unread, and 63% of the rows were rejected as missing_field)."""
    column = next((c for c in columns if normal_name(c) in EVENT_NAMES), None)
    trades = [v for v in distinct_text(path, cmap.names, dialect, column, 51)
              if v.lower() in TRADE_MARKS] if column else []
    if trades:
        return (f"--columns FILE.yaml with keep: {{{column}: [{', '.join(trades)}]}} reads the trades alone (it "
                f"refines the detected map: the quote rows are left out by the filter)")
    return ("a map of the trades' columns alone (--columns ts=...,price=...,size=...) reads the trades, a row without "
            "a price then rejected as missing_field")


def quote_side_rows(values: Sequence[str]) -> str:
    """The quote-side marks among a row-type column's values, every value a trade or a quote side (Bloomberg's
    TRADE, BID, ASK, BEST_BID, BEST_ASK), in any case: a spreadsheet's PROPER() or a retyped `Trade`/`Bid`/`Ask`
    is the same file (review374 #3: read as trades only, 56% of its rows left out). Joined for a message; '' for
    any other column, and for lower-case bid and ask alone (Bithumb's `type`: its takers' sides; beside a trade
    mark a bid or an ask is a row's kind, never a taker's side)."""
    marks = {v.strip().lower() for v in values}
    if not marks <= TRADE_MARKS | BID_ROWS | ASK_ROWS or not marks & (BID_ROWS | ASK_ROWS):
        return ""
    if not marks & TRADE_MARKS and all(v.strip().islower() for v in values):
        return ""
    return ", ".join(v for v in values if v.strip().lower() in BID_ROWS | ASK_ROWS)


def quote_sides_unread(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                       dialect: Dialect | None) -> None:
    """A map given in full over a Bloomberg tick dump, leaving its `type` unread: its BID and ASK rows would replay
    as trades at the bid and the ask, so it is refused naming the key that reads them (review291 #3)."""
    column = next((c for c in schema if normal_name(c) in EVENT_NAMES), None)
    if column is None or cmap.bid is not None or cmap.keep is not None or column in cmap.source_columns():
        return
    values = distinct_text(path, names, dialect, column, 51)
    if 2 <= len(values) <= 50 and (sides := quote_side_rows(values)):
        raise ValueError(f"{path}: column {quoted(column)} marks each row's one field ({', '.join(values)}): its "
                         f"{sides} rows are one side of a quote each, which the map given would read as trades at the "
                         f"bid and the ask: add quote_sides={column} to read them as quotes (--columns ...,quote_sides="
                         f"{column}), or keep: {{{column}: [TRADE]}} to read the trades alone (docs/replay.md)")


def unread_quote_marks(path: Path, cmap: ColumnMap, names: Sequence[str] | None, dialect: Dialect | None) -> None:
    """A map's quote_sides column holding marks it does not read (Algoseek's QUOTE BID under a vocabulary of BID
    alone): each such row would be rejected as having no price, which it has. Refused with the marks unmatched,
    the values seen and the marks it reads; values the map's keep leaves out are no concern (review322 #3)."""
    column = cmap.quote_sides
    if column is None:
        return
    values = distinct_text(path, names, dialect, column, 51)
    listed = (cmap.keep or {}).get(column, ())  # (a keep of tests, `not`, `contains`: every mark is read)
    kept = {str(v).strip().lower() for v in listed} if isinstance(listed, list) else set()
    unread = [v for v in values if v.lower() not in QUOTE_SIDE_MARKS and (not kept or v.lower() in kept)]
    if not unread:
        return
    marks = lambda rows: ", ".join(sorted(m.upper() for m in rows))  # noqa: E731
    raise ValueError(f"{path}: quote_sides={column} reads each row's mark, and {', '.join(map(quoted, unread))} "
                     f"{'is' if len(unread) == 1 else 'are'} none it knows (values seen: {', '.join(values[:20])}"
                     f"{', ...' if len(values) > 20 else ''}): it reads trade rows marked {marks(TRADE_MARKS)}, "
                     f"bid rows {marks(BID_ROWS)} and ask rows {marks(ASK_ROWS)} (any case). Leave the other rows "
                     f"out with keep: {{{column}: [...]}} listing the marks to read (docs/replay.md)")


def fix_sides(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
               dialect: Dialect | None) -> ColumnMap:
    """A detected side column holding 0, 1 and 2 only, 2 among them: FIX's AggressorSide (CME's MDP 3.0 and most
    exchange feeds), 1 buy and 2 sell (read as signed sides, every sell would be rejected); the map's description
    in the notes names it. In a prediction market's file (Kalshi's yes_price, ...), a side of yes and no is the
    outcome the taker bought (YES_NO: buying no sells yes); read as buy/sell words, every row was rejected."""
    if cmap.side is None or cmap.side_map is not None or cmap.side not in schema:
        return cmap
    values = {v.removesuffix(".0") for v in distinct_text(path, names, dialect, cmap.side, 4, SAMPLE_ROWS)}
    if values and {v.lower() for v in values} <= set(YES_NO) and \
            PREDICTION_MARKET_NAMES & {normal_name(n) for n in schema}:
        return replace(cmap, side_map=dict(YES_NO))
    if "2" not in values or not values <= set(FIX_AGGRESSOR):
        return cmap
    return replace(cmap, side_map=dict(FIX_AGGRESSOR))


def maker_sides(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                dialect: Dialect | None) -> ColumnMap:
    """A trades layout of no side beside a `maker` (or `maker_side`) column of buyer/seller or b/s (the role of the
    order that rested: MAKER_ROLE) or of buy/sell (that order's side, as Coinbase writes it: MAKER_SIDE): the
    aggressor's side is the other one (the notes name the map). Any other values (a liquidity provider's name,
    venue_note's) leave the map as it was; a quotes file's `maker` is no side of anything and is left unread."""
    column = next((c for c in schema if normal_name(c) in MAKER_NAMES), None)
    if cmap.side is not None or cmap.price is None or column is None or column in cmap.source_columns():
        return cmap
    # one more than the values in two cases (Buyer, buyer): a value of any other kind among them is seen
    limit = 2 * (len(MAKER_ROLE) + len(MAKER_SIDE)) + 1
    values = {v.lower() for v in distinct_text(path, names, dialect, column, limit, SAMPLE_ROWS)}
    side_map = next((m for m in (MAKER_ROLE, MAKER_SIDE) if values and values <= set(m)), None)
    return cmap if side_map is None else replace(cmap, side=column, side_map=dict(side_map))
