"""`streams` sorted and limited by the service, and `forget` of several streams (review380 #10, #13: a scanner of
3,000 names fetched 1.6 MB to find its 10 stalest streams, and dropped 50 names in 50 round trips, 0.25 s each;
`forget 'FG001*'` said the pattern was no stream). Real sockets on 127.0.0.1, the built-in model."""

from __future__ import annotations

import pytest

from connectors.ticks import Tick, encode
from engine.service.cli import main
from engine.service.client import ControlClient, ControlError
from test_server import checkpoint  # noqa: F401  (checkpoint: the model fixture)
from test_service_limits import live_server, wait_for


def _trades(stream: str, n: int, ts: int) -> list[Tick]:
    return [Tick(stream=stream, ts=ts + k, kind="trade", price=100.0 + k * 0.01, size=1.0) for k in range(n)]


def _settled(server, control: ControlClient, ticks: int) -> None:
    """Every tick sent taken and computed: nothing waits on any stream (a `forget` of one with data waiting is
    refused as busy)."""
    wait_for(lambda: control.call("stats")["stats"]["ticks_in"] == ticks and not server.pipeline.engine.busy)


def test_streams_sorts_and_limits_at_the_service(checkpoint, capsys) -> None:
    """`sort` and `limit` on the op (and --sort, --limit on the CLI): the reply holds the first N of the order and
    says how many streams there are; the most idle first, the most ticks first, by name as ever."""
    import time

    with live_server(checkpoint) as (server, push), ControlClient(server.endpoints["control"]) as control:
        now = time.time_ns()
        push.send(encode(_trades("OLD", 1, now)))
        _settled(server, control, 1)
        wait_for(lambda: control.call("streams", streams=["OLD"])["streams"]["OLD"]["idle_s"] >= 0.2)
        push.send(encode(_trades("BUSY", 6, now) + _trades("MID", 3, now) + _trades("ANEW", 2, now)))
        _settled(server, control, 12)
        by_ticks = control.call("streams", sort="ticks", limit=2)
        assert list(by_ticks["streams"]) == ["BUSY", "MID"], by_ticks
        assert by_ticks["matched"] == 4 and by_ticks["truncated"] is True
        assert list(control.call("streams", sort="idle", limit=1)["streams"]) == ["OLD"]
        assert list(control.call("streams", sort="name", limit=3)["streams"]) == ["ANEW", "BUSY", "MID"]
        # the names given, in the order asked for, a never-seen one last
        assert list(control.call("streams", streams=["NEVER", "MID", "BUSY"], sort="ticks")["streams"]) == \
            ["BUSY", "MID", "NEVER"]
        with pytest.raises(ControlError, match="takes sort as one of name, idle, waiting, ticks"):
            control.call("streams", sort="stalest")
        with pytest.raises(ControlError, match="takes limit as an int >= 1"):
            control.call("streams", limit=0)
        with pytest.raises(ControlError, match="not both"):
            control.call("streams", sort="idle", after="A")
        capsys.readouterr()
        listed = main(["streams", "--sort", "ticks", "--limit", "3", "--control", server.endpoints["control"]])
        assert listed in (0, None)
        out, err = capsys.readouterr()
        assert [line.split("\t")[0] for line in out.splitlines()] == ["BUSY", "MID", "ANEW"], out
        assert "the first 3 of 4 streams by ticks" in err, err


def test_forget_takes_several_names_and_a_glob_only_when_asked(checkpoint, capsys) -> None:
    """`forget A B C`: every name known, or none dropped; a pattern is a name unless --glob says it is one (so
    `forget 'FG001*'` cannot drop a universe by a slip), --dry-run says how many it would drop, and --glob drops
    every stream held that it matches, saying how many."""
    import time

    universe = [f"FG00{i}" for i in (100, 101, 102, 103, 200, 201)]
    with live_server(checkpoint) as (server, push), ControlClient(server.endpoints["control"]) as control:
        now = time.time_ns()
        push.send(encode([tick for name in universe for tick in _trades(name, 2, now)]))
        _settled(server, control, 2 * len(universe))
        endpoint = ["--control", server.endpoints["control"]]
        held = lambda: sorted(name for name, entry in control.call("streams")["streams"].items() if entry)  # noqa
        capsys.readouterr()
        assert main(["forget", "FG001*", *endpoint]) not in (0, None)
        assert "give --glob" in capsys.readouterr().err
        assert main(["forget", "FG00200", "FG00999", *endpoint]) not in (0, None)  # a typo among them: none goes
        assert "1 of the 2 streams given are not known" in capsys.readouterr().err
        assert held() == universe
        # one stream named beside a pattern or a list: refused, none dropped (review406 #3: the pattern dropped all)
        for wider in ({"pattern": "FG*"}, {"streams": ["FG00201"]}):
            with pytest.raises(ControlError, match=r'takes one of "stream", "streams" or "pattern", not "stream" '):
                control.call("forget", stream="FG00200", **wider)
        assert held() == universe
        assert main(["forget", "--glob", "FG001*", "--dry-run", *endpoint]) in (0, None)
        assert "would forget 4 streams matching \"FG001*\"" in capsys.readouterr().out
        assert held() == universe
        assert main(["forget", "--glob", "FG001*", *endpoint]) in (0, None)
        out = capsys.readouterr().out
        assert out.startswith("forgot 4 streams matching \"FG001*\" (\"FG00100\"") and "their 8 ticks'" in out, out
        assert held() == ["FG00200", "FG00201"]
        reply = control.call("forget", streams=["FG00200", "FG00201"])
        assert (reply["forgotten"], reply["ticks"], reply["remaining"]) == (2, 4, 0), reply
        assert held() == []
        with pytest.raises(ControlError, match="no stream held matches"):
            control.call("forget", pattern="FG*")
