"""The /metrics endpoint: the HTTP server (IPv4, or IPv6 for an IPv6 endpoints.metrics_host) that answers GET and
HEAD of /metrics with the service's counters as Prometheus text, of /healthz and /readyz with the probes' JSON
(engine/service/readiness.py), and closes the connections that would hold it.

Its thread serves from a descriptor table of its own where the system lets it (descriptor_limit.own_descriptor_table):
with every descriptor of the process taken by ZeroMQ's connections, the probes and the scrape still answer
(review412 #5). The engine thread refreshes the snapshot (each heartbeat); the HTTP thread only
reads that dict, so a scrape never touches live engine state. The text is engine/service/metrics_text.py, its
families engine/service/metrics_families.py, the limits on connections engine/service/metrics_limits.py.
"""

from __future__ import annotations

import io
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from connectors.tcp_endpoints import is_ipv6_address
from engine.service.descriptor_limit import own_descriptor_table
from engine.service.metrics_limits import METRICS_MAX_CONNECTIONS, METRICS_POLL_S, METRICS_REQUEST_TIMEOUT_S
from engine.service.metrics_text import render


# a scraper that gives up (Prometheus at its scrape_timeout, `curl -m`) closes the connection, often with a reset,
# before the reply is written: normal, not the service's fault, and no news for its log
CLIENT_GONE_ERRORS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class _Connection:
    """An open connection: when it was accepted, and whether its request is still coming (only such a one is closed
    to make room: a reply being written finishes on its own)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.deadline = time.monotonic() + METRICS_REQUEST_TIMEOUT_S
        self.reading = True
        self.evicted = False


class _RequestReader(io.RawIOBase):
    """A connection's reads of its request, all before its deadline; none once the server closed it for room."""

    def __init__(self, connection: _Connection) -> None:
        self.connection = connection

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.connection.deadline - time.monotonic()
        if left <= 0 or self.connection.evicted:  # (TimeoutError: http.server closes the connection, unanswered)
            raise TimeoutError("the request did not come in time, or the connection was closed to make room")
        self.connection.sock.settimeout(left)
        received = self.connection.sock.recv_into(buffer)
        if self.connection.evicted:
            raise TimeoutError("the connection was closed to make room for a new one")
        return received


class MetricsHTTPServer(ThreadingHTTPServer):
    """The /metrics server: a scrape its client gave up on is counted (``scrapes_abandoned``), not logged; any other
    error in a request is one line on stderr, not socketserver's traceback. At most METRICS_MAX_CONNECTIONS are
    served at once: past them the oldest one still sending its request is closed for a new one (counted in
    ``connections_evicted``), or, when every open one has sent its request, the new one is closed unread (counted in
    ``connections_refused``)."""

    serving_thread: threading.Thread  # (start_metrics_server starts it)
    scrapes_abandoned = 0  # (+= on several request threads: a count that may miss one is good enough here)
    connections_refused = 0  # (only the serving thread adds to these two)
    connections_evicted = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open_lock = threading.Lock()
        self._open: dict[Any, _Connection] = {}  # request socket -> its connection, until its thread ends

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            if sum(not c.evicted for c in self._open.values()) >= METRICS_MAX_CONNECTIONS and not self._evict_one():
                self.connections_refused += 1
                self.shutdown_request(request)
                return
            self._open[request] = _Connection(request)
        try:
            super().process_request(request, client_address)
        except BaseException:  # (no thread started: nothing else lets the connection go)
            with self._open_lock:
                self._open.pop(request, None)
            raise

    def _evict_one(self) -> bool:
        """Close the oldest connection still sending its request (under ``_open_lock``); False when there is none."""
        waiting = [c for c in self._open.values() if c.reading and not c.evicted]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c.deadline)
        oldest.evicted = True
        self.connections_evicted += 1
        try:
            oldest.sock.shutdown(socket.SHUT_RDWR)  # its thread's read returns now; the thread closes it
        except OSError:
            pass
        return True

    def connection_of(self, request: Any) -> _Connection:
        with self._open_lock:
            return self._open[request]

    def request_read(self, request: Any) -> bool:
        """The request on ``request`` is read: it is no longer closed for room. False if it was closed already."""
        with self._open_lock:
            connection = self._open[request]
            connection.reading = False
            return not connection.evicted

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open.pop(request, None)

    def serve_in_own_descriptor_table(self) -> None:
        """The serving thread: serve_forever in a descriptor table of its own (or the process's, saying so), and
        that table's copy of the listening socket closed as it ends, so shutdown() leaves the port free."""
        listener = self.fileno()
        try:  # (its error lines: where sys.stderr writes now, fd 2 or a file of its own)
            stderr = (sys.stderr.fileno(),)
        except (AttributeError, OSError, ValueError):
            stderr = ()
        why_not = own_descriptor_table(keep=(0, 1, 2, listener, *stderr))
        if why_not is not None:
            print(f"flashtick: note: the metrics endpoint shares the process's descriptors ({why_not}): with none "
                  f"free, /healthz, /readyz and /metrics wait unanswered", file=sys.stderr, flush=True)
        try:
            self.serve_forever(poll_interval=METRICS_POLL_S)
        finally:
            if why_not is None:
                os.close(listener)

    def shutdown(self) -> None:
        super().shutdown()
        self.serving_thread.join()  # its descriptor table's copy of the listener closed: the port is free

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, CLIENT_GONE_ERRORS):
            self.scrapes_abandoned += 1
            return
        print(f"flashtick: metrics: a request from {client_address[0]}:{client_address[1]} failed: "
              f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)


