"""Data-lake exports (Spark, Databricks, Snowflake Parquet) as a data engineer hands them over (review284): part
files, a Delta table's log, escaped partition values."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl

from connectors.replay import FileReplay

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
    assert stream_counts(FileReplay([table])) == {"btc_trades": 15}
    lake = tmp_path / "btc_lake"
    write_part(lake / "date=2024-08-08" / PART.format(0), 0)
    write_part(lake / "date=2024-08-08" / PART.format(1), 5)
    write_part(lake / "date=2024-08-09" / PART.format(0), 10)
    replay = FileReplay([lake])
    assert stream_counts(replay) == {"btc_lake": 15}
    assert any("stream btc_lake, the name of its table's folder: a data lake's part file" in n for n in replay.notes)
