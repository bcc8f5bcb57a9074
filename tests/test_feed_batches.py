"""`flashtick feed replay --batch-ms`: a live run of a file answers at the ticks its backtest answers at, with the
same numbers, because each event-time batch goes as one message (one tick group), cut as the backtest cuts; across a
kill -9 of the service too, as the feed sends what it lost again in the messages they first went in."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import msgpack
import polars as pl
import pytest
import zmq

from conftest import serving, tiny_tick_checkpoint
from forked_cli import cli_popen
from test_durability import ROOT, free_endpoints, serve
from test_server import wait_for
from connectors.event_time_batches import MAX_BATCH_TICKS, EventTimeCutter
from connectors.feed import FeedClient
from connectors.feed_pump import run_feed
from connectors.replay import FileReplay
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import TRADE, Tick
from engine.service.backtest import run_backtest
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.config import ServiceConfig
from engine.service.log_format import HEADER

MS = 1_000_000
QUERIES = """
queries:
  - {name: dir, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: every7, streams: ["*"], question: direction_5, kind: choice, trigger: {ticks: 7}}
  - {name: move, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {interval: 300ms}}
"""


# the tests share the module's tiny checkpoint (read only): `--dist loadgroup` keeps them on one worker
pytestmark = pytest.mark.xdist_group("test_feed_batches")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """The tiny tick model every test here serves and backtests (the same seed each built before)."""
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("feed_batches") / "model")


def trade_at(ts: int, stream: str = "A") -> Tick:
    return Tick(stream, ts, TRADE, price=100.0, size=1.0, side="buy")


def test_the_cutter_cuts_where_the_backtest_does() -> None:
    """A batch runs from a tick to the end of that tick's window; the first tick at or past the end starts the next
    (its own window, however far on); a tick stamped earlier than its batch's start stays in it."""
    cutter = EventTimeCutter(100 * MS)
    stamps = [0, 50, 99, 100, 250, 251, 249, 400, 420]
    done = cutter.add([trade_at(t * MS) for t in stamps[:5]]) + cutter.add([trade_at(t * MS) for t in stamps[5:]])
    done += cutter.flush()
    assert [[t.ts // MS for t in batch] for batch in done] == [[0, 50, 99], [100], [250, 251, 249], [400, 420]]
    assert cutter.flush() == []
    with pytest.raises(ValueError, match="batch_ns must be an int > 0"):
        EventTimeCutter(0)


class Backtested(NamedTuple):
    """A file of synthetic ticks with the test queries and the tiny model, and its backtest at --batch-ms 100."""
    data: Path
    queries: Path
    ticks: list[Tick]
    engine: dict[str, Any]  # the config's model and kv sections, for the live service too
    answers: dict[tuple[str, str, int], dict]  # the backtest's rows by (query, stream, ticks)


def backtested(checkpoint: Path, tmp_path: Path, n_ticks: int) -> Backtested:
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(n_ticks)
    data = tmp_path / "ticks.parquet"
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(data)
    engine = {"model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}}
    out = tmp_path / "answers.parquet"
    run_backtest(ServiceConfig.from_dict(engine), [data], queries, out, batch_ms=100.0, progress=False)
    answers = {(r["query"], r["stream"], r["ticks"]): r for r in pl.read_parquet(out).iter_rows(named=True)}
    assert len({q for q, _, _ in answers}) == 3 and len(answers) > n_ticks // 3
    return Backtested(data, queries, ticks, engine, answers)


@pytest.fixture(scope="module")
def file(checkpoint, tmp_path_factory) -> Backtested:
    """The file of 600 synthetic ticks that the live, kill -9 and cut-short tests feed, and its backtest: built once
    for them all (each read it only; each built its own of 450, 1,500 and 900 ticks before, two backtests more; 900
    here went through the same paths with half as much again to compute, live four times over)."""
    return backtested(checkpoint, tmp_path_factory.mktemp("backtested"), 600)


def assert_as_backtested(live: dict[tuple[str, str, int], dict], backtest: dict[tuple[str, str, int], dict],
                         tol: float) -> None:
    """The live answers (wire payloads by query, stream and version) are the backtest's: the same answered ticks,
    every query and trigger, under the same seqs, with the same numbers within ``tol`` (float32 rounding of
    forwards grouped otherwise; docs/queries.md states 5e-6, the built-in model's largest measured 1.14e-6)."""
    assert live.keys() == backtest.keys()
    for key, payload in live.items():
        row = backtest[key]
        assert payload["seq"] == row["seq"], key
        if key[0] == "move":
            assert math.isclose(payload["value"]["expected"], row["expected"], rel_tol=1e-6, abs_tol=tol), key
        probs = json.loads(row["probs"])
        assert payload["value"]["probs"].keys() == probs.keys()
        assert max(abs(payload["value"]["probs"][k] - p) for k, p in probs.items()) < tol, key


def live_config(file: Backtested) -> ServiceConfig:
    """A service of `file`'s model and queries on ephemeral 127.0.0.1 ports."""
    local = "tcp://127.0.0.1:0"
    return ServiceConfig.from_dict({**file.engine, "queries": str(file.queries),
                                    "endpoints": {"ingest": local, "answers": local, "control": local},
                                    "limits": {"heartbeat_s": 0.1}})


def fed_live(file: Backtested, data: Path, expected: int, timeout_s: float) -> tuple[dict, Any]:
    """`data` fed in event-time batches of 100 ms into a real service of `file`'s model and queries: its answers
    by (query, stream, version), once `expected` came (or `timeout_s` passed), and the feed's stats."""
    config = live_config(file)
    live: dict[tuple[str, str, int], dict] = {}
    with serving(config) as server, AnswerSubscriber(server.endpoints["answers"], [""]) as sub:
        sub.wait_ready()
        with FeedClient(server.endpoints["ingest"]) as client:
            stats = run_feed(FileReplay([str(data)]), client, batch_ns=100 * MS)
        deadline = time.monotonic() + timeout_s
        while len(live) < expected and time.monotonic() < deadline:
            message = sub.recv(timeout_s=0.2)
            if message and not message[0].startswith("_"):
                payload = message[1]
                live[(payload["query"], payload["stream"], payload["version"])] = payload
    return live, stats


def test_a_live_feed_cut_in_event_time_batches_answers_as_the_backtest_does(file: Backtested) -> None:
    live, stats = fed_live(file, file.data, len(file.answers), 60)
    assert stats.ticks == len(file.ticks) and stats.split_batches == 0
    assert_as_backtested(live, file.answers, tol=1e-6)  # (the tiny model here stays within 1e-6)


def test_an_event_time_batch_past_one_message_goes_in_several_and_is_counted(tmp_path) -> None:
    data = tmp_path / "burst.parquet"
    burst = [trade_at(10**18 + i) for i in range(MAX_BATCH_TICKS + 5)] + [trade_at(10**18 + 10**9)]  # one batch, one
    pl.DataFrame([t.to_wire() for t in burst]).write_parquet(data)
    pull = zmq.Context.instance().socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    try:
        with FeedClient(f"tcp://127.0.0.1:{port}") as client:
            stats = run_feed(FileReplay([str(data)]), client, batch=4096, batch_ns=100 * MS)
        sizes = [len(msgpack.unpackb(pull.recv(), raw=False)) for _ in range(stats.messages)]
    finally:
        pull.close(linger=0)
    assert sizes == [MAX_BATCH_TICKS, 5, 1] and stats.split_batches == 1
    assert "1 event-time batch over 8,192 ticks sent in several messages" in stats.summary()


def test_a_feed_stopped_inside_an_event_time_batch_holds_that_batch_back(tmp_path) -> None:
    """review400 #1, review402 #1: a feed stopped inside a batch (a signal, `--ticks`) sent its part as a message,
    and the next run the rest as another: two tick groups a backtest never has (an extra `batch` answer, later seqs
    shifted). Only whole batches go; the open one is held back, counted and said, for the next run to send whole."""
    data = tmp_path / "batches.parquet"
    stamps = [0, 10, 20, 100, 110, 120, 130, 200, 210]  # batches of 3, 4 and 2 ticks at 100 ms
    pl.DataFrame([trade_at(10**18 + t * MS).to_wire() for t in stamps]).write_parquet(data)
    pull = zmq.Context.instance().socket(zmq.PULL)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    try:
        with FeedClient(f"tcp://127.0.0.1:{port}") as client:
            stats = run_feed(FileReplay([str(data)]), client, batch=2, max_ticks=5, batch_ns=100 * MS)
        sizes = [len(msgpack.unpackb(pull.recv(), raw=False)) for _ in range(stats.messages)]
        with FeedClient(f"tcp://127.0.0.1:{port}") as client:  # to the file's end: its last batch goes
            whole = run_feed(FileReplay([str(data)]), client, batch=2, batch_ns=100 * MS)
        whole_sizes = [len(msgpack.unpackb(pull.recv(), raw=False)) for _ in range(whole.messages)]
    finally:
        pull.close(linger=0)
    assert sizes == [3] and stats.ticks == 3 and stats.held_back == 2  # (ticks 4-5 of the 100 ms batch held)
    assert "2 ticks of the event-time batch open at the stop held back, not sent" in stats.summary()
    assert whole_sizes == [3, 4, 2] and whole.ticks == 9 and whole.held_back == 0


def test_a_resumed_feed_stopped_early_does_not_call_its_files_left_out_nearly_whole(tmp_path) -> None:
    """review402 #2: a resumed feed stopped after a few ticks past what the engine held said its files were "left
    out nearly whole ... if these files are not what fed it before": said of files read to their end only."""
    from connectors.after_held import AfterHeld

    data = tmp_path / "refed.parquet"
    pl.DataFrame([trade_at(10**18 + i * MS).to_wire() for i in range(100)]).write_parquet(data)
    held_to = 10**18 + 94 * MS  # the engine holds the first 95 ticks
    stopped = AfterHeld(FileReplay([str(data)]), {"A": held_to}, {"A": 1}, {"A": 95})
    assert len(stopped.next_batch(1)) == 1 and not stopped.source.done  # one sent, then a stop
    assert "nearly whole" not in stopped.said() and "95 ticks not sent" in stopped.said()
    whole = AfterHeld(FileReplay([str(data)]), {"A": held_to}, {"A": 1}, {"A": 95})
    while not whole.done:
        whole.next_batch(256)
    assert "left out nearly whole (A: 5 of 100 sent)" in whole.said()
    assert "another feed" not in whole.said()
    # review411 #10: the engine's last tick came from another feed (a second feed of the stream started beside this
    # one and placed first): the note names it, not only files fed before
    beside = AfterHeld(FileReplay([str(data)]), {"A": held_to}, {"A": 1}, {"A": 95}, {"A": "feed/placed.0b1e"})
    beside.next_batch(1)
    assert "the engine's last tick of A came from another feed (feed/placed.0b1e): a feed of these files run " \
           "before, or one running beside this feed" in beside.said(), beside.said()


def test_a_burst_past_one_message_is_answered_live_where_its_backtest_answers(file: Backtested, tmp_path) -> None:
    """review262 #3: a batch of more than MAX_BATCH_TICKS ticks went live as several messages (tick groups) while
    the backtest answered it once, so the live run answered at extra ticks and its adapted numbers drifted. The
    backtest now cuts such a batch into groups of MAX_BATCH_TICKS ticks as the feed does, so both answer at the
    same ticks with the same numbers."""
    first = file.ticks[:40]  # (the module file's first ticks: its model, queries and backtest config)
    t0 = first[-1].ts + 10**9
    burst = [Tick("A", t0 + i * 500, TRADE, price=100.0 + (i % 7) * 0.01, size=1.0 + i % 3, side="buy")
             for i in range(MAX_BATCH_TICKS + 300)]  # one 100 ms batch, 4.2 ms of event time
    after = [trade_at(t0 + 10**9 + i * 50 * MS) for i in range(5)]
    data = tmp_path / "burst.parquet"
    pl.DataFrame([t.to_wire() for t in [*first, *burst, *after]]).write_parquet(data)
    out = tmp_path / "burst_answers.parquet"
    run_backtest(ServiceConfig.from_dict(file.engine), [data], file.queries, out, batch_ms=100.0, progress=False)
    backtest = {(r["query"], r["stream"], r["ticks"]): r for r in pl.read_parquet(out).iter_rows(named=True)}
    assert ("dir", "A", MAX_BATCH_TICKS) in backtest  # the burst's first group answered (A's first ticks)
    live, stats = fed_live(file, data, len(backtest), 120)
    assert stats.split_batches == 1
    assert_as_backtested(live, backtest, tol=1e-6)


def test_feed_replay_with_its_defaults_answers_as_a_backtest_with_its_defaults(file: Backtested, capsys) -> None:
    """review381 #3: `feed replay` without options packed up to 256 ticks a message, so a `batch` or `ticks` query
    answered a few times a stream where `backtest` (its default --batch-ms 100) answered hundreds. Its default is the
    backtest's now: `flashtick feed replay FILE`, no option, into a real service answers as the default backtest."""
    from engine.service.cli import main

    assert ServiceConfig.from_dict(file.engine).replay.batch_ms == 100.0  # (the module's backtest: the default)
    config = live_config(file)
    live: dict[tuple[str, str, int], dict] = {}
    with serving(config) as server, AnswerSubscriber(server.endpoints["answers"], [""]) as sub:
        sub.wait_ready()
        assert main(["feed", "replay", str(file.data), "--endpoint", server.endpoints["ingest"],
                     "--control", server.endpoints["control"]]) in (0, None)
        deadline = time.monotonic() + 120  # (only catches a hang)
        while len(live) < len(file.answers) and time.monotonic() < deadline:
            message = sub.recv(timeout_s=0.2)
            if message and not message[0].startswith("_"):
                live[(message[1]["query"], message[1]["stream"], message[1]["version"])] = message[1]
    assert f"sent {len(file.ticks)} ticks in" in capsys.readouterr().err
    assert_as_backtested(live, file.answers, tol=1e-6)


def test_packed_messages_are_an_option_of_their_own(capsys) -> None:
    from engine.service.cli import main

    assert main(["feed", "replay", "nowhere.csv", "--packed", "--batch-ms", "50",
                 "--endpoint", "tcp://127.0.0.1:1"]) != 0
    assert "--packed sends up to 256 ticks a message as read, --batch-ms one message" in capsys.readouterr().err


def test_the_cli_refuses_a_batch_width_that_is_not_positive(capsys) -> None:
    from engine.service.cli import main

    assert main(["feed", "replay", "nowhere.csv", "--batch-ms", "0", "--endpoint", "tcp://127.0.0.1:1"]) != 0
    assert "--batch-ms must be a number of milliseconds > 0" in capsys.readouterr().err



def answer_history(control: ControlClient) -> dict[tuple[str, str, int], dict]:
    """Every answer the service published, each topic's from seq 1 (control ops `topics` and `answers`), by
    (query, stream, version): what a subscriber holds once it has filled every gap."""
    history: dict[tuple[str, str, int], dict] = {}
    for topic in control.call("topics")["topics"]:
        after, seqs = 0, []
        while answers := control.call("answers", topic=topic, after=after)["answers"]:
            for answer in answers:
                history[(answer["query"], answer["stream"], answer["version"])] = answer
                seqs.append(answer["seq"])
            after = answers[-1]["seq"]
        assert seqs == list(range(1, len(seqs) + 1)), topic  # no seq reused or skipped across the kill
    return history


def test_a_feed_cut_in_event_time_batches_keeps_its_cuts_across_a_kill_9_of_the_engine(file: Backtested, tmp_path,
                                                                                         capsys) -> None:
    """`flashtick serve` is killed with SIGKILL while `flashtick feed replay --batch-ms` sends, and started again on
    its data directory: the feed sends what the engine does not hold again, each batch as the one message it first
    went in, so the service's answers, every topic's from seq 1, are the backtest's: the same ticks answered under
    the same seqs, the same numbers (docs/queries.md: 5e-6). (Before, the feed sent them again in messages of up to
    256 ticks: every `batch` and `{ticks: N}` query answered at other ticks from there on, and, adapted
    (answers.adapt), with other numbers: review206 #1.)"""
    endpoints = free_endpoints()
    config_path = tmp_path / "engine.yaml"  # fixed ports: the restarted engine binds the ones the feed knows
    config_path.write_text(json.dumps({**file.engine, "queries": str(file.queries), "endpoints": endpoints,
                                       "limits": {"heartbeat_s": 0.2}}))
    process, _ = serve(config_path, tmp_path / "data")
    restarted: list[Any] = []  # the service started again, or what stopped the thread that kills and starts it

    def kill_and_restart() -> None:  # (beside the feed, which runs on this process's main thread: cli.main's signals)
        try:
            with ControlClient(endpoints["control"], timeout_s=10) as control:
                # (a third of the file in: the rest, 2.7 s of the feed's pace, is still to send when the kill comes)
                wait_for(lambda: control.call("stats")["stats"]["ticks_in"] >= 200, timeout_s=60)
            process.send_signal(signal.SIGKILL)  # mid-feed: messages sent and not yet read are lost with it
            process.wait(10)
            restarted.append(serve(config_path, tmp_path / "data")[0])
        except BaseException as e:
            restarted.append(e)

    killer = threading.Thread(target=kill_and_restart, name="kill_and_restart", daemon=True)
    killer.start()
    try:
        # the feed in this process (its own process start cost more than its run; the service is a real process,
        # killed and started again)
        said = feed_file(file.data, endpoints, capsys, "--rate", "150")
        killer.join(120)
        assert restarted and isinstance(restarted[0], subprocess.Popen), restarted
        assert "it is back: sending" in said, said
        # a kill while the service read a message in (rare: small messages are read in well under a millisecond)
        # leaves part of it logged, which the restart leaves out (message_ends.py): the feed sends it again whole
        assert "the engine holds part of" not in said, said
        with ControlClient(endpoints["control"], timeout_s=30) as control:
            wait_for(lambda: (stats := control.call("stats")["stats"])["ticks_in"] == len(file.ticks)
                     and not stats["pending_tokens"] and not stats["owed_ticks"], timeout_s=60)
            live = answer_history(control)
    finally:
        killer.join(120)
        for each in [process, *(p for p in restarted if isinstance(p, subprocess.Popen))]:
            if each.poll() is None:
                each.send_signal(signal.SIGTERM)
                each.wait(30)
    assert_as_backtested(live, file.answers, tol=5e-6)


def test_a_paced_feed_sends_the_batch_before_a_pause_in_the_file_once_its_window_closes(checkpoint, tmp_path) -> None:
    """`feed replay --batch-ms 100 --speed X` held the last batch before a pause in the file until the pause ended
    (a batch left only once a tick past its end was read, and a paced replay reads that tick only when it is due):
    its answers came the whole pause late, and a pause past `scheduler.stream_idle_s` expired the stream before
    its own last ticks came (review225 #1). Now the batch goes once the replay's clock passes its end: here the
    5th tick is answered, at version 5, while the feed still waits out the pause (5 min of wall time at --speed 10;
    the test ends the feed there)."""
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  - {name: dir, streams: [A], question: direction_5, kind: choice, trigger: batch}\n")
    t0 = 1_793_900_000 * 10**9
    data = tmp_path / "pause.parquet"
    ticks = [trade_at(t0 + k * 10**9) for k in range(5)] + [trade_at(t0 + 3000 * 10**9)]  # a pause of ~50 min
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(data)
    local = "tcp://127.0.0.1:0"
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16},
                                      "queries": str(queries), "limits": {"heartbeat_s": 0.1},
                                      "endpoints": {"ingest": local, "answers": local, "control": local}})
    with serving(config) as server, AnswerSubscriber(server.endpoints["answers"], ["dir/"]) as sub:
        sub.wait_ready()
        # (a real process, forked warm: the test ends it with a kill while it waits out the pause)
        feed = cli_popen(["feed", "replay", str(data), "--batch-ms", "100", "--speed", "10", "--endpoint",
                          server.endpoints["ingest"]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         cwd=ROOT)
        try:
            versions: list[int] = []
            while 5 not in versions:
                message = sub.recv(timeout_s=60)  # (a hang; before, the 5th waited out the pause)
                assert message is not None, f"no answer of the 5th tick; answered versions {versions}"
                versions.append(message[1]["version"])
            paused = feed.poll() is None  # the feed still waits for the tick after the pause
            with ControlClient(server.endpoints["control"], timeout_s=10) as control:
                ticks_in = control.call("stats")["stats"]["ticks_in"]
        finally:
            feed.kill()
            said = feed.communicate()[1]
    assert paused, said
    assert versions == [1, 2, 3, 4, 5] and ticks_in == 5


def feed_file(path: Path, endpoints: dict[str, str], capsys, *extra: str) -> str:
    """`flashtick feed replay --batch-ms 100` of ``path`` (it asks the engine what it holds first, and sends the
    rest; ``extra``: more of its options), run to its end in this process (the feed's own process start cost more
    than its run; the service it feeds is a real process); its stderr."""
    from engine.service.cli import main

    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    capsys.readouterr()
    try:
        code = main(["feed", "replay", str(path), "--batch-ms", "100", "--endpoint", endpoints["ingest"], "--answers",
                     endpoints["answers"], "--control", endpoints["control"], *extra])
    finally:  # (a command may take these signals for its run: this process's own come back)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    err = capsys.readouterr().err
    assert code == 0, err
    return err


def computed(control: ControlClient, ticks: int) -> None:
    """Wait until the service took ``ticks`` ticks in all and computed (and answered) every one."""
    wait_for(lambda: (stats := control.call("stats")["stats"])["ticks_in"] == ticks
             and not stats["pending_tokens"] and not stats["owed_ticks"], timeout_s=90)


def test_a_message_a_kill_cut_short_is_left_out_at_the_restart_and_sent_again_whole(file: Backtested, tmp_path,
                                                                                   capsys) -> None:
    """A `kill -9` while the service read a message in leaves part of it in the tick log (each tick is logged as it
    is taken), none of it answered. Built here at the byte level: a real serve fed the file's first batches, then
    one more batch (one message), killed, its tick log cut in the middle of that message and its answer log where
    it was before it. The restart holds none of the cut message (stats, `streams`, no answer on it), and a real
    `feed replay` of the whole file sends it again whole: every answer, every topic's from seq 1, is the backtest's.
    (Before, the restart booked the part as a tick group of its own and answered it: `batch` and `{ticks: N}`
    queries answered at other ticks than the backtest from there on; message_ends.py.)"""
    cutter = EventTimeCutter(100 * MS)
    batches = cutter.add(file.ticks) + cutter.flush()
    # a batch whose first tick's stream has more ticks in it: cut after that tick, its stream's group is split
    k = next(k for k in range(len(batches) // 2, len(batches))
             if any(t.stream == batches[k][0].stream for t in batches[k][1:]))
    first, cut_batch = [t for batch in batches[:k] for t in batch], batches[k]
    for name, ticks in (("first.parquet", first), ("cut.parquet", cut_batch)):
        pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(tmp_path / name)
    endpoints = free_endpoints()
    config_path = tmp_path / "engine.yaml"
    config_path.write_text(json.dumps({**file.engine, "queries": str(file.queries), "endpoints": endpoints,
                                       "limits": {"heartbeat_s": 0.2}}))
    data = tmp_path / "data"
    tick_log, answer_log = data / "ticks" / f"ticks-{0:020d}.log", data / "answers" / f"answers-{0:020d}.log"
    process, _ = serve(config_path, data)
    try:
        feed_file(tmp_path / "first.parquet", endpoints, capsys)
        with ControlClient(endpoints["control"], timeout_s=10) as control:
            computed(control, len(first))
            before = tick_log.stat().st_size, answer_log.stat().st_size
            feed_file(tmp_path / "cut.parquet", endpoints, capsys)
            computed(control, len(first) + len(cut_batch))
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        # as a kill while the service read the message in leaves them: its first tick logged, its second cut short
        # mid-record (a write cut short), none of its answers
        with tick_log.open("rb") as log:
            log.seek(before[0])
            first_record = HEADER.size + HEADER.unpack(log.read(HEADER.size))[1]
        os.truncate(tick_log, before[0] + first_record + HEADER.size + 3)
        os.truncate(answer_log, before[1])
        process, _ = serve(config_path, data)
        said = "\n".join(process.lines_read)
        assert "left out 1 tick of the last logged message, cut short by a stop as it was read in (never answered; " \
               "`flashtick feed` sends such a message again whole)" in said, said
        held = Counter(t.stream for t in first)
        with ControlClient(endpoints["control"], timeout_s=30) as control:
            log = control.call("stats")["stats"]["log"]
            assert log["recovered_ticks"] == len(first), log
            assert log["ticks_dropped_unended_message"] == 1 and log["torn_tails"] == 1, log
            streams = control.call("streams", streams=sorted(held))["streams"]
            assert {stream: streams[stream]["ticks"] for stream in held} == held
            assert all(version <= held[stream] for _, stream, version in answer_history(control))
            fed = feed_file(file.data, endpoints, capsys)
            assert f"{len(first)} ticks not sent" in fed and "holds part of" not in fed, fed
            computed(control, len(file.ticks))
            live = answer_history(control)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    assert_as_backtested(live, file.answers, tol=5e-6)
