"""`lag_s` and `behind` count data that waits upstream of the ingest socket's small queue (the connection's kernel
buffers, the sender's queue), dated by the ticks' own `ts` for a feed stamped with the wall clock (review243 #1:
heartbeats said lag 0, not behind, while the answers they came between were 17 s old). Real sockets, the built-in
model's checkpoint; bounds come from the answers' own stamps, never from how fast this machine is."""

from __future__ import annotations

import time

import msgpack

from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.pipeline import TickPipeline
from test_server import checkpoint  # noqa: F401  (the model fixture)
from test_service_limits import live_server, pipeline_config, wait_for

QUERIES = "queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice, trigger: batch}\n"
MAX_LAG_S = 0.1  # (small: a fast machine's burst waits several times this long too)
STREAMS = 5


def _tick(stream: str, k: int, ts: int) -> bytes:
    return msgpack.packb({"stream": stream, "ts": ts, "price": 100.0 + (k % 7) * 0.01, "size": 1.0})


def test_a_burst_waiting_upstream_of_the_ingest_queue_shows_in_heartbeats_and_ask_replies(checkpoint, tmp_path,
                                                                                           capsys) -> None:
    """A burst of 100 times the ingest queue, stamped with the wall clock as sent: every heartbeat that came while
    the oldest tick not yet answered (the answers' own `data_ts` and `answer_ts` say which) was over 4 x max_lag_s
    old says `behind`, with `lag_s` at least half that age; an `ask` sent right after the burst that answers from
    part of it says the lag in its reply."""
    (tmp_path / "q.yaml").write_text(QUERIES)
    # (the shipped forward size: each turn computes all it read, the rest of the burst waiting upstream)
    with live_server(checkpoint, queries=str(tmp_path / "q.yaml"),
                     limits={"heartbeat_s": 0.1, "max_lag_s": MAX_LAG_S}) as (server, push):
        sub = AnswerSubscriber(server.endpoints["answers"], ["_heartbeat/", "dir/LAG"])
        sub.wait_ready(30)
        assert server.config.limits.ingest_rcvhwm == 32
        push.sndhwm = 1_000_000  # (the sender's queue holds what the connection does not)
        n = 100 * server.config.limits.ingest_rcvhwm
        for k in range(n):
            push.send(_tick(f"LAG{k % STREAMS}", k, time.time_ns()))
        with ControlClient(server.endpoints["control"], timeout_s=300) as control:
            reply = control.call("ask", stream="LAG0", query="dir")
        beats, answers = [], []
        deadline = time.monotonic() + 300  # (a hang's bound only)
        while len(answers) < n and time.monotonic() < deadline:
            message = sub.recv(1.0)
            if message is not None:
                (beats if message[0] == "_heartbeat/" else answers).append(message[1])
        sub.close()
    assert len(answers) == n
    assert "lag_s" in reply and "behind" in reply, reply  # in every reply now, 0.0 and false when nothing waits
    if reply["answer"]["version"] < n // STREAMS:  # answered from part of the burst: the reply says what waits
        assert reply["lag_s"] > 0, reply
    checked = 0
    for beat in beats:
        waiting = [a["data_ts"] for a in answers if a["answer_ts"] > beat["ts"]]  # not computed at the beat
        age_s = (beat["ts"] - min(waiting)) / 1e9 if waiting else 0.0
        if age_s > 4 * MAX_LAG_S:
            checked += 1
            assert beat["behind"] and beat["lag_s"] >= age_s / 2, (beat, age_s)
    assert checked, [b["lag_s"] for b in beats]  # (the burst did wait: the answers' stamps say so)
    # the log's behind line says where the backlog waits, the socket's unread part included (review379 #12: "0
    # tokens wait for a forward ..., the oldest data for 5.7 s" read as a contradiction)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("flashtick: behind: ")]
    assert said and all("at the ingest socket" in line for line in said), said


