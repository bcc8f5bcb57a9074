"""The service over real ZeroMQ sockets on 127.0.0.1 with ephemeral ports."""

from __future__ import annotations

import dataclasses
import gc
import json
import math
import re
import socket
import struct
import threading
import time
import urllib.request

import msgpack
import pytest
import torch
import zmq

from conftest import documented_nested_stats, nested_stats_keys, serving, tiny_tick_checkpoint
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.client import AnswerSubscriber, ControlClient, ControlError
from engine.service.config import ServiceConfig
from engine.service.server import HEARTBEAT_TOPIC, REJECTS_TOPIC, TOKENIZED_MARKER, Server

DIR_QUERY = """
queries:
  - {name: dir, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
"""


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"))


@pytest.fixture
def server(checkpoint, tmp_path):
    queries = tmp_path / "q.yaml"
    queries.write_text(DIR_QUERY)
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)},
        "kv": {"cells": 8192, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                      "control": "tcp://127.0.0.1:0", "metrics_port": 0},
        "limits": {"heartbeat_s": 0.2, "max_message_bytes": 4096},
        "queries": str(queries),
    })
    with serving(config) as srv:
        yield srv


@pytest.fixture
def feed(server):
    sock = zmq.Context.instance().socket(zmq.PUSH)
    sock.linger = 1000
    sock.connect(server.endpoints["ingest"])
    yield sock
    sock.close()


def wait_for(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def collect(sub: AnswerSubscriber, until, timeout_s: float = 10.0) -> list[tuple[str, dict]]:
    got = []
    deadline = time.monotonic() + timeout_s
    while not until(got) and time.monotonic() < deadline:
        message = sub.recv(timeout_s=0.2)
        if message:
            got.append(message)
    return got


def test_feed_to_subscriber_with_increasing_sequence_numbers(server, feed) -> None:
    market = SyntheticMarket(SyntheticConfig(seed=2))
    with AnswerSubscriber(server.endpoints["answers"], ["dir/"]) as sub:
        time.sleep(0.2)  # slow joiner: let the subscription reach the PUB socket
        for _ in range(20):
            feed.send(encode(market.next_batch(5)))
            time.sleep(0.03)  # paced, so answers come from many batches
        got = collect(sub, lambda g: len(g) >= 12)
    assert len(got) >= 12
    last: dict[str, int] = {}
    for topic, payload in got:
        assert topic == f"dir/{payload['stream']}/" and payload["query"] == "dir"
        assert payload["seq"] > last.get(topic, 0)
        assert set(payload["value"]["probs"]) == {"down", "flat", "up"}
        assert payload["answer_ts"] >= payload["data_ts"] > 0 and payload["model"]
        last[topic] = payload["seq"]


def test_the_serving_loop_runs_with_its_heap_frozen_and_thaws_it_on_stop(checkpoint, tmp_path) -> None:
    """A full collection would walk the libraries, the model and the restored streams (~200k objects, ~145 ms
    on a 2-core AMD EPYC) from inside the loop: `serve` freezes them once it is up (heap_memory.freeze_heap)."""
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 2048, "block_size": 16},
                                      "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                                                    "control": "tcp://127.0.0.1:0", "metrics_port": 0}})
    with serving(config, freeze_first=False):  # (serve's own freeze, not the test helper's)
        assert gc.get_freeze_count() > 10_000  # torch and transformers alone hold more than this
    assert gc.get_freeze_count() == 0  # stopped: what it leaves behind is collected as usual


def test_register_and_unregister_change_what_is_published(server, feed) -> None:
    market = SyntheticMarket(SyntheticConfig(seed=3))
    with ControlClient(server.endpoints["control"]) as control, \
            AnswerSubscriber(server.endpoints["answers"], ["vol/"]) as sub:
        time.sleep(0.2)
        feed.send(encode(market.next_batch(20)))
        assert collect(sub, lambda g: False, timeout_s=0.5) == []  # not registered yet
        reply = control.call("register", yaml="queries:\n  - {name: vol, streams: ['*'], question: volatility_50,"
                                              " kind: choice, trigger: batch}\n")
        assert reply["registered"] == ["vol"]
        assert {q["name"] for q in control.call("list")["queries"]} == {"dir", "vol"}
        feed.send(encode(market.next_batch(20)))
        assert collect(sub, lambda g: len(g) >= 1)
        control.call("unregister", name="vol")
        time.sleep(0.3)
        while sub.recv(timeout_s=0.1):  # drain what was in flight
            pass
        feed.send(encode(market.next_batch(20)))
        assert collect(sub, lambda g: False, timeout_s=0.7) == []
        with pytest.raises(ControlError, match="no query named .vol."):
            control.call("unregister", name="vol")


