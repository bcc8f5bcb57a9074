"""`flashtick subscribe`: print the answers a running service publishes, with notes on what a prefix matches,
gaps in a topic's seqs, changes of the registered queries and heartbeats gone quiet.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from typing import Any

from engine.quoting import quoted
from engine.service.cli_common import curve_keys, printable_json


def cmd_subscribe(args: argparse.Namespace) -> None:
    from connectors.service_topics import HEARTBEAT_TOPIC
    from engine.service.client import AnswerSubscriber

    slashed = _slashed_notes(args)
    # heartbeats come too (shown only when a prefix asks for them): whether the service is there is said, not guessed
    shown_beats = any(HEARTBEAT_TOPIC.startswith(prefix) for prefix in args.topics)
    with AnswerSubscriber(args.endpoint, [*args.topics, *([] if shown_beats else [HEARTBEAT_TOPIC])],
                          **curve_keys(args)) as sub:
        watch = _Watch(args, _wait_ready(args, sub), slashed)
        printer = _AnswerPrinter(args)
        seen = 0
        while args.count is None or seen < args.count:
            message = sub.recv(timeout_s=1.0)
            now = time.monotonic()
            if message is not None and message[0].startswith(HEARTBEAT_TOPIC):
                watch.heartbeat(now, message[1])
                if not shown_beats:
                    continue
            if message is None:
                watch.nothing(sub, now, seen)
                continue
            seen += 1
            printer.show(*message)


SUBSCRIBE_QUIET_S = 5.0  # no heartbeat this long: said; no message twice as long: how to list the topics, said


def _slashed_notes(args: argparse.Namespace) -> dict[str, str]:
    """The notes on prefixes that name a stream with a '/' (_slashed_stream_note), said now when the registered
    queries' topics show none starts so; those left (no registered topics to ask) are said only if nothing comes."""
    from queries.answer_topics import topic_may_start

    slashed = {prefix: note for prefix in args.topics if (note := _slashed_stream_note(prefix))}
    if slashed and (templates := _topic_templates(args)) is not None:
        for prefix, note in slashed.items():  # a query's own `topic` may put a '/' there: `alerts/{query}/{stream}/`
            if not any(topic_may_start(prefix, template, query) for query, template in templates):
                print(f"flashtick subscribe: note: {note} (no registered query's topic starts so)", file=sys.stderr,
                      flush=True)
        slashed = {}  # (else said only when nothing comes: a query's topic cannot be told from here)
    return slashed


def _wait_ready(args: argparse.Namespace, sub: Any) -> float | None:
    """When the first heartbeat came (time.monotonic), or None (said) when none came within SUBSCRIBE_QUIET_S: a
    wrong endpoint (or a service not up yet) is said, not waited on in silence; it waits on all the same."""
    try:
        sub.wait_ready(timeout_s=SUBSCRIBE_QUIET_S)
        return time.monotonic()
    except TimeoutError as e:
        if (refused := sub.refused()) is not None:
            raise PermissionError(f"{args.endpoint} refused the subscription: {refused}") from None
        print(f"flashtick subscribe: note: {e}; waiting on (Ctrl-C stops)", file=sys.stderr, flush=True)
        return None


class _Watch:
    """What `subscribe` notices between answers and says on stderr: heartbeats gone quiet and back, the registered
    queries changing, and nothing published on the prefixes while the service is up."""

    def __init__(self, args: argparse.Namespace, beat_at: float | None, slashed: dict[str, str]) -> None:
        self.args, self.slashed = args, slashed
        self.beat_at = beat_at  # when the last heartbeat came (None: none yet)
        self.quiet_since, self.told, self.lost = time.monotonic(), False, False
        self.registry: int | None = None  # the registry version the last heartbeat carried

    def heartbeat(self, now: float, payload: Any) -> None:
        if self.lost:
            print("flashtick subscribe: note: heartbeats are back", file=sys.stderr, flush=True)
        self.beat_at, self.lost = now, False
        self.registry = _note_registry_change(self.registry, payload)

    def nothing(self, sub: Any, now: float, seen: int) -> None:
        """No message this second: a refusal ends it; heartbeats gone quiet, or nothing published, are said once."""
        args = self.args
        if (refused := sub.refused()) is not None:
            raise PermissionError(f"{args.endpoint} refused the subscription: {refused}")
        if self.beat_at is not None and not self.lost and now - self.beat_at > 2 * SUBSCRIBE_QUIET_S:
            self.lost = True  # the service stopped, or restarts: said once, and again when it is back
            print(f"flashtick subscribe: note: no heartbeat from {args.endpoint} for "
                  f"{2 * SUBSCRIBE_QUIET_S:g} s: the service stopped or is restarting; waiting on",
                  file=sys.stderr, flush=True)
        if (not self.told and seen == 0 and self.beat_at is not None
                and now - self.quiet_since > 2 * SUBSCRIBE_QUIET_S):
            self.told = True  # the service is there; a misspelt prefix matches nothing: say how to see what is
            print(f"flashtick subscribe: note: nothing published on {', '.join(map(quoted, args.topics))} in "
                  f"{2 * SUBSCRIBE_QUIET_S:g} s while the service is up: a topic is QUERY/STREAM/ "
                  f"unless its query sets its own `topic` (case-sensitive), published when its query's "
                  f"trigger fires; `flashtick topics` lists those published so far", file=sys.stderr,
                  flush=True)
            for note in self.slashed.values():
                print(f"flashtick subscribe: note: {note}", file=sys.stderr, flush=True)


