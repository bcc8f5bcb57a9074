"""What an answer attended, over real sockets: an ask's reply and `streams` say the session's tokens and whole ticks
(`context_tokens`, `context_ticks`). A session rolls before its window is full (staggered) and keeps a share of it,
so an answer's context is not "every tick so far"; nothing said how much of it an answer had seen."""

from __future__ import annotations

import time

import pytest
import zmq

from conftest import serving, tiny_tick_checkpoint
from connectors.synthetic import DEFAULT_STREAMS, SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.client import ControlClient
from engine.service.config import ServiceConfig

EPHEMERAL = {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"}
WINDOW, PROBE_RESERVE = 256, 64
STREAM = DEFAULT_STREAMS[0].name


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"))


def wait_for(predicate, timeout_s: float = 120.0) -> None:
    """Until ``predicate()`` holds; the bound only catches a hang (the machine is shared)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def test_an_ask_and_streams_say_the_context_its_answer_attended(checkpoint) -> None:
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}, "log": {"enabled": False},
        "scheduler": {"window": WINDOW, "probe_reserve": PROBE_RESERVE}, "endpoints": EPHEMERAL})
    market = SyntheticMarket(SyntheticConfig(seed=3, streams=DEFAULT_STREAMS[:1]))
    with serving(config) as server, ControlClient(server.endpoints["control"]) as control:
        push = zmq.Context.instance().socket(zmq.PUSH)
        push.linger = 1000
        push.connect(server.endpoints["ingest"])

        def ask_after(sent: int) -> tuple[dict, dict]:
            wait_for(lambda: (control.call("streams", streams=[STREAM])["streams"][STREAM] or {}).get("ticks") == sent)
            reply = control.call("ask", stream=STREAM, query="direction_20")
            return reply, control.call("streams", streams=[STREAM])["streams"][STREAM]

        try:
            push.send(encode(market.next_batch(10)))
            reply, listed = ask_after(10)
            assert reply["cached"] is False and reply["answer"]["version"] == 10
            assert reply["context_ticks"] == 10 and reply["context_tokens"] % 10 == 0  # every tick, whole
            per_tick = reply["context_tokens"] // 10
            assert (listed["context_ticks"], listed["context_tokens"]) == (10, 10 * per_tick)
            assert control.call("stats")["stats"]["scheduler"]["rolls"] == 0

            sent = 10 + 2 * WINDOW // per_tick  # two windows' worth: past the first (early) roll and the next
            for _ in range(sent - 10):
                push.send(encode(market.next_batch(1)))
            reply, listed = ask_after(sent)
            assert control.call("stats")["stats"]["scheduler"]["rolls"] >= 1
            assert reply["answer"]["version"] == sent  # every tick counted, fewer attended
            assert 0 < reply["context_ticks"] < sent and reply["context_tokens"] == per_tick * reply["context_ticks"]
            assert reply["context_tokens"] <= WINDOW - PROBE_RESERVE
            session = server.pipeline.engine.scheduler.streams[STREAM].session
            assert reply["context_tokens"] == len(session.tokens)  # what the probe ran after
            assert (listed["context_ticks"], listed["context_tokens"]) == (reply["context_ticks"],
                                                                          reply["context_tokens"])
        finally:
            push.close()
