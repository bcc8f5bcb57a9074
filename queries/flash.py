"""FlashQueries: the query layer's side of the engine loop (it implements engine.jobs.QueryPlanner).

While planning a batch the scheduler asks which standing queries are due on the
streams it advances; FlashQueries turns each into a ProbeJob whose logits become
an Answer, cached here and returned by the job, so it comes out of
``Engine.step()`` for the service to publish. On-demand asks go through
``job_for`` with the requester's ticket.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.jobs import JobResult, ProbeJob, StreamProgress
from queries.cache import Answer, AnswerCache
from queries.codec import QueryCodec
from queries.evaluate import CompiledQuery, answer_value, compile_query, decode, next_token
from queries.registry import Registry
from queries.spec import QuerySpec

@dataclass
class FlashStats:
    answers: int = 0
    errors: int = 0
    freshness_ns: list[int] = field(default_factory=list)  # tick arrival -> answer cached, most recent first

    def record(self, answer: Answer, arrival_ns: int) -> None:
        self.answers += 1
        if arrival_ns:
            self.freshness_ns.append(answer.answer_ts - arrival_ns)
            del self.freshness_ns[:-10_000]  # bounded window


class FlashQueries:
    def __init__(self, registry: Registry, cache: AnswerCache, codec: QueryCodec, model_id: str) -> None:
        self.registry = registry
        self.cache = cache
        self.codec = codec
        self.model_id = model_id
        self.stats = FlashStats()
        self._compiled: dict[str, CompiledQuery] = {}  # query name -> its registered spec, compiled

    def compiled(self, spec: QuerySpec) -> CompiledQuery:
        """The spec resolved against the codec. A registered spec is compiled once (a re-registered query is a
        new spec object and replaces its entry); any other (an ad-hoc ask, a registration being checked) each
        time, so this cache never holds more than the registry does."""
        query = self._compiled.get(spec.name)
        if query is not None and query.spec is spec:
            return query
        query = compile_query(spec, self.codec)
        if self.registry.current(spec.name) is spec:
            if len(self._compiled) >= len(self.registry):  # forget removed queries and replaced specs
                self._compiled = {n: q for n, q in self._compiled.items() if self.registry.current(n) is q.spec}
            self._compiled[spec.name] = query
        return query

    def due(self, progress: list[StreamProgress]) -> list[ProbeJob]:
        jobs = []
        for p in progress:
            for spec in self.registry.due(p.stream, p.ticks, p.event_ts):
                jobs.append(self.job_for(spec, p.stream))
        return jobs

    def job_for(self, spec: QuerySpec, stream: str, ticket: Any = None) -> ProbeJob:
        """The probe work that answers ``spec`` on ``stream``. Its result is the Answer: cached (with the
        topic's next seq) for a standing query; for an ask (``ticket`` set) the asker's alone, seq 0, neither
        cached nor timed, so an ask never changes what subscribers see or the live freshness figures."""
        query = self.compiled(spec)

        def finish(value: dict[str, Any], progress: StreamProgress) -> JobResult:
            fields = (spec.name, stream, spec.topic_for(stream), value, progress.ticks, progress.event_ts,
                      self.model_id)
            if ticket is not None:
                return JobResult(self.cache.unpublished(*fields))
            answer = self.cache.put(*fields)
            self.stats.record(answer, progress.arrival_ns)
            return JobResult(answer)

        if spec.kind == "surprise":  # computed by the ingest forward itself: no probe
            return ProbeJob(stream, [], lambda _, progress: finish({"nll": progress.surprise}, progress),
                            ticket=ticket)
        if spec.kind == "generate":
            return self._generate_job(query, stream, finish, [], idle=ticket is None, ticket=ticket)
        return ProbeJob(stream, query.probes, lambda logits, progress: finish(answer_value(query, logits), progress),
                        logits=query.logits, ticket=ticket)

    def _generate_job(self, query: CompiledQuery, stream: str, finish: Callable[..., JobResult],
                      generated: list[int], idle: bool, ticket: Any, generator: torch.Generator | None = None
                      ) -> ProbeJob:
        """One decode step per forward: question + tokens so far, re-evaluated on the committed prefix
        (generations are short, and the session is never touched)."""
        spec = query.spec
        if generator is None and spec.temperature:
            generator = torch.Generator().manual_seed(spec.seed or 0)

        def done(logits: list[torch.Tensor], progress: StreamProgress) -> JobResult:
            tokens = generated + [next_token(logits[0], spec.temperature or 0.0, generator)]
            text = decode(self.codec, tokens)
            stop = next((s for s in spec.stop or () if s in text), None)
            if stop is not None or len(tokens) >= (spec.max_tokens or 16):
                return finish({"text": text[: text.index(stop)] if stop else text, "tokens": tokens}, progress)
            return JobResult(follow_up=self._generate_job(query, stream, finish, tokens, idle, ticket, generator))

        return ProbeJob(stream, [list(query.question) + generated], done, logits="last", idle=idle, ticket=ticket)

    def freshness_ms(self) -> dict[str, float]:
        samples = sorted(self.stats.freshness_ns)
        if not samples:
            return {}
        pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))] / 1e6  # noqa: E731
        return {"p50": pick(0.50), "p99": pick(0.99)}
