"""ServiceConfig: the engine service's YAML (model, codec, KV budget, batching, endpoints, limits).

Loaded with ``yaml.safe_load`` (a key given twice refused: engine/yaml_files.py); every section is a dataclass
validated when
built; unknown keys are rejected by name with their section. Every socket binds
to 127.0.0.1 unless an endpoint says otherwise.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from connectors.column_map import MAP_KEYS, inline_spelling
from connectors.map_options import map_from_options
from connectors.stream_selection import StreamSelection
from engine.rust_paths import written_path
from engine.service.config_answers import AnswersSection
from engine.service.config_curve import CurveSection
from engine.service.config_endpoints import EndpointsSection
from engine.service.config_error import ConfigError, keyed
from engine.service.config_kv import KVSection
from engine.service.config_limits import MAX_LIMIT, LimitsSection
from engine.service.config_log import LogSection
from engine.service.config_model import CodecSection, ModelSection
from engine.service.config_shards import ShardsSection
from engine.settings import SchedulerConfig
from engine.stream_patterns import did_you_mean
from engine.text_files import read_text
from engine.yaml_files import safe_load_unique, yaml_error_line, yaml_kind
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


@dataclass(frozen=True)
class ServiceConfig:
    model: ModelSection = field(default_factory=ModelSection)
    codec: CodecSection = field(default_factory=CodecSection)
    kv: KVSection = field(default_factory=KVSection)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    endpoints: EndpointsSection = field(default_factory=EndpointsSection)
    limits: LimitsSection = field(default_factory=LimitsSection)
    curve: CurveSection = field(default_factory=CurveSection)
    log: LogSection = field(default_factory=LogSection)
    shards: ShardsSection = field(default_factory=ShardsSection)
    replay: ReplaySection = field(default_factory=ReplaySection)
    answers: AnswersSection = field(default_factory=AnswersSection)
    queries: str | None = None  # a queries YAML file registered at start

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None, source: str = "<config>") -> "ServiceConfig":
        raw = raw or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: the config must be a mapping, got {yaml_kind(raw)}")
        sections = {f.name: f for f in dataclasses.fields(cls)}
        _reject_unknown(raw, sections, source, "top level")
        built: dict[str, Any] = {}
        for name, value in raw.items():
            section_type = _SECTION_TYPES.get(name)
            if section_type is None:  # `queries`, the one top-level key that is no section: a file's path
                if value is not None and not isinstance(value, str):
                    raise ConfigError(f"{source}: queries must be the path of a queries file, got {yaml_kind(value)} "
                                      f"(the queries themselves go in that file, under its own `queries:`)")
                built[name] = value
                continue
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: section {name!r} must be a mapping, got {yaml_kind(value)}")
            _reject_unknown(value, {f.name for f in dataclasses.fields(section_type)}, source, f"section {name!r}")
            if name == "replay" and isinstance(value.get("columns"), dict):  # named here, where the file is known
                _check_replay_columns(value["columns"], source)
            value = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
            if name == "kv" and value.get("cells") is not None and value.get("bytes") is not None:
                raise ConfigError(f"{source}: kv: give cells or bytes, not both (got cells: {value['cells']!r}, "
                                  f"bytes: {value['bytes']!r})")
            try:  # the section's own checks speak first; a wrong type they let through is named after them
                built[name] = section_type(**value)
            except ValueError as e:
                raise ConfigError(f"{source}: {keyed(name, section_type, str(e))}") from None
            except TypeError as e:  # a comparison or sum on a wrong type, most likely
                _check_types(value, section_type, f"{source}: {name}")
                raise ConfigError(f"{source}: {name}: {e}") from None
            _check_types(value, section_type, f"{source}: {name}")
        return cls(**built)

    @classmethod
    def load(cls, path: str | Path) -> "ServiceConfig":
        try:
            text = read_text(path)
            raw = _replay_columns_as_text(safe_load_unique(text), text)
        except yaml.YAMLError as e:  # one line: the problem and where
            raise ConfigError(f"{path}: not valid YAML: {yaml_error_line(e)}") from None
        except OSError as e:
            raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
        config = cls.from_dict(raw, str(path))
        here = Path(path).parent

        def beside(value: str | None) -> str | None:  # every path in a config file is relative to the file
            if value is None:
                return None
            value = written_path(value)  # as Python names the file, whatever the locale
            return value if Path(value).expanduser().is_absolute() else str(here / value)

        return dataclasses.replace(
            config, queries=beside(config.queries),
            model=dataclasses.replace(config.model, path=beside(config.model.path)),
            log=dataclasses.replace(config.log, dir=beside(config.log.dir)),
            curve=dataclasses.replace(config.curve, server_secret_key_file=beside(config.curve.server_secret_key_file),
                                      server_public_key_file=beside(config.curve.server_public_key_file),
                                      clients_dir=beside(config.curve.clients_dir)))


_SECTION_TYPES: dict[str, type] = {
    "model": ModelSection, "codec": CodecSection, "kv": KVSection, "scheduler": SchedulerConfig,
    "endpoints": EndpointsSection, "limits": LimitsSection, "curve": CurveSection, "log": LogSection,
    "shards": ShardsSection,
    "replay": ReplaySection, "answers": AnswersSection,
}


_TYPE_WORDS = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
               "dict": "a mapping", "None": "null", "tuple[int, ...]": "a list of integers",
               "tuple[str, ...]": "a list of strings"}


def _fits(value: Any, kind: str) -> bool:
    if kind in ("int", "float") and isinstance(value, bool):
        return False
    if kind.startswith("tuple["):
        item = kind[len("tuple["):].split(",")[0]
        return isinstance(value, tuple) and all(_fits(v, item) for v in value)
    types = {"int": int, "float": (int, float), "str": str, "bool": bool, "dict": dict, "None": type(None)}
    return kind not in types or isinstance(value, types[kind])


def _check_types(values: dict, section_type: type, where: str) -> None:
    """Each key's value against its field's annotation (`int | None`, `tuple[str, ...]`, ...), so `heartbeat_s:
    fast` or `cells: "4096"` is refused by name here, not met as a TypeError deep in the service."""
    annotations = {f.name: str(f.type) for f in dataclasses.fields(section_type)}
    for key, value in values.items():
        kinds = [k.strip() for k in annotations[key].split("|")]
        if any(k.startswith("Literal[") for k in kinds) or any(_fits(value, k) for k in kinds):
            continue
        if isinstance(value, datetime.date) and "str" in kinds:  # YAML reads 2024-03-01 as a date; the section
            continue                                             # turns it back into text
        wanted = " or ".join(_TYPE_WORDS.get(k, k) for k in kinds)
        hint = ""
        if isinstance(value, str) and EXPONENT_AS_TEXT.match(value.strip()) and float(value).is_integer() \
                and abs(float(value)) < MAX_LIMIT:
            # PyYAML (YAML 1.1) reads a float only with a dot and a signed exponent: 1e9 and 1.5e9 are text
            hint = f" (YAML reads {value} as text: write {int(float(value))}, or drop the quotes if it is quoted)"
        elif isinstance(value, str) and EXPONENT_AS_TEXT.match(value.strip()):
            hint = f" (YAML reads {value} as text: write {float(value)!r}, or drop the quotes if it is quoted)"
        elif isinstance(value, str) and _fits(_number(value), kinds[0]):
            hint = " (quoted in the YAML: drop the quotes)"
        raise ConfigError(f"{where}.{key} must be {wanted}, got {excerpt(value)}{hint}")


EXPONENT_AS_TEXT = re.compile(r"^[-+]?\d+(\.\d*)?[eE][-+]?\d+$")  # a number YAML 1.1 may read as text


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return None


def _replay_columns_as_text(raw: Any, text: str) -> Any:
    """``raw`` with replay.columns read as a column map file is (engine/yaml_files.py: every value there is the text
    written, so `keep: {regular: [yes]}` keeps the rows of `yes` and `keep: {corr: [01]}` those of `01`, not 1); the
    rest of the config keeps YAML's numbers and booleans, so `log: {enabled: no}` is still false."""
    replay = raw.get("replay") if isinstance(raw, dict) else None
    if isinstance(replay, dict) and isinstance(replay.get("columns"), dict):
        replay["columns"] = safe_load_unique(text, text_words=True)["replay"]["columns"]
    return raw


