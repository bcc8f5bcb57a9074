"""What a starting service binds before it imports the engine: CURVE's keys and allow-list, the control socket
(answering `health` "starting", every other op `reason: starting`) and the metrics endpoint (`flashtick_starting`).
Importing the engine's modules (torch) takes seconds, 16 s on a loaded 2-core host, before the model loads and the
tick log replays: bound only after that, a restart looked like a crash to a probe for that long (review308 #7). This
module imports no more than ZeroMQ and the service's light modules; `Server` takes over what it bound.
"""

from __future__ import annotations

import errno
import time
from typing import Any

import zmq

from connectors.tcp_endpoints import endpoint_host, ipv6_for
from engine.memory_limit import resident_bytes
from engine.quoting import quoted
from engine.service.auth import ClientAllowList, allowed_client_keys, server_keypair
from engine.service.config import ServiceConfig
from engine.service.port_binding import bind_retrying, metrics_bind_error, port_in_use
from engine.service.process_start import process_start_time
from engine.service.starting_replies import StartingReplies

# requests and replies ZeroMQ queues per control client (replies past it wait in ControlSocket._unsent)
CONTROL_HWM = 16


class EarlyStart:
    """The sockets a service binds first (see the module's docstring), answering "starting" from a thread of their
    own until `Server` takes them over (``adopted``)."""

    def __init__(self, config: ServiceConfig, phase: str = "importing the engine") -> None:
        """``phase``: what `health` says the start is doing (a Server binding its own: loading the model)."""
        self.config = config
        self.started_at = time.time()
        self.context = zmq.Context.instance()
        self.endpoints: dict[str, str] = {}
        self._sockets: dict[str, zmq.Socket] = {}
        self._curve_keys: tuple[bytes, bytes] | None = None  # the server's (public, secret) z85 keys
        self._curve_sockets: set[str] = set()  # the sockets bound with CURVE: their failed handshakes are watched
        self._auth: ClientAllowList | None = None  # the ZAP handler of curve.clients_dir
        self.counters: dict[str, int] = {}  # the ZAP handler's (auth_*): the Server's counters from then on
        self.dropped_replies = 0  # replies while starting to a client gone or not reading (Server counts them on)
        self.metrics_server: Any = None
        self._snapshot = self._starting_snapshot  # what a scrape shows: Server's, once it takes over
        self._probe = self._starting_probe  # what /healthz and /readyz say: Server's, once it takes over
        try:
            self._start_curve()
            # with router_mandatory a reply past a client's CONTROL_HWM unread fails (zmq.Again) instead of being
            # dropped unseen; requests past CONTROL_HWM wait in the client's own queue. router_handover: a client
            # that sets a routing id of its own (C++ and Go services do) and reconnects with it while its old
            # connection is still held (an ask in flight) takes that id over; without it libzmq ignores every
            # message of the new connection, unanswered and uncounted (review308 #1)
            self.control = bind_socket(self, "control", zmq.ROUTER, config.endpoints.control, curve=True,
                                       maxmsgsize=config.limits.max_control_bytes, sndhwm=CONTROL_HWM,
                                       rcvhwm=CONTROL_HWM, router_mandatory=1, router_handover=1)
            self._start_metrics()
        except BaseException:
            self.close()
            raise
        self.starting = StartingReplies(self.control, config.model.model_id, config.limits.zero_bid, self.started_at,
                                        self._send)
        self.starting.said(phase)
        self.starting.__enter__()

    def _send(self, frames: list[bytes]) -> None:
        """A reply while starting: sent, or dropped and counted when its client is gone or not reading."""
        try:
            self.control.send_multipart(frames, zmq.NOBLOCK)
        except zmq.ZMQError as e:
            if e.errno not in (zmq.EAGAIN, zmq.EHOSTUNREACH):
                raise
            self.dropped_replies += 1

    def _start_curve(self) -> None:
        """The server's keys and the allowed clients, and the ZAP handler, before any socket binds."""
        curve = self.config.curve
        if not curve.enabled:
            return
        self._curve_keys = server_keypair(curve.server_secret_key_file, curve.server_public_key_file)
        if curve.clients_dir is not None:
            keys = allowed_client_keys(curve.clients_dir)
            self.context = zmq.Context()  # a ZAP handler serves one context: give this server its own
            self._auth = ClientAllowList(self.context, keys, self.counters)
            self._auth.start()

    def _start_metrics(self) -> None:
        """The Prometheus endpoint (endpoints.metrics_port): a scrape while the engine imports, the model loads
        and the log replays finds the target up and starting, not down."""
        from engine.service.metrics import start_metrics_server

        host, port = self.config.endpoints.metrics_host, self.config.endpoints.metrics_port
        if port is None:
            return
        try:
            self.metrics_server = start_metrics_server(host, port, lambda: self._snapshot(),
                                                       lambda path: self._probe(path))
        except OSError as e:  # like the sockets' bind errors: the key at fault and the endpoint
            raise metrics_bind_error(host, port, e) from None
        shown = f"[{host}]" if ":" in host else host  # (an IPv6 address is bracketed in a URL)
        self.endpoints["metrics"] = f"http://{shown}:{self.metrics_server.server_port}/metrics"

    def _starting_snapshot(self) -> dict[str, Any]:
        return {"starting": self.starting.phase if hasattr(self, "starting") else "binding the control socket",
                "process_start_time_seconds": process_start_time(),
                "process_resident_memory_bytes": resident_bytes()}

    def _starting_probe(self, path: str) -> tuple[int, dict[str, Any]]:
        from engine.service.readiness import probe_reply

        return probe_reply(path, self._starting_snapshot(), None, self.config.limits)

    def close(self) -> None:
        """A start that fails: nothing stays bound."""
        if hasattr(self, "starting"):
            self.starting.__exit__(None, None, None)
        for sock in self._sockets.values():
            sock.close(linger=0)
        self._sockets.clear()
        if self.metrics_server is not None:
            self.metrics_server.shutdown()
            self.metrics_server.server_close()
            self.metrics_server = None
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
            self.context.term()


