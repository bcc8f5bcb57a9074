"""The sharded front door (`serve --shards 1`) says what one engine (`serve`) says, on real sockets: the same bad asks
get the same replies (an ask a shard refuses comes back with its reason and words as they are, fix326 #2), and a
message of too many new streams is refused as one engine refuses it, same error and counters (fix326 #6). One
shard: the asks reach a shard, the new streams and the clocks are the front door's (a second shard cost Ray a
worker process)."""

from __future__ import annotations

import time

import msgpack
import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'flashtick[ray]')")

from conftest import serving  # noqa: E402
from test_shards import QUERIES, config  # noqa: E402
from test_shards import checkpoint  # noqa: E402,F401 (the model fixture)
from wire_client import T0, Control, Sub, held_of, push_socket, stats, trade, wait_stats, wait_until  # noqa: E402

# asks a front door cannot refuse alone: each reaches the stream's shard (or the one engine) before it is refused
BAD_ASKS = [
    {"op": "ask", "stream": "R.A", "spec": {"name": "odd", "question": "direction_20", "kind": "choice",
                                            "choices": ["sideways", "up"]}, "id": 1},
    {"op": "ask", "stream": "R.A", "spec": {"name": "rain", "question": "will it rain", "kind": "choice",
                                            "choices": ["yes", "no"]}, "id": 2},
    {"op": "ask", "stream": "R.A", "query": "nope", "id": 3},
    {"op": "ask", "stream": "R.B", "query": "dir", "id": 4},
]
PER_MESSAGE = 2  # limits.max_new_streams_per_message of these services


# tests/conftest.py; the services the tests read are started once: `--dist loadgroup` keeps them on one worker, with
# test_shards' tests (one local Ray instance and one checkpoint for both modules, not one each)
pytestmark = [pytest.mark.usefixtures("local_ray"), pytest.mark.xdist_group("test_shards")]


