"""Feed client over a real PULL socket on 127.0.0.1 (ephemeral port): exact msgpack delivery, run_feed."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time
from collections.abc import Iterator

import msgpack
import polars as pl
import pytest
import zmq

from connectors.feed import FeedClient, FeedTimeout
from connectors.feed_pump import run_feed
from connectors.send_wait import WAIT_SAID_S, SendWait, acked_bytes
from connectors.source import SyntheticSource
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import Tick, decode, quote, trade
from forked_cli import cli_popen

TS = 1_723_161_254_087_896_567  # > 2**53: must arrive exact


@pytest.fixture
def pull() -> Iterator[tuple[zmq.Socket, str]]:
    sock = zmq.Context.instance().socket(zmq.PULL)
    sock.setsockopt(zmq.RCVTIMEO, 5000)  # a lost message fails the test instead of hanging it
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    yield sock, f"tcp://127.0.0.1:{port}"
    sock.close()


def test_send_one_tick_a_list_and_dicts_arrive_exactly(pull) -> None:
    sock, endpoint = pull
    t1 = trade("BTCUSDT", TS, 61837.63, 0.02, "sell")
    q1 = quote("EURUSD", TS + 1, 1.14543, 1.14545, 2.06, 1.0)
    with FeedClient(endpoint) as client:
        assert client.send(t1) == 1
        assert client.send([t1, q1]) == 2
        assert client.send({"stream": "X", "ts": TS + 2, "price": 5.0, "size": 1}) == 1
        assert client.send([q1.to_wire(), t1]) == 2
        assert client.send([]) == 0  # nothing to say: no message
        assert (client.messages, client.ticks) == (4, 6)
    messages = [sock.recv() for _ in range(4)]
    assert isinstance(msgpack.unpackb(messages[0]), dict) and isinstance(msgpack.unpackb(messages[1]), list)
    decoded = [decode(m) for m in messages]
    assert all(d.errors == [] for d in decoded)
    assert decoded[0].ticks == [t1]
    assert decoded[1].ticks == [t1, q1]
    assert decoded[2].ticks == [Tick("X", TS + 2, "trade", price=5.0, size=1.0)]
    assert decoded[3].ticks == [q1, t1]
    assert decoded[1].ticks[0].ts == TS  # int64 ns survived exactly
    with pytest.raises(zmq.Again):
        sock.recv(zmq.NOBLOCK)


def test_dicts_are_sent_as_given_so_the_engine_can_count_bad_ones(pull) -> None:
    sock, endpoint = pull
    with FeedClient(endpoint) as client:
        client.send([{"stream": "X", "ts": TS, "price": float("nan"), "size": 1.0},
                     {"stream": "X", "ts": TS, "price": 1.0, "size": 1.0}])
    assert decode(sock.recv()).errors == [(0, "nonfinite_price")]


def test_a_paced_replay_held_back_once_that_caught_up_says_it_kept_its_speed(tmp_path, monkeypatch) -> None:
    """`feed replay --speed 20` printed "--speed 20 was not kept: 20x reached": held back a while (back-pressure),
    a paced replay sends what is due at once and catches up. It says that it caught up, and which share of the run
    it was behind."""
    import types

    import connectors.replay
    from connectors.replay import FileReplay

    # the replay's own clock, moved by the test (a loaded machine stretched a real sleep and the loop after it)
    clock = types.SimpleNamespace(monotonic_ns=lambda: now_ns)
    monkeypatch.setattr(connectors.replay, "time", clock)
    now_ns = 10**12
    path = tmp_path / "t.csv"
    path.write_text("ts,stream,price,size\n" + "".join(f"{1_700_000_000_000 + i * 1000},S,{100 + i},1\n"
                                                         for i in range(61)))  # 60 s of event time: 3 s at 20x
    replay = FileReplay(path, columns={"ts_unit": "ms"}, speed=20.0)
    assert len(replay.next_batch(1000)) == 1  # the first tick, at once
    now_ns += 1_600_000_000  # held back 1.6 s (the engine pushing back): the next ticks leave over a second late
    sent = 1
    while not replay.done:
        sent += len(replay.next_batch(1000))
        now_ns += 10_000_000
    assert sent == 61
    pace = replay.pace()
    assert pace is not None and pace.startswith("--speed 20 was kept in the end: behind it for ") and \
        pace.endswith("load), then caught up"), pace
    share = int(re.search(r"behind it for (\d+)% of the run, up to 1\.[56] s \(", pace).group(1))
    assert 40 <= share <= 60, pace  # the hold-up's 1.6 s of a 3 s run


def test_bad_arguments_fail_fast() -> None:
    with pytest.raises(ValueError, match="endpoint must look like"):
        FeedClient("127.0.0.1:5555")
    with pytest.raises(ValueError, match="hwm"):
        FeedClient(hwm=-1)
    with FeedClient("tcp://127.0.0.1:9") as client:
        with pytest.raises(TypeError, match="got int"):
            client.send(42)
        with pytest.raises(TypeError, match="a tick is a Tick or a dict"):
            client.send([trade("X", 1, 1.0, 1.0), "tick"])
    with pytest.raises(RuntimeError, match="closed"):
        client.send(trade("X", 1, 1.0, 1.0))


@contextlib.contextmanager
def dead_endpoint() -> Iterator[str]:
    """An endpoint where nothing accepts, held so while the test runs: a TCP socket bound there and never listening
    refuses every connection, and neither another process nor a TCP self-connect can take the port meanwhile (a port
    probed free and then closed, even below the ephemeral range, was taken once under load: the feed connected)."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    try:
        yield f"tcp://127.0.0.1:{holder.getsockname()[1]}"
    finally:
        holder.close()


