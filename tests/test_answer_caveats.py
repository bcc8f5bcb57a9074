"""Published answers and `ask` replies carry a caveat where the service already knows the model is out of its range
on a stream (review325 #9): its question saturated there, or its answers scoring worse than the stream's own class
frequencies, decided as `flashtick scores` decides it. A real server on 127.0.0.1 ephemeral ports with raw pyzmq
and msgpack clients (wire_client.py), and live scores fed real answers."""

from __future__ import annotations

import msgpack

from conftest import serving, tiny_tick_checkpoint
from connectors.builtin import load_builtin_codec
from connectors.ticks import Tick
from engine.service.answer_caveats import SATURATED_QUESTION, WORSE_THAN_PRIOR, skill_caveats
from engine.service.cli import main
from engine.service.config import ServiceConfig
from engine.service.live_scores import LiveScores
from engine.service.untrained_tokens import UNTRAINED_TOKEN, UntrainedTokens, never_trained
from queries.cache import Answer
from queries.yaml_loader import load_queries
from wire_client import T0, Control, Sub, push_socket, trade, wait_stats

MS = 1_000_000
TICKS = 120  # past volatility_50's horizon: the first answers are scored before the last ones are published
PER_MESSAGE = 10
# a card's line naming a token its model never trained on, as the built-in model's TRAINING.md names `event:trade`
NEVER_TRAINED = "- Never trained: `event:trade` (a trade without a side): send `side` where the venue has it\n"


def _prices(stream: str) -> list[float]:
    """HOT jumps 20% a tick (every window's volatility in the top bucket: saturated); CALM moves 0.1 bps a tick."""
    return [100.0 + 20.0 * (k % 2) if stream == "HOT" else 1000.0 + 0.01 * (k % 2) for k in range(TICKS)]


def test_a_saturated_question_is_said_on_its_streams_published_answers_and_asks(tmp_path, capsys) -> None:
    """And (review410 #1) a stream whose trades come without a side, a token its model's card says it never trained
    on: its published answers, an ask of it and `health` carry the untrained_token caveat, and `feed replay`, which
    sent them, says it; the sided streams carry none."""
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  - {name: vol, streams: ['*'], question: volatility_50, kind: choice,"
                       " trigger: batch}\n")
    (checkpoint := tiny_tick_checkpoint(tmp_path / "tick")).joinpath("TRAINING.md").write_text(NEVER_TRAINED)
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "queries": str(queries),
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "limits": {"heartbeat_s": 0.1}})
    with serving(config) as srv:
        ctl, feed = Control(srv.endpoints["control"]), push_socket(srv.endpoints["ingest"])
        answers = Sub(srv.endpoints["answers"], ["vol/"])
        try:
            (tmp_path / "noside.csv").write_text("ts,stream,price,size\n" + "".join(
                f"{T0 + k * MS},NOSIDE,50.0,1\n" for k in range(PER_MESSAGE)))
            assert main(["feed", "replay", str(tmp_path / "noside.csv"), "--endpoint", srv.endpoints["ingest"],
                         "--control", srv.endpoints["control"], "--answers", srv.endpoints["answers"]]) == 0
            fed = capsys.readouterr().err
            for start in range(0, TICKS, PER_MESSAGE):
                for stream in ("HOT", "CALM"):
                    feed.send(msgpack.packb([trade(stream, T0 + k * MS, price, 1.0, side="buy")
                                             for k, price in enumerate(_prices(stream)) if start <= k
                                             < start + PER_MESSAGE]))
            got = answers.until(lambda g: sum(p["version"] == TICKS for _, p in g) == 2, timeout_s=120)
            scores = wait_stats(ctl, lambda st: st["scores"].get("vol", {}).get("saturated_streams") == 1)["scores"]
            last = {p["stream"]: p for _, p in got if p["version"] == TICKS}
            asked = {stream: ctl.ok("ask", stream=stream, query="vol", max_stale_ticks=0)
                     for stream in [*last, "NOSIDE"]}
            unsided = [p for _, p in got if p["stream"] == "NOSIDE"]
            health = ctl.ok("health")
        finally:
            for sock in (ctl, feed, answers):
                sock.close()
    assert "HOT" in scores["vol"]["saturated_why"]  # what `flashtick scores` says, and now the answers too
    (caveat,) = last["HOT"]["caveats"]
    assert caveat["kind"] == SATURATED_QUESTION and caveat["text"].startswith("on HOT, volatility_50 is saturated")
    assert "caveats" not in last["CALM"], last["CALM"]
    assert [c for c in asked["HOT"]["caveats"] if c["kind"] == SATURATED_QUESTION] == [caveat]
    assert not [c for c in asked["CALM"]["caveats"] if c["kind"] == SATURATED_QUESTION]
    untrained = {"kind": UNTRAINED_TOKEN, "text": 'stream "NOSIDE" sent a token this model never met in training '
                                                  "(TRAINING.md): event:trade (a trade without a side): send `side` "
                                                  "where the venue has it"}
    assert unsided and all(untrained in p["caveats"] for p in unsided), unsided
    assert untrained in asked["NOSIDE"]["caveats"] and untrained not in asked["HOT"]["caveats"]
    assert [c["text"] for c in health["caveats"] if c["kind"] == UNTRAINED_TOKEN] == [untrained["text"]]
    assert f"flashtick feed replay: warning: the engine says: {untrained['text']}\n" in fed, fed


