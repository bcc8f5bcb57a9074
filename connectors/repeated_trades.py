"""Rows of a trade file that repeat an earlier row's trade id within their stream: REST pages concatenated with
an overlap (page two starts a few trades before page one ended). Each such row would replay as one more tick and
move every count, label and score after it, as a file named twice would (connectors/replay_entries.py reads that once).
They are said, as a caution, not dropped: the id column is known by its name only (no map names it), and a
column of that name that is no unique trade id (an `id` that numbers something else, ids that restart each day)
would lose real trades if its repeats were dropped. A row is a repeat only when its trade (time, price, size,
side) repeats with the id; rows that share an id as other trades (an order id's partial fills) get a note that
the column is no unique trade id, and no advice to drop them. Across two files of one stream (pages saved one a
file, each starting with the previous page's last trades) the rows where their times overlap are compared the same
way (`repeated_across`); Binance's trades beside its aggTrades, the same trades twice, are refused."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.field_names import normal_name
from connectors.ticks import utc_text
from engine.quoting import quoted

# Coinbase's `trade_id`, Binance's `id` / `agg_trade_id`, OKX's and Bitget's `tradeId`, Bybit's `trdMatchID`,
# Kraken's and Bitfinex's `id`, Bitstamp's `tid`, Deribit's `trade_id`
TRADE_ID_NAMES = ("trade_id", "tradeid", "trdmatchid", "trd_match_id", "agg_trade_id", "aggtradeid", "match_id",
                  "tid", "id")


ROW_COLUMN = "_row"  # a file plan's row numbers (row_exprs.ROW)


def trade_id_column(cmap: ColumnMap, schema: dict[str, Any]) -> str | None:
    """The column of a trades-only map's trade ids, by its name; None for a file with quotes (an `id` there may
    be an order's, which many rows share) or with no such column."""
    if cmap.bid is not None or cmap.price is None:
        return None
    by_name = {normal_name(name): name for name in schema}
    return next((by_name[name] for name in TRADE_ID_NAMES if name in by_name), None)


def trade_columns(cmap: ColumnMap) -> list[str]:
    """The columns that make a trade: its time, price, size and side, as the map reads them."""
    return [c for c in (*cmap.ts_columns, cmap.price, cmap.size, cmap.side) if c is not None]


class RepeatedIds(NamedTuple):
    column: str
    rows: int  # rows whose (stream, id) an earlier row has, with the same trade (time, price, size, side)
    first_repeat: int  # row numbers (file order): the first such row, and the earlier row it repeats
    first_seen: int
    trade_id: Any


class Repeats(NamedTuple):
    """A file's rows that share an earlier row's (stream, id): ``same`` repeat its trade too (overlapping
    pages), ``other`` are other trades under that id (an order id's partial fills); None where there are none."""
    same: RepeatedIds | None
    other: RepeatedIds | None


def repeated_ids(rows: pl.LazyFrame, stream: pl.Expr, column: str, row: str, trade: list[str]) -> Repeats:
    """The rows (of `rows`, numbered in column `row`) whose (stream, trade id) an earlier row already has, told
    apart by whether the `trade` columns repeat too. Only such a row is a repeat: an order id's partial fills share
    the id at other sizes and times, and dropping them would drop real trades."""
    ids = rows.select(stream.alias("_stream"), pl.col(column).alias("_id"), pl.col(row).alias("_row"),
                      pl.struct(trade or [pl.lit(0)]).hash().alias("_trade"))
    ids = ids.filter(pl.col("_id").is_not_null()).with_columns(
        _seen=pl.col("_row").min().over("_stream", "_id"), _same=pl.col("_row").min().over("_stream", "_id", "_trade"))
    ids = ids.filter(pl.col("_row") != pl.col("_seen")).sort("_row")
    same = ids.filter(pl.col("_row") != pl.col("_same")).select(
        n=pl.len(), row=pl.col("_row").first(), seen=pl.col("_same").first(), id=pl.col("_id").first())
    other = ids.filter(pl.col("_row") == pl.col("_same")).select(
        n=pl.len(), row=pl.col("_row").first(), seen=pl.col("_seen").first(), id=pl.col("_id").first())
    found = [frame.row(0, named=True) for frame in pl.collect_all([same, other])]
    return Repeats(*(RepeatedIds(column, f["n"], f["row"], f["seen"], f["id"]) if f["n"] else None for f in found))


OVERLAPPING_PAGES = "export pages that overlap?"  # the likely cause in a file; a capture's layout may know its own


