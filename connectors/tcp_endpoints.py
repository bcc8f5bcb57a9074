"""The host a tcp:// endpoint names, and the IPv6 option ZeroMQ needs for it.

A ZeroMQ socket binds and connects over IPv4 only unless ZMQ_IPV6 is set on it first: without it
`tcp://[::1]:5557` fails with "No such device" (the address is taken for an interface's name). Every socket of ours
that binds or connects to an endpoint naming an IPv6 address sets it (ipv6_for); one on an IPv4 address, a host
name or `*` is left as it was, so nothing changes on a host without IPv6.
"""

from __future__ import annotations

import ipaddress

import zmq


def endpoint_host(endpoint: str) -> str | None:
    """The host of a tcp:// endpoint, brackets stripped (`::1` of `tcp://[::1]:5557`, `*` of `tcp://*:5555`); None
    for another transport (ipc://, inproc://). A connect's source address (`tcp://SOURCE;HOST:PORT`) is left out."""
    if not endpoint.startswith("tcp://"):
        return None
    host = endpoint[len("tcp://"):].rpartition(":")[0].rpartition(";")[2]
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def is_ipv6_address(host: str) -> bool:
    """`::1`, `::`, `fe80::1%eth0`: an IPv6 address (not a name, which is not looked up here)."""
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


def ipv6_for(sock: zmq.Socket, endpoint: str) -> None:
    """Set ZMQ_IPV6 on ``sock`` when ``endpoint`` names an IPv6 address: before its bind or connect, which it
    takes effect on."""
    host = endpoint_host(endpoint)
    if host is not None and is_ipv6_address(host):
        sock.setsockopt(zmq.IPV6, 1)
