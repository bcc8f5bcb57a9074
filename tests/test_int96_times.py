"""fix302 #4: INT96 timestamps without Spark's metadata (Impala's, Hive's, older parquet-mr's) read as UTC instants, as
those writers store them: they kept the "naive time" note, and --tz read them as local times. A file's own map
with a zone reads them as that zone's wall clock, said. The Parquet files are built byte by byte below as Impala
writes them (INT96 is written by no library in the venv): Thrift compact footer, PLAIN pages, `created_by` Impala's."""

from __future__ import annotations

import struct
from pathlib import Path

import polars as pl
import pytest

from connectors.parquet_footer import int96_columns
from connectors.replay import FileReplay

def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


class Struct:
    """A Thrift struct in the compact protocol: fields added in id order."""

    def __init__(self) -> None:
        self.out, self.last = bytearray(), 0

    def _head(self, fid: int, kind: int) -> None:
        self.out.append(((fid - self.last) << 4) | kind)
        self.last = fid

    def i32(self, fid: int, v: int) -> "Struct":
        self._head(fid, 5)
        self.out += _zigzag(v)
        return self

    def i64(self, fid: int, v: int) -> "Struct":
        self._head(fid, 6)
        self.out += _zigzag(v)
        return self

    def binary(self, fid: int, v: bytes) -> "Struct":
        self._head(fid, 8)
        self.out += _varint(len(v)) + v
        return self

    def struct(self, fid: int, v: "Struct") -> "Struct":
        self._head(fid, 12)
        self.out += v.bytes()
        return self

    def lst(self, fid: int, kind: int, items: list) -> "Struct":
        self._head(fid, 9)
        self.out += bytes([(len(items) << 4) | kind]) if len(items) < 15 else bytes([0xF0 | kind]) + _varint(len(items))
        for item in items:
            self.out += item.bytes() if kind == 12 else _zigzag(item) if kind == 5 else _varint(len(item)) + item
        return self

    def bytes(self) -> bytes:
        return bytes(self.out) + b"\x00"


INT96, DOUBLE = 3, 5
JULIAN_1970 = 2_440_588


def int96(ns: int) -> bytes:
    day, in_day = divmod(ns, 86_400 * 10**9)
    return struct.pack("<qi", in_day, JULIAN_1970 + day)


def impala_parquet(columns: dict[str, tuple[int, list]], created_by: str) -> bytes:
    """columns: name -> (INT96 or DOUBLE, values: ns for INT96, floats for DOUBLE)."""
    data = bytearray(b"PAR1")
    chunks, rows = [], len(next(iter(columns.values()))[1])
    for name, (kind, values) in columns.items():
        body = b"".join(int96(v) for v in values) if kind == INT96 else struct.pack(f"<{len(values)}d", *values)
        page = Struct().i32(1, 0).i32(2, len(body)).i32(3, len(body)).struct(
            5, Struct().i32(1, len(values)).i32(2, 0).i32(3, 3).i32(4, 3)).bytes()
        offset = len(data)
        data += page + body
        meta = Struct().i32(1, kind).lst(2, 5, [0]).lst(3, 8, [name.encode()]).i32(4, 0).i64(5, len(values)) \
            .i64(6, len(page) + len(body)).i64(7, len(page) + len(body)).i64(9, offset)
        chunks.append(Struct().i64(2, offset).struct(3, meta))
    schema = [Struct().binary(4, b"schema").i32(5, len(columns))] + [
        Struct().i32(1, kind).i32(3, 0).binary(4, name.encode()) for name, (kind, _) in columns.items()]
    group = Struct().lst(1, 12, chunks).i64(2, len(data) - 4).i64(3, rows)
    footer = Struct().i32(1, 1).lst(2, 12, schema).i64(3, rows).lst(4, 12, [group]) \
        .binary(6, created_by.encode()).bytes()
    return bytes(data + footer + struct.pack("<i", len(footer)) + b"PAR1")


T0 = 1_723_161_254_087_896_567  # 2024-08-08T23:54:14.087896567Z
IMPALA = "impala version 4.1.0-RELEASE (build 0b2b9b1c7c1a4f1e9f1f0a7c8e3d6b5a4c3b2a1f)"
NY_SUMMER = 4 * 3600 * 10**9  # New York is UTC-4 in August


def impala_file(path: Path) -> Path:
    path.write_bytes(impala_parquet({"ts": (INT96, [T0 + i * 1000 for i in range(5)]),
                                     "price": (DOUBLE, [61800.5 + i for i in range(5)]),
                                     "size": (DOUBLE, [0.5] * 5)}, IMPALA))
    return path


def times(replay: FileReplay) -> list[int]:
    return [t.ts for t in replay.next_batch(100)]


def test_impala_int96_times_are_utc_instants_with_a_note_that_says_how_to_read_them_otherwise(tmp_path: Path) -> None:
    path = impala_file(tmp_path / "BTCUSDT.parquet")
    assert pl.read_parquet_schema(path)["ts"] == pl.Datetime("ns")  # what polars makes of INT96: naive
    assert int96_columns(path) == ["ts"]
    replay = FileReplay(path)
    assert times(replay) == [T0 + i * 1000 for i in range(5)]
    assert not any("carry no UTC offset" in n for n in replay.notes), replay.notes  # no "naive time" note
    (said,) = [n for n in replay.notes if "INT96" in n]
    assert said.startswith("BTCUSDT.parquet: column \"ts\" holds INT96 timestamps without Spark's metadata (Impala's, "
                           "Hive's, older parquet-mr's), which those writers store as UTC instants: read as UTC")
    assert "a replay list entry `{path: BTCUSDT.parquet, columns: {tz: ZONE}}`" in said
    # --tz for every file (it was applied: 4 h off) is for naive times: not applied, said
    every = FileReplay(path, columns={"tz": "America/New_York"})
    assert times(every) == [T0 + i * 1000 for i in range(5)]
    assert any("--tz America/New_York (for naive times) is not applied to it" in n for n in every.notes)
    # the file's own map with a zone: the override the note names, read as that zone's wall clock
    own = FileReplay([{"path": str(path), "columns": {"tz": "America/New_York"}}])
    assert times(own) == [T0 + NY_SUMMER + i * 1000 for i in range(5)]
    assert any("read as wall-clock times in America/New_York, as the file's own map asks" in n for n in own.notes)


def test_a_parquet_file_without_int96_is_read_as_before(tmp_path: Path) -> None:
    naive = tmp_path / "ETHUSDT.parquet"  # an INT64 timestamp without a zone: naive, its note kept
    pl.DataFrame({"ts": [T0 + i for i in range(3)], "price": [2680.5] * 3, "size": [1.0] * 3}) \
        .with_columns(pl.col("ts").cast(pl.Datetime("ns"))).write_parquet(naive)
    assert int96_columns(naive) == []
    replay = FileReplay(naive)
    assert times(replay) == [T0 + i for i in range(3)]
    assert not any("INT96" in n for n in replay.notes)
    assert any("carry no UTC offset" in n for n in replay.notes), replay.notes  # the naive time note, kept
    not_parquet = tmp_path / "cut.parquet"
    not_parquet.write_bytes(impala_file(tmp_path / "x.parquet").read_bytes()[:-3])
    assert int96_columns(not_parquet) == []  # a damaged footer: left to the read, which says what is wrong
    with pytest.raises(ValueError):
        FileReplay(not_parquet)
