"""GET /healthz and /readyz on the metrics port, and `health`'s readiness figures (review351 #6, #8, #9): real
HTTP requests to a real server's metrics listener, real ZeroMQ sockets on 127.0.0.1. (A full disk keeping health
degraded until a write succeeds: test_durability's disk that refuses writes, which runs that `serve` already.)"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest
import zmq

from conftest import serving, tiny_tick_checkpoint
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from connectors.feed import FeedClient
from engine.service.ages import age_said
from engine.service.client import ControlClient
from engine.service.config import ServiceConfig


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"))


def probe(metrics_url: str, path: str) -> tuple[int, dict]:
    url = metrics_url.rsplit("/metrics", 1)[0] + path
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def config_of(checkpoint, tmp_path, queries: str, scheduler: dict | None = None, **limits) -> ServiceConfig:
    path = tmp_path / "q.yaml"
    path.write_text(queries)
    return ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}, "scheduler": scheduler or {},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                      "control": "tcp://127.0.0.1:0", "metrics_port": 0},
        "limits": {"heartbeat_s": 0.2, **limits}, "queries": str(path)})


BATCH_QUERY = "queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice, trigger: batch}\n"


def test_healthz_and_readyz_answer_on_the_metrics_port_and_readyz_says_behind(checkpoint, tmp_path) -> None:
    """Every path but /metrics was 404: a probe had to run a Python client (seconds of CPU). /healthz is 200 while
    the loop turns; /readyz is 200 when serving, 503 naming `behind` (and by how much) while the backlog is past
    limits.max_backlog_tokens, and 200 again once it is computed."""
    # forwards of 64 tokens: a message's ~1,600 tokens wait past the bound over many turns, so a heartbeat sees them.
    # With the default 4,096 one forward took each message whole, the backlog never showed, and the feed ran until
    # the unread ingest queue made it behind by limits.max_lag_s (5 s) instead: ~15,000 ticks to compute (42 s)
    config = config_of(checkpoint, tmp_path, BATCH_QUERY, scheduler={"max_batch_tokens": 64}, max_backlog_tokens=1)
    with serving(config) as server:
        url = server.endpoints["metrics"]
        status, live = probe(url, "/healthz")
        assert status == 200 and live["live"] and live["status"] == "live", live
        status, ready = probe(url, "/readyz")
        assert status == 200 and ready == {**ready, "ready": True, "status": "serving", "reasons": []}, ready
        push = zmq.Context.instance().socket(zmq.PUSH)
        push.linger = 1000
        push.connect(server.endpoints["ingest"])
        seen_behind = None
        deadline = time.monotonic() + 120
        market = SyntheticMarket(SyntheticConfig(seed=3))
        while seen_behind is None and time.monotonic() < deadline:
            push.send(encode(market.next_batch(400)))
            status, ready = probe(url, "/readyz")
            if status == 503:
                seen_behind = ready
            time.sleep(0.05)
        push.close()
        assert seen_behind is not None, "the backlog never showed on /readyz"
        assert seen_behind["ready"] is False and seen_behind["status"] == "behind", seen_behind
        behind = seen_behind["reasons"][0]
        assert behind["reason"] == "behind" and "behind by" in behind["detail"] and "lag_s" in behind, behind
        assert behind["pending_tokens"] > 1, behind  # past limits.max_backlog_tokens, as the config bounds it
        with ControlClient(server.endpoints["control"], timeout_s=60) as control:
            health = control.call("health")  # one call carries what readiness needs
            assert {"behind", "lag_s", "answer_age_s", "tick_age_s", "answers_stale"} <= health.keys(), health
            while control.call("stats")["stats"]["pending_tokens"] and time.monotonic() < deadline:
                time.sleep(0.1)
        # ready again once computed; the answers of the backlog's last forwards are published after the heartbeat
        # that first finds it cleared, so the answer's age shows at a later one
        status, ready = probe(url, "/readyz")
        while (status != 200 or ready["answer_age_s"] is None) and time.monotonic() < deadline:
            time.sleep(0.1)
            status, ready = probe(url, "/readyz")
        assert status == 200 and ready["answer_age_s"] is not None, ready
        assert urllib.request.urlopen(url.rsplit("/metrics", 1)[0] + "/readyz", timeout=10).headers[
            "Content-Type"] == "application/json"
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(url.rsplit("/metrics", 1)[0] + "/ready", timeout=10)
        assert missing.value.code == 404


def test_an_age_past_its_limit_reads_past_it_in_a_reply() -> None:
    """CI saw `degraded` beside answer_age_s 1.0 under max_answer_age_s 1.0 (and `behind` beside lag_s 1.0 under
    max_lag_s 1.0): a limit is checked on the unrounded age, which was then rounded to nearest."""
    for limit in (0.5, 1.0, 60.0):
        for excess in (1e-6, 4e-4, 4.99e-4, 1e-3):
            assert age_said(limit + excess) > limit, (limit, excess)
        assert age_said(limit) == limit
    assert age_said(0.25) == 0.25 and age_said(0.1 + 0.2) == 0.3 and age_said(0.0) == 0.0


def test_answers_stale_while_ticks_arrive_make_health_degraded_and_readyz_503(checkpoint, tmp_path) -> None:
    """`health` said serving while answers were minutes old. A query that fired once (its stream's first group) and
    not since, while ticks keep arriving: past limits.max_answer_age_s the service is degraded (answers_stale)."""
    queries = "queries:\n  - {name: rare, streams: ['*'], question: direction_20, kind: choice, " \
              "trigger: {ticks: 1000000}}\n"
    config = config_of(checkpoint, tmp_path, queries, max_answer_age_s=1.0)
    with serving(config) as server, ControlClient(server.endpoints["control"], timeout_s=60) as control, \
            FeedClient(server.endpoints["ingest"]) as feed:
        market = SyntheticMarket(SyntheticConfig(seed=4))
        feed.send(market.next_batch(20))
        while control.call("stats")["stats"]["answers_published"] == 0:
            time.sleep(0.05)
        assert control.call("health")["status"] == "serving"
        health, deadline = {}, time.monotonic() + 60
        while health.get("status") != "degraded" and time.monotonic() < deadline:
            feed.send(market.next_batch(5))  # ticks keep arriving; the trigger does not fire again
            time.sleep(0.1)
            health = control.call("health")
        assert health["status"] == "degraded" and health["answers_stale"] is True, health
        assert health["answer_age_s"] > 1.0 and health["tick_age_s"] <= 1.0, health
        status, ready = 200, {}
        while status == 200 and time.monotonic() < deadline:
            feed.send(market.next_batch(5))
            time.sleep(0.1)
            status, ready = probe(server.endpoints["metrics"], "/readyz")
        assert status == 503 and any(r["reason"] == "answers_stale" for r in ready["reasons"]), ready


def test_answers_are_stale_per_query_by_its_own_streams(checkpoint, tmp_path) -> None:
    """The check counted any tick against the newest answer of any query: a query covering one stream read stale
    (health degraded, /readyz 503) while only other streams ticked. Now each standing query is judged by its own
    streams: quiet ones owe nothing, and once its own stream ticks without an answer past limits.max_answer_age_s
    it is stale, named in `health`'s `stale_queries` and /readyz's reason."""
    queries = "queries:\n  - {name: only_a, streams: ['SYN.A'], question: direction_20, kind: choice, " \
              "trigger: {ticks: 1000000}}\n"
    config = config_of(checkpoint, tmp_path, queries, max_answer_age_s=1.0)
    ticks = SyntheticMarket(SyntheticConfig(seed=6)).next_batch(4000)
    a_ticks = [t for t in ticks if t.stream == "SYN.A"]
    others = [t for t in ticks if t.stream != "SYN.A"]
    with serving(config) as server, ControlClient(server.endpoints["control"], timeout_s=60) as control, \
            FeedClient(server.endpoints["ingest"]) as feed:
        feed.send(a_ticks[:5])  # its first group: the query's one answer
        while control.call("stats")["stats"]["answers_published"] == 0:
            time.sleep(0.05)
        health, deadline, sent = {}, time.monotonic() + 60, 0
        # other streams tick, SYN.A is quiet: until the newest answer is past the bound while ticks arrive (where
        # the old check said stale), the query is not stale
        while not ((health.get("answer_age_s") or 0) > 1.0 and (health.get("tick_age_s") or 9) <= 1.0) and \
                time.monotonic() < deadline:
            feed.send(others[sent : sent + 5])
            sent += 5
            time.sleep(0.1)
            health = control.call("health")
        assert health["answer_age_s"] > 1.0 and health["tick_age_s"] <= 1.0, health
        assert health["status"] == "serving" and health["answers_stale"] is False, health
        assert "stale_queries" not in health
        sent = 5
        while health.get("status") != "degraded" and time.monotonic() < deadline:
            feed.send(a_ticks[sent : sent + 5])  # its own stream ticks; its trigger does not fire again
            sent += 5
            time.sleep(0.1)
            health = control.call("health")
        assert health["answers_stale"] is True and health["stale_queries"] == ["only_a"], health
        status, ready = 200, {}
        while status == 200 and time.monotonic() < deadline:
            feed.send(a_ticks[sent : sent + 5])
            sent += 5
            time.sleep(0.1)
            status, ready = probe(server.endpoints["metrics"], "/readyz")
        stale = [r for r in ready["reasons"] if r["reason"] == "answers_stale"]
        assert status == 503 and stale and stale[0]["stale_queries"] == ["only_a"], ready
        assert '"only_a"' in stale[0]["detail"], stale


def test_stale_answers_are_said_going_in_and_coming_out_with_events_to_route_on() -> None:
    """Review412 #1: /readyz went 503 `answers_stale` and back with no log line either way. A WARNING names the
    queries as they go stale (once each), an INFO line says when none is any more; each has its own `event`."""
    from engine.service.answer_freshness import StaleAnswersLines
    from engine.service.log_levels import leveled

    lines = StaleAnswersLines()
    said = [lines.line(stale, 30.0, now) for stale, now in
            [([], 0.0), (["slowq"], 1.0), (["slowq"], 2.0), (["other", "slowq"], 3.0), ([], 42.5), ([], 43.0)]]
    assert said[0] is None and said[2] is None and said[5] is None, said
    assert said[1] == ('flashtick: answers stale: "slowq" published no answer within limits.max_answer_age_s=30 s '
                       'while ticks of their own streams arrive (1 stale in all; /readyz 503 answers_stale, '
                       'flashtick_serving 0)'), said[1]
    assert said[3].startswith('flashtick: answers stale: "other" published') and "(2 stale in all;" in said[3]
    assert said[4] == "flashtick: answers fresh again: no standing query is stale (stale for 41.5 s)", said[4]
    assert [leveled(line)[1:3] for line in (said[1], said[4])] == [("WARNING", "answers_stale"),
                                                                   ("INFO", "answers_fresh")]


def test_an_engine_loop_stall_is_said_while_probed_and_when_the_loop_turns_again(capsys) -> None:
    """Review412 #10: a 40 s stall of the engine thread (/healthz 503 `stalled`) left no log line, during or after.
    The first probe to find the loop stalled says so (the HTTP thread), and the loop says how long once it turns."""
    from engine.service.log_levels import leveled
    from engine.service.loop_turns import LoopTurns

    loop = LoopTurns(stall_s=10.0)
    assert loop.age(1.0) is None  # not serving yet
    loop.turned(0.0)
    ages = [loop.age(now) for now in (5.0, 12.0, 13.0)]
    loop.turned(40.5)
    loop.turned(41.0)
    assert ages == [5.0, 12.0, 13.0]
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["flashtick: the engine loop has not turned for 12.0 s (limits.stall_s=10): /healthz answers "
                     "503 stalled until it does",
                     "flashtick: the engine loop did not turn for 40.5 s (limits.stall_s=10; /healthz answered 503 "
                     "stalled meanwhile): it turns again"], lines
    assert {leveled(line)[1:3] for line in lines} == {("WARNING", "stalled")}