def bind_socket(owner: Any, name: str, kind: int, endpoint: str, curve: bool = False, **options: int) -> zmq.Socket:
    """A socket of ``owner`` (an EarlyStart or the Server: its context, CURVE keys and ZAP handler) bound to
    ``endpoint``, recorded in its ``endpoints`` and ``_sockets``; a bind that fails says which key to set."""
    sock = owner.context.socket(kind)
    sock.linger = 0
    for option, value in options.items():
        setattr(sock, option, value)
    if curve and owner._curve_keys is not None:
        sock.curve_publickey, sock.curve_secretkey = owner._curve_keys
        sock.curve_server = True
        owner._curve_sockets.add(name)
        if owner._auth is not None:  # fail closed: no ZAP handler, no handshake
            sock.zap_domain = f"flashtick-{name}".encode()  # a refusal's log line names the socket
            sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
    if endpoint.endswith(":0"):  # an ephemeral port
        endpoint = endpoint[:-2] + ":*"
    ipv6_for(sock, endpoint)
    try:
        bind_retrying(sock, endpoint)
    except zmq.ZMQError as e:
        sock.close()
        if e.errno == zmq.EADDRINUSE:
            raise port_in_use(name, endpoint) from None
        # ZeroMQ takes a host that is no address for a network interface's name: "No such device" alone misleads
        named = (f"; ZeroMQ took {quoted(endpoint_host(endpoint))} for a network interface's name, and this host has "
                 f"none of that name: give an address (127.0.0.1, [::1], 0.0.0.0)" if e.errno == errno.ENODEV
                 else "")
        raise OSError(f"cannot bind the {name} socket to {endpoint}: {e.strerror}{named} (set endpoints.{name} in "
                      f"the --config file)") from None
    owner.endpoints[name] = sock.getsockopt_string(zmq.LAST_ENDPOINT)
    owner._sockets[name] = sock
    return sock
