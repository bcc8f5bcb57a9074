"""Answers the answer log could not write (a full disk, a file size limit) when the service stopped: a real serve
whose answer log hits a file size limit in the middle of a forward's answers, stopped, and served again on the
same data directory, with a subscriber connected throughout. Every answer published before the stop is published
again under its own seq, about its own tick; no seq names two answers."""

from __future__ import annotations

import re
import resource
import signal
import time
from pathlib import Path
from typing import Any, NamedTuple

from conftest import serving
import test_durability
from test_durability import free_endpoints
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


def restartable(checkpoint: Path, tmp_path: Path, **log: int) -> tuple[dict[str, str], ServiceConfig]:
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    endpoints = free_endpoints()
    return endpoints, ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}, "queries": str(queries),
        "log": {"dir": str(tmp_path / "data"), **log}, "endpoints": endpoints, "limits": {"heartbeat_s": 0.2}})


def receive(sub: AnswerSubscriber, got: list[tuple[str, int, int, int]], quiet_s: float) -> None:
    while (message := sub.recv(timeout_s=quiet_s)) is not None:
        topic, answer = message
        got.append((topic, answer["seq"], answer["version"], answer["data_ts"]))


def receive_published(sub: AnswerSubscriber, got: list[tuple[str, int, int, int]], server, before: int) -> None:
    """Receives until ``got`` holds its ``before`` answers and each one ``server`` published (idle, with nothing
    left to send): a subscriber connected throughout gets every one, so no quiet period is waited out for them."""
    deadline = time.monotonic() + 120  # (only catches a hang)
    while len(got) < before + server.counters["answers_published"]:
        assert time.monotonic() < deadline, f"received {len(got) - before} of the {server.counters} published"
        if (message := sub.recv(timeout_s=0.5)) is not None:
            topic, answer = message
            got.append((topic, answer["seq"], answer["version"], answer["data_ts"]))


class Stopped(NamedTuple):
    """What ``stop_with_answers_unlogged`` saw: answers received before the last start and at it, the `answers` op's
    history of each topic after it, how many answers the stop said it could not log, the tick log's segments after
    the backlog, and stderr of each start (answered, limited, last)."""

    before: dict[tuple[str, int], tuple[int, int]]
    again: list[tuple[str, int, int, int]]
    history: dict[str, list[dict[str, Any]]]
    unlogged: int
    segments: int
    err: list[str]


def stop_with_answers_unlogged(checkpoint: Path, tmp_path: Path, capsys, answered: int, backlog: list[list[Any]],
                               **log: int) -> Stopped:
    """A serve that answers and logs ``answered`` messages of a tick of SYN.A and SYN.B; then ``backlog``'s messages
    accepted and logged, none computed (the engine behind, then a stop); a start that computes them with its answer
    log at a file size limit, so it fails among their answers, stopped while they wait; and a last start, with a
    subscriber connected throughout."""
    endpoints, cfg = restartable(checkpoint, tmp_path, **log)
    ticks = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(400)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
    seen: list[tuple[str, int, int, int]] = []  # (topic, seq, version, data_ts) of every answer received
    errs: list[str] = []
    try:
        with AnswerSubscriber(endpoints["answers"], ["dir/", "d5/", "vol/", "nll/"]) as sub:
            with serving(cfg) as server, FeedClient(endpoints["ingest"]) as feed:
                sub.wait_ready(30)
                for i in range(answered):  # a group per message: the answer log outgrows the tick log's segments
                    feed.send([t for t in ticks if t.stream == "SYN.A"][i : i + 1]
                              + [t for t in ticks if t.stream == "SYN.B"][i : i + 1])
                wait_for(lambda: server.pipeline.ticks_in == 2 * answered and not server.pipeline.engine.busy,
                         timeout_s=60)
                receive_published(sub, seen, server, 0)  # (read while it serves: a closed PUB sends no more)
            # a read after the stop: libzmq takes the closed connection in (and reconnects the SUB to the next start,
            # in time for the answers it owes) only when the socket is read; what it reads is kept, should any come
            receive(sub, seen, quiet_s=0.5)
            errs.append(capsys.readouterr().err)
            behind = TickPipeline(cfg)  # accepted before a stop, none computed: the next start's tail
            for message in backlog:
                assert behind.ingest_message(encode(message)) == []
            behind.close()
            segments = list((tmp_path / "data" / "ticks").glob("ticks-*.log"))
            answers_file = max((tmp_path / "data" / "answers").glob("answers-*.log"))
            assert answers_file.stat().st_size > max(p.stat().st_size for p in segments) + 1000  # (limits every file)
            # room for an answer of the tail's first forward or two: the log fails among one group's answers
            resource.setrlimit(resource.RLIMIT_FSIZE, (answers_file.stat().st_size + 600, hard))
            with serving(cfg) as server:
                # (the log's refusal comes when the answers are written, which may be after the last forward: the
                # wait is for it, not only for the computation; a start that never fails the log times out here)
                wait_for(lambda: server.pipeline.data.answers.unlogged > 0 and not server.pipeline.owed_ticks
                         and not server.pipeline.engine.busy, timeout_s=120)
                # (read until quiet: owed_ticks can read 0 before the tail's first forward, so this start's answers
                # have no count to wait for yet)
                receive(sub, seen, quiet_s=1.0)
            receive(sub, seen, quiet_s=0.5)  # (the closed connection taken in, as above)
            errs.append(capsys.readouterr().err)  # stopped while the answers wait: the stop says how many
            unlogged = int(re.search(r"answer log: (\d+) published answers could not be logged", errs[-1])[1])
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            before = {(topic, seq): (version, ts) for topic, seq, version, ts in seen}
            assert len(before) == len(seen)
            with serving(cfg) as server, ControlClient(endpoints["control"], timeout_s=30) as control:
                # (owed_ticks can read 0 before the tail's first forward: idle is idle once as many as the stop said
                # unlogged went out, none owed, none pending; any beyond them would have come from the same forwards)
                wait_for(lambda: server.counters["answers_published"] >= unlogged and not server.pipeline.owed_ticks
                         and not server.pipeline.engine.busy, timeout_s=120)
                again: list[tuple[str, int, int, int]] = []
                receive_published(sub, again, server, 0)
                history = {t: control.call("answers", topic=t, after=0)["answers"] for t in {k[0] for k in before}}
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    errs.append(capsys.readouterr().err)
    return Stopped(before, again, history, unlogged, len(segments), errs)


