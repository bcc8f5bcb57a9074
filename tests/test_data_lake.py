"""Data-lake exports (Spark, Databricks, Snowflake Parquet) as a data engineer hands them over (review284): part
files, a Delta table's log, escaped partition values."""

from __future__ import annotations

from collections import Counter
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from connectors.replay import FileReplay, replay_ticks

T0 = 1_723_161_254_087_896_000
PART = "part-{:05d}-3f1c9a7e-0b2d-4c1e-9a55-c000.snappy.parquet"  # Spark's and Databricks' part file names


def write_part(path: Path, start: int, n: int = 5) -> Path:
    """A part file of n trades, times from T0 + start ms."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({"timestamp": [T0 + (start + i) * 10**6 for i in range(n)], "price": [61837.63] * n,
                  "size": [0.01] * n}).with_columns(pl.col("timestamp").cast(pl.Datetime("ns", "UTC"))) \
        .write_parquet(path)
    return path


def stream_counts(replay: FileReplay) -> Counter[str]:
    counts: Counter[str] = Counter()
    while not replay.done:
        counts.update(t.stream for t in replay.next_batch(64))
    return counts


def test_spark_part_files_are_one_table_not_one_stream_each(tmp_path: Path) -> None:
    # review284 #1: df.write.parquet("btc_trades") wrote part-0000N-<uuid>-c000.snappy.parquet; each part's name
    # was a stream of its own, and parts of one number in two date partitions were merged into one
    table = tmp_path / "btc_trades"
    for i in range(3):
        write_part(table / PART.format(i), i * 5)
    (table / "_SUCCESS").touch()
    assert stream_counts(FileReplay([table])) == {"BTC": 15}  # `trades` says what it holds (fix302 #5)
    lake = tmp_path / "fills_lake"
    write_part(lake / "date=2024-08-08" / PART.format(0), 0)
    write_part(lake / "date=2024-08-08" / PART.format(1), 5)
    write_part(lake / "date=2024-08-09" / PART.format(0), 10)
    replay = FileReplay([lake])
    assert stream_counts(replay) == {"fills_lake": 15}
    assert any("stream fills_lake, the name of its table's folder: a data lake's part file" in n for n in replay.notes)


DELTA_COMMIT = (
    '{"commitInfo":{"timestamp":1723161254087,"operation":"WRITE","operationParameters":{"mode":"Append"}}}\n'
    '{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}\n'
    '{"metaData":{"id":"a1b2","format":{"provider":"parquet","options":{}},"schemaString":"{}",'
    '"partitionColumns":[],"configuration":{},"createdTime":1723161254087}}\n'
    '{"add":{"path":"part-00000-3f1c9a7e-0b2d-4c1e-9a55-c000.snappy.parquet","partitionValues":{},"size":12345,'
    '"modificationTime":1723161254087,"dataChange":true}}\n')


def test_a_lakes_metadata_folders_are_skipped_with_one_note(tmp_path: Path) -> None:
    # review284 #2: a Delta table's _delta_log/*.json was read as JSON-lines ticks, and its empty objects stopped
    # every command with polars' "struct type with no child field"; its checkpoints are Parquet
    table = tmp_path / "btc"
    write_part(table / PART.format(0), 0)
    (table / "_delta_log").mkdir()
    (table / "_delta_log" / "00000000000000000000.json").write_text(DELTA_COMMIT)
    (table / "_delta_log" / "00000000000000000000.crc").write_text("{}")
    # (checkpoints, Parquet too, are read as the log's: tests/test_delta_tables.py)
    write_part(table / "_spark_metadata" / "0.parquet", 0)
    (table / "_SUCCESS").touch()
    iceberg = tmp_path / "ice"
    write_part(iceberg / "data" / "00000-0-9f6c1a7e-0b2d-4c1e-9a55-3f1c9a7e0b2d-00001.parquet", 0)
    (iceberg / "metadata").mkdir()
    (iceberg / "metadata" / "v1.metadata.json").write_text('{"format-version":2,"properties":{}}\n')
    (iceberg / "metadata" / "snap-1.json").write_text('{"a":{}}\n')
    replay = FileReplay([table, iceberg])
    assert stream_counts(replay) == {"btc": 5, "ice": 5}
    lake_notes = [n for n in replay.notes if "a data lake's metadata, not ticks" in n]
    assert len(lake_notes) == 2, replay.notes
    assert "skipped _SUCCESS, _delta_log/, _spark_metadata/ (4 files)" in lake_notes[0]
    assert "a Delta table, read at version 0 from its log (one file current)" in lake_notes[0]
    assert "skipped metadata/ (2 files)" in lake_notes[1]
    # a pattern past the shell reads the table's files alone too
    assert stream_counts(FileReplay([str(table / "**" / "*.parquet")])) == {"btc": 5}


def test_escaped_partition_values_name_the_stream_a_symbol_column_would(tmp_path: Path) -> None:
    # review284 #3: Spark escapes `/ :` in a partition's value; `symbol=BTC%2FUSD` was stream `BTC%2FUSD`, while a
    # CSV's symbol column of the same instrument replays as `BTC-USD`, so a lake and a CSV were two streams
    for value in ("BTC%2FUSD", "ES%3AFUT", "AAPL"):
        write_part(tmp_path / "lake" / f"symbol={value}" / "date=2024-08-08" / PART.format(0), 0)
    replay = FileReplay([tmp_path / "lake"])
    assert stream_counts(replay) == {"BTC-USD": 5, "ES:FUT": 5, "AAPL": 5}
    assert any('stream BTC-USD, from the folder name "symbol=BTC%2FUSD", a partition by symbol, its value unescaped '
               "(BTC%2FUSD is BTC/USD)" in n for n in replay.notes), replay.notes
    (tmp_path / "same.csv").write_text(f"timestamp,symbol,price,size\n{T0},BTC/USD,100.0,1\n{T0 + 1},ES:FUT,100.0,1\n")
    assert set(stream_counts(FileReplay([tmp_path / "same.csv"]))) == {"BTC-USD", "ES:FUT"}


def test_a_decimal_column_of_epoch_seconds_reads_exactly(tmp_path: Path) -> None:
    # review284 #4: Snowflake's NUMBER(20,6) epoch seconds was refused as "Decimal(precision=20, scale=6), not a
    # number of s", with a full column map too; the same digits as CSV text read exactly
    times = [T0 + i * 1_000 for i in range(3)]
    seconds = [Decimal(t) / Decimal(10**9) for t in times]
    pl.DataFrame({"TS": pl.Series(seconds, dtype=pl.Decimal(20, 6)), "SYMBOL": ["BTCUSDT"] * 3,
                  "PRICE": pl.Series([Decimal("61837.63")] * 3, dtype=pl.Decimal(38, 8)),
                  "QTY": pl.Series([Decimal("0.02")] * 3, dtype=pl.Decimal(38, 8)),
                  "MS": pl.Series([Decimal(t) / Decimal(10**6) for t in times], dtype=pl.Decimal(20, 3))}) \
        .write_parquet(tmp_path / "sf.parquet")
    assert [t.ts for t in replay_ticks(tmp_path / "sf.parquet")] == times
    given = {"ts": "MS", "ts_unit": "ms", "price": "PRICE", "size": "QTY", "stream_col": "SYMBOL"}
    mapped = replay_ticks(tmp_path / "sf.parquet", columns=given)
    assert [(t.ts, t.price, t.size) for t in mapped] == [(t, 61837.63, 0.02) for t in times]


def test_a_parquet_structs_fields_are_columns_by_path_as_in_json_lines(tmp_path: Path) -> None:
    # review284 #5: a struct column trade{price,size,side} could not be mapped (`price=trade.price` was "the column
    # map needs ['trade.price', ...], which the file lacks") nor detected; JSON lines read such paths
    n = 4
    pl.DataFrame({"ts": [T0 + i for i in range(n)], "symbol": ["BTCUSDT"] * n,
                  "trade": [{"price": 61837.63, "size": 0.02, "side": "buy"}] * n}) \
        .with_columns(pl.col("ts").cast(pl.Datetime("ns", "UTC"))).write_parquet(tmp_path / "nested.parquet")
    given = {"ts": "ts", "price": "trade.price", "size": "trade.size", "side": "trade.side", "stream_col": "symbol"}
    ticks = list(replay_ticks(tmp_path / "nested.parquet", columns=given))
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in ticks] == \
        [("BTCUSDT", T0 + i, 61837.63, 0.02, "buy") for i in range(n)]
    assert [t.price for t in replay_ticks(tmp_path / "nested.parquet")] == [61837.63] * n


SPARK_SCHEMA = ('{"type":"struct","fields":[{"name":"ts","type":"timestamp","nullable":true,"metadata":{}},'
                '{"name":"price","type":"double","nullable":true,"metadata":{}}]}')


def test_a_partitioned_lakes_notes_are_said_once_per_partition(tmp_path: Path) -> None:
    # review284 #6: a Hive lake printed `stream X, from the folder name 'symbol=X'` and the naive-times note once
    # per file: 1,000 parts buried the warnings that matter
    for symbol in ("BTCUSDT", "ETHUSDT"):
        for n, day in enumerate(("2024-08-08", "2024-08-09")):
            for part in range(2):
                path = tmp_path / "lake" / f"symbol={symbol}" / f"date={day}" / PART.format(part)
                path.parent.mkdir(parents=True, exist_ok=True)
                # (each day's own times: parts of the same bytes in two days are read once, review382 #3)
                start = T0 + n * 86_400 * 10**9 + part * 10
                pl.DataFrame({"ts": [start + i for i in range(3)], "price": [1.5] * 3, "size": [1.0] * 3}) \
                    .with_columns(pl.col("ts").cast(pl.Datetime("ns"))).write_parquet(path)
    replay = FileReplay([tmp_path / "lake"])
    assert stream_counts(replay) == {"BTCUSDT": 12, "ETHUSDT": 12}
    stream_notes = [n for n in replay.notes if "a partition by symbol" in n]
    assert [n.split(",")[0] for n in stream_notes] == ["4 files: stream BTCUSDT", "4 files: stream ETHUSDT"]
    utc_notes = [n for n in replay.notes if "carry no UTC offset and are read as UTC" in n]
    assert len(utc_notes) == 1 and utc_notes[0].startswith("8 files: its times ("), replay.notes


def test_sparks_timestamp_columns_are_utc_instants(tmp_path: Path) -> None:
    # review284 #6: Spark writes its `timestamp` type (INT96 by default) as UTC instants with no zone annotation;
    # they were read as naive, a note invited --tz, and --tz America/New_York shifted them by 4 h
    frame = pl.DataFrame({"ts": [T0 + i for i in range(3)], "price": [1.5] * 3, "size": [1.0] * 3})
    frame.with_columns(pl.col("ts").cast(pl.Datetime("ns"))).write_parquet(
        tmp_path / "BTCUSDT.parquet", metadata={"org.apache.spark.sql.parquet.row.metadata": SPARK_SCHEMA})
    replay = FileReplay([tmp_path / "BTCUSDT.parquet"])
    assert [t.ts for t in replay.next_batch(10)] == [T0, T0 + 1, T0 + 2]
    assert not [n for n in replay.notes if "--tz" in n], replay.notes
    with pytest.raises(ValueError, match='already carries time zone "UTC"'):
        FileReplay([tmp_path / "BTCUSDT.parquet"], columns={"ts": "ts", "ts_unit": "datetime", "tz": "America/New_York",
                                                            "price": "price", "size": "size"})


def test_float_cells_read_as_the_decimals_their_writer_had(tmp_path: Path) -> None:
    # review284 #7: a float32 size of 0.02 replayed as 0.019999999552965164, and float64 epoch seconds
    # 1723161254.087896 as ...896064 ns: the binary values widened, not the digits written
    pl.DataFrame({"time": [1723161254.087896, 1723161254.5], "symbol": ["BTCUSDT"] * 2,
                  "price": pl.Series([61837.63] * 2, dtype=pl.Float32),
                  "size": pl.Series([0.02] * 2, dtype=pl.Float32)}).write_parquet(tmp_path / "floats.parquet")
    ticks = list(replay_ticks(tmp_path / "floats.parquet"))
    assert [(t.ts, t.price, t.size) for t in ticks] == [(1723161254087896000, 61837.63, 0.02),
                                                        (1723161254500000000, 61837.63, 0.02)]
