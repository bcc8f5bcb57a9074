"""Answering early: prompt-lookup drafts leave greedy output unchanged (tick model and text model), generate
answers decoded ahead serve asks on a stream that has not moved, and the confidence gate answers from the
cache only when its rule holds."""

from __future__ import annotations

import pytest
import torch

from conftest import serving, tiny_text_checkpoint, tiny_tick_checkpoint
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.client import ControlClient, ControlError
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from queries.speculation import Gate, Lookup, accept_greedy


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"), max_position_embeddings=512)


def tick_pipeline(checkpoint, queries: str) -> TickPipeline:
    pipeline = TickPipeline(ServiceConfig.from_dict({"model": {"path": str(checkpoint)},
                                                     "kv": {"cells": 8192, "block_size": 16}}))
    pipeline.registry.register(queries)
    return pipeline


def ask(pipeline: TickPipeline, name: str, stream: str, draft_from=None):
    spec = pipeline.registry.get(name)
    pipeline.engine.ask(pipeline.flash.job_for(spec, stream, ticket=(name, stream), draft_from=draft_from))
    return next(o.answer for o in pipeline.engine.run_until_idle() if o.job.ticket == (name, stream))


def test_lookup_proposes_what_followed_the_latest_longest_match() -> None:
    lookup = Lookup(max_ngram=3, min_ngram=1, draft=4)
    assert lookup.propose([1, 2, 3, 9, 9, 1, 2, 3, 7, 7, 1, 2, 3], limit=10) == [7, 7, 1, 2]  # latest of 3-gram
    assert lookup.propose([5, 6, 1, 2, 8, 2], limit=10) == [8, 2]  # only the 1-gram [2] recurs
    assert lookup.propose([1, 2, 3, 4], limit=10) == []
    assert lookup.propose([4, 5, 6, 4, 5], limit=1) == [6]


def test_greedy_verification_keeps_the_agreeing_prefix_and_adds_the_models_token() -> None:
    rows = torch.full((4, 10), -5.0)
    for position, token in enumerate([3, 4, 9, 1]):
        rows[position, token] = 5.0  # the model's argmax at each position
    assert accept_greedy(rows, [3, 4, 5])[0] == [3, 4, 9]  # 5 disagrees: the model's 9 instead
    assert accept_greedy(rows, [3, 4, 9])[0] == [3, 4, 9, 1]  # all kept, plus the bonus token
    assert accept_greedy(rows[:1], [])[0] == [3]


GENERATE = """
queries:
  - {name: plain, streams: ["*"], kind: generate, question: direction_20, max_tokens: 24, trigger: on_demand,
     lookup: false}
  - {name: drafted, streams: ["*"], kind: generate, question: direction_20, max_tokens: 24, trigger: on_demand}
"""


def test_drafted_generation_equals_plain_greedy_on_the_tick_model(checkpoint) -> None:
    pipeline = tick_pipeline(checkpoint, GENERATE)
    assert pipeline.ingest_message(encode(SyntheticMarket(SyntheticConfig(seed=3)).next_batch(300))) == []
    pipeline.run_until_idle()
    for stream in ("SYN.A", "SYN.B", "SYN.C", "SYN.D"):
        plain, drafted = ask(pipeline, "plain", stream), ask(pipeline, "drafted", stream)
        assert drafted.value["tokens"] == plain.value["tokens"] and drafted.value["text"] == plain.value["text"]
        assert drafted.value["first_prob"] == pytest.approx(plain.value["first_prob"], abs=1e-5)
    stats = pipeline.flash.stats
    assert stats.drafted > 0 and stats.draft_accepted > 0  # the path is exercised, and saves forwards


def test_drafted_generation_equals_plain_greedy_on_a_text_model(tmp_path) -> None:
    tiny_text_checkpoint(tmp_path, eos=False, max_position_embeddings=4096)  # no eos: all 32 tokens are decoded
    pipeline = TickPipeline(ServiceConfig.from_dict({"model": {"path": str(tmp_path)},
                                                     "kv": {"cells": 8192, "block_size": 16}}))
    pipeline.registry.register(GENERATE.replace("direction_20", "'Summarise as JSON: '").replace("24", "32"))
    assert pipeline.ingest_message(encode(SyntheticMarket(SyntheticConfig(seed=4)).next_batch(60))) == []
    pipeline.run_until_idle()
    plain, drafted = ask(pipeline, "plain", "SYN.A"), ask(pipeline, "drafted", "SYN.A")
    assert drafted.value["tokens"] == plain.value["tokens"] and len(plain.value["tokens"]) == 32
    assert pipeline.flash.stats.drafted > 0


