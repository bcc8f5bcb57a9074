"""The `limits` section of the service config: every size, count and time the service holds a client or a feed to,
and the socket options derived from them (the ingest high-water mark, the largest subscription).

MAX_LIMIT lives here: a limit must stay under it, and the loader's type hints (engine/service/config_keys.py) use it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from connectors.map_vocabulary import ZERO_BID_READINGS
from engine.quoting import quoted
from engine.service.config_error import ConfigError
from queries.limits import excerpt  # values as YAML writes them: got true, got null (not True, None)

WHEN_BEHIND = ("lag", "shed", "conflate")
INGEST_WIRE_FACTOR = 8  # the ingest socket reads messages up to this many times limits.max_message_bytes
MAX_LIMIT = 10**15  # far past any real limit, well inside a C long (a YAML 99999999999999999999999 is not)


@dataclass(frozen=True)
class LimitsSection:
    max_message_bytes: int = 1 << 20  # an ingest message larger than this is rejected (counted)
    ingest_hwm: int = 100_000  # messages queued per feed connection before ZeroMQ pushes back (or a SUB drops)
    # bytes one PUSH connection may queue at the ingest socket: its high-water mark is this over the largest message
    # the socket takes (ingest_wire_bytes), so a flood of large messages is pushed back, not held in memory
    ingest_queue_bytes: int = 256 << 20
    answers_hwm: int = 100_000  # per subscriber; past it ZeroMQ drops for that slow subscriber only
    heartbeat_s: float = 1.0
    max_ingest_per_step: int = 10_000  # messages drained between two forwards
    # service
    max_control_bytes: int = 4 << 20  # ZeroMQ drops the connection of a peer sending a larger control request
    # the longest subscription the answers socket reads: ZeroMQ drops the connection of a subscriber sending a longer
    # one (engine/service/subscriptions_held.py says why it is well past the longest topic)
    max_subscription_bytes: int = 64 << 10
    # bytes of replies the service holds for one control connection that is not reading them (beyond ZeroMQ's
    # queue of CONTROL_SNDHWM replies); past it a reply to it is dropped (counted as control_replies_dropped)
    control_queue_bytes: int = 16 << 20
    max_backlog_tokens: int = 1_000_000  # accepted tokens waiting for a forward before the engine is "behind"
    max_lag_s: float = 5.0  # ... or the oldest accepted tick (or an unread ingest message) waiting longer than this
    # `health` says degraded and /readyz 503 while ticks arrive and the newest answer is older than this (a query's
    # answers stopped coming: a stalled engine, a trigger that never fires); None: off (engine/service/readiness.py)
    max_answer_age_s: float | None = 60.0
    # /healthz (liveness) says 503 once the engine loop has not turned for this long: a forward, a tick-log roll or
    # a drain slice takes seconds at most; minutes is a stall that a restart (the supervisor's) ends
    stall_s: float = 120.0
    # lag: keep everything, say so (heartbeat, metric, warning); shed: refuse new ticks; conflate: keep every trade
    # and of each stream's quotes only the newest that arrived between two forwards
    when_behind: str = "lag"
    # on SIGTERM/SIGINT/SIGHUP, seconds from the signal to read the queue and compute, then exit: 7, so that a stop
    # (drain_s plus up to ~2 s of exiting, measured at load 20) ends inside `docker stop`'s 10 s before SIGKILL
    # (Kubernetes grants 30 s, systemd 90 s); it was 10, the grace itself (review337 #13)
    drain_s: float = 7.0
    max_waiting_asks: int = 1024  # asks waiting for a forward, all clients together; more are refused at once
    # new streams one ingest message may open, and all messages together a second (a burst of a second's worth):
    # a flood of new names must not stall the streams held (engine/service/new_stream_budget.py). Sized to take an
    # options chain's first snapshot whole (review321 #2: 4,096 lost 904 of a 5,000-quote one): a message of
    # max_message_bytes holds ~11,000 quotes (95 B each), and SPX's chain, 20,000+ contracts, comes in the first
    # second's messages; a new stream costs 8-13 KiB and ~1.3 ms of forward (docs/configuration.md, measured)
    max_new_streams_per_message: int = 16_384
    max_new_streams_per_s: float = 32_768.0
    # queries
    max_yaml_bytes: int = 256 << 10  # a query document (file or register request)
    max_yaml_nodes: int = 100_000  # nodes of a query document, every alias expanded
    max_queries: int = 1000  # standing queries registered at once
    max_topic_bytes: int = 256  # a query's topic, without the stream name
    # streams
    max_stream_bytes: int = 128  # longest stream name in UTF-8 bytes (the name rule: connectors/ticks.py check_stream)
    # a tick stamped further ahead of the service's wall clock than this is refused (ts_in_future): a tick accepted
    # ahead becomes its stream's last ts, and every real tick after it is refused as ts_backwards until the clock
    # passes it, while its answer reads younger than it is. 10 s: above the clock skew of hosts that keep time (NTP:
    # ms), so one bad stamp holds its stream back 10 s at most (review376 #1: a day let one tick an hour ahead refuse
    # the real feed for that hour). A venue's local time read as UTC is refused, its error naming this key. None: off
    max_ts_ahead_s: float | None = 10.0
    # a quote's 0 bid beside an ask above it: no_bid (TAQ's "no bid": a one-sided quote, refused as missing_field)
    # or price (an option nobody bids: taken, its mark ask / 2)
    zero_bid: str = "no_bid"

    @property
    def ingest_wire_bytes(self) -> int:
        """The largest message the ingest socket reads (ZeroMQ cuts a peer sending more off unread): well above
        max_message_bytes, so a message over it is still read and refused as `oversize`, with a reason."""
        return INGEST_WIRE_FACTOR * self.max_message_bytes

    @property
    def longest_topic_bytes(self) -> int:
        """The longest topic a query can publish on: its topic, a `/`, the stream's name."""
        return self.max_topic_bytes + self.max_stream_bytes + 1

    @property
    def answers_wire_bytes(self) -> int:
        """The answers socket's largest inbound message: a subscription (ZeroMQ's subscribe message is a flag byte, then
        the prefix) of max_subscription_bytes."""
        return self.max_subscription_bytes + 1

    @property
    def ingest_rcvhwm(self) -> int:
        """The ingest PULL socket's high-water mark per connection: ingest_hwm messages, and no more than
        ingest_queue_bytes of messages of the largest size it reads (at least one)."""
        return max(1, min(self.ingest_hwm, self.ingest_queue_bytes // self.ingest_wire_bytes))

    @property
    def max_ts_ahead_ns(self) -> int | None:
        return None if self.max_ts_ahead_s is None else round(self.max_ts_ahead_s * 1e9)

    def __post_init__(self) -> None:
        if self.when_behind not in WHEN_BEHIND:
            raise ConfigError(f"limits.when_behind must be one of {', '.join(map(quoted, WHEN_BEHIND))}, "
                              f"got {excerpt(self.when_behind)}")
        if self.zero_bid not in ZERO_BID_READINGS:
            raise ConfigError(f"limits.zero_bid must be one of {', '.join(map(quoted, ZERO_BID_READINGS))}, "
                              f"got {excerpt(self.zero_bid)}")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            if not 0 < value < math.inf:  # NaN and inf too: each becomes a count or a timer (an int) somewhere
                raise ConfigError(f"limits.{f.name} must be a finite number > 0, got {excerpt(value)}")
            if isinstance(value, int) and value >= MAX_LIMIT:  # ZeroMQ's options and timers take a C long
                raise ConfigError(f"limits.{f.name} must be below {MAX_LIMIT:.0e}, got {value}")
        if self.max_subscription_bytes < self.longest_topic_bytes:  # a subscriber to a real topic would be dropped
            raise ConfigError(f"limits.max_subscription_bytes must be at least the longest topic, "
                              f"{self.longest_topic_bytes} bytes (max_topic_bytes + max_stream_bytes + 1), "
                              f"got {self.max_subscription_bytes}")