class MetricsHTTPServer6(MetricsHTTPServer):
    """The /metrics server on an IPv6 host (endpoints.metrics_host `::1` or `::`)."""

    address_family = socket.AF_INET6


PROBE_PATHS = ("/healthz", "/readyz")


def start_metrics_server(host: str, port: int, snapshot: Callable[[], dict[str, Any]],
                         probe: Callable[[str], tuple[int, dict[str, Any]]] | None = None) -> MetricsHTTPServer:
    """``probe(path)``: the HTTP status and JSON body of /healthz or /readyz (off the engine thread, as /metrics)."""

    class Handler(BaseHTTPRequestHandler):
        timeout = METRICS_REQUEST_TIMEOUT_S  # each write's; the request's reads have one deadline (_RequestReader)

        def setup(self) -> None:
            super().setup()
            self.rfile = io.BufferedReader(_RequestReader(server.connection_of(self.request)))

        def do_GET(self, head: bool = False) -> None:  # noqa: N802 (http.server's naming)
            if not server.request_read(self.request):  # closed for room as its last byte came: no reply
                self.close_connection = True
                return
            self.connection.settimeout(self.timeout)
            path = self.path.split("?", 1)[0].rstrip("/")  # a scraper's ?query parameters are ignored
            if probe is not None and path in PROBE_PATHS:
                status, reply = probe(path)
                self._reply(status, "application/json", (json.dumps(reply) + "\n").encode(), head)
                return
            if path != "/metrics":
                self.send_error(404, "only /metrics, /healthz and /readyz are served")
                return
            body = render({**snapshot(), "scrapes_abandoned": server.scrapes_abandoned,
                           "connections_refused": server.connections_refused,
                           "connections_evicted": server.connections_evicted}).encode()
            self._reply(200, "text/plain; version=0.0.4", body, head)

        def _reply(self, status: int, content_type: str, body: bytes, head: bool) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def do_HEAD(self) -> None:  # noqa: N802 (health checkers probe with HEAD)
            self.do_GET(head=True)

        def log_message(self, *args: Any) -> None:  # quiet: scrapes are not news
            pass

    # an IPv6 host (`::1`, `::`: every address, IPv4 ones too where the kernel maps them) needs an IPv6 socket
    server = (MetricsHTTPServer6 if is_ipv6_address(host) else MetricsHTTPServer)((host, port), Handler)
    server.serving_thread = threading.Thread(target=server.serve_in_own_descriptor_table, name="flashtick-metrics",
                                             daemon=True)
    server.serving_thread.start()
    return server