def test_sampled_answers_vary_with_the_tick_and_repeat_at_the_same_tick(checkpoint) -> None:
    """temperature > 0: without a seed the sample is still drawn afresh per stream and tick (not the same draw
    every time), and the same ask at the same tick (a backtest, a replay) gives the same sample; a seed changes it."""
    pipeline = tick_pipeline(checkpoint, """
queries:
  - {name: hot, streams: ["*"], kind: generate, question: direction_20, max_tokens: 12, trigger: on_demand,
     temperature: 1.5}
  - {name: seeded, streams: ["*"], kind: generate, question: direction_20, max_tokens: 12, trigger: on_demand,
     temperature: 1.5, seed: 7}
""")
    market = SyntheticMarket(SyntheticConfig(seed=3))
    assert pipeline.ingest_message(encode(market.next_batch(200))) == []
    pipeline.run_until_idle()
    first = {stream: ask(pipeline, "hot", stream).value["tokens"] for stream in ("SYN.A", "SYN.B", "SYN.C")}
    assert ask(pipeline, "hot", "SYN.A").value["tokens"] == first["SYN.A"]  # the same tick: the same sample
    assert ask(pipeline, "seeded", "SYN.A").value["tokens"] != first["SYN.A"]
    assert pipeline.ingest_message(encode(market.next_batch(8))) == []
    pipeline.run_until_idle()
    later = {stream: ask(pipeline, "hot", stream).value["tokens"] for stream in ("SYN.A", "SYN.B", "SYN.C")}
    assert len({tuple(t) for t in [*first.values(), *later.values()]}) == 6  # a fresh draw per stream and tick


def test_an_answer_decoded_ahead_serves_an_ask_until_the_stream_moves(checkpoint) -> None:
    pipeline = tick_pipeline(checkpoint, """
queries:
  - {name: ahead, streams: ["*"], kind: generate, question: direction_20, max_tokens: 12, trigger: on_demand,
     preposition: true}
""")
    market = SyntheticMarket(SyntheticConfig(seed=6, streams=SyntheticConfig().streams[:1]))
    spec = pipeline.registry.get("ahead")
    assert pipeline.ingest_message(encode(market.next_batch(100))) == []
    pipeline.run_until_idle()  # the advance, then the decode ahead at idle priority
    ticks = pipeline.engine.progress("SYN.A").ticks
    early, how, _ = pipeline.flash.answer_early(spec, "SYN.A", ticks)
    assert how == "prepositioned" and early.version == ticks
    assert early.value["tokens"] == ask(pipeline, "ahead", "SYN.A").value["tokens"]  # what a cold ask computes
    # the stream moves: the kept answer is stale, so an ask computes afresh, drafting from it
    assert pipeline.ingest_message(encode(market.next_batch(3))) == []
    pipeline.engine.step()  # the advance only: the decode ahead has not run yet
    moved = pipeline.engine.progress("SYN.A").ticks
    assert pipeline.flash.answer_early(spec, "SYN.A", moved)[0] is None
    draft = pipeline.flash.draft_for(spec, "SYN.A")
    assert draft == early.value["tokens"]
    resumed = ask(pipeline, "ahead", "SYN.A", draft_from=draft)
    pipeline.registry.register("queries: [{name: cold, streams: ['*'], kind: generate, question: direction_20, "
                               "max_tokens: 12, trigger: on_demand, lookup: false}]")
    assert resumed.value["tokens"] == ask(pipeline, "cold", "SYN.A").value["tokens"]
    assert pipeline.flash.stats.preposition_hits == 1


