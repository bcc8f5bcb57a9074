"""The Python clients an application embeds, against real ZeroMQ peers on 127.0.0.1: ControlClient takes only
its own reply (a reply that comes after its call timed out is dropped, never handed to the next call) and
takes turns between threads; AnswerSubscriber waits for ever when asked to; ticks built from numpy values send."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import msgpack
import numpy as np
import pytest
import zmq

from connectors.feed import FeedClient
from connectors.ticks import InvalidTick, trade
from connectors.wire_payload import pack, packable
from engine.service.client import AnswerSubscriber, ControlClient, ControlError, ControlTimeout


class SlowControl:
    """A ROUTER (on ``endpoint``, or an ephemeral port) that answers each request with its own fields (or
    ``reply(request)``'s map), after `delay_s` for requests whose `slow` is set; `ops` lists the ops it took."""

    def __init__(self, reply: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                 endpoint: str | None = None) -> None:
        self.reply = reply
        self.ops: list[str] = []
        self.context = zmq.Context()  # its own: closed, its listener is gone, as with a service's process
        self.sock = self.context.socket(zmq.ROUTER)
        self.sock.linger = 0
        if endpoint is None:
            endpoint = f"tcp://127.0.0.1:{self.sock.bind_to_random_port('tcp://127.0.0.1')}"
        else:
            self.sock.bind(endpoint)
        self.endpoint = endpoint
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        held: list[tuple[float, list[bytes]]] = []
        while not self.stop.is_set():
            if self.sock.poll(10):
                *envelope, payload = self.sock.recv_multipart()
                request = msgpack.unpackb(payload, raw=False)
                self.ops.append(request.get("op"))
                reply = {"ok": True, **{k: v for k, v in request.items() if k != "op"}}
                if self.reply is not None:
                    reply = {**self.reply(request), "id": request["id"]}
                slow = request.get("slow")  # True: 0.6 s; a number: that many seconds
                due = time.monotonic() + (0.6 if slow is True else float(slow or 0.0))
                held.append((due, [*envelope, msgpack.packb(reply)]))
            for item in [h for h in held if h[0] <= time.monotonic()]:
                held.remove(item)
                self.sock.send_multipart(item[1])

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()
        self.context.term()


@pytest.fixture
def slow_control():
    server = SlowControl()
    yield server
    server.close()


def test_a_reply_after_its_call_timed_out_is_never_the_next_calls(slow_control) -> None:
    control = ControlClient(slow_control.endpoint, timeout_s=5)
    with pytest.raises(ControlError, match=r"within the time-out \(0.2 s\)"):
        control.request({"op": "ask", "stream": "BURST.B", "slow": True}, timeout_s=0.2)  # (`slow`: this
        # fake service's own key, which `call` refuses: `request` sends a map as it is)
    time.sleep(0.8)  # the late reply is waiting on the socket now
    assert control.call("ask", stream="EQ.MSFT") == {"ok": True, "stream": "EQ.MSFT"}  # was BURST.B's reply
    assert control.call("answers", limit=2) == {"ok": True, "limit": 2}
    assert control.stale_replies == 1
    # an id of the caller's own, used twice: each call still gets its own reply, with the caller's id on it
    with pytest.raises(ControlTimeout):  # a TimeoutError too: `except TimeoutError` catches it
        control.request({"op": "ask", "stream": "LATE", "slow": True, "id": "req"}, timeout_s=0.2)
    time.sleep(0.8)
    assert control.call("answers", id="req", limit=3) == {"ok": True, "limit": 3, "id": "req"}
    assert control.call("answers", after=np.int64(7)) == {"ok": True, "after": 7}  # numpy values send
    control.close()
    with pytest.raises(ControlError, match="is closed"):
        control.call("health")


def test_threads_sharing_a_control_client_each_get_their_own_replies(slow_control) -> None:
    control = ControlClient(slow_control.endpoint, timeout_s=5)
    wrong: list[tuple[str, int]] = []

    def asks(stream: str) -> None:
        for i in range(25):
            reply = control.call("answers", topic=stream, after=i)
            if (reply["topic"], reply["after"]) != (stream, i):
                wrong.append((stream, i))

    threads = [threading.Thread(target=asks, args=(f"S{n}",)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == [] and control.stale_replies == 0
    # a call's time-out counts its wait for another thread's call: 0.2 s, not the slow call's 4 (the margin is wide so
    # that a loaded machine cannot blur the two)
    slow = threading.Thread(target=control.request, args=({"op": "ask", "slow": 4.0, "stream": "S"},))
    slow.start()
    time.sleep(0.05)
    started = time.monotonic()
    with pytest.raises(ControlTimeout, match="another thread's call"):
        control.call("health", timeout_s=0.2)
    assert time.monotonic() - started < 2.0
    slow.join()
    control.close()


def test_an_answer_subscriber_waits_for_ever_when_told_to() -> None:
    pub = zmq.Context.instance().socket(zmq.PUB)
    pub.linger = 0
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    subscriber = AnswerSubscriber(f"tcp://127.0.0.1:{port}", ["dir/"])
    time.sleep(0.3)  # the subscription reaches the publisher

    def publish_later() -> None:
        time.sleep(0.5)
        pub.send_multipart([b"dir/X/", msgpack.packb({"seq": 1})])

    threading.Thread(target=publish_later, daemon=True).start()
    assert subscriber.recv(timeout_s=None) == ("dir/X/", {"seq": 1})  # was a TypeError
    # a wait for ever ends when another thread closes the subscriber (an application shutting down)
    ended: list[BaseException] = []

    def wait() -> None:
        try:
            subscriber.recv(timeout_s=None)
        except RuntimeError as e:
            ended.append(e)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    subscriber.close()
    waiter.join(5)
    assert not waiter.is_alive() and "is closed" in str(ended[0])
    with pytest.raises(RuntimeError, match="is closed"):
        subscriber.recv(1.0)
    pub.close()


def test_ticks_from_numpy_values_build_and_send() -> None:
    tick = trade("NP.X", np.int64(1_704_153_600_000_000_000), np.float64(101.25), np.float32(2.0), "buy")
    assert type(tick.ts) is int and tick.price == 101.25 and tick.size == 2.0
    payload, n = pack({"stream": "NP.X", "ts": np.int64(5), "kind": "trade", "price": np.float32(1.5), "size": 1.0})
    assert n == 1 and msgpack.unpackb(payload) == {"stream": "NP.X", "ts": 5, "kind": "trade", "price": 1.5,
                                                   "size": 1.0}
    with pytest.raises(TypeError, match="cannot be sent: a tick's fields are str, int \\(64-bit\\), float or None, "):
        pack({"stream": "NP.X", "ts": object()})
    with pytest.raises(TypeError, match=r"value 1000000000000000000000000000000 \(an int past 64 bits\) cannot be "):
        msgpack.packb({"op": "ask", "max_stale_ticks": 10**30}, default=packable)  # (a request, as ControlClient)


def test_aware_datetimes_send_as_int_ns_and_a_naive_one_is_refused_with_the_fix() -> None:
    """review384 #3: `FeedClient.send(df.to_dicts())` of a polars Datetime column (aware datetimes) and trade() of
    an aware datetime were refused as no sendable value, the fix unsaid. An aware datetime is one instant: sent as
    its int ns, exactly; a naive one names none, refused with what to send."""
    import polars as pl

    ns = 1_704_153_600_123_456_000
    rows = pl.DataFrame({"ts": [ns], "stream": ["DT.A"], "price": [1.5], "size": [1.0]}) \
        .with_columns(pl.col("ts").cast(pl.Datetime("ns", "America/New_York"))).to_dicts()
    assert msgpack.unpackb(pack(rows)[0]) == [{"ts": ns, "stream": "DT.A", "price": 1.5, "size": 1.0}]
    new_york_midnight = datetime(2024, 1, 1, 19, tzinfo=timezone(-timedelta(hours=5)))
    assert trade("DT.A", new_york_midnight, 1.5, 1.0).ts == ns // 10**9 * 10**9
    naive = datetime(2024, 1, 2)
    with pytest.raises(TypeError, match=r'without a time zone names no instant.*pl\.col\("ts"\)\.dt\.epoch\("ns"\)'):
        pack({"stream": "DT.A", "ts": naive, "price": 1.5, "size": 1.0})
    with pytest.raises(InvalidTick, match="ts_not_int: ts must be an int of nanoseconds, got datetime: a datetime "
                                          "without a time zone"):
        trade("DT.A", naive, 1.5, 1.0)
    pd = pytest.importorskip("pandas")  # (not a dependency: where it is installed, its Timestamps' ns are kept)
    stamp = pd.Timestamp(ns + 789, tz="UTC")
    assert msgpack.unpackb(pack({"ts": stamp})[0]) == {"ts": ns + 789} and trade("A", stamp, 1.0, 1.0).ts == ns + 789


def test_an_array_as_a_request_field_is_sent_as_the_list_of_its_values() -> None:
    """review384 #6: `streams=df.symbol.unique()` (a numpy array) raised numpy's own ValueError, or a 1-element one
    went as a str (the service then said a str was sent); a pandas array was refused as no scalar. An array is sent
    as the list of its plain values; a set is refused saying to send a list."""
    import polars as pl

    def sent(value: object) -> object:
        return msgpack.unpackb(msgpack.packb({"streams": value}, default=packable))["streams"]

    assert sent(np.array(["GI.A"])) == ["GI.A"] and sent(np.array(["GI.A", "NOPE"])) == ["GI.A", "NOPE"]
    assert sent(np.array([[1, 2]], dtype=np.int64)) == [[1, 2]] and sent(np.array("GI.A")) == "GI.A"
    assert sent(np.array(["2024-01-01T00:00:01"], dtype="datetime64[us]")) == [1_704_067_201_000_000_000]
    assert sent(pl.Series(["GI.A", "GI.B"]).unique(maintain_order=True)) == ["GI.A", "GI.B"]
    with pytest.raises(TypeError, match=r"a request's values those or lists and maps of them: send a list of its "):
        sent({"GI.A"})
    pd = pytest.importorskip("pandas")  # (not a dependency: where it is installed)
    assert sent(pd.Series(["GI.A", "GI.A"]).unique()) == ["GI.A"] and sent(pd.Index(["GI.A"])) == ["GI.A"]
    # a nullable int column's missing value is nil (a field left out), in a list or alone: `seq` of Int64 rows
    assert sent(pd.array([7, None], dtype="Int64")) == [7, None] and sent(pd.NA) is None


def test_a_decimal_is_sent_as_its_int_or_nearest_float() -> None:
    """session 48's fix388 left it: a DECIMAL column's value (polars' `to_dicts()` of a Decimal column, a database's
    NUMERIC) was refused by `FeedClient.send` and `trade()` as no number, though file replay reads such a column. A
    whole Decimal is its int (a ts of ns stays exact), another its nearest float; NaN stays NaN, refused as such."""
    from decimal import Decimal

    import polars as pl

    rows = pl.DataFrame({"ts": [1_700_000_000_123_456_789], "stream": ["DEC.A"], "price": [Decimal("101.25")],
                         "size": [Decimal("3")]}, schema_overrides={"price": pl.Decimal(12, 2),
                                                                      "size": pl.Decimal(12, 0)}).to_dicts()
    assert isinstance(rows[0]["price"], Decimal)
    assert msgpack.unpackb(pack(rows)[0]) == [{"ts": 1_700_000_000_123_456_789, "stream": "DEC.A", "price": 101.25,
                                               "size": 3}]
    exact_ts = Decimal(1_700_000_000_123_456_789)
    assert trade("DEC.A", exact_ts, Decimal("0.1"), Decimal("2.5")) == trade("DEC.A", 1_700_000_000_123_456_789, 0.1,
                                                                             2.5)
    with pytest.raises(InvalidTick, match="nonfinite_price"):
        trade("DEC.A", exact_ts, Decimal("NaN"), 1.0)


def test_subscribers_refuse_a_bare_topic_string_and_a_missing_control_client() -> None:
    from engine.service.client import AnswerSubscriber, GaplessSubscriber

    with pytest.raises(TypeError, match=r'topics is a list of topic prefixes, e\.g\. \["dir20/"\]'):
        AnswerSubscriber("tcp://127.0.0.1:1", "dir20/")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a ControlClient of the same service"):
        GaplessSubscriber("tcp://127.0.0.1:1", None)  # type: ignore[arg-type]


@contextlib.contextmanager
def _unlistened_endpoint() -> Iterator[str]:
    """An endpoint nothing listens on for as long as it is held: a port bound and never listened on, so no other
    process can take it meanwhile (a port bound once and let go was taken by another test's server under load)."""
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    try:
        yield f"tcp://127.0.0.1:{held.getsockname()[1]}"
    finally:
        held.close()


def test_time_outs_are_positive_and_a_tiny_connect_wait_is_named_as_the_cause() -> None:
    """0 or a negative time-out failed at once and blamed the service ("busy?"); a 1 ms connect wait blamed it as
    down ("is the service running there?")."""
    from engine.service.client import ControlUnreachable

    with _unlistened_endpoint() as endpoint:
        for bad in (0, -1, float("nan"), "5"):
            with pytest.raises(ValueError, match="timeout_s is a number of seconds > 0"):
                ControlClient(endpoint, timeout_s=bad)
        with pytest.raises(ValueError, match="connect_timeout_s"):
            ControlClient(endpoint, connect_timeout_s=0)
        with ControlClient(endpoint, timeout_s=5) as control:
            with pytest.raises(ValueError, match="timeout_s is a number of seconds > 0, got -1"):
                control.call("health", timeout_s=-1)
        with ControlClient(endpoint, timeout_s=5, connect_timeout_s=0.001) as control:
            with pytest.raises(ControlUnreachable, match="a time-out that short is seldom enough to connect"):
                control.call("health")
        with ControlClient(endpoint, timeout_s=5, connect_timeout_s=0.3) as control:
            with pytest.raises(ControlUnreachable, match="is the service running there"):
                control.call("health")


def test_the_tail_of_a_message_an_interrupted_recv_left_is_skipped_not_raised() -> None:
    """A Ctrl-C between a message's topic frame and its payload left the payload queued alone; the next recv
    unpacked one frame into two names and raised ValueError. It is skipped (counted) and the next message read."""
    pub = zmq.Context.instance().socket(zmq.PUB)
    pub.linger = 0
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    with AnswerSubscriber(f"tcp://127.0.0.1:{port}", ["t/"]) as answers:
        message = None
        deadline = time.monotonic() + 60
        while message is None and time.monotonic() < deadline:  # (the slow joiner: publish until it is seen)
            pub.send(b"t/a lone frame, as an interrupted recv leaves one")
            pub.send_multipart([b"t/whole", msgpack.packb({"seq": 1})])
            message = answers.recv(timeout_s=0.2)
        assert message == ("t/whole", {"seq": 1})
        assert answers.stray_frames >= 1
    pub.close()


@contextlib.contextmanager
def _publisher() -> Iterator[tuple[zmq.Socket, str]]:
    """A PUB on an ephemeral port that queues without bound (sndhwm 0): what it publishes is never dropped on its
    side, so a test can count every message."""
    pub = zmq.Context.instance().socket(zmq.PUB)
    pub.linger = 0
    pub.sndhwm = 0
    port = pub.bind_to_random_port("tcp://127.0.0.1")
    try:
        yield pub, f"tcp://127.0.0.1:{port}"
    finally:
        pub.close()


def _subscribed(pub: zmq.Socket, answers: AnswerSubscriber) -> None:
    """Publish a `t/warm` message until the subscriber sees one (the slow joiner), then read the rest of them."""
    deadline = time.monotonic() + 60
    while answers.recv(timeout_s=0.05) is None and time.monotonic() < deadline:
        pub.send_multipart([b"t/warm", msgpack.packb({"seq": 0})])
    while answers.recv(timeout_s=0.05) is not None:
        pass


def test_threads_sharing_an_answer_subscriber_take_turns_on_its_socket() -> None:
    """review421 #4: reader threads sharing one AnswerSubscriber polled and read its socket at once, which libzmq
    does not allow: the process aborted (an assertion in fq.cpp, a corrupted heap), hung, or read one message's
    frames into two. They take turns: every message is read once, by one of them. (The old code failed only some
    runs: about 1 in 5 of this size here.)"""
    count = 3000
    with _publisher() as (pub, endpoint), AnswerSubscriber(endpoint, ["t/"]) as answers:
        _subscribed(pub, answers)
        seqs: list[int] = []
        errors: list[BaseException] = []

        def read() -> None:
            try:  # until every message is read (none is dropped: the PUB queues without bound), or one failed
                deadline = time.monotonic() + 60
                while len(seqs) < count and not errors and time.monotonic() < deadline:
                    if (message := answers.recv(timeout_s=0.1)) is not None:
                        seqs.append(message[1]["seq"])
            except BaseException as e:  # (said by the assertion below, not lost in a thread)
                errors.append(e)

        readers = [threading.Thread(target=read) for _ in range(4)]
        for reader in readers:
            reader.start()
        for seq in range(1, count + 1):
            pub.send_multipart([b"t/x", msgpack.packb({"seq": seq})])
        for reader in readers:
            reader.join()
    assert errors == [] and sorted(seqs) == list(range(1, count + 1))


def test_clients_used_in_a_forked_child_refuse_at_once_naming_the_fix(slow_control) -> None:
    """review421 #1: a client made before multiprocessing forked (Linux's default start method) hung in the child
    past its time-out, its ZeroMQ I/O thread being the parent's alone. Every use in the child raises
    UsedAfterFork, saying to make the client there or to use spawn; its close there leaves the parent's sockets
    alone, and the parent's clients go on."""
    import faulthandler
    import json
    import os

    from engine.forked_clients import UsedAfterFork
    from engine.service.client import GaplessSubscriber

    control = ControlClient(slow_control.endpoint, timeout_s=1)
    assert control.call("health") == {"ok": True}
    with _publisher() as (pub, endpoint):
        answers = AnswerSubscriber(endpoint, ["t/"])
        gapless = GaplessSubscriber(endpoint, control, ["t/"])
        feed = FeedClient("tcp://127.0.0.1:9", connect_timeout_ms=100)  # (its send would wait, then time out)
        uses = {"call": lambda: control.call("health"), "receive": control.receive, "recv": lambda: answers.recv(0.5),
                "wait_ready": lambda: answers.wait_ready(0.5), "refused": answers.refused,
                "gapless recv": lambda: gapless.recv(0.5), "gapless wait_ready": lambda: gapless.wait_ready(0.5),
                "feed send": lambda: feed.send([trade("X", 1, 1.0, 1.0, "buy")])}
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: reports through the pipe, and ends without the parent's teardown
            try:
                faulthandler.dump_traceback_later(20, exit=True)  # (the old code's hang ends the child, said)
                said = {}
                for name, use in uses.items():
                    try:
                        said[name] = f"returned {use()!r}"
                    except UsedAfterFork as e:
                        said[name] = "refused" if "multiprocessing.get_context('spawn')" in str(e) else str(e)
                    except BaseException as e:
                        said[name] = repr(e)
                for client in (gapless, answers, control, feed):
                    client.close()
                os.write(write, json.dumps(said).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            said = json.loads(pipe.read() or b"{}")
        os.waitpid(pid, 0)
        assert said == {name: "refused" for name in uses}
        assert control.call("health") == {"ok": True}  # the parent's own, unharmed by the child's close
        _subscribed(pub, answers)
        gapless.close()
        answers.close()
        feed.close()
    control.close()


def test_a_gapless_subscribers_missed_counts_the_answers_no_longer_kept_too() -> None:
    """review421 #3: `missed` (per topic: what PUB did not deliver) counted only the answers a fetch got back, so it
    always summed to `filled`, and which topic lost the `unrecoverable` ones was said nowhere. A service that keeps
    t/x's answers 6 to 9 only: PUB delivers 10, the subscriber had none (resumed with nothing saved): 9 missed, 4
    filled, 5 unrecoverable."""
    from engine.service.client import GaplessSubscriber

    def kept(request: dict[str, Any]) -> dict[str, Any]:
        after = request.get("after", 0)
        return {"ok": True, "first_seq": 1, "answers": [{"topic": "t/x", "seq": seq, "answer_ts": seq}
                                                         for seq in range(max(after + 1, 6), 10)]}

    service = SlowControl(kept)
    with _publisher() as (pub, endpoint), ControlClient(service.endpoint, timeout_s=5) as control, \
            GaplessSubscriber(endpoint, control, ["t/"], last_seqs={}) as answers:
        _subscribed(pub, answers.subscriber)  # (the warm-up read past the gapless one: none of its answers)
        pub.send_multipart([b"t/x", msgpack.packb({"seq": 10, "answer_ts": 10})])
        delivered = [answers.recv(timeout_s=30) for _ in range(5)]
    service.close()
    assert [message[1]["seq"] for message in delivered if message is not None] == [6, 7, 8, 9, 10]
    assert (answers.missed, answers.filled, answers.unrecoverable) == ({"t/x": 9}, 4, 5)


def test_a_call_after_the_service_stopped_is_unreachable_within_the_connect_wait_and_never_sent_later() -> None:
    """review421 #5: a client whose service had stopped raised ControlTimeout ("the request may still run") after
    its whole timeout_s, where no connection is ControlUnreachable after connect_timeout_s (a ConnectionError: send
    it again). The request it held is dropped with that error: a DEALER keeps it for the next connection, and a
    service back later ran it (so did a fresh client's, refused as unreachable)."""
    from engine.service.client import ControlUnreachable

    service = SlowControl()
    with ControlClient(service.endpoint, timeout_s=3, connect_timeout_s=0.3) as control:
        assert control.call("health") == {"ok": True}
        service.close()
        while control._handshake.live:  # (the drop seen, as a call made a moment later sees it)
            time.sleep(0.01)
            control._handshake.poll()
        with pytest.raises(ControlUnreachable, match="dropped and nothing accepted a new one within 0.3 s"):
            control.call("health")
        back = SlowControl(endpoint=service.endpoint)
        assert control.call("answers", limit=7) == {"ok": True, "limit": 7}
    back.close()
    assert back.ops == ["answers"]  # never the health the error said was not sent


def test_wait_ready_says_a_service_may_be_starting_and_refuses_a_wait_of_0() -> None:
    """review421 #6: wait_ready on a service still starting (its answers socket not bound yet) said "is the service
    running there?", and wait_ready(0) was taken and blamed on the service. A GaplessSubscriber, whose control
    client hears `health` say starting, says so; a plain subscriber says a service may be starting; 0 is refused."""
    from engine.service.client import GaplessSubscriber

    starting = SlowControl(lambda request: {"ok": True, "status": "starting", "phase": "replaying the tick log"})
    with _unlistened_endpoint() as endpoint, ControlClient(starting.endpoint, timeout_s=5) as control, \
            GaplessSubscriber(endpoint, control, ["t/"]) as answers:
        with pytest.raises(ValueError, match="timeout_s is a number of seconds > 0, got 0"):
            answers.subscriber.wait_ready(0)
        with pytest.raises(TimeoutError, match=r"or one still starting \(its answers socket binds once it serves"):
            answers.subscriber.wait_ready(0.2)
        with pytest.raises(TimeoutError, match=r"the service is starting \(replaying the tick log\): its answers "):
            answers.wait_ready(0.2)
    starting.close()


def test_a_resumed_gapless_subscriber_counts_a_quiet_topics_answers_no_longer_kept_at_once() -> None:
    """review421 #8: resumed at t/y's seq 5 while the service, its last seq 20, keeps none of t/y's answers any
    more, wait_ready counted nothing (`unrecoverable` 0, `last_seq` 5) until the topic published again, never for
    a topic gone quiet. The reply's last seq bounds the loss: 15 unrecoverable at wait_ready, passed over; the
    heartbeats' last_seqs, which say 20 too, no longer count them again at each heartbeat."""
    from engine.service.client import GaplessSubscriber

    replies = {"health": {"ok": True, "status": "serving", "epoch": "E1"}, "topics": {"ok": True, "topics": {}},
               "answers": {"ok": True, "answers": [], "last_seq": 20, "first_seq": 1, "complete": False}}
    service = SlowControl(lambda request: replies[request["op"]])
    beating = threading.Event()
    with _publisher() as (pub, endpoint), ControlClient(service.endpoint, timeout_s=5) as control, \
            GaplessSubscriber(endpoint, control, ["t/"], last_seqs={"t/y": 5}, epoch="E1") as answers:

        def beat() -> None:  # the service's heartbeats, as wait_ready waits for one
            while not beating.is_set():
                pub.send_multipart([b"_heartbeat/", msgpack.packb({"seq": 1, "ts": 1, "epoch": "E1",
                                                                   "last_seqs": {"t/y": 20}})])
                beating.wait(0.01)

        beats = threading.Thread(target=beat)
        beats.start()
        try:
            answers.wait_ready(30)
            assert answers.recv(timeout_s=0.1) is None  # (heartbeats read meanwhile: none delivered)
        finally:
            beating.set()
            beats.join()
    service.close()
    assert (answers.unrecoverable, answers.missed, answers.last_seq) == (15, {"t/y": 15}, {"t/y": 20})


def test_a_feed_message_over_the_engines_limit_is_refused_before_it_goes() -> None:
    """review421 #2: FeedClient.send of a list over limits.max_message_bytes returned its tick count and the engine
    refused every tick of it as `oversize`, telling the sender nothing. It is a ValueError naming the limit and the
    way out, before anything is sent; None sends any size (a service configured larger)."""
    ticks = [trade(f"S{i % 7}", i + 1, 100.0, 1.0, "buy") for i in range(200)]
    with FeedClient("tcp://127.0.0.1:9", connect_timeout_ms=100, max_message_bytes=2000) as feed:
        with pytest.raises(ValueError, match=r"^a message of 200 ticks packs to [\d,]+ bytes, over the engine's "
                                             r"limits\.max_message_bytes \(2,000\)"):
            feed.send(ticks)
        assert feed.messages == feed.ticks == 0
    with pytest.raises(ValueError, match="max_message_bytes must be an int >= 1, or None"):
        FeedClient("tcp://127.0.0.1:9", max_message_bytes=0)
