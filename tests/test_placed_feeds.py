"""A feed placed by `streams` (drain; its messages under the tag the reply gives) takes no tick twice when the
killed feed's last messages are read after the placing reply (engine/service/placed_feeds.py): what the kernels'
buffers or ZeroMQ's I/O thread still held of the dead feed's connection is read late on a loaded machine
(tests/test_feed_rerun.py held 2,004 ticks of a 2,000-tick stream at load 30 to 80). A message read late and a
message sent late are one thing to the engine, so here the "killed" feed's last message is sent after the placing
reply, on its open connection: the race, made certain."""

from __future__ import annotations

import pytest

from test_feed_resume_counts import checkpoint, server  # noqa: F401  (fixtures: the tiny model served unlogged)
from test_server import wait_for
from connectors.feed import FeedClient
from connectors.feed_stats import FeedStats
from connectors.ticks import trade
from engine.service.client import ControlClient
from engine.service.feed_resume import ControlFeedResume

TS = 1_700_000_000_000_000_000
EACH_TS = 4  # ticks of a stream stamped alike (a 5 ms clock): a tick group's ticks at the last `ts` are accepted
OLD = "feed/111.aaaa"


def group(stream: str, k: int) -> list[dict]:
    """The k-th message of a feed of ``stream``: EACH_TS trades stamped alike, the k-th 5 ms step."""
    return [{"stream": stream, "ts": TS + k * 5_000_000, "price": 100.0 + 0.01 * (k % 7 + i), "size": 1.0 + i}
            for i in range(EACH_TS)]


def sent(client: FeedClient, control: ControlClient, messages: list[list[dict]]) -> None:
    """``messages`` sent, and read by the engine (its ingest count grown by as many)."""
    before = control.call("stats")["stats"]["ingest_messages"]
    for message in messages:
        client.send(message)
    wait_for(lambda: control.call("stats")["stats"]["ingest_messages"] == before + len(messages), timeout_s=60)


def held(control: ControlClient, stream: str) -> int:
    return control.call("streams", streams=[stream])["streams"][stream]["ticks"]


@pytest.mark.parametrize("late_after_new", [False, True], ids=["before-its-first-tick", "after-its-first-tick"])
def test_the_killed_feeds_message_read_after_the_placing_reply_is_not_taken_twice(server, late_after_new) -> None:
    """The killed feed (OLD) sent groups 0..5 of AAA; the engine had read 0..4 when the new feed (NEW) asked where
    to go on, and reads 5 after the reply: NEW, placed after 0..4, sends 5 and 6. Whichever comes first, group 5's
    ticks are taken once: NEW's copy left out where OLD's was read first, OLD's late one where NEW's was. A feed of
    another stream read before the placement (BBB) goes on untouched."""
    control_at = server.endpoints["control"]
    with ControlClient(control_at, timeout_s=30) as control, \
            FeedClient(server.endpoints["ingest"], tag=OLD) as old, \
            FeedClient(server.endpoints["ingest"], tag="feed/333.cccc") as other:
        sent(old, control, [group("AAA", k) for k in range(5)])
        sent(other, control, [group("BBB", 0)])
        placed = control.call("streams", streams=None, drain=True)
        assert placed["streams"]["AAA"]["ticks"] == 5 * EACH_TS
        assert placed["streams"]["AAA"]["fed_by"] == OLD  # (review411 #10: the feed that sent its last tick, named)
        with FeedClient(server.endpoints["ingest"], tag=placed["tag"]) as new:
            if late_after_new:
                sent(new, control, [group("AAA", 5)])
                sent(old, control, [group("AAA", 5)])  # (read late: past NEW's own copy)
            else:
                sent(old, control, [group("AAA", 5)])  # (read late: before NEW's first tick)
                sent(new, control, [group("AAA", 5)])
            sent(new, control, [group("AAA", 6)])
        sent(other, control, [group("BBB", 1)])
        stats = control.call("stats")["stats"]
        assert held(control, "AAA") == 7 * EACH_TS, "a tick group of the killed feed taken twice"
        assert held(control, "BBB") == 2 * EACH_TS
        assert stats["placing_duplicates"] == EACH_TS
        assert stats["repeats_taken"] == 0
        entry = control.call("streams", streams=["AAA"])["streams"]["AAA"]
        assert entry["fed_by"] == placed["tag"]
        # the killed feed's late copy, left out for the placed feed's: said to it, had it lived (review411 #10)
        assert entry.get("superseded") == ({OLD: {"by": placed["tag"], "ticks": EACH_TS}} if late_after_new else None)
        assert not any(stats["rejected"].values()), stats["rejected"]  # (none refused as ts_backwards either)