def test_feed_with_no_engine_fails_fast_with_a_clear_message() -> None:
    with dead_endpoint() as endpoint:
        start = time.monotonic()
        with FeedClient(endpoint, connect_timeout_ms=300) as client:
            with pytest.raises(FeedTimeout, match=f"no engine accepting on {endpoint} after 300 ms: "
                                                  "is `flashtick serve` running"):
                run_feed(SyntheticSource(limit=10), client)
            assert (client.messages, client.ticks) == (0, 0)  # nothing was queued into the void
        assert time.monotonic() - start < 5.0  # 300 ms asked for; generous for a loaded CI machine
        with FeedClient(endpoint) as default:
            assert (default.connect_timeout_ms, default.send_timeout_ms) == (3000, 10_000)  # seconds, never for ever


def test_cli_feed_with_no_engine_exits_4_with_one_line(capsys) -> None:
    from engine.service.cli import main

    start = time.monotonic()
    with dead_endpoint() as endpoint:
        assert main(["feed", "synthetic", "--ticks", "10", "--endpoint", endpoint]) == 4  # unreachable (docs/cli.md)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no engine accepting on tcp://127.0.0.1:" in err[0] and "sent" not in err[0]
    assert time.monotonic() - start < 60.0  # (a bound that only catches a hang: the machine may be loaded)


def test_send_times_out_when_the_engine_stops_reading() -> None:
    """An engine that accepted the connection and then stopped reading: sends time out instead of hanging."""
    stalled = zmq.Context.instance().socket(zmq.PULL)  # bound, connected to, never read
    stalled.setsockopt(zmq.RCVHWM, 1)
    stalled.setsockopt(zmq.LINGER, 0)
    endpoint = f"tcp://127.0.0.1:{stalled.bind_to_random_port('tcp://127.0.0.1')}"
    try:
        start = time.monotonic()
        with FeedClient(endpoint, hwm=1, send_timeout_ms=300, linger_ms=0) as client:
            with pytest.raises(FeedTimeout, match="read nothing of this feed's for 300 ms .stopped, hung, or not "
                                                  "reading; a slow engine is waited for while it reads."):
                run_feed(SyntheticSource(), client, batch=2000)  # ~100 kB messages fill the socket buffers fast
            assert client.ticks > 0
        assert time.monotonic() - start < 60.0  # (a hang, not a speed: send_timeout_ms is what gives up)
    finally:
        stalled.close()


