"""The control ops: what each request `{op, ...}` on the control socket does and replies (docs/wire-protocol.md,
"Control"), from registering YAML to `health`. Each ``_op_NAME`` takes the checked request and the function that
replies to it, and returns the reply's fields, or None when the reply comes later (an ask that waits for a forward)."""

from __future__ import annotations

import itertools
import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from connectors.ticks import slash_hint, utc_text, wire_value
from engine.scheduler import UnknownStream
from engine.service.checkpoint_notes import trained_prices
from engine.service.config import ServiceConfig
from engine.service.control_requests import (ControlBusy, ControlError, ControlShardLost, ControlUnknownQuery,
                                             ControlUnknownStream,
                                             asked_stream, register_source, request_field)
from engine.service.document_parse import DocumentParse
from engine.service.release import release_fields
from engine.service.pipeline import StreamBusy, TickPipeline
from engine.service.forgotten_refusals import ForgottenRefusals
from engine.service.rejections import REFUSED_HOLDER, forgotten_refusal, no_accepted_tick
from engine.service.reply_caveats import ReplyCaveats
from engine.service.sharded import ShardedPipeline, ShardGivenUp
from engine.service.ticklog import LogWriteError
from engine.service.wire_protocol import WIRE_PROTOCOL
from engine.stream_patterns import did_you_mean
from engine.quoting import quoted
from queries.spec import LABELLED_KINDS, QuerySpec, QuerySpecError
from queries.yaml_loader import located_in, no_query

MAX_ANSWERS_PER_FETCH = 1000
MAX_STREAMS_PER_REPLY = 10_000
MAX_TOPICS_PER_REPLY = 10_000


