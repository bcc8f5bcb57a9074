"""Shard: one engine of a sharded service, run as a Ray actor (ShardedPipeline starts N of them).

A shard holds a model copy, an Engine (KV pool, scheduler) and the query planner
(FlashQueries with its own Registry copy and AnswerCache) for the streams that
rendezvous hashing gives it. It never sees the ZeroMQ wire, the logs or a raw
tick: the front door (the server's process) decodes, validates, encodes and
logs every item, and sends the shard already-encoded items
``(stream, tokens, ts, ticks, mark)`` (shard_items.py; the mark, a price a shard cannot read from tokens, is what
price-move triggers watch). One call does one round of work:

    step(call)  registry ops (and streams the front door forgot) first, then the items, then the asks (each
                answered once the ticks accepted before it are computed), then engine steps until idle or
                ``step_ms`` has passed; returns the standing answers (wire dicts), the asks' replies, the
                streams' progress and the backlog
    restore()   a fresh engine rebuilt from logged items (Scheduler.restore + Engine.rebuild), trigger
                state and latest answers from the front door's answer log, then the answers owed

The seqs a shard's cache hands out are its own: the front door stamps every
published answer with the topic's next seq (one owner, gapless across shards
and shard restarts). A shard that Ray restarted has an empty engine and says so
(``needs_restore``) until the front door restores it.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections import OrderedDict
from typing import Any, NamedTuple

import torch

from engine.jobs import JobOutcome
from engine.memory_limit import resident_bytes
from engine.engine import Engine
from engine.quoting import quoted
from engine.runner import ModelRunner
from engine.scheduler import AdmissionRefused, UnknownStream
from engine.service.config import LogSection, ServiceConfig
from engine.service.control_requests import refusal
from engine.service.expired_streams import EXPIRE_PER_TURN
from engine.service.owed_answers import answer_tail, owed_jobs
from engine.service.registration_marks import RegistrationMarks
from engine.service.heap_memory import freeze_heap, thaw_heap
from engine.service.kv_thrash import kv_cells_wanted
from engine.service.model_and_codec import load_model_and_codec
from engine.service.move_marks import watch_moves
from engine.service.rejections import MAX_REFUSED_STREAMS_KEPT, no_accepted_tick
from engine.service.shard_items import LiveItem, unpack_items, unpack_tail
from queries.cache import Answer, AnswerCache
from queries.flash import FlashQueries
from queries.limits import QueryLimits
from queries.probe_answers import compile_query
from queries.registry import Registry
from queries.spec import QuerySpec

class GroupEnd(NamedTuple):
    """In a shard's items: the end of one ingest message's tick group on these streams, where a single engine
    closes it (TickPipeline._counted), so triggers fire on the same groups whatever the shard count."""

    streams: tuple[str, ...]


EXPIRE_EVERY_S = 1.0


class Shard:
    def __init__(self, config: ServiceConfig, name: str) -> None:
        self.name = name
        self.config = dataclasses.replace(config, log=LogSection(enabled=False), queries=None)
        if config.model.threads is not None:
            torch.set_num_threads(config.model.threads)
        model, self.codec = load_model_and_codec(config)
        self.runner = ModelRunner(model, config.kv.spec(config.shards.count),  # the default pool: split among shards
                                  cuda_graphs=None if config.model.cuda_graphs else False)
        self.restored = False  # a (re)started actor serves nothing until the front door restores it
        self.calls = 0
        self.refused_items = 0  # items the front door accepted that this engine's limits refused
        self._heap_frozen = False  # whether restore froze the heap (heap_memory.freeze_heap), for the next reset
        self._reset()

    def _reset(self) -> None:
        """A fresh registry, cache, planner and engine (the runner, its model and KV tensor, are kept)."""
        limits = self.config.limits
        self.registry = Registry(self.codec.questions, QueryLimits(
            limits.max_yaml_bytes, limits.max_yaml_nodes, limits.max_queries, limits.max_topic_bytes),
            answerable=lambda spec: compile_query(spec, self.codec))
        self.cache = AnswerCache()
        # the streams none of whose items this engine took (name -> [ticks refused, the first error]): an ask on
        # one says so, where "has sent no data" would send the operator to a feed that did send; bounded
        self.refused_streams: OrderedDict[str, list] = OrderedDict()
        self._refused_now: dict[str, list] = {}  # refused by the call being served: its reply tells the front door
        self.flash = FlashQueries(self.registry, self.cache, self.codec, self.config.model.model_id)
        self.engine = Engine(self.runner, self.config.scheduler, self.flash)
        self.flash.context = lambda stream: self.engine.scheduler.streams[stream].session.tokens  # lookup drafts
        self._next_expire = time.monotonic() + EXPIRE_EVERY_S

    def limits(self) -> dict[str, Any]:
        """What the front door's encoders and admission checks need to know of this engine."""
        scheduler = self.engine.scheduler
        return {"vocab_size": self.runner.config.vocab_size, "max_chunk_tokens": scheduler.max_chunk_tokens,
                "max_streams_admitted": scheduler.max_streams_admitted, "window": scheduler.window,
                "max_positions": self.engine.blocks.max_positions,
                "kv_cells": scheduler.pool.capacity_cells, "kv_cell_bytes": self.runner.kv.cell_bytes,
                "pid": os.getpid()}

    # -- restore -----------------------------------------------------------------------------------

    def restore(self, queries_yaml: str, latest: list[dict[str, Any]], logged: dict[str, Any],
                marks: dict[str, dict[str, int]] | None = None, reset: bool = True,
                changed: tuple[str, ...] = ()) -> dict[str, Any]:
        """Rebuild streams from their logged items (all of this shard's when ``reset``; else streams added to a
        live shard: a move), with trigger state from ``latest`` (the front door's latest answers of those
        streams), then compute the answers owed. ``logged`` (pack_logged): the items up to each stream's
        answered point, booked; where retention dropped a stream's first ticks, its count then; and the tail
        past the answered points, computed a tick group at a time as the live run would have
        (owed_answers.answer_tail: ``changed`` are the queries the config changed at this start)."""
        started, started_ns = time.perf_counter(), time.time_ns()
        if reset:
            thaw_heap(self._heap_frozen)  # the engine being replaced is collected as usual
            self._heap_frozen = False
            self._reset()
            if queries_yaml:
                self.registry.register(queries_yaml, "front door", restoring=True)
        answers = [Answer(**a) for a in latest]
        self.cache.restore(answers, {})
        for answer in answers:
            self.registry.restore_fired(answer.query, answer.stream, answer.version, answer.data_ts)
        scheduler = self.engine.scheduler
        for stream, (ticks, last_ts) in logged["starts"].items():
            problem = scheduler.start_at(stream, ticks, last_ts)
            if problem is not None:  # the ticks retention dropped: refused as one engine refuses them (its items too)
                self._refused(stream, ticks, problem)
        items, refused = logged["items"], 0
        unpacked = list(unpack_items(items))
        # expired live and silent since: each is expired again right after its own items (a stream's items come
        # together), so its context is kept as live and its slot is free for the streams after it, as one engine's
        # replay admits in log order (a restart under a lowered scheduler.max_streams)
        expired = set(logged.get("expired", ()))
        last_item = {stream: i for i, (stream, *_) in enumerate(unpacked)}
        for i, (stream, tokens, ts, ticks, mark) in enumerate(unpacked):
            try:
                scheduler.restore(stream, tokens, ts, ticks)
            except AdmissionRefused as e:  # the limits changed since it was logged: counted, never fatal
                refused += 1
                self._refused(stream, ticks, str(e))
                continue
            watch_moves(self.registry, scheduler, stream, ts, mark)  # booked: the move references alone
            if stream in expired and last_item[stream] == i and not scheduler.waiting_on(stream):
                scheduler.expire(stream)
        forwards = self.engine.rebuild()
        restored_marks = RegistrationMarks.from_marks(marks or {})
        tail, tail_marks = unpack_tail(logged["tail"])
        outcomes, fed, tail_refused = answer_tail(
            self.engine, self.flash, self.registry, self.cache, restored_marks, tail, set(changed),
            step=self.engine.step,
            accepted=lambda item: watch_moves(self.registry, scheduler, item.stream, item.ts, tail_marks[id(item)]),
            refused_item=lambda item, why: self._refused(item.stream, item.ticks, why))
        streams = (set(items["streams"]) | set(logged["starts"]) | fed) & set(scheduler.streams)
        outcomes += self._answers_owed(streams, restored_marks)
        self.restored = True
        # the shard is up: no collection walks its libraries, model and streams again (a move's restore, reset=False,
        # adds the moved streams to its own freeze)
        self._heap_frozen = freeze_heap(ours=self._heap_frozen)
        progress = {stream: self.engine.progress(stream).ticks for stream in streams}
        restored = {"streams": len(streams), "items": len(items["ts"]) + len(logged["tail"]["ts"]),
                    "refused": refused + tail_refused, "forwards": forwards, "s": time.perf_counter() - started,
                    "started_ns": started_ns}
        return {**self._reply(outcomes, progress), "restored": restored}

    def _answers_owed(self, streams: set[str], marks: RegistrationMarks) -> list[JobOutcome]:
        for stream in streams:
            for job in owed_jobs(self.registry, self.cache, marks, self.flash, stream, self.engine.progress(stream)):
                self.engine.ask(job)
        return self.engine.run_until_idle()

    def drop(self, streams: list[str]) -> None:
        """Streams that moved to another shard: forgotten here (their KV back to the pool)."""
        for stream in streams:
            state = self.engine.scheduler.streams.pop(stream, None)
            if state is not None:
                self.engine.blocks.evict(state.session)
            self.registry.drop_stream(stream)
            self.cache.drop_stream(stream)
            self.flash.drop_stream(stream)
            self.refused_streams.pop(stream, None)

    def _forget(self, stream: str) -> None:
        """The front door forgot ``stream`` at an operator's request (its `forget`, in the tick log there): its session,
        what it had not computed (a restart drops that too, split_log) and its trigger state go, the event-time grid
        included (its next tick may be older), as TickPipeline.forget_stream drops them. No ask waits on it (the
        front door refuses the op while one does); the standing queries' probes that do go with it."""
        self.engine.scheduler.drop(stream)
        self.registry.drop_stream(stream, keep_grid=False)
        self.cache.drop_stream(stream)
        self.flash.drop_stream(stream)
        self.refused_streams.pop(stream, None)
        self._refused_now.pop(stream, None)

    # -- the work loop -----------------------------------------------------------------------------

    def step(self, items: list[LiveItem | GroupEnd], ops: list[tuple], step_ms: float, want_stats: bool,
             unread_s: float = 0.0) -> dict[str, Any]:
        """Apply registry ops, queue ``items``, take the asks, then step the engine until idle or ``step_ms``;
        streams idle past scheduler.stream_idle_s are expired on the way (every EXPIRE_EVERY_S), past it plus
        ``unread_s`` (how long the front door's ingest queue has held unread messages, which may hold their next
        ticks: stream_removal.StreamRemoval.expire_idle)."""
        if not self.restored:
            return {"needs_restore": True}
        self.calls += 1
        outcomes: list[JobOutcome] = []
        for op in ops:
            if op[0] != "ask":
                outcomes += self._apply(op)
        for item in items:
            if isinstance(item, GroupEnd):
                self.engine.close_groups(item.streams)
                continue
            stream, tokens, ts, ticks, accepted_ns, mark = item
            try:  # admission was checked by the front door; freshness counts from when it accepted the item
                self.engine.submit(stream, tokens, ts, ticks, arrival_ns=accepted_ns)
                watch_moves(self.registry, self.engine.scheduler, stream, ts, mark)
                self.refused_streams.pop(stream, None)  # (taken now: an ask on it is answered)
                self._refused_now.pop(stream, None)
            except AdmissionRefused as e:  # only when the limits changed since the stream was logged: counted
                self.refused_items += 1
                self._refused(stream, ticks, str(e))
        for op in ops:  # after the items: an ask waits for the ticks accepted before it (Scheduler.ask)
            if op[0] == "ask":
                outcomes += self._apply(op)
        deadline = time.perf_counter() + step_ms / 1000
        progress: dict[str, int] = {}
        while (report := self.engine.step()) is not None:
            outcomes += report.outcomes
            progress.update((p.stream, p.ticks) for p in report.advanced)
            if time.perf_counter() >= deadline:
                break
        reply = self._reply(outcomes, progress)
        if time.monotonic() >= self._next_expire:
            self._next_expire = time.monotonic() + EXPIRE_EVERY_S
            reply["expired"] = self._expire(time.time_ns() - int(unread_s * 1e9))
        if want_stats:
            reply["stats"] = self.stats()
        return reply

    def _apply(self, op: tuple) -> list[JobOutcome]:
        kind = op[0]
        if kind == "register":  # already validated by the front door; applied in the same order
            for spec in self.registry.register(op[1], "front door", restoring=True):
                self.cache.drop_query(spec.name)
                self.flash.forget_query(spec.name)
        elif kind == "unregister":  # the names the front door removed as one change
            held = [name for name in op[1] if name in self.registry]
            if held:
                self.registry.unregister_all(held)
            for name in op[1]:
                self.cache.drop_query(name)
                self.flash.forget_query(name)
        elif kind == "forget":
            self._forget(op[1])
        elif kind == "ask":
            _, ticket, stream, spec, bound = op
            try:
                spec = self.registry.get(spec) if isinstance(spec, str) else QuerySpec.from_dict(spec)
                return self._ask(spec, stream, ticket, bound)
            except UnknownStream:  # the front door routed it here: one engine's reason (ControlOps._no_session)
                held = self.refused_streams.get(stream)
                # why: the refusals this shard holds (the front door may still hold the stream: more of it waits to
                # come here), else none, and the front door says it from what it knows of the stream (expired, or
                # never seen with the close names)
                return [JobOutcome(RemoteJob(ticket, reason="unknown_stream"),
                                   error=no_accepted_tick(stream, *held) if held else None)]
            except (ValueError, LookupError) as e:  # as one engine refuses it: reason and words as they are
                reason, error = refusal(e)
                return [JobOutcome(RemoteJob(ticket, reason=reason), error=error)]
        else:
            raise ValueError(f"unknown shard op {quoted(kind)}")
        return []

    def _refused(self, stream: str, ticks: int, why: str) -> None:
        """``ticks`` of ``stream`` that this engine's admission refused (``why``): remembered while it holds none
        of the stream, the most recent last."""
        if stream in self.engine.scheduler.streams:
            return  # (it holds some: an ask is answered from those)
        held = self.refused_streams.pop(stream, None) or [0, f"stream_refused: {why}"]
        held[0] += ticks
        self.refused_streams[stream] = held
        now = self._refused_now.setdefault(stream, [0, held[1]])
        now[0] += ticks
        if len(self.refused_streams) > MAX_REFUSED_STREAMS_KEPT:
            self.refused_streams.popitem(last=False)

    def _ask(self, spec: QuerySpec, stream: str, ticket: Any, bound: tuple[int, int] | None) -> list[JobOutcome]:
        """An ask: answered at once when FlashQueries may answer early (decoded ahead, or gated), else queued.
        ``bound``: the asker's max_stale_ticks and the ticks of the stream the front door has accepted (None:
        computed, never gated)."""
        self.flash.compiled(spec)  # a question the model cannot answer is said first, as one engine's ask says it
        ticks = self.engine.progress(stream).ticks  # raises UnknownStream
        max_stale = None
        if bound is not None:
            max_stale, accepted = bound
            ticks = max(ticks, accepted)
        early, how, audits = self.flash.answer_early(spec, stream, ticks, max_stale)
        for job in audits:
            self.engine.ask(job)
        if early is not None:
            return [JobOutcome(RemoteJob(ticket, how), early)]
        self.engine.ask(self.flash.job_for(spec, stream, ticket=ticket, draft_from=self.flash.draft_for(spec, stream)))
        return []

    def _reply(self, outcomes: list[JobOutcome], progress: dict[str, int]) -> dict[str, Any]:
        answers, replies, errors = [], [], 0
        for outcome in outcomes:
            ticket = outcome.job.ticket
            if ticket is not None:
                replies.append((ticket, outcome.answer.to_wire() if outcome.answer is not None else None,
                                outcome.error, getattr(outcome.job, "early", None), outcome.context,
                                getattr(outcome.job, "reason", None)))
            elif outcome.answer is not None:
                answers.append(outcome.answer.to_wire())
            elif outcome.error is not None:  # (idle work such as decoding ahead finishes with neither)
                errors += 1
        self.flash.stats.errors += errors
        scheduler = self.engine.scheduler
        # streams this call refused that no session holds: the front door forgets them (its `streams` op and its
        # admission count then agree with this engine), and says them refused, as one engine does
        refused = {s: held for s, held in self._refused_now.items() if s not in scheduler.streams}
        self._refused_now = {}
        return {"answers": answers, "replies": replies, "pending_tokens": scheduler.pending_tokens(),
                "busy": self.engine.busy, "progress": progress, **({"refused": refused} if refused else {})}

    def _expire(self, now_ns: int) -> list[str]:
        expired = self.engine.scheduler.expire_idle(now_ns, limit=EXPIRE_PER_TURN)
        for stream in expired:  # (its trigger state stays with its kept context: engine/kept_contexts.py)
            self.cache.drop_stream(stream)
            self.flash.drop_stream(stream)
        return expired

    def stats(self) -> dict[str, Any]:
        scheduler = self.engine.scheduler
        return {"shard": self.name, "pid": os.getpid(), "calls": self.calls, "cpu_s": time.process_time(),
                "resident_memory_bytes": resident_bytes(),  # (the front door's RSS leaves this out: review380 #4)
                "refused_items": self.refused_items,
                "speculation": {k: v for k, v in vars(self.flash.stats).items() if not k.endswith("_ns")},
                "answers_out": self.flash.stats.answers, "query_errors": self.flash.stats.errors,
                "freshness_ms": self.flash.freshness_ms(), "data_age_ms": self.flash.data_age_ms(),
                "pending_tokens": scheduler.pending_tokens(), **scheduler.kv_summary(), **self.runner.kv.summary(),
                # (the front door's `KV thrash` line sizes kv.cells, per shard, on the shard that wants most)
                "kv_cells_wanted": kv_cells_wanted(scheduler.streams.values(), scheduler.window,
                                                   self.config.kv.block_size),
                "scheduler": vars(scheduler.stats), "runner": vars(self.runner.stats)}



@dataclasses.dataclass(frozen=True)
class RemoteJob:
    """A job that ran on a shard, as the server sees its outcome: only the ticket travels back (None: a
    standing query's answer, to publish; else the control request waiting for it)."""

    ticket: Any
    early: str | None = None  # an ask answered without a forward: "prepositioned" or "gated"
    context: dict[str, int] | None = None  # what a computed ask's answer attended (JobOutcome.context)
    # an error's wire reason, where not ask_failed: unknown_stream (the shard holds nothing of the stream), or the
    # one an engine refuses the ask with (bad_request, unknown_query: control_requests.refusal), its error as is
    reason: str | None = None
    stream: str | None = None  # the stream asked (set by the front door)

