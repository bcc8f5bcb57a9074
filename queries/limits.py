"""QueryLimits: how much a query document and the registry may hold, and short excerpts for error messages.

Query YAML comes from whoever can reach the control socket, so every cost it
can cause is bounded before it is paid: the document's size in bytes, the
nodes it expands to (aliases count as often as they are used, so an 8-level
"billion laughs" is refused once a few hundred nodes are composed, not 10**8), the
number of registered queries, and the length of a query's topic. The service
config's `limits` section sets them (docs/configuration.md); the defaults are
safe for a service that nobody configured.

Errors quote what was wrong, never more than a short excerpt of it (as JSON writes it, the one style of every
error: engine/quoting.py): a value that was refused may be megabytes once its aliases are expanded.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from engine.quoting import quoted

MAX_EXCERPT = 80  # characters of a quoted value in an error message


@dataclass(frozen=True)
class QueryLimits:
    max_yaml_bytes: int = 256 << 10  # a query document (UTF-8); reading one: ~1 us of CPU a byte (4 without libyaml)
    max_yaml_nodes: int = 100_000  # nodes of a document with every alias expanded
    max_queries: int = 1000  # registered at once
    max_topic_bytes: int = 256  # a query's topic without the stream name (UTF-8)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{f.name} must be a positive integer, got {excerpt(value)}")


def excerpt(value: Any) -> str:
    """``value`` as every error quotes it (engine/quoting.py: as JSON writes it, `"AAPL"`, `null`, `true`), cut to
    at most MAX_EXCERPT characters without building the whole text of a big value."""
    text = quoted(value, MAX_EXCERPT - 20)
    return text if len(text) <= MAX_EXCERPT else text[: MAX_EXCERPT - 3] + "..."


def clip(text: str, limit: int = 500) -> str:
    """A message cut to `limit` characters, saying how long it was."""
    return text if len(text) <= limit else f"{text[: limit - 30]}... ({len(text)} characters)"