def test_a_placed_feed_sends_what_no_feed_sent_before_it(server) -> None:
    """Placed with nothing read late, a feed's ticks all go in (no tick of it left out), the streams new to the
    engine too; each placing reply gives a tag of its own, and a `streams` that places nothing gives none."""
    with ControlClient(server.endpoints["control"], timeout_s=30) as control, \
            FeedClient(server.endpoints["ingest"], tag=OLD) as old:
        sent(old, control, [group("AAA", k) for k in range(3)])
        tag = control.call("streams", streams=None, drain=True)["tag"]
        with FeedClient(server.endpoints["ingest"], tag=tag) as new:
            sent(new, control, [group("AAA", 3), group("CCC", 0), group("AAA", 4), group("CCC", 1)])
        assert (held(control, "AAA"), held(control, "CCC")) == (5 * EACH_TS, 2 * EACH_TS)
        assert control.call("stats")["stats"]["placing_duplicates"] == 0
        assert control.call("streams", streams=None, drain=True)["tag"] not in (tag, OLD)
        assert "tag" not in control.call("streams", streams=None)


def test_a_feed_whose_ticks_are_left_out_for_a_feed_placed_after_it_is_told_and_counts_them(server, capsys) -> None:
    """review411 #10: two feeds of one stream started together. Once the one placed second sent the stream, the
    first one's ticks of it were left out (placing_duplicates), and it was told nothing: it waited for them and
    called them lost. `streams` says them now (`superseded`), and the feed warns, naming the other feed, and counts
    them as seen."""
    control_at = server.endpoints["control"]
    resume = ControlFeedResume(lambda: ControlClient(control_at, timeout_s=30), confirm_every_s=0)
    ticks = {k: [trade("VEN", TS + k * 5_000_000 + i, 100.0, 1.0, "buy") for i in range(EACH_TS)] for k in (0, 2, 3)}
    try:
        with ControlClient(control_at, timeout_s=30) as control, \
                FeedClient(server.endpoints["ingest"], tag=resume.tag) as first:
            sent(first, control, [[t.to_wire() for t in ticks[0]]])
            resume.sent(ticks[0], {})
            second = control.call("streams", streams=None, drain=True)["tag"]  # placed after the first began
            with FeedClient(server.endpoints["ingest"], tag=second) as later:
                sent(later, control, [group("VEN", 1)])
            sent(first, control, [[t.to_wire() for t in ticks[k]] for k in (2, 3)])  # left out
            resume.sent(ticks[2] + ticks[3], {})
            entry = control.call("streams", streams=["VEN"])["streams"]["VEN"]
            assert entry["superseded"] == {resume.tag: {"by": second, "ticks": 2 * EACH_TS}} and entry["ticks"] == 8
            assert resume.unconfirmed({}) == 0
            assert resume.superseded_ticks == 2 * EACH_TS  # (and in its summary: review430 #11)
    finally:
        resume.close()
    err = capsys.readouterr().err
    assert f"warning: stream VEN: the engine leaves this feed's ticks of it out ({2 * EACH_TS} so far), neither " \
           f"taken nor refused: another feed ({second}) placed itself after this one began" in err, err


def test_a_placed_feeds_ticks_left_out_as_sent_twice_are_counted_in_its_summary(server) -> None:
    """review430 #11: trades and quotes of one stream fed by two `feed replay`s at once. The other feed, live, went
    on sending after this one was placed, so this one's first ticks were left out as sent twice (they were its own):
    counted in no feed's summary. `streams` says them now (`sent_twice`), and the feed's summary counts them."""
    control_at = server.endpoints["control"]
    with ControlClient(control_at, timeout_s=30) as control, \
            FeedClient(server.endpoints["ingest"], tag="feed/444.dddd") as live:
        sent(live, control, [group("TWO", 0)])
        resume = ControlFeedResume(lambda: ControlClient(control_at, timeout_s=30), confirm_every_s=0)  # placed
        try:
            sent(live, control, [group("TWO", 1)])  # taken after the placement: the placed feed's first 4 go
            mine = [trade("TWO", TS + 2 * 5_000_000 + i, 101.0, 1.0, "sell") for i in range(EACH_TS)]
            with FeedClient(server.endpoints["ingest"], tag=resume.tag) as placed:
                sent(placed, control, [[t.to_wire() for t in mine]])
            resume.sent(mine, {})
            entry = control.call("streams", streams=["TWO"])["streams"]["TWO"]
            assert entry["sent_twice"] == {resume.tag: EACH_TS} and entry["ticks"] == 2 * EACH_TS
            assert resume.unconfirmed({}) == 0 and resume.sent_twice_ticks == EACH_TS
        finally:
            resume.close()
    said = FeedStats(EACH_TS, 1, 0.1, rejected={}, sent_twice=resume.sent_twice_ticks).summary()
    assert f"; {EACH_TS} ticks left out by the engine as sent twice, as many as it took of these streams" in said