def published_again_under_their_own_seqs(stopped: Stopped) -> None:
    """What the stop said could not be logged is what the last start published again: each answer under its own
    seq, about its own tick, none twice, none of another tick under a seq already seen; and the answers op serves
    every topic's seqs 1, 2, 3, ... as subscribers got them before the stop."""
    before, err = stopped.before, stopped.err[-1]
    assert {(topic, seq): (version, ts) for topic, seq, version, ts in stopped.again}.items() <= before.items(), err
    assert len(stopped.again) == stopped.unlogged, err
    for topic, answers in stopped.history.items():
        assert [(a["seq"], (a["version"], a["data_ts"])) for a in answers] == sorted(
            (seq, point) for (t, seq), point in before.items() if t == topic)


def test_answers_published_but_not_logged_are_published_again_under_their_own_seqs(checkpoint, tmp_path,
                                                                                    capsys) -> None:
    """The restart after the stop computes its tail of ticks group by group in forwards of many groups: the answer
    log fails among the first group's answers, so a stream's latest logged answer is past other queries' (a
    reviewer's restart then booked the stream up to it: those queries' answers there were never published again,
    and the next tick's answers took their seqs), and a stream new in the tail has no answer logged at all (it was
    answered once, at its latest tick, under seq 1 again)."""
    ticks = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(400)
    of = lambda stream: [t for t in ticks if t.stream == stream]  # noqa: E731
    backlog = [of("SYN.A")[i : i + 4] + of("SYN.B")[i : i + 4] + of("SYN.C")[i - 40 : i - 36] for i in range(40, 64, 4)]
    stopped = stop_with_answers_unlogged(checkpoint, tmp_path, capsys, 40, backlog)
    assert len(stopped.before) == (40 * 2 + 6 * 3) * 4 and stopped.unlogged > 6 * 4
    owed = re.search(r"owed: (\d+) answers", stopped.err[-1])
    assert owed and int(owed[1]) == stopped.unlogged, stopped.err[-1]
    published_again_under_their_own_seqs(stopped)


def test_retention_keeps_the_ticks_of_answers_not_logged_so_no_seq_is_handed_out_twice(checkpoint, tmp_path,
                                                                                      capsys) -> None:
    """review293: with log.retention_bytes below log.segment_bytes (accepted without a word), a segment roll dropped
    ticks the engine had not answered yet, and a start dropped those whose answers had been published while the
    answer log refused them; the restart then booked those streams whole and gave the seqs subscribers held to
    answers about other ticks (seq 12 was version 550 live, version 970 after it). Retention now keeps every tick
    whose answers are not logged (live: past each stream's committed count; at a start: past its last logged
    answer), and the start warns of the pair by name."""
    ticks = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(600)  # (its first 400 are the helper's)
    of = lambda stream: [t for t in ticks if t.stream == stream]  # noqa: E731
    backlog = [of("SYN.A")[i : i + 4] + of("SYN.B")[i : i + 4] for i in range(20, 116, 4)]  # several segment rolls
    stopped = stop_with_answers_unlogged(checkpoint, tmp_path, capsys, 20, backlog, segment_bytes=4096,
                                         retention_bytes=2048)
    assert "warning: log.retention_bytes 2,048 is below log.segment_bytes 4,096" in stopped.err[0]
    # review392 #5: a segment this small is said too (a unit slip made a file per tick, without a word)
    assert "warning: log.segment_bytes 4,096 makes a segment every few ticks" in stopped.err[0]
    assert stopped.segments > 3  # kept past the limit: the engine had answered none of them
    assert "owed: 192 answers due on 192 ticks" in stopped.err[1]  # each about its own tick, none booked whole
    assert "whose last answer the logs do not hold" not in stopped.err[1] + stopped.err[2]
    assert len(stopped.before) == (20 * 2 + 24 * 2) * 4 and stopped.unlogged > 100
    published_again_under_their_own_seqs(stopped)
