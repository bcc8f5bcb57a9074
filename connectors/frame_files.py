"""A DataFrame held in memory, replayed as a file is (review354 #2): a polars DataFrame or LazyFrame, or a pandas
DataFrame, among a replay's `files` (`FileReplay(df)`, `FileReplay.from_frame(df, name=...)`,
`run_backtest(config, df, ...)`).

Each frame is written once as a Parquet copy and read through it, so that its columns are detected and mapped, its
rows checked and rejected, and its stream named exactly as a file of the same table's would be: a frame with a symbol
column names its streams by it, one without takes its ``name`` (the copy is ``NAME/NAME.parquet``, and a file's
stream, for want of a symbol column, is its name's). The copy's place is the digest of its bytes
(``<temp>/flashtick-frames-UID/DIGEST/NAME/NAME.parquet``) and its modification time is fixed, so the same frame
gives the same file, path and record: a backtest's manifest names it, and ``resume=True`` with the same frame goes
on from the checkpoint. The copy is removed when the replay closes or is collected, unless another replay in this
process reads the same one. Its rejects, notes and refusals name the frame (``frame "NAME"``), never the copy, and
its rows by their 0-based position, as ``df.iloc`` and the answers' ``row`` count them (review384 #8).

A pandas frame is converted here, column by column, without pyarrow (which flashtick does not depend on), its named
or datetime index kept as a column, as ``df.to_parquet`` keeps it (review384 #1, #2).
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

import polars as pl

from connectors.content_names import SHOWN_AS, shown_as
from engine.quoting import quoted

DEFAULT_NAME = "frame"
FRAME_MTIME_NS = 946_684_800 * 10**9  # 2000-01-01 UTC: the same frame's copy has the same time, run after run
ACCEPTED = ("a path (str or os.PathLike), a list of paths, (path, columns) pairs and {\"path\": ..., \"columns\": "
            "...} entries, a polars DataFrame or LazyFrame, a pandas DataFrame, or a NamedFrame(name, frame)")

_users: dict[Path, int] = {}  # copy folder -> the replays of this process that read it
_users_lock = threading.Lock()


@dataclass(frozen=True)
class NamedFrame:
    """A frame and the stream name it takes when it has no symbol column (a bare frame takes "frame")."""
    name: str
    frame: Any


def holds_frame(item: Any) -> bool:
    """Whether a replay entry is a frame: one, a NamedFrame, or a (frame, columns) pair."""
    if isinstance(item, tuple) and item:
        item = item[0]
    return is_frame(item) or isinstance(item, NamedFrame)


def is_frame(item: Any) -> bool:
    """A polars DataFrame or LazyFrame, or a pandas DataFrame (known by its class: pandas is never imported here)."""
    if isinstance(item, (pl.DataFrame, pl.LazyFrame)):
        return True
    kind = type(item)
    return kind.__name__ == "DataFrame" and kind.__module__.split(".")[0] == "pandas"


def frames_as_files(files: Any) -> tuple[Any, list[FrameCopy]]:
    """``files`` with each frame (or NamedFrame) replaced by its Parquet copy's path, and the copies made; anything
    else that is no file entry refused here (TypeError naming what is accepted), before any is written."""
    single, items = file_items(files)
    copies: list[FrameCopy] = []
    try:
        replaced = [_replaced(item, copies) for item in items]
    except BaseException:
        for copy in copies:
            copy.close()
        raise
    return (replaced[0] if single else replaced), copies


def file_items(files: Any) -> tuple[bool, list[Any]]:
    """Whether ``files`` is one entry, and its entries; a TypeError naming what is accepted for what is none."""
    single = is_frame(files) or isinstance(files, (NamedFrame, str, os.PathLike, Mapping))
    if not single and (isinstance(files, (bytes, bytearray)) or not isinstance(files, Iterable)):
        raise TypeError(f"files: expected {ACCEPTED}; got {_kind(files)}")
    items = [files] if single else list(files)
    for item in items:
        _check_item(item)
    return single, items


def frame_copy(frame: Any, name: str = DEFAULT_NAME) -> FrameCopy:
    """``frame`` written as ``NAME/NAME.parquet`` under the folder its bytes' digest names (written once: the same
    frame's copy is the same file), for as long as the returned copy is open."""
    _check_name(name)
    table = _polars(frame)
    data = io.BytesIO()
    table.write_parquet(data)
    digest = hashlib.sha256(data.getvalue()).hexdigest()[:20]
    folder = _copies_root() / digest
    path = folder / name / f"{name}.parquet"
    with _users_lock:
        if not path.is_file():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            part = path.with_name(f".{name}.{os.getpid()}.{threading.get_ident()}.part")
            part.write_bytes(data.getvalue())
            os.utime(part, ns=(FRAME_MTIME_NS, FRAME_MTIME_NS))
            os.replace(part, path)  # whole or not there: another process reading the same frame sees no half
        _users[folder] = _users.get(folder, 0) + 1
        shown_as(path, f"frame {quoted(name)}")  # (until the copy is removed: _let_go)
    return FrameCopy(path, folder, _how_mapped(frame))


