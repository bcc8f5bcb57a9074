"""The server side of the wire tests: a real Server on ephemeral 127.0.0.1 ports, on a thread (conftest.serving),
over a seeded tiny tick model; fixtures that hand the raw clients of wire_client.py its endpoints."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import zmq

from conftest import serving, tiny_tick_checkpoint
from engine.service.config import ServiceConfig
from wire_client import Control, Sub, push_socket

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
