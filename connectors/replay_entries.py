"""The file entries a replay is given, read into (path, column map) specs: a path, a (path, map) pair, the YAML
form {path: ..., columns: ...}, and replay lists (`.yaml` files of such entries, `replay_list`), with each file
kept once however often it is named (`once_each`), and what a replay of them reads (`replay_items`, `replay_files`:
folders and patterns expanded by connectors/input_paths.py), which commands that check their inputs share.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from connectors.column_map import ColumnMap
from connectors.input_paths import Expanded, expanded, item_path
from connectors.keep_filter import keep_key
from connectors.map_options import Refine, as_column_map
from engine.path_words import file_not_found, os_reason, shown_path, user_item
from engine.quoting import quoted_list, quoted_words
from engine.rust_paths import written_path
from engine.text_files import read_text
from engine.yaml_files import safe_load_unique, yaml_error_line

# what a file entry gives as its column map, and the forms a file entry takes
MapSpec = ColumnMap | str | Mapping[str, Any]
FileSpec = str | Path | tuple[str | Path, MapSpec] | Mapping[str, Any]


def is_replay_list(item: Any) -> bool:
    return isinstance(item, (str, Path)) and str(item).lower().endswith((".yaml", ".yml"))


def replay_items(files: FileSpec | Sequence[FileSpec]) -> Expanded:
    """What a FileReplay of ``files`` reads: each replay list's entries in its place, then each folder and each
    pattern that names no file replaced by its files (connectors/input_paths.py), with the notes that say so."""
    items = [user_item(item) for item in ([files] if isinstance(files, (str, Path)) else list(files))]  # `~`: home
    return expanded([entry for item in items
                     for entry in (replay_list(Path(item)) if is_replay_list(item) else [item])])


def replay_files(files: FileSpec | Sequence[FileSpec]) -> list[Path]:
    """The paths of the files a FileReplay of ``files`` reads (replay_items), as given or found, in its order: so a
    command that checks, records or compares its inputs sees what the reader reads."""
    return [path for item in replay_items(files).items if (path := item_path(item)) is not None]


def replay_list(path: Path) -> list[dict[str, Any]]:
    """The entries of a replay list (`replay: [{path: ..., columns: ...}, ...]`, YAML read with safe_load; unknown
    keys refused by name), paths relative to the list's own folder: one map per file from the command line."""
    try:
        data = safe_load_unique(read_text(path), text_words=True)  # paths and column maps: `yes` is the text
    except OSError as e:
        if isinstance(e, FileNotFoundError):
            raise file_not_found("replay list", path) from None
        raise ValueError(f"replay list {shown_path(path)}: cannot read it: {os_reason(e)}") from None
    except yaml.YAMLError as e:
        raise ValueError(f"replay list {path}: not valid YAML ({yaml_error_line(e)})") from None
    if not isinstance(data, dict) or set(data) != {"replay"} or not isinstance(data["replay"], list) \
            or not data["replay"]:
        keys = f"keys {quoted_words(sorted(map(str, data)))}" if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"replay list {path}: a mapping with one key, replay: [{{path: ..., columns: ...}}, ...]; "
                         f"got {keys}")
    entries = []
    here = Path(os.path.realpath(path)).parent  # the list's own folder, a link to it followed (as a config's)
    for i, entry in enumerate(data["replay"], start=1):
        if not isinstance(entry, dict) or "path" not in entry or set(entry) - {"path", "columns"}:
            got = f"keys {quoted_words(sorted(map(str, entry)))}" if isinstance(entry, dict) else type(entry).__name__
            raise ValueError(f"replay list {path}: entry {i} needs path and may have columns; got {got}")
        entries.append({**entry, "path": str(here / Path(written_path(str(entry["path"]))).expanduser())})
    return entries


def file_spec(item: FileSpec, default: ColumnMap | Refine | None) -> tuple[Path, ColumnMap | Refine | None, bool]:
    """A path, a (path, map) pair, or the YAML form {path: ..., columns: ...}; True when the map is the
    entry's own (not the default for every file)."""
    if isinstance(item, tuple):
        return Path(item[0]), as_column_map(item[1]), True
    if isinstance(item, Mapping):
        if "path" not in item or set(item) - {"path", "columns"}:
            raise ValueError(f'a replay file entry needs "path" and may have "columns"; got keys {quoted_list(item)}')
        if "columns" in item:
            try:
                return Path(item["path"]), as_column_map(item["columns"]), True
            except ValueError as e:  # the entry named: a list of many files has many maps
                raise ValueError(f"{item['path']}: its columns: {e}") from None
        return Path(item["path"]), default, False
    return Path(item), default, False


def once_each(specs: list[tuple[Path, ColumnMap | Refine | None, bool]]
               ) -> tuple[list[tuple[Path, ColumnMap | Refine | None, bool]], list[str]]:
    """Each file once, however often it is named (overlapping globs: `day/*.parquet day/AAPL.parquet`): a file
    read twice would replay its ticks twice and change every count, label and score after them. The same file
    is the same resolved path; named again with another column map, which reading was meant is unclear: refused,
    unless each of its maps keeps rows the others leave out (`kept_apart`: a file of several venues' local times,
    each venue's streams read in its own zone, review440 #8). Returns the specs kept, in the order first named,
    and a note per repeat."""
    named: dict[Path, list[tuple[Path, ColumnMap | Refine | None, bool]]] = {}
    kept, notes = [], []
    for path, cmap, explicit in specs:
        earlier_specs = named.setdefault(path.resolve(), [])
        if all(kept_apart(cmap, earlier_map) for _, earlier_map, _ in earlier_specs):  # (the first: none earlier)
            earlier_specs.append((path, cmap, explicit))
            kept.append((path, cmap, explicit))
            continue
        earlier = next((p for p, earlier_map, _ in earlier_specs if earlier_map == cmap), None)
        if earlier is None:
            raise ValueError(f"{path} is named twice with different column maps (as {earlier_specs[0][0]} too): "
                             f"name it once, with the map it is read with, or keep other values of one column in "
                             f"each map (keep: {{COLUMN: [...]}}), so that no row is read twice")
        said = "named twice" if str(path) == str(earlier) else f"the same file as {earlier}"
        notes.append(f"{path}: {said}; read once")
    return kept, notes


def kept_apart(cmap: ColumnMap | Refine | None, other: ColumnMap | Refine | None) -> bool:
    """Whether two maps of one file read none of the same rows: of a column both keep on, each keeps values the
    other does not (values listed: tests, `not` or `contains`, may both hold a cell)."""
    return apart_column([_keep_of(cmap), _keep_of(other)]) is not None


def _keep_of(cmap: ColumnMap | Refine | None) -> Mapping[str, Any]:
    """A map's keep filter, given in full or as keys to refine a detected layout ({} for none)."""
    return (cmap.keys.get("keep") if isinstance(cmap, Refine) else getattr(cmap, "keep", None)) or {}


def apart_column(keeps: Sequence[Mapping[str, Any]]) -> str | None:
    """The first column every one of ``keeps`` lists values of, none listed by two of them; None for none."""
    for column in keeps[0]:
        listed = [keep.get(column) for keep in keeps]
        if all(isinstance(values, list) for values in listed):
            keys = [{keep_key(v) for v in values} for values in listed]
            if sum(map(len, keys)) == len(set().union(*keys)):
                return column
    return None
