"""FlashQueries: the query layer's side of the engine loop (it implements engine.jobs.QueryPlanner).

While planning a batch the scheduler asks which standing queries are due on the
streams it advances; FlashQueries turns each into a ProbeJob whose logits become
an Answer, cached here and returned by the job, so it comes out of
``Engine.step()`` for the service to publish. On-demand asks go through
``job_for`` with the requester's ticket.

Answering early (queries/speculation.py): a generate query with ``preposition``
is decoded after each batch at idle priority and kept (``ready``), so an ask on a
stream that has not moved is answered at once, and one that has moved starts from
the kept tokens as its draft; a query with a ``gate`` answers an ask from a
confident, fresh cached answer (``gated``) and audits it at idle priority;
greedy decoding drafts tokens by prompt lookup and verifies them in one forward.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.jobs import JobResult, ProbeJob, StreamProgress
from queries.cache import Answer, AnswerCache
from queries.codec import QueryCodec
from queries.probe_answers import CompiledQuery, answer_value, compile_query, decode, next_token
from queries.registry import Registry
from queries.spec import QuerySpec
from queries.speculation import accept_greedy

LOOKUP_CONTEXT = 1024  # the stream's most recent tokens a prompt-lookup draft is searched in

@dataclass
class FlashStats:
    answers: int = 0
    errors: int = 0
    freshness_ns: list[int] = field(default_factory=list)  # tick read off the socket -> answer cached, most recent last
    data_age_ns: list[int] = field(default_factory=list)  # the answered tick's event time (ts) -> answer cached
    drafted: int = 0  # prompt-lookup draft tokens proposed
    draft_accepted: int = 0  # of them, kept by verification
    decode_forwards: int = 0  # generate steps (forwards that decoded)
    prepositioned: int = 0  # generate answers decoded ahead of an ask
    preposition_hits: int = 0  # asks answered by one (the stream had not moved)
    gate_asks: int = 0  # asks on gated queries
    gate_fired: int = 0  # of them, answered from the cache
    gate_audited: int = 0  # gated answers recomputed at idle priority
    gate_agreed: int = 0  # of them, the same answer

    def summary(self) -> dict[str, float | int | None]:
        rate = lambda part, whole: part / whole if whole else None  # noqa: E731
        return {"drafted": self.drafted, "draft_acceptance": rate(self.draft_accepted, self.drafted),
                "decode_forwards": self.decode_forwards, "prepositioned": self.prepositioned,
                "preposition_hits": self.preposition_hits, "gate_asks": self.gate_asks,
                "gate_coverage": rate(self.gate_fired, self.gate_asks), "gate_audited": self.gate_audited,
                "gate_precision": rate(self.gate_agreed, self.gate_audited)}

    def record(self, answer: Answer, arrival_ns: int) -> None:
        self.answers += 1
        if arrival_ns:
            self.freshness_ns.append(answer.answer_ts - arrival_ns)
            del self.freshness_ns[:-10_000]  # bounded window
            # never negative, as each answer's data_age_ms (a tick stamped ahead of the clock is caveated there)
            self.data_age_ns.append(max(0, answer.answer_ts - answer.data_ts))
            del self.data_age_ns[:-10_000]


class FlashQueries:
    def __init__(self, registry: Registry, cache: AnswerCache, codec: QueryCodec, model_id: str) -> None:
        self.registry = registry
        self.cache = cache
        self.codec = codec
        self.model_id = model_id
        self.stats = FlashStats()
        self._compiled: dict[str, CompiledQuery] = {}  # query name -> its registered spec, compiled
        # the stream's committed tokens, for prompt-lookup drafts (the service wires it to the scheduler)
        self.context: Callable[[str], list[int]] = lambda stream: []
        # a standing answer's value -> the one published (the service wires engine/service/adaptation.py):
        # (query, stream, value, tick count, standing) -> value
        self.adapt: Callable[[CompiledQuery, str, dict[str, Any], int, bool], dict[str, Any]] = (
            lambda query, stream, value, version, standing: value)
        self.ready: dict[tuple[str, str], Answer] = {}  # (query, stream) -> generate answer decoded ahead
        self._working: set[tuple[str, str, str]] = set()  # (purpose, query, stream) of idle work queued
        self.owes: Callable[[QuerySpec, StreamProgress], bool] | None = None  # set while a restart answers owed ticks

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
            due = self.registry.due(p.stream, p.ticks, p.event_ts, p.group_end)
            if self.owes is not None:  # a restart answering what the stopped process owed: only that
                due = [spec for spec in due if self.owes(spec, p)]
            for spec in due:
                jobs.append(self.job_for(spec, p.stream))
            if not p.group_end:  # a price move's due point inside a group: what is decoded ahead waits for its end
                continue
            for spec in self.registry.matching(p.stream):  # decoded ahead, unless published right now anyway
                if spec.kind == "generate" and spec.preposition and spec not in due:
                    for job in self._idle_job("preposition", spec, p.stream, self._keep_ready(spec, p.stream)):
                        job.latest = True  # for the next ask: at the stream's newest tick when it runs
                        jobs.append(job)
        return jobs

    def job_for(self, spec: QuerySpec, stream: str, ticket: Any = None, draft_from: list[int] | None = None
                ) -> ProbeJob:
        """The probe work that answers ``spec`` on ``stream``. Its result is the Answer: cached (with the
        topic's next seq) for a standing query; for an ask (``ticket`` set) the asker's alone, seq 0, neither
        cached nor timed, so an ask never changes what subscribers see or the live freshness figures.
        ``draft_from``: tokens of an earlier answer (a generate query's) to draft from first."""

        query_version = self._query_version(spec)

        def record_answer(value: dict[str, Any], progress: StreamProgress) -> JobResult:
            value = self.adapt(self.compiled(spec), stream, value, progress.ticks, ticket is None)
            fields = (spec.name, stream, spec.topic_for(stream), value, progress.ticks, progress.event_ts,
                      self.model_id, query_version)
            if ticket is not None:
                return JobResult(self.cache.unpublished(*fields))
            answer = self.cache.put(*fields)
            self.stats.record(answer, progress.arrival_ns)
            return JobResult(answer)

        return self._job(spec, stream, record_answer, ticket=ticket, idle=ticket is None, draft_from=draft_from)

    def _query_version(self, spec: QuerySpec) -> int:
        """The registry version ``spec`` was registered at; 0 for a spec asked ad hoc (or one since replaced)."""
        return self.registry.query_version(spec.name) if self.registry.current(spec.name) is spec else 0

    def _job(self, spec: QuerySpec, stream: str,
             record_answer: Callable[[dict[str, Any], StreamProgress], JobResult], ticket: Any, idle: bool,
             draft_from: list[int] | None = None) -> ProbeJob:
        query = self.compiled(spec)
        if spec.kind == "surprise":  # computed by the ingest forward itself: no probe
            return ProbeJob(stream, [], lambda _, progress: record_answer({"nll": progress.surprise}, progress),
                            ticket=ticket)
        if spec.kind == "generate":
            return self._generate_job(query, stream, record_answer, [], idle=idle, ticket=ticket,
                                      draft_from=draft_from)
        return ProbeJob(stream, query.probes,
                        lambda logits, progress: record_answer(answer_value(query, logits), progress),
                        logits=query.logits, ticket=ticket, overlap=query.overlap)

    def _generate_job(self, query: CompiledQuery, stream: str, record_answer: Callable[..., JobResult],
                      generated: list[int], idle: bool, ticket: Any, generator: torch.Generator | None = None,
                      draft_from: list[int] | None = None, first_prob: float | None = None) -> ProbeJob:
        """One step per forward: question + tokens so far (+ a draft), re-evaluated on the committed prefix
        (generations are short, and the session is never touched). Greedy steps verify a prompt-lookup draft
        in the same forward, so a step may add several tokens; the output is plain greedy decoding's."""
        spec = query.spec
        draft = self._draft(query, stream, generated, draft_from)

        def decode_step(logits: list[torch.Tensor], progress: StreamProgress) -> JobResult:
            nonlocal generator
            rows = logits[0]  # (len(draft) + 1, vocab): before each draft token, and after the last
            if generator is None and spec.temperature:  # the first step: seeded by where the answer stands
                generator = torch.Generator().manual_seed(sampling_seed(spec.seed, stream, progress.ticks))
            self.stats.decode_forwards += 1
            if draft:
                new, prob = accept_greedy(rows, draft)
                self.stats.drafted += len(draft)
                self.stats.draft_accepted += len(new) - 1
            else:
                new = [next_token(rows, spec.temperature or 0.0, generator)]
                prob = float(torch.softmax(rows[-1].float(), dim=-1)[new[0]])
            first = first_prob if generated else prob
            tokens = generated
            for token in new:  # one at a time, as plain decoding would stop
                if token in self.codec.end_tokens:  # the model's end of sequence: the answer is complete
                    return record_answer({"text": decode(self.codec, tokens), "tokens": tokens,
                                          "first_prob": first}, progress)
                tokens = tokens + [token]
                text = decode(self.codec, tokens)
                stop = next((s for s in spec.stop or () if s in text), None)
                if stop is not None or len(tokens) >= (spec.max_tokens or 16):
                    return record_answer({"text": text[: text.index(stop)] if stop else text, "tokens": tokens,
                                          "first_prob": first}, progress)
            return JobResult(follow_up=self._generate_job(query, stream, record_answer, tokens, idle, ticket,
                                                          generator, draft_from, first))

        return ProbeJob(stream, [list(query.question) + generated + draft], decode_step, logits=len(draft) + 1,
                        idle=idle, ticket=ticket, overlap=query.overlap)

    def _draft(self, query: CompiledQuery, stream: str, generated: list[int], draft_from: list[int] | None
               ) -> list[int]:
        """Draft tokens for a greedy step: the rest of an earlier answer while it still agrees, else a prompt
        lookup in the stream's recent tokens, the question and the answer so far. [] when drafting is off."""
        spec = query.spec
        if spec.temperature or spec.lookup is None:
            return []
        room = (spec.max_tokens or 16) - len(generated) - 1  # the verified step adds one token of its own
        if room <= 0:
            return []
        if draft_from and draft_from[: len(generated)] == generated and len(draft_from) > len(generated):
            return draft_from[len(generated) : len(generated) + min(room, spec.lookup.draft)]
        context = self.context(stream)  # (less the last `overlap` tokens: the question's first stand in for them)
        text = context[max(0, len(context) - query.overlap - LOOKUP_CONTEXT):len(context) - query.overlap] \
            + list(query.question) + generated
        return spec.lookup.propose(text, room)

    # -- answering before the work is done ------------------------------------------------------------

    def _keep_ready(self, spec: QuerySpec, stream: str) -> Callable[[dict[str, Any], StreamProgress], JobResult]:
        def keep(value: dict[str, Any], progress: StreamProgress) -> JobResult:
            self._working.discard(("preposition", spec.name, stream))
            if self.registry.current(spec.name) is spec:
                self.ready[(spec.name, stream)] = self.cache.unpublished(
                    spec.name, stream, spec.topic_for(stream), value, progress.ticks, progress.event_ts, self.model_id,
                    self._query_version(spec))
                self.stats.prepositioned += 1
            return JobResult()

        return keep

    def _idle_job(self, purpose: str, spec: QuerySpec, stream: str,
                  record_answer: Callable[[dict[str, Any], StreamProgress], JobResult]) -> list[ProbeJob]:
        """At most one idle job per (purpose, query, stream) in flight."""
        key = (purpose, spec.name, stream)
        if key in self._working:
            return []
        self._working.add(key)
        job = self._job(spec, stream, record_answer, ticket=None, idle=True)
        job.idle = True
        return [job]

    def answer_early(self, spec: QuerySpec, stream: str, ticks: int, max_stale_ticks: int | None = None
                     ) -> tuple[Answer | None, str | None, list[ProbeJob]]:
        """An ask's answer without a forward, if one may be given: (answer, how, idle jobs to queue). ``how`` is
        "prepositioned" (decoded ahead at the stream's current tick: what computing it now gives) or "gated"
        (confident and fresh enough). The asker's ``max_stale_ticks`` bounds a gated answer's age before the
        gate's own does (the tighter of the two); an ask without one is computed, never gated (review381 #2)."""
        ready = self.ready.get((spec.name, stream))
        if spec.kind == "generate" and ready is not None and ready.version == ticks:
            self.stats.preposition_hits += 1
            return ready, "prepositioned", []
        if spec.gate is None or max_stale_ticks is None:
            return None, None, []
        self.stats.gate_asks += 1
        cached = self.cache.get(spec.name, stream) or ready
        if (cached is None or cached.stale_ticks(ticks) > max_stale_ticks
                or not spec.gate.fires(cached.value, cached.stale_ticks(ticks))):
            return None, None, []
        self.stats.gate_fired += 1
        audits = self._idle_job("audit", spec, stream, self._audit(spec, stream, cached)) if spec.gate.audit else []
        return cached, "gated", audits

    def draft_for(self, spec: QuerySpec, stream: str) -> list[int] | None:
        """An ask that cannot be answered early drafts from the answer decoded ahead, if any."""
        ready = self.ready.get((spec.name, stream))
        return list(ready.value["tokens"]) if ready is not None and spec.kind == "generate" else None

    def _audit(self, spec: QuerySpec, stream: str, gated: Answer) -> Callable[[dict[str, Any], StreamProgress],
                                                                                JobResult]:
        def compare(value: dict[str, Any], progress: StreamProgress) -> JobResult:
            self._working.discard(("audit", spec.name, stream))
            self.stats.gate_audited += 1
            self.stats.gate_agreed += same_answer(gated.value, value)
            return JobResult()

        return compare

    def drop_stream(self, stream: str) -> None:
        for key in [k for k in self.ready if k[1] == stream]:
            del self.ready[key]

    def forget_query(self, name: str) -> None:
        for key in [k for k in self.ready if k[0] == name]:
            del self.ready[key]

    def freshness_ms(self) -> dict[str, float]:
        """From when the engine read a tick off its ingest socket to its answer cached (time queued in the socket
        before that is not in it: lag_s shows it), over the recent answers."""
        return _percentiles_ms(self.stats.freshness_ns)

    def data_age_ms(self) -> dict[str, float]:
        """From the answered tick's own ts to its answer cached: for a feed that stamps ticks with the wall clock as
        it makes them, the whole delay, time on the wire and in the socket's queue included."""
        return _percentiles_ms(self.stats.data_age_ns)


def _percentiles_ms(samples_ns: list[int]) -> dict[str, float]:
    samples = sorted(samples_ns)
    if not samples:
        return {}
    pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))] / 1e6  # noqa: E731
    return {"p50": pick(0.50), "p99": pick(0.99)}


def same_answer(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two answers of one query say the same: the top label, or the generated text."""
    if "probs" in a and "probs" in b:
        return max(a["probs"], key=a["probs"].get) == max(b["probs"], key=b["probs"].get)
    return a.get("text") == b.get("text")


def sampling_seed(seed: int | None, stream: str, ticks: int) -> int:
    """The seed of one sampled answer (``temperature > 0``): the query's ``seed`` (0 when none) with the stream and
    the tick count it answers, so answers vary from tick to tick and stream to stream while a backtest, a replay or
    the same ask at the same tick gives the same sample."""
    digest = hashlib.blake2b(f"{seed or 0}:{stream}:{ticks}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)