def test_answers_say_which_registration_of_their_query_computed_them(server, feed) -> None:
    """A query replaced under its name keeps its topic and seqs: a consumer could not tell the old spec's answers
    from the new one's. Each answer carries `query_version`, the registry version its query was registered at."""
    market = SyntheticMarket(SyntheticConfig(seed=8))
    first = "queries:\n  - {name: volq, streams: ['*'], question: volatility_50, kind: choice, trigger: batch}\n"
    with ControlClient(server.endpoints["control"]) as control, \
            AnswerSubscriber(server.endpoints["answers"], ["volq/"]) as sub:
        time.sleep(0.2)
        registered_at = control.call("register", yaml=first)["version"]
        feed.send(encode(market.next_batch(20)))
        old = collect(sub, lambda g: len(g) >= 1)
        replaced_at = control.call("register", yaml=first.replace("volatility_50", "direction_20"))["version"]
        time.sleep(0.3)
        while sub.recv(timeout_s=0.1):  # drain what was in flight
            pass
        feed.send(encode(market.next_batch(20)))
        new = collect(sub, lambda g: len(g) >= 1)
        stream = new[0][1]["stream"]
        asked = control.call("ask", stream=stream, query="volq")["answer"]
        ad_hoc = control.call("ask", stream=stream,
                              spec={"name": "adhoc", "question": "direction_5", "kind": "choice"})["answer"]
        control.call("unregister", name="volq")
    assert replaced_at > registered_at
    assert {payload["query_version"] for _, payload in old} == {registered_at}
    assert {payload["query_version"] for _, payload in new} == {replaced_at}
    assert asked["query_version"] == replaced_at and ad_hoc["query_version"] == 0


def test_late_subscriber_gets_no_gap_and_no_duplicate(server, feed) -> None:
    market = SyntheticMarket(SyntheticConfig(seed=4))
    stop = threading.Event()

    def pump() -> None:
        while not stop.is_set():
            feed_local.send(encode(market.next_batch(2)))
            time.sleep(0.01)

    feed_local = zmq.Context.instance().socket(zmq.PUSH)
    feed_local.connect(server.endpoints["ingest"])
    pumper = threading.Thread(target=pump, daemon=True)
    pumper.start()
    try:
        with ControlClient(server.endpoints["control"]) as control:
            wait_for(lambda: control.call("get", query="dir", stream="SYN.A")["answer"] is not None)
            with AnswerSubscriber(server.endpoints["answers"], ["dir/SYN.A/"]) as sub:
                time.sleep(0.3)  # subscribe first ...
                snapshot = control.call("get", query="dir", stream="SYN.A")["answer"]  # ... then snapshot
                got = collect(sub, lambda g: sum(p["seq"] > snapshot["seq"] for _, p in g) >= 10)
    finally:
        stop.set()
        pumper.join(2)
        feed_local.close(linger=0)
    sequence = [snapshot["seq"]] + [p["seq"] for _, p in got if p["seq"] > snapshot["seq"]]
    assert len(sequence) >= 10
    assert sequence == list(range(sequence[0], sequence[0] + len(sequence)))  # contiguous: no gap, no duplicate


