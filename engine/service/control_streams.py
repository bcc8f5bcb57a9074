"""The control ops about streams (docs/wire-protocol.md, "Control"): `streams` (each stream's last accepted tick,
where a feed resumes; the refused ones, and why) and `forget` (drop a stream from every layer, durably). A mixin of
the Server's, as ControlOps is."""

from __future__ import annotations

import sys
import time
from collections import OrderedDict
from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import Any

from connectors.stream_renames import StreamRenames
from connectors.ticks import utc_text, wire_value
from engine.service.control_requests import (ControlBusy, ControlError, ControlUnknownStream, asked_stream,
                                             held_name)
from engine.service.forgotten_refusals import ForgottenRefusals
from engine.service.pipeline import StreamBusy, TickPipeline
from engine.service.placed_feeds import PlacedFeeds
from engine.service.rejections import REFUSED_HOLDER, forgotten_refusal, no_accepted_tick
from engine.service.sharded import ShardedPipeline
from engine.service.ticklog import LogWriteError
from engine.stream_patterns import did_you_mean
from engine.quoting import quoted

MAX_STREAMS_PER_REPLY = 10_000
# `streams`' orders (review380 #10: the 10 stalest of 3,000 streams meant fetching all 3,000, 1.6 MB): the most idle,
# the longest waiting for a forward, the most ticks first; by name as ever. A key's ties go by name.
STREAM_ORDERS = ("name", "idle", "waiting", "ticks")
FORGET_NAMES_SAID = 5  # a `forget` of many streams: the names its log line and reply name (the count says the rest)


