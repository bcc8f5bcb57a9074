"""Flash queries end to end on the engine loop: answers equal a stateless evaluation of the same
tokens, for every answer kind, under a KV budget that forces evictions, across context rolls."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import LlamaForCausalLM

from conftest import tiny_tick_checkpoint
from connectors.codec import TOKENS_PER_TICK
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.engine import Engine
from engine.jobs import JobResult, ProbeJob
from engine.scheduler import AdmissionRefused, SchedulerConfig
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from queries.probe_answers import compile_query
from queries.spec import QuerySpecError

QUERIES = """
queries:
  - {name: dir, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: move, streams: ["SYN.*"], question: move_bps_50, kind: expectation, trigger: {ticks: 3}}
  - {name: nll, streams: ["*"], kind: surprise, trigger: batch}
  - {name: gen, streams: ["SYN.A"], question: direction_5, kind: generate, max_tokens: 3, trigger: {ticks: 10}}
"""
PROB_TOL = 2e-5  # fp32, probabilities; stated in the README
NLL_TOL = 1e-3  # nats, a sum over the tick's tokens


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"), max_position_embeddings=512)


def run_pipeline(checkpoint, cells: int, ticks: int = 240, window: int | None = None, seed: int = 1):
    """Feed a synthetic market tick by tick; record each answer with the session tokens it saw."""
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": cells, "block_size": 16},
                                      "scheduler": {"max_batch_tokens": 64, "window": window}})
    seen = []
    pipeline = TickPipeline(config)
    pipeline.registry.register(QUERIES)
    market = SyntheticMarket(SyntheticConfig(seed=seed))
    for _ in range(ticks // 4):
        assert pipeline.ingest_message(encode(market.next_batch(4))) == []
        step_and_record(pipeline, seen, max_steps=1)
    step_and_record(pipeline, seen)
    return pipeline, seen


def step_and_record(pipeline: TickPipeline, seen: list, max_steps: int | None = None) -> None:
    """Step (until idle, or ``max_steps``); record each answer with the session tokens it was computed on:
    those up to its due point (a generate answer finishes forwards later, at the same point)."""
    steps = 0
    while (max_steps is None or steps < max_steps) and (report := pipeline.step()) is not None:
        steps += 1
        for o in report.outcomes:
            if o.answer is not None:
                state = pipeline.engine.scheduler.streams[o.answer.stream]
                later = (state.ticks - o.answer.version) * TOKENS_PER_TICK  # ticks committed since its cut
                seen.append((o.answer, state.session.tokens[: len(state.session.tokens) - later]))


def stateless_answer(hf, pipeline: TickPipeline, answer, tokens: list[int]) -> dict:
    """What a stateless engine computes: transformers' forward over the full sequence + question."""
    spec = pipeline.registry.get(answer.query)
    query = compile_query(spec, pipeline.codec)
    with torch.no_grad():
        if spec.kind == "surprise":
            k = TOKENS_PER_TICK  # the surprise is of the latest tick
            logits = hf(torch.tensor([tokens])).logits[0]
            logp = torch.log_softmax(logits[-k - 1 : -1], -1)
            return {"nll": float(-logp[torch.arange(k), torch.tensor(tokens[-k:])].sum())}
        if spec.kind == "generate":
            generated: list[int] = []
            for _ in range(spec.max_tokens):
                logits = hf(torch.tensor([tokens + list(query.question) + generated])).logits[0, -1]
                generated.append(int(logits.argmax()))
            return {"tokens": generated}
        last = hf(torch.tensor([tokens + list(query.question)])).logits[0, -1]
        probs = torch.softmax(last[list(query.answer_ids)], 0)
        value = {"probs": dict(zip(query.labels, probs.tolist()))}
        if spec.kind == "expectation":
            value["expected"] = sum(p * v for p, v in zip(probs.tolist(), query.values))
        return value


def model_part(value: dict) -> dict:
    """The model's own answer in a published value (answers.adapt mixes it with the stream's outcomes, and runs
    that published different answers, as a small and a big pool do, mix differently)."""
    if "model_probs" not in value:
        return value
    return {"probs": value["model_probs"], **({"expected": value["model_expected"]} if "model_expected" in value
                                              else {})}


