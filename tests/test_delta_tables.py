"""Delta tables replayed from their log (fix303 #1): only the files the table holds now, read from `_delta_log/`'s
commits and checkpoints, so rows an overwrite, an OPTIMIZE or a DELETE removed do not replay."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from connectors.replay import FileReplay

T0 = 1_723_161_254_087_896_000
PROTOCOL = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
METADATA = {"metaData": {"id": "a1b2", "format": {"provider": "parquet", "options": {}}, "schemaString": "{}",
                         "partitionColumns": [], "configuration": {}, "createdTime": 1723161254087}}


def part_name(i: int) -> str:
    return f"part-{i:05d}-3f1c9a7e-0b2d-4c1e-9a55-c000.snappy.parquet"


def write_part(path: Path, prices: list[float], start: int = 0) -> str:
    """A part file of trades at T0 + (start + i) ms, one per price; returns its name relative to the table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = len(prices)
    pl.DataFrame({"timestamp": [T0 + (start + i) * 10**6 for i in range(n)], "price": prices, "size": [0.5] * n}) \
        .with_columns(pl.col("timestamp").cast(pl.Datetime("ns", "UTC"))).write_parquet(path)
    return path.name


def add(path: str) -> dict:
    return {"add": {"path": path, "partitionValues": {}, "size": 1000, "modificationTime": 1723161254087,
                    "dataChange": True}}


def remove(path: str, data_change: bool = True) -> dict:
    return {"remove": {"path": path, "deletionTimestamp": 1723161255087, "dataChange": data_change}}


def commit(table: Path, version: int, operation: str, *actions: dict) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    info = {"commitInfo": {"timestamp": 1723161254087 + version, "operation": operation}}
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in (info, *actions)))


def replayed(source: Path | str) -> tuple[list[tuple[int, float]], list[str]]:
    replay = FileReplay([source])
    ticks = []
    while not replay.done:
        ticks.extend((t.ts, t.price) for t in replay.next_batch(64))
    return ticks, replay.notes


def test_an_overwrite_commit_replays_only_the_new_rows(tmp_path: Path) -> None:
    table = tmp_path / "btc"
    old = write_part(table / part_name(0), [100.0, 101.0, 102.0])
    commit(table, 0, "WRITE", PROTOCOL, METADATA, add(old))
    new = write_part(table / part_name(1), [200.0, 201.0])  # the same times, corrected prices
    commit(table, 1, "WRITE", remove(old), add(new))
    ticks, notes = replayed(table)
    assert ticks == [(T0, 200.0), (T0 + 10**6, 201.0)]
    said = [n for n in notes if "a Delta table, read at version 1 from its log (one file current)" in n]
    assert said and "left out one file on disk that a commit removed" in said[0], notes
    # a pattern past the shell reads the table's current files alone too
    assert replayed(str(table / "*.parquet"))[0] == ticks


def test_an_optimize_replays_each_row_once(tmp_path: Path) -> None:
    # compaction: the same rows in one new file; the small files stay on disk until VACUUM
    table = tmp_path / "lake" / "eth"
    small = [write_part(table / part_name(i), [10.0 + i], start=i) for i in range(3)]
    commit(table, 0, "WRITE", PROTOCOL, METADATA, add(small[0]))
    commit(table, 1, "WRITE", add(small[1]))
    commit(table, 2, "WRITE", add(small[2]))
    big = write_part(table / part_name(9), [10.0, 11.0, 12.0])
    commit(table, 3, "OPTIMIZE", *(remove(s, data_change=False) for s in small), add(big))
    ticks, notes = replayed(tmp_path / "lake")  # a folder holding the table
    assert Counter(ticks) == Counter({(T0, 10.0): 1, (T0 + 10**6, 11.0): 1, (T0 + 2 * 10**6, 12.0): 1})
    assert any("read at version 3" in n and "left out 3 files" in n for n in notes), notes


