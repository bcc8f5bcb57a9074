"""review355 #13: `ingest.seq_scope: feed`, for feeds that number every instrument's messages with one counter (US
SIPs, OPRA channels, TAQ's Sequence Number): gaps and numberings begun again counted per feed (the message's topic
frame), over real sockets; repeats still dropped per stream."""

from __future__ import annotations

import msgpack
import pytest
import zmq

from engine.service.client import ControlClient
from engine.service.config import ConfigError, ServiceConfig
from test_server import checkpoint  # noqa: F401  (the model fixture)
from test_service_limits import live_server, wait_for

T0 = 1_709_908_200_000_000_000


def _channel(first_seq: int, streams: int, rounds: int, skip: set[int] = frozenset(), root: str = "AAPL"
             ) -> list[dict]:
    """A channel's trades, one counter across its ``streams`` instruments (as OPRA numbers a line), minus the
    numbers in ``skip`` (lost on the way)."""
    out, seq = [], first_seq
    for r in range(rounds):
        for s in range(streams):
            if seq not in skip:
                out.append({"stream": f"{root:<6}2612{18 + s:02d}C00150000", "ts": T0 + r * 10**9 + s,
                            "price": 1.5 + r / 100, "size": 1.0, "side": "buy", "seq": seq})
            seq += 1
    return out


def _send(push: zmq.Socket, tag: bytes, ticks: list[dict]) -> None:
    push.send_multipart([tag, msgpack.packb(ticks)])


def _stats(server) -> dict:
    with ControlClient(server.endpoints["control"], timeout_s=60) as control:
        return control.call("stats")["stats"]


def test_a_feed_wide_seq_counts_gaps_per_feed_not_per_stream(checkpoint, capsys) -> None:
    """Two OPRA-style channels, each one counter over 10 contracts x 5 rounds: a stream's own numbers jump by 10,
    which `seq_scope: stream` counts as 40 gaps a channel; `feed` counts only the 2 numbers lost on OPRA-1 (one gap
    each), the tick refused on OPRA-2 (its number received) none, and the whole of OPRA-1 sent again (a line's second
    copy) is 45 duplicates and no gap."""
    lost = {1013, 1027}
    one, two = _channel(1001, 10, 5, skip=lost), _channel(7001, 10, 5, root="MSFT")
    two[20] = {**two[20], "price": -1.0}  # refused (nonpositive_price): its number came all the same
    # per stream: 4 jumps of 10 each, less one where a lost (OPRA-1, twice) or refused (OPRA-2) tick merged two
    for scope, gaps in (("stream", 38 + 39), ("feed", 2)):
        with live_server(checkpoint, ingest={"seq_scope": scope}) as (server, push):
            for chunk in (one[:24], one[24:]):
                _send(push, b"OPRA-1", chunk)
            _send(push, b"OPRA-2", two)
            wait_for(lambda: server.pipeline.ticks_in == 48 + 49)
            _send(push, b"OPRA-1", one)  # the same channel again: every tick a duplicate
            wait_for(lambda: _stats(server)["duplicates"] == 48)
            stats = _stats(server)
            with ControlClient(server.endpoints["control"], timeout_s=60) as control:
                entry = control.call("streams", streams=[one[5]["stream"]])["streams"][one[5]["stream"]]
        assert stats["seq_gaps"] == gaps, (scope, stats)
        assert stats["rejected"] == {"nonpositive_price": 1}
        if scope == "stream":  # each stream's numbers jump by 10: every tick after its first is a "gap"
            assert "seq_scope" not in stats and entry["seq_gaps"] == 4
            continue
        assert stats["seq_missing"] == 2 and stats["seq_restarts"] == 0 and stats["seq_scope"] == "feed"
        assert stats["sequence_feeds"] == {
            "OPRA-1": {"last_seq": 1050, "seq_gaps": 2, "seq_missing": 2, "seq_restarts": 0},
            "OPRA-2": {"last_seq": 7050, "seq_gaps": 0, "seq_missing": 0, "seq_restarts": 0}}
        assert entry["seq_gaps"] == 0 and entry["last_seq"] == one[5]["seq"] + 40  # (its last number: a resume's)
    err = capsys.readouterr().err
    assert 'feed "OPRA-1": a gap in its seq, 1012 -> 1014 (1 missing) at ' in err, err


def test_untagged_messages_are_one_feed_and_the_key_is_checked_by_name(checkpoint) -> None:
    """Messages without a topic frame are the untagged feed (""), a numbering of their own; `seq_scope` takes
    "stream" or "feed", a misspelt key is refused by name."""
    with live_server(checkpoint, ingest={"seq_scope": "feed"}) as (server, push):
        push.send(msgpack.packb(_channel(1, 4, 3, skip={6})))
        wait_for(lambda: server.pipeline.ticks_in == 11)
        stats = _stats(server)
    assert stats["seq_gaps"] == 1 and stats["sequence_feeds"] == {
        "": {"last_seq": 12, "seq_gaps": 1, "seq_missing": 1, "seq_restarts": 0}}
    for section, message in (({"seq_scope": "channel"}, 'ingest.seq_scope must be "stream" or "feed"'),
                             ({"seq_scop": "feed"}, 'unknown key "seq_scop" in section "ingest"')):
        with pytest.raises(ConfigError, match=message):
            ServiceConfig.from_dict({"ingest": section})


def test_a_feeds_late_tick_is_told_as_late_not_dropped_as_a_duplicate(checkpoint) -> None:
    """review376 #3 under `seq_scope: feed`: a number the feed's gap skipped, sent after, was dropped as a duplicate
    of its stream, silently. It meets its stream's ordering guard: stamped before the stream's last tick it is refused
    as `ts_backwards` (to the sender), stamped after it is taken; either way `seq_late` counts it, no duplicate."""
    ticks = _channel(1, 4, 3)  # 12 numbers over 4 contracts, each contract's ticks a second apart
    late_refused, late_taken = ticks[5], ticks[10]  # numbers 6 and 11 come after all of the others
    late_refused_stream_next = ticks[9]  # (6's stream ticks again as number 10, before 6 comes: 6 is then late)
    assert late_refused["stream"] == late_refused_stream_next["stream"]
    first = [t for t in ticks if t not in (late_refused, late_taken)]
    with live_server(checkpoint, ingest={"seq_scope": "feed"}) as (server, push):
        _send(push, b"SIP", first)
        wait_for(lambda: server.pipeline.ticks_in == 10)
        _send(push, b"SIP", [late_refused, late_taken])
        wait_for(lambda: server.pipeline.ticks_in == 11 and server.pipeline.rejected["ts_backwards"] == 1)
        stats = _stats(server)
    assert stats["duplicates"] == 0 and stats["seq_late"] == 2 and stats["rejected"] == {"ts_backwards": 1}
    assert stats["sequence_feeds"]["SIP"] == {"last_seq": 12, "seq_gaps": 2, "seq_missing": 2, "seq_restarts": 0}
