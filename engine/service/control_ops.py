"""The control ops: what each request `{op, ...}` on the control socket does and replies (docs/wire-protocol.md,
"Control"), from registering YAML to `health`. Each ``_op_NAME`` takes the checked request and the function that
replies to it, and returns the reply's fields, or None when the reply comes later (an ask that waits for a forward).
Here: the queries' ops (`register`, `unregister`, `list`), the answers' history (`answers`, `topics`), `stats` and
`health`; `get` and `ask` are control_asks.py's, `streams` and `forget` control_streams.py's."""

from __future__ import annotations

import itertools
import time
from typing import Any

from connectors.ticks import wire_value
from engine.service.ages import age_said
from engine.service.checkpoint_notes import trained_prices
from engine.service.control_asks import AskOps
from engine.service.control_requests import ControlError, register_source
from engine.service.control_streams import StreamOps
from engine.service.document_parse import DocumentParse
from engine.service.release import release_fields
from engine.service.wire_protocol import WIRE_PROTOCOL
from engine.quoting import quoted, quoted_list
from engine.stream_patterns import unmatched_hint
from queries.spec import QuerySpec, QuerySpecError
from queries.yaml_loader import located_in, no_query

MAX_ANSWERS_PER_FETCH = 1000
MAX_TOPICS_PER_REPLY = 10_000
MAX_UNMATCHED_NOTES = 20


def unmatched_notes(specs: list[QuerySpec], streams: list[str]) -> list[str]:
    """A `register` reply's notes: each query whose streams match none of the streams the service holds now
    (review381 #6: `eff` for `EFF`, `ES[H27]` read as a glob, registered in silence and idle for ever), with the
    close names or the escaped glob. Registered all the same (its streams may come later); none while no stream
    has come at all."""
    if not streams:
        return []
    notes = []
    for spec in specs:
        if len(notes) == MAX_UNMATCHED_NOTES:
            notes.append("... (more queries whose streams match none of the streams held now are not named)")
            break
        if not any(spec.matches(stream) for stream in streams):
            shown = ", ".join(map(quoted, streams[:5])) + (f", ... ({len(streams)} in all)" if len(streams) > 5 else "")
            notes.append(f"query {quoted(spec.name)}: its streams {quoted_list(spec.streams)} match none of the "
                         f"streams the service holds now ({shown}), so it answers nothing until one that matches "
                         f"comes{unmatched_hint(spec.streams, streams)}")
    return notes


