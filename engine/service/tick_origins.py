"""Where each accepted tick of a backtest came from, so its answers name the file and row they were made after.

An answer's `ticks` is its stream's accepted-tick count when it was made; the tick it was made after is the stream's
tick number `ticks` (1-based). The replay knows each tick's file and row (FileReplay.origins); the answers file
knows the count. `TickOrigins` keeps, per stream, the (file, row) of every accepted tick in order (12 bytes a tick,
beside the 24 of the stream's marks), and the answer writer looks an answer's up by its stream and count. Rebuilt
with the marks on a --resume (the same ticks, accepted alike), so a resumed run names the same rows. `evaluate` and
`train` keep one of every tick they read (stream_reading.read_streams), so an answer point at a stream's tick index i
names the origin of its tick number i + 1, looked up the same way (evaluation_points.points_table).
"""

from __future__ import annotations

from array import array

import numpy as np


class TickOrigins:
    """Per stream, each accepted tick's (file index, row), in the order the stream accepted them."""

    def __init__(self) -> None:
        self._files: dict[str, array] = {}  # stream -> file index per tick ("i": a replay of < 2**31 files)
        self._rows: dict[str, array] = {}  # stream -> row per tick ("q": a file of any length)

    def add(self, stream: str, file: int, row: int) -> None:
        """The stream accepted its next tick, read from file `file` (its index in the replay's plans) at `row`."""
        files = self._files.get(stream)
        if files is None:
            files = self._files[stream] = array("i")
            self._rows[stream] = array("q")
        files.append(file)
        self._rows[stream].append(row)

    def of(self, stream: str, ticks: int) -> tuple[int | None, int | None]:
        """(file, row) of the stream's `ticks`-th accepted tick (1-based: an answer's `ticks`); (None, None) when
        it has none (no tick yet, or a stream this replay did not feed)."""
        files = self._files.get(stream)
        if files is None or not 0 < ticks <= len(files):
            return None, None
        return files[ticks - 1], self._rows[stream][ticks - 1]

    def files_of(self, stream: str) -> set[int]:
        """The indices of the files the stream's accepted ticks were read from (empty for a stream it has none of)."""
        files = self._files.get(stream)
        return set() if files is None else set(np.unique(np.frombuffer(files, dtype=np.intc)).tolist())