def test_a_tick_its_ts_shows_waited_upstream_counts_in_the_lag_and_is_shed(checkpoint) -> None:
    """A stream stamped with the wall clock: its first tick dates its offset; a later one read 1.5 s after its
    `ts` (as a burst's tail is) waited that long before the service read it. It is lag (behind past max_lag_s) and,
    under `shed`, refused."""
    pipelines = {policy: TickPipeline(pipeline_config(checkpoint, limits={"max_lag_s": 1.0, "when_behind": policy}))
                 for policy in ("lag", "shed")}
    sent = {}
    for policy, pipeline in pipelines.items():
        sent[policy] = time.time_ns()
        assert pipeline.ingest_message(_tick("WALL", 0, sent[policy])) == []
        pipeline.run_until_idle()
    # (the next tick, stamped next, read this late: one wait for both policies' streams, each dated by its own tick)
    wait_for(lambda: time.time_ns() - max(sent.values()) > 1_500_000_000)
    for policy, pipeline in pipelines.items():
        late = pipeline.ingest_message(_tick("WALL", 1, sent[policy] + 1))
        if policy == "lag":
            assert late == []
            wait_for(lambda: pipeline.behind)  # (lag_s is looked up at most every 0.1 s)
            assert pipeline.stats()["lag_s"] >= 1.5
        else:
            assert [r["reason"] for r in late] == ["overloaded"], late
        pipeline.run_until_idle()
        wait_for(lambda: not pipeline.behind)
    # a stream stamped otherwise (a replay of last year's data) is taken as arriving when read
    pipeline = TickPipeline(pipeline_config(checkpoint, limits={"max_lag_s": 1.0}))
    year_ago = time.time_ns() - 365 * 86_400 * 10**9
    assert pipeline.ingest_message(_tick("OLD", 0, year_ago)) == []
    assert pipeline.ingest_message(_tick("OLD", 1, year_ago + 1)) == []
    assert not pipeline.behind and pipeline.lag_s() < 1.0


def test_a_stream_is_idle_from_when_its_last_tick_reached_the_service_not_from_its_read(checkpoint) -> None:
    """Review380 #3: 40 s after a feed stopped, `streams --idle-over 30` listed nothing (idle_s 0.002) because the
    engine, 46 s behind, was still reading the feed's last ticks. A service kept behind: a stream's first tick is
    read at once, its second (stamped next, as the feed sent it) only 1.5 s later, having waited upstream of the
    ingest socket while the engine computed; the engine found idle before the first, never in between. Its
    idle_s counts from when the second reached the service (its `ts` says it), not from its read. A stream the
    engine keeps up with (found idle just before the read) is quiet from its read, whatever its `ts`."""
    from engine.service.cmd_streams import _quiet

    pipeline = TickPipeline(pipeline_config(checkpoint))
    try:
        pipeline.idle_at_ns = time.time_ns()  # (as the server marks it: nothing to compute, nothing unread)
        sent = time.time_ns()
        assert pipeline.ingest_message(_tick("BEHIND", 0, sent)) == []
        pipeline.run_until_idle()
        wait_for(lambda: time.time_ns() - sent > 1_500_000_000)
        assert pipeline.ingest_message(_tick("BEHIND", 1, sent + 1)) == []  # read late: it waited upstream
        accepted = pipeline.encoders.accepted(["BEHIND"], now_ns=time.time_ns())["BEHIND"]
        assert accepted["ticks"] == 2 and accepted["idle_s"] >= 1.5, accepted
        assert _quiet(accepted, False, 60.0, 1.0)  # what `streams --idle-over 1` lists
        # the engine idle with nothing waiting just before the read: a late `ts` is the feed's, not a wait here
        pipeline.idle_at_ns = time.time_ns()
        assert pipeline.ingest_message(_tick("BEHIND", 2, sent + 2)) == []
        accepted = pipeline.encoders.accepted(["BEHIND"], now_ns=time.time_ns())["BEHIND"]
        assert accepted["idle_s"] < 1.5, accepted
    finally:
        pipeline.close()