def test_bad_input_is_counted_and_good_ticks_around_it_are_ingested(server, feed) -> None:
    good = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(30)
    bad_messages = [
        b"\xc1\xff not msgpack",
        msgpack.packb({"stream": "X", "ts": "yesterday", "price": 1.0, "size": 1.0}),
        msgpack.packb({"stream": "X", "ts": 5, "price": math.nan, "size": 1.0}),
        msgpack.packb({"stream": "X", "ts": 5, "price": 1.0, "size": 1.0, "venue": "?"}),
        msgpack.packb({"stream": "X", "ts": 5, "bid": 2.0, "ask": 1.0}),
        msgpack.packb([{"stream": "X", "ts": 1, "price": 1.0, "size": 1.0}] * 400),  # oversize (> 4096 bytes)
    ]
    with AnswerSubscriber(server.endpoints["answers"], [REJECTS_TOPIC]) as sub, \
            ControlClient(server.endpoints["control"]) as control:
        time.sleep(0.2)
        before = control.call("stats")["stats"]["ticks_in"]
        for i, tick in enumerate(good):
            feed.send(encode(tick))
            if i < len(bad_messages):
                feed.send(bad_messages[i])
        # a list with good and bad ticks mixed, and a timestamp going backwards within a stream
        mixed = [good[-1].to_wire() | {"ts": good[-1].ts + 10}, {"stream": "X", "ts": 1, "price": -3.0, "size": 1.0},
                 good[-1].to_wire() | {"ts": good[-1].ts + 5}]
        feed.send(msgpack.packb(mixed))
        rejects = collect(sub, lambda g: len(g) >= 8)
        wait_for(lambda: control.call("stats")["stats"]["ticks_in"] - before == len(good) + 1)
        rejected = control.call("stats")["stats"]["rejected"]
    reasons = {p["reason"] for _, p in rejects}
    assert {"bad_msgpack", "ts_not_int", "nonfinite_price", "unknown_field", "crossed_quote", "oversize",
            "nonpositive_price", "ts_backwards"} <= reasons
    assert sum(rejected.values()) >= 8
    with ControlClient(server.endpoints["control"]) as control:
        assert control.call("health")["status"] == "serving"


def test_tokenized_ticks_are_accepted_and_validated(server, feed) -> None:
    items = [{"stream": "TOK", "ts": 10 + i, "tokens": [7, 8, 9, 10], "ticks": 1} for i in range(5)]
    items.append({"stream": "TOK", "ts": 99, "tokens": [100000]})  # outside the vocabulary
    with ControlClient(server.endpoints["control"]) as control:
        before = control.call("stats")["stats"]
        feed.send_multipart([TOKENIZED_MARKER, msgpack.packb(items)])
        wait_for(lambda: control.call("stats")["stats"]["ticks_in"] == before["ticks_in"] + 5)
        assert control.call("stats")["stats"]["rejected"].get("bad_tokens", 0) == \
            before["rejected"].get("bad_tokens", 0) + 1
        answer = control.call("ask", stream="TOK", query="dir")["answer"]
        assert answer["stream"] == "TOK" and answer["version"] == 5


def test_control_errors_reach_the_sender_and_a_new_users_client_mistakes_are_explained(server, feed) -> None:
    """Control errors (an unknown op, a bad document, every invalid query named, garbage bytes) reach the sender
    and the service keeps serving. JSON instead of msgpack on ingest and control, a topic without its '/', an ask
    without a query, a staleness that is not a tick count, a second service on the same port: each is told what to
    do. One service for both."""
    with ControlClient(server.endpoints["control"]) as control:
        assert control.request({"op": "fly"})["error"].startswith('unknown op "fly"')
        assert 'needs "yaml"' in control.request({"op": "register"})["error"]
        bad_yaml = control.request({"op": "register", "yaml": "queries:\n  - {name: x, streams: [a], kind: choice,"
                                                             " question: direction_20, trigerr: batch}\n"})
        assert not bad_yaml["ok"] and "control:register:2" in bad_yaml["error"] and "trigerr" in bad_yaml["error"]
        # every invalid query of a registration is named in the reply, not the first few hundred characters
        many = "queries:\n" + "".join(f"  - {{name: bad{i}, streams: [a], kind: choice, question: direction_20, "
                                       f"trigger: batch, colour{i}: red}}\n" for i in range(9))
        error = control.request({"op": "register", "yaml": many})["error"]
        assert [f"query \"bad{i}\"" in error for i in range(9)] == [True] * 9 and "characters)" not in error
        assert "no data" in control.request({"op": "ask", "stream": "nobody", "query": "dir"})["error"]
        control.send_raw(b"\xc1 garbage")
        error = control.receive()["error"]
        assert error == "request is not valid msgpack: a byte that starts no msgpack value"  # no JSON hint
        assert control.request({"op": "list"})["queries"]  # still serving
        assert control.call("stats")["stats"]["control_errors"] >= 4
    with AnswerSubscriber(server.endpoints["answers"], [REJECTS_TOPIC]) as sub, \
            ControlClient(server.endpoints["control"]) as control:
        sub.wait_ready(timeout_s=5)
        feed.send(json.dumps({"stream": "AAPL", "ts": 1_717_236_000_000_000_000, "price": 192.3, "size": 100}).encode())
        (_, reject), = collect(sub, lambda got: len(got) >= 1)
        assert reject["reason"] == "bad_msgpack" and "looks like JSON text" in reject["error"]
        control.send_raw(json.dumps({"op": "health"}).encode())
        assert "looks like JSON text: the engine reads msgpack" in control.receive()["error"]
        assert "topics end with \"/\"" in control.request({"op": "answers", "topic": "dir/AAPL", "after": 0})["error"]
        assert "needs \"query\" (a registered query's name) or \"spec\"" in control.request(
            {"op": "ask", "stream": "AAPL"})["error"]
        for stale, said in ((-1, "max_stale_ticks as an int >= 0"), ("5", '"max_stale_ticks" as int or nil'),
                            (2.5, '"max_stale_ticks" as int or nil')):
            assert said in control.request({"op": "ask", "stream": "AAPL", "query": "dir", "max_stale_ticks": stale})[
                "error"]
        assert control.call("health")["status"] == "serving"
    taken = server.endpoints["ingest"]
    with pytest.raises(OSError, match=rf"cannot bind the ingest socket to {taken}: port \d+ is in use \(is another "
                                      rf"flashtick serve running\? set endpoints.ingest"):  # before the engine loads
        Server(dataclasses.replace(server.config, endpoints=dataclasses.replace(server.config.endpoints, ingest=taken)))