def test_a_burst_of_messages_is_decoded_ahead_at_its_last_tick(checkpoint) -> None:
    """Thirty one-tick messages taken in one chunked forward fall due at thirty cuts: the answer decoded ahead is
    for the stream's last tick (what the next ask is at), not for the cut it first fell due at."""
    pipeline = tick_pipeline(checkpoint, """
queries:
  - {name: ahead, streams: ["*"], kind: generate, question: direction_20, max_tokens: 4, trigger: on_demand,
     preposition: true}
""")
    market = SyntheticMarket(SyntheticConfig(seed=8, streams=SyntheticConfig().streams[:1]))
    assert pipeline.ingest_message(encode(market.next_batch(40))) == []
    pipeline.run_until_idle()
    for tick in market.next_batch(30):  # a burst: accepted faster than forwards run
        assert pipeline.ingest_message(encode([tick])) == []
    pipeline.run_until_idle()
    ticks = pipeline.engine.progress("SYN.A").ticks
    assert ticks == 70 and pipeline.engine.scheduler.stats.batches < 31  # chunked: fewer forwards than messages
    early, how, _ = pipeline.flash.answer_early(pipeline.registry.get("ahead"), "SYN.A", ticks)
    assert how == "prepositioned" and early.version == ticks


def test_the_gate_answers_from_the_cache_only_when_its_rule_holds(checkpoint) -> None:
    pipeline = tick_pipeline(checkpoint, """
queries:
  - {name: dir, streams: ["*"], kind: choice, question: direction_20, trigger: {ticks: 10},
     gate: {min_prob: 0.2, max_stale_ticks: 3}}
  - {name: sure, streams: ["*"], kind: choice, question: direction_20, trigger: {ticks: 10},
     gate: {min_prob: 1.0, max_stale_ticks: 100}}
""")
    market = SyntheticMarket(SyntheticConfig(seed=7, streams=SyntheticConfig().streams[:1]))
    flash, dir_spec, sure = pipeline.flash, pipeline.registry.get("dir"), pipeline.registry.get("sure")
    for tick in market.next_batch(42):  # one tick per forward: answers at 10, 20, 30, 40
        assert pipeline.ingest_message(encode([tick])) == []
        pipeline.run_until_idle()
    cached = pipeline.cache.get("dir", "SYN.A")
    assert cached.version == 40 and max(cached.value["probs"].values()) >= 0.2
    early, how, audits = flash.answer_early(dir_spec, "SYN.A", 42, 20)  # 2 ticks stale: within the rule
    assert how == "gated" and early is cached and len(audits) == 1
    assert flash.answer_early(dir_spec, "SYN.A", 44, 20)[0] is None  # 4 ticks stale: past max_stale_ticks
    assert flash.answer_early(sure, "SYN.A", 40, 20)[0] is None  # no label is certain
    # the asker's bound comes first (review381 #2): 1 tick at most is tighter than the gate's 3; and an ask that
    # gives none is computed, not gated (neither is counted as a gated ask)
    assert flash.answer_early(dir_spec, "SYN.A", 42, 1)[0] is None
    assert flash.answer_early(dir_spec, "SYN.A", 42)[0] is None
    for job in audits:  # the audit recomputes at idle priority and compares
        pipeline.engine.ask(job)
    pipeline.run_until_idle()
    summary = flash.stats.summary()
    assert summary["gate_asks"] == 4 and summary["gate_coverage"] == pytest.approx(1 / 4)
    assert flash.stats.gate_audited == 1 and flash.stats.gate_agreed in (0, 1)


