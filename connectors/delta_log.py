"""A Delta table's current files, read from its log (`_delta_log/`): the newest checkpoint (`_last_checkpoint` names
it; `NNN.checkpoint.parquet`, or its parts) and the JSON commits after it, in version order; a file is current when
an `add` put it there and no later `remove` took it out. A folder holds every part file a commit ever wrote until
VACUUM deletes the removed ones, so reading the Parquet files as they lie on disk replays the rows an OPTIMIZE
rewrote, a DELETE took out or an overwrite replaced. A log this reader cannot follow (a reader feature it does not
know, deletion vectors on a current file, column mapping) is refused, naming the feature.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

import polars as pl

LOG = "_delta_log"
COMMIT = re.compile(r"^(\d{20})\.json$")
CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")
# Reader features whose tables read right file by file: timestamps without a zone, a VACUUM guard, columns widened
# later (each file keeps its own type), and deletion vectors while no current file carries one (checked per file)
READABLE_FEATURES = frozenset({"timestampNtz", "vacuumProtocolCheck", "typeWidening", "typeWidening-preview",
                               "deletionVectors"})
NEWEST_READER = 3  # the reader protocol version that lists its features by name


class DeltaSnapshot(NamedTuple):
    version: int  # the table version read
    current: list[Path]  # the current files, sorted by path
    removed: list[Path]  # Parquet files on disk under the table that a commit removed (or none ever added)


def delta_tables(top: Path, skipped: list[Path]) -> list[Path]:
    """The Delta tables in a folder ``top`` (the table itself, or tables in the folders inside it), by the
    `_delta_log/` folders among its ``skipped`` files (relative paths), outermost first."""
    roots = {top.joinpath(*p.parts[:p.parts.index(LOG)]) for p in skipped if LOG in p.parts[:-1]}
    return sorted(roots, key=lambda root: (len(root.parts), str(root)))


def snapshot(table: Path, on_disk: list[Path]) -> DeltaSnapshot:
    """The current files of the Delta table at ``table``; ``on_disk``: the tick files found under it."""
    log = table / LOG
    start, current = _checkpoint(log)
    versions = sorted(int(m.group(1)) for p in log.iterdir() if (m := COMMIT.match(p.name)))
    versions = [v for v in versions if v > start]
    _check_sequence(log, start, versions)
    protocol, configuration = _checkpoint_meta(log, start) if start >= 0 else ({}, {})
    for version in versions:
        actions = _commit_actions(log / f"{version:020d}.json")
        for action in actions:
            protocol = action.get("protocol") or protocol
            if "metaData" in action:
                configuration = action["metaData"].get("configuration") or {}
        # a commit may remove a file and add it again (a new deletion vector): removes first
        for action in actions:
            if "remove" in action:
                current.pop(_relative(table, action["remove"]["path"]), None)
        for action in actions:
            if "add" in action:
                current[_relative(table, action["add"]["path"])] = action["add"].get("deletionVector")
    version = versions[-1] if versions else start
    _check_readable(log, protocol, configuration, current, version)
    files = sorted(table / path for path in current)
    absent = [f for f in files if not f.is_file()]
    if absent:
        raise ValueError(f"{table}: version {version} of the Delta table holds {absent[0].relative_to(table)}, "
                         f"which is not on disk ({len(absent)} current files absent): a VACUUM with too short a "
                         f"retention, or a copy of part of the table; copy the whole table folder")
    kept = set(files)
    return DeltaSnapshot(version, files, [f for f in on_disk if f not in kept])


def _check_sequence(log: Path, start: int, versions: list[int]) -> None:
    """Refuses a log whose commits after the checkpoint of version ``start`` (-1: none) skip a version: the
    table's current files would be unknown."""
    if not versions and start < 0:
        raise ValueError(f"{log}: the Delta log holds no commit and no checkpoint, so the table has no current "
                         f"files; give the table's files instead")
    lacks = next((want for v, want in zip(versions, range(start + 1, start + 1 + len(versions))) if v != want), None)
    if lacks is not None:
        where = f"after its checkpoint of version {start}" if start >= 0 else "and no checkpoint"
        raise ValueError(f"{log}: the Delta log lacks the commit of version {lacks} {where} (cleaned up, or a "
                         f"partial copy): its commits must run one by one from a checkpoint or version 0 to know "
                         f"the table's current files; copy the whole table folder")


def _checkpoint(log: Path) -> tuple[int, dict[str, Any]]:
    """The newest checkpoint's version (-1 when there is none) and the files it holds (path -> deletion vector)."""
    parts_of: dict[int, list[Path]] = {}
    for path in log.iterdir():
        if m := CHECKPOINT.match(path.name):
            parts_of.setdefault(int(m.group(1)), []).append(path)
    named = log / "_last_checkpoint"
    if named.is_file():  # a hint: the newest checkpoint written whole (a crashed writer may leave a newer part)
        version = int(json.loads(named.read_text() or "{}").get("version", -1))
        if version >= 0 and version not in parts_of:
            raise ValueError(f"{named} names the checkpoint of version {version}, which {log} lacks as Parquet "
                             f"(a v2 checkpoint, its JSON manifest and sidecars, is not read): give the table's "
                             f"files instead")
    whole = [v for v, parts in parts_of.items() if _whole(parts)]
    if not whole:
        return -1, {}
    version = max(whole)
    current: dict[str, Any] = {}
    for part in sorted(parts_of[version]):
        current.update(_checkpoint_adds(log.parent, part))
    return version, current


def _whole(parts: list[Path]) -> bool:
    """Whether a checkpoint's files are all there: one file, or parts 1..n of n."""
    counts = {m.group(3) for p in parts if (m := CHECKPOINT.match(p.name))}
    if counts == {None}:
        return True
    return len(counts) == 1 and None not in counts and len(parts) == int(next(iter(counts)))


