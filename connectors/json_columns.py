"""Values exchanges write their own way in JSON, made columns the replay reads as any file's: the best book level
of an array of levels (`bids[0].price`), epoch times sent as text (`"ts": "1704153600000"`) as integers, an object's
fields as dotted columns (`result.price`; Databento's record header `hd` as its CSV's columns), and a list of values
(`"conditions": [12, 37]`) as text.
"""

from __future__ import annotations

from typing import TypeVar

import polars as pl

from connectors.field_names import DATABENTO_HEADER


def best_levels(frame: pl.DataFrame) -> pl.DataFrame:
    """Book levels as arrays (OKX's `"bids": [["43000.1", "2", "0", "3"]]`, best first) add the best level's
    price and size as columns of their own: `bids[0].price`, `bids[0].size` (Tardis.dev's names)."""
    levels = [c for c in ("bids", "asks") if c in frame.columns and isinstance(frame.schema[c], pl.List)
              and isinstance(frame.schema[c].inner, pl.List)]
    frame = frame.with_columns(pl.col(c).list.first().list.get(i, null_on_oob=True).alias(f"{c}[0].{part}")
                               for c in levels for i, part in enumerate(("price", "size")))
    return bybit_best_levels(frame)


def bybit_best_levels(frame: pl.DataFrame) -> pl.DataFrame:
    """Bybit v5 `orderbook.1` messages' `b`/`a` (`[["42000.1", "1.5"]]`): `b[0].price`, `b[0].size`, ... of the first
    level whose size is not 0 (a delta's `["42000.1", "0"]` deletes that level, its replacement beside it); null
    for a side the delta leaves as it was (connectors/exchange_shapes.py fills it from the stream's last quote)."""
    levels = [c for c in ("b", "a") if "topic" in frame.columns and c in frame.columns
              and isinstance(frame.schema[c], pl.List) and isinstance(frame.schema[c].inner, pl.List)]
    kept = {c: pl.col(c).list.eval(pl.element().filter(pl.element().list.get(1, null_on_oob=True).cast(
        pl.Float64, strict=False) != 0)).list.first() for c in levels}
    return frame.with_columns(kept[c].list.get(i, null_on_oob=True).alias(f"{c}[0].{part}")
                              for c in levels for i, part in enumerate(("price", "size")))


EPOCH_TEXT = r"^[1-9]\d{9,18}$"  # an epoch time in s, ms, us or ns as text: 10 to 19 digits


def epoch_text_as_integers(frame: pl.DataFrame) -> pl.DataFrame:
    """Text columns holding only integers of an epoch time's magnitude (OKX's `"ts": "1704153600000"`), as
    integers: an epoch time sent as a string is the number, read as any epoch column is. No leading zero, so the
    integer writes back as the text (a code such as "0700" stays text)."""
    texts = [c for c, dtype in frame.schema.items() if dtype == pl.String]
    if not texts:
        return frame
    whole = frame.select(pl.col(c).drop_nulls().str.contains(EPOCH_TEXT).all() & pl.col(c).is_not_null().any()
                         for c in texts).row(0)
    numbers = {c: pl.col(c).cast(pl.Int64, strict=False) for c, yes in zip(texts, whole) if yes}
    cast = frame.with_columns(**numbers)
    return frame.with_columns(**{c: cast[c] for c in numbers if cast[c].null_count() == frame[c].null_count()})


DATABENTO_RECORD_HEADER = "hd"  # `dbn --json`: the record header the CSV writes as columns (ts_event, rtype, ...)


Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)


def nested_fields(frame: Frame, depth: int = 3) -> Frame:
    """Objects in a field as columns of their own, named by their path (Gate.io's `{"result": {"price": ...}}` as
    `result.price`, as book levels are `bids[0].price`), so that a map names them; Databento's record header `hd`
    (`dbn --json`) as the columns its CSV has (`ts_event`, `rtype`, `publisher_id`, `instrument_id`), so that its
    file reads as the CSV does, fixed-point prices included (connectors/layout.py). A field of the same name
    already there wins. Objects nested deeper than `depth` stay one column. An empty object (Kraken's REST
    `"result": {}`) holds no field, so no column: dropped (Parquet cannot write a struct of no field). A Parquet
    file's struct columns are lifted alike, lazily (a lake's `trade{price,size,side}` as `trade.price`, ...:
    review284 #5)."""
    for _ in range(depth):
        schema = frame.collect_schema()
        frame = frame.drop([c for c, d in schema.items() if isinstance(d, pl.Struct) and not d.fields])
        schema = frame.collect_schema()
        objects = [(c, d) for c, d in schema.items() if isinstance(d, pl.Struct) and d.fields]
        if not objects:
            return frame
        for name, dtype in objects:
            header = name == DATABENTO_RECORD_HEADER and DATABENTO_HEADER <= {f.name for f in dtype.fields}
            prefix = "" if header else f"{name}."
            frame = frame.with_columns(pl.col(name).struct.field(f.name).alias(prefix + f.name)
                                       for f in dtype.fields if prefix + f.name not in schema).drop(name)
    return frame


def lists_as_text(frame: Frame) -> Frame:
    """Lists of values (Polygon's `"conditions": [12, 37]`, a Parquet `list<int32>` or fixed-size array of them) as
    their values joined by commas (`12,37`), as a CSV cell writes them: no map reads a list, but a note or a keep
    may read the column as text. Lists of objects (ticks no reading unwrapped, named in a refusal) and of lists
    (book levels) stay as they are."""
    flat = {c: d for c, d in frame.collect_schema().items()
            if isinstance(d, (pl.List, pl.Array)) and not d.inner.is_nested()}
    listed = {c: pl.col(c).arr.to_list() if isinstance(d, pl.Array) else pl.col(c) for c, d in flat.items()}
    return frame.with_columns(values.list.eval(pl.element().cast(pl.String)).list.join(",").alias(c)
                              for c, values in listed.items())