def checkpoint(table: Path, version: int, files: list[str], removed: list[str]) -> None:
    """A classic checkpoint: one row per action, each action a struct column, `_last_checkpoint` naming it."""
    log = table / "_delta_log"
    add_type = pl.Struct({"path": pl.String, "size": pl.Int64, "modificationTime": pl.Int64, "dataChange": pl.Boolean})
    remove_type = pl.Struct({"path": pl.String, "deletionTimestamp": pl.Int64, "dataChange": pl.Boolean})
    protocol_type = pl.Struct({"minReaderVersion": pl.Int32, "minWriterVersion": pl.Int32})
    rows = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}, "add": None, "remove": None}]
    rows += [{"protocol": None, "add": {"path": f, "size": 1000, "modificationTime": 1, "dataChange": False},
              "remove": None} for f in files]
    rows += [{"protocol": None, "add": None, "remove": {"path": f, "deletionTimestamp": 2, "dataChange": True}}
             for f in removed]
    pl.DataFrame(rows, schema={"protocol": protocol_type, "add": add_type, "remove": remove_type}) \
        .write_parquet(log / f"{version:020d}.checkpoint.parquet")
    (log / "_last_checkpoint").write_text(json.dumps({"version": version, "size": len(rows)}))


def test_a_checkpoint_and_the_commits_after_it_name_the_current_files(tmp_path: Path) -> None:
    table = tmp_path / "btc"
    parts = [write_part(table / "date=2024-08-08" / part_name(i), [100.0 + i], start=i) for i in range(4)]
    names = [f"date=2024-08-08/{p}" for p in parts]
    commit(table, 0, "WRITE", PROTOCOL, METADATA, add(names[0]), add(names[1]))
    commit(table, 1, "DELETE", remove(names[0]), add(names[2]))
    checkpoint(table, 1, [names[1], names[2]], [names[0]])
    # the commits the checkpoint stands for are cleaned up: only the checkpoint says what version 1 holds
    for version in (0, 1):
        (table / "_delta_log" / f"{version:020d}.json").unlink()
    commit(table, 2, "WRITE", add(names[3]))
    commit(table, 3, "DELETE", remove(names[1]))
    ticks, notes = replayed(table)
    assert ticks == [(T0 + 2 * 10**6, 102.0), (T0 + 3 * 10**6, 103.0)]
    assert any("read at version 3 from its log (2 files current)" in n for n in notes), notes
    # a commit missing after the checkpoint leaves the current files unknown: refused, naming it
    (table / "_delta_log" / f"{2:020d}.json").unlink()
    with pytest.raises(ValueError, match="lacks the commit of version 2 after its checkpoint of version 1"):
        FileReplay([table])


def test_a_log_it_cannot_follow_is_refused_naming_the_feature(tmp_path: Path) -> None:
    table = tmp_path / "dv"
    first = write_part(table / part_name(0), [100.0, 101.0])
    features = {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                             "writerFeatures": ["deletionVectors"]}}
    commit(table, 0, "WRITE", features, METADATA, add(first))
    assert [p for _, p in replayed(table)[0]] == [100.0, 101.0]  # the feature on, no vector yet: read
    vector = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 1, "sizeInBytes": 36,
              "cardinality": 1}
    with_dv = {"add": {**add(first)["add"], "deletionVector": vector}}
    commit(table, 1, "DELETE", remove(first), with_dv)
    with pytest.raises(ValueError, match=f"deletion vectors \\({part_name(0)} first\\)"):
        FileReplay([table])
    other = tmp_path / "mapped"
    commit(other, 0, "WRITE", {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                            "readerFeatures": ["columnMapping", "v2Checkpoint"]}},
           METADATA, add(write_part(other / part_name(0), [1.0])))
    with pytest.raises(ValueError, match="uses the reader feature columnMapping, v2Checkpoint"):
        FileReplay([other])