def _check_replay_columns(columns: dict, source: str) -> None:
    """replay.columns' keys, and a list of streams under `stream` (`replay: {columns: {stream: ["X*"]}}`, following
    the hint for `replay: {stream: [...]}`): what it meant is replay.streams."""
    _reject_unknown(columns, MAP_KEYS, source, "replay.columns")
    if isinstance(columns.get("stream"), list):
        raise ConfigError(f"{source}: replay.columns.stream is one fixed stream name (a column of names is "
                          f"stream_col), got a list {excerpt(columns['stream'])}: the streams to read, as --streams, "
                          f"are replay.streams (replay: {{streams: [...]}})")


def _reject_unknown(raw: dict, allowed: Any, source: str, where: str) -> None:
    unknown = [k for k in raw if k not in allowed]
    if not unknown:
        return
    key = unknown[0]
    # the nearest key of this level first: `replay: {stream: [...]}` is a typo of `streams`, not a column map's key
    hint = did_you_mean([str(key)], [str(k) for k in allowed])
    if where == "section 'replay'" and key in MAP_KEYS:  # replay.hours or replay.price_format: a column map's key
        example = f"replay: {{columns: {{{key}: ...}}}}"
        hint += f" (as a column map's key, {key!r} goes under replay.columns: {example})" if hint else \
            f"; {key!r} is a column map's key: give it under replay.columns ({example})"
    if where == "replay.columns":
        hint += inline_spelling([str(key)])
    raise ConfigError(f"{source}: unknown key {key!r} in {where} (allowed: {', '.join(sorted(allowed))}){hint}")