def test_a_send_waits_while_the_engine_reads_and_times_out_only_once_it_reads_nothing() -> None:
    """Review392 #2: a feed died of its 10 s send time-out while the engine, behind, read on (ZeroMQ frees a waiting
    send's room in batches, behind the kernel's buffers, so one send may wait many seconds of steady reading). The
    time-out counts from the last time the engine read: the bytes its end acknowledged on the connection grow as it
    reads. Real sockets; the wait is given its times."""
    engine = zmq.Context.instance().socket(zmq.PULL)
    engine.rcvhwm, engine.linger, engine.rcvtimeo = 1, 0, 60_000  # (a time-out that only catches a hang)
    engine.rcvbuf = 4096  # its kernel takes little: what the feed sent waits on the feed's side, unacknowledged
    endpoint = f"tcp://127.0.0.1:{engine.bind_to_random_port('tcp://127.0.0.1')}"
    frame = b"x" * 10_000
    try:
        with FeedClient(endpoint, hwm=100, linger_ms=0) as client:
            client.send_packed(frame, 1)  # (connected: its descriptor known)
            with contextlib.suppress(zmq.Again):
                while True:  # the engine reads nothing: the socket and the kernel's buffers fill
                    client._sock.send(frame, zmq.NOBLOCK)
            fd = client._connection_fd()
            assert acked_bytes(fd) > 0
            idle = 0.0
            while idle != 1.0:  # the engine reads nothing: once what was in flight is acknowledged, the time-out runs
                wait = SendWait(fd, 0.0)
                wait.look(fd, 1.0)
                idle = wait.idle_s(1.0)
            assert wait.reads_seen
            before = acked_bytes(fd)
            while acked_bytes(fd) == before:  # the engine reads: its end acknowledges more of the connection's bytes
                engine.recv()
            wait.look(fd, 2.0)
            assert wait.idle_s(2.5) == 0.5  # counted from its last read, not from when the send began
            assert "waiting while it reads (giving up once it reads nothing for 10 s)" in wait.note(
                WAIT_SAID_S, endpoint, 10.0)
            assert wait.note(WAIT_SAID_S + 1, endpoint, 10.0) is None  # (said again only after WAIT_SAID_EVERY_S)
    finally:
        engine.close()
    assert acked_bytes(None) is None and SendWait(None, 0.0).idle_s(3.0) == 3.0  # unseen: one send's wait counts


def test_run_feed_delivers_every_tick_of_a_finite_source(pull) -> None:
    sock, endpoint = pull
    cfg = SyntheticConfig(seed=3)
    want = SyntheticMarket(cfg).next_batch(1000)
    with FeedClient(endpoint) as client:
        stats = run_feed(SyntheticSource(cfg, limit=1000), client, batch=64)
    assert (stats.ticks, stats.messages) == (1000, 16)
    got: list[Tick] = []
    for _ in range(stats.messages):
        decoded = decode(sock.recv())
        assert decoded.errors == []
        got += decoded.ticks
    assert got == want


@pytest.mark.parametrize("count, streams", [(2, {"SYN.A", "SYN.B"}),
                                             (7, {"SYN.A", "SYN.B", "SYN.C", "SYN.D", "SYN.5", "SYN.6", "SYN.7"})])
def test_feed_synthetic_stream_count_feeds_that_many_streams(pull, count, streams, capsys) -> None:
    """review352 #3: docs/extending.md's worked example, `feed synthetic --stream-count N`, exists and does what it
    says: the first N of SYN.A .. SYN.D, then SYN.5, ... for a load test of many streams."""
    from engine.service.cli import main

    sock, endpoint = pull
    assert main(["feed", "synthetic", "--ticks", "600", "--rate", "100000", "--stream-count", str(count),
                 "--endpoint", endpoint, "--control", "", "--start-ts", str(TS)]) == 0, capsys.readouterr().err
    got: list[Tick] = []
    while len(got) < 600:
        decoded = decode(sock.recv_multipart()[-1])  # [the feed's tag, the ticks]
        assert decoded.errors == []
        got += decoded.ticks
    assert {t.stream for t in got} == streams
    with pytest.raises(SystemExit) as exited:
        main(["feed", "synthetic", "--stream-count", "0", "--endpoint", endpoint])
    assert exited.value.code == 2  # a usage error


def test_run_feed_rate_max_ticks_and_stop(pull) -> None:
    sock, endpoint = pull
    with FeedClient(endpoint) as client:
        start = time.monotonic()
        stats = run_feed(SyntheticSource(), client, rate=500.0, max_ticks=60, batch=8)
        elapsed = time.monotonic() - start
        assert stats.ticks == 60 and 0.1 <= elapsed < 10  # 60 ticks at 500/s: ~0.12 s, never all at once
        stop = threading.Event()
        stop.set()
        assert run_feed(SyntheticSource(), client, stop=stop).ticks == 0
    assert sum(len(decode(sock.recv()).ticks) for _ in range(stats.messages)) == 60


