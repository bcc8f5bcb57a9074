"""A stop's drain (limits.drain_s) computes what was accepted even while a feed keeps the ingest queue full: it
computes first, and each read of the queues takes at most a share of the time left (review351 #11: every stop
spent its whole drain_s reading and said "drained 0 pending tokens")."""

from __future__ import annotations

import re
import threading
import time

import zmq

from connectors.ticks import encode
from test_server import checkpoint  # noqa: F401  (checkpoint: the model fixture)
from test_service_limits import EPHEMERAL, pipeline_config, stopped_by_the_test, ticks, wait_for


def test_a_stop_computes_what_was_accepted_while_a_feed_keeps_the_queue_full(checkpoint, capsys) -> None:
    # (a 1 s drain: each of its reads, half the time left at most, leaves it time to compute; 3 s computed 3x as long)
    config = pipeline_config(checkpoint, endpoints=EPHEMERAL, limits={"drain_s": 1},
                             scheduler={"max_batch_tokens": 4, "max_batch_streams": 1})
    flood = encode(ticks(200, seed=5, streams=4))  # the same message again and again: read (and refused) each time
    stop_flooding = threading.Event()
    with stopped_by_the_test(config) as (server, thread, push):
        push.send(encode(ticks(1000, seed=3, streams=4)))  # 4,000 tokens at 4 a forward: a backlog at the stop
        wait_for(lambda: server.pipeline.ticks_in == 1000)

        def keep_the_queue_full() -> None:
            feed = zmq.Context.instance().socket(zmq.PUSH)
            feed.linger, feed.sndtimeo = 0, 100
            feed.connect(server.endpoints["ingest"])
            try:
                while not stop_flooding.is_set():
                    try:
                        feed.send(flood)
                    except zmq.Again:
                        pass
            finally:
                feed.close()

        flooder = threading.Thread(target=keep_the_queue_full, daemon=True)
        flooder.start()
        wait_for(lambda: server.counters["ingest_messages"] > 20)  # (the flood arrives)
        pending = server.pipeline.engine.scheduler.pending_tokens()
        assert pending > 0
        server.stop()
        thread.join(120)
        stop_flooding.set()
        flooder.join(10)
    err = capsys.readouterr().err
    said = re.search(r"drained (\d+) pending tokens before stopping", err)
    assert said is not None and int(said[1]) > 0, err  # (it said "drained 0" before)
    forwards = re.search(r"\((\d+) forwards in [\d.]+ s; [\d.]+ s reading the ingest queues\)", err)
    assert forwards is not None and int(forwards[1]) > 0, err


def test_a_read_until_settled_ends_beside_a_steady_feed_but_reads_a_backlog_whole(checkpoint) -> None:
    """review435 #1, #2: a feed sending more often than the settle (50 ms) never let the ingest queues stay empty,
    so a placing `streams` (a feed's start) and a stop's first read held the loop for their whole bound (10 s, the
    drain_s): no forward, no heartbeat. What keeps coming while the kernel holds nothing of the ingest connections
    is another feed's flow, not a backlog: the read ends after a few such settles; a backlog queued before it (a
    killed feed's, still in the kernel) is read whole. (The server's loop is not running: the read is called as the
    loop would.)"""
    from engine.service.server import Server

    server = Server(pipeline_config(checkpoint, endpoints=EPHEMERAL))
    server.bind()
    backlog = [encode(ticks(1, seed=k, streams=1)) for k in range(2000)]
    steady = encode(ticks(1, seed=9, streams=1))
    sent, stop_sending = [0], threading.Event()

    def steady_feed() -> None:  # 1,000 messages 5 ms apart: 5 s of a feed's flow (the read ends long before)
        feed = zmq.Context.instance().socket(zmq.PUSH)
        feed.linger = 0
        feed.connect(server.endpoints["ingest"])
        try:
            while sent[0] < 1000 and not stop_sending.wait(0.005):
                feed.send(steady)
                sent[0] += 1
        finally:
            feed.close()

    killed = zmq.Context.instance().socket(zmq.PUSH)  # a backlog: sent, then its feed gone
    killed.linger = 5000
    killed.connect(server.endpoints["ingest"])
    try:
        for message in backlog:
            killed.send(message)
    finally:
        killed.close()  # (linger: its messages reach the server's side first)
    feeder = threading.Thread(target=steady_feed, daemon=True)
    try:
        feeder.start()
        wait_for(lambda: sent[0] > 5)
        read = server._read_until_settled(time.monotonic() + 30)
        during = sent[0]
    finally:
        stop_sending.set()
        feeder.join(10)
        server.close()
    assert read >= len(backlog)  # the killed feed's messages, every one
    assert during < 1000, (read, during)  # it ended while the steady feed still sent (it read to its end before)
