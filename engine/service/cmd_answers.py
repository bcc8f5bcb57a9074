"""The service client commands that read answers: `get` (the cached one), `answers` (a topic's published ones
after a seq), `topics` (where answers are published) and `ask` (a query asked now).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from typing import Any

from engine.quoting import quoted
from engine.service.cli_common import context_text, control_client, printable_json


def cmd_get(args: argparse.Namespace) -> int:
    # an unknown query's name is the service's error (exit 2), and so is a name no stream can have (`a/b`: the
    # service's check, control_requests.asked_stream, the one `ask` has)
    with control_client(args) as control:
        reply = control.call("get", stream=args.stream, query=args.query)
    answer = reply["answer"]
    if answer is None:
        if reply.get("expired"):
            # (an expired stream's latest answers are kept with its context: none here means none was computed)
            print(f"flashtick get: no cached answer of {args.query} on {args.stream}: the stream expired after "
                  f"scheduler.stream_idle_s without data before {args.query} answered it; its context is kept, and "
                  f"its next tick goes on from it", file=sys.stderr)
        elif reply.get("refused"):  # its ticks came, and were refused: not the feed's silence
            print(f"flashtick get: {reply['refused']}", file=sys.stderr)
        elif reply.get("replaced"):  # the topic has answers, of the spec the query had before
            topic, seq = reply["replaced"]["topic"], reply["replaced"]["seq"]
            print(f"flashtick get: no answer of {args.query} on {args.stream} since {args.query} was replaced after "
                  f"seq {seq} of {topic}: its new spec has not answered yet (a replace drops the old spec's cached "
                  f"answers; `flashtick answers {shlex.quote(topic)}` lists those still kept)", file=sys.stderr)
        elif reply.get("stream_known") is False:
            print(f"flashtick get: no stream {quoted(args.stream)} has sent data (`flashtick streams` lists those that "
                  f"have)", file=sys.stderr)
        elif reply.get("matches_stream") is False or reply.get("never_cached"):  # none, however long one waits
            print(f"flashtick get: {reply['note']}", file=sys.stderr)
        else:
            print(f"flashtick get: no cached answer of {args.query} on {args.stream} yet", file=sys.stderr)
        return 1
    print(printable_json(answer, indent=2))
    say_caveats("get", reply)
    if reply.get("refused"):  # an answer from before this start: the service holds none of the stream's ticks now
        print(f"flashtick get: {reply['refused']}: this answer (seq {answer.get('seq')}, version "
              f"{answer.get('version')}) is from before, not about ticks the service holds now", file=sys.stderr)
        return 1
    return 0


def cmd_answers(args: argparse.Namespace) -> int:
    """JSON lines, oldest first: the kept answers of the topic after --after, at most --limit of them (or the newest
    --last, or --all), paged through the op's limit. Exit status (the help's epilog says it): 0 when it printed
    some, and with --after when the topic's last seq is --after (nothing newer yet: a poll's usual result); 1 when
    it printed none otherwise (said)."""
    from engine.service.control_client import FETCH_LIMIT

    limit = None if args.all else args.last or args.limit
    printed, after = 0, args.after or 0
    with control_client(args) as control:
        topic = _answer_topic(control, args.topic)
        if topic is None:
            return 1
        if args.last is not None:  # the newest N: from N before the topic's last seq (seqs have no gaps)
            newest = control.call("answers", topic=topic, after=after, limit=1)["last_seq"] or 0
            after = max(after, newest - args.last)
        while True:
            wanted = FETCH_LIMIT if limit is None else min(FETCH_LIMIT, limit - printed)
            reply = control.call("answers", topic=topic, after=after, limit=wanted)
            if printed == 0 and not reply["complete"]:
                # (--last's own start is not a seq the user gave: none of the topic kept is said of all its seqs)
                asked = after if args.last is None else args.after or 0
                print(f"flashtick answers: {_not_kept(topic, asked, reply['oldest_seq'], reply['last_seq'])} (the "
                      f"service keeps the newest log.answers_keep answers of all topics in memory, and after a "
                      f"restart what the answer log's log.answers_retention_bytes kept)", file=sys.stderr)
            for answer in reply["answers"]:
                print(printable_json(answer), flush=True)
            printed += len(reply["answers"])
            if not reply["answers"] or reply["answers"][-1]["seq"] >= reply["last_seq"]:
                return 0 if printed else _no_answers(topic, after, reply["last_seq"], polled=args.after is not None)
            after = reply["answers"][-1]["seq"]
            if limit is not None and printed >= limit:
                given = f"--last {limit}" if args.last is not None else f"--limit {limit}"  # (--last: more came since)
                print(f"flashtick answers: printed {printed} ({given}); the topic has more, up to seq "
                      f"{reply['last_seq']}: --after {after} for the next ones, --last N for the newest, --all for "
                      f"every one", file=sys.stderr)
                return 0


def _not_kept(topic: str, after: int, oldest_seq: int | None, last_seq: int) -> str:
    """Which of the topic's answers after ``after`` are gone: those before the oldest kept, or (none kept) all of
    them, by count and seqs (seqs have no gaps)."""
    if oldest_seq is not None:
        return f"answers of {topic} before seq {oldest_seq} are no longer kept"
    count, seqs = last_seq - after, f"seq {last_seq}" if last_seq == after + 1 else f"seqs {after + 1}-{last_seq}"
    return (f"none of the {count} answer{'s' if count > 1 else ''} of {topic}" + (f" after seq {after}" if after
            else "") + f" ({seqs}) is kept any more")


def _no_answers(topic: str, after: int, last_seq: int | None, polled: bool) -> int:
    """Why `answers` printed nothing, on stderr, and its exit status: 0 for a poll (--after given) that is up to
    date, the topic's last seq its --after; else 1 (as `get` without an answer): a topic never published on, or an
    --after past its last seq (seqs of another epoch, or of another topic)."""
    if not last_seq:  # (0 or None: never published on; seqs start at 1. _answer_topic said so for a prefix)
        print(f"flashtick answers: no answer published on {quoted(topic)} (flashtick topics lists the topics)",
              file=sys.stderr)
        return 1
    if after == last_seq and polled:
        print(f"flashtick answers: nothing after seq {after} yet (the topic's last)", file=sys.stderr)
        return 0
    if after >= last_seq:  # (below it, the answers after it are no longer kept: said already)
        print(f"flashtick answers: nothing after seq {after}: the topic's last is {last_seq}" + (
            " (an --after past it: a seq of another epoch, the service restarted without its data directory, or of "
            "another topic)" if after > last_seq else ""), file=sys.stderr)
    return 1


def _answer_topic(control: Any, given: str) -> str | None:
    """The one topic `answers` reads for ``given``: a topic published on as it is; else a registered query's name
    (its topics, by its YAML's `topic`: `<query>/<stream>/` unless set) or a topic prefix (`dir20/`, or `dir20/SYN.A`
    without its '/') that names one published topic, that topic (said on stderr). None when it names none or
    several, said on stderr with the forms `answers` takes, built from the topics it names."""
    prefix = given if given.endswith("/") else given + "/"
    found = sorted(control.topics(prefix))
    if given in found or (not found and given.endswith("/")):
        return given  # (one never published on: _no_answers says so)
    if not found and "/" not in given:
        found = _query_topics(control, given)
    if len(found) == 1:
        print(f"flashtick answers: {quoted(given)} names the topic {quoted(found[0])}", file=sys.stderr)
        return found[0]
    if not found:
        print(f"flashtick answers: no answer published on a topic starting {quoted(prefix)}" + (
              f" nor by a query {quoted(given)}" if "/" not in given else "") + ": answers takes a topic as published, "
              "QUERY/STREAM/ or as its query's own `topic` makes it (flashtick topics lists them)", file=sys.stderr)
        return None
    shown = ", ".join(found[:5]) + (f", ... ({len(found)} in all)" if len(found) > 5 else "")
    shared = os.path.commonprefix(found)  # a query's own topic (`alerts/{query}/{stream}/`) is not under `given/`
    shared = shared[:shared.rfind("/") + 1] or prefix
    print(f"flashtick answers: {quoted(given)} names {len(found)} topics ({shown}): answers reads one whole topic, "
          f"e.g. `flashtick answers {shlex.quote(found[0])}`; `flashtick topics {shlex.quote(shared)}` lists them, "
          f"`flashtick subscribe {shlex.quote(shared)}` follows them all live", file=sys.stderr)
    return None


def _query_topics(control: Any, name: str) -> list[str]:
    """The topics published on by the registered query ``name`` whose YAML sets its own `topic` (a template with
    {query} and {stream}, no stream name having a '/'): none when no query is so named."""
    spec = next((q for q in control.call("list")["queries"] if q["name"] == name), None)
    if spec is None:
        return []
    rendered = spec["topic"].format(query=name, stream="\0")
    pattern = re.compile(re.escape(rendered).replace(re.escape("\0"), "[^/]+"))
    return sorted(t for t in control.topics(rendered.partition("\0")[0]) if pattern.fullmatch(t))


def cmd_topics(args: argparse.Namespace) -> None:
    """A line per topic (name order): topic, last seq, the latest answer's time; every page of the op."""
    from connectors.ticks import shown_name

    with control_client(args) as control:
        found = control.topics(args.prefix)
        own = _own_topic(control, args.prefix) if not found and not args.json else None
    if args.json:
        print(printable_json(found, sort_keys=True, indent=2))
        return
    for topic, info in found.items():  # (JSON keeps answer_ts null for these: a program tests for it)
        latest = (f"answer_ts {info['answer_ts']}" if info["answer_ts"] is not None else
                  "no cached answer (no registered query publishes on it now: its query was unregistered, or moved "
                  "to another topic)" if info.get("retired") else
                  "no cached answer (its stream was forgotten, or its query was replaced)")
        print(f"{shown_name(topic)}\tlast_seq {info['last_seq']}\t{latest}")
    if not found:
        where = f" on a topic starting {quoted(args.prefix)}" if args.prefix else ""
        print(f"flashtick topics: no answer published yet{where}{own or ''}", file=sys.stderr)