def repeated_caution(name: str, repeated: RepeatedIds, where: Callable[[int], str],
                     cause: str = OVERLAPPING_PAGES, sequence: str | None = None) -> str:
    """The rows that repeat an earlier trade: a caution to fix the file, or, read by a sequence column (``sequence``,
    --sequence) that leaves such rows out, a note that says so (review323 #8: the caution told the user to fix a
    file the run had already read right)."""
    said = (f"{name}: {repeated.rows} row(s) repeat an earlier row of their stream, its trade id (column "
            f"{quoted(repeated.column)}), time, price and size alike, the first {where(repeated.first_repeat)} (id "
            f"{quoted(repeated.trade_id)}, as {where(repeated.first_seen)})")
    return _by_sequence(said, repeated.column, sequence) or Caution(
        f"{said}: each replays as one more tick, moving every count, label and score after it ({cause}); write the "
        f"file without the repeats")


def _by_sequence(said: str, id_column: str, sequence: str | None) -> str | Caution | None:
    """What becomes of repeated trades read by a sequence column: left out where it is their id column (a note); a
    caution where it is another column, which leaves out only the rows whose number repeats too; None without one."""
    if sequence is None:
        return None
    if normal_name(sequence) == normal_name(id_column):
        return (f"{said}: left out, the first read kept, as the sequence column {quoted(sequence)} repeats with them "
                "(the run's last notes count them); the file needs no change")
    return Caution(f"{said}: those whose sequence number (column {quoted(sequence)}) repeats too are left out, the "
                   "first read kept (the run's last notes count them); any other replays as one more tick, moving "
                   "every count, label and score after it")


def shared_id_note(name: str, shared: RepeatedIds, where: Callable[[int], str]) -> str:
    """Rows of one id and other trades: the column numbers something else (orders), and each row is a trade."""
    return (f"{name}: column {quoted(shared.column)} is no unique trade id: {shared.rows} row(s) share an earlier "
            f"row's id at another time, price or size, the first {where(shared.first_repeat)} (id "
            f"{quoted(shared.trade_id)}, as {where(shared.first_seen)}), as an order id's partial fills do; each "
            "replays as the trade it is")


def repeated_across(one: Any, other: Any, stream: str, start: int, end: int) -> RepeatedIds | None:
    """The trades of file plan ``other`` that repeat trades of ``one`` in ``stream``, their trade id, time, price,
    size and side alike, looked for only where the two files' times overlap (``start`` to ``end``, ns): hourly
    pages that each start with the previous page's last trades. Only those rows are read (the window, not every
    id); None when either file has no trade id column or no trade repeats."""
    if getattr(one, "trade_ids", None) is None or getattr(other, "trade_ids", None) is None:  # a DBN file's: none
        return None
    fields = [key for key in ("price", "size", "side") if key in one.keys and key in other.keys]
    windows = [_window(plan, stream, start, end, fields) for plan in (one, other)]
    if any(window.is_empty() for window in windows):
        return None
    same = windows[1].join(windows[0], on=["_id", "_ns", *fields], how="semi").sort(ROW_COLUMN)
    if same.is_empty():
        return None
    first = same.row(0, named=True)
    return RepeatedIds(trade_id_column(other.columns, other.schema) or "", same.height, first[ROW_COLUMN], -1,
                       first["_id"])


_KEY_TYPES = {"price": pl.Float64, "size": pl.Float64, "side": pl.String}


def _rows(plan: Any, stream: str, start: int, end: int, fields: list[str]) -> pl.LazyFrame:
    """A plan's rows of ``stream`` stamped ``start`` to ``end`` (ns): (`_ns`, fields, `_row`)."""
    ns = pl.col("_ts") * plan.ts_factor if plan.ts_factor != 1 else pl.col("_ts")
    rows = plan.frame.with_columns(_ns=ns.round(0).cast(pl.Int64) if plan.ts_factor != 1 else ns.cast(pl.Int64))
    rows = rows.filter(pl.col("_ns").is_between(start, end))
    if plan.columns.stream_col is not None:
        rows = rows.filter(pl.col("stream") == stream)
    # one dtype per key for the join: a Parquet file keeps its integer sizes (Int64) where a CSV's read as Float64,
    # and polars refuses to join the two (the ids are String and the times Int64 ns already)
    return rows.select("_ns", *(pl.col(key).cast(_KEY_TYPES[key]) for key in fields), ROW_COLUMN)