def assert_same_answer(flash: dict, stateless: dict) -> None:
    if "nll" in stateless:
        assert flash["nll"] == pytest.approx(stateless["nll"], abs=NLL_TOL)
    elif "tokens" in stateless:
        assert flash["tokens"] == stateless["tokens"]
    else:  # the model's own answer (answers.adapt publishes a mix of it, with it beside as model_probs)
        for label, p in stateless["probs"].items():
            assert flash.get("model_probs", flash["probs"])[label] == pytest.approx(p, abs=PROB_TOL)
        if "expected" in stateless:
            assert flash.get("model_expected", flash["expected"]) == pytest.approx(stateless["expected"], abs=1e-4)


def test_every_answer_kind_equals_stateless_evaluation_and_per_topic_sequence_numbers_increase(checkpoint) -> None:
    pipeline, seen = run_pipeline(checkpoint, cells=8192)
    hf = LlamaForCausalLM.from_pretrained(checkpoint).eval()
    kinds = {pipeline.registry.get(a.query).kind for a, _ in seen}
    assert kinds == {"choice", "expectation", "surprise", "generate"}
    rng = random.Random(0)
    for answer, tokens in rng.sample(seen, 40) + [s for s in seen if s[0].query == "gen"][:3]:
        assert_same_answer(answer.value, stateless_answer(hf, pipeline, answer, tokens))
    # the same run's answers, every topic's (a run of its first 80 ticks, once a test of its own, is a prefix of it)
    last: dict[str, int] = {}
    for answer, _ in seen:
        assert answer.seq == last.get(answer.topic, 0) + 1
        last[answer.topic] = answer.seq


def test_a_small_pool_evicts_rebuilds_and_answers_like_an_unconstrained_run_and_so_does_a_flood_of_asks(
        checkpoint) -> None:
    """A small pool's run against an unconstrained one on the same feed: first the answers it published while it
    evicted and rebuilt, then a flood of asks on its streams, most of them evicted when the asks arrive (asks on
    them must make room, and rebuild, while asks on resident sessions need none). Both runs are built once for
    the two checks (each was a test of its own, building both)."""
    # 4 streams of ~300 tokens each against a pool of 40 blocks of 16 cells
    small, small_seen = run_pipeline(checkpoint, cells=640, ticks=300)
    big, big_seen = run_pipeline(checkpoint, cells=8192, ticks=300)
    stats = small.engine.scheduler.stats
    assert stats.evictions > 0 and small.runner.stats.tokens_rebuilt > 0
    # each eviction is recomputed at most once, when its stream next ticks; a roll's re-prefill is no rebuild
    assert 0 < stats.rebuilt_streams <= stats.evictions
    assert big.engine.scheduler.stats.rebuilt_streams == big.engine.scheduler.stats.evictions == 0
    assert small.engine.blocks.pool.used_cells <= 640
    assert small.ticks_in == big.ticks_in == 300  # nothing accepted was dropped
    for state in small.engine.scheduler.streams.values():
        assert state.ticks == big.engine.scheduler.streams[state.name].ticks
    by_key = {(a.query, a.stream, a.version): a.value for a, _ in big_seen}
    common = [(a, by_key[(a.query, a.stream, a.version)]) for a, _ in small_seen
              if (a.query, a.stream, a.version) in by_key]
    assert len(common) >= 0.5 * len(small_seen)
    for answer, unconstrained in common:
        assert_same_answer(answer.value, model_part(unconstrained))

    # the flood: 300 ticks over 4 streams against 40 blocks
    spec = small.registry.get("dir")
    answers = {}
    for name, pipeline in (("small", small), ("big", big)):
        streams = sorted(pipeline.engine.scheduler.streams)
        evicted = [s for s in streams if not pipeline.engine.scheduler.streams[s].session.blocks]
        rebuilt_before = pipeline.engine.scheduler.stats.rebuilt_streams
        if name == "small":
            assert evicted
        for round_no in range(3):
            for stream in streams:
                pipeline.ask(spec, stream, ticket=(stream, round_no))
        answers[name] = {(a.stream, a.version): a.value for a in pipeline.run_until_idle()}
        # an ask on an evicted stream rebuilds it (and may evict another, rebuilt by a later ask)
        assert pipeline.engine.scheduler.stats.rebuilt_streams - rebuilt_before >= len(evicted)
    assert len(answers["small"]) == len(small.engine.scheduler.streams) >= 2
    assert small.engine.scheduler.stats.evictions > 0
    assert answers["small"].keys() == answers["big"].keys()
    for key, value in answers["small"].items():
        assert_same_answer(value, model_part(answers["big"][key]))


