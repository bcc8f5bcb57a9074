"""Where a query's answers are published: its topic template, the rules it must pass, and which topics a prefix
subscription can reach.

A topic is a template over {query} and {stream} ending in '/', so prefix subscriptions are exact
(`DEFAULT_TOPIC`: `<query>/<stream>/`). Topics starting with '_' are the service's own (`RESERVED_TOPICS`): no
query may publish there. `check_topic` is the spec's check (queries/spec.py); `topic_may_start` serves `subscribe`,
which warns about a prefix no registered query's topic can start with.
"""

from __future__ import annotations

import re
import string
from functools import lru_cache
from typing import Any

from queries.limits import excerpt
from queries.spec_errors import fail
from queries.spec_values import wire_text

DEFAULT_TOPIC = "{query}/{stream}/"
RESERVED_TOPICS = ("_heartbeat/", "_rejects/")  # the service's own; every topic starting with '_' is reserved


def check_topic(topic: Any, query: str, several_streams: bool) -> None:
    """Refuses the topic template of the query named ``query`` unless answers can be published on it: it must name
    {stream} when the query matches ``several_streams`` (a glob or more than one name)."""
    if not isinstance(topic, str) or not topic.endswith("/"):
        raise fail("topic", f"topic must end with \"/\" so prefix subscriptions are exact, "
                            f"got {excerpt(topic)}")
    wire_text("topic", topic)
    if not topic.isprintable():  # the stream-name rule (connectors/ticks.py check_stream): a topic is
        bad = next(c for c in topic if not c.isprintable())  # printed by clients, an ESC or newline forges
        raise fail("topic", f"topic {excerpt(topic)} contains U+{ord(bad):04X} (a control, format or other "
                            f"non-printable character); topics must be printable, as stream names are")
    try:
        fields = list(string.Formatter().parse(topic))
    except ValueError as e:
        raise fail("topic", f"topic {excerpt(topic)} is not a valid template: {e}") from None
    used = set()
    for _, fname, spec, conv in fields:
        if fname is None:
            continue
        if fname not in ("query", "stream") or spec or conv:
            raise fail("topic", f"topic may only use the placeholders {{query}} and {{stream}}, got "
                                f"{{{fname}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}")
        used.add(fname)
    if "stream" not in used and several_streams:
        raise fail("topic", "topic must contain {stream} when the query matches more than one stream")
    _check_reserved(topic, query, fields)


def _check_reserved(topic: str, query: str, fields: list[tuple]) -> None:
    """Topics starting with '_' are the service's own (_heartbeat/, _rejects/): no answer may go there."""
    shown = topic.format(query=query, stream="{stream}")
    if shown.startswith("_"):
        raise fail("topic", f"topic {excerpt(shown)} starts with \"_\": topics starting with \"_\" are reserved "
                            f"for the service ({', '.join(RESERVED_TOPICS)})")
    if fields and fields[0][0] == "" and fields[0][1] == "stream":
        raise fail("topic", "topic must not start with {stream}: a stream named \"_...\" would publish on a "
                            "reserved topic; put a fixed prefix first, e.g. 'by_stream/{stream}/{query}/'")


def topic_may_start(prefix: str, template: str, query: str) -> bool:
    """Whether some topic that ``template`` renders for the query ``query`` and a stream name (no '/') starts with
    ``prefix``: a prefix subscription to it gets that query's answers (`alerts/q/XBT-EUR/` for
    `alerts/{query}/{stream}/`, which no default topic `<query>/<stream>/` can be)."""
    return _may_start(prefix, template.format(query=query, stream="\0").split("\0"))  # (no name or topic has NUL)


def _may_start(prefix: str, parts: list[str]) -> bool:
    """`topic_may_start` over a template cut at its {stream}s: the fixed text before each, then what follows."""
    fixed, after = parts[0], parts[1:]
    if len(prefix) <= len(fixed) or not after:
        return fixed.startswith(prefix)
    if not prefix.startswith(fixed):
        return False
    rest = prefix[len(fixed):]
    slash = rest.find("/")
    if slash < 0:  # the stream name may start with all of it
        return True
    return any(_may_start(rest[cut:], after) for cut in range(1, slash + 1))  # a stream name up to its first '/'


def renders(topic: str, template: str, query: str) -> bool:
    """Whether ``template`` renders ``topic`` for the query ``query`` and some stream name (no '/', not empty):
    whether ``topic`` is one of that query's topics (a removed query's topics are told from the others' by it)."""
    return _rendering(template, query).fullmatch(topic) is not None


@lru_cache(maxsize=1024)
def _rendering(template: str, query: str) -> re.Pattern[str]:
    """The pattern of every topic ``template`` renders for ``query``: its {stream}s one and the same name."""
    parts = template.format(query=query, stream="\0").split("\0")  # (no name or topic has NUL)
    stream = "(?P<stream>[^/]+)" if len(parts) > 1 else ""
    return re.compile(re.escape(parts[0]) + "".join(
        (stream if i == 0 else "(?P=stream)") + re.escape(part) for i, part in enumerate(parts[1:])))
