"""Clients that try to make the service hold memory, threads or descriptors for them: subscribers that send
subscriptions by the megabyte, control clients that never read their replies, HTTP clients that open connections
and say nothing. Real sockets on 127.0.0.1, real servers on a tiny model."""

from __future__ import annotations

import socket
import time
import urllib.request

import pytest

from engine.service import metrics as metrics_module
from engine.service.metrics import METRICS_MAX_CONNECTIONS, start_metrics_server


def wait_for(predicate, timeout_s: float = 120.0) -> None:
    """Until ``predicate()`` holds (generous: other jobs load this machine; it only catches a hang)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def _closed_by_the_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (read until then, at most 120 s: only a hang fails)."""
    sock.settimeout(120)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _scrape(port: int) -> str | None:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    except OSError:  # (refused while the cap's connections are still open)
        return None


def test_metrics_connections_past_the_cap_are_closed_unread_and_counted(monkeypatch) -> None:
    monkeypatch.setattr(metrics_module, "METRICS_IDLE_TIMEOUT_S", 600.0)  # the idle ones stay while the cap is tried
    server = start_metrics_server("127.0.0.1", 0, lambda: {"ticks_in": 1})
    idle: list[socket.socket] = []
    try:
        for _ in range(METRICS_MAX_CONNECTIONS):
            sock = socket.create_connection(("127.0.0.1", server.server_port), timeout=10)
            sock.sendall(b"GET /metr")  # a request line never finished
            idle.append(sock)
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as one_more:
            assert _closed_by_the_server(one_more)
        for sock in idle:
            sock.close()
        idle = []
        wait_for(lambda: _scrape(server.server_port) is not None)  # the slots come back as their threads end
        body = _scrape(server.server_port)
        refused = [line for line in body.splitlines() if line.startswith("flashtick_metrics_connections_refused_total")]
        assert refused and int(refused[0].split()[1]) >= 1
    finally:
        for sock in idle:
            sock.close()
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("sent", [b"", b"GET /metr"])
def test_an_idle_or_unfinished_metrics_connection_is_closed_by_the_server(monkeypatch, sent: bytes) -> None:
    monkeypatch.setattr(metrics_module, "METRICS_IDLE_TIMEOUT_S", 1.0)
    server = start_metrics_server("127.0.0.1", 0, lambda: {"ticks_in": 1})
    try:
        with socket.create_connection(("127.0.0.1", server.server_port), timeout=10) as sock:
            sock.sendall(sent)
            assert _closed_by_the_server(sock)
        assert "flashtick_ticks_in_total 1" in (_scrape(server.server_port) or "")
    finally:
        server.shutdown()
        server.server_close()
