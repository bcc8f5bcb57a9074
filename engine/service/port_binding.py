"""Binding the service's sockets to their ports: a port in use is tried again for a moment (the service that had
it may still be letting it go) and then said with the config key that moves it, and the ingest and answers ports
are checked free before a slow start (a model load, a tick log's replay) rather than after it."""

from __future__ import annotations

import errno
import ipaddress
import socket
import time

import zmq


BIND_RETRY_S = 1.0  # a port in use is tried again this long: the service that had it may still be letting it go


def port_in_use(name: str, endpoint: str) -> OSError:
    port = endpoint.rpartition(":")[2]
    return OSError(f"cannot bind the {name} socket to {endpoint}: port {port} is in use (is another flashtick serve "
                   f"running? set endpoints.{name} in the --config file)")


def metrics_bind_error(host: str, port: int, error: OSError) -> OSError:
    """What a start says when the metrics server cannot listen on ``host``:``port``: the key that is at fault (the
    port only when it is taken; a host that is no address of this host, or that the server cannot serve, is the
    host's), rather than "set endpoints.metrics_port" for every failure."""
    where = f"cannot serve metrics on {f'[{host}]' if ':' in host else host}:{port}"
    if error.errno == errno.EADDRINUSE:
        return OSError(f"{where}: port {port} is in use; set endpoints.metrics_port to a free port")
    if isinstance(error, socket.gaierror) or error.errno == errno.EADDRNOTAVAIL:
        return OSError(f"{where}: {error.strerror or error} (not an address of this host); set "
                       f"endpoints.metrics_host to one of its addresses (127.0.0.1, or 0.0.0.0 for every address)")
    return OSError(f"{where}: {error.strerror or error}; set endpoints.metrics_host and endpoints.metrics_port")


def check_port_free(name: str, endpoint: str) -> None:
    """Raise the bind error of ``endpoint`` (tcp://ADDRESS:PORT) now if its port is taken: a plain socket bound
    with SO_REUSEADDR, as ZeroMQ binds, and closed at once, tried again for BIND_RETRY_S as ``bind_retrying``
    does. What it cannot tell (an ephemeral port, an interface or host name, ipc://) is left to the bind itself."""
    address, _, port = endpoint.removeprefix("tcp://").rpartition(":")
    if not endpoint.startswith("tcp://") or not port.isdigit() or int(port) == 0:
        return
    address = "0.0.0.0" if address == "*" else address.strip("[]")
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    except ValueError:
        return
    deadline = time.monotonic() + BIND_RETRY_S
    while True:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((address, int(port)))
                return
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    return  # (another problem, e.g. an address not on this host: the bind says it)
        if time.monotonic() >= deadline:
            raise port_in_use(name, endpoint)
        time.sleep(0.05)


def bind_retrying(sock: zmq.Socket, endpoint: str) -> None:
    """``sock.bind``, tried again for BIND_RETRY_S while the address is in use (a socket of a service stopped a
    moment ago, in this process or another, is closed by ZeroMQ's I/O thread a little after)."""
    deadline = time.monotonic() + BIND_RETRY_S
    while True:
        try:
            sock.bind(endpoint)
            return
        except zmq.ZMQError as e:
            if e.errno != zmq.EADDRINUSE or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)
