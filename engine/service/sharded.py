"""ShardedPipeline: the front door of a sharded service, with the pipeline interface the server uses.

The server's process keeps everything that orders or numbers things: the
sockets (server.py), the data directory (tick log, answer log, queries.yaml),
the per-stream encoders (codec state, ordering guard), the global query
registry, the answer history and every topic's seq. The engines are N shards
(engine/service/shard.py), Ray actors with a model copy, a KV pool and a
scheduler each; a stream belongs to the shard rendezvous hashing picks
(engine/service/rendezvous.py).

    ingest   decode, validate, encode (here, sharded_ingest.py) -> admission -> tick log -> the stream's shard buffer
    step     each idle shard with work gets ONE call: its buffered items, registry ops and asks;
             replies are collected with ray.wait (never waiting on one shard), and each standing
             answer gets its topic's next seq here, goes to the answer log and out on PUB
    loss     a call that fails (the actor died: Ray restarts it) or a shard that says
             needs_restore: its streams' records are read from the tick log (a thread, up to the
             record the log had reached) and the shard is restored from them (Scheduler.restore +
             Engine.rebuild) with trigger state from the answer log; items accepted meanwhile wait
             in its buffer and follow the restore, so nothing accepted is lost and seqs continue

Register/unregister are checked here, then queued to every shard in order, so
each shard's registry is the front door's; a shard that is restored gets the
whole registry. An answer computed under a registry version older than its
query's current registration is dropped (it answers a replaced query).

This file holds ShardedPipeline; its parts live beside it: sharded_restart.py (the start from the data directory),
sharded_ingest.py (ticks in: checked, logged, routed to a shard's buffer), shard_calls.py (the step's calls: sent,
collected), shard_restores.py (what a read of the tick log gives a shard's restore), shard_recovery.py (a shard lost
and restored), shard_replies.py (a shard's reply taken in: answers numbered and published, progress, refusals) and
sharded_forget.py (an operator's `forget STREAM`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from connectors.encoder import StreamEncoders
from engine.jobs import JobOutcome
from engine.forward_plan import StepReport
from engine.scheduler import UnknownStream
from engine.quoting import quoted
from engine.service.ages import age_said
from engine.service.answer_log import AnswerHistory
from engine.service.config import ConfigError, ServiceConfig
from engine.service.durability import DataDir
from engine.service.kept_queries import configured_queries
from engine.service.registration_marks import RegistrationMarks
from engine.service.adaptation import AnswerAdaptation
from engine.service.live_scores import LiveScores
from engine.service.log_provenance import written_by
from engine.service.new_stream_budget import NewStreamBudget
from engine.service.model_and_codec import answer_heads, build_codec
from engine.service.published_fields import PublishedFields
from engine.service.query_changes import retire_topics, unregistered
from engine.service.pipeline import say
from engine.service.reading_record import ingest_price_offset
from engine.service.clock_offsets import load_offsets, save_offsets
from engine.service.receive_clock import ReceiveClock
from engine.service.query_fit import compile_fitting
from engine.service import ray_reaper
from engine.service.ray_shards import connect, placement_group_for, ray_module, release, start_shard
from engine.service.shedding import ShedCounts
from engine.service.shard_calls import ShardCalls
from engine.service.shard_link import ShardLink, gathered_stats
from engine.service.shard_recovery import ShardRecovery
from engine.service.shard_replies import ShardReplies
from engine.service.sharded_forget import forget_stream
from engine.service.sharded_ingest import ShardedIngest
from engine.service.sharded_restart import restart_front_door
from engine.service.trained_streams import TrainedStreams
from engine.service.turned_away import TurnedAway
from queries.cache import Answer, AnswerCache
from queries.flash import FlashQueries
from queries.limits import QueryLimits
from queries.registry import Registry
from queries.spec import QuerySpec, dump_queries

class ShardGivenUp(LookupError):
    """An ask on a stream whose shard the front door gave up on: not the asker's mistake (the server says
    ``shard_lost``); its ticks are logged and computed when the service restarts."""


class ShardedPipeline(ShardedIngest):
    def __init__(self, config: ServiceConfig) -> None:
        ray_module()  # Ray is an optional extra: say so before anything starts
        if not config.log.dir:
            raise ConfigError("--shards needs the tick log (a lost shard is rebuilt from it): drop --no-log")
        self.config = config
        self.codec = build_codec(config)
        self._make_queries(config)
        self.data = DataDir(config.log, self.cache, written_by(config, self.codec))
        self.data.committed = self.committed  # retention keeps the ticks the shards have not answered yet
        self.ticks_in = 0
        self.ingest_unread_s = 0.0  # how long the server's ingest queue has held unread messages
        self.last_received_ns: int | None = None  # (one engine's, receive_clock.py: the front door dates no message)
        # each stream's clock offset to this machine's, from the wire ticks the front door reads (receive_clock.py):
        # `streams`, published answers and `health` say it as one engine's do (the shards never see a read time)
        self.receive_clock = ReceiveClock()
        self.idle_at_ns: int | None = None  # when the server last found the front door idle (ingest_reading.py)
        load_offsets(self.data.root, self.receive_clock)  # (kept at the last clean stop: clock_offsets.py)
        self.rejected: Counter[str] = Counter()
        self.shed_counts = ShedCounts()  # ticks refused as overloaded, by stream
        # the new streams a wire message may open, as one engine bounds them (new_stream_budget.py)
        self.new_streams = NewStreamBudget(config.limits.max_new_streams_per_message,
                                           config.limits.max_new_streams_per_s)
        self.streams_refused_here = 0  # ticks of new streams the front door refused (scheduler.refused_streams)
        self.recovered: list[JobOutcome] = []  # owed answers come out of the first steps instead
        self.answers_out = 0
        self.stale_dropped = 0
        self.progress: dict[str, int] = {}  # stream -> ticks committed, from the shards' replies
        self._make_answer_views(config)
        self.shard_of: dict[str, ShardLink] = {}
        # ask ticket in flight -> its spec (the reply is adapted here) and stream (`forget` waits for the reply)
        self._asked: dict[Any, tuple[QuerySpec, str]] = {}
        self._grouping: dict[ShardLink, set[str]] = {}  # the message being ingested: streams it fed, by shard
        self.marks = RegistrationMarks()  # where each query started: what a restored shard owes it
        self._expired: list[str] = []
        self.turned_away = TurnedAway()  # streams the start's replay or a shard refused, until the server takes them
        # logged streams a shard's first restore (this start's) refused: `streams` counts them (refused_at_start);
        # they come with the restore's reply, after the server has taken what the start itself refused
        self.refused_at_start: set[str] = set()
        self.recovery = ShardRecovery(self)  # a shard lost and restored; the log is read on its thread
        self.replies = ShardReplies(self)  # what a shard's reply brings: answers, progress, refusals
        self.calls = ShardCalls(self)  # one call in flight per shard: its items, ops and asks out, the reply in
        self._ray = connect(config.shards)
        self._group, self.links = None, []
        try:
            facts = self._start_shards()
            self._take_shard_facts(config, facts[0])
            restart_front_door(self)  # registry, answers and every shard's streams from the data directory
        except BaseException:  # (a damaged record the replay refuses too: review400 #4)
            self.close()  # the actors started so far, the placement group, the data directory's lock
            raise

    def committed(self, stream: str) -> int | None:
        """``stream``'s ticks its shard has computed (their answers logged here as its replies came), as the shards'
        replies report them (0 until the first does); None for a stream no shard holds (expired, forgotten,
        refused): retention (DataDir._droppable) keeps no tick of a held stream past it, as one engine's does."""
        return self.progress.get(stream, 0) if stream in self.shard_of else None

    def _make_queries(self, config: ServiceConfig) -> None:
        """The front door's registry, answer cache, flash query checks and history, and the queries configured to
        start with, read and checked before the data directory is made (registered once it is read)."""
        limits = config.limits
        self.registry = Registry(self.codec.questions, QueryLimits(
            limits.max_yaml_bytes, limits.max_yaml_nodes, limits.max_queries, limits.max_topic_bytes),
            answerable=lambda spec: compile_fitting(spec, self.codec, config.scheduler.probe_reserve))
        self.cache = AnswerCache()
        self.flash = FlashQueries(self.registry, self.cache, self.codec, config.model.model_id)  # checks only
        self.history = AnswerHistory(config.log.answers_keep)
        self.published = PublishedFields()  # what the server publishes with each answer, kept with it
        self._configured = configured_queries(config.queries, self.registry) if config.queries else None

    def _make_answer_views(self, config: ServiceConfig) -> None:
        """Live scores and answer adaptation, both kept here: every tick's price is seen at the front door, and
        the shards' replies bring each stream's progress."""
        scored = {**self.codec.scored_questions, **self.codec.questions}  # a text model's: its scored_as questions
        self.scores = LiveScores(scored, lambda stream: self.progress.get(stream, 0),
                                 session_gap_ns=config.answers.session_gap_ns)
        # answers are adapted here, where every tick's price is seen (shards get tokens only), before publishing
        self.adaptation = AnswerAdaptation(self.codec.questions, lambda stream: self.progress.get(stream, 0),
                                           enabled=config.answers.adapt == "online",
                                           heads=answer_heads(config, self.codec),
                                           session_gap_ns=config.answers.session_gap_ns)
        self.adaptation.compile = lambda name: (self.flash.compiled(self.registry.current(name))
                                                if self.registry.current(name) is not None else None)

    def _take_shard_facts(self, config: ServiceConfig, facts: dict[str, Any]) -> None:
        """What the first shard says of the engine they all run (window, KV cells, vocabulary, longest chunk):
        the admission numbers, the data directory's record, and the encoders sized by it."""
        limits = config.limits
        self.max_streams_admitted = facts["max_streams_admitted"]
        self.window, self.shard_kv_cells = facts["window"], facts["kv_cells"]
        self.max_positions = facts["max_positions"]  # the model's (a few-ticks warning's advice stays within it)
        self.data.resolved(written_by(config, self.codec, self.window))  # as one engine records it
        self.shard_kv_cell_bytes = facts["kv_cell_bytes"]
        self.encoders = StreamEncoders(self.codec, facts["vocab_size"], limits.max_message_bytes,
                                       max_item_tokens=facts["max_chunk_tokens"],
                                       max_stream_bytes=limits.max_stream_bytes, notify=say,
                                       max_ts_ahead_ns=limits.max_ts_ahead_ns,
                                       zero_bid_is_price=limits.zero_bid == "price",
                                       price_offset=ingest_price_offset(config.model.path),
                                       expired_kept=config.scheduler.expired_streams_kept,
                                       seq_scope=config.ingest.seq_scope)
        self.encoders.trained_on = TrainedStreams(config.model.path).check  # (health's untrained_stream caveat)
        self.data.encoders = self.encoders  # each new tick log segment starts with their counts
        # `streams`' idle_s counts from when a tick reached the service, not from its read (review380 #3)
        self.encoders.arrival_of = lambda stream, ts, read: self.receive_clock.arrived_ns(stream, ts, read,
                                                                                          self.idle_at_ns)

    def _start_shards(self) -> list[dict[str, Any]]:
        """The shards' actors, started and answering; returns what each says of its engine's limits."""
        ray, shards = ray_module(), self.config.shards
        self._group = placement_group_for(self.config)
        self.links = [ShardLink(f"shard-{i}", start_shard(self.config, self._group, i)) for i in range(shards.count)]
        self._names = [link.name for link in self.links]
        self._by_name = {link.name: link for link in self.links}
        try:
            return ray.get([link.handle.limits.remote() for link in self.links], timeout=shards.start_timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise ConfigError(f"the shards did not start within shards.start_timeout_s={shards.start_timeout_s:g}"
                              ) from None
        except ray.exceptions.RayError as e:  # a shard's constructor raised (the model, the KV budget, ...)
            raise ConfigError(f"a shard did not start: {str(e).strip().splitlines()[-1]}") from None

    # -- the loop's step: send, collect, publish ------------------------------------------------

    def step(self, max_tokens: int | None = None) -> StepReport | None:
        """One round of shard calls (ShardCalls.step: send, collect, publish). ``max_tokens`` is not used: the
        shards size their own forwards, and this waits at most shard_calls.WAIT_S."""
        return self.calls.step()

    def take_turned_away(self) -> dict[str, list]:
        """The streams the shards refused since the last call (name -> [items refused, the first why])."""
        return self.turned_away.take()

    # -- what the server asks of a pipeline ----------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A call in flight, a log being read, or work for a shard that can take it. A lost shard waiting
        for Ray to restart it is not "busy": the server's loop then sleeps in its poll instead of spinning."""
        return bool(self.encoders.held) or any(
            link.call is not None or link.reading is not None
            or (not link.lost and (link.buffer or link.ops or link.shard_busy)) for link in self.links)

    def pending_tokens(self) -> int:
        return sum(link.pending_tokens for link in self.links)

    def shards_down(self) -> list[str]:
        """The shards not serving now: being restored after a loss, or given up on."""
        return [link.name for link in self.links if link.state != "serving"]

    @property
    def behind(self) -> bool:
        """The shards' pending tokens past limits.max_backlog_tokens, or data waiting longer than
        limits.max_lag_s (lag_s)."""
        limits = self.config.limits
        return self.pending_tokens() > limits.max_backlog_tokens or self.lag_s() > limits.max_lag_s

    def lag_s(self) -> float:
        """The front door's ingest queue unread, or the most lagging shard's oldest tick (as of its last reply)."""
        return max([self.ingest_unread_s, *(float(link.stats.get("lag_s", 0.0)) for link in self.links)])

    @property
    def stream_count(self) -> int:
        return len(self.shard_of)

    @staticmethod
    def context_of(_stream: str) -> dict[str, int]:
        """Not known here: a shard holds the session (an ask's reply says what its answer attended)."""
        return {}

    @staticmethod
    def kv_of(_stream: str) -> dict[str, Any]:
        """Not known here: a shard holds the session and its KV."""
        return {}
    backlog_of = kv_of  # (not known here either: a shard holds the stream's queue)

    def register_queries(self, specs: list[QuerySpec]) -> list[QuerySpec]:
        """Checked here (compiled, limits), then queued to every shard: all of them or none. Returns the specs
        registered afresh (TickPipeline.register_queries)."""
        for spec in specs:
            self.flash.compiled(spec)
        earlier = {spec.name: self.registry.current(spec.name) for spec in specs}
        version = self.registry.version
        fresh = self.registry.register(specs)  # (one equal to its registered spec is kept as it is: unchanged)
        if self.registry.version == version:
            return fresh
        replaced = [old for spec in fresh if (old := earlier[spec.name]) is not None]
        retire_topics(self.cache, self.history, self.registry, replaced)
        names = [spec.name for spec in fresh]
        for name in names:
            self.forget_query(name, logged=False)
        self.marks.registered(names, dict(self.progress))
        self.data.registered_live(names)
        self.save_queries()
        for name in names:  # once the saved queries say it (TickPipeline._log_forgotten says why)
            self.data.answers.forget_query(name)
        for link in self.links:  # every spec: a shard's registry keeps the unchanged ones' state as this one does
            link.ops.append(("register", dump_queries(specs)))
        return fresh

    def unregister_queries(self, names: list[str]) -> None:
        """As TickPipeline.unregister_queries: one change, then queued to every shard."""
        gone = unregistered(self, names)
        for name in gone:
            self.data.answers.forget_query(name)
        for link in self.links:
            link.ops.append(("unregister", gone))

    def answer_at_once(self, spec: QuerySpec, stream: str, max_stale_ticks: int | None
                       ) -> tuple[Answer, str | None] | None:
        """The cached answer within ``max_stale_ticks`` of the ticks the stream has sent (accepted here; computed
        or not, as TickPipeline.answer_at_once). Answering early (decoded ahead, gated) is the shards' business:
        such asks go to the shard."""
        ticks = self.progress.get(stream)
        if ticks is None or max_stale_ticks is None or spec.gate is not None:  # (a gate is the shard's: ``ask``)
            return None
        ticks = max(ticks, self.encoders.ticks_of(stream) or 0)
        cached = self.cache.get_fresh(spec.name, stream, ticks, max_stale_ticks)
        return (cached, None) if cached is not None else None

    def ask(self, spec: QuerySpec, stream: str, ticket: Any, max_stale_ticks: int | None = None) -> None:
        """Queued to the stream's shard, which answers early (decoded ahead, or gated within ``max_stale_ticks`` of
        the ticks accepted here, sent to it or not) or computes."""
        link = self.shard_of.get(stream)
        if link is None:
            raise UnknownStream(stream)
        if link.failed:
            raise ShardGivenUp(f"stream {quoted(stream)} is on {link.name}, which could not be restored "
                               f"({link.failed}); its ticks are logged and are computed when the service restarts")
        registered = self.registry.current(spec.name) is spec
        self._asked[ticket] = (spec, stream)  # its answer is adapted here (``_as_published``)
        bound = None if max_stale_ticks is None else (max_stale_ticks, max(self.progress.get(stream, 0),
                                                                             self.encoders.ticks_of(stream) or 0))
        link.ops.append(("ask", ticket, stream, spec.name if registered else spec.to_dict(), bound))

    def forget_stream(self, stream: str) -> None:
        """Drop ``stream`` at an operator's request (sharded_forget.forget_stream: StreamBusy while items of it or
        an ask on it wait for its shard)."""
        forget_stream(self, stream)

    def forget_query(self, name: str, logged: bool = True) -> None:
        self.cache.drop_query(name)
        self.flash.forget_query(name)
        self.scores.forget_query(name)
        self.adaptation.forget_query(name)
        if logged:
            self.data.answers.forget_query(name)

    def save_queries(self) -> None:
        self.data.save_queries(dump_queries(self.registry.list()), self.registry, self.marks)

    def expire_idle(self) -> list[str]:
        """Streams the shards dropped as idle (scheduler.stream_idle_s) since the last call, forgotten here."""
        expired, self._expired = self._expired, []
        return expired

    def run_until_idle(self) -> list[Answer]:
        """Step until every shard is idle; the standing answers published, in order (tests, tools)."""
        answers = []
        while self.busy:
            report = self.step()
            answers += [o.answer for o in report.outcomes if o.job.ticket is None] if report else []
        return answers

    def _gathered_stats(self) -> dict[str, Any]:
        """The shards' figures, with the new streams the front door refused before any shard saw them counted in
        scheduler.refused_streams, as one engine's scheduler counts them."""
        gathered = gathered_stats(self.links)
        refused = gathered["scheduler"].get("refused_streams", 0) + self.streams_refused_here
        gathered["scheduler"] = {**gathered["scheduler"], "refused_streams": refused}
        return gathered

    def stats(self) -> dict[str, Any]:
        for link in self.links:
            link.stats_due = True  # fresh figures with each shard's next reply
        return {"ticks_in": self.ticks_in, "rejected": dict(self.rejected), "conflated": self.encoders.conflated,
                "expired_streams_held": self.encoders.expired_held(),
                "expired_streams_forgotten": self.encoders.expired_forgotten,
                "answers_out": self.answers_out,
                **self._gathered_stats(), "pending_tokens": self.pending_tokens(), "behind": self.behind,
                "lag_s": age_said(self.lag_s()), "shed_streams": self.shed_counts.most(),
                "streams": len(self.shard_of), "queries": len(self.registry), "model": self.config.model.model_id,
                "named_questions": sorted(self.codec.questions), "log": self.data.stats(),
                "stale_answers_dropped": self.stale_dropped, "scores": self.scores.summary(),
                **self.encoders.ts_unit_summary(), **self.encoders.ahead_of_clock_summary(),
                **self.encoders.sequences.summary()}

    def close(self) -> None:
        ray = ray_module()
        self.recovery.close()
        save_offsets(self.data.root, self.receive_clock)
        self.data.close()  # the logs flushed and the directory's lock released first, whatever Ray does next
        for link in self.links:
            ray.kill(link.handle, no_restart=True)
        if self._ray.owned:
            ray.shutdown()  # the placement group goes with the job
            ray_reaper.stop(self._ray.reaper)  # what outlives shutdown (its agents) goes too
        elif self._group is not None:  # this process goes on using Ray (tests, benchmarks): hand the CPUs back
            release(self._group)
