"""TickPipeline: ticks in -> validated, tokenized per stream -> the engine; each step's answers returned.

The service glue shared by the ZeroMQ server and the in-process backtest, so
both run the very same path.

Tick groups (when standing queries are checked) are fixed by the input, never
by when the engine happens to step: one ingest message (one tick or a list) is
one group per stream it carries; a backtest groups by event-time batch
(``end_group``). However many groups wait when a forward runs, each is answered
at its own cut, so a burst (a replay at 100x, a reconnecting feed) gives the
answers a slow feed would. Like server.py and cli.py it may import
connectors/ and queries/ (DESIGN: service glue sits above both); it is a file
of its own because two front ends use it. What it is built from lives beside it:
the model and codec (model_and_codec.py), its ingest of ticks (tick_ingest.py),
whether it is behind (lag_check.py), its queries changed (query_changes.py), a
restart from the data directory (engine_restart.py), `when_behind` at a message
(when_behind.py), the probe_reserve check (query_fit.py), a stream's expiry or
`forget` (stream_removal.py, which hands freed heap back: heap_memory.py).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable

import torch

from connectors.cautions import labelled
from connectors.encoder import StreamEncoders
from engine.backlog_counts import StreamBacklog, longest_waiting, stream_backlog
from engine.engine import Engine
from engine.forward_plan import StepReport
from engine.models.linear import kernel_cache_summary
from engine.jobs import JobOutcome
from engine.runner import ModelRunner
from engine.service.adaptation import AnswerAdaptation
from engine.service.ages import age_said
from engine.service.answer_log import AnswerHistory
from engine.service.config import ServiceConfig
from engine.service.durability import DataDir
from engine.service.engine_restart import EngineRestart
from engine.service.kept_queries import ConfiguredQueries, configured_queries, register_changed
from engine.service.lag_check import LagCheck
from engine.service.log_lines import say
from engine.service.log_provenance import written_by
from engine.service.model_and_codec import answer_heads, load_model_and_codec
from engine.service.owed_answers import steps_while_full
from engine.service.published_fields import PublishedFields
from engine.service.query_changes import QueryChanges
from engine.service.query_fit import compile_fitting
from engine.service.reading_record import ingest_price_offset
from engine.service.registration_marks import RegistrationMarks
from engine.service.live_scores import LiveScores
from engine.service.new_stream_budget import NewStreamBudget
from engine.service.clock_offsets import load_offsets, save_offsets
from engine.service.receive_clock import ReceiveClock
from engine.service.rejections import admission_limit
from engine.service.shedding import Shedding
from engine.service.stream_removal import StreamBusy, StreamRemoval
from engine.service.tick_ingest import TickIngest, log_or_refuse
from engine.service.trained_streams import TrainedStreams
from engine.service.untrained_tokens import UntrainedTokens
from queries.cache import Answer, AnswerCache
from queries.flash import FlashQueries
from queries.limits import QueryLimits
from queries.probe_answers import compile_query
from queries.registry import Registry
from queries.spec import QuerySpec

# what other modules import from here (sharded.py: say; sharded_ingest.py: log_or_refuse; sharded_forget.py and
# control_streams.py: StreamBusy)
__all__ = ["StreamBusy", "TickPipeline", "log_or_refuse", "say"]


class TickPipeline(TickIngest, LagCheck, QueryChanges, StreamRemoval):
    def __init__(self, config: ServiceConfig, live_scores: bool = True,
                 progress: Callable[[str], None] = lambda _: None, defer_owed: bool = False,
                 asks_on_demand: bool = True) -> None:
        """``live_scores``: score answers as their futures arrive (a backtest scores its whole table instead).
        ``asks_on_demand``: on_demand queries are asked (live); a backtest never asks them, so their probes need
        not fit ``scheduler.probe_reserve`` there (they must still be questions the model can answer)."""
        self.config = config
        if config.model.threads is not None:
            torch.set_num_threads(config.model.threads)
        model, self.codec = load_model_and_codec(config)
        self.runner = ModelRunner(model, config.kv.spec(), cuda_graphs=None if config.model.cuda_graphs else False)
        limits = config.limits
        self.registry = Registry(self.codec.questions, QueryLimits(
            limits.max_yaml_bytes, limits.max_yaml_nodes, limits.max_queries, limits.max_topic_bytes),
            answerable=lambda spec: compile_query(spec, self.codec)
            if not asks_on_demand and not spec.trigger.fires_by_itself
            else compile_fitting(spec, self.codec, config.scheduler.probe_reserve,
                                 self.engine.scheduler.context if hasattr(self, "engine") else None))
        self.cache = AnswerCache()
        self.flash = FlashQueries(self.registry, self.cache, self.codec, config.model.model_id)
        self.engine = Engine(self.runner, config.scheduler, self.flash)
        self.flash.context = lambda stream: self.engine.scheduler.streams[stream].session.tokens  # lookup drafts
        self.encoders = StreamEncoders(self.codec, self.runner.config.vocab_size, config.limits.max_message_bytes,
                                       max_item_tokens=self.engine.scheduler.max_chunk_tokens,
                                       max_stream_bytes=config.limits.max_stream_bytes, notify=say,
                                       max_ts_ahead_ns=config.limits.max_ts_ahead_ns,
                                       zero_bid_is_price=config.limits.zero_bid == "price",
                                       price_offset=ingest_price_offset(config.model.path),
                                       expired_kept=config.scheduler.expired_streams_kept,
                                       seq_scope=config.ingest.seq_scope)
        self.encoders.trained_on = TrainedStreams(config.model.path).check  # (health's untrained_stream caveat)
        self.ticks_in = 0
        self.ingest_unread_s = 0.0  # how long the server's ingest queue has held unread messages (ingest_reading.py)
        self._lag_checked, self._pending_lag_s = float("-inf"), 0.0
        self.receive_clock = ReceiveClock()  # when a wall-clock stamped tick reached the service, by its ts
        # `streams`' idle_s counts from when a tick reached the service, not from its read (review380 #3)
        self.encoders.arrival_of = lambda stream, ts, read: self.receive_clock.arrived_ns(stream, ts, read,
                                                                                          self.idle_at_ns)
        self._read_ns: int | None = None  # when the wire message being ingested was read
        self._read_before: dict[int, int] = {}  # (tick_ingest.py: a reorder window's release, its ticks' reads)
        # when the latest message read that its ticks' ts date reached the service (None: none since the server
        # last took it): what still waits behind it on its connection came no earlier (ingest_reading.py)
        self.last_received_ns: int | None = None
        self.idle_at_ns: int | None = None  # when the server last found the engine idle (tick_ingest.py)
        self.shedding = Shedding(config.limits.max_lag_s, config.limits.max_backlog_tokens)
        self.rejected: Counter[str] = Counter()
        self.new_streams = NewStreamBudget(config.limits.max_new_streams_per_message,
                                           config.limits.max_new_streams_per_s)
        self.reject_examples: dict[str, str] = {}  # reason -> the first such refusal's text (a backtest's summary)
        self._grouping: set[str] = set()  # streams the message being ingested has fed
        self.history = AnswerHistory(config.log.answers_keep)  # published answers, for gap fills
        self.published = PublishedFields()  # what the server publishes with each answer, kept with it (fix353)
        # (topic, seq) -> (context tokens, context ticks) of each standing answer kept, where a caller wants them
        # (a backtest's answers file; None: not kept): what the answer attended, as an ask's reply says it
        self.answer_context: dict[tuple[str, int], tuple[int, int]] | None = None
        streams = self.engine.scheduler.streams
        # a tick model's named questions, or those a text model's choice queries say they mean (scored_as)
        scored = {**self.codec.scored_questions, **self.codec.questions}
        self.scores = LiveScores(scored, lambda s: streams[s].ticks if s in streams else 0, enabled=live_scores,
                                 session_gap_ns=config.answers.session_gap_ns)
        self.adaptation = AnswerAdaptation(self.codec.questions, lambda s: streams[s].ticks if s in streams else 0,
                                           enabled=config.answers.adapt == "online",
                                           heads=answer_heads(config, self.codec),
                                           session_gap_ns=config.answers.session_gap_ns)
        self.flash.adapt = self.adaptation.adapt
        self.adaptation.compile = self._compiled_current
        # (said in the service's log; a backtest says it with its own notes)
        self.untrained = UntrainedTokens(config.model.path, self.codec, lambda line: say(labelled(line)))
        self._open_data_dir(progress, defer_owed)

    def _open_data_dir(self, progress: Callable[[str], None], defer_owed: bool) -> None:
        """The data directory (``log.dir``) opened and what it holds brought back (queries, answers, the tick log
        replayed: EngineRestart), the configured queries applied on top; with no data directory, just those."""
        config = self.config
        configured = configured_queries(config.queries, self.registry) if config.queries else None
        self.data = (DataDir(config.log, self.cache, written_by(config, self.codec, self.engine.scheduler.window),
                             self.encoders) if config.log.dir else None)
        if self.data is not None:
            self.data.booked = self.engine.scheduler.booked  # each tick log segment starts with every session
            self.data.committed = self.engine.scheduler.committed  # retention keeps what is not answered yet
        self.recovered: list[JobOutcome] = []  # answers owed at a restart: published first (Server)
        self.marks = RegistrationMarks()  # where each query started: what a restart owes it
        self.restart = EngineRestart(self, progress, say)
        try:
            self._restore(configured, progress, defer_owed)
        except BaseException:  # refused (a damaged record, ...) or stopped: the directory let go as at a stop, so the
            if self.data is not None:  # next start does not take this one for a crash (review400 #4)
                self.data.close()
            raise

    def _restore(self, configured: ConfiguredQueries | None, progress: Callable[[str], None],
                 defer_owed: bool) -> None:
        """``_open_data_dir``'s queries, answers and tick log brought back, and the configured queries applied."""
        config = self.config
        reregistered: set[str] = set()  # queries the data directory's state did not describe: registered now
        if self.data is not None:
            if self.data.queries_path.is_file():  # what was registered before a restart, answers and all
                self.marks, reregistered = self.data.restore_queries(self.registry)
            reregistered |= self.data.restore_answers(self.registry, self.history, self.adaptation, progress)
            for name in reregistered:
                self.forget_query(name)
        changed = (register_changed(config.queries, self.registry, self.forget_query, configured,
                                    self.data.origins if self.data is not None else None)
                   if config.queries else [])
        changed = sorted(reregistered - set(changed)) + changed
        if self.data is not None:
            self.recovered = self.restart.replay(changed, defer_owed)
            load_offsets(self.data.root, self.receive_clock, self.encoders)  # (owed answers carry clock_offset_ms)

    @property
    def refused_at_start(self) -> set[str]:
        """The logged streams admission refused at this start (EngineRestart.refused_at_start)."""
        return self.restart.refused_at_start

    def take_turned_away(self) -> dict[str, list]:
        """The streams refused at this start, once (EngineRestart.take_turned_away)."""
        return self.restart.take_turned_away()

    @property
    def owed_ticks(self) -> int:
        """Ticks of a deferred restart tail not computed yet."""
        return self.restart.owed_ticks

    def admission_limit(self) -> str:
        """Which limit turns new streams away (rejections.admission_limit), for the log and an ask's error."""
        scheduler, config = self.engine.scheduler, self.config.scheduler
        return admission_limit(config.max_streams, config.when_full, scheduler.max_streams_admitted, scheduler.window,
                               scheduler.pool.capacity_cells)

    # -- what the server asks of a pipeline (ShardedPipeline answers the same) ---------------------------

    @property
    def busy(self) -> bool:
        return self.engine.busy or bool(self.encoders.held)

    def pending_tokens(self) -> int:
        return self.engine.scheduler.pending_tokens()

    @property
    def stream_count(self) -> int:
        return len(self.engine.scheduler.streams)

    def context_of(self, stream: str) -> dict[str, int]:
        """What an answer on ``stream`` computed now attends (``JobOutcome.context``); {} for a stream not held."""
        state = self.engine.scheduler.streams.get(stream)
        return {} if state is None else state.progress([], None).context

    def kv_of(self, stream: str) -> dict[str, Any]:
        """Whether ``stream``'s KV is in the pool (``resident``: its next forward or ask recomputes nothing) and how
        many forwards recomputed it after an eviction or a restore (``rebuilds``); {} for a stream not held."""
        state = self.engine.scheduler.streams.get(stream)
        return {} if state is None else {"resident": state.session.num_uncached == 0, "rebuilds": state.rebuilds}

    def backlog_of(self, stream: str) -> dict[str, Any]:
        """What of ``stream`` waits for a forward (``waiting_ticks``, ``waiting_tokens``) and how long the oldest of
        it has waited (``waiting_s``; 0.0 when none waits): the per-stream share of ``lag_s``; {} for a stream not
        held."""
        state = self.engine.scheduler.streams.get(stream)
        return {} if state is None else waiting_entry(stream_backlog(state), time.time_ns())

    def longest_waiting(self) -> dict[str, dict[str, Any]]:
        """``stats``' ``longest_waiting``: the LONGEST_WAITING_SAID streams whose oldest waiting data has waited
        longest, as ``backlog_of`` says each, longest first; {} when nothing waits."""
        now = time.time_ns()
        return {state.name: waiting_entry(stream_backlog(state), now)
                for state in longest_waiting(self.engine.scheduler.streams.values(), LONGEST_WAITING_SAID)}

    def answer_at_once(self, spec: QuerySpec, stream: str, max_stale_ticks: int | None
                       ) -> tuple[Answer, str | None] | None:
        """An ask's answer without a forward, and how: the cached one if at most ``max_stale_ticks`` behind the
        stream (how None) and the query has no gate, else one answered early ("prepositioned" or "gated",
        FlashQueries.answer_early: a gated query's cached answer only where it passes its gate too).
        Behind the ticks the stream has sent and the engine accepted, computed or not: during a burst the ones still
        waiting for a forward count too, as they do in `streams` (a client compares an answer's version with it)."""
        if stream not in self.engine.scheduler.streams:
            return None
        ticks = max(self.engine.progress(stream).ticks, self.encoders.ticks_of(stream) or 0)
        if max_stale_ticks is not None and spec.gate is None:
            cached = self.cache.get_fresh(spec.name, stream, ticks, max_stale_ticks)
            if cached is not None:
                return cached, None
        early, how, audits = self.flash.answer_early(spec, stream, ticks, max_stale_ticks)
        for job in audits:
            self.engine.ask(job)
        return (early, how) if early is not None else None

    def ask(self, spec: QuerySpec, stream: str, ticket: Any, max_stale_ticks: int | None = None) -> None:
        """Compute ``spec`` on ``stream`` now; the outcome comes out of a later step with ``ticket``.
        Raises UnknownStream for a stream that has sent no data. (``max_stale_ticks``: ``answer_at_once`` had it.)"""
        self.flash.compiled(spec)  # a question the model cannot answer is said as such, whatever the stream
        self.engine.progress(stream)  # raises UnknownStream before a generate job drafts from the stream's tokens
        self.engine.ask(self.flash.job_for(spec, stream, ticket=ticket, draft_from=self.flash.draft_for(spec, stream)))

    def shards_down(self) -> list[str]:
        """(One engine has no shards to lose.)"""
        return []

    def close(self) -> None:
        if self.data is not None:
            save_offsets(self.data.root, self.receive_clock)  # (before the directory's lock is let go)
            self.data.close()

    def step(self, max_tokens: int | None = None) -> StepReport | None:
        """One engine forward (``max_tokens``: Engine.step); its answers are the caller's to publish (already kept:
        see ``_kept``)."""
        pending, started = self.engine.scheduler.pending_tokens(), time.monotonic()
        report = self.engine.step(max_tokens)
        if report is not None:
            self.shedding.pace.add(pending - self.engine.scheduler.pending_tokens(), time.monotonic() - started)
            self._kept(report.outcomes)
        return report

    def end_group(self) -> list[Answer]:
        """End every stream's tick group here (a backtest's event-time batch): its standing queries are
        answered exactly as if the engine ran until idle now. The engine steps only while a full forward is
        pending (``Scheduler.forward_full``), so one forward advances many groups; ``run_until_idle`` finishes
        the rest."""
        self.engine.close_groups()
        self._grouping.clear()
        return [o.answer for o in self._steps_while_full() if o.answer is not None]

    def _steps_while_full(self) -> list[JobOutcome]:
        """Forwards while a full one is pending (``Scheduler.forward_full``); their outcomes, kept."""
        return steps_while_full(self.engine, self.step)

    def run_until_idle(self) -> list[Answer]:
        """Step until nothing is pending; the answers produced, in order."""
        return [o.answer for o in self._kept(self.engine.run_until_idle()) if o.answer is not None]

    def _kept(self, outcomes: list[JobOutcome]) -> list[JobOutcome]:
        """Failed jobs counted; every standing answer into the history and the answer log, *before* the
        caller publishes it, so a seq a subscriber saw is never handed out again after a restart."""
        self.restart.tail_progress()
        for outcome in outcomes:
            if outcome.error is not None:
                self.flash.stats.errors += 1
            elif outcome.job.ticket is None and outcome.answer is not None:
                answer = outcome.answer
                kept = self.published.kept(answer)
                self.history.add(answer.topic, answer.seq, kept.packed)
                if self.data is not None:
                    self.data.answers.record(answer, kept.fields)
                self.scores.expect(answer, self.registry.current(answer.query))
                if self.answer_context is not None and outcome.at is not None:
                    self.answer_context[(answer.topic, answer.seq)] = (outcome.at.context_tokens,
                                                                       outcome.at.context_ticks)
        if self.data is not None:  # (here the cache's seqs are all recorded: its checkpoint may be taken)
            self.data.answers.roll_if_full()
        return outcomes

    def stats(self) -> dict[str, Any]:
        scheduler = self.engine.scheduler
        return {
            "ticks_in": self.ticks_in,
            "rejected": dict(self.rejected),
            "conflated": self.encoders.conflated,
            "expired_streams_held": self.encoders.expired_held(),
            "expired_streams_forgotten": self.encoders.expired_forgotten,
            "answers_out": self.flash.stats.answers,
            "query_errors": self.flash.stats.errors,
            "speculation": self.flash.stats.summary(),
            "freshness_ms": self.flash.freshness_ms(),
            "data_age_ms": self.flash.data_age_ms(),
            "pending_tokens": scheduler.pending_tokens(),
            "owed_ticks": self.owed_ticks,
            "behind": self.behind,
            "lag_s": age_said(self.lag_s()),
            "shed_streams": self.shedding.counts.most(),
            "longest_waiting": self.longest_waiting(),
            **scheduler.kv_summary(),
            **self.runner.kv.summary(),
            "scheduler": vars(scheduler.stats),
            "runner": vars(self.runner.stats),
            **({"cuda_graphs": vars(self.runner.graphs.stats)} if self.runner.graphs is not None else {}),
            "queries": len(self.registry.list()),
            "scores": self.scores.summary(),
            "model": self.config.model.model_id,
            "named_questions": sorted(self.codec.questions),  # none: a text model, whose answers are never scored
            **({"log": self.data.stats()} if self.data is not None else {}),
            **self.encoders.ts_unit_summary(),
            **self.encoders.ahead_of_clock_summary(),
            **self.encoders.sequences.summary(),
            **kernel_cache_summary(),
        }



LONGEST_WAITING_SAID = 5  # the streams behind the longest, in `stats` (longest_waiting), /metrics and the behind line


def waiting_entry(backlog: StreamBacklog, now_ns: int) -> dict[str, Any]:
    """A stream's backlog as `streams` and `stats` say it: ticks, tokens, and the oldest one's wait in seconds."""
    waited = 0.0 if backlog.since_ns is None else max(0.0, (now_ns - backlog.since_ns) / 1e9)
    return {"waiting_ticks": backlog.ticks, "waiting_tokens": backlog.tokens, "waiting_s": round(waited, 3)}