def _own_topic(control: Any, prefix: str) -> str | None:
    """For a prefix `NAME/` (or `NAME`) of a registered query that sets its own `topic`, where its topics are: ": query
    NAME publishes on alerts/NAME/{stream}/ (`flashtick topics alerts/NAME/`)"; else None."""
    name = prefix.removesuffix("/")
    if not name or "/" in name:
        return None
    spec = next((q for q in control.call("list")["queries"] if q["name"] == name), None)
    if spec is None or spec["topic"].format(query=name, stream="\0").startswith(prefix):
        return None
    head = spec["topic"].format(query=name, stream="\0").partition("\0")[0]
    own = spec["topic"].format(query=name, stream="{stream}")
    return f": query {quoted(name)} publishes on its own topic {quoted(own)}" + (
        f" (`flashtick topics {shlex.quote(head)}`)" if head else "")


def cmd_ask(args: argparse.Namespace) -> None:
    spec = ask_spec(args)
    with control_client(args) as control:
        if spec is not None:
            reply = control.call("ask", stream=args.stream, spec=spec)
        else:
            # a name no query is registered under but the model's codec asks (direction_5) is asked as it is by the
            # service, which says so in the reply's note
            reply = control.call("ask", stream=args.stream, query=args.query, max_stale_ticks=args.max_stale,
                                 kind=args.kind)
    if reply.get("note"):
        print(f"flashtick ask: {reply['note']}", file=sys.stderr)
    print(printable_json(reply["answer"], indent=2))
    say_caveats("ask", reply)
    how = [flag for flag in ("cached", "prepositioned", "gated") if reply.get(flag)]  # not computed for this ask
    age = _data_age(reply)
    if how:
        print(f"flashtick ask: answered from the service's {' and '.join(how)} answer (seq "
              f"{reply['answer'].get('seq')}), not computed now{age}", file=sys.stderr)
    elif context := context_text(reply, sep=""):  # (stdout stays the answer alone: a script reads it as JSON)
        print(f"flashtick ask: computed now over the stream's {context}{age}", file=sys.stderr)