def test_answers_after_a_context_roll_equal_stateless_on_the_kept_tokens(checkpoint) -> None:
    pipeline, seen = run_pipeline(checkpoint, cells=8192, ticks=400, window=160)
    assert pipeline.engine.scheduler.stats.rolls > 0
    hf = LlamaForCausalLM.from_pretrained(checkpoint).eval()
    late = [s for s in seen if s[0].query == "dir"][-5:]
    for answer, tokens in late:
        assert len(tokens) <= 160
        assert len(tokens) % TOKENS_PER_TICK == 0  # rolled on tick boundaries
        assert_same_answer(answer.value, stateless_answer(hf, pipeline, answer, tokens))


def test_no_stream_starves_with_64_streams_at_uneven_rates(checkpoint) -> None:
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 16384, "block_size": 16}})
    pipeline = TickPipeline(config)
    engine = Engine(pipeline.runner, SchedulerConfig(max_batch_tokens=160))
    rng = random.Random(3)
    rates = [1.0 / (1 + i % 16) for i in range(64)]  # 1 .. 1/16 ticks per round
    waiting_since: dict[str, int] = {}
    worst_wait = 0
    for round_no in range(60):
        for i, rate in enumerate(rates):
            if rng.random() < rate:
                stream = f"S{i:02d}"
                engine.submit(stream, [rng.randrange(40) for _ in range(4)], event_ts=round_no)
                waiting_since.setdefault(stream, round_no)
        report = engine.step()
        for progress in report.advanced:
            worst_wait = max(worst_wait, round_no - waiting_since.pop(progress.stream))
            if engine.scheduler.streams[progress.stream].pending:
                waiting_since[progress.stream] = round_no
    engine.run_until_idle()
    assert worst_wait <= 3, f"a stream waited {worst_wait} rounds"
    assert all(not s.pending for s in engine.scheduler.streams.values())


def test_refuse_policy_rejects_new_streams_with_a_clear_error(checkpoint) -> None:
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 1280, "block_size": 16},
                                      "scheduler": {"when_full": "refuse", "window": 256}})
    pipeline = TickPipeline(config)
    admitted = pipeline.engine.scheduler.max_streams_admitted
    assert admitted == 80 // 17  # blocks in the pool // (window blocks + 1)
    for i in range(admitted):
        pipeline.engine.submit(f"S{i}", [1, 2, 3, 4], event_ts=i)
    with pytest.raises(AdmissionRefused, match="refused: the KV pool holds 4 streams"):
        pipeline.engine.submit("one-too-many", [1, 2, 3, 4], event_ts=0)
    assert pipeline.engine.scheduler.stats.refused_streams == 1
    pipeline.engine.run_until_idle()
    assert pipeline.engine.scheduler.stats.evictions == 0


def test_sessions_share_the_header_prefix(checkpoint) -> None:
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16}})
    header = tuple(range(1, 41))  # 2 full blocks + 8 cells
    pipeline = TickPipeline(config)
    engine = Engine(pipeline.runner, SchedulerConfig(header=header))
    for name in ("A", "B", "C"):
        engine.submit(name, [50, 51, 52, 53], event_ts=0)
    surprises = {}
    while (report := engine.step()) is not None:
        surprises |= {p.stream: p.surprise for p in report.advanced}
    pool = engine.blocks.pool
    header_blocks = engine.scheduler.header.blocks[:2]
    assert all(pool.refcount[b] == 4 for b in header_blocks)  # the header session + 3 streams
    assert pipeline.runner.stats.tokens_advanced == 12  # the header was computed once
    hf = LlamaForCausalLM.from_pretrained(checkpoint).eval()
    engine.ask(ProbeJob("B", [[60, 61]], lambda logits, p: JobResult(logits[0])))
    (outcome,) = engine.step().outcomes
    with torch.no_grad():
        logits = hf(torch.tensor([list(header) + [50, 51, 52, 53, 60, 61]])).logits[0]  # (46, vocab)
    assert (outcome.answer[-1] - logits[-1]).abs().max() <= 1e-4
    # a stream's first surprise counts every token of its first tick, the first one predicted by the header
    logp = torch.log_softmax(logits[len(header) - 1 : len(header) + 3], dim=-1)  # (4, vocab): predict 50..53
    nll = float(-logp[torch.arange(4), torch.tensor([50, 51, 52, 53])].sum())
    assert surprises.keys() == {"A", "B", "C"}
    assert all(abs(s - nll) <= 1e-3 for s in surprises.values()), (surprises, nll)