def in_frame_terms(refusal: ValueError, copies: list[FrameCopy]) -> None:
    """A layout refusal of a frame (NoTickLayout: it names the frame, its columns and the `--columns` map that would
    read it) told, too, how a frame is mapped from Python and what became of a pandas frame's index."""
    for copy in copies:
        if SHOWN_AS.get(str(copy.path), str(copy.path)) in str(refusal):
            refusal.args = (f"{refusal}. {copy.how_mapped}",)
            return


def _how_mapped(frame: Any) -> str:
    """How a frame's columns are named from Python, and, of a pandas frame, whether its index is one of them."""
    said = ("This DataFrame's columns are mapped with columns={\"ts\": \"time\", \"price\": \"px\", ...} "
            "(run_backtest's, FileReplay's; the keys of --columns)")
    if isinstance(frame, (pl.DataFrame, pl.LazyFrame)):
        return said
    index = frame.index
    if _index_kept(index):
        return f"{said}; its index is read as its column {', '.join(map(quoted, _index_names(index)))}"
    return (f"{said}; its index ({type(index).__name__}, unnamed, of {index.dtype}) is not read: where it holds the "
            f"times, name it (df.rename_axis(\"time\")) or make it a column (df.reset_index())")


def is_frame_copy(path: Path) -> bool:
    """Whether a file is a frame's Parquet copy (its rows are the frame's, in its order: said by 0-based position)."""
    return len(path.parents) > 2 and path.parents[2] == _copies_root()


def _copies_root() -> Path:
    return Path(tempfile.gettempdir()) / f"flashtick-frames-{os.getuid()}"


class FrameCopy:
    """A frame's Parquet copy, kept while a replay reads it (``close``; or when it is collected)."""

    def __init__(self, path: Path, folder: Path, how_mapped: str) -> None:
        self.path, self.folder, self.how_mapped = path, folder, how_mapped
        self._finalizer = weakref.finalize(self, _let_go, folder)

    def close(self) -> None:
        self._finalizer()


def _let_go(folder: Path) -> None:
    with _users_lock:
        _users[folder] = _users.get(folder, 1) - 1
        if _users[folder] > 0:
            return
        del _users[folder]
        for path in folder.glob("*/*.parquet"):
            SHOWN_AS.pop(str(path), None)
        shutil.rmtree(folder, ignore_errors=True)


def _replaced(item: Any, copies: list[FrameCopy]) -> Any:
    if isinstance(item, NamedFrame):
        copies.append(frame_copy(item.frame, item.name))
    elif is_frame(item):
        copies.append(frame_copy(item))
    elif isinstance(item, tuple) and item and (is_frame(item[0]) or isinstance(item[0], NamedFrame)):
        return (_replaced(item[0], copies), *item[1:])  # (frame, columns)
    else:
        return item
    return copies[-1].path


