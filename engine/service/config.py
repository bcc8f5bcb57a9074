"""ServiceConfig: the engine service's YAML (model, codec, KV budget, batching, endpoints, limits).

Loaded with ``yaml.safe_load`` (a key given twice refused: engine/yaml_files.py); every section is a dataclass
validated when
built; unknown keys are rejected by name with their section. Every socket binds
to 127.0.0.1 unless an endpoint says otherwise.

Each section lives in its own module (engine/service/config_<section>.py: model and codec, kv, answers, endpoints,
ingest, limits, log, curve, shards, replay; the scheduler's is engine/settings.py); the loader's checks of keys and
types are engine/service/config_keys.py, the file read as its document engine/service/config_document.py (with what a
client command reads of it) and ConfigError is engine/service/config_error.py. ServiceConfig, ConfigError
and the section classes stay importable from here.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, get_type_hints

from engine.path_words import user_path_text
from engine.quoting import quoted
from engine.rust_paths import written_path
from engine.service.config_answers import AnswersSection
from engine.service.config_curve import CurveSection
from engine.service.config_document import read_document
from engine.service.config_endpoints import EndpointsSection
from engine.service.config_ingest import IngestSection
from engine.service.config_error import ConfigError
from engine.service.config_keys import built_section, reject_unknown
from engine.service.config_kv import KVSection
from engine.service.config_limits import LimitsSection
from engine.service.config_log import LogSection
from engine.service.config_model import CodecSection, ModelSection
from engine.service.config_replay import ReplaySection, check_replay_columns, replay_columns_as_text
from engine.service.config_shards import ShardsSection
from engine.settings import SchedulerConfig
from engine.yaml_files import yaml_kind


@dataclass(frozen=True)
class ServiceConfig:
    """The engine's configuration, one field per section of its YAML (docs/configuration.md): ``model``, ``codec``,
    ``kv``, ``scheduler``, ``endpoints``, ``limits``, ``ingest``, ``curve``, ``log``, ``shards``, ``replay``,
    ``answers``, and ``queries`` (a queries file registered at start). Frozen and checked when built: make one with
    ``ServiceConfig.load(path)`` (a YAML file) or ``ServiceConfig.from_dict({...})`` (the same document as a dict);
    ``ServiceConfig()`` is every default. ``run_backtest(config, ...)`` and ``flashtick serve`` take it."""
    model: ModelSection = field(default_factory=ModelSection)
    codec: CodecSection = field(default_factory=CodecSection)
    kv: KVSection = field(default_factory=KVSection)
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    endpoints: EndpointsSection = field(default_factory=EndpointsSection)
    limits: LimitsSection = field(default_factory=LimitsSection)
    ingest: IngestSection = field(default_factory=IngestSection)
    curve: CurveSection = field(default_factory=CurveSection)
    log: LogSection = field(default_factory=LogSection)
    shards: ShardsSection = field(default_factory=ShardsSection)
    replay: ReplaySection = field(default_factory=ReplaySection)
    answers: AnswersSection = field(default_factory=AnswersSection)
    queries: str | None = None  # a queries YAML file registered at start

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None, source: str = "<config>") -> "ServiceConfig":
        """The config a YAML document parsed into a dict would load as, e.g. ``from_dict({"model": {"threads": 1}})``:
        sections as nested dicts, every key left out at its default (None or {}: all defaults). An unknown key, a
        wrong type or a bad value raises ConfigError naming it (with a did-you-mean), prefixed by ``source``. A
        ``~`` in a path is read as the shell reads it; relative paths stay relative to the working directory."""
        raw = raw or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{source}: the config must be a mapping, got {yaml_kind(raw)}")
        sections = {f.name: f for f in dataclasses.fields(cls)}
        reject_unknown(raw, sections, source, "top level")
        built: dict[str, Any] = {}
        for name, value in raw.items():
            section_type = _SECTION_TYPES.get(name)
            if section_type is None:  # `queries`, the one top-level key that is no section: a file's path
                if value is not None and not isinstance(value, str):
                    raise ConfigError(f"{source}: queries must be the path of a queries file, got {yaml_kind(value)} "
                                      f"(the queries themselves go in that file, under its own `queries:`)")
                built[name] = value
                continue
            built[name] = built_section(name, section_type, value, source,
                                        functools.partial(_across_keys, name, source=source))
        # `~/models/m1` read as the shell would, as the CLI reads its options: a config built in Python too
        return cls(**built).with_paths(user_path_text)

    @classmethod
    def load(cls, path: str | Path) -> "ServiceConfig":
        """The config in a YAML file (``--config PATH``'s; ``~`` read as the shell reads it), checked as
        ``from_dict`` checks it, ``${VAR}`` references filled from the environment; the file's relative paths (the
        queries file, model.path, log.dir, ...) are read from the file's own folder. ConfigError when the file
        cannot be read, is not valid YAML, or holds a bad key or value (named with the file)."""
        path, raw = read_document(path, replay_columns_as_text)
        config = cls.from_dict(raw, str(path))
        # the file's own folder, the link followed: a config kept in one place and linked into each job's folder
        # reads its queries and logs from beside itself, not from beside the link
        here = Path(os.path.realpath(path)).parent

        def beside(value: str) -> str:  # every path in a config file is relative to the file (`~` expanded already)
            value = written_path(value)  # as Python names the file, whatever the locale
            return value if Path(value).is_absolute() else str(here / value)

        return config.with_paths(beside)

    def in_process(self) -> "ServiceConfig":
        """This config as an in-process run (`backtest`, from the CLI or ``run_backtest``) runs it: without its data
        directory. ``log.dir`` is a service's tick and answer logs; a run in this process must neither wait on the
        lock of a `serve` that holds it, nor replay its ticks, nor append its own to them (review354 #1)."""
        return dataclasses.replace(self, log=dataclasses.replace(self.log, dir=None))

    def with_paths(self, change: Callable[[str], str]) -> "ServiceConfig":
        """This config with ``change`` applied to each of its paths that is set (the queries file, model.path,
        log.dir, curve's key files and clients folder): the one list of them."""
        def changed(value: str | None) -> str | None:
            return None if value is None else change(value)

        return dataclasses.replace(
            self, queries=changed(self.queries),
            model=dataclasses.replace(self.model, path=changed(self.model.path)),
            log=dataclasses.replace(self.log, dir=changed(self.log.dir)),
            curve=dataclasses.replace(self.curve, server_secret_key_file=changed(self.curve.server_secret_key_file),
                                      server_public_key_file=changed(self.curve.server_public_key_file),
                                      clients_dir=changed(self.curve.clients_dir)))


def _across_keys(name: str, value: dict[str, Any], source: str) -> None:
    """Section ``name``'s checks across its keys (config_keys.built_section's ``check``): replay's column map, named
    here, where the file is known; kv's cells or bytes."""
    if name == "replay" and isinstance(value.get("columns"), dict):
        check_replay_columns(value["columns"], source)
    if name == "kv" and value.get("cells") is not None and value.get("bytes") is not None:
        raise ConfigError(f"{source}: kv: give cells or bytes, not both (got cells: {quoted(value['cells'])}, "
                          f"bytes: {quoted(value['bytes'])})")


# section name -> its dataclass, read off ServiceConfig's fields (their hints are text under `annotations`), so a
# section added there is read from YAML without a second list to forget
_SECTION_TYPES: dict[str, type] = {name: hint for name, hint in get_type_hints(ServiceConfig).items()
                                   if dataclasses.is_dataclass(hint)}