def test_a_replay_that_falls_behind_its_speed_says_so_while_it_runs_and_at_the_end(pull, tmp_path) -> None:
    """`feed replay --speed 30` ran at well under 30x (90 s for 58 s of the file's clock) without a word. A paced
    replay held back (here by a rate cap; in use, by the engine's back-pressure or a loaded machine) says how far
    behind it is while it runs, and what speed it reached; one that keeps up says nothing."""
    from connectors.replay import FileReplay

    sock, endpoint = pull
    path = tmp_path / "t.csv"
    path.write_text("ts,stream,price,size\n" + "".join(f"{1_700_000_000_000 + i * 1000},S,{100 + i},1\n"
                                                         for i in range(8)))  # one tick a second of event time
    said: list[str] = []
    replay = FileReplay(path, columns={"ts_unit": "ms"}, speed=100.0)  # the 7 s of the file in 0.07 s, asked
    with FeedClient(endpoint) as client:
        stats = run_feed(replay, client, rate=4.0, batch=1, say=said.append)  # ~2 s: held back by the cap
    assert stats.ticks == 8 and [decode(sock.recv()).ticks[0].price for _ in range(8)] == [100 + i for i in range(8)]
    assert len(said) == 1 and said[0].endswith("s behind --speed 100 (the engine pushes back, or this machine cannot "
                                               "read the files that fast): the ticks leave late, in order, none "
                                               "dropped")
    pace = replay.pace()
    assert pace is not None and pace.startswith("--speed 100 was not kept: ") and "x reached over the file's clock, " \
        "behind it for " in pace, pace
    kept_up = FileReplay(path, columns={"ts_unit": "ms"}, speed=100.0)
    with FeedClient(endpoint) as client:
        assert run_feed(kept_up, client, batch=1, say=said.append).ticks == 8
    assert len(said) == 1 and kept_up.pace() is None


# `flashtick feed` in a process of its own (the wrapper says at its exit whether torch was ever imported)
FEED_PROCESS = ("import atexit, sys\n"
                "atexit.register(lambda: print('torch imported:', 'torch' in sys.modules, file=sys.stderr))\n"
                "from engine.service.cli import main\n"
                "sys.exit(main(sys.argv[1:]))\n")


def _feed_process(*argv: str) -> "subprocess.Popen[str]":
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", FEED_PROCESS, "feed", *argv], stderr=subprocess.PIPE, text=True)


def test_feed_replay_stopped_by_ctrl_c_ends_without_loading_torch(pull, tmp_path) -> None:
    """A Ctrl-C'd `feed replay` printed its summary, then sat 10-35 s before exiting on a loaded machine: listing
    the rows not sent imported the backtest module, and torch with it (every replay's end paid it, Ctrl-C or
    not). A feed loads no torch, and its rejected rows are still listed."""
    import signal

    sock, endpoint = pull
    path = tmp_path / "t.csv"
    rows = [f"{1_700_000_000_000 + i * 1000},S,{100 + i},1\n" for i in range(60)]  # one tick a second of event time
    rows[1] = f"{1_700_000_001_000},S,-5,1\n"  # a negative price: rejected, before the stop
    path.write_text("ts,stream,price,size\n" + "".join(rows))
    feed = _feed_process("replay", str(path), "--ts-unit", "ms", "--speed", "1", "--endpoint", endpoint,
                         "--control", "", "--answers", "")
    try:
        for _ in range(3):  # the first ticks are out: it is feeding (paced, a minute of ticks left)
            sock.setsockopt(zmq.RCVTIMEO, 120_000)
            sock.recv()
        feed.send_signal(signal.SIGINT)
        _, err = feed.communicate(timeout=120)
    finally:
        feed.kill()
    assert feed.returncode == 130 and "stopped by a signal" in err, err
    assert "1 tick read from the files not sent:" in err and "rejected " in err, err
    assert err.rstrip().endswith("torch imported: False"), err


