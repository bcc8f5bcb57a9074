"""The queries a backtest asks, as ``run_backtest(queries=...)`` takes them (review354 #8): a queries file's path, the
YAML text of one (a notebook keeps its queries in a cell), or that document already parsed (a dict, or the list under
its `queries:`). Each is read into the one YAML text the registry parses, so each is checked and refused alike
(QuerySpecError, located in the text as in a file); the run's key and record hold its bytes, so a resume with the
same queries, in whichever form, goes on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine.path_words import user_path
from queries.limits import QueryLimits
from queries.yaml_loader import read_queries_file

GIVEN_AS_TEXT = "<queries text>"  # the source a problem in queries given as text is located in, and the record's path
GIVEN_PARSED = "<queries dict>"
ACCEPTED = ("a queries file's path (str or os.PathLike), its YAML text, or the document parsed: a dict "
            "({\"queries\": [...]}) or the list of queries under it")


@dataclass(frozen=True)
class BacktestQueries:
    """Where the queries came from: ``path`` (a file, read when the run registers them) or ``given`` (the text)."""
    path: Path | None
    given: str | None
    source: str  # what a refusal names: the file, or GIVEN_AS_TEXT / GIVEN_PARSED

    def text(self, limits: QueryLimits) -> str:
        """The YAML text, a file's read under ``limits`` (max_yaml_bytes) as `register_file` reads it."""
        return read_queries_file(self.path, limits) if self.path is not None else str(self.given)

    def data(self) -> bytes:
        """The bytes the run's key digests (a file's as they are on disk, as a checkpoint before this recorded)."""
        return self.path.read_bytes() if self.path is not None else str(self.given).encode("utf-8")

    def shown(self) -> str:
        """The record's `queries.path`: the file, resolved; or where the queries were given."""
        return str(self.path.resolve()) if self.path is not None else self.source


def backtest_queries(queries: Any) -> BacktestQueries:
    """``queries`` as run_backtest takes them; a TypeError naming what is accepted for anything else. A str is a
    path unless it is YAML text: more than one line, or a one-line mapping or list (`queries: [...]`) that names
    no file here."""
    if isinstance(queries, os.PathLike):
        return BacktestQueries(user_path(queries), None, str(queries))
    if isinstance(queries, str):
        if _is_yaml_text(queries):
            return BacktestQueries(None, queries, GIVEN_AS_TEXT)
        return BacktestQueries(user_path(queries), None, queries)
    if isinstance(queries, (Mapping, list, tuple)):
        document = {"queries": list(queries)} if isinstance(queries, (list, tuple)) else dict(queries)
        try:
            text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
        except yaml.YAMLError as e:  # a value YAML has no form for (a QuerySpec, a datetime's subclass, ...)
            raise TypeError(f"queries: a dict or list must hold YAML values alone (str, numbers, booleans, lists, "
                            f"dicts), as safe_load gives them: {e}") from None
        return BacktestQueries(None, text, GIVEN_PARSED)
    raise TypeError(f"queries: expected {ACCEPTED}; got {type(queries).__qualname__}"
                    + (" (the CLI's default, queries/examples/tick_model.yaml, is engine.service.cli_common."
                       "EXAMPLE_QUERIES)" if queries is None else ""))


def _is_yaml_text(text: str) -> bool:
    if "\n" in text.strip():
        return True
    if os.path.exists(os.path.expanduser(text)):
        return False
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(parsed, (dict, list))
