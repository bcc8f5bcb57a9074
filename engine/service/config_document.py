"""A service config file read as its YAML document (``read_document``: what ServiceConfig.load builds on), and what a
client command reads of it (``client_endpoints``).

A client command given `--config` (`list`, `ask`, `get`, `subscribe`, ...: the README's way to reach a service on
other endpoints) needs the `endpoints` section alone. Building the whole ServiceConfig imports every section's
module, the column map's and the scheduler's among them, for about 0.1 s of CPU a call (review400 #7: a script
polling `ask` paid ~60% more than with `--control`). So a client reads the document as `serve` does (`~`, `${VAR}`s,
YAML refused in one line), refuses an unknown top-level key by name, and builds `endpoints` with every check of that
section (config_keys.built_section: unknown keys by name, values by type, the section's own). The engine's sections
it does not read are `serve`'s to check.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from engine.path_words import cannot_read, shown_path, user_path
from engine.service.config_endpoints import EndpointsSection
from engine.service.config_env import with_environment
from engine.service.config_error import ConfigError
from engine.service.config_keys import built_section, reject_unknown
from engine.text_files import read_text
from engine.yaml_files import safe_load_unique, yaml_error_line, yaml_kind

# a config document's top-level keys: ServiceConfig's fields (tests/test_config.py holds the two the same), here
# without the section modules
CONFIG_KEYS = frozenset({"model", "codec", "kv", "scheduler", "endpoints", "limits", "ingest", "curve", "log",
                         "shards", "replay", "answers", "queries"})


def read_document(path: str | Path, shaped: Callable[[Any, str], Any] | None = None) -> tuple[Path, Any]:
    """The config file at ``path`` (``~`` read as the shell reads it) and its YAML document, ``shaped`` (with the
    file's text) first when given, then its ``${VAR}`` references filled from the environment. ConfigError when the
    file cannot be read or is not valid YAML, in one line naming it."""
    path = user_path(path)  # `ServiceConfig.load("~/engine.yaml")` as `--config ~/engine.yaml` reads it
    text = None
    try:
        text = read_text(path)
        raw = safe_load_unique(text)
        if shaped is not None:
            raw = shaped(raw, text)
        return path, with_environment(raw, shown_path(path))
    except yaml.YAMLError as e:  # one line: the problem and where
        raise ConfigError(f"{path}: not valid YAML: {yaml_error_line(e, text)}") from None
    except OSError as e:
        raise ConfigError(f"{shown_path(path)}: {cannot_read(e)}") from None


def client_endpoints(path: str | Path) -> EndpointsSection:
    """The `endpoints` of the service config at ``path``, checked as ServiceConfig.load checks them, with the
    document's top-level keys."""
    path, raw = read_document(path)
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the config must be a mapping, got {yaml_kind(raw)}")
    reject_unknown(raw, CONFIG_KEYS, str(path), "top level")
    if "endpoints" not in raw:
        return EndpointsSection()
    return built_section("endpoints", EndpointsSection, raw["endpoints"], str(path))