def test_ask_with_staleness_uses_the_cache(server, feed) -> None:
    feed.send(encode(SyntheticMarket(SyntheticConfig(seed=6)).next_batch(40)))
    with ControlClient(server.endpoints["control"]) as control:
        wait_for(lambda: control.call("get", query="dir", stream="SYN.B")["answer"] is not None)
        cached = control.call("ask", stream="SYN.B", query="dir", max_stale_ticks=1000)
        assert cached["cached"] is True
        fresh = control.call("ask", stream="SYN.B", query="dir")
        assert fresh["cached"] is False and fresh["answer"]["seq"] == 0  # the asker's alone: never published
        assert fresh["answer"]["version"] >= cached["answer"]["version"]
        adhoc = control.call("ask", stream="SYN.B", spec={"name": "adhoc", "streams": ["SYN.B"],
                                                          "question": "move_bps_50", "kind": "expectation"})
        assert "expected" in adhoc["answer"]["value"]


def _fed_stats(server: Server, seed: int, ticks: int) -> dict:
    """``ticks`` synthetic ticks pushed and all computed: the `stats` that follow."""
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.linger = 1000
    push.connect(server.endpoints["ingest"])
    push.send(encode(SyntheticMarket(SyntheticConfig(seed=seed)).next_batch(ticks)))
    push.close()
    with ControlClient(server.endpoints["control"], timeout_s=60) as control:
        wait_for(lambda: control.call("stats")["stats"]["ticks_in"] == ticks and not server.pipeline.busy, 120)
        return control.call("stats")["stats"]


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch without oneDNN")
def test_gemm_kernel_gauges_tell_a_cache_step_from_a_leak(checkpoint, tmp_path) -> None:
    """oneDNN's compiled GEMM kernels (~0.5 MB each) grew RSS in steps while every count of `stats` stayed flat:
    it read as a leak. `stats` and /metrics now say how many are held, the cap (model.kernel_cache) and how many
    were compiled."""
    queries = tmp_path / "q.yaml"
    queries.write_text(DIR_QUERY)
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint), "weights": "float32-onednn", "kernel_cache": 64},
        "kv": {"cells": 8192, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                      "control": "tcp://127.0.0.1:0", "metrics_port": 0},
        "limits": {"heartbeat_s": 0.2}, "queries": str(queries)})
    with serving(config) as server:
        stats = _fed_stats(server, 5, 200)
        wait_for(lambda: stats["gemm_kernels"] == _sample(urllib.request.urlopen(
            server.endpoints["metrics"], timeout=10).read().decode(), "gemm_kernels"), 30)
        body = urllib.request.urlopen(server.endpoints["metrics"], timeout=10).read().decode()
    # the cap is the first of this process's engines to build a oneDNN layer: another test's, maybe
    assert 0 < stats["gemm_kernels"] <= stats["gemm_kernel_cache"] and stats["gemm_kernels_compiled"] > 0, stats
    assert _sample(body, "gemm_kernel_cache") == stats["gemm_kernel_cache"]
    assert _sample(body, "gemm_kernels_compiled_total") >= stats["gemm_kernels_compiled"]
    assert "# TYPE flashtick_gemm_kernels gauge" in body


