"""The server side of the wire tests: a real Server on ephemeral 127.0.0.1 ports, on a thread (conftest.serving),
over a seeded tiny tick model; fixtures that hand the raw clients of wire_client.py its endpoints."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

from conftest import serving, tiny_tick_checkpoint
from engine.service.config import ServiceConfig
from wire_client import Control, Sub, held_of, push_socket, wait_stats

MAX_MESSAGE_BYTES = 64 << 10


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(tick_server_config(tmp_path_factory)) as srv:
        yield srv.endpoints


@pytest.fixture
def private_server(tmp_path_factory):
    """The same server for one test alone: a test that floods it takes the backlog away with it, instead of
    leaving later tests to share this process (and its GIL) with a server still working through it."""
    with serving(tick_server_config(tmp_path_factory)) as srv:
        yield srv.endpoints


def tick_server_config(tmp_path_factory) -> ServiceConfig:
    checkpoint = tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"))
    queries = tmp_path_factory.mktemp("q") / "q.yaml"
    queries.write_text("queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice,"
                       " trigger: batch}\n")
    return ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)},
        "kv": {"cells": 16384, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                      "control": "tcp://127.0.0.1:0", "metrics_port": 0},
        "limits": {"heartbeat_s": 0.1, "max_message_bytes": MAX_MESSAGE_BYTES, "max_control_bytes": 1 << 20},
        "queries": str(queries),
    })


@pytest.fixture
def clients(server):
    made: list[Any] = []

    def control(kind: int = zmq.DEALER) -> Control:
        made.append(Control(server["control"], kind))
        return made[-1]

    def sub(*topics: str) -> Sub:
        made.append(Sub(server["answers"], list(topics)))
        return made[-1]

    def push() -> zmq.Socket:
        made.append(push_socket(server["ingest"]))
        return made[-1]

    yield control, sub, push
    for c in made:
        c.close()


@pytest.fixture
def shedding(tmp_path):
    """A server of small limits: it refuses new ticks while more than one token waits for a forward, holds two
    streams, keeps three published answers for the answers op and lets two asks wait for a forward."""
    config = ServiceConfig.from_dict({
        "model": {"path": str(tiny_tick_checkpoint(tmp_path))},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "scheduler": {"max_streams": 2},
        "log": {"answers_keep": 3},
        "limits": {"heartbeat_s": 0.1, "max_backlog_tokens": 1, "when_behind": "shed", "max_waiting_asks": 2},
    })
    with serving(config) as srv:
        yield srv.endpoints


@contextlib.contextmanager
def serving_feed(tmp_path, feed: str) -> Iterator[dict[str, str]]:
    """A server that SUB-connects to an external PUB feed (endpoints.feeds); yields its endpoints."""
    config = ServiceConfig.from_dict({
        "model": {"path": str(tiny_tick_checkpoint(tmp_path))},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0",
                      "feeds": [feed]},
        "limits": {"heartbeat_s": 0.1},
    })
    with serving(config) as srv:
        yield srv.endpoints


@contextlib.contextmanager
def resent_after_a_restart(tmp_path: Path, stream: str, send: Callable[[zmq.Socket, range], None]
                           ) -> Iterator[dict[str, str]]:
    """A feed that resends after the service's restart, over any wire form: ``send(feed, seqs)`` sends ``stream``'s
    ticks of those seqs. Seqs 1..10 to a service with a data directory; restarted, it has the stream's last seq from
    the tick log, and the feed resends 7..12 from where it thought it was: 7..10 are dropped as duplicates, 11 and 12
    taken, nothing rejected. Yields the second run's endpoints, still serving."""
    config = ServiceConfig.from_dict({
        "model": {"path": str(tiny_tick_checkpoint(tmp_path / "tick"))}, "log": {"dir": str(tmp_path / "data")},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "limits": {"heartbeat_s": 0.1}})
    with serving(config) as first_run:
        ctl, feed = Control(first_run.endpoints["control"]), push_socket(first_run.endpoints["ingest"])
        try:
            send(feed, range(1, 11))
            wait_stats(ctl, lambda st: st["ticks_in"] == 10)
        finally:
            ctl.close()
            feed.close()
    with serving(config) as second_run:
        ctl, feed = Control(second_run.endpoints["control"]), push_socket(second_run.endpoints["ingest"])
        try:
            assert held_of(ctl, stream)["last_seq"] == 10  # from the tick log
            send(feed, range(7, 13))
            done = wait_stats(ctl, lambda st: st["duplicates"] == 4 and st["ticks_in"] == 12)  # 10 replayed, 2 new
            assert done["rejected"] == {}
            held = held_of(ctl, stream)
            assert (held["ticks"], held["last_seq"]) == (12, 12), held
            yield second_run.endpoints
        finally:
            ctl.close()
            feed.close()

