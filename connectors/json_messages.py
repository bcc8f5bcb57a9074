"""Exchange messages holding their ticks in arrays (OKX, Bybit, Kraken v2 under `data`; Deribit's `params.data`,
HTX's `tick.data`; Alpaca's records under `trades`/`quotes`) reshaped to one row per tick, the message's fields
beside, and what a message without ticks is (an ack, a heartbeat).

connectors/json_lines.py applies these to a file's frame of objects before writing its Parquet copy.
"""

from __future__ import annotations

from typing import Any, Mapping

import polars as pl

def ticks_in_arrays(frame: pl.DataFrame) -> bool:
    """Whether the rows hold their ticks in an array of objects under `data`."""
    data = frame.schema.get("data")
    return isinstance(data, pl.List) and isinstance(data.inner, pl.Struct)


def subscription_params(frame: pl.DataFrame) -> pl.DataFrame:
    """JSON-RPC subscription messages holding their ticks in `params.data` (Deribit's `{"method": "subscription",
    "params": {"channel": "trades.BTC-PERPETUAL.raw", "data": [...]}}`), or HTX's websocket trades in `tick.data`,
    with that object's fields as the message's own and `channel` its first part (`trades`), so that their ticks read
    as other venues' arrays under `data` do."""
    holder = next((c for c in ("params", "tick") if isinstance(frame.schema.get(c), pl.Struct)), None)
    if "data" in frame.columns or holder is None or "data" not in {f.name for f in frame.schema[holder].fields}:
        return frame
    lifted = frame.select(pl.col(holder).struct.unnest())
    frame = frame.drop(holder).hstack(lifted.drop([c for c in lifted.columns if c in frame.columns]))
    if frame.schema.get("channel") == pl.String:
        frame = frame.with_columns(channel=pl.col("channel").str.split(".").list.first())
    return frame


def nested_arrays(schema: Mapping[str, Any]) -> list[str]:
    """Where a file's objects hold arrays of objects that no reading above unwraps (`result.trades`), for the
    refusal of a file whose columns hold no ticks: they are likely there."""
    found: list[str] = []

    def walk(path: str, dtype: Any, depth: int) -> None:
        if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
            found.append(path)
        elif isinstance(dtype, pl.Struct) and depth < 3:
            for f in dtype.fields:
                walk(f"{path}.{f.name}", f.dtype, depth + 1)

    for name, dtype in schema.items():
        walk(name, dtype, 0)
    return found


RECORD_KINDS = ("trades", "quotes")  # Alpaca's market-data responses hold their records under the kind's name


def keyed_records(frame: pl.DataFrame) -> pl.DataFrame:
    """Alpaca's responses, records under `trades` or `quotes`: keyed by symbol (`{"trades": {"AAPL": [...],
    "MSFT": [...]}}`, the key the records' `symbol`) or in one array beside `symbol`; moved under `data`, the kind
    as `channel`, so that they read as other venues' arrays do (one row per record)."""
    kind = next((k for k in RECORD_KINDS if k in frame.columns and "data" not in frame.columns), None)
    if kind is None:
        return frame
    dtype, rest = frame.schema[kind], frame.drop(kind).with_row_index("_line")
    if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
        return rest.with_columns(data=frame[kind], channel=pl.lit(kind))
    if not isinstance(dtype, pl.Struct) or not dtype.fields or \
            not all(isinstance(f.dtype, pl.List) and isinstance(f.dtype.inner, pl.Struct) for f in dtype.fields):
        return frame
    return pl.concat([rest.with_columns(data=frame[kind].struct.field(f.name), symbol=pl.lit(f.name),
                                        channel=pl.lit(kind)) for f in dtype.fields], how="diagonal_relaxed")


def symbol_of_channel(frame: pl.DataFrame) -> pl.DataFrame:
    """HTX's messages name their instrument only in `ch` (`market.btcusdt.trade.detail`): its second part as
    `symbol`."""
    if "symbol" in frame.columns or frame.schema.get("ch") != pl.String or \
            not frame["ch"].drop_nulls().str.starts_with("market.").all():
        return frame
    return frame.with_columns(symbol=pl.col("ch").str.split(".").list.get(1, null_on_oob=True))


BITSTAMP_CHANNEL = "live_trades_"  # Bitstamp's websocket channel: live_trades_btcusd


def symbol_of_bitstamp_channel(frame: pl.DataFrame) -> pl.DataFrame:
    """Bitstamp's websocket messages name their pair only in `channel` (`live_trades_btcusd`): the rest of it as
    `symbol`, so that each pair is a stream of its own."""
    if "symbol" in frame.columns or frame.schema.get("channel") != pl.String or \
            not frame["channel"].drop_nulls().str.starts_with(BITSTAMP_CHANNEL).all():
        return frame
    return frame.with_columns(symbol=pl.col("channel").str.strip_prefix(BITSTAMP_CHANNEL))


TICKLESS = ("event", "op", "method", "channel", "type", "ret_msg")  # what a message without ticks is, first found


def ticks_of_messages(frame: pl.DataFrame, bad: dict[int, tuple[str, str]]
                       ) -> tuple[pl.DataFrame, pl.Series, dict[int, tuple[str, str]], dict[int, str]]:
    """Messages holding their ticks in an array under `data` (OKX, Bybit, Kraken v2) as one row per tick: the
    tick's fields, then the message's (its top-level fields and those of a struct such as OKX's `arg`) where the
    tick has none of that name (OKX's bbo-tbt ticks take `instId` from `arg`); Bybit's `topic` gives `channel`,
    its first part (`publicTrade`). Returns the rows, each row's line (0-based), the lines that are no object
    (`bad`) by their row, and what each message without ticks is (an ack, a heartbeat) by its row, an empty one."""
    ticked = pl.col("data").list.len() > 0
    whats = [pl.col(c).cast(pl.String) for c in TICKLESS if c in frame.columns and frame.schema[c] == pl.String]
    frame = (frame if "_line" in frame.columns else frame.with_row_index("_line")).with_columns(
        data=pl.when(ticked).then("data"),  # no ticks (null, []): one empty row, which explode would drop for []
        _tickless=pl.when(~ticked.fill_null(False)).then(pl.coalesce(*whats, pl.lit("message without ticks"))))
    frame = frame.explode("data")
    empty = frame.with_row_index("_row").filter(pl.col("data").is_null()).select("_row", "_line", "_tickless")
    tickless = {row: what for row, line, what in empty.iter_rows() if what is not None and line not in bad}
    bad = {row: bad[line] for row, line, _ in empty.iter_rows() if line in bad}
    ticks = frame.select(pl.col("data").struct.unnest())
    message = frame.drop("data", "_line", "_tickless")
    for name, dtype in message.schema.items():
        if isinstance(dtype, pl.Struct):  # OKX's arg: {"channel": "trades", "instId": "BTC-USDT"}
            message = message.drop(name).hstack(message.select(pl.col(name).struct.unnest()).drop(
                [f.name for f in dtype.fields if f.name in message.columns], strict=False))
    if "topic" in message.columns and "channel" not in message.columns and message.schema["topic"] == pl.String:
        message = message.with_columns(channel=pl.col("topic").str.split(".").list.first())
    rows = ticks.hstack(message.drop([c for c in message.columns if c in ticks.columns]))
    has_tick = frame["data"].is_not_null()
    rows = rows.select(pl.when(has_tick).then(pl.col(c)).alias(c) for c in rows.columns)
    return rows, frame["_line"], bad, tickless
