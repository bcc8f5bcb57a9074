"""The physical types of a Parquet file's columns, read from its footer (the Thrift compact-encoded FileMetaData,
its `schema` list of SchemaElements: type, name, children), which polars does not expose: an INT96 timestamp
(Impala's, Hive's, older parquet-mr's, Spark's default) reads in polars as a naive datetime, like an INT64 one
written as wall-clock time, yet by every INT96 writer's convention it holds a UTC instant. Only the footer's
schema is decoded; every other field is skipped by its type."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

INT96 = 3  # parquet.thrift Type.INT96
FOOTER_TAIL = 8  # the footer's 4-byte length, then b"PAR1"
MAX_FOOTER = 64 << 20  # a footer larger than this is no tick file's (and is not read here)
# compact protocol types: 1/2 bool, 3 byte, 4 i16, 5 i32, 6 i64, 7 double, 8 binary, 9 list, 10 set, 11 map, 12 struct
_VARINT, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = (4, 5, 6), 7, 8, 9, 10, 11, 12


class _Reader:
    """A cursor over Thrift compact-protocol bytes."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def byte(self) -> int:
        value = self.data[self.at]
        self.at += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def binary(self) -> bytes:
        n = self.varint()
        self.at += n
        return self.data[self.at - n:self.at]

    def fields(self) -> Iterator[tuple[int, int]]:
        """(field id, type) of each of a struct's fields, up to its stop byte."""
        last = 0
        while (head := self.byte()) != 0:
            delta, kind = head >> 4, head & 0x0F
            last = last + delta if delta else self.zigzag()
            yield last, kind

    def list_header(self) -> tuple[int, int]:
        head = self.byte()
        size = head >> 4
        return (self.varint() if size == 15 else size), head & 0x0F

    def skip(self, kind: int) -> None:
        if kind in (1, 2):
            return  # a bool field's value is in its type
        if kind == 3:
            self.at += 1
        elif kind in _VARINT:
            self.varint()
        elif kind == _DOUBLE:
            self.at += 8
        elif kind == _BINARY:
            self.binary()
        elif kind in (_LIST, _SET):
            size, element = self.list_header()
            for _ in range(size):
                self.skip(element)
        elif kind == _MAP:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.skip(types >> 4)
                    self.skip(types & 0x0F)
        elif kind == _STRUCT:
            for _, inner in self.fields():
                self.skip(inner)
        else:
            raise ValueError(f"not Thrift compact data (type {kind})")


def _schema(footer: bytes) -> list[tuple[int | None, str, int]]:
    """The footer's SchemaElements as (physical type or None for a group, name, number of children)."""
    reader = _Reader(footer)
    elements: list[tuple[int | None, str, int]] = []
    for field, kind in reader.fields():
        if field != 2 or kind != _LIST:
            reader.skip(kind)
            continue
        size, _ = reader.list_header()
        for _ in range(size):
            physical, name, children = None, "", 0
            for inner, inner_kind in reader.fields():
                if inner == 1 and inner_kind in _VARINT:
                    physical = reader.zigzag()
                elif inner == 4 and inner_kind == _BINARY:
                    name = reader.binary().decode("utf-8", "replace")
                elif inner == 5 and inner_kind in _VARINT:
                    children = reader.zigzag()
                else:
                    reader.skip(inner_kind)
            elements.append((physical, name, children))
    return elements


def int96_columns(path: Path) -> list[str]:
    """The top-level columns of a Parquet file stored as INT96; [] for none, or for a footer that does not read
    (the read itself says what is wrong with the file)."""
    stat = path.stat()
    return list(_int96_columns(str(path), stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=256)
def _int96_columns(path: str, size: int, mtime_ns: int) -> tuple[str, ...]:
    try:
        with open(path, "rb") as f:
            if size < 12:
                return ()
            f.seek(size - FOOTER_TAIL)
            tail = f.read(FOOTER_TAIL)
            length = int.from_bytes(tail[:4], "little")
            if tail[4:] != b"PAR1" or not 0 < length <= min(MAX_FOOTER, size - 12):
                return ()
            f.seek(size - FOOTER_TAIL - length)
            elements = _schema(f.read(length))
    except (OSError, ValueError, IndexError):
        return ()
    if not elements:
        return ()
    top, at, found = elements[0][2], 1, []
    for _ in range(top):  # the root's children, each a leaf or a group whose own children follow it
        if at >= len(elements):
            break
        physical, name, children = elements[at]
        if physical == INT96 and not children:
            found.append(name)
        at += 1 + _descendants(elements, at)
    return tuple(found)


def _descendants(elements: list[tuple[int | None, str, int]], at: int) -> int:
    """How many elements after `at` belong to the group at `at` (its children and theirs)."""
    count, pending = 0, elements[at][2]
    while pending and at + count + 1 < len(elements):
        count += 1
        pending += elements[at + count][2] - 1
    return count
