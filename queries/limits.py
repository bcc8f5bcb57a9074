"""QueryLimits: how much a query document and the registry may hold, and short excerpts for error messages.

Query YAML comes from whoever can reach the control socket, so every cost it
can cause is bounded before it is paid: the document's size in bytes, the
nodes it expands to (aliases count as often as they are used, so an 8-level
"billion laughs" is refused once a few hundred nodes are composed, not 10**8), the
number of registered queries, and the length of a query's topic. The service
config's `limits` section sets them (docs/configuration.md); the defaults are
safe for a service that nobody configured.

Errors quote what was wrong, never more than a short excerpt of it: a value
that was refused may be megabytes once its aliases are expanded.
"""

from __future__ import annotations

import dataclasses
import reprlib
from dataclasses import dataclass
from typing import Any

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


class _Excerpt(reprlib.Repr):
    """reprlib, minus the cases where it builds a value's whole repr before cutting it."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother = 2, MAX_EXCERPT - 20, MAX_EXCERPT - 20
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 4

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:  # str() of a huge int is slow, or refused outright
            return f"<an integer of {x.bit_length()} bits>"
        return super().repr_int(x, level)

    # null, true, false as YAML writes them: a user who wrote `~` reads "got null", not Python's "got None"
    def repr_NoneType(self, x: None, level: int) -> str:  # noqa: N802 (reprlib's method name for the type)
        return "null"

    def repr_bool(self, x: bool, level: int) -> str:
        return "true" if x else "false"

    def repr_instance(self, x: Any, level: int) -> str:
        if isinstance(x, bytes | bytearray):
            x = bytes(x[: self.maxother])
        elif not isinstance(x, float | bool | None):
            return f"<{type(x).__name__}>"
        return super().repr_instance(x, level)


_EXCERPT = _Excerpt()


def excerpt(value: Any) -> str:
    """repr(value) cut to at most MAX_EXCERPT characters, without building the whole repr of a big value."""
    text = _EXCERPT.repr(value)
    return text if len(text) <= MAX_EXCERPT else text[: MAX_EXCERPT - 3] + "..."


def clip(text: str, limit: int = 500) -> str:
    """A message cut to `limit` characters, saying how long it was."""
    return text if len(text) <= limit else f"{text[: limit - 30]}... ({len(text)} characters)"
