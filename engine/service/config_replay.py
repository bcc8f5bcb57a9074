"""The `replay` section of the service config: how `flashtick backtest --config` reads tick files (a column map or
a preset, its refinements, the streams to read), and the reading of replay.columns as a column map file reads it.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from connectors.column_map import MAP_KEYS
from connectors.map_options import map_from_options
from connectors.stream_selection import StreamSelection
from engine.service.config_error import ConfigError
from engine.service.config_keys import reject_unknown
from engine.yaml_files import safe_load_unique
from queries.limits import excerpt  # values as YAML writes them: got true, got null (not True, None)

@dataclass(frozen=True)
class ReplaySection:
    """How `flashtick backtest --config` reads tick files (docs/replay.md); each command-line option of the
    same name replaces its value here. `columns` is a column map (the YAML form of docs/replay.md) and
    `preset` the base it overrides; names/ts_unit/tz/date/ts_format refine either. Nothing set: detect per file."""

    preset: str | None = None
    columns: dict | None = None
    names: tuple[str, ...] | None = None  # the columns of a header-less CSV, in order
    ts_unit: str | None = None
    tz: str | None = None  # IANA zone of naive times, e.g. Europe/London
    date: str | None = None  # the day of seconds_after_midnight times, e.g. 2024-03-01
    ts_format: str | None = None  # strftime codes of datetime text that is not ISO 8601
    batch_ms: float = 100.0  # event-time width of a batch
    checkpoint_s: float = 10.0  # wall seconds between answer checkpoints (resumable with --resume)
    streams: tuple[str, ...] | None = None  # the streams of the files to read (names or globs); None: every one

    def __post_init__(self) -> None:
        for name in ("batch_ms", "checkpoint_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"replay.{name} must be a number > 0, got {excerpt(value)}")
        if self.columns is not None and not isinstance(self.columns, dict):
            raise ConfigError(f"replay.columns must be a mapping of field -> column, got {excerpt(self.columns)}")
        if isinstance(self.date, datetime.date):  # YAML reads an unquoted 2024-03-01 as a date
            object.__setattr__(self, "date", self.date.isoformat())
        try:
            self.column_map()
            if self.streams is not None:  # a bad glob is refused when the config is loaded, as a query's is
                StreamSelection(self.streams)
        except ValueError as e:
            raise ConfigError(f"replay: {e}") from None

    def column_map(self) -> dict[str, Any] | None:
        """The map these keys describe (ColumnMap.from_dict form), or None: detect each file's layout. As on the
        command line, `tz`, `date`, ... alone refine each file's detected layout."""
        return map_from_options(self.preset, self.columns, detect=True, names=self.names, ts_unit=self.ts_unit,
                                tz=self.tz, date=self.date, ts_format=self.ts_format)


def replay_columns_as_text(raw: Any, text: str) -> Any:
    """``raw`` with replay.columns read as a column map file is (engine/yaml_files.py: every value there is the text
    written, so `keep: {regular: [yes]}` keeps the rows of `yes` and `keep: {corr: [01]}` those of `01`, not 1); the
    rest of the config keeps YAML's numbers and booleans, so `log: {enabled: no}` is still false."""
    replay = raw.get("replay") if isinstance(raw, dict) else None
    if isinstance(replay, dict) and isinstance(replay.get("columns"), dict):
        replay["columns"] = safe_load_unique(text, text_words=True)["replay"]["columns"]
    return raw


def check_replay_columns(columns: dict, source: str) -> None:
    """replay.columns' keys, and a list of streams under `stream` (`replay: {columns: {stream: ["X*"]}}`, following
    the hint for `replay: {stream: [...]}`): what it meant is replay.streams."""
    reject_unknown(columns, MAP_KEYS, source, "replay.columns")
    if isinstance(columns.get("stream"), list):
        raise ConfigError(f"{source}: replay.columns.stream is one fixed stream name (a column of names is "
                          f"stream_col), got a list {excerpt(columns['stream'])}: the streams to read, as --streams, "
                          f"are replay.streams (replay: {{streams: [...]}})")
