"""A flood of new stream names (review309 #2): one wire message may open at most
`limits.max_new_streams_per_message` new streams and all messages `limits.max_new_streams_per_s` a second; the rest
are refused as `stream_refused` with the limit named, counted, while a stream already held keeps ticking. A feed that
starts with its whole universe (2,500 names in one message) is taken whole under the defaults, and so is an options
chain's first snapshot (review321 #2)."""

from __future__ import annotations

import json
import time

import msgpack
import pytest
import zmq

from conftest import serving, tiny_tick_checkpoint
from connectors.passed_over import MAX_UNHELD_STREAMS
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.config import ServiceConfig
from engine.service.new_stream_budget import NewStreamBudget
from engine.service.rejections import MAX_REFUSED_STREAMS_KEPT
from engine.service.server import REJECTS_TOPIC

TS = 1_723_161_254_087_896_568


# the tests share the module's tiny checkpoint (read only): `--dist loadgroup` keeps them on one worker
pytestmark = pytest.mark.xdist_group("test_new_stream_flood")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """The tiny tick model every service here serves (each test built the same one before)."""
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("new_stream_flood"))


def config(checkpoint, limits: dict) -> ServiceConfig:
    """A service of the tiny model on ephemeral ports. Its stop is no test's concern here: a drain_s of 0.2 s, not
    the default 7 s of computing what was accepted (25,000 new streams' first forwards: the options chain's stop
    computed for 6.1 s, after every check, where an idle core spends it all on forwards)."""
    return ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)},
        "kv": {"cells": 65536, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "limits": {"heartbeat_s": 0.1, "max_ts_ahead_s": None, "drain_s": 0.2, **limits},
    })


def stats(server) -> dict:
    with ControlClient(server.endpoints["control"]) as control:
        return control.call("stats")["stats"]


def until_read(server, messages: int) -> dict:
    """Stats once the service has read `messages` ingest messages (a hang is caught by the bound, not timed)."""
    deadline = time.monotonic() + 120
    while (now := stats(server))["ingest_messages"] < messages and time.monotonic() < deadline:
        time.sleep(0.05)
    return now


def push(server) -> zmq.Socket:
    sock = zmq.Context.instance().socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 1000)
    sock.connect(server.endpoints["ingest"])
    return sock


def trade(stream: str, ts: int) -> dict:
    return {"stream": stream, "ts": ts, "price": 100.0, "size": 1.0}


def test_one_message_opens_at_most_its_share_of_new_streams(checkpoint) -> None:
    limits = {"max_new_streams_per_message": 50, "max_new_streams_per_s": 1e6}
    with serving(config(checkpoint, limits)) as server, push(server) as feed, \
            AnswerSubscriber(server.endpoints["answers"], [REJECTS_TOPIC]) as rejects:
        rejects.wait_ready(timeout_s=60)  # PUB drops what it publishes before the subscription reaches it
        feed.send(msgpack.packb([trade("HELD", TS)]))
        until_read(server, 1)
        flood = [trade(f"M{i}", TS + i) for i in range(200)] + [trade("HELD", TS + 1_000)]
        feed.send(msgpack.packb(flood))
        after = until_read(server, 2)
        assert after["ticks_in"] == 1 + 50 + 1  # the held stream's tick went in behind the flood
        assert after["rejected"].get("stream_refused") == 150
        said = rejects.recv(timeout_s=30)
        assert said is not None and "limits.max_new_streams_per_message" in str(said[1])
        with ControlClient(server.endpoints["control"]) as control:
            refused = control.call("streams", streams=["M60"])
        assert refused["streams"]["M60"] is None and "max_new_streams_per_message" in str(refused["refused"]["M60"])
        feed.send(msgpack.packb([trade(f"M{i}", TS + 10_000 + i) for i in range(50, 100)]))  # sent again: taken
        assert until_read(server, 3)["ticks_in"] == 1 + 50 + 1 + 50


def test_a_feed_starting_with_2500_names_in_one_message_is_taken_whole(checkpoint) -> None:
    with serving(config(checkpoint, {})) as server, push(server) as feed:
        feed.send(msgpack.packb([trade(f"EQ{i:04d}", TS + i) for i in range(2500)]))
        after = until_read(server, 1)
        assert after["ticks_in"] == 2500 and "stream_refused" not in after["rejected"]


