"""A `register`'s query document parsed off the engine thread.

Composing YAML is Python work that grows with the document: one just under limits.max_yaml_bytes (a query listing
~37,000 streams) took 3-10 s of a loaded engine thread, with no heartbeat, ingest or forward meanwhile (review207
#3). So the loop hands the text to a thread of its own and keeps its turns; each turn it looks whether the parse is
done and applies the queries itself (the registry and the pipeline are the engine thread's). The thread only reads
what the registry fixes at its start: the codec's questions, the limits, and the compile check of `answerable`.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from queries.registry import Registry
from queries.spec import QuerySpec
from queries.yaml_loader import load_queries


class DocumentParse:
    """One query document being parsed on a daemon thread (a stop does not wait for it: its client, like any whose
    request was not served, gets no reply). ``done`` says when ``specs`` can be taken; ``reply`` is its client's."""

    def __init__(self, text: str, source: str, registry: Registry, reply: Callable[[dict], Any]) -> None:
        self.text, self.source, self.reply = text, source, reply
        self.lines: dict[str, int] = {}  # each query's name -> its line, for an error found when it is applied
        self._specs: list[QuerySpec] = []
        self._error: Exception | None = None
        self._thread = threading.Thread(target=self._parse, args=(registry,), name="flashtick-register", daemon=True)
        self._thread.start()

    def _parse(self, registry: Registry) -> None:
        try:
            self._specs = load_queries(self.text, self.source, questions=registry.questions, limits=registry.limits,
                                       answerable=registry.answerable, lines=self.lines,
                                       across=registry.document_clashes)  # (the registry's snapshot: read-only)
        except Exception as e:  # raised again on the engine thread, which replies with it (ControlSocket._refused)
            self._error = e

    def done(self) -> bool:
        return not self._thread.is_alive()

    def specs(self) -> list[QuerySpec]:
        """The document's queries, once ``done``; its problem (a QuerySpecError, ...) raised here."""
        if self._error is not None:
            raise self._error
        return self._specs
