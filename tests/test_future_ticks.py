"""A tick stamped hours ahead of the clock (within limits.max_ts_ahead_s, set to a day here) blocks its stream's
real feed as ts_backwards: the service says so when it accepts it, and `forget` drops the stream and its ordering guard,
durably (a restart does not bring the guard back). Real sockets, a real data directory, the tiny tick model."""

from __future__ import annotations

import time
from pathlib import Path

import msgpack
import pytest
import zmq

from conftest import serving
from engine.service.client import ControlClient, ControlError
from engine.service.config import ServiceConfig
from test_answer_context import wait_for
from test_server import checkpoint  # noqa: F401  (the model fixture)

HOUR_NS = 3600 * 10**9


def _config(checkpoint, data_dir) -> ServiceConfig:
    """A service whose clock bound is a day (limits.max_ts_ahead_s; its default, 10 s, refuses these forged ticks:
    test_clock_ahead.py), so a tick stamped hours ahead is accepted and blocks its stream: what `forget` is for."""
    return ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 2048, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "limits": {"heartbeat_s": 0.2, "max_ts_ahead_s": 86_400}, "log": {"dir": str(data_dir)}})


def _tick(stream: str, ts: int, price: float = 100.0) -> bytes:
    return msgpack.packb({"stream": stream, "ts": ts, "price": price, "size": 1.0})


def _csv(path: Path, rows: list[tuple[int, str]]) -> Path:
    """A tick file of trades at ``rows``' (ts, stream), each priced one above the one before."""
    path.write_text("ts,stream,price,size\n" + "".join(f"{ts},{stream},{100 + i},1\n"
                                                       for i, (ts, stream) in enumerate(rows)))
    return path


def _feed_replay(server, path, capsys) -> tuple[int | None, str]:
    """`flashtick feed replay PATH` into ``server``, asking its control socket: the exit status and stderr."""
    from engine.service.cli import main

    capsys.readouterr()
    code = main(["feed", "replay", str(path), "--endpoint", server.endpoints["ingest"],
                 "--control", server.endpoints["control"]])
    return code, capsys.readouterr().err


class Feed:
    """A PUSH into the service's ingest and a control client beside it."""

    def __init__(self, server) -> None:
        self.push = zmq.Context.instance().socket(zmq.PUSH)
        self.push.linger = 1000
        self.push.connect(server.endpoints["ingest"])
        self.control = ControlClient(server.endpoints["control"], timeout_s=60)

    def stats(self) -> dict:
        return self.control.call("stats")["stats"]

    def last_ts(self, stream: str) -> int | None:
        held = self.control.call("streams", streams=[stream])["streams"][stream]
        return None if held is None else held["last_ts"]

    def close(self) -> None:
        self.push.close()
        self.control.close()


def test_a_tick_far_ahead_of_the_clock_is_said_and_forget_lets_the_real_feed_in_across_a_restart(
        checkpoint, tmp_path, capsys) -> None:
    data_dir = tmp_path / "data"
    now = time.time_ns()
    forged = now + 23 * HOUR_NS  # within limits.max_ts_ahead_s (a day): accepted
    with serving(_config(checkpoint, data_dir)) as server:
        feed = Feed(server)
        try:
            feed.push.send(_tick("SYN.D", now))
            feed.push.send(_tick("SYN.OK", now + 1))
            wait_for(lambda: feed.last_ts("SYN.OK") == now + 1)
            assert "ticks_ahead_of_clock" not in feed.stats()
            feed.push.send(_tick("SYN.D", forged))
            wait_for(lambda: feed.last_ts("SYN.D") == forged)
            ahead = feed.stats()["ticks_ahead_of_clock"]
            assert ahead["ticks"] == 1 and list(ahead["streams"]) == ["SYN.D"]
            assert 22.9 * 3600 < ahead["streams"]["SYN.D"]["max_ahead_s"] < 23.1 * 3600
            # the honest feed is refused from now on
            feed.push.send(_tick("SYN.D", now + 10**9))
            wait_for(lambda: feed.stats()["rejected"].get("ts_backwards", 0) == 1)

            with pytest.raises(ControlError, match="not known"):
                feed.control.call("forget", stream="NO.SUCH")
            reply = feed.control.call("forget", stream="SYN.D")
            assert reply["forgotten"] == "SYN.D" and reply["last_ts"] == forged and reply["ticks"] == 2
            assert feed.last_ts("SYN.D") is None
            assert feed.last_ts("SYN.OK") == now + 1  # other streams untouched

            feed.push.send(_tick("SYN.D", now + 2 * 10**9))  # the honest feed again, older than the forged tick
            wait_for(lambda: feed.last_ts("SYN.D") == now + 2 * 10**9)
        finally:
            feed.close()
    err = capsys.readouterr().err
    assert 'stream "SYN.D": accepted a tick stamped 23.0 h ahead of this clock' in err, err
    assert "`flashtick forget SYN.D`" in err
    assert "forgot stream \"SYN.D\" at a control client's request" in err

    with serving(_config(checkpoint, data_dir)) as server:  # a restart replays the log: the guard stays gone
        feed = Feed(server)
        try:
            assert feed.last_ts("SYN.D") == now + 2 * 10**9
            assert feed.last_ts("SYN.OK") == now + 1
            feed.push.send(_tick("SYN.D", now + 3 * 10**9))
            wait_for(lambda: feed.last_ts("SYN.D") == now + 3 * 10**9)
            assert "ts_backwards" not in feed.stats()["rejected"]
        finally:
            feed.close()