def test_ask_over_the_control_socket_says_how_it_was_answered(checkpoint, tmp_path) -> None:
    queries = tmp_path / "q.yaml"
    queries.write_text("""
queries:
  - {name: dir, streams: ["*"], kind: choice, question: direction_20, trigger: batch,
     gate: {min_prob: 0.01, max_stale_ticks: 1000}}
  - {name: ahead, streams: ["*"], kind: generate, question: direction_20, max_tokens: 4, trigger: on_demand,
     preposition: true}
""")
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}, "queries": str(queries),
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"}})
    with serving(config) as server, ControlClient(server.endpoints["control"]) as control:
        server.pipeline  # noqa: B018
        from connectors.feed import FeedClient
        from test_server import wait_for

        with FeedClient(server.endpoints["ingest"]) as feed:
            feed.send(SyntheticMarket(SyntheticConfig(seed=8)).next_batch(40))
        wait_for(lambda: server.pipeline.ticks_in == 40 and not server.pipeline.engine.busy, timeout_s=30)
        gated = control.call("ask", stream="SYN.A", query="dir", max_stale_ticks=5)
        assert gated["cached"] and gated["gated"] and gated["answer"]["seq"] >= 1
        ahead = control.call("ask", stream="SYN.A", query="ahead")
        assert ahead["cached"] and ahead["prepositioned"] and len(ahead["answer"]["value"]["tokens"]) == 4
        stats = control.call("stats")["stats"]["speculation"]
        assert stats["gate_asks"] == 1 and stats["preposition_hits"] == 1
        # an on_demand query's answers are never cached (review397 #1): `get` says so, not "yet" for ever, and a
        # gate, which would have nothing to serve, is refused where no preposition decodes one ahead
        got = control.call("get", stream="SYN.A", query="ahead")
        assert got["answer"] is None and got["never_cached"] is True and "computed when asked" in got["note"]
        with pytest.raises(ControlError, match=r'query "od": gate does not apply to trigger on_demand'):
            control.call("register", yaml="queries:\n  - {name: od, streams: ['*'], kind: choice, "
                                           "question: direction_5, trigger: on_demand, "
                                           "gate: {min_prob: 0.4, max_stale_ticks: 50}}")


def test_the_askers_max_stale_bounds_a_gated_answer_and_an_ask_without_it_is_computed(checkpoint, tmp_path) -> None:
    """review381 #2: a query's `gate: {max_stale_ticks: 5}` answered `ask --max-stale 1` with an answer 2 ticks
    old, and an ask without `--max-stale` (documented: always computed) from the cache. The asker's bound wins: a
    gated answer is at most the tighter of the two old, and an ask without a bound is computed."""
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  - {name: g5, streams: ['*'], question: direction_5, kind: choice, "
                       "trigger: {ticks: 10},"
                       " gate: {min_prob: 0.01, max_stale_ticks: 5}}\n")
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}, "queries": str(queries),
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"}})
    ticks = SyntheticMarket(SyntheticConfig(seed=8, streams=SyntheticConfig().streams[:1])).next_batch(47)
    with serving(config) as server, ControlClient(server.endpoints["control"]) as control:
        from connectors.feed import FeedClient
        from test_server import wait_for

        with FeedClient(server.endpoints["ingest"]) as feed:
            for tick in ticks[:42]:  # a tick a message: answers at 1, 10, 20, 30, 40; 42 is 2 ticks past the last
                feed.send([tick])
        wait_for(lambda: server.pipeline.ticks_in == 42 and not server.pipeline.engine.busy, timeout_s=60)
        assert control.call("get", query="g5", stream="SYN.A")["answer"]["version"] == 40

        def ask(**bound: int) -> dict:
            return control.call("ask", stream="SYN.A", query="g5", **bound)

        for tight in (ask(max_stale_ticks=1), ask()):  # the asker's 1 over the gate's 5; none: computed now
            assert not tight["cached"] and "gated" not in tight and tight["answer"]["version"] == 42
            assert tight["answer"]["seq"] == 0
        for loose in (ask(max_stale_ticks=2), ask(max_stale_ticks=100)):  # within both: the gate answers
            assert loose["cached"] and loose["gated"] and loose["answer"]["version"] == 40
        with FeedClient(server.endpoints["ingest"]) as feed:
            for tick in ticks[42:]:
                feed.send([tick])
        wait_for(lambda: server.pipeline.ticks_in == 47 and not server.pipeline.engine.busy, timeout_s=60)
        past_gate = ask(max_stale_ticks=100)  # 7 ticks old: within the asker's 100, past the gate's 5
        assert not past_gate["cached"] and past_gate["answer"]["version"] == 47


def test_gate_and_lookup_options_are_checked_by_name() -> None:
    with pytest.raises(ValueError, match="gate.min_prob must be a probability"):
        Gate(min_prob=1.5, max_stale_ticks=1)
    with pytest.raises(ValueError, match='unknown gate key "stale"'):
        Gate.parse({"min_prob": 0.9, "stale": 3})
    with pytest.raises(ValueError, match="lookup.draft must be an integer from 1 to 64"):
        Lookup.parse({"draft": 0})
    assert Lookup.parse(False) is None and Lookup.parse(True) == Lookup()