class ControlOps:
    """The Server's control ops (a mixin: they read the server's pipeline, counters and snapshot)."""

    config: ServiceConfig
    pipeline: TickPipeline | ShardedPipeline
    counters: dict[str, int]
    epoch: str
    started_at: float
    _waiting: dict[int, Any]  # ask ticket -> the control reply still owed
    _tickets: int
    _snapshot: dict[str, Any]
    _refused_streams: OrderedDict[str, list]  # stream -> [ticks refused, the error]
    _refused_forgotten: int  # refused streams that fell out of _refused_streams (the oldest first)
    _forgotten_refusals: ForgottenRefusals  # ... their names (a bounded filter)
    _parsing: DocumentParse | None  # a `register` whose document is being parsed off the engine thread
    _read_before_placing: Callable[[], None]  # (IngestReading's) the ingest sockets' queued messages, read
    _reply_caveats: ReplyCaveats | None = None  # made at the first reply that says them

    def _op_register(self, request: dict, reply: Any) -> None:
        # parsed off the engine thread (a document near limits.max_yaml_bytes is seconds of Python on a loaded
        # host), applied on it once parsed (_registered); control is read again then, so replies keep their order
        self._parsing = DocumentParse(request_field(request, "yaml", str), register_source(request),
                                      self.pipeline.registry, reply)

    def _registered(self, parse: DocumentParse) -> dict:
        """A `register` whose document ``parse`` has read, applied: its reply's fields."""
        registry = self.pipeline.registry
        specs = parse.specs()
        if not specs:  # (a client's mistake, most likely: an empty list, or the wrong file) registers nothing
            raise ControlError(str(no_query(parse.source, "nothing registered (`unregister` removes a query)")))
        # a name registered already is replaced, its spec and cached answers gone: said, as anyone on the control
        # socket can change what a strategy's topics carry (subscribers see heartbeats' registry_version move)
        replaced = [s.name for s in specs if registry.current(s.name) is not None]
        try:
            self.pipeline.register_queries(specs)
        except QuerySpecError as e:  # found across documents (a topic another query owns): located like the rest
            raise located_in(e, parse.text, parse.source, registry.limits, parse.lines) from None
        return {"registered": [s.name for s in specs], "replaced": replaced, "version": self.pipeline.registry.version}

    def _op_unregister(self, request: dict, _reply: Any) -> dict:
        self.pipeline.unregister_query(request_field(request, "name", str))
        return {"version": self.pipeline.registry.version}

    def _op_list(self, _request: dict, _reply: Any) -> dict:
        return {"queries": [s.to_dict() for s in self.pipeline.registry.list()],
                "version": self.pipeline.registry.version}

    def _op_get(self, request: dict, _reply: Any) -> dict:
        # an unknown name is an error, not "no answer yet"
        query = request_field(request, "query", str)
        self.pipeline.registry.get(query)
        stream = asked_stream(request, self.pipeline.encoders)
        answer = self.pipeline.cache.get(query, stream)
        # a stream none of whose ticks is held says why (admission refused it, or every tick was bad), beside a
        # cached answer too: one from before a restart that refused the stream is frozen, not a live answer
        known = self.pipeline.encoders.accepted([stream])[stream] is not None
        why = None if known else self._why_refused(stream)
        refused = {"refused": why} if why else {}
        caveats = self._caveats([self.pipeline.registry.get(query)], [stream])
        if answer is not None:
            return {"answer": answer.to_wire(), **refused, **caveats}
        # null either way; whether the stream has sent data tells "not yet" from a misspelt name (or an expired one),
        # and where the query was replaced since it answered the stream, the seq its old spec's answers end at
        forgotten = self.pipeline.cache.forgotten(query, stream)
        return {"answer": None, "stream_known": known,
                **({"expired": True} if self.pipeline.encoders.expired(stream) else {}),
                **({"replaced": {"topic": forgotten[0], "seq": forgotten[1]}} if forgotten else {}), **refused,
                **caveats}

    def _op_ask(self, request: dict, reply: Any) -> dict | None:
        stream = asked_stream(request, self.pipeline.encoders)
        if "query" in request and "spec" in request:
            raise ControlError("op \"ask\" takes \"query\" (a registered query's name) or \"spec\" (a query mapping), "
                               "not both")
        note: dict[str, Any] = {}  # said beside the answer when the name was not a registered query's
        kind = request.get("kind")
        if kind is not None and kind not in LABELLED_KINDS:  # checked whichever way the ask goes
            raise ControlError(f"op \"ask\" takes kind {' or '.join(map(quoted, LABELLED_KINDS))} (how a question of "
                               f"the model's own is asked), got {wire_value(kind)}")
        if "query" in request:
            spec = self._registered_or_question(request_field(request, "query", str), kind, note)
        elif "spec" in request:
            spec = QuerySpec.from_dict({"streams": ["*"], **request_field(request, "spec", dict)})  # the ask names it
            if kind is not None and kind != spec.kind:
                note["note"] = f"kind {quoted(kind)} ignored: the spec says its own ({spec.kind})"
        else:
            raise ControlError("op \"ask\" needs \"query\" (a registered query's name) or \"spec\" (a query mapping)")
        note.update(self._caveats([spec], [stream]))  # (beside the answer, however it comes: cached, early or computed)
        if spec.kind == "surprise":  # made by the ingest forward only: the latest one is the answer
            cached = self.pipeline.cache.get(spec.name, stream)
            if cached is None and "spec" in request:
                raise ControlError("a surprise is computed by the ingest forward, for the standing queries of kind "
                                   "surprise only: register one on the stream (its latest surprise is then an ask "
                                   "of it by name)")
            if cached is None and not spec.matches(stream):
                raise ControlError(f"query {quoted(spec.name)} does not stand on stream {quoted(stream)} (its streams: "
                                   f"{list(spec.streams)}): a surprise is computed by the ingest forward of the "
                                   f"streams its query stands on; register one whose streams match it")
            if cached is None:
                raise self._no_session(stream) if self.pipeline.encoders.ticks_of(stream) is None else ControlError(
                    f"no surprise on stream {quoted(stream)} yet: it is computed when ticks arrive")
            return {"answer": cached.to_wire(), "cached": True, **self._data_age(cached.data_ts), **note}
        max_stale = request.get("max_stale_ticks")
        if max_stale is not None and (type(max_stale) is not int or max_stale < 0):
            raise ControlError(f"op \"ask\" takes max_stale_ticks as an int >= 0 (or nil: compute now), got "
                               f"{wire_value(max_stale)}")
        found = self.pipeline.answer_at_once(spec, stream, max_stale)
        if found is not None:  # cached within max_stale, or answered early (decoded ahead, or gated)
            answer, how = found
            return {"answer": answer.to_wire(), "cached": True, **({how: True} if how else {}),
                    **self._data_age(answer.data_ts), **note}
        most = self.config.limits.max_waiting_asks  # each is planned in every forward: a flood would stall them
        if len(self._waiting) >= most:
            raise ControlBusy(f"{len(self._waiting)} asks already wait for a forward (limits.max_waiting_asks: "
                               f"{most}): send more when replies come back")
        self._tickets += 1
        try:
            self.pipeline.ask(spec, stream, self._tickets)
        except UnknownStream:
            raise self._no_session(stream) from None
        except ShardGivenUp as e:  # not the asker's mistake: its stream's shard could not be restored
            raise ControlShardLost(str(e)) from None
        # (an answer's reply: the caveats beside it; a failed ask's says why alone)
        self._waiting[self._tickets] = lambda obj: reply({**obj, **note} if obj.get("ok") else obj)
        return None  # replied when a step has computed it

    def _caveats(self, specs: list[QuerySpec], streams: list[str] = (),
                 derivatives: tuple[list[str], int] | None = None) -> dict[str, list[dict[str, str]]]:
        """A reply's ``caveats`` on reading the answers of ``specs`` on ``streams`` (reply_caveats.py): the
        model's, read once, a query's own and the streams'; an empty list when there is none (the key is always
        there)."""
        if self._reply_caveats is None:
            self._reply_caveats = ReplyCaveats(self.config, self.pipeline.codec.questions)
        return {"caveats": self._reply_caveats.of(specs, streams, derivatives)}

    def _held_derivatives(self) -> tuple[list[str], int]:
        """The first derivative streams this process holds (`health`'s caveat names three) and how many it holds:
        kept by the stream table as streams come and go, so a health call does not walk every stream held."""
        encoders = getattr(self.pipeline, "encoders", None)
        held = encoders.derivatives if encoders is not None else {}
        return list(itertools.islice(held, 3)), len(held)

    def _data_age(self, data_ts: int) -> dict[str, Any]:
        """An ask reply's `data_age_ms`: this machine's clock now less the answered tick's own ts. An answer "computed
        now" answers the last tick the engine has read and computed, which may be seconds old while newer ticks wait
        (unread, upstream of the ingest socket, or queued): the asker sees how old, and `lag_s` and `behind` as
        heartbeats say them (review243 #1: an ask right after a burst answered from the middle of it, and its reply,
        `lag_s` only while behind, said nothing of what still waited)."""
        self._refresh_unread()  # (IngestReading's)
        return {"data_age_ms": round((time.time_ns() - data_ts) / 1e6, 3), "lag_s": round(self.pipeline.lag_s(), 3),
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

    def _no_session(self, stream: str) -> ControlUnknownStream:
        """Why an ask finds no session of ``stream``: it expired, or no tick of it was accepted (refused ones
        said: the KV policy `refuse` turns new streams away while the pool is promised to others). Each is
        `unknown_stream`, a stream the service holds no tick of: not `bad_request`, as the same ask is served once
        the stream's next tick is accepted; the text says which."""
        if self.pipeline.encoders.accepted([stream])[stream] is not None:
            return ControlUnknownStream(f"stream {quoted(stream)} expired after scheduler.stream_idle_s without "
                                        f"data: its session is gone, and its next tick starts a new one")
        if why := self._why_refused(stream):
            return ControlUnknownStream(why)
        # (a name neither remembered nor among those forgotten was never refused: no hint that it might have been,
        # which sent a desk to `_rejects/` for a strike it mistyped)
        return ControlUnknownStream(f"stream {quoted(stream)} has sent no data" + slash_hint(stream)
                                    + did_you_mean([stream], self.pipeline.encoders))

    def _why_refused(self, stream: str) -> str | None:
        """Why ``stream``, which the engine holds nothing of, holds nothing when its ticks were refused: how many and
        the first why, while remembered; once fallen out of that memory, that it was refused earlier (review336 #8:
        "never seen"). None for a name never refused."""
        if stream in self._refused_streams:
            return no_accepted_tick(stream, *self._refused_streams[stream])
        if stream in self._forgotten_refusals:
            return forgotten_refusal(stream, self._refused_forgotten, self._forgotten_refusals.false_match)
        return None

    def _op_answers(self, request: dict, _reply: Any) -> dict:
        """A topic's published answers after a seq, from the kept history: how a subscriber fills a gap."""
        topic = request_field(request, "topic", str)
        if not topic.endswith("/"):
            raise ControlError(f"topic {quoted(topic)} is not an answer topic: topics end with \"/\", "
                               f"e.g. \"dir20/BTCUSDT/\"")
        after = request_field(request, "after", int)
        if after < 0:
            raise ControlError(f"op \"answers\" takes after >= 0 (the last seq you have; 0 for all), got {after}")
        limit = request.get("limit", MAX_ANSWERS_PER_FETCH)
        if type(limit) is not int or not 1 <= limit <= MAX_ANSWERS_PER_FETCH:
            raise ControlError(f"op \"answers\" takes a limit from 1 to {MAX_ANSWERS_PER_FETCH}, "
                               f"got {wire_value(limit)}")
        answers, complete = self.pipeline.history.after(topic, after, limit)
        last_seq = self.pipeline.cache.last_seq(topic)
        if not answers and last_seq is not None and last_seq > after:  # published, and none of them kept now
            complete = False
        self.counters["answer_fetches"] += 1
        return {"answers": answers, "complete": complete, "epoch": self.epoch,
                "last_seq": last_seq, "oldest_seq": self.pipeline.history.oldest_seq(topic)}

    def _op_topics(self, request: dict, _reply: Any) -> dict:
        """The answer topics published on, with their last seq: how a client that was away finds topics that
        began meanwhile (a new stream's answers), which no subscription of its own names yet."""
        prefix, after = (request.get(key) if request.get(key) is not None else "" for key in ("prefix", "after"))
        if type(prefix) is not str or type(after) is not str:
            raise ControlError(f"op \"topics\" takes prefix and after as strings (a topic prefix such as \"dir20/\"; "
                               f"the last topic of the previous page), got {wire_value(prefix)}, {wire_value(after)}")
        found = self.pipeline.cache.topics(prefix, after, MAX_TOPICS_PER_REPLY + 1)
        truncated = len(found) > MAX_TOPICS_PER_REPLY
        if truncated:
            found.pop(max(found))
        return {"topics": found, "truncated": truncated, "epoch": self.epoch}

    def _op_stats(self, _request: dict, _reply: Any) -> dict:
        self._refresh_snapshot()
        return {"stats": self._snapshot}

    def _op_streams(self, request: dict, _reply: Any) -> dict:
        """Each stream's last accepted tick (ts and count): where a feed resumes after the service restarted. With
        ``drain: true`` (a feed placing itself) the messages already queued on ingest are read first."""
        drain = request.get("drain")
        if drain is not None and type(drain) is not bool:  # a "false" read as true would place a feed unasked
            raise ControlError(f"op \"streams\" takes drain as a bool (true: read what is queued on ingest first; "
                               f"or nil), got {wire_value(drain)}")
        if drain:
            self._read_before_placing()
        names = request.get("streams")
        if names is not None and (type(names) is not list or not all(type(n) is str for n in names)
                                  or len(names) > MAX_STREAMS_PER_REPLY):
            wrong = next((f"{wire_value(n)} at [{i}]" for i, n in enumerate(names) if type(n) is not str), None) \
                if type(names) is list else None
            got = f"an array with {wrong}" if wrong else wire_value(names)
            raise ControlError(f"op \"streams\" takes \"streams\" as an array of at most {MAX_STREAMS_PER_REPLY} "
                               f"stream names (str; or nil: every stream), got {got}")
        after = request.get("after") if request.get("after") is not None else ""
        if type(after) is not str:
            raise ControlError(f"op \"streams\" takes after as a str (the last name of the previous page of every "
                               f"stream), got {wire_value(after)}")
        if after and names is not None:
            raise ControlError("op \"streams\" takes \"streams\" (the names to look up) or \"after\" (a page of every "
                               "stream), not both: both were given")
        known = self.pipeline.encoders.accepted(names, limit=MAX_STREAMS_PER_REPLY + 1, after=after,
                                                now_ns=time.time_ns())
        truncated = names is None and len(known) > MAX_STREAMS_PER_REPLY
        if truncated:
            known.pop(max(known))
        for name, entry in known.items():  # what an answer computed now attends: fewer tokens after a roll
            if entry is not None:  # ... whether its KV is in the pool: an evicted one's next ask pays a rebuild,
                # ... and what of it waits for a forward, and since when: which names are behind
                entry.update(self.pipeline.context_of(name), **self.pipeline.kv_of(name),
                             **self.pipeline.backlog_of(name), **self._stream_feed(name))  # (feed_clocks.py)
        # a name asked for that admission turned away (and the engine holds nothing of): why, beside its nil
        refused = {name: self._refused_entry(name)
                   for name in names or () if known.get(name) is None and name in self._refused_streams}
        # ... and one refused whose refusal fell out of that memory: that it was, not nil alone ("never seen")
        forgotten = {name: {"error": self._why_refused(name)} for name in names or ()
                     if known.get(name) is None and name not in refused and name in self._forgotten_refusals}
        return {"streams": known, "truncated": truncated, "uptime_s": time.time() - self.started_at,
                **({"refused": refused} if refused else {}),
                **({"refused_forgotten": forgotten} if forgotten else {}),
                **(self._refused_listing() if names is None and not after else {}),
                **(self._still_refused_at_start() if names is None else {})}

    def _refused_entry(self, name: str) -> dict[str, Any]:
        ticks, error = self._refused_streams[name]
        return {"ticks": ticks, "error": error}

    def _refused_listing(self) -> dict[str, Any]:
        """For a listing of every stream (its first page, which pages by held names): the refused streams that
        hold nothing, by name, so a desk sees which strikes are not modelled without knowing their names first
        (review200 #3): those remembered (MAX_REFUSED_STREAMS_KEPT at most, which bounds the reply), and how many
        more fell out of that memory (`refused_more`: their names passed on `_rejects/` only; a name refused again
        after it fell out counts again, so an upper bound: counting distinct names would need them all kept)."""
        encoders = self.pipeline.encoders
        refused = {name: self._refused_entry(name) for name in sorted(self._refused_streams)
                   if name not in encoders and not encoders.expired(name)}
        return {**({"refused": refused} if refused else {}),
                **({"refused_more": self._refused_forgotten} if self._refused_forgotten else {})}

    def _still_refused_at_start(self) -> dict[str, Any]:
        """For a listing of every stream (which names held streams only): how many logged streams this start
        refused and still holds nothing of, and the limit, so the listing does not pass over them in silence
        (with --shards, those each shard's restore at this start refused, whose replies come after the start)."""
        still = sum(1 for name in self.pipeline.refused_at_start
                    if name in self._refused_streams and name not in self.pipeline.encoders)
        return {"refused_at_start": {"streams": still, "why": self.pipeline.admission_limit()}} if still else {}

    def _op_forget(self, request: dict, _reply: Any) -> dict:
        """Drop one stream from every layer, its ordering guard included, durably (the tick log records it): the
        operator's way out when a tick stamped ahead of the clock (forged, or a feed's mistake) blocks the stream's
        real feed as ts_backwards. Said in the log, with what the stream held."""
        stream = asked_stream(request, self.pipeline.encoders)  # (a '/', an NFD name: refused with their hint)
        held = self.pipeline.encoders.accepted([stream])[stream]
        if held is None:
            raise ControlUnknownStream(f"stream {quoted(stream)} is not known: nothing to forget (`flashtick streams` "
                                       f"lists the streams the engine holds, expired ones included)"
                                       + did_you_mean([stream], self.pipeline.encoders))
        try:
            self.pipeline.forget_stream(stream)
        except StreamBusy as e:
            raise ControlBusy(str(e)) from None
        except LogWriteError as e:
            raise ControlError(f"stream {quoted(stream)} was not forgotten: the tick log refused the record that "
                               f"keeps it forgotten across a restart ({e})") from None
        if self._refused_streams.pop(stream, None) is not None:
            self.pipeline.encoders.names.discard(stream, REFUSED_HOLDER)
        print(f"flashtick: forgot stream {quoted(stream)} at a control client's request (op forget): its "
              f"{held['ticks']} ticks' session, answers and ordering guard (last ts {held['last_ts']}, "
              f"{utc_text(held['last_ts'])}) dropped; its next tick, of any time, starts it afresh",
              file=sys.stderr, flush=True)
        return {"forgotten": stream, "ticks": held["ticks"], "last_ts": held["last_ts"]}

    def _op_health(self, _request: dict, _reply: Any) -> dict:
        """``serving``; ``degraded`` with ``shards_down`` while a shard is restored after a loss, or failed, and with
        ``log_problem`` while ticks are refused because the data directory's logs cannot be written."""
        down = self.pipeline.shards_down()
        data = getattr(self.pipeline, "data", None)
        problem = data.items.problem if data is not None else None
        return {"status": "degraded" if down or problem else "serving", "uptime_s": time.time() - self.started_at,
                "streams": self.pipeline.stream_count, "model": self.config.model.model_id,
                "protocol": WIRE_PROTOCOL, **release_fields(), "epoch": self.epoch,
                "zero_bid": self.config.limits.zero_bid,  # (a feed reading 0 bids as prices says a mismatch up front)
                # how the model's training read prices: `feed replay` reads its files alike unless told otherwise
                **({"reading": reading} if (reading := trained_prices(self.config.model.path)) else {}),
                # ... of which the offset this service adds to every wire tick's prices itself: a feed sends without
                **({"ingest_price_offset": reading["price_offset"]} if "price_offset" in reading else {}),
                **({"shards_down": down} if down else {}), **({"log_problem": problem} if problem else {}),
                **self._feed_warnings(),  # (clocks ahead, two clocks interleaving: feed_clocks.py)
                **self._caveats(self.pipeline.registry.list(), derivatives=self._held_derivatives())}