class StreamOps:
    """`streams` and `forget`, and why a stream the engine holds nothing of was refused (a mixin: the server's
    pipeline and its memory of refused streams)."""

    pipeline: TickPipeline | ShardedPipeline
    started_at: float
    _refused_streams: OrderedDict[str, list]  # stream -> [ticks refused, the error]
    _refused_forgotten: int  # refused streams that fell out of _refused_streams (the oldest first)
    _forgotten_refusals: ForgottenRefusals  # ... their names (a bounded filter)
    placed_feeds: PlacedFeeds  # (IngestHolding's) feeds placed by `streams` with drain, by the tag it gives them
    _read_before_placing: Callable[[], None]  # (IngestReading's) the ingest sockets' queued messages, read
    _stream_feed: Callable[[str], dict[str, Any]]  # (FeedClocks')
    stream_renames: StreamRenames  # (IngestHolding's) a name asked for read as live ingest reads its ticks'

    def _why_refused(self, stream: str) -> str | None:
        """Why ``stream``, which the engine holds nothing of, holds nothing when its ticks were refused: how many and
        the first why, while remembered; once fallen out of that memory, that it was refused earlier (review336 #8:
        "never seen"). None for a name never refused."""
        if stream in self._refused_streams:
            return no_accepted_tick(stream, *self._refused_streams[stream])
        if stream in self._forgotten_refusals:
            return forgotten_refusal(stream, self._refused_forgotten, self._forgotten_refusals.false_match)
        return None

    def _op_streams(self, request: dict, _reply: Any) -> dict:
        """Each stream's last accepted tick (ts and count): where a feed resumes after the service restarted. With
        ``drain: true`` (a feed placing itself) the messages already queued on ingest are read first, and the reply
        gives a ``tag`` for the placed feed's messages: the placement is kept under it, and what the feed sends
        again of ticks read after the reply is left out (placed_feeds.py)."""
        names = request.get("streams")
        if names is not None and (not all(type(n) is str for n in names) or len(names) > MAX_STREAMS_PER_REPLY):
            wrong = next((f"{wire_value(n)} at [{i}]" for i, n in enumerate(names) if type(n) is not str), None)
            got = f"an array with {wrong}" if wrong else f"an array of {len(names)}"
            raise ControlError(f"op \"streams\" takes \"streams\" as an array of at most {MAX_STREAMS_PER_REPLY} "
                               f"stream names (str; or nil: every stream), got {got}")
        after = request.get("after") or ""
        if after and names is not None:
            raise ControlError("op \"streams\" takes \"streams\" (the names to look up) or \"after\" (a page of every "
                               "stream), not both: both were given")
        order, limit = _stream_order(request, after)
        # each name asked, as the stream its ticks go to (a venue's name ingest.rename renames: review391 #6, the
        # feed's resume found nil, "never seen", for every stream it sent under its own names)
        held_as = {name: held_name(name, self.pipeline.encoders, self.stream_renames.renamed) for name in names or ()}
        names = list(dict.fromkeys(held_as.values())) if names is not None else None
        drain = request.get("drain")
        if drain:  # (once the request is checked: a refused one reads nothing)
            self._read_before_placing()
        if order == "name" and limit is None:
            known = self.pipeline.encoders.accepted(names, limit=MAX_STREAMS_PER_REPLY + 1, after=after,
                                                    now_ns=time.time_ns())
            truncated = names is None and len(known) > MAX_STREAMS_PER_REPLY
            if truncated:
                known.pop(max(known))
            matched = len(known)
        else:  # every stream (or every name given) weighed, the first `limit` of the order kept: a small reply
            known, matched = self._ordered(names, after, order, min(limit or MAX_STREAMS_PER_REPLY,
                                                                    MAX_STREAMS_PER_REPLY))
            truncated = matched > len(known)
        # (a listing of every stream from its start: the streams absent from it hold none)
        tag = self.placed_feeds.place(known, complete=names is None and not after and not truncated) if drain else None
        for name, entry in known.items():  # what an answer computed now attends: fewer tokens after a roll
            if entry is not None:  # ... whether its KV is in the pool: an evicted one's next ask pays a rebuild,
                # ... and what of it waits for a forward, and since when: which names are behind
                entry.update(self.pipeline.context_of(name), **self.pipeline.kv_of(name),
                             **self.pipeline.backlog_of(name), **self._stream_feed(name))  # (feed_clocks.py)
                if (fed_by := self.pipeline.encoders.fed_by.get(name)) is not None:  # (a feed's other publisher)
                    entry["fed_by"] = fed_by
                if superseded := self.placed_feeds.superseded(name):  # (... and its ticks left out for another's)
                    entry["superseded"] = superseded
                if sent_twice := self.placed_feeds.sent_twice(name):  # (... or a placed feed's, as sent twice)
                    entry["sent_twice"] = sent_twice
        # a name asked for that admission turned away (and the engine holds nothing of): why, beside its nil
        refused = {name: self._refused_entry(name)
                   for name in names or () if known.get(name) is None and name in self._refused_streams}
        # ... and one refused whose refusal fell out of that memory: that it was, not nil alone ("never seen")
        forgotten = {name: {"error": self._why_refused(name)} for name in names or ()
                     if known.get(name) is None and name not in refused and name in self._forgotten_refusals}
        if any(name != stream for name, stream in held_as.items()):  # answered under the names asked
            known, refused, forgotten = (_under_names_asked(found, held_as) for found in (known, refused, forgotten))
        return {"streams": known, "truncated": truncated, "uptime_s": time.time() - self.started_at,
                **({"matched": matched} if order != "name" or limit is not None else {}),
                **({"tag": tag} if tag is not None else {}),
                **({"refused": refused} if refused else {}),
                **({"refused_forgotten": forgotten} if forgotten else {}),
                **(self._refused_listing() if names is None and not after else {}),
                **(self._still_refused_at_start() if names is None else {})}

    def _ordered(self, names: list[str] | None, after: str, order: str, limit: int
                 ) -> tuple[dict[str, dict[str, Any] | None], int]:
        """The first ``limit`` streams (of ``names``, or every one past ``after``) in ``order``, and how many there
        were: each weighed by its own entry (a never-seen name given last), only the kept ones completed."""
        every = self.pipeline.encoders.accepted(names, after=after, now_ns=time.time_ns())
        uptime_s = time.time() - self.started_at

        def weight(name: str) -> tuple:
            entry = every[name]
            if entry is None:
                return (1, 0.0, name)
            if order == "idle":  # (none since the start: quiet for the whole uptime, a restored stream)
                idle = entry.get("idle_s")
                return (0, -(uptime_s if idle is None else idle), name)
            if order == "waiting":
                return (0, -(self.pipeline.backlog_of(name).get("waiting_s") or 0.0), name)
            if order == "ticks":
                return (0, -entry["ticks"], name)
            return (0, 0.0, name)

        kept = sorted(every, key=weight)[:limit]
        return {name: every[name] for name in kept}, len(every)

    def _forget_many(self, request: dict) -> dict:
        """`forget` of several streams (review380 #13: a scanner's universe churns, and 3,000 names took 3,000
        round trips): ``streams``, exact names, every one known or none is dropped (a typo drops nothing); or
        ``pattern``, a glob on the names held (expired ones included), which a client sends only when asked for
        one (the CLI's --glob: `FG001*` as a name is refused as unknown), matching at least one. At most
        MAX_STREAMS_PER_REPLY a request (``remaining``: how many more match; send it again). ``dry_run``: what
        would go, nothing dropped. A stream with data waiting is left (``busy``: its name -> why), the rest go."""
        names, pattern, dry_run = request.get("streams"), request.get("pattern"), request.get("dry_run")
        encoders = self.pipeline.encoders
        if pattern is not None:
            if names is not None or not pattern:
                raise ControlError(f"op \"forget\" takes pattern as a non-empty str (a glob: * ? [..]), without "
                                   f"\"streams\", got {wire_value(pattern)}")
            matched = [name for name in encoders.held_names() if fnmatchcase(name, pattern)]
            if not matched:
                raise ControlUnknownStream(f"no stream held matches {quoted(pattern)}: nothing to forget "
                                           f"(`flashtick streams` lists the streams the engine holds)")
        else:
            if not names or len(names) > MAX_STREAMS_PER_REPLY or not all(type(n) is str for n in names):
                raise ControlError(f"op \"forget\" takes \"streams\" as an array of 1 to {MAX_STREAMS_PER_REPLY} "
                                   f"stream names (str), got {wire_value(names)}")
            renamed = self.stream_renames.renamed  # (as one name is: the venue's name finds its renamed stream)
            matched = list(dict.fromkeys(asked_stream({"stream": n}, encoders, renamed) for n in names))
            known = encoders.accepted(matched)
            unknown = [name for name in matched if known[name] is None]
            if unknown:  # none dropped: a list with a typo in it is a mistake to fix, not a partial success
                said = ", ".join(quoted(n) for n in unknown[:FORGET_NAMES_SAID])
                more = f" and {len(unknown) - FORGET_NAMES_SAID} more" if len(unknown) > FORGET_NAMES_SAID else ""
                raise ControlUnknownStream(f"{len(unknown)} of the {len(matched)} streams given are not known "
                                           f"({said}{more}): nothing forgotten" + did_you_mean(unknown, encoders))
        now, remaining = matched[:MAX_STREAMS_PER_REPLY], max(0, len(matched) - MAX_STREAMS_PER_REPLY)
        if dry_run:
            return {"matched": len(matched), "streams": now[:FORGET_NAMES_SAID], "dry_run": True}
        forgotten, busy, ticks = [], {}, 0
        for stream in now:
            held = encoders.accepted([stream])[stream]
            try:
                self.pipeline.forget_stream(stream)
            except StreamBusy as e:
                busy[stream] = str(e)
                continue
            except LogWriteError as e:  # the log refuses every record alike: the rest are not tried
                raise ControlError(f"{len(forgotten)} streams forgotten, then {quoted(stream)} was not: the tick "
                                   f"log refused the record that keeps it forgotten across a restart ({e})") from None
            forgotten.append(stream)
            ticks += held["ticks"]
            if self._refused_streams.pop(stream, None) is not None:
                encoders.names.discard(stream, REFUSED_HOLDER)
        said = ", ".join(quoted(n) for n in forgotten[:FORGET_NAMES_SAID])
        what = f"matching {quoted(pattern)}" if pattern is not None else "named"
        print(f"flashtick: forgot {len(forgotten)} streams {what} at a control client's request (op forget; "
              f"{said}{', ...' if len(forgotten) > FORGET_NAMES_SAID else ''}): their {ticks} ticks' sessions, "
              f"answers and ordering guards dropped" + (f"; {len(busy)} left, data waiting on them" if busy else ""),
              file=sys.stderr, flush=True)
        return {"forgotten": len(forgotten), "streams": forgotten[:FORGET_NAMES_SAID], "ticks": ticks,
                "remaining": remaining, **({"busy": busy} if busy else {})}

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
        real feed as ts_backwards. Said in the log, with what the stream held. With ``streams`` (exact names) or
        ``pattern`` (a glob, fnmatch's, on the names held) in place of ``stream``: several (forget_many)."""
        selectors = [key for key in ("stream", "streams", "pattern") if request.get(key) is not None]
        if len(selectors) > 1:  # (review406 #3: `stream` beside `pattern` was ignored, and the pattern dropped all)
            named = " and ".join(quoted(key) for key in selectors)
            raise ControlError(f"op \"forget\" takes one of \"stream\", \"streams\" or \"pattern\", not {named} "
                               f"together: which streams go would be a guess")
        if selectors and selectors[0] != "stream":
            return self._forget_many(request)
        # (a '/' not renamed, an NFD name: refused with their hint)
        stream = asked_stream(request, self.pipeline.encoders, self.stream_renames.renamed)
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


def _under_names_asked(found: dict[str, dict[str, Any] | None], held_as: dict[str, str]
                       ) -> dict[str, dict[str, Any] | None]:
    """``found`` (stream -> its entry) keyed by the names asked (name -> the stream it is), in their order; a
    renamed name's entry says its stream as `stream`."""
    return {name: found[stream] if found[stream] is None or name == stream else {**found[stream], "stream": stream}
            for name, stream in held_as.items() if stream in found}


def _stream_order(request: dict, after: str) -> tuple[str, int | None]:
    """`streams`' ``sort`` (one of STREAM_ORDERS; nil: by name) and ``limit`` (an int >= 1; nil: a page of
    MAX_STREAMS_PER_REPLY), refused with what is accepted. An order other than by name weighs every stream, so it
    pages by ``limit``, not by ``after``."""
    order = request.get("sort") if request.get("sort") is not None else "name"
    if order not in STREAM_ORDERS:
        raise ControlError(f"op \"streams\" takes sort as one of {', '.join(STREAM_ORDERS)} (idle: the most idle "
                           f"first; waiting: the longest waiting for a forward; ticks: the most ticks), or nil "
                           f"(by name), got {wire_value(order)}")
    limit = request.get("limit")
    if limit is not None and limit < 1:
        raise ControlError(f"op \"streams\" takes limit as an int >= 1 (the first N streams of the order), or nil, "
                           f"got {wire_value(limit)}")
    if after and order != "name":
        raise ControlError(f"op \"streams\" takes \"after\" (a page of every stream by name) or sort {order!r} "
                           f"with limit, not both: both were given")
    return order, limit