def test_a_restored_streams_next_surprise_follows_its_own_tokens_not_the_header(checkpoint) -> None:
    """A stream restored from a tick log (tokens booked, then computed by the rebuild, or by its next tick's forward
    where the rebuild did not reach it) predicts its next tick from its own last token: the header's prediction is
    a new stream's only."""
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16}})
    header = (1, 2, 3)
    engine = Engine(TickPipeline(config).runner, SchedulerConfig(header=header))
    hf = LlamaForCausalLM.from_pretrained(checkpoint).eval()
    with torch.no_grad():
        logits = hf(torch.tensor([[*header, 50, 51, 52, 53, 60, 61, 62, 63]])).logits[0]  # (11, vocab)
    nll = -torch.log_softmax(logits[6:10], dim=-1)[torch.arange(4), torch.tensor([60, 61, 62, 63])]  # (4,)
    for rebuilt in (True, False):
        engine.scheduler.restore(f"R{rebuilt}", [50, 51, 52, 53], event_ts=1)
        if rebuilt:  # its last row computed by the rebuild: every token of the next tick has its prediction
            engine.rebuild()
        engine.submit(f"R{rebuilt}", [60, 61, 62, 63], event_ts=2)
        (progress,) = engine.step().advanced
        # computed with the next tick's forward, the restored tokens' last row predicts its first token (review401
        # #1: that token was left out, so a stream restored beyond the pool answered a surprise too low)
        assert progress.surprise == pytest.approx(float(nll.sum()), abs=1e-3)


@pytest.mark.parametrize("score", ["sequence", "per_token"])
def test_text_model_multi_token_choices_equal_stateless(tmp_path, score: str) -> None:
    """A Hugging Face text model with its own tokenizer: ticks become lines of text, multi-token
    choices are scored as whole sequences (or, `score: per_token`, by their mean log-probability per token), and
    the answers match transformers run statelessly."""
    from transformers import LlamaConfig, PreTrainedTokenizerFast

    from connectors.text_codec import TextCodec

    market = SyntheticMarket(SyntheticConfig(seed=5))
    renderer = TextCodec(_bpe(["0123456789"]))
    state = renderer.new_state()
    lines = [renderer.render(t, state) for t in market.next_batch(400)] + ["Will it go up sharply, down or flat?"]
    PreTrainedTokenizerFast(tokenizer_object=_bpe(lines)).save_pretrained(tmp_path)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=112, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2,
                                 max_position_embeddings=4096)).save_pretrained(tmp_path)
    config = ServiceConfig.from_dict({"model": {"path": str(tmp_path)}, "kv": {"cells": 8192, "block_size": 16}})
    seen = []
    pipeline = TickPipeline(config)
    pipeline.registry.register("""
queries:
  - name: next
    streams: [SYN.A]
    question: "Will it go up sharply, down or flat?"
    kind: choice
    choices: [" up sharply", " down", " flat"]
    trigger: {ticks: 5}
""" + f"    score: {score}\n")
    for _ in range(30):
        assert pipeline.ingest_message(encode(market.next_batch(5))) == []
        step_and_record(pipeline, seen)
    assert len(seen) >= 3
    query = pipeline.flash.compiled(pipeline.registry.get("next"))
    assert max(len(c) for c in query.candidates) > 1  # the multi-token path is exercised
    hf = LlamaForCausalLM.from_pretrained(tmp_path).eval()
    for answer, tokens in seen:
        scores = []
        for candidate in query.candidates:
            full = tokens + list(query.question) + list(candidate)
            with torch.no_grad():
                logp = torch.log_softmax(hf(torch.tensor([full])).logits[0], -1)
            k = len(candidate)
            total = float(logp[len(full) - k - 1 : len(full) - 1].gather(1, torch.tensor(candidate)[:, None]).sum())
            scores.append(total / k if score == "per_token" else total)
        expected = torch.softmax(torch.tensor(scores), 0).tolist()
        for label, p in zip(query.labels, expected):
            assert answer.value["probs"][label] == pytest.approx(p, abs=PROB_TOL)


