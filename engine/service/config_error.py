"""The error a service config is refused with, and how a section's refusal names its key.

Every section module raises ConfigError; the loader (engine/service/config.py) prefixes the file and, through
`keyed`, the section, so a user reads `limits.heartbeat_s must be ...` as the key is written in the file.
"""

from __future__ import annotations

import dataclasses


class ConfigError(ValueError):
    """A service config that cannot be used, naming the key and the reason."""


def keyed(section: str, section_type: type, message: str) -> str:
    """A section's refusal, its key named as the file writes it: `scheduler.keep_fraction must be ...`
    (a message that names no key of the section keeps the section in front: `kv: give cells or bytes`)."""
    message = message.removeprefix(f"{section}: ")
    if message.startswith(f"{section}."):
        return message
    key = message.split(" ", 1)[0]
    if key in {f.name for f in dataclasses.fields(section_type)}:
        return f"{section}.{message}"
    return f"{section}: {message}"