def _sample(body: str, name: str) -> float:
    found = re.search(rf"^flashtick_{name} (\S+)$", body, re.M)
    assert found, f"no flashtick_{name} in\n{body}"
    return float(found.group(1))


def test_the_lag_a_scrape_reads_counts_the_time_since_the_last_refresh() -> None:
    """A backlog's lag stayed flat for up to 10 s of scrapes between heartbeats while it grew: the data waiting at
    the refresh has waited the time since too. Nothing waiting then stays 0."""
    from engine.service.metrics import start_metrics_server

    refreshed = time.time() - 30  # figures 30 s old: the oldest data then had waited 87 s
    snapshots = iter([{"lag_s": 87.0, "stats_time": refreshed}, {"lag_s": 0.0, "stats_time": refreshed}])
    metrics = start_metrics_server("127.0.0.1", 0, lambda: next(snapshots))
    try:
        url = f"http://127.0.0.1:{metrics.server_port}/metrics"
        scraped_at = time.time()
        behind = urllib.request.urlopen(url, timeout=10).read().decode()
        waited = (scraped_at - refreshed, time.time() - refreshed)  # since the refresh: the scrape came in between
        assert 87.0 + waited[0] - 0.001 <= _sample(behind, "lag_seconds") <= 87.0 + waited[1] + 0.001
        assert _sample(behind, "stats_timestamp_seconds") == pytest.approx(refreshed, abs=0.001)
        assert _sample(urllib.request.urlopen(url, timeout=10).read().decode(), "lag_seconds") == 0.0
    finally:
        metrics.shutdown()
        metrics.server_close()


def _scrape_abandoned(url: str) -> None:
    """What a scraper at its scrape_timeout does: send GET /metrics, then close at once with a reset (SO_LINGER 0)."""
    host, port = url.removeprefix("http://").split("/", 1)[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")


def test_heartbeats_and_metrics_say_how_fresh_their_figures_are_and_a_scrape_given_up_on_is_counted(server,
                                                                                                   capfd) -> None:
    """/metrics serves the engine thread's last refresh (each heartbeat): a scrape could not tell fresh figures
    from ones a stalled engine thread left behind. It has the heartbeat count and the refresh's time. Heartbeats
    come in order; /metrics answers GET and HEAD; a scrape given up on (a reset) is counted, not a traceback. One
    service for all three."""
    url = server.endpoints["metrics"]
    first = urllib.request.urlopen(url, timeout=10).read().decode()
    stamp, beats = _sample(first, "stats_timestamp_seconds"), _sample(first, "heartbeats_total")
    # the refresh of bind (before the first heartbeat: heartbeats_total 0), or a heartbeat's since
    assert -1 < time.time() - stamp < 600 and beats >= 0
    later = first
    deadline = time.monotonic() + 60
    while _sample(later, "heartbeats_total") <= beats and time.monotonic() < deadline:  # heartbeat_s: 0.2
        time.sleep(0.05)
        later = urllib.request.urlopen(url, timeout=10).read().decode()
    assert _sample(later, "heartbeats_total") > beats and _sample(later, "stats_timestamp_seconds") > stamp
    with AnswerSubscriber(server.endpoints["answers"], ["_heartbeat/"]) as sub:
        heartbeats = collect(sub, lambda g: len(g) >= 2, timeout_s=5)
    assert len(heartbeats) >= 2 and heartbeats[1][1]["seq"] > heartbeats[0][1]["seq"]
    body = urllib.request.urlopen(server.endpoints["metrics"], timeout=5).read().decode()
    assert "flashtick_ticks_in_total" in body and "flashtick_kv_cells_capacity 8192" in body
    rss = re.search(r"^flashtick_process_resident_memory_bytes (\d+)$", body, re.M)  # (Linux: from /proc)
    assert rss and 50 << 20 < int(rss.group(1)) < 64 << 30, body
    head = urllib.request.urlopen(urllib.request.Request(server.endpoints["metrics"], method="HEAD"), timeout=5)
    assert head.status == 200 and head.read() == b"" and int(head.headers["Content-Length"]) > 0
    abandoned = 0
    for _ in range(100):  # until the server has met a reset (its reply may also have been written before it came)
        _scrape_abandoned(url)
        body = urllib.request.urlopen(url, timeout=10).read().decode()  # it still answers
        abandoned = int(re.search(r"^flashtick_scrapes_abandoned_total (\d+)$", body, re.M).group(1))
        if abandoned:
            break
    assert abandoned >= 1 and "flashtick_ticks_in_total" in body
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Connection reset" not in err and "Broken pipe" not in err, err


def test_a_failing_scrape_is_one_line_on_stderr(capfd) -> None:
    from engine.service.metrics import start_metrics_server

    def broken_snapshot() -> dict:
        raise ValueError("no figures")

    metrics = start_metrics_server("127.0.0.1", 0, broken_snapshot)
    try:
        with pytest.raises(OSError):  # (the connection closes without a reply)
            urllib.request.urlopen(f"http://127.0.0.1:{metrics.server_port}/metrics", timeout=10)
        deadline = time.monotonic() + 30
        err = ""
        while "no figures" not in err and time.monotonic() < deadline:
            err += capfd.readouterr().err
            time.sleep(0.02)
    finally:
        metrics.shutdown()
        metrics.server_close()
    assert "Traceback" not in err
    assert re.fullmatch(r"flashtick: metrics: a request from 127\.0\.0\.1:\d+ failed: ValueError: no figures\n", err)


@pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")
def test_curve_protects_control_and_answers(checkpoint, tmp_path) -> None:
    public, secret = zmq.curve_keypair()
    (tmp_path / "server.key").write_bytes(secret)
    (tmp_path / "server.pub").write_bytes(public)
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "curve": {"enabled": True, "server_secret_key_file": str(tmp_path / "server.key"),
                  "server_public_key_file": str(tmp_path / "server.pub")},
    })
    srv = Server(config)
    srv.bind()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        with ControlClient(srv.endpoints["control"], timeout_s=5, server_public_key=public) as control:
            assert control.call("health")["ok"]
        with ControlClient(srv.endpoints["control"], timeout_s=5) as plain, \
                pytest.raises(ControlError, match="refused the connection: .*give --server-key"):
            plain.call("health")  # told why at once, not after the time-out
    finally:
        srv.stop()
        thread.join(5)


