"""The control ops that answer a question (docs/wire-protocol.md, "Control"): `get` (a cached answer) and `ask` (a
registered query, a question of the model's by name, or an ad-hoc spec: cached, early or computed in the next forward),
with the caveats beside an answer and why a stream has none. A mixin of the Server's, as ControlOps is."""

from __future__ import annotations

from typing import Any, Callable

from connectors.stream_renames import StreamRenames
from connectors.ticks import slash_hint, wire_value
from engine.scheduler import UnknownStream
from engine.service.ages import age_said
from engine.service.config import ServiceConfig
from engine.service.control_requests import (ControlBusy, ControlError, ControlShardLost, ControlUnknownQuery,
                                             ControlUnknownStream, asked_stream)
from engine.service.pipeline import TickPipeline
from engine.service.reply_caveats import ReplyCaveats
from engine.service.sharded import ShardedPipeline, ShardGivenUp
from engine.service.answer_caveats import context_caveats, expired_caveat, scored_as, skill_caveats
from engine.stream_patterns import did_you_mean, unmatched_hint
from engine.quoting import quoted, quoted_list
from queries.spec import LABELLED_KINDS, QuerySpec, never_cached

MAX_COVERED_SHOWN = 5  # held streams a `get` note names as those the query covers; the rest counted


