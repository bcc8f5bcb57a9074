"""FlashQueries: the query layer's side of the engine loop (it implements engine.engine.QueryPlanner).

After each batch the engine asks which standing queries are due on the streams
it advanced; FlashQueries turns each into a ProbeJob whose logits become an
Answer, cached and handed to ``publish`` (the server's PUB socket, a backtest's
writer). On-demand asks go through ``job_for`` with a callback.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.engine import ProbeJob
from engine.scheduler import StreamProgress
from queries.cache import Answer, AnswerCache
from queries.evaluate import CompiledQuery, answer_value, compile_query, decode, next_token
from queries.registry import Registry
from queries.spec import QuerySpec

AnswerCallback = Callable[[Answer], None]


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
    def __init__(self, registry: Registry, cache: AnswerCache, codec: Any, model_id: str,
                 publish: AnswerCallback | None = None) -> None:
        self.registry = registry
        self.cache = cache
        self.codec = codec
        self.model_id = model_id
        self.publish = publish
        self.stats = FlashStats()
        self._compiled: dict[QuerySpec, CompiledQuery] = {}

    def compiled(self, spec: QuerySpec) -> CompiledQuery:
        """Compile once per spec object (a re-registered query is a new spec)."""
        query = self._compiled.get(spec)
        if query is None:
            query = self._compiled[spec] = compile_query(spec, self.codec)
        return query

    def due(self, progress: list[StreamProgress]) -> list[ProbeJob]:
        jobs = []
        for p in progress:
            for spec in self.registry.due(p.stream, p.ticks, p.event_ts):
                jobs.append(self.job_for(spec, p.stream))
        return jobs

    def job_for(self, spec: QuerySpec, stream: str, on_answer: AnswerCallback | None = None,
                on_error: Callable[[str], None] | None = None) -> ProbeJob:
        """The probe work that answers ``spec`` on ``stream``; the answer is cached, published, passed on."""
        query = self.compiled(spec)

        def fail(reason: str) -> None:
            self.stats.errors += 1
            if on_error:
                on_error(reason)

        def finish(value: dict[str, Any], progress: StreamProgress) -> None:
            answer = self.cache.put(spec.name, stream, spec.topic_for(stream), value, progress.ticks,
                                    progress.event_ts, self.model_id)
            self.stats.record(answer, progress.arrival_ns)
            if self.publish:
                self.publish(answer)
            if on_answer:
                on_answer(answer)

        if spec.kind == "surprise":  # computed by the ingest forward itself: no probe
            def done_surprise(_: list[torch.Tensor], progress: StreamProgress) -> None:
                finish({"nll": progress.surprise}, progress)
            return ProbeJob(stream, [], done_surprise, fail=fail)
        if spec.kind == "generate":
            return self._generate_job(query, stream, finish, fail, [], on_answer is None)

        def done(logits: list[torch.Tensor], progress: StreamProgress) -> None:
            finish(answer_value(query, logits), progress)
        return ProbeJob(stream, query.probes, done, logits=query.logits, fail=fail)

    def _generate_job(self, query: CompiledQuery, stream: str, finish: Callable, fail: Callable,
                      generated: list[int], idle: bool, generator: torch.Generator | None = None) -> ProbeJob:
        """One decode step per forward: question + tokens so far, re-evaluated on the committed prefix
        (generations are short, and the session is never touched)."""
        spec = query.spec
        if generator is None and spec.temperature:
            generator = torch.Generator().manual_seed(spec.seed or 0)

        def done(logits: list[torch.Tensor], progress: StreamProgress) -> ProbeJob | None:
            tokens = generated + [next_token(logits[0], spec.temperature or 0.0, generator)]
            text = decode(self.codec, tokens)
            stop = next((s for s in spec.stop or () if s in text), None)
            if stop is not None or len(tokens) >= (spec.max_tokens or 16):
                finish({"text": text[: text.index(stop)] if stop else text, "tokens": tokens}, progress)
                return None
            return self._generate_job(query, stream, finish, fail, tokens, idle, generator)

        return ProbeJob(stream, [list(query.question) + generated], done, logits="last", idle=idle, fail=fail)

    def freshness_ms(self) -> dict[str, float]:
        samples = sorted(self.stats.freshness_ns)
        if not samples:
            return {}
        pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))] / 1e6  # noqa: E731
        return {"p50": pick(0.50), "p99": pick(0.99)}
