"""One engine's standing queries changed: registered, replaced or removed, the change carried to every layer that
holds a query's state (registry, answer cache, flash state, live scores, adaptation, where it starts) and kept in
the data directory, in the order a restart relies on. A mixin of TickPipeline (pipeline.py), whose state it reads;
the sharded front door changes its queries its own way (sharded.py)."""

from __future__ import annotations

from typing import Any

from engine.engine import Engine
from engine.service.adaptation import AnswerAdaptation
from engine.service.answer_log import AnswerHistory
from engine.service.durability import DataDir
from engine.service.live_scores import LiveScores
from engine.service.registration_marks import RegistrationMarks
from queries.cache import AnswerCache
from queries.flash import FlashQueries
from queries.probe_answers import CompiledQuery
from queries.registry import Registry
from queries.spec import QuerySpec, dump_queries


def unregistered(owner: Any, names: list[str]) -> list[str]:
    """The named queries removed from ``owner``'s registry as one change (Registry.unregister_all: all or nothing),
    their topics retired, their cached answers and registration marks dropped, the queries file saved; the names
    removed. TickPipeline's and the sharded front door's (each then logs, or also queues, the change)."""
    removed = owner.registry.unregister_all(names)
    retire_topics(owner.cache, owner.history, owner.registry, removed)
    gone = [spec.name for spec in removed]
    for name in gone:
        owner.forget_query(name, logged=False)
        owner.marks.removed(name)
    owner.save_queries()
    return gone


def retire_topics(cache: AnswerCache, history: AnswerHistory, registry: Registry, changed: list[QuerySpec]) -> None:
    """The topics of ``changed`` (the specs a registration replaced, or a removed one) that no registered query
    publishes on now are retired (AnswerCache.retire_topics), and the retired topics of which ``history`` keeps no
    answer any more are dropped: what a gap fill or a resuming client can still fetch stays numbered and listed,
    and the seqs kept stay bounded by the registered queries' topics and the history (register/remove churn)."""
    if changed:
        cache.retire_topics(lambda topic: any(spec.publishes_on(topic) for spec in changed), registry.publishes_on)
    cache.drop_retired(lambda topic: history.oldest_seq(topic) is not None)


class QueryChanges:
    """TickPipeline's query changes (a mixin: it changes the pipeline's registry and what holds each query)."""

    engine: Engine
    registry: Registry
    cache: AnswerCache
    flash: FlashQueries
    scores: LiveScores
    adaptation: AnswerAdaptation
    marks: RegistrationMarks
    data: DataDir | None
    history: AnswerHistory

    def register_queries(self, specs: list[QuerySpec]) -> list[QuerySpec]:
        """Add or replace standing queries (all or nothing); a replaced query's old answers are not served. One
        equal to its registered spec is unchanged (Registry.register): its answers, seqs, trigger state and
        adaptation stay, as a restart keeps them. Returns the specs registered afresh (new or replaced)."""
        for spec in specs:  # fail now, not at the first due tick, when the model cannot answer it
            self.flash.compiled(spec)
        earlier = {spec.name: self.registry.current(spec.name) for spec in specs}
        version = self.registry.version
        fresh = self.registry.register(specs)
        replaced = [old for spec in fresh if (old := earlier[spec.name]) is not None]
        retire_topics(self.cache, self.history, self.registry, replaced)
        names = [spec.name for spec in fresh]
        for name in names:
            self.forget_query(name, logged=False)
        self.marks.registered(names, self._committed())
        if self.data is not None:
            self.data.registered_live(names)
        if self.registry.version != version:  # (nothing to save where every spec was registered as it is)
            self.save_queries()
        self._log_forgotten(names)
        return fresh

    def unregister_queries(self, names: list[str]) -> None:
        """Remove the named queries as one change (all or nothing: Registry.unregister_all): one registry version,
        one save of the queries file, however many are named (one a call, each rewriting the whole file, made
        removing a large file's queries quadratic: review397 #7)."""
        self._log_forgotten(unregistered(self, names))

    def _log_forgotten(self, names: list[str]) -> None:
        """The answer log's forget events of a register/unregister, written once the saved queries say it: a kill
        before then leaves the directory as it was before the call (an identical spec re-registered leaves the
        queries file as it was, so only the state's version tells); one after it, answers older than their query's
        version, which a restore drops (answer_log._superseded)."""
        if self.data is not None:
            for name in names:
                self.data.answers.forget_query(name)

    def forget_query(self, name: str, logged: bool = True) -> None:
        """A query replaced or removed: its cached answers must not be served (nor, ``logged``, restored after a
        restart)."""
        self.cache.drop_query(name)
        self.flash.forget_query(name)
        self.scores.forget_query(name)
        self.adaptation.forget_query(name)
        if logged:
            self._log_forgotten([name])

    def save_queries(self) -> None:
        """Keep the registered queries in the data directory (after every register/unregister)."""
        if self.data is not None:
            self.data.save_queries(dump_queries(self.registry.list()), self.registry, self.marks)

    def _compiled_current(self, name: str) -> CompiledQuery | None:
        """``name``'s current spec compiled (what AnswerAdaptation.compile asks); None once it is unregistered."""
        spec = self.registry.current(name)
        return self.flash.compiled(spec) if spec is not None else None

    def _committed(self) -> dict[str, int]:
        """Every stream's committed tick count (what a query registered now starts after)."""
        return {stream: self.engine.progress(stream).ticks for stream in self.engine.scheduler.streams}