def test_without_forget_a_restart_brings_the_forged_guard_back(checkpoint, tmp_path) -> None:
    """Without `forget`, a restart brings the forged tick's guard back (the log holds it): what `forget` is for."""
    data_dir = tmp_path / "data"
    now = time.time_ns()
    with serving(_config(checkpoint, data_dir)) as server:
        feed = Feed(server)
        try:
            feed.push.send(_tick("SYN.D", now + 20 * HOUR_NS))
            wait_for(lambda: feed.last_ts("SYN.D") == now + 20 * HOUR_NS)
            with pytest.raises(ControlError, match='needs "stream"'):
                feed.control.call("forget")
        finally:
            feed.close()
    with serving(_config(checkpoint, data_dir)) as server:
        feed = Feed(server)
        try:
            assert feed.last_ts("SYN.D") == now + 20 * HOUR_NS
        finally:
            feed.close()


def test_a_feed_blocked_by_a_tick_ahead_of_the_clock_names_forget_first(checkpoint, tmp_path, capsys) -> None:
    """Review 115 (finding 10): the feed refused as older than a forged tick 23 h ahead advised only a new data
    directory, --no-log or another stream name, though `flashtick forget STREAM` is the way out that keeps the rest."""
    from engine.service.cli import main

    now = time.time_ns()
    honest = _csv(tmp_path / "honest.csv", [(now - (5 - i) * 10**9, "FUT") for i in range(5)])
    with serving(_config(checkpoint, tmp_path / "data")) as server:
        feed = Feed(server)
        try:
            feed.push.send(_tick("FUT", now + 23 * HOUR_NS))
            wait_for(lambda: feed.last_ts("FUT") == now + 23 * HOUR_NS)
            code, err = _feed_replay(server, honest, capsys)
            assert code == 2 and "nothing was sent" in err, err
            assert ("the engine's last tick of a stream here is stamped ahead of this machine's clock (FUT by 23 h)"
                    in err), err
            assert err.index("`flashtick forget FUT`") < err.index("another --data-dir"), err
            # the line on ticks older than the engine's last names the clock, not a guess at the files' order
            assert "its last there stamped ahead of this machine's clock" in err, err
            assert "an earlier file fed after a later one" not in err, err
            assert main(["forget", "FUT", "--control", server.endpoints["control"]]) in (0, None)
            code, err = _feed_replay(server, honest, capsys)  # the advice taken: the honest ticks go in
            assert code in (0, None) and "sent 5 ticks" in err, err
            wait_for(lambda: feed.last_ts("FUT") == now - 10**9)
        finally:
            feed.close()


def test_a_feed_says_each_streams_own_cause_when_one_is_ahead_of_the_clock_and_another_fed_out_of_order(
        checkpoint, tmp_path, capsys) -> None:
    """Files whose ticks are older than the engine's last of two streams, FUT blocked by a tick 23 h ahead of the
    clock and OLD by a later file fed first: the line on them named the clock for both ('its last there stamped
    ahead of this machine's clock'), though OLD's last tick is an honest one a minute old. Each stream gets its own
    cause."""
    now = time.time_ns()
    earlier = _csv(tmp_path / "earlier.csv", [(now - (60 - i) * 10**9, s) for i in range(5) for s in ("FUT", "OLD")])
    with serving(_config(checkpoint, tmp_path / "data")) as server:
        feed = Feed(server)
        try:
            feed.push.send(_tick("FUT", now + 23 * HOUR_NS))
            feed.push.send(_tick("OLD", now - 10**9))
            wait_for(lambda: feed.last_ts("FUT") == now + 23 * HOUR_NS and feed.last_ts("OLD") == now - 10**9)
            code, err = _feed_replay(server, earlier, capsys)
            assert code == 2 and "nothing was sent" in err, err
            assert ("older than the engine's last of their stream (FUT: its last there stamped ahead of this "
                    "machine's clock; OLD: an earlier file fed after a later one?)") in err, err
        finally:
            feed.close()