def _bpe(lines: list[str]):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"],
                                                             show_progress=False))
    return tokenizer


def test_a_probe_past_the_model_window_fails_the_job_not_the_engine(checkpoint) -> None:
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16},
                                      "scheduler": {"probe_reserve": 8}})
    pipeline = TickPipeline(config)
    engine = pipeline.engine
    for i in range(120):  # 480 tokens, less what the stream's roll dropped: the 512-position model has the rest
        engine.submit("S", [1, 2, 3, 4], event_ts=i)
    engine.run_until_idle()
    too_long = 512 - len(engine.scheduler.streams["S"].session.tokens) + 1
    engine.ask(ProbeJob("S", [[5] * too_long], lambda logits, p: JobResult("too long")))
    engine.ask(ProbeJob("S", [[5] * 4], lambda logits, p: JobResult("ok")))
    failed, done = engine.step().outcomes
    assert failed.answer is None
    assert failed.error.startswith(f"probe of {too_long} tokens on stream \"S\" would pass the model's 512 positions")
    assert done.answer == "ok" and done.error is None and engine.scheduler.stats.jobs_failed == 1


def test_probe_budget_spreads_questions_over_forwards_and_loses_none(checkpoint) -> None:
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16}})
    pipeline = TickPipeline(config)
    engine = Engine(pipeline.runner, SchedulerConfig(max_probe_tokens=6))  # two 3-token jobs per forward
    for name in ("A", "B", "C", "D", "E"):
        engine.submit(name, [1, 2, 3, 4, ord(name) % 40], event_ts=0)
    engine.run_until_idle()
    for name in ("A", "B", "C", "D", "E"):
        engine.ask(ProbeJob(name, [[5, 6, 7]], lambda logits, p: JobResult((p.stream, logits[0][-1]))))
    per_forward = []
    while (report := engine.step()) is not None:
        per_forward.append([o.answer for o in report.outcomes])
    assert [[stream for stream, _ in answers] for answers in per_forward] == [["A", "B"], ["C", "D"], ["E"]]
    assert engine.scheduler.stats.probes_deferred == 3 + 1  # C, D, E wait once; E waits twice
    for stream, logits in (a for answers in per_forward for a in answers):  # deferred answers are still exact
        direct = engine.probe(engine.scheduler.streams[stream].session, [5, 6, 7], logits="last")[-1]
        torch.testing.assert_close(logits, direct, atol=1e-5, rtol=0)  # batched vs alone, as in test_session


def test_a_forward_given_a_smaller_budget_takes_no_more_and_loses_nothing(checkpoint) -> None:
    """A stop sizes its last forwards to the time it has left (StopDrain._drain, stop_drain.py):
    Engine.step(max_tokens)."""
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16}})
    pipeline = TickPipeline(config)
    engine = Engine(pipeline.runner, SchedulerConfig(max_batch_tokens=160))
    for round_no in range(4):
        for name in ("A", "B", "C", "D", "E"):
            engine.submit(name, [1, 2, 3, ord(name) % 40], event_ts=round_no)  # 5 streams x 4 chunks of 4 tokens
    assert engine.step(max_tokens=8).tokens == 8  # two whole chunks
    assert engine.step(max_tokens=1).tokens == 4  # one chunk goes, whatever the budget
    assert engine.step().tokens == 80 - 12  # the configured budget again: the rest
    assert engine.step() is None
    assert [len(s.session.tokens) for s in engine.scheduler.streams.values()] == [16] * 5


def test_a_startup_query_the_model_cannot_answer_stops_the_start_not_every_step(checkpoint, tmp_path) -> None:
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice}\n"
                       "  - {name: gen, streams: ['*'], kind: generate, question_tokens: [100000]}\n")
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16},
                                      "queries": str(queries)})
    with pytest.raises(QuerySpecError, match=r'query "gen": question_tokens\[0\] = 100000 is not below'):
        TickPipeline(config)  # once: an IndexError in every forward, so no query ever answered