def said_by(checkpoint, tmp_path, shards: int) -> dict:
    """What a service of ``shards`` shards (0: one engine) says to the bad asks and to a message of one new stream
    past PER_MESSAGE (the replies, the rejections, and the counters that count them), then of two streams stamped
    with the wall clock, one of them 5 s ahead of it (their `streams` entries, a published answer of each, and
    `health`'s warnings). One service answers both: each start of a sharded one costs two Ray actors' processes."""
    queries = tmp_path / f"q{shards}.yaml"
    queries.write_text(QUERIES)
    cfg = config(checkpoint, tmp_path / f"data{shards}", shards, queries,
                 limits={"heartbeat_s": 0.2, "max_new_streams_per_message": PER_MESSAGE},
                 endpoints={"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                            "control": "tcp://127.0.0.1:0", "metrics_port": 0})
    with serving(cfg) as server:
        ctl, feed = Control(server.endpoints["control"]), push_socket(server.endpoints["ingest"])
        rejects = Sub(server.endpoints["answers"], ["_rejects/"])
        answers = None
        try:
            feed.send(msgpack.packb(trade("R.A", T0)))
            wait_until(lambda: (held_of(ctl, "R.A") or {}).get("ticks", 0) >= 1)
            replies = [ctl.raw(msgpack.packb(ask), timeout_s=120) for ask in BAD_ASKS]
            before = stats(ctl)
            flood = [f"NEW.{i}" for i in range(PER_MESSAGE + 1)]
            feed.send(msgpack.packb([trade(stream, T0, size=1.0) for stream in flood]))
            _, rejection = rejects.until(lambda got: len(got) >= 1, timeout_s=120)[0]
            after = wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == PER_MESSAGE, timeout_s=120)
            held = {stream: held_of(ctl, stream) is not None for stream in flood}

            # the clocks: two more new streams (within PER_MESSAGE), stamped now; the streams above are stamped
            # in 2023, behind this machine's clock, so only CLK.AHEAD may be said to run ahead
            answers = Sub(server.endpoints["answers"], ["dir/"])
            now = time.time_ns()
            feed.send(msgpack.packb([trade("CLK.ON", now), trade("CLK.AHEAD", now + 5 * 10**9)]))
            got = answers.until(lambda g: {p["stream"] for _, p in g} >= {"CLK.ON", "CLK.AHEAD"}, timeout_s=120)
            published = {p["stream"]: p for _, p in got}
            clocks_held = {stream: held_of(ctl, stream) for stream in ("CLK.ON", "CLK.AHEAD")}
            warnings = ctl.ok("health").get("warnings", [])
        finally:
            if answers is not None:
                answers.close()
            rejects.close()
            feed.close()
            ctl.close()
    counted = {key: after[key] - before[key] for key in ("ticks_in", "new_streams_refused") if key in after}
    counted["stream_refused"] = after["rejected"].get("stream_refused", 0) - before["rejected"].get("stream_refused", 0)
    counted["refused_streams"] = after["scheduler"]["refused_streams"] - before["scheduler"]["refused_streams"]
    return {"replies": replies, "rejection": rejection, "counted": counted, "held": held,
            "clocks": {"held": clocks_held, "published": published, "warnings": warnings}}


@pytest.fixture(scope="module")
def said(checkpoint, tmp_path_factory, local_ray) -> dict[int, dict]:
    """What one engine (0) and one shard (1) said, each service started once for the module's tests to read."""
    return {shards: said_by(checkpoint, tmp_path_factory.mktemp(f"said{shards}"), shards) for shards in (0, 1)}


def test_one_engine_and_a_sharded_front_door_say_the_same_to_bad_asks_and_to_a_flood_of_new_streams(said) -> None:
    one, sharded = said[0], said[1]
    for ask, alone, front in zip(BAD_ASKS, one["replies"], sharded["replies"]):
        assert alone["ok"] is False and alone == front, (ask, alone, front)
    reasons = [reply["reason"] for reply in one["replies"]]
    assert reasons == ["bad_request", "bad_request", "unknown_query", "unknown_stream"], one["replies"]
    # a shard's refusal was `ask_failed`, its text's JSON quotes stripped: now the engine's own reason and words
    assert 'query "odd": "sideways" is not an answer' in one["replies"][0]["error"], one["replies"][0]

    assert one["rejection"] == sharded["rejection"], (one["rejection"], sharded["rejection"])
    rejection = one["rejection"]
    assert (rejection["reason"], rejection["stream"]) == ("stream_refused", f"NEW.{PER_MESSAGE}"), rejection
    assert "limits.max_new_streams_per_message" in rejection["error"], rejection
    assert one["counted"] == sharded["counted"] == {"ticks_in": PER_MESSAGE, "stream_refused": 1,
                                                    "refused_streams": 1}, (one["counted"], sharded["counted"])
    assert one["held"] == sharded["held"] == {**{f"NEW.{i}": True for i in range(PER_MESSAGE)},
                                              f"NEW.{PER_MESSAGE}": False}


def test_a_sharded_front_door_says_each_streams_clock_offset_as_one_engine_does(said) -> None:
    for said_there in (said[0]["clocks"], said[1]["clocks"]):
        on, ahead = said_there["held"]["CLK.ON"], said_there["held"]["CLK.AHEAD"]
        assert 0 <= on["clock_offset_ms"] < 60_000 and "clock_ahead" not in on, on  # read after it was stamped
        assert -5_000 <= ahead["clock_offset_ms"] < -4_000 and "ahead of this machine's clock" in ahead["clock_ahead"]
        for stream, entry in said_there["held"].items():
            assert said_there["published"][stream]["clock_offset_ms"] == entry["clock_offset_ms"], stream
        assert [(w["stream"], w["kind"]) for w in said_there["warnings"]] == [("CLK.AHEAD", "clock_ahead")], \
            said_there