class ControlOps(AskOps, StreamOps):
    """The Server's control ops (a mixin: they read the server's pipeline, counters and snapshot)."""

    counters: dict[str, int]
    epoch: str
    model_digest: str  # the served model's identity (model_digest.py): in every answer published and in `health`
    _snapshot: dict[str, Any]
    _parsing: DocumentParse | None  # a `register` whose document is being parsed off the engine thread

    def _op_register(self, request: dict, reply: Any) -> None:
        # parsed off the engine thread (a document near limits.max_yaml_bytes is seconds of Python on a loaded
        # host), applied on it once parsed (_registered); control is read again then, so replies keep their order
        self._parsing = DocumentParse(request["yaml"], register_source(request),
                                      self.pipeline.registry, reply)

    def _registered(self, parse: DocumentParse) -> dict:
        """A `register` whose document ``parse`` has read, applied: its reply's fields."""
        registry = self.pipeline.registry
        specs = parse.specs()
        if not specs:  # (a client's mistake, most likely: an empty list, or the wrong file) registers nothing
            raise ControlError(str(no_query(parse.source, "nothing registered (`unregister` removes a query)")))
        # a name registered already with another spec is replaced, its spec and cached answers gone: said, as anyone
        # on the control socket can change what a strategy's topics carry (subscribers see heartbeats'
        # registry_version move); one with an equal spec is unchanged and keeps everything (review381 #1): said too
        existing = {s.name for s in specs if registry.current(s.name) is not None}
        try:
            fresh = {spec.name for spec in self.pipeline.register_queries(specs)}
        except QuerySpecError as e:  # found across documents (a topic another query owns): located like the rest
            raise located_in(e, parse.text, parse.source, registry.limits, parse.lines) from None
        notes = unmatched_notes(specs, list(self.pipeline.encoders))
        return {"registered": [s.name for s in specs],
                "replaced": [s.name for s in specs if s.name in existing and s.name in fresh],
                "unchanged": [s.name for s in specs if s.name in existing and s.name not in fresh],
                "version": self.pipeline.registry.version, **({"notes": notes} if notes else {})}

    def _op_unregister(self, request: dict, _reply: Any) -> dict:
        """`name`, or `names` (several, e.g. all of a file's): removed as one change, all or nothing (their types are
        checked before: CONTROL_OPS)."""
        names = request.get("names")
        if names is None:
            if request.get("name") is None:
                raise ControlError('op "unregister" needs "name" (str) or "names" (a non-empty array of query names)')
            names = [request["name"]]
        elif request.get("name") is not None or not names or not all(type(n) is str for n in names):
            raise ControlError(f"op \"unregister\" takes \"names\" as a non-empty array of query names (str), "
                               f"without \"name\", got {wire_value(names)}")
        self.pipeline.unregister_queries(names)
        return {"version": self.pipeline.registry.version}

    def _op_list(self, _request: dict, _reply: Any) -> dict:
        # the model that answers every query listed, as each of their answers names it (`model`, `model_digest`):
        # a client checks the answers it holds against the queries' model without waiting for a new one
        return {"queries": [s.to_dict() for s in self.pipeline.registry.list()],
                "version": self.pipeline.registry.version, "model": self.config.model.model_id,
                "model_digest": self.model_digest}

    def _op_answers(self, request: dict, _reply: Any) -> dict:
        """A topic's published answers after a seq, from the kept history: how a subscriber fills a gap."""
        topic = request["topic"]
        if not topic.endswith("/"):
            raise ControlError(f"topic {quoted(topic)} is not an answer topic: topics end with \"/\", "
                               f"e.g. \"dir20/BTCUSDT/\"")
        after = request["after"]
        if after < 0:
            raise ControlError(f"op \"answers\" takes after >= 0 (the last seq you have; 0 for all), got {after}")
        limit = request["limit"] if request.get("limit") is not None else MAX_ANSWERS_PER_FETCH
        if not 1 <= limit <= MAX_ANSWERS_PER_FETCH:
            raise ControlError(f"op \"answers\" takes a limit from 1 to {MAX_ANSWERS_PER_FETCH}, "
                               f"got {wire_value(limit)}")
        # a topic begun past seqs forgotten (first_seq > 1) had no answer before its first: none is missing there
        first_seq = self.pipeline.cache.first_seq(topic)
        answers, complete = self.pipeline.history.after(topic, max(after, first_seq - 1), limit)
        last_seq = self.pipeline.cache.last_seq(topic)
        if not answers and last_seq is not None and last_seq > after:  # published, and none of them kept now
            complete = False
        self.counters["answer_fetches"] += 1
        return {"answers": answers, "complete": complete, "epoch": self.epoch, "last_seq": last_seq,
                "oldest_seq": self.pipeline.history.oldest_seq(topic), "first_seq": first_seq}

    def _op_topics(self, request: dict, _reply: Any) -> dict:
        """The answer topics published on, with their last seq: how a client that was away finds topics that
        began meanwhile (a new stream's answers), which no subscription of its own names yet."""
        prefix, after = (request.get(key) or "" for key in ("prefix", "after"))
        found = self.pipeline.cache.topics(prefix, after, MAX_TOPICS_PER_REPLY + 1)
        truncated = len(found) > MAX_TOPICS_PER_REPLY
        if truncated:
            found.pop(max(found))
        return {"topics": found, "truncated": truncated, "epoch": self.epoch}

    def _op_stats(self, _request: dict, _reply: Any) -> dict:
        self._refresh_snapshot()
        return {"stats": self._snapshot}

    def _held(self, kept: str) -> tuple[list[str], int]:
        """The first streams this process holds of the stream table's ``kept`` ones (`derivatives`, or those its model
        did not train on, `not_trained_on`: `health`'s caveats name three) and how many it holds: kept by the table
        as streams come and go, so a health call does not walk every stream held."""
        encoders = getattr(self.pipeline, "encoders", None)
        held = getattr(encoders, kept) if encoders is not None else {}
        return list(itertools.islice(held, 3)), len(held)

    def _op_health(self, _request: dict, _reply: Any) -> dict:
        """``serving``; ``degraded`` with ``shards_down`` (a shard restored after a loss, or failed), ``log_problem``
        (the logs cannot be written, until a write succeeds again) or ``answers_stale`` (limits.max_answer_age_s);
        with ``behind``, ``lag_s`` and ``answer_age_s`` always, so one call decides readiness (readiness.py)."""
        down = self.pipeline.shards_down()
        data = getattr(self.pipeline, "data", None)
        problem = data.items.problem if data is not None else None
        fresh = self._freshness(time.time())
        return {"status": "degraded" if down or problem or fresh["answers_stale"] else "serving",
                "uptime_s": time.time() - self.started_at, "behind": self.pipeline.behind,
                "lag_s": age_said(self.pipeline.lag_s()), **fresh,
                "streams": self.pipeline.stream_count, "model": self.config.model.model_id,
                "protocol": WIRE_PROTOCOL, **release_fields(), "epoch": self.epoch,
                "zero_bid": self.config.limits.zero_bid,  # (a feed reading 0 bids as prices says a mismatch up front)
                # how the model's training read prices: `feed replay` reads its files alike unless told otherwise
                **({"reading": reading} if (reading := trained_prices(self.config.model.path)) else {}),
                # ... of which the offset this service adds to every wire tick's prices itself: a feed sends without
                **({"ingest_price_offset": reading["price_offset"]} if "price_offset" in reading else {}),
                **({"shards_down": down} if down else {}), **({"log_problem": problem} if problem else {}),
                # the model's identity (model_digest.py), and what changed in its files since the logged answers
                "model_digest": self.model_digest,
                **({"model_changed": changed} if (changed := getattr(data, "model_changed", None)) else {}),
                **self._feed_warnings(),  # (clocks ahead, two clocks interleaving: feed_clocks.py)
                **self._caveats(self.pipeline.registry.list(), derivatives=self._held("derivatives"),
                                not_trained=self._held("not_trained_on"))}