def test_feed_interrupted_while_waiting_for_its_engine_says_so() -> None:
    """A Ctrl-C while the feed still starts (here: waiting for an engine's control socket to answer) exited 130
    without a word; it says it was interrupted and that nothing was sent, as one interrupted later gives its
    summary."""
    import signal
    import subprocess

    with dead_endpoint() as ingest, dead_endpoint() as control:
        # (a forked CLI child: a real process with the CLI's own Ctrl-C handling, without a fresh interpreter's start;
        # what this one imports is not what it checks)
        feed = cli_popen(["feed", "synthetic", "--endpoint", ingest, "--control", control], stderr=subprocess.PIPE,
                         text=True)
        try:
            while "waiting for the engine before sending" not in (line := feed.stderr.readline()):
                assert line, "the feed ended before it waited for the engine"
            feed.send_signal(signal.SIGINT)
            _, err = feed.communicate(timeout=60)
        finally:
            feed.kill()
    assert feed.returncode == 130, err
    assert "flashtick feed synthetic: interrupted while starting (reading the files, or waiting for the engine); " \
           "nothing was sent" in err, err


def weekend_trades(path) -> None:
    """30 trades 2 s apart from Friday 15:59 ET, then 30 from Monday 09:30 ET: a 64.5 h gap between them (the
    clocks went forward on Sunday)."""
    rows = [f"2026-03-06 15:59:{2 * i:02d}.000,WKND,{100 + i * 0.01:.2f},100\n" for i in range(30)]
    rows += [f"2026-03-09 09:30:{2 * i:02d}.000,WKND,{100 + i * 0.01:.2f},100\n" for i in range(30)]
    path.write_text("timestamp,symbol,price,size\n" + "".join(rows))


def test_a_paced_replay_says_a_long_wait_for_its_next_tick_as_it_begins(tmp_path) -> None:
    """`feed replay --speed 100` over a weekend sat silent for 39 minutes; the wait is said as it begins: when the
    next tick is stamped and how long it is, at that speed."""
    from connectors.replay import FileReplay

    weekend_trades(tmp_path / "weekend.csv")
    replay = FileReplay(tmp_path / "weekend.csv", columns={"tz": "America/New_York"}, speed=100.0)
    sent: list[Tick] = []
    while not (waits := replay.take_long_waits()):
        sent += replay.next_batch(100)
        time.sleep(0.01)
    assert len(sent) == 30 and len(waits) == 1
    text = waits[0].text(replay.speed, replay.max_gap_s)
    assert text.startswith("next tick at 2026-03-09T13:30:00Z, 2.69 days of event time after the last: sent in 38.")
    assert text.endswith(" min at --speed 100 (--max-gap SECONDS shortens such waits)"), text
    with pytest.raises(ValueError, match="give speed too"):
        FileReplay(tmp_path / "weekend.csv", max_gap_s=5.0)


def test_feed_replay_speed_0_negative_or_inf_is_refused_naming_how_to_ask_for_as_fast_as_possible(
        pull, tmp_path, capsys) -> None:
    """Review 174, finding 5: `feed replay --speed 0` said "speed must be None (as fast as possible) or ...": None is
    no value a command line can give. --help's default ("as fast as possible") is the option left out, so 0 is not
    read as it: refused as the line is parsed (exit 2), saying to leave --speed out. Nothing is sent."""
    from engine.service.cli import main

    sock, endpoint = pull
    weekend_trades(tmp_path / "weekend.csv")
    for value in ("0", "-2", "inf", "nan"):
        with pytest.raises(SystemExit) as exited:
            main(["feed", "replay", str(tmp_path / "weekend.csv"), f"--speed={value}", "--endpoint", endpoint,
                  "--control", "", "--answers", ""])
        err = capsys.readouterr().err
        assert exited.value.code == 2, err
        assert err.splitlines()[0] == (f"flashtick feed replay: error: argument --speed: must be a finite number > 0, "
                                        f'got "{value}" (leave --speed out for as fast as possible)'), err
    with pytest.raises(zmq.Again):
        sock.recv(zmq.NOBLOCK)


