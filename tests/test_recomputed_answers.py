"""An answer computed again by an `ask` against the one published for the same (stream, version) (review376 #9: they
differed by ~4e-7). The published one's probe ran in the forward that took the tick, its rows in one matrix with the
tick's tokens; an ask's runs in a forward of its own, a matrix of another shape, whose float32 sums round otherwise.
So the two agree to float32 rounding (the bound docs/wire-protocol.md states, as for a backtest against a live run),
and `max_stale_ticks: 0` gives the published value itself. Real sockets on 127.0.0.1, the seeded tiny tick model."""

from __future__ import annotations

import msgpack

from wire_client import T0, fresh_stream, trade
from wire_server import clients, server  # noqa: F401 (fixtures)

PROBS_TOLERANCE = 5e-6  # docs/wire-protocol.md, `value`: a recomputed answer's probabilities


def test_an_ask_computed_again_agrees_with_the_published_answer_to_float_rounding(clients) -> None:
    control, sub, push = clients
    ctl, answers = control(), sub("dir/")
    stream = fresh_stream("RECOMP")
    feed = push()
    for message in range(4):  # four messages of 30 ticks: four answers, each computed in its ingest forward
        feed.send(msgpack.packb([trade(stream, T0 + (message * 30 + k) * 10**6, 100 + (k * 7 % 13) * 0.25,
                                       1 + k % 3, side="buy" if k % 2 else "sell") for k in range(30)]))
    got = answers.until(lambda g: any(p["stream"] == stream and p["version"] == 120 for _, p in g))
    published = next(p for _, p in got if p["stream"] == stream and p["version"] == 120)
    cached = ctl.ok("ask", stream=stream, query="dir", max_stale_ticks=0)["answer"]
    assert (cached["seq"], cached["value"]) == (published["seq"], published["value"])  # the published one, exactly
    computed = ctl.ok("ask", stream=stream, query="dir")["answer"]
    assert (computed["seq"], computed["version"], computed["data_ts"]) == (0, 120, published["data_ts"])
    for key in ("probs", "model_probs"):
        if key in published["value"]:
            for label, p in published["value"][key].items():
                assert abs(computed["value"][key][label] - p) <= PROBS_TOLERANCE, (key, label)