VALUES_QUERY = """
queries:
  - {name: dir_ev, streams: ["*"], question: direction_20, kind: expectation, trigger: batch,
     values: {down: -1, flat: 0, up: 1}}
"""


@pytest.fixture
def values_server(checkpoint, tmp_path):
    """A server whose startup config holds an expectation query with its own `values:`."""
    queries = tmp_path / "q.yaml"
    queries.write_text(DIR_QUERY + VALUES_QUERY.replace("queries:\n", ""))
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "queries": str(queries),
    })
    with serving(config) as srv:
        yield srv


def test_expectation_values_from_the_startup_config_and_over_control(values_server) -> None:
    """`values:` once made every spec unhashable: register failed, and a startup query failed every step."""
    feed = zmq.Context.instance().socket(zmq.PUSH)
    feed.connect(values_server.endpoints["ingest"])
    market = SyntheticMarket(SyntheticConfig(seed=6))
    try:
        with ControlClient(values_server.endpoints["control"], timeout_s=10) as control, \
                AnswerSubscriber(values_server.endpoints["answers"], ["dir/", "dir_ev/", "move_ev/"]) as sub:
            reply = control.call("register", yaml="queries:\n  - {name: move_ev, streams: ['*'], kind: expectation,"
                                                  " question: move_bps_50, values: {'-12': -12, '+12': 12}}\n")
            assert reply["registered"] == ["move_ev"]
            time.sleep(0.2)
            feed.send(encode(market.next_batch(20)))
            got = collect(sub, lambda g: {t.split("/")[0] for t, _ in g} >= {"dir", "dir_ev", "move_ev"})
            stats = control.call("stats")["stats"]
    finally:
        feed.close(linger=0)
    by_query = {p["query"]: p["value"] for _, p in got}
    assert set(by_query) == {"dir", "dir_ev", "move_ev"}
    assert -1 <= by_query["dir_ev"]["expected"] <= 1 and set(by_query["dir_ev"]["probs"]) == {"down", "flat", "up"}
    assert -12 <= by_query["move_ev"]["expected"] <= 12 and set(by_query["move_ev"]["probs"]) == {"-12", "+12"}
    assert stats["engine_errors"] == 0 and stats["query_errors"] == 0