class _AnswerPrinter:
    """Each message on stdout: a JSON line (--json), a line (a pipe), or a table redrawn in place (a terminal); with
    notes on stderr of seq gaps and of prefixes that match more streams than the one they name."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.live = not args.json and sys.stdout.isatty()  # a table redrawn in place; a pipe gets one line per message
        self.table: dict[str, dict] = {}
        self.title = ""
        self.last_seqs: dict[str, int] = {}
        self.widened: set[str] = set()  # the QUERY/STREAM prefixes said to match more streams than the one they name

    def show(self, topic: str, payload: Any) -> None:
        from engine.service.answer_display import format_line, render_table

        _note_gap(self.last_seqs, topic, payload)
        _note_wider_prefix(self.args.topics, topic, self.widened)
        if self.args.json:
            print(printable_json({"topic": topic, **payload}), flush=True)
        elif not self.live:
            print(format_line(topic, payload), flush=True)
        else:
            if "query" in payload:
                self.table[topic] = payload
            else:  # heartbeats and rejects: the latest one heads the table
                self.title = format_line(topic, payload)
            render_table(self.table, sys.stdout, self.title)


def _slashed_stream_note(prefix: str) -> str | None:
    """For a prefix that, read as a default topic QUERY/STREAM/, names a stream with a '/' (which no stream has): what
    to subscribe to instead (the name file replay gives it), else None."""
    from connectors.ticks import slash_hint

    query, _, stream = prefix.partition("/")
    stream = stream.rstrip("/")
    if "/" not in stream or not (hint := slash_hint(stream)):
        return None
    topic = query + "/" + stream.replace("/", "-") + "/"
    return f"{quoted(prefix)} names stream {quoted(stream)}{hint}: subscribe to {quoted(topic)}"


def _topic_templates(args: argparse.Namespace) -> list[tuple[str, str]] | None:
    """The registered queries' (name, topic template), from the control socket; None when there is none to ask
    (--control '') or it does not answer soon."""
    from engine.service.client import ControlClient, ControlError

    if not args.control:
        return None
    try:
        with ControlClient(args.control, timeout_s=5, connect_timeout_s=2, **curve_keys(args)) as control:
            return [(spec["name"], spec["topic"]) for spec in control.call("list")["queries"]]
    except ControlError:
        return None


def _note_wider_prefix(prefixes: list[str], topic: str, said: set[str]) -> None:
    """A prefix naming a query and a stream without the closing '/' (`dir5/ZNH6`) matches every stream whose name
    starts so: a futures outright's prefix gets its calendar spreads' answers too (`dir5/ZNH6-ZNM6/`). Said once per
    prefix, when such a topic first comes (for a prefix meant for a family, `dir5/ZN`, it says what was meant). The
    stream is the prefix's last part, the topic going on with its name's end and one '/': a query's own `topic`
    may put a '/' before it (`alerts/{query}/{stream}/`)."""
    for prefix in prefixes:
        _, slash, stream = prefix.rpartition("/")
        if (not slash or not stream or prefix in said or topic.startswith("_") or not topic.startswith(prefix)
                or topic == prefix + "/" or topic[len(prefix):].count("/") != 1 or not topic.endswith("/")):
            continue
        said.add(prefix)
        print(f"flashtick subscribe: note: {quoted(prefix)} is a topic prefix: it gets {quoted(topic)} too, and every "
              f"stream whose name starts with {quoted(stream)}; {quoted(prefix + '/')} is stream {quoted(stream)} "
              f"alone",
              file=sys.stderr, flush=True)


def _note_registry_change(known: int | None, heartbeat: Any) -> int | None:
    """stderr says when a heartbeat's registry_version moved since the last one: a query registered, replaced or
    unregistered, so a topic followed may have stopped or changed what it answers. Returns the version now known."""
    version = heartbeat.get("registry_version") if isinstance(heartbeat, dict) else None
    if type(version) is not int:  # (an older server's heartbeat carries none)
        return known
    if known is not None and version != known:
        print(f"flashtick subscribe: note: the registered queries changed (registry version {known} -> {version}): "
              f"a query registered, replaced or unregistered (`flashtick list` shows them)", file=sys.stderr,
              flush=True)
    return version


def _note_gap(last_seqs: dict[str, int], topic: str, payload: dict) -> None:
    """stderr says where a topic's seq jumped (answers PUB did not deliver: a slow reader, a reconnect, a restart),
    and how to fetch them; a plain SUB cannot get them back by itself (GaplessSubscriber does)."""
    seq = payload.get("seq") if isinstance(payload, dict) else None
    if topic.startswith("_") or type(seq) is not int:
        return
    last = last_seqs.get(topic)
    if last is not None and seq > last + 1:
        print(f"flashtick subscribe: note: {topic} went from seq {last} to {seq}: {seq - last - 1} answers not "
              f"received here (`flashtick answers {shlex.quote(topic)} --after {last}` fetches them)", file=sys.stderr,
              flush=True)
    last_seqs[topic] = max(seq, last or 0)
