"""The service's own topics on its answers socket, beside the queries' answer topics: `_rejects/` carries each tick
it refused, `_heartbeat/` its heartbeats. One definition for the service that publishes them and the clients that
subscribe to them (a feed's RejectWatch, the answer subscribers); it sits in connectors because connectors sit
below the service.
"""

REJECTS_TOPIC = "_rejects/"
HEARTBEAT_TOPIC = "_heartbeat/"

# A message framed [topic, ticks] has its topic echoed in each of its rejections on `_rejects/` (key `topic`), so a
# sender that tags its messages (`flashtick feed` does: FeedClient's ``tag``) tells its own rejections from those of
# another publisher of the same stream; only a short printable ASCII topic is echoed, never arbitrary bytes
MAX_ECHOED_TOPIC = 64


def echoed_topic(frame: bytes) -> str | None:
    """The text a message's topic frame is echoed as in its rejections; None for one not echoed (too long, not
    printable ASCII)."""
    if not 0 < len(frame) <= MAX_ECHOED_TOPIC or not all(0x20 <= b < 0x7F for b in frame):
        return None
    return frame.decode("ascii")