def test_hostile_query_documents_are_refused_over_control_and_the_service_keeps_serving(server, feed) -> None:
    """An 8-level alias bomb once blocked the service for 27 s; 250k queries for 103 s, all registered."""
    levels = ["&a [" + ",".join("l" * 9) + "]"] + [f"&{b} [" + ",".join([f"*{a}"] * 9) + "]"
                                                  for a, b in zip("abcdefg", "bcdefgh")]
    bomb = f"queries:\n- name: x\n  streams: [x]\n  kind: choice\n  question: q\n  choices: [{','.join(levels)}]\n"
    many = "queries:\n" + "".join(f"  - {{name: q{i}, streams: [x], kind: surprise}}\n" for i in range(1001))
    with ControlClient(server.endpoints["control"], timeout_s=10) as control:
        start = time.monotonic()
        error = control.request({"op": "register", "yaml": bomb})["error"]
        assert time.monotonic() - start < 5 and "max_yaml_nodes" in error and len(error) < 200
        assert "max_yaml_bytes" in control.request({"op": "register", "yaml": many * 6})["error"]
        assert "over the limit of 1000 (max_queries)" in control.request({"op": "register", "yaml": many})["error"]
        reserved = "queries:\n  - {name: hb, streams: [x], kind: surprise, topic: _heartbeat/}\n"
        assert "reserved" in control.request({"op": "register", "yaml": reserved})["error"]
        assert [q["name"] for q in control.call("list")["queries"]] == ["dir"]
        feed.send(encode(SyntheticMarket(SyntheticConfig(seed=7)).next_batch(5)))
        wait_for(lambda: control.call("get", query="dir", stream="SYN.A")["answer"] is not None)


# stats figures /metrics carries under another name (or not at all: uptime_s is process_start_time_seconds'
# difference from the scrape's time); every other number of `stats` is flashtick_<path>[_total]
METRIC_NAMES = {"lag_s": "lag_seconds", "stats_time": "stats_timestamp_seconds", "uptime_s": None,
                "answer_age_s": "answer_age_seconds", "tick_age_s": "tick_age_seconds",
                "log/recovery_s": "log_recovery_seconds", "log/answers/errors": "answer_log_errors_total"}
# maps /metrics carries as labelled families of their own (quantiles; a query's live scores, whose seven
# answer-quality figures are there, not the bookkeeping beside them; rejections by reason; the streams shed)
LABELLED = ("freshness_ms", "data_age_ms", "scores", "rejected", "shed_streams", "longest_waiting")


def _metric_name(path: tuple[str, ...]) -> str | None:
    """The /metrics family a number of `stats` (its path of keys) is exposed as."""
    joined = "/".join(path)
    if joined in METRIC_NAMES:
        return METRIC_NAMES[joined]
    if path[:2] == ("log", "answers"):
        return "answer_log_" + path[2]
    if path[0] in ("scheduler", "runner"):
        return path[1]
    return "_".join(path)


def test_every_number_of_stats_is_on_the_metrics_endpoint_and_the_docs_name_every_key_of_its_nested_maps(
        checkpoint, tmp_path) -> None:
    """`stats.log.ticks_dropped_by_retention` (and a score of other `stats` counters: answers_out, query_errors,
    answer_fetches, scheduler.late_evictions, speculation.*, most of log.*) was not on /metrics, so a scraper could
    not alert on retention dropping ticks. Every number of `stats` is now there under the existing naming scheme,
    and the log's figures read the same as `stats` says them.

    fix286 #5: `stats`' maps scheduler, runner, speculation and log were described by /metrics' help alone (the
    wire protocol named a few keys and "..."). docs/wire-protocol.md's table names each key; this holds it to a live
    reply's keys (a service with a data directory, so `log` is there)."""
    queries = tmp_path / "q.yaml"
    queries.write_text(DIR_QUERY)
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                      "control": "tcp://127.0.0.1:0", "metrics_port": 0},
        "log": {"dir": str(tmp_path / "d"), "segment_bytes": 16384, "retention_bytes": 49152},
        "limits": {"heartbeat_s": 0.2}, "queries": str(queries)})
    with serving(config) as server:
        _fed_stats(server, 21, 1500)
        with ControlClient(server.endpoints["control"], timeout_s=60) as control:
            # retention drops what the engine has computed and the answer log holds, at a heartbeat (fix297)
            wait_for(lambda: control.call("stats")["stats"]["log"]["ticks_dropped_by_retention"] > 0, 60)
            stats = control.call("stats")["stats"]
        scraped = {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
                   for line in urllib.request.urlopen(server.endpoints["metrics"], timeout=10).read().decode()
                   .splitlines() if line and not line.startswith("#")}

    def numbers(figures: dict, path: tuple[str, ...] = ()):
        for key, value in figures.items():
            if isinstance(value, dict):
                yield from numbers(value, path + (key,))
            elif isinstance(value, (int, float)):  # (bool among them: behind, kv_thrash)
                yield path + (key,), value

    missing = []
    for path, value in numbers({key: value for key, value in stats.items() if key not in LABELLED}):
        name = _metric_name(path)
        if name is not None and f"flashtick_{name}" not in scraped and f"flashtick_{name}_total" not in scraped:
            missing.append("/".join(path))
    assert not missing, missing
    log = stats["log"]
    assert log["ticks_dropped_by_retention"] > 0, log  # retention dropped segments while serving
    assert scraped["flashtick_log_ticks_dropped_by_retention_total"] == log["ticks_dropped_by_retention"]
    assert scraped["flashtick_log_appended_total"] == log["appended"] == 1500 + 1  # and the message's end record
    assert scraped["flashtick_answer_log_appended_total"] == log["answers"]["appended"] > 0
    assert nested_stats_keys(stats) == documented_nested_stats()


