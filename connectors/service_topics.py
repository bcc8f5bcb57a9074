"""The service's own topics on its answers socket, beside the queries' answer topics: `_rejects/` carries each tick
it refused, `_heartbeat/` its heartbeats. One definition for the service that publishes them and the clients that
subscribe to them (a feed's RejectWatch, the answer subscribers); it sits in connectors because connectors sit
below the service.
"""

from __future__ import annotations

from typing import Any

REJECTS_TOPIC = "_rejects/"
HEARTBEAT_TOPIC = "_heartbeat/"

# A message framed [topic, ticks] has its topic echoed in each of its rejections on `_rejects/` (key `topic`), so a
# sender that tags its messages (`flashtick feed` does: FeedClient's ``tag``) tells its own rejections from those of
# another publisher of the same stream; only a short printable ASCII topic is echoed, never arbitrary bytes
MAX_ECHOED_TOPIC = 64


def rejects_topic(tag: str | None) -> str:
    """The topic a message's rejections go out on: `_rejects/TAG/` for a message framed [TAG, ticks] whose TAG is
    echoed (echoed_topic), else `_rejects/`. Under the one prefix, so a subscriber of `_rejects/` takes every
    publisher's, and a feed handler subscribing `_rejects/TAG/` takes its own alone, filtered by ZeroMQ on the
    service's side (review308 #9: N venue handlers each decoded every venue's rejections)."""
    return REJECTS_TOPIC if tag is None else f"{REJECTS_TOPIC}{tag}/"


def echoed_topic(frame: bytes) -> str | None:
    """The text a message's topic frame is echoed as in its rejections; None for one not echoed (too long, not
    printable ASCII)."""
    if not 0 < len(frame) <= MAX_ECHOED_TOPIC or not all(0x20 <= b < 0x7F for b in frame):
        return None
    return frame.decode("ascii")


# What one message's rejections publish is bounded whatever its ticks name, so a 1 MiB list of bad ticks cannot flood
# `_rejects/` (every rejection is counted in stats either way): its first MAX_REJECTS_PER_MESSAGE one by one, then
# one entry per (reason, stream) for the first MAX_SUMS_PER_MESSAGE such pairs, so a feed's message (`flashtick feed`
# sends 256 ticks at most) is still told stream by stream; then one entry per reason for the rest, which may name a
# different stream each (review207 #1: 21,000 streams made 21,000 entries), quoting STREAM_SAMPLE of them
MAX_REJECTS_PER_MESSAGE = 100
MAX_SUMS_PER_MESSAGE = 200
STREAM_SAMPLE = 10


def published_rejections(rejections: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What `_rejects/` carries for one message (see above): at most MAX_REJECTS_PER_MESSAGE + MAX_SUMS_PER_MESSAGE
    entries plus one per reason. A summing-up entry is the first one's (index, error, topic) with `count`, the
    ticks it stands for; one per reason has no `stream` but `streams` (how many distinct streams it stands for)
    and `stream_sample` (the first STREAM_SAMPLE of them)."""
    if len(rejections) <= MAX_REJECTS_PER_MESSAGE:
        return rejections
    sums: dict[tuple[str, str | None], dict[str, Any]] = {}
    per_reason: dict[str, dict[str, Any]] = {}
    streams: dict[str, set[str]] = {}  # reason -> the distinct streams its entry stands for
    for rejection in rejections[MAX_REJECTS_PER_MESSAGE:]:
        count, stream = rejection.get("count", 1), rejection.get("stream")
        key = (rejection["reason"], stream)
        if key in sums or len(sums) < MAX_SUMS_PER_MESSAGE:
            sums.setdefault(key, {**rejection, "count": 0})["count"] += count
            continue
        entry = per_reason.setdefault(key[0], {k: v for k, v in rejection.items() if k != "stream"} | {
            "count": 0, "streams": 0, "stream_sample": []})
        entry["count"] += count
        named = streams.setdefault(key[0], set())
        if stream is not None and stream not in named:
            named.add(stream)
            entry["streams"] += 1
            if len(entry["stream_sample"]) < STREAM_SAMPLE:
                entry["stream_sample"].append(stream)
    return rejections[:MAX_REJECTS_PER_MESSAGE] + list(sums.values()) + list(per_reason.values())