def test_the_builtin_models_card_names_the_token_it_never_trained_on() -> None:
    """review410 #1: every trade the built-in model trained on carried its side, so `event:trade` (a trade without
    one) is untrained; its card says so, with what a user sees and does, and nothing else is named."""
    codec = load_builtin_codec()
    (said,) = never_trained(None, codec).items()
    assert said[0] == codec.token("event", "trade") and said[1].startswith(
        "event:trade (a trade without a side: `side` absent or nil): every trade this model trained on carried")
    assert "`surprise` reads ~25-42 nats a tick" in said[1] and "flashtick train FILES --out DIR" in said[1]


def test_an_auctions_side_less_print_among_sided_trades_is_no_side_less_stream() -> None:
    """review433 #4: one closing-auction print without a side, after 2,038 sided trades, marked the whole stream
    as sending a token never met in training, said and carried on its every answer; a side-less feed still is."""
    codec = load_builtin_codec()
    buy, side_less = codec.token("event", "buy"), codec.token("event", "trade")
    said: list[str] = []
    untrained = UntrainedTokens(None, codec, said.append)
    for _ in range(2038):
        untrained.accepted("0700.HK", [buy])
    untrained.accepted("0700.HK", [side_less])  # the 16:08 closing auction
    assert said == [] and untrained.caveat("0700.HK") == [] and untrained.held_caveat() == []
    untrained.accepted("7203.T", [side_less])  # a side-less feed: its caveat from its first tick, said at its 10th
    assert untrained.caveat("7203.T") and said == []
    for _ in range(9):
        untrained.accepted("7203.T", [side_less])
    assert len(said) == 1 and said[0].startswith('stream "7203.T" sent a token this model never met in training')


def test_answers_worse_than_the_streams_class_frequencies_get_a_caveat_once_enough_are_scored() -> None:
    """As `scores`' worse_than_prior names a stream: 100 answers scored or more, Brier above the class frequencies'.
    An ad-hoc ask of the same question is read by the standing query's scores."""
    codec = load_builtin_codec()
    spec = load_queries("queries:\n  - {name: d5, streams: ['*'], question: direction_5, kind: choice}\n",
                        questions=codec.questions)[0]
    scores = LiveScores(codec.questions, committed=lambda stream: 0)
    says = {"WRONG": {"down": 0.8, "flat": 0.1, "up": 0.1}, "RIGHT": {"down": 0.0, "flat": 0.0, "up": 1.0}}
    seen_at = None
    for i in range(1, 201):
        for stream, probs in says.items():
            scores.observe(Tick(stream, 10**9 + i, "trade", price=100.0 + 0.01 * i, size=1.0, side="buy"))
            value = {"answer": max(probs, key=probs.get), "probs": probs}
            scores.expect(Answer("d5", stream, f"d5/{stream}/", i, i, 10**9 + i, 0, value, "m"), spec)
        if seen_at is None and skill_caveats(scores, ["d5"], "WRONG"):
            seen_at = scores.streams["WRONG"].scores["d5"].scored
    assert seen_at == 100
    (caveat,) = skill_caveats(scores, ["direction_5", "d5"], "WRONG")  # (no scores of its own: the standing one's)
    assert caveat["kind"] == WORSE_THAN_PRIOR and caveat["text"].startswith(
        "on WRONG, the answers of d5 scored worse than the stream's own class frequencies (Brier 1.460 vs ")
    assert skill_caveats(scores, ["d5"], "RIGHT") == [] and skill_caveats(scores, ["d5"], "NEVER") == []
