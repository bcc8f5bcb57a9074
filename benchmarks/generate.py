"""Answering early, measured: both sides of each comparison in one run.

1. ``ask`` latency of a generate query decoded ahead (``preposition``) vs computed cold, built-in model, in
   process (the control socket adds the same ~0.1 ms to both); and on a stream that moved by one tick,
   resumed from the kept answer as a draft vs cold.
2. Generated tokens per second with prompt lookup vs without, on a structured-output question over a text
   codec (a seeded random Llama with its own BPE tokenizer: what is measured is the mechanism, since the
   acceptance rate depends on how much the text repeats), acceptance rate reported.
3. The confidence gate on a replay of the shared Binance data with the built-in model: direction_20 answered at
   every tick (the fresh answers), a standing {ticks: 10} answer as the cache, an ask at every tick; per
   min_prob, coverage (share of asks the gate answers) and precision (share where the cached label equals
   the fresh one).

    python -m benchmarks.generate
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.common import (add_data_dir_argument, add_output_arguments, keep_triton_out_without_cuda, machine,
                               output_dir, percentiles, write_json)
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from queries.flash import same_answer

GATE_PROBS = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def ask_ms(pipeline: TickPipeline, name: str, stream: str, draft_from=None) -> tuple[float, dict]:
    spec = pipeline.registry.get(name)
    start = time.perf_counter()
    pipeline.engine.ask(pipeline.flash.job_for(spec, stream, ticket="bench", draft_from=draft_from))
    answer = next(o.answer for o in pipeline.engine.run_until_idle() if o.job.ticket == "bench")
    return (time.perf_counter() - start) * 1e3, answer.value


def preposition(reps: int) -> dict:
    pipeline = TickPipeline(ServiceConfig())
    pipeline.registry.register("""
queries:
  - {name: ahead, streams: ["*"], kind: generate, question: direction_20, max_tokens: 16, trigger: on_demand,
     preposition: true}
  - {name: cold, streams: ["*"], kind: generate, question: direction_20, max_tokens: 16, trigger: on_demand,
     lookup: false}
""")
    market = SyntheticMarket(SyntheticConfig(seed=1, streams=SyntheticConfig().streams[:1]))
    pipeline.ingest_message(encode(market.next_batch(300)))
    pipeline.run_until_idle()
    spec = pipeline.registry.get("ahead")
    cold, warm, resumed, resumed_cold = [], [], [], []
    for _ in range(reps):
        ticks = pipeline.engine.progress("SYN.A").ticks
        start = time.perf_counter()
        early, how, _ = pipeline.flash.answer_early(spec, "SYN.A", ticks)
        warm.append((time.perf_counter() - start) * 1e3)
        assert how == "prepositioned"
        ms, value = ask_ms(pipeline, "cold", "SYN.A")
        cold.append(ms)
        assert value["tokens"] == early.value["tokens"]
        pipeline.ingest_message(encode(market.next_batch(1)))  # the stream moves by one tick
        pipeline.engine.step()  # the advance (the decode ahead has not run yet)
        draft = pipeline.flash.draft_for(spec, "SYN.A")
        resumed.append(ask_ms(pipeline, "ahead", "SYN.A", draft_from=draft)[0])
        resumed_cold.append(ask_ms(pipeline, "cold", "SYN.A")[0])
        pipeline.run_until_idle()  # the decode ahead catches up
    result = {"cold_ms": percentiles(cold), "prepositioned_ms": percentiles(warm),
              "moved_resumed_ms": percentiles(resumed), "moved_cold_ms": percentiles(resumed_cold)}
    result["preposition_speedup"] = result["cold_ms"]["p50"] / max(result["prepositioned_ms"]["p50"], 1e-6)
    result["resume_speedup"] = result["moved_cold_ms"]["p50"] / result["moved_resumed_ms"]["p50"]
    return result


def text_model(directory: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    lines = [f'{{"side": "{("buy", "sell")[i % 2]}", "price": {100 + i % 13}.{i % 10}, "size": {i % 4}}}\n'
             for i in range(400)] + [f"T buy {100 + i % 7}.{i % 10} x {i % 3} +{i % 5}ms\n" for i in range(400)]
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.train_from_iterator(lines, trainers.BpeTrainer(vocab_size=512, special_tokens=["[UNK]"],
                                                             show_progress=False))
    PreTrainedTokenizerFast(tokenizer_object=tokenizer).save_pretrained(directory)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=512, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                                 num_attention_heads=8, num_key_value_heads=4,
                                 max_position_embeddings=4096)).save_pretrained(directory)
    return directory


def lookup(reps: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        pipeline = TickPipeline(ServiceConfig.from_dict({"model": {"path": str(text_model(Path(tmp)))},
                                                         "kv": {"cells": 16384, "block_size": 16}}))
    pipeline.registry.register("""