def _window(plan: Any, stream: str, start: int, end: int, fields: list[str]) -> pl.DataFrame:
    """A plan's trades of ``stream`` stamped ``start`` to ``end`` (ns), with their ids: (`_ns`, fields, `_row`,
    `_id`)."""
    window = _rows(plan, stream, start, end, fields).collect()
    ids = plan.trade_ids.filter(pl.col(ROW_COLUMN).is_in(window[ROW_COLUMN].implode())).collect()
    return window.join(ids, on=ROW_COLUMN).drop_nulls("_id")


QUOTE_KEYS = ("bid", "ask", "bid_size", "ask_size")  # compared with a trade's keys where both files read them
_KEY_TYPES |= {key: pl.Float64 for key in QUOTE_KEYS}


def identical_rows(one: Any, other: Any, stream: str, start: int, end: int) -> int:
    """How many rows of ``stream`` two files hold alike where their times overlap (``start`` to ``end``, ns) when
    every one of them is alike (time, price, size, side, quotes: the same day saved twice, a `.csv` beside its
    `.csv.gz`, a re-download in another format); 0 when any differs. Their counts first: two vendors' files
    seldom hold as many rows, and then only those are read and compared."""
    if not all(isinstance(getattr(plan, "frame", None), pl.LazyFrame) for plan in (one, other)):  # a DBN file's
        return 0
    fields = [key for key in ("price", "size", "side", *QUOTE_KEYS) if key in one.keys and key in other.keys]
    windows = [_rows(plan, stream, start, end, fields).drop(ROW_COLUMN) for plan in (one, other)]
    counts = [window.select(pl.len()).collect().item() for window in windows]
    if counts[0] == 0 or counts[0] != counts[1]:
        return 0
    by = ["_ns", *fields]
    first, second = (window.sort(by, nulls_last=True).collect() for window in windows)
    return counts[0] if first.equals(second) else 0


def identical_caution(stream: str, one: str, other: str, rows: int, start: int, end: int) -> Caution:
    """Two files of one stream whose rows over their overlap are identical: the same ticks, given twice."""
    return Caution(f"stream {stream}: {one} and {other} hold identical rows from {utc_text(start)} to "
                   f"{utc_text(end)} ({rows} rows, their times, prices and sizes alike): the same data given twice "
                   f"(a file beside its .gz, a re-download in another format?), so each of those ticks replays twice, "
                   f"moving every count, label and score after it; replay one of them")


def across_caution(stream: str, one: str, other: str, repeated: RepeatedIds, first: str,
                   sequence: str | None = None) -> str:
    """``first``: the first repeat's place in ``other``, as the user finds it (`line 2`); ``sequence``: the sequence
    column ``other`` is read by (repeated_caution)."""
    said = (f"stream {stream}: {repeated.rows} trade(s) of {other} repeat trades of {one}, their trade id (column "
            f"{quoted(repeated.column)}), time, price and size alike, the first at its {first} (id "
            f"{quoted(repeated.trade_id)})")
    return _by_sequence(said, repeated.column, sequence) or Caution(
        f"{said}: each replays as one more tick, moving every count, label and score after it (export pages that "
        f"overlap, each starting with the last trades of the one before?); write the files without the repeats")


# Binance's public trades and aggTrades files of one market: aggTrades are its trades grouped by taker order and
# price (first_trade_id..last_trade_id), so the two kinds hold the same trades
SAME_TRADES_PRESETS = {"binance-public-trades": "binance-public-aggtrades",
                       "binance-futures-trades": "binance-futures-aggtrades"}


def same_trades_refusal(one: Any, other: Any, stream: str, start: int, end: int) -> str | None:
    """Why two files of ``stream`` over one time (``start`` to ``end``, ns) are not replayed together: Binance's
    trades beside its aggTrades, which replayed every trade twice; None for any other pair."""
    presets = {getattr(getattr(plan, "columns", None), "preset", None): plan for plan in (one, other)}  # DBN: no map
    trades = next((p for p in presets if p in SAME_TRADES_PRESETS and SAME_TRADES_PRESETS[p] in presets), None)
    if trades is None:
        return None
    fills, grouped = presets[trades].given_name, presets[SAME_TRADES_PRESETS[trades]].given_name
    return (f"{fills} (Binance's trades) and {grouped} (its aggTrades) hold the same trades of stream {stream} from "
            f"{utc_text(start)} to {utc_text(end)}: an aggTrades row is the trades of one taker order at one price "
            f"(its first_trade_id to last_trade_id), so given together every trade replays twice. Give one kind: the "
            f"trades files (a tick per fill) or the aggTrades files (a tick per taker order and price)")