def test_the_per_second_budget_refills_at_its_rate() -> None:
    now = [0.0]
    budget = NewStreamBudget(per_message=1000, per_s=10, clock=lambda: now[0])
    budget.message_started()
    assert [budget.refusal(f"S{i}") is None for i in range(12)] == [True] * 10 + [False] * 2
    assert "limits.max_new_streams_per_s" in budget.refusal("S10")  # refused alike for each of its ticks
    budget.message_started()
    now[0] = 0.5  # half a second: five more
    assert sum(budget.refusal(f"T{i}") is None for i in range(8)) == 5
    now[0] = 100.0  # a long quiet: a second's worth, no more
    budget.message_started()
    assert sum(budget.refusal(f"U{i}") is None for i in range(30)) == 10
    assert budget.refused_streams == 2 + 3 + 20


def test_a_flood_of_refused_names_keeps_a_bounded_memory_of_the_most_recent(checkpoint) -> None:
    """Every refused tick of a stream with no accepted one was remembered (the count a resuming feed's `at_last_ts`
    needs, connectors/passed_over.py) for the first 100,000 names: ~22 MB for a flood of 200k names, and none for a
    later name. Now the most recent MAX_UNHELD_STREAMS are: a recent name's refused tick is still counted when its
    tick at the same ts is accepted, the oldest is forgotten (counted as such), and the `streams` op still says why a
    recent name was refused (MAX_REFUSED_STREAMS_KEPT, the most recent too) while counting those that fell out."""
    flood = MAX_UNHELD_STREAMS + 2_000
    with serving(config(checkpoint, {"max_new_streams_per_message": 10**6, "max_new_streams_per_s": 1e9})) as server, \
            push(server) as feed:
        sent = 0
        for first in range(0, flood, 5_000):  # a zero price: refused (nonpositive_price), never held
            feed.send(msgpack.packb([{"stream": f"BAD{i}", "ts": TS + i, "price": 0.0, "size": 1.0}
                                     for i in range(first, min(first + 5_000, flood))]))
            sent += 1
        after = until_read(server, sent)
        assert after["rejected"].get("nonpositive_price") == flood and after["ticks_in"] == 0
        passed_over = server.pipeline.encoders.passed_over
        assert len(passed_over) == MAX_UNHELD_STREAMS and passed_over.forgotten == flood - MAX_UNHELD_STREAMS
        oldest, recent = "BAD0", f"BAD{flood - 1}"
        feed.send(msgpack.packb([trade(oldest, TS), trade(recent, TS + flood - 1)]))  # their ts again, good now
        assert until_read(server, sent + 1)["ticks_in"] == 2
        with ControlClient(server.endpoints["control"]) as control:
            placed = control.call("streams", streams=[oldest, recent])["streams"]
            assert placed[recent]["at_last_ts"] == 2  # the refused tick stamped the same ts, and the accepted one
            assert placed[oldest]["at_last_ts"] == 1  # forgotten: a feed resuming there may send its tick again
            refused = control.call("streams", streams=[f"BAD{flood - 2}", "BAD1"])
            listing = control.call("streams")
        assert "nonpositive_price" in str(refused["refused"][f"BAD{flood - 2}"]) and "BAD1" not in refused["refused"]
        assert listing["refused_more"] == flood - MAX_REFUSED_STREAMS_KEPT


def quote(stream: str, ts: int) -> dict:
    return {"stream": stream, "ts": ts, "kind": "quote", "bid": 1.05, "ask": 1.1, "bid_size": 10, "ask_size": 12}


def test_an_options_chains_first_snapshot_is_taken_whole_under_the_defaults(checkpoint) -> None:
    """review321 #2: after an upgrade, one message of 5,000 quotes on 5,000 new streams (an options chain's first
    snapshot) lost 904 of them to the new default of 4,096 (`limits.max_new_streams_per_message`), which the release
    before took whole. Under the defaults now, that message is taken, and so is an SPX-sized chain, 20,000
    contracts more, in the next messages of the same second (each within `limits.max_message_bytes`)."""
    from engine.service.config import ServiceConfig as Defaults

    limits = Defaults().limits
    assert limits.max_new_streams_per_message >= 5_000 and limits.max_new_streams_per_s >= 25_000
    assert Defaults().scheduler.max_streams >= 25_000
    chain = [quote(f"SPXW 261218C{i:05d}", TS + i) for i in range(25_000)]
    messages = [msgpack.packb(chain[:5_000])] + [msgpack.packb(chain[i : i + 10_000]) for i in (5_000, 15_000)]
    assert all(len(m) <= limits.max_message_bytes for m in messages)
    with serving(config(checkpoint, {})) as server, push(server) as feed:
        for message in messages:
            feed.send(message)
        after = until_read(server, 3)
        assert after["ticks_in"] == 25_000 and "stream_refused" not in after["rejected"], after["rejected"]


