"""IPv6 endpoints: the service binds tcp://[::1]:PORT (ZeroMQ's IPV6 option set where an endpoint is IPv6), its
clients connect there, `::1` is loopback and `::` every address for the exposure warning, and a bind that fails
names its real cause (review207 #5: "No such device" for [::1], a metrics host blamed on the port)."""

from __future__ import annotations

import socket
import time
import urllib.request

import pytest

from conftest import serving, tiny_tick_checkpoint
from connectors.feed import FeedClient
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.tcp_endpoints import endpoint_host, is_ipv6_address
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.config import CurveSection, ServiceConfig
from engine.service.exposure import open_socket_warnings


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


needs_ipv6 = pytest.mark.skipif(not _has_ipv6_loopback(), reason="this host has no IPv6 loopback (::1) to bind")
IPV6 = {"ingest": "tcp://[::1]:0", "answers": "tcp://[::1]:0", "control": "tcp://[::1]:0"}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"))


def config(checkpoint, tmp_path, **endpoints: object) -> ServiceConfig:
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice, "
                       "trigger: batch}\n")
    return ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
                                    "log": {"enabled": False}, "queries": str(queries), "endpoints": endpoints})


@needs_ipv6
def test_a_service_on_ipv6_loopback_takes_ticks_answers_and_control_there(checkpoint, tmp_path) -> None:
    """review207: `endpoints.control: tcp://[::1]:PORT` failed with "No such device". Every socket binds on ::1 now,
    and the feed, the subscriber and the control client connect there; /metrics is served there too."""
    with serving(config(checkpoint, tmp_path, **IPV6, metrics_host="::1", metrics_port=0)) as server:
        assert all(server.endpoints[name].startswith("tcp://[::1]:") for name in IPV6), server.endpoints
        assert server.endpoints["metrics"].startswith("http://[::1]:"), server.endpoints
        with urllib.request.urlopen(server.endpoints["metrics"], timeout=60) as scrape:  # (the metrics server too)
            assert b"flashtick_ticks_in_total" in scrape.read()
        control = ControlClient(server.endpoints["control"])
        answers = AnswerSubscriber(server.endpoints["answers"], ["dir/"])
        feed = FeedClient(server.endpoints["ingest"])
        try:
            answers.wait_ready()
            ticks = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(40)
            feed.send(ticks)
            got = None
            deadline = time.monotonic() + 120  # only catches a hang
            while got is None and time.monotonic() < deadline:
                got = answers.recv(timeout_s=0.5)
            assert got is not None and got[0].startswith("dir/"), got
            held = control.call("streams")["streams"]
            assert sum(s["ticks"] for s in held.values()) == len(ticks), held
            assert control.call("health")["status"] == "serving"
        finally:
            feed.close()
            answers.close()
            control.close()


def test_ipv6_loopback_is_not_warned_of_and_every_ipv6_address_is() -> None:
    """`::1` (and an IPv4 loopback in IPv6 form) is this host's alone; `::` is every address, as 0.0.0.0."""
    warnings = open_socket_warnings({"control": "tcp://[::1]:5557", "ingest": "tcp://[::]:5555",
                                     "answers": "tcp://[::ffff:127.0.0.1]:5556", "metrics": "http://[::]:9100/metrics"},
                                    CurveSection())
    assert [w.split(" is reachable")[0] for w in warnings] == [
        "warning: the ingest socket tcp://[::]:5555", "warning: the metrics endpoint http://[::]:9100/metrics"]
    assert endpoint_host("tcp://[::1]:5557") == "::1" and is_ipv6_address("::1") and not is_ipv6_address("*")
    assert endpoint_host("tcp://127.0.0.1;[::1]:5557") == "::1" and endpoint_host("ipc:///tmp/x") is None


def test_a_bind_that_fails_names_its_cause_not_the_port(checkpoint, tmp_path) -> None:
    """A host ZeroMQ takes for an interface's name said only "No such device"; a metrics host the server cannot
    listen on was blamed on endpoints.metrics_port."""
    from engine.service.server import Server

    with pytest.raises(OSError, match=r"cannot bind the control socket to tcp://nosuchif0:\*: No such device.*; "
                                      r"ZeroMQ took \"nosuchif0\" for a network interface's name, and this host has "
                                      r"none of that name: give an address"):
        Server(config(checkpoint, tmp_path, control="tcp://nosuchif0:0"))
    with pytest.raises(OSError, match=r"cannot serve metrics on 192\.0\.2\.250:\d+: .*\(not an address of this "
                                      r"host\); set endpoints\.metrics_host to one of its addresses"):
        Server(config(checkpoint, tmp_path, control="tcp://127.0.0.1:0", metrics_port=0, metrics_host="192.0.2.250"))
