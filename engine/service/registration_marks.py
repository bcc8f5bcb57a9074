"""Where each standing query starts: every stream's committed tick count when the query was registered, so a
restart owes a query no answer on ticks from before it. Kept in DATA_DIR/queries.state.json (kept_queries), sent by
a front door to its shards, and read by the rule of what a restart owes (owed_answers)."""

from __future__ import annotations

from typing import Any


class RegistrationMarks:
    """Where each registered query starts: every stream's committed tick count when it was registered. A query
    registered after a stream's ticks has no answer for them in a run that never stops (it first fires on the
    stream's next batch), so after a restart it owes none either: ``owes`` says whether a stream has ticks past
    the query's registration. Queries registered in one call share one snapshot (kept once on disk)."""

    def __init__(self) -> None:
        self.marks: dict[str, dict[str, int]] = {}  # query -> stream -> committed ticks when it was registered

    def registered(self, names: list[str], progress: dict[str, int]) -> None:
        snapshot = dict(progress)
        for name in names:
            self.marks[name] = snapshot

    def removed(self, name: str) -> None:
        self.marks.pop(name, None)

    def owes(self, query: str, stream: str, ticks: int) -> bool:
        """A query never answered on ``stream`` owes an answer at ``ticks`` only for ticks after it was registered
        (a query the marks do not know, e.g. from a directory written before them: as before, owed)."""
        return ticks > self.start(query, stream)

    def start(self, query: str, stream: str) -> int:
        """``stream``'s committed tick count when ``query`` was registered (0: before its first tick, or unknown)."""
        return self.marks.get(query, {}).get(stream, 0)

    def to_json(self) -> list[dict[str, Any]]:
        groups: dict[int, dict[str, Any]] = {}
        for name, snapshot in self.marks.items():
            groups.setdefault(id(snapshot), {"queries": [], "ticks": snapshot})["queries"].append(name)
        return list(groups.values())

    @classmethod
    def from_marks(cls, marks: dict[str, dict[str, int]]) -> RegistrationMarks:
        """From ``marks`` as a front door sends a shard its streams' (query -> stream -> ticks)."""
        out = cls()
        out.marks = {query: dict(snapshot) for query, snapshot in marks.items()}
        return out

    @classmethod
    def from_json(cls, groups: list[dict[str, Any]]) -> RegistrationMarks:
        marks = cls()
        for group in groups:
            marks.registered(list(group["queries"]), {str(k): int(v) for k, v in group["ticks"].items()})
        return marks