queries:
  - {name: plain, streams: ["*"], kind: generate, question: 'Last trade as JSON: {"side": "', max_tokens: 64,
     trigger: on_demand, lookup: false}
  - {name: drafted, streams: ["*"], kind: generate, question: 'Last trade as JSON: {"side": "', max_tokens: 64,
     trigger: on_demand}
""")
    pipeline.ingest_message(encode(SyntheticMarket(SyntheticConfig(seed=2)).next_batch(120)))
    pipeline.run_until_idle()
    sides: dict[str, list[float]] = {"plain": [], "drafted": []}
    stats = pipeline.flash.stats
    for _ in range(reps):
        for name in ("plain", "drafted"):  # interleaved: the machine's load hits both alike
            ms, value = ask_ms(pipeline, name, "SYN.A")
            sides[name].append(len(value["tokens"]) / (ms / 1e3))
    plain, drafted = statistics.median(sides["plain"]), statistics.median(sides["drafted"])
    return {"plain_tokens_per_s": plain, "drafted_tokens_per_s": drafted, "lookup_speedup": drafted / plain,
            "acceptance_rate": stats.draft_accepted / stats.drafted if stats.drafted else 0.0,
            "drafted": stats.drafted}


def gate(data_dir: Path, ticks: int) -> list[dict]:
    from engine.service.datasets import load_btcusdt

    stream = load_btcusdt(data_dir).ticks[:ticks]
    pipeline = TickPipeline(ServiceConfig())
    pipeline.registry.register("queries: [{name: dir, streams: ['*'], kind: choice, question: direction_20, "
                               "trigger: batch}]")
    fresh: list[dict] = []
    for tick in stream:  # one forward per tick: the fresh answer after every tick
        pipeline.ingest(tick)
        answers = pipeline.run_until_idle()
        fresh.append(answers[-1].value if answers else fresh[-1])
    rows = []
    for min_prob in GATE_PROBS:
        asks = fired = agreed = 0
        for t in range(10, len(fresh)):
            cached = fresh[t - t % 10]  # what a {ticks: 10} trigger last published
            asks += 1
            if max(cached["probs"].values()) >= min_prob:
                fired += 1
                agreed += same_answer(cached, fresh[t])
        rows.append({"min_prob": min_prob, "coverage": fired / asks, "precision": agreed / fired if fired else None,
                     "asks": asks})
    return rows


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--gate-ticks", type=int, default=1500)
    add_data_dir_argument(parser)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    result: dict = {"benchmark": "generate", "machine": machine(), "load_avg": os.getloadavg()}
    result["preposition"] = preposition(args.reps)
    result["preposition_speedup"] = result["preposition"]["preposition_speedup"]
    print(f"preposition: ask {result['preposition']['prepositioned_ms']['p50']:.3f} ms decoded ahead vs "
          f"{result['preposition']['cold_ms']['p50']:.1f} ms cold; moved by a tick: "
          f"{result['preposition']['resume_speedup']:.2f}x from the kept draft", flush=True)
    result["lookup"] = lookup(max(3, args.reps // 4))
    result["lookup_speedup"] = result["lookup"]["lookup_speedup"]
    print(f"prompt lookup: {result['lookup']['drafted_tokens_per_s']:.0f} vs "
          f"{result['lookup']['plain_tokens_per_s']:.0f}"
          f" tokens/s, acceptance {result['lookup']['acceptance_rate']:.2f}", flush=True)
    if (args.data_dir / "binance-btcusdt-spot").is_dir():
        result["gate"] = gate(args.data_dir, args.gate_ticks)
        for row in result["gate"]:
            print(f"gate min_prob {row['min_prob']:.1f}: coverage {row['coverage']:.3f} precision "
                  f"{row['precision'] if row['precision'] is None else round(row['precision'], 3)}", flush=True)
    else:
        result["gate"] = []
        print(f"gate: skipped, no Binance data at {args.data_dir}", flush=True)
    path = write_json("generate", result, output_dir(args))
    print(f"generate: preposition {result['preposition_speedup']:.0f}x, lookup {result['lookup_speedup']:.2f}x "
          f"(acceptance {result['lookup']['acceptance_rate']:.2f}), gate rows {len(result['gate'])}  [{path}]")
    return result


if __name__ == "__main__":
    keep_triton_out_without_cuda()
    main()