def test_feed_replay_max_gap_shortens_a_weekend_and_says_so(pull, tmp_path, capsys) -> None:
    """`feed replay --speed 100 --max-gap 0.5` over a weekend sends every tick without the 39-minute wait, and says
    the gap it shortened, as it begins and in its summary. (Run in this process, as the `flashtick` script runs
    `cli.main`: what is checked is what it sends and says, not a process's start, which cost more than its run.)"""
    import signal

    from engine.service.cli import main

    sock, endpoint = pull
    weekend_trades(tmp_path / "weekend.csv")
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:  # (without the cap the replay would wait 39 min: the pull socket's 5 s receive timeout fails it below)
        code = main(["feed", "replay", str(tmp_path / "weekend.csv"), "--tz", "America/New_York", "--speed", "100",
                     "--max-gap", "0.5", "--endpoint", endpoint, "--control", "", "--answers", ""])
    finally:  # (a command may take these signals for its run: this process's own come back)
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    err = capsys.readouterr().err
    assert code == 0, err
    received = []
    while len(received) < 60:
        received += decode(sock.recv()).ticks
    assert [t.price for t in received] == [round(100 + i * 0.01, 2) for i in range(30)] * 2
    assert ("flashtick feed replay: note: next tick at 2026-03-09T13:30:00Z, 2.69 days of event time after the last "
            "(38.7 min at --speed 100): shortened to 0.5 s by --max-gap\n" in err), err
    assert "flashtick feed replay: --max-gap 0.5 shortened 1 gap between ticks, 38.7 min of wall time in all" in err, \
        err


@pytest.mark.parametrize("command", [["feed", "synthetic"], ["feed", "replay", "t.csv"]])
def test_feed_rate_0_or_negative_is_a_usage_error_before_connecting(tmp_path, capsys, command) -> None:
    """review196 #4: `feed --rate 0` (or -1) was checked only once connected: with no engine it waited 20 s and
    blamed the missing engine. It is a usage error as the line is parsed (exit 2), nothing connected."""
    from engine.service.cli import main

    (tmp_path / "t.csv").write_text("timestamp,price,size\n2024-01-02T00:00:00Z,1.0,1\n")
    for value in ("0", "-1"):
        with pytest.raises(SystemExit) as exited:
            main([*[str(tmp_path / c) if c.endswith(".csv") else c for c in command], f"--rate={value}",
                  "--endpoint", "tcp://127.0.0.1:1"])
        err = capsys.readouterr().err
        assert exited.value.code == 2, err
        assert err.splitlines()[0].endswith(f'error: argument --rate: must be a finite number > 0, got "{value}"'), err


def test_feed_replays_notes_and_errors_share_its_full_name(pull, tmp_path, capsys) -> None:
    """`flashtick feed replay`'s errors said `flashtick feed replay: error:` (the nested command's full name) while
    its notes and warnings said `flashtick feed:`: one command, two names on its stderr. Every line it prefixes now
    carries the full name, read off its stderr. (Run in this process, as the `flashtick` script runs `cli.main`:
    what is checked is what it says, not a process's start, which cost more than its run.)"""
    from engine.service.cli import main

    _, endpoint = pull
    path = tmp_path / "spread.csv"  # every price below zero: a note on the map read, then an error
    path.write_text("timestamp,symbol,price,size\n2024-03-08T14:30:00Z,XYZ,-1.5,100\n2024-03-08T14:30:01Z,XYZ,-1.6,1\n")
    code = main(["feed", "replay", str(path), "--endpoint", endpoint, "--control", "", "--answers", ""])
    err = capsys.readouterr().err
    prefixed = [line for line in err.splitlines() if line.startswith("flashtick")]
    assert code == 2, err
    assert any(line.startswith("flashtick feed replay: note: spread.csv: no column map given") for line in prefixed)
    assert prefixed[-1] == "flashtick feed replay: error: every row of the files was rejected; nothing was sent " \
                           "(reasons above)", err
    assert all(line.startswith("flashtick feed replay: ") for line in prefixed), err


def test_feed_replay_reads_its_files_with_the_configs_replay_section(pull, tmp_path, capsys) -> None:
    """`feed replay --config` read the files without the config's `replay` section, which `backtest --config`
    applies: the same config fed a live run other ticks than its backtest read (fix403's note)."""
    from engine.service.cli import main

    sock, endpoint = pull
    pl.DataFrame([trade(name, TS + i, 100.0 + i, 1.0).to_wire() for i in range(6) for name in ("A", "B")]
                 ).write_parquet(tmp_path / "two.parquet")
    (tmp_path / "engine.yaml").write_text(f'endpoints: {{ingest: "{endpoint}"}}\nreplay: {{streams: [B]}}\n')
    assert main(["feed", "replay", str(tmp_path / "two.parquet"), "--config", str(tmp_path / "engine.yaml"),
                 "--answers", "", "--control", ""]) == 0, capsys.readouterr().err
    got: list[Tick] = []
    while len(got) < 6:
        got += decode(sock.recv_multipart()[-1]).ticks
    assert {t.stream for t in got} == {"B"} and "sent 6 ticks" in capsys.readouterr().err