def _checkpoint_adds(table: Path, part: Path) -> dict[str, Any]:
    """A checkpoint part's `add` rows: path -> deletion vector (None without one). Its `remove` rows are tombstones
    of files no add in it names, kept for VACUUM."""
    schema = pl.read_parquet_schema(part)
    if "add" not in schema:
        return {}
    fields = {f.name for f in schema["add"].fields}
    dv = pl.col("add").struct.field("deletionVector") if "deletionVector" in fields else pl.lit(None)
    rows = pl.read_parquet(part, columns=["add"]).filter(pl.col("add").is_not_null()) \
        .select(pl.col("add").struct.field("path").alias("path"), dv.alias("dv"))
    return {_relative(table, path): dv for path, dv in rows.iter_rows()}


def _commit_actions(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: a Delta commit that is no JSON lines ({err}); the table's current files are "
                         f"unknown") from err


def _relative(table: Path, path: str) -> str:
    """A log's file path (a URI-escaped path relative to the table, or an absolute `file:` URI) relative to the
    table; a file outside it is refused."""
    if "://" in path or path.startswith("file:"):
        parsed = urlparse(path)
        if parsed.scheme != "file" or not Path(unquote(parsed.path)).is_relative_to(table.resolve()):
            raise ValueError(f"{table}: its Delta log names {path}, a file outside the table folder (a shallow "
                             f"clone, or cloud storage): give the table's files instead")
        return str(Path(unquote(parsed.path)).relative_to(table.resolve()))
    return unquote(path)


def _check_readable(log: Path, protocol: dict[str, Any], configuration: dict[str, Any], current: dict[str, Any],
                    version: int) -> None:
    """Refuses a table this reader would read wrong, naming the feature."""
    reader = int(protocol.get("minReaderVersion", 1))
    if reader > NEWEST_READER:
        raise ValueError(f"{log}: the Delta table needs reader version {reader}; replay reads up to "
                         f"{NEWEST_READER}: give the table's current files, written out by Spark or delta-rs")
    unknown = sorted(set(protocol.get("readerFeatures") or ()) - READABLE_FEATURES)
    mapped = configuration.get("delta.columnMapping.mode", "none")
    if mapped != "none" and "columnMapping" not in unknown:
        unknown.append("columnMapping")
    if unknown:
        raise ValueError(f"{log}: the Delta table (version {version}) uses the reader feature "
                         f"{', '.join(unknown)}, which replay does not read (columnMapping: the Parquet columns "
                         f"hold physical names; v2Checkpoint: sidecar checkpoints): give the table's current "
                         f"files, written out by Spark or delta-rs (`df.write.parquet`)")
    vectors = sorted(path for path, dv in current.items() if dv)
    if vectors:
        raise ValueError(f"{log}: the Delta table (version {version}) marks rows deleted in {len(vectors)} of its "
                         f"files by deletion vectors ({vectors[0]} first), which replay does not read, so those "
                         f"rows would replay: run REORG TABLE ... APPLY (PURGE), or give the rows written out")


def _checkpoint_meta(log: Path, version: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The protocol and the table configuration a checkpoint holds."""
    protocol: dict[str, Any] = {}
    configuration: dict[str, Any] = {}
    for part in sorted(log.glob(f"{version:020d}.checkpoint*.parquet")):
        schema = pl.read_parquet_schema(part)
        for name in ("protocol", "metaData"):
            if name not in schema:
                continue
            rows = pl.read_parquet(part, columns=[name]).filter(pl.col(name).is_not_null())
            if not rows.height:
                continue
            if name == "protocol":
                protocol = rows[name][0]
            else:
                configuration = _mapping(rows[name][0].get("configuration"))
    return protocol, configuration


def _mapping(value: Any) -> dict[str, Any]:
    """A Parquet map as polars reads it (a list of {key, value}), or a struct, as a dict."""
    if isinstance(value, list):
        return {item["key"]: item["value"] for item in value}
    return dict(value or {})


def table_of(file: Path, logged: dict[Path, bool] | None = None) -> Path | None:
    """The Delta table a file lies in: the nearest folder above it holding a `_delta_log/`; None outside any.
    `logged`: what earlier calls found of each folder (a folder of many part files asks once a folder)."""
    logged = {} if logged is None else logged
    for folder in file.parents:
        if folder not in logged:
            logged[folder] = (folder / LOG).is_dir()
        if logged[folder]:
            return folder
    return None


def current_files(files: list[Path]) -> tuple[list[Path], list[str]]:
    """``files`` (a folder's tick files, a pattern's matches) less those a Delta table they lie in no longer holds,
    with a note for each such table."""
    tables: dict[Path, list[Path]] = {}
    logged: dict[Path, bool] = {}
    for file in files:
        if (table := table_of(file, logged)) is not None:
            tables.setdefault(table, []).append(file)
    left_out: set[Path] = set()
    notes = []
    for table, held in tables.items():
        read = snapshot(table, held)
        left_out.update(read.removed)
        gone = f"; left out {_counted(read.removed)} on disk that a commit removed or never added (an OPTIMIZE's " \
               f"inputs, a DELETE's or an overwrite's old files, which VACUUM deletes)" if read.removed else ""
        notes.append(f"{table}: a Delta table, read at version {read.version} from its log "
                     f"({_counted(read.current)} current){gone}")
    return [f for f in files if f not in left_out], notes


def _counted(files: list[Path]) -> str:
    return "one file" if len(files) == 1 else f"{len(files)} files"  # as input_paths says it (which imports this)