def _check_item(item: Any) -> None:
    if isinstance(item, NamedFrame):
        if not is_frame(item.frame):
            raise TypeError(f"NamedFrame({item.name!r}, ...): expected a polars or pandas DataFrame, got "
                            f"{_kind(item.frame)}")
        return
    if isinstance(item, tuple) and item:
        item = item[0]
    if not (is_frame(item) or isinstance(item, (str, os.PathLike, Mapping))):
        raise TypeError(f"files: expected {ACCEPTED}; got {_kind(item)}")


def _check_name(name: Any) -> None:
    if not isinstance(name, str) or not name.strip() or name != name.strip() or name.startswith(".") \
            or any(c in name for c in "/\\\0") or not name.isprintable():
        raise ValueError(f"a frame's name is its stream's (and its copy's file name): a printable name without "
                         f"/ or \\ or a leading dot or space, got {name!r}")


def _polars(frame: Any) -> pl.DataFrame:
    if isinstance(frame, pl.LazyFrame):
        return frame.collect()
    if isinstance(frame, pl.DataFrame):
        return frame
    return _from_pandas(frame)


def _from_pandas(frame: Any) -> pl.DataFrame:
    """A pandas DataFrame as polars, column by column, without pyarrow (no dependency of flashtick's): its index
    first where it is named or of datetimes (a tick series indexed by its time), as ``df.to_parquet`` keeps it."""
    import pandas as pd

    columns = [(str(name), series) for name, series in frame.items()]
    index = frame.index
    if _index_kept(index):
        names = _index_names(index)
        if taken := sorted(set(names) & {name for name, _ in columns}):
            raise ValueError(f"the frame's index and a column are both named {taken[0]!r}: rename one (e.g. "
                             f"df.rename_axis(\"{taken[0]}_index\")) or drop the index (df.reset_index(drop=True))")
        columns = [(name, pd.Series(index.get_level_values(i))) for i, name in enumerate(names)] + columns
    return pl.DataFrame([_polars_column(name, series) for name, series in columns])


def _index_names(index: Any) -> list[str]:
    """A pandas index's columns' names, as df.reset_index() names them."""
    return [str(n) if n is not None else "index" if index.nlevels == 1 else f"level_{i}"
            for i, n in enumerate(index.names)]


def _index_kept(index: Any) -> bool:
    """Whether a pandas index holds data (read as a column): named, or of datetimes; not a default range."""
    return any(name is not None for name in index.names) or index.nlevels == 1 and index.dtype.kind == "M"


def _polars_column(name: str, series: Any) -> pl.Series:
    """A pandas column as polars: a numpy array where it is one (NaN a missing value, as pyarrow reads it); a
    zoned time as its UTC instants on its zone; any other (text, object, categorical, nullable numbers) through
    its Python values, a missing one None."""
    import numpy as np
    import pandas as pd

    dtype = series.dtype
    if isinstance(dtype, np.dtype) and dtype.kind != "O":
        return pl.Series(name, series.to_numpy(), nan_to_null=True)
    if isinstance(dtype, pd.DatetimeTZDtype):
        instants = pl.Series(name, series.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy())
        try:
            return instants.dt.replace_time_zone("UTC").dt.convert_time_zone(str(dtype.tz))
        except pl.exceptions.PolarsError:  # a zone polars has no name for (pandas' fixed offset "UTC+01:00", what
            return instants.dt.replace_time_zone("UTC")  # parsed ISO text with offsets gives): the same instants
    values = [None if missing else value for value, missing in zip(series.tolist(), series.isna().tolist())]
    try:
        column = pl.Series(name, values)
        if column.dtype != pl.Object:  # (polars keeps values of no type it has as objects, which Parquet has not)
            return column
    except (TypeError, ValueError, OverflowError, pl.exceptions.PolarsError):
        pass
    kinds = sorted({type(value).__qualname__ for value in values if value is not None})
    raise TypeError(f"column {name!r} ({dtype}) holds values of type {' and '.join(kinds)}: replay reads one type of "
                    f"numbers, text or datetimes a column; convert it first, e.g. "
                    f"df[{name!r}] = df[{name!r}].astype(str)")


def _kind(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__qualname__