def test_a_large_register_is_parsed_while_the_loop_keeps_its_turns(checkpoint) -> None:
    """review207 #3: a document near limits.max_yaml_bytes (one query over 37,000 streams) was parsed on the engine
    thread: 3-10 s without a heartbeat, an ingested tick or a forward. Now it is parsed off it: a tick sent after
    the register goes in and heartbeats say so (ticks_in up, the registry not yet at the new version), in order,
    before the register is applied; then the registered query answers."""
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)},
        "kv": {"cells": 8192, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        # a document 4x the default limit, so its parse (about a second of CPU with libyaml) spans many heartbeats
        "limits": {"heartbeat_s": 0.05, "max_yaml_bytes": 1 << 20, "max_yaml_nodes": 200_000},
    })
    names = [f"S{i}" for i in range(110_000)]
    text = ("queries: [{name: big, streams: [" + ",".join(names) + "], question: direction_20, kind: choice, "
            "trigger: batch}]")
    assert 1 << 19 < len(text) < 1 << 20
    ticks = [dataclasses.replace(t, stream="S7") for t in SyntheticMarket(SyntheticConfig(seed=3)).next_batch(6)]
    with serving(config) as server, AnswerSubscriber(server.endpoints["answers"], [HEARTBEAT_TOPIC]) as beats, \
            ControlClient(server.endpoints["control"], timeout_s=60) as control:
        version = control.call("list")["version"]
        push = zmq.Context.instance().socket(zmq.PUSH)
        dealer = zmq.Context.instance().socket(zmq.DEALER)
        try:
            push.connect(server.endpoints["ingest"])
            dealer.connect(server.endpoints["control"])
            assert beats.recv(timeout_s=10) is not None  # subscribed: heartbeats come
            before = control.call("stats")["stats"]["ticks_in"]
            dealer.send(msgpack.packb({"op": "register", "yaml": text}))
            time.sleep(0.2)  # (the register read first: a tick read before it would prove nothing)
            push.send(encode(ticks[:1]))
            seen = []  # (seq, ticks_in, registry_version) of each heartbeat until the register's reply
            while not dealer.poll(0):
                if (message := beats.recv(timeout_s=0.2)) is not None:
                    seen.append((message[1]["seq"], message[1]["ticks_in"], message[1]["registry_version"]))
                assert len(seen) < 100_000
            reply = msgpack.unpackb(dealer.recv())
            assert reply["ok"] and reply["registered"] == ["big"] and reply["version"] == version + 1, reply
            # while the document was parsed, the loop read the tick and beat on: the old registry, the tick in
            assert (before + 1, version) in [(ticks_in, v) for _, ticks_in, v in seen], seen[-5:]
            assert [seq for seq, _, _ in seen] == list(range(seen[0][0], seen[0][0] + len(seen)))  # none missed
            assert control.call("list")["queries"][0]["streams"][:2] == ["S0", "S1"]
            push.send(encode(ticks[1:]))  # and the query it registered answers
            wait_for(lambda: control.call("get", query="big", stream="S7")["answer"] is not None, timeout_s=60)
        finally:
            push.close(linger=1000)
            dealer.close(linger=0)
