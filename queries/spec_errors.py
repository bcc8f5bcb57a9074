"""How a rejected query is told: `QuerySpecError` and the helper that names the offending key.

Every check of a query (queries/spec.py and the value, kind and topic checks beside it) raises one of these; the
loader (queries/yaml_loader.py) then adds the source and line. One error type for all of them, so a caller catches
one thing, and one place that decides how a located message reads (`file:line: query 'name': reason`) and how a
document's many problems are listed.
"""

from __future__ import annotations

import errno
import os

from queries.limits import clip, excerpt

MAX_LISTED = 20  # problems spelled out in one error; the rest are counted


class UnknownQueryError(LookupError):
    """Raised for a query name that is not registered; the message lists what is. Here, not in registry.py, so
    control replies can tell it apart without importing the registry (and torch) before the engine starts."""


class QuerySpecError(ValueError):
    """A rejected query; `problems` holds one error per offending query when a document has several."""

    def __init__(
        self, reason: str, *, source: str | None = None, line: int | None = None, query: str | None = None,
        key: str | None = None, item: int | str | None = None, problems: list[QuerySpecError] | None = None,
    ) -> None:
        self.reason, self.source, self.line, self.query = reason, source, line, query
        self.key, self.item = key, item  # which key (and list index / mapping key inside it) is wrong
        self.problems = problems or [self]
        super().__init__(self._message() if problems is None else _listed(problems))

    def located(self, source: str, line: int | None, query: str | None) -> QuerySpecError:
        return QuerySpecError(self.reason, source=source, line=line, query=self.query or query, key=self.key,
                              item=self.item)

    def _message(self) -> str:
        where = f"{self.source}:{self.line}" if self.source and self.line else self.source
        who = None
        if self.query:
            who = self.query if self.query.startswith("query #") else f"query {excerpt(self.query)}"
        return clip(": ".join(p for p in (where, who, self.reason) if p))


class QueryFileMissing(QuerySpecError, FileNotFoundError):
    """A queries file that is not there: a QuerySpecError as every query refusal is, and a FileNotFoundError with
    ``errno`` and ``filename`` as a missing tick file is (review420 #8: a sweep catching FileNotFoundError to skip a
    missing input missed it); its text is the refusal's."""

    __str__ = BaseException.__str__  # (not OSError's "[Errno 2] ...": the refusal's words, the file named)

    def __init__(self, reason: str, source: str) -> None:
        super().__init__(reason, source=source)
        self.errno, self.strerror, self.filename = errno.ENOENT, os.strerror(errno.ENOENT), source

    def __reduce__(self) -> tuple:  # (OSError's rebuilds it from errno, strerror and filename: a process pool's
        return type(self), (self.reason, self.source)  # worker raising it broke the pool)


def _listed(problems: list[QuerySpecError]) -> str:
    lines = [p._message() for p in problems[:MAX_LISTED]]
    if len(problems) > MAX_LISTED:
        lines.append(f"... and {len(problems) - MAX_LISTED} more invalid queries")
    return "\n".join(lines)


def fail(key: str | None, reason: str, item: int | str | None = None) -> QuerySpecError:
    """The error for a bad value of ``key`` (and of its ``item``: a list index or a mapping's label), for the caller
    to raise; the spec adds the query's name, the loader the line."""
    return QuerySpecError(reason, key=key, item=item)
