"""Answers the answer log could not write (a full disk, a file size limit) when the service stopped: a real serve
whose answer log hits a file size limit in the middle of a forward's answers, stopped, and served again on the
same data directory, with a subscriber connected throughout. Every answer published before the stop is published
again under its own seq, about its own tick; no seq names two answers."""

from __future__ import annotations

import re
import resource
import signal
from pathlib import Path

from conftest import serving
import test_durability
from test_durability import free_port
from test_server import wait_for
from connectors.feed import FeedClient
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from connectors.ticks import encode

QUERIES = """
queries:
  - {name: dir, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: d5, streams: ["*"], question: direction_5, kind: choice, trigger: batch}
  - {name: vol, streams: ["*"], question: volatility_50, kind: choice, trigger: batch}
  - {name: nll, streams: ["*"], kind: surprise, trigger: batch}
"""


checkpoint = test_durability.checkpoint  # (a fixture: the tiny tick model's checkpoint)


def restartable(checkpoint: Path, tmp_path: Path) -> tuple[dict[str, str], ServiceConfig]:
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    endpoints = {name: f"tcp://127.0.0.1:{free_port()}" for name in ("ingest", "answers", "control")}
    return endpoints, ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}, "queries": str(queries),
        "log": {"dir": str(tmp_path / "data")}, "endpoints": endpoints, "limits": {"heartbeat_s": 0.2}})


def receive(sub: AnswerSubscriber, got: list[tuple[str, int, int, int]], quiet_s: float) -> None:
    while (message := sub.recv(timeout_s=quiet_s)) is not None:
        topic, answer = message
        got.append((topic, answer["seq"], answer["version"], answer["data_ts"]))


def test_answers_published_but_not_logged_are_published_again_under_their_own_seqs(checkpoint, tmp_path,
                                                                                    capsys) -> None:
    """The restart after the stop computes its tail of ticks group by group in forwards of many groups: the answer
    log fails among the first group's answers, so a stream's latest logged answer is past other queries' (a
    reviewer's restart then booked the stream up to it: those queries' answers there were never published again,
    and the next tick's answers took their seqs), and a stream new in the tail has no answer logged at all (it was
    answered once, at its latest tick, under seq 1 again)."""
    endpoints, cfg = restartable(checkpoint, tmp_path)
    ticks = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(400)
    of = lambda stream: [t for t in ticks if t.stream == stream]  # noqa: E731
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
    seen: list[tuple[str, int, int, int]] = []  # (topic, seq, version, data_ts) of every answer received
    try:
        with AnswerSubscriber(endpoints["answers"], ["dir/", "d5/", "vol/", "nll/"]) as sub:
            with serving(cfg) as server, FeedClient(endpoints["ingest"]) as feed:
                sub.wait_ready(30)
                for i in range(40):  # answered and logged, a group per message: the answer log outgrows the tick log
                    feed.send(of("SYN.A")[i : i + 1] + of("SYN.B")[i : i + 1])
                wait_for(lambda: server.pipeline.ticks_in == 80 and not server.pipeline.engine.busy, timeout_s=60)
                receive(sub, seen, quiet_s=1.0)
            receive(sub, seen, quiet_s=0.5)  # (what came before the stop read: libzmq reconnects only then)
            backlog = TickPipeline(cfg)  # accepted before a stop, none computed: the next start's tail
            for i in range(40, 64, 4):
                assert backlog.ingest_message(encode(of("SYN.A")[i : i + 4] + of("SYN.B")[i : i + 4]
                                                     + of("SYN.C")[i - 40 : i - 36])) == []
            backlog.close()
            answers_file = max((tmp_path / "data" / "answers").glob("answers-*.log"))
            ticks_file = max((tmp_path / "data" / "ticks").glob("ticks-*.log"))
            assert answers_file.stat().st_size > ticks_file.stat().st_size + 1000  # (the limit is on every file)
            capsys.readouterr()
            # room for an answer of the tail's first forward or two: the log fails among one group's answers
            resource.setrlimit(resource.RLIMIT_FSIZE, (answers_file.stat().st_size + 600, hard))
            with serving(cfg) as server:
                wait_for(lambda: not server.pipeline.owed_ticks and not server.pipeline.engine.busy, timeout_s=60)
                assert server.pipeline.data.answers.unlogged > 0
                receive(sub, seen, quiet_s=1.0)
            receive(sub, seen, quiet_s=0.5)
            # stopped while the answers wait: the stop says how many
            unlogged = int(re.search(r"answer log: (\d+) published answers could not be logged",
                                     capsys.readouterr().err)[1])
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            before = {(topic, seq): (version, ts) for topic, seq, version, ts in seen}
            assert len(before) == len(seen) == (40 * 2 + 6 * 3) * 4 and unlogged > 6 * 4
            with serving(cfg) as server, ControlClient(endpoints["control"], timeout_s=30) as control:
                wait_for(lambda: not server.pipeline.owed_ticks and not server.pipeline.engine.busy, timeout_s=60)
                again: list[tuple[str, int, int, int]] = []
                receive(sub, again, quiet_s=1.5)
                history = {t: control.call("answers", topic=t, after=0)["answers"] for t in {k[0] for k in before}}
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    err = capsys.readouterr().err
    # what the stop said could not be logged is what the restart publishes again: each answer under its own seq,
    # about its own tick, none twice, none of another tick under a seq already seen
    assert {(topic, seq): (version, ts) for topic, seq, version, ts in again}.items() <= before.items()
    assert len(again) == unlogged, err
    owed = re.search(r"owed: (\d+) answers", err)
    assert owed and int(owed[1]) == unlogged, err
    # the answers op serves every topic's seqs 1, 2, 3, ... as subscribers got them before the stop
    for topic, answers in history.items():
        assert [(a["seq"], (a["version"], a["data_ts"])) for a in answers] == sorted(
            (seq, point) for (t, seq), point in before.items() if t == topic)
