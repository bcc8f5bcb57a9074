"""The `endpoints` section of the service config: the sockets' addresses, the external feeds, the metrics port,
and the check that no two of the engine's own sockets share a port (hosts compared as ZeroMQ binds them).
"""

from __future__ import annotations

from dataclasses import dataclass

from connectors.feed import check_endpoint
from connectors.tcp_endpoints import endpoint_host
from engine.quoting import quoted
from engine.service.config_error import ConfigError
from queries.limits import excerpt  # values as YAML writes them: got true, got null (not True, None)

@dataclass(frozen=True)
class EndpointsSection:
    ingest: str = "tcp://127.0.0.1:5555"
    answers: str = "tcp://127.0.0.1:5556"
    control: str = "tcp://127.0.0.1:5557"
    feeds: tuple[str, ...] = ()  # external PUB feeds to subscribe to (SUB connects)
    metrics_port: int | None = None  # Prometheus text format on 127.0.0.1:PORT/metrics
    metrics_host: str = "127.0.0.1"

    def __post_init__(self) -> None:
        for name in ("ingest", "answers", "control"):
            value = getattr(self, name)
            if not isinstance(value, str) or "://" not in value:
                raise ConfigError(f"endpoints.{name} must be a ZeroMQ endpoint like tcp://127.0.0.1:5555, "
                                  f"got {excerpt(value)}")
            port = value.rsplit(":", 1)[-1] if value.startswith("tcp://") and value.count(":") >= 2 else None
            # ZeroMQ binds tcp://host:99999 to port 34463 (the number modulo 65536) without a word; 0 or *: any free
            if port is not None and port != "*" and not (port.isdigit() and int(port) <= 65535):
                raise ConfigError(f"endpoints.{name} {quoted(value)}: a tcp port is 1 to 65535 (0 or *: any free one)")
        if self.metrics_port is not None and not 0 <= self.metrics_port < 65536:
            raise ConfigError(f"endpoints.metrics_port must be a TCP port, got {self.metrics_port}")
        self._check_distinct_ports()
        for feed in self.feeds if isinstance(self.feeds, tuple) else ():
            try:
                check_endpoint(feed, "an endpoints.feeds entry")
            except ValueError as e:
                raise ConfigError(str(e)) from None
        if isinstance(self.feeds, tuple):
            self._check_distinct_feeds()

    def _check_distinct_feeds(self) -> None:
        """One feed listed twice, as written or under two names of one address (localhost and 127.0.0.1, as
        _check_distinct_ports compares hosts; review391 #4): two SUBs on one publisher, each tick taken twice."""
        by_address: dict[str, list[str]] = {}
        for feed in self.feeds:
            by_address.setdefault(_feed_address(feed), []).append(feed)
        for written in by_address.values():
            if len(written) > 1:
                names = sorted(set(written))
                said = (f"{names[0]} more than once" if len(names) == 1 else
                        f"{' and '.join(names)}, one address ({_feed_address(names[0])})")
                raise ConfigError(f"endpoints.feeds lists {said}: every tick published there would be taken once "
                                  f"per entry; list each feed once")

    def _check_distinct_ports(self) -> None:
        """Two of the engine's own sockets on one port: said here by key, not as a bind error that reads
        "is another flashtick serve running?" when the clash is inside this file. Hosts that name one address
        (localhost and 127.0.0.1) or that overlap (a wildcard, * or 0.0.0.0, takes the port on every address)
        clash; a host name is not looked up (the bind says those)."""
        taken: list[tuple[str, str, int]] = []  # (key, host as written, port)
        bound = [(name, *getattr(self, name)[len("tcp://"):].rsplit(":", 1))
                 for name in ("ingest", "answers", "control") if getattr(self, name).startswith("tcp://")]
        if isinstance(self.metrics_port, int) and not isinstance(self.metrics_port, bool):
            bound.append(("metrics_port", self.metrics_host, str(self.metrics_port)))
        for name, host, port in bound:
            if not port.isdigit() or int(port) == 0:  # any free port: never a clash
                continue
            for other, other_host, other_port in taken:
                if other_port == int(port) and _hosts_overlap(host, other_host):
                    where = f"on {host}" if host == other_host else (
                        f"on {other_host} and {host}, " + ("the same address" if _bind_address(host) ==
                                                           _bind_address(other_host) else "which overlap"))
                    raise ConfigError(f"endpoints.{name} and endpoints.{other} both use port {port} {where}: "
                                      f"give each socket its own port (or 0 for any free one)")
            taken.append((name, host, int(port)))


# names ZeroMQ (and the metrics server) bind as the loopback address; what binds every address at once
LOOPBACK_NAMES = {"localhost": "127.0.0.1", "lo": "127.0.0.1"}  # (lo: ZeroMQ takes an interface name)
WILDCARD_HOSTS = {"*", "0.0.0.0", "::", ""}  # ("": the metrics server's every address)


def _bind_address(host: str) -> str:
    host = host.strip().lower().removeprefix("[").removesuffix("]")  # (tcp://[::1]:5555's host, metrics_host's ::1)
    return LOOPBACK_NAMES.get(host, host)


def _feed_address(feed: str) -> str:
    """What a SUB connects to for an endpoints.feeds entry (checked: check_endpoint): a tcp one's host as it binds
    (localhost is 127.0.0.1) and its port, from whichever source address; any other transport as written."""
    host = endpoint_host(feed)
    return feed if host is None else f"tcp://{_bind_address(host)}:{int(feed.rsplit(':', 1)[-1])}"


def _hosts_overlap(host: str, other: str) -> bool:
    a, b = _bind_address(host), _bind_address(other)
    return a == b or a in WILDCARD_HOSTS or b in WILDCARD_HOSTS
