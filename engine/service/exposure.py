"""Which of the service's bound sockets other hosts can reach without CURVE's protection, said at start.

The defaults bind to 127.0.0.1. A config that binds 0.0.0.0 (or a host's address) with CURVE off serves anyone who
reaches the host: control registers queries, forgets streams and reads everything (each op, CONTROL_OPS), ingest
takes ticks as the market's, answers go out in clear text, and metrics are plain HTTP. Such a start is not refused
(deployments behind a firewall rely on it); it is said, socket by socket, with the way to secure each.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from engine.service.config import CurveSection
from engine.service.control_requests import what_control_clients_can_do

SECURE_CURVE = "docs/configuration.md, CURVE"  # where the way to turn CURVE on is written


def reachable_from_other_hosts(endpoint: str) -> bool:
    """True for a tcp or http endpoint bound to an address other than loopback (0.0.0.0 or ::, every address; a
    host's address); 127.0.0.1, ::1 and ::ffff:127.0.0.1 are this host's alone."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("tcp", "http"):  # ipc://, inproc://: this host alone
        return False
    host = (parts.hostname or "").strip("[]")
    if host == "localhost":
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:  # (a name ZeroMQ resolved: LAST_ENDPOINT gives addresses, so rarely seen)
        return True
    mapped = getattr(address, "ipv4_mapped", None)  # (an IPv4 address in IPv6 form: 3.11 calls none loopback)
    return not (mapped or address).is_loopback


def open_socket_warnings(endpoints: dict[str, str], curve: CurveSection) -> list[str]:
    """One warning per bound socket (``endpoints``: name -> the endpoint as bound) that another host can reach and
    nothing authenticates: what a stranger can do there, and how to secure it."""
    allow_list = curve.enabled and curve.clients_dir is not None
    unprotected = {
        "control": None if allow_list else (
            "anyone who reaches it" if not curve.enabled else "any client holding the server's public key"
        ) + f" can {what_control_clients_can_do()}",
        "ingest": None if curve.ingest and allow_list else (
            "anyone who reaches it can feed ticks, taken as the market's" if not curve.ingest else
            "any client holding the server's public key can feed ticks, taken as the market's"),
        "answers": None if allow_list else (
            "its answers go out in clear text to any subscriber" if not curve.enabled else
            "any subscriber holding the server's public key reads its answers"),
    }
    fixes = {"control": "set curve.enabled with curve.clients_dir (an allow-list)",
             "ingest": "set curve.ingest: true with curve.enabled and curve.clients_dir",
             "answers": "set curve.enabled with curve.clients_dir"}
    warnings = []
    for name, endpoint in endpoints.items():
        if not reachable_from_other_hosts(endpoint):
            continue
        if name == "metrics":
            warnings.append(f"warning: the metrics endpoint {endpoint} is reachable from other hosts: plain HTTP, "
                            f"no authentication (CURVE does not cover it); set endpoints.metrics_host: 127.0.0.1 and "
                            f"scrape through a proxy, or firewall the port")
        elif unprotected.get(name):
            curved = curve.ingest if name == "ingest" else curve.enabled
            state = "no curve.clients_dir" if curved else "curve.ingest off" if curve.enabled else "CURVE off"
            warnings.append(f"warning: the {name} socket {endpoint} is reachable from other hosts with {state}: "
                            f"{unprotected[name]}; {fixes[name]} ({SECURE_CURVE}), or bind endpoints.{name} to "
                            f"127.0.0.1")
    return warnings