def say_caveats(command: str, reply: dict) -> None:
    """The reply's caveats on reading its answer (reply_caveats.py), on stderr: stdout stays the answer alone."""
    for caveat in reply.get("caveats") or []:  # (a service before them sends none)
        print(f"flashtick {command}: caveat: {caveat.get('text')}", file=sys.stderr)


def _data_age(reply: dict) -> str:
    """How old an ask's answer's data is, and the engine's lag while it is behind, for its stderr line ('; data
    16.5 s old (the answered tick's ts); the engine is behind: lag 45.0 s'): "computed now" answers the last tick
    the engine has computed, seconds old while it is behind. '' from a server that does not say (an older one)."""
    age_ms = reply.get("data_age_ms")
    if age_ms is None:
        return ""
    age = (f"data {_duration(age_ms / 1000)} old (the answered tick's ts)" if age_ms >= 0 else
           f"the answered tick's ts {_duration(-age_ms / 1000)} ahead of the service's clock")
    # (`behind` beside `lag_s` in every reply; a service before it gave `lag_s` only while behind)
    behind = reply.get("behind", reply.get("lag_s") is not None)
    lag = f"; the engine is behind: lag {_duration(reply['lag_s'])}" if behind else ""
    return f"; {age}{lag}"


def _duration(seconds: float) -> str:
    """A time span as a reader takes it in: 12 ms, 16.5 s, 4.2 min, 3.0 h, 365 days."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    for unit, size in (("s", 1), ("min", 60), ("h", 3600)):
        if seconds < 120 * size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds / 86400:.0f} days"


ASK_SPEC_NAME = "ask"  # the name an ad-hoc --question is asked under (the answer's `query`)


def ask_spec(args: argparse.Namespace) -> dict[str, Any] | None:
    """The op's `spec` for ``--question`` (None for a query asked by name); a combination that asks nothing
    clear is an error before anything is sent (the parser's usage error: `check_usage`)."""
    answer_how = "--choices" if args.choices is not None else "--generate" if args.generate is not None else None
    if args.question is None:
        if answer_how is not None:
            raise ValueError(f"{answer_how} goes with --question TEXT (a free-text question of a text model)")
        if args.query is None:
            raise ValueError("give a query name (a registered query, or a question of the model's own) or "
                             "--question TEXT with --choices A B ... or --generate N")
        return None
    if args.query is not None:
        raise ValueError(f"give a query name ({quoted(args.query)}) or --question, not both")
    if answer_how is None:
        raise ValueError("--question needs how it is answered: --choices A B ... (the labels to choose among) "
                         "or --generate N (tokens to generate)")
    if args.kind is not None:
        raise ValueError("--kind is for a question of the model's own asked by name; --question is answered as "
                         "--choices or --generate say")
    if args.max_stale is not None:
        raise ValueError("--max-stale takes a registered query's cached answer; a --question is computed now")
    spec: dict[str, Any] = {"name": ASK_SPEC_NAME, "question": args.question}
    if args.choices is not None:
        return spec | {"kind": "choice", "choices": args.choices}
    return spec | {"kind": "generate", "max_tokens": args.generate}