class AskOps:
    """`get` and `ask`, and what their replies say beside the answer (a mixin: the server's pipeline and config)."""

    config: ServiceConfig
    pipeline: TickPipeline | ShardedPipeline
    _waiting: dict[int, Any]  # ask ticket -> the control reply still owed
    _tickets: int
    _reply_caveats: ReplyCaveats | None = None  # made at the first reply that says them
    _refresh_unread: Callable[[], None]  # (IngestReading's)
    _why_refused: Callable[[str], str | None]  # (StreamOps')
    _clock_caveats: Callable[[str], list[dict[str, str]]]  # (FeedClocks')
    _age_ms: Callable[[str, int], float]  # (FeedClocks': an answer's data_age_ms)
    _answer_wire: Callable[[Any], dict[str, Any]]  # (FeedClocks': an answer and its tick_seq)
    stream_renames: StreamRenames  # (IngestHolding's) a name asked for read as live ingest reads its ticks'

    def _op_get(self, request: dict, _reply: Any) -> dict:
        # a name no stream can have is refused before the query is looked up (bad_request whatever it names); an
        # unknown query's name is an error, not "no answer yet"
        stream = asked_stream(request, self.pipeline.encoders, self.stream_renames.renamed)
        query = request["query"]
        self.pipeline.registry.get(query)
        answer = self.pipeline.cache.get(query, stream)
        # a stream none of whose ticks is held says why (admission refused it, or every tick was bad), beside a
        # cached answer too: one from before a restart that refused the stream is frozen, not a live answer
        known = self.pipeline.encoders.accepted([stream])[stream] is not None
        why = None if known else self._why_refused(stream)
        refused = {"refused": why} if why else {}
        caveats = self._caveats([self.pipeline.registry.get(query)], [stream])
        if answer is not None:  # (its age as an ask's reply says it: a strategy gates a get on it too)
            return {"answer": self._answer_wire(answer), "data_age_ms": self._age_ms(stream, answer.data_ts), **refused,
                    **self._idle(stream, caveats), **caveats}
        # null either way; whether the stream has sent data tells "not yet" from a misspelt name (or an expired one),
        # and where the query was replaced since it answered the stream, the seq its old spec's answers end at
        forgotten = self.pipeline.cache.forgotten(query, stream)
        spec = self.pipeline.registry.get(query)
        # a query whose streams do not match a stream that sends data never answers it: said, not "yet" (review381
        # #6); a stream that has sent nothing is said as such (stream_known)
        unmatched = {} if not known or spec.matches(stream) else {"matches_stream": False, "note": (
            f"query {quoted(query)} does not stand on stream {quoted(stream)}: its streams "
            f"{quoted_list(spec.streams)} do not match it{self._coverage(spec)}")}
        # (one never cached, an on_demand query's, has no answer for a get, however long one waits: said, not "yet")
        asked_only = {"never_cached": True, "note": (
            f"query {quoted(query)} has trigger {spec.trigger.kind}: its answers are computed when asked (`ask`) and "
            f"never cached, so `get` has none")} if never_cached(spec) and not unmatched else {}
        return {"answer": None, "stream_known": known, **unmatched, **asked_only,
                **({"expired": True} if self.pipeline.encoders.expired(stream) else {}),
                **({"replaced": {"topic": forgotten[0], "seq": forgotten[1]}} if forgotten else {}), **refused,
                **caveats}

    def _coverage(self, spec: QuerySpec) -> str:
        """What ends a `get` note of a stream ``spec`` does not match: the held streams it covers, when it covers
        some (its streams are as meant: the asked one is not among them; register's "did you mean" the asked
        stream for a pattern that covers another read "SYN.D" for "SYN.A", review397 #3), else register's hint
        among every held stream (a typo: `eff` for `EFF`, an unescaped glob)."""
        held = list(self.pipeline.encoders)
        covered = [name for name in held if spec.matches(name)]
        if not covered:
            return unmatched_hint(spec.streams, held)
        shown = ", ".join(map(quoted, covered[:MAX_COVERED_SHOWN]))
        more = f", ... ({len(covered)} in all)" if len(covered) > MAX_COVERED_SHOWN else ""
        return f"; the streams it covers now: {shown}{more}"

    def _idle(self, stream: str, caveats: dict[str, list[dict[str, str]]]) -> dict[str, Any]:
        """Beside a kept answer of a stream expired for idleness (its latest answers are kept with its context until
        its next tick): ``expired`` and ``idle_since_ts`` (its last tick's ts), and the ``stream_expired`` caveat
        added to ``caveats``; {} for a stream held."""
        since = self.pipeline.encoders.expired_last_ts(stream)
        if since is None:
            return {}
        caveats["caveats"].append(expired_caveat(stream, since, self.config.scheduler.stream_idle_s))
        return {"expired": True, "idle_since_ts": since}

    def _op_ask(self, request: dict, reply: Any) -> dict | None:
        stream = asked_stream(request, self.pipeline.encoders, self.stream_renames.renamed)
        query, asked_spec, kind = request.get("query"), request.get("spec"), request.get("kind")
        if query is not None and asked_spec is not None:
            raise ControlError("op \"ask\" takes \"query\" (a registered query's name) or \"spec\" (a query mapping), "
                               "not both")
        if query is None and asked_spec is None:
            raise ControlError("op \"ask\" needs \"query\" (a registered query's name) or \"spec\" (a query mapping)")
        if kind is not None and kind not in LABELLED_KINDS:  # checked whichever way the ask goes
            raise ControlError(f"op \"ask\" takes kind {' or '.join(map(quoted, LABELLED_KINDS))} (how a question of "
                               f"the model's own is asked), got {wire_value(kind)}")
        max_stale = request.get("max_stale_ticks")
        if max_stale is not None and max_stale < 0:  # (before the query is looked up: bad_request whatever it names)
            raise ControlError(f"op \"ask\" takes max_stale_ticks as an int >= 0 (or nil: compute now), got "
                               f"{wire_value(max_stale)}")
        note: dict[str, Any] = {}  # said beside the answer when the name was not a registered query's
        if query is not None:
            spec = self._registered_or_question(query, kind, note)
        else:
            spec = QuerySpec.from_dict({"streams": ["*"], **asked_spec})  # the ask names the stream
            if kind is not None and kind != spec.kind:
                note["note"] = f"kind {quoted(kind)} ignored: the spec says its own ({spec.kind})"
        note.update(self._caveats([spec], [stream]))  # (beside the answer, however it comes: cached, early or computed)
        if self.pipeline.encoders.expired(stream):  # its KV freed: no forward can answer it before its next tick
            return self._kept_answer(spec, stream, max_stale, note)
        if spec.kind == "surprise":  # made by the ingest forward only: the latest one is the answer
            cached = self.pipeline.cache.get(spec.name, stream)
            if cached is None and asked_spec is not None:
                raise ControlError("a surprise is computed by the ingest forward, for the standing queries of kind "
                                   "surprise only: register one on the stream (its latest surprise is then an ask "
                                   "of it by name)")
            if cached is None and not spec.matches(stream):
                raise ControlError(f"query {quoted(spec.name)} does not stand on stream {quoted(stream)} (its streams: "
                                   f"{quoted_list(spec.streams)}): a surprise is computed by the ingest forward of the "
                                   f"streams its query stands on; register one whose streams match it")
            if cached is None:
                raise self._no_session(stream) if self.pipeline.encoders.ticks_of(stream) is None else ControlError(
                    f"no surprise on stream {quoted(stream)} yet: it is computed when ticks arrive")
            return {"answer": self._answer_wire(cached), "cached": True, **self._data_age(stream, cached.data_ts),
                    **note}
        found = self.pipeline.answer_at_once(spec, stream, max_stale)
        if found is not None:  # cached within max_stale, or answered early (decoded ahead, or gated)
            answer, how = found
            return {"answer": self._answer_wire(answer), "cached": True, **({how: True} if how else {}),
                    **self._data_age(answer.stream, answer.data_ts), **note}
        most = self.config.limits.max_waiting_asks  # each is planned in every forward: a flood would stall them
        if len(self._waiting) >= most:
            raise ControlBusy(f"{len(self._waiting)} asks already wait for a forward (limits.max_waiting_asks: "
                               f"{most}): send more when replies come back")
        self._tickets += 1
        try:
            self.pipeline.ask(spec, stream, self._tickets, max_stale)
        except UnknownStream:
            raise self._no_session(stream) from None
        except ShardGivenUp as e:  # not the asker's mistake: its stream's shard could not be restored
            raise ControlShardLost(str(e)) from None
        # (an answer's reply: the caveats beside it; a failed ask's says why alone)
        self._waiting[self._tickets] = lambda obj: reply({**obj, **note} if obj.get("ok") else obj)
        return None  # replied when a step has computed it

    def _kept_answer(self, spec: QuerySpec, stream: str, max_stale: int | None, note: dict[str, Any]) -> dict:
        """An ask on a stream expired for idleness (scheduler.stream_idle_s): its latest answers are kept with its
        context and nothing came since, so the kept one within ``max_stale`` ticks of its count is the reply
        (cached, said idle, as `get` says it); a fresh one would rebuild its whole window, which its next tick does:
        refused, saying so (review401 #3: refused with --max-stale too, its kept answer 0 ticks old)."""
        ticks = self.pipeline.encoders.expired_ticks(stream)
        kept = None if max_stale is None or spec.gate is not None or ticks is None else \
            self.pipeline.cache.get_fresh(spec.name, stream, ticks, max_stale)
        if kept is None:
            raise self._no_session(stream, spec.name, max_stale)
        return {"answer": self._answer_wire(kept), "cached": True, **self._data_age(stream, kept.data_ts),
                **self._idle(stream, note), **note}

    def _caveats(self, specs: list[QuerySpec], streams: list[str] = (),
                 derivatives: tuple[list[str], int] | None = None,
                 not_trained: tuple[list[str], int] | None = None) -> dict[str, list[dict[str, str]]]:
        """A reply's ``caveats`` on reading the answers of ``specs`` on ``streams`` (reply_caveats.py): the
        model's, read once, a query's own and the streams'; an empty list when there is none (the key is always
        there)."""
        if self._reply_caveats is None:
            self._reply_caveats = ReplyCaveats(self.config, self.pipeline.codec.questions)
        caveats = self._reply_caveats.of(specs, streams, derivatives, not_trained)
        untrained = getattr(self.pipeline, "untrained", None)  # (one engine's: a sharded front door reads no tokens)
        if untrained is not None and derivatives is not None:  # health's: the streams held that sent such tokens
            caveats += untrained.held_caveat()
        if len(specs) == 1 and len(streams) == 1:  # an ask's or get's: what live scores show of its stream
            scored = scored_as(specs[0], self.pipeline.registry.list())
            caveats += skill_caveats(self.pipeline.scores, scored, streams[0])
            engine = getattr(self.pipeline, "engine", None)  # (a sharded front door holds no session)
            caveats += context_caveats(engine.scheduler if engine is not None else None, streams[0])
            shedding = getattr(self.pipeline, "shedding", None)  # (one engine's: when_behind: shed)
            caveats += shedding.refused_caveat(streams[0]) if shedding is not None else []
            caveats += untrained.caveat(streams[0]) if untrained is not None else []
            caveats = self._clock_caveats(streams[0]) + caveats  # (FeedClocks': a feed stamped ahead)
        return {"caveats": caveats}

    def _data_age(self, stream: str, data_ts: int) -> dict[str, Any]:
        """An ask reply's `data_age_ms`: this machine's clock now less the answered tick's own ts. An answer "computed
        now" answers the last tick the engine has read and computed, which may be seconds old while newer ticks wait
        (unread, upstream of the ingest socket, or queued): the asker sees how old, and `lag_s` and `behind` as
        heartbeats say them (review243 #1: an ask right after a burst answered from the middle of it, and its reply,
        `lag_s` only while behind, said nothing of what still waited). Never negative (FeedClocks._age_ms)."""
        self._refresh_unread()  # (IngestReading's)
        return {"data_age_ms": self._age_ms(stream, data_ts), "lag_s": age_said(self.pipeline.lag_s()),
                "behind": self.pipeline.behind}

    def _registered_or_question(self, name: str, kind: Any, note: dict[str, Any]) -> QuerySpec:
        """The query registered as ``name``; else, when the model's codec has a question of that name
        (direction_5), that question asked as it is (``kind``: choice, the default, or expectation), said in
        ``note``; else the error of a name not registered, saying it is no question either (``kind`` checked by
        _op_ask)."""
        registry = self.pipeline.registry
        spec = registry.current(name)
        if spec is not None:
            if kind is not None and kind != spec.kind:
                note["note"] = (f"kind {quoted(kind)} ignored: {quoted(name)} is a registered query, asked as it "
                                f"stands ({spec.kind})")
            return spec
        questions = registry.questions or {}  # (a text model's questions are free text: none by name)
        if name not in questions:
            try:
                registry.get(name)  # (raises: the error that lists what is registered)
            except LookupError as e:
                either = (f"; and {quoted(name)} is not a question of this model's codec either (its questions: "
                          f"{', '.join(sorted(questions)[:20])})") if questions else ""
                raise ControlUnknownQuery(f"{e}{either}") from None
        kind = "choice" if kind is None else kind  # (checked by _op_ask)
        if kind == "expectation" and not questions[name].values:
            raise ControlError(f"no query is registered as {quoted(name)}, and the model's question {quoted(name)} has "
                               f"no values to take an expectation over: ask it as kind \"choice\", or register a "
                               f"query with its own `values`")
        note["note"] = (f"no query is registered as {quoted(name)}: asked the model's question {quoted(name)} "
                        f"directly (kind {kind})")
        return QuerySpec.from_dict({"name": name, "streams": ["*"], "question": name, "kind": kind})

    def _no_session(self, stream: str, query: str | None = None, max_stale: int | None = None
                    ) -> ControlUnknownStream:
        """Why an ask (of ``query``, within ``max_stale`` ticks) finds no session of ``stream``: it expired, or no
        tick of it was accepted (refused ones said: the KV policy `refuse` turns new streams away while the pool is
        promised to others). Each is `unknown_stream`, a stream the service holds no tick of: not `bad_request`, as
        the same ask is served once the stream's next tick is accepted; the text says which, and for an expired
        stream what answers meanwhile."""
        if self.pipeline.encoders.accepted([stream])[stream] is not None:
            engine = getattr(self.pipeline, "engine", None)  # (a sharded front door holds none: its shards do)
            expired = f"stream {quoted(stream)} expired after scheduler.stream_idle_s without data: its KV was freed"
            if engine is not None and stream not in engine.scheduler.kept:
                return ControlUnknownStream(f"{expired}; its context is gone too, and its next tick starts a new one")
            context = ("its shard keeps its context (one of the scheduler.expired_streams_kept most recently expired)"
                       if engine is None else "its context is kept")
            missed = f" (none of {quoted(query)} within {max_stale})" if query and max_stale is not None else ""
            return ControlUnknownStream(
                f"{expired}; {context}, and its next tick goes on from it. An answer computed now would rebuild its "
                f"whole window first, which its next tick does; meanwhile its latest answers are kept: `ask "
                f"--max-stale N` (max_stale_ticks) takes one at most N ticks old{missed}, and `get` reads them")
        if why := self._why_refused(stream):
            return ControlUnknownStream(why)
        # (a name neither remembered nor among those forgotten was never refused: no hint that it might have been,
        # which sent a desk to `_rejects/` for a strike it mistyped)
        return ControlUnknownStream(f"stream {quoted(stream)} has sent no data" + slash_hint(stream)
                                    + did_you_mean([stream], self.pipeline.encoders))
