"""`${VAR}` in a service config's text values, replaced by the environment's VAR when the file is loaded: what a
deployment varies (a data directory, a queries folder, an endpoint's host) set per machine or job without a copy of
the config each (review337 #12: `queries: ${QDIR}/dir5.yaml` was read as the literal folder `${QDIR}`).

Only the braced form, so a `$` elsewhere (a column map's `$price`, a regex's `$`) stays as written; `$${` writes a
literal `${`. A VAR the environment does not set is refused naming the key and the VAR, never read as empty (an empty
data directory would be the config's own folder). Keys are never expanded: they name settings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from engine.service.config_error import ConfigError

_REFERENCE = re.compile(r"\$(\$?)\{([^}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def with_environment(raw: Any, source: str, key: str = "") -> Any:
    """``raw`` (a loaded config) with every `${VAR}` in its text values replaced by the environment's VAR."""
    if isinstance(raw, Mapping):
        return {k: with_environment(v, source, f"{key}.{k}" if key else str(k)) for k, v in raw.items()}
    if isinstance(raw, list):
        return [with_environment(v, source, f"{key}[{i}]") for i, v in enumerate(raw)]
    if isinstance(raw, str) and "${" in raw:
        return _REFERENCE.sub(lambda found: _value(found, source, key), raw)
    return raw


def _value(found: re.Match[str], source: str, key: str) -> str:
    escaped, name = found.groups()
    if escaped:  # `$${X}`: the text `${X}`
        return found.group(0)[1:]
    if not _NAME.fullmatch(name):
        raise ConfigError(f"{source}: {key}: ${{{name}}} is not an environment variable's name (letters, digits "
                          f"and _, not starting with a digit); write $${{ for a literal ${{")
    value = os.environ.get(name)
    if value is None:
        raise ConfigError(f"{source}: {key}: ${{{name}}} is not set in the environment (set it, or write $${{ for "
                          f"a literal ${{)")
    return value