def test_a_refused_stream_forgotten_past_the_memory_is_said_refused_earlier_not_never_seen(checkpoint, capsys) -> None:
    """review336 #8: 3 crossed quotes of FIRSTOPT, then one each of more names than the 1,024 refusals remembered,
    then LASTOPT's: `streams FIRSTOPT` printed `never seen` and `ask FIRSTOPT` "has sent no data", sending the
    operator to a feed that did send. A refusal that fell out of the memory is still known as one (a bounded filter
    of the names forgotten), while a name never sent is still said never seen, without a hint of refusals."""
    from engine.service.cli import main
    from engine.service.forgotten_refusals import FILTER_BYTES

    def crossed(stream: str, ts: int) -> dict:
        return {"stream": stream, "ts": ts, "bid": 10.0, "ask": 9.0}

    names = 1_500  # in 3 messages: with FIRSTOPT and LASTOPT, 478 past the 1,024 remembered
    with serving(config(checkpoint, {})) as server, push(server) as feed:
        control = ("--control", server.endpoints["control"])
        feed.send(msgpack.packb([crossed("FIRSTOPT", TS + i) for i in range(3)]))
        for first in range(0, names, 500):
            feed.send(msgpack.packb([crossed(f"OPT{i:05d}", TS + i) for i in range(first, first + 500)]))
        feed.send(msgpack.packb([crossed("LASTOPT", TS + i) for i in range(2)]))
        assert until_read(server, 2 + names // 500)["ticks_in"] == 0
        capsys.readouterr()
        assert main(["streams", "FIRSTOPT", "LASTOPT", f"OPT{names - 1:05d}", "NEVERSENT", *control]) == 1
        out, err = capsys.readouterr()
        assert out.splitlines() == ["FIRSTOPT\trefused earlier (no longer remembered)", "LASTOPT\trefused (2 ticks)",
                                    f"OPT{names - 1:05d}\trefused (1 ticks)", "NEVERSENT\tnever seen"], out
        assert 'flashtick streams: FIRSTOPT refused earlier: stream "FIRSTOPT" has no accepted tick: it was ' \
               "refused earlier" in err and f"up to {names + 2 - MAX_REFUSED_STREAMS_KEPT:,} more fell out" in err, err
        assert main(["streams", "FIRSTOPT", "--json", *control]) == 1
        said = json.loads(capsys.readouterr().out)
        assert said["streams"] == {"FIRSTOPT": None}
        assert "it was refused earlier" in said["refused_forgotten"]["FIRSTOPT"]["error"], said
        assert main(["ask", "FIRSTOPT", "direction_5", *control]) == 2
        err = capsys.readouterr().err
        assert "has no accepted tick: it was refused earlier" in err and "has sent no data" not in err, err
        assert main(["ask", "NEVERSENT", "direction_5", *control]) == 2
        err = capsys.readouterr().err
        assert 'stream "NEVERSENT" has sent no data' in err and "refused" not in err, err
        with ControlClient(server.endpoints["control"]) as raw:
            raw.call("register", yaml="queries: [{name: dir5, streams: ['*'], question: direction_5, kind: choice}]")
            got = raw.call("get", query="dir5", stream="FIRSTOPT")
        assert got["answer"] is None and "it was refused earlier" in got["refused"], got
        # the memory stays bounded: one filter of fixed size beside the 1,024 names, however many are forgotten
        assert len(server._forgotten_refusals._bits) == FILTER_BYTES and len(server._refused_streams) == 1024


def test_the_filter_of_forgotten_names_misses_none_and_stays_its_size() -> None:
    """No forgotten name is ever said never seen (a Bloom filter has no false negatives); its size does not grow
    with the names; its false match rate, said once it is not negligible, grows as it fills."""
    from engine.service.forgotten_refusals import ForgottenRefusals

    forgotten = ForgottenRefusals(size_bytes=4096)  # 32,768 bits: filled by a few thousand names
    assert "A" not in forgotten and forgotten.false_match == 0.0
    rates = []
    for batch in range(4):
        for i in range(batch * 1000, (batch + 1) * 1000):
            forgotten.add(f"OPT{i}")
        rates.append(forgotten.false_match)
        assert all(f"OPT{i}" in forgotten for i in range((batch + 1) * 1000))
        assert len(forgotten._bits) == 4096
    assert rates == sorted(rates) and rates[-1] > 1e-3
    never = sum(f"NEVER{i}" in forgotten for i in range(20_000)) / 20_000
    assert abs(never - rates[-1]) < 0.05, (never, rates[-1])  # the rate said is the rate met
