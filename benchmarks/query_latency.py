"""Question latency on a stateful session vs a stateless request, as context grows.

One tiny Llama (stated below, seeded random weights), the same tokens on both
sides, both measured in this run:
  probe      a 16-token question evaluated on a session that already holds the context
  stateless  transformers' forward over context + question (what a request-driven engine pays)
  kept       transformers with its KV cache kept (a DynamicCache holding the context): forward the question,
             then crop it off again (what a careful user of transformers pays for one session)
It also measures memory bandwidth (a large copy) and prints the KV-read floor per
context: the bytes of K/V a probe must read divided by that bandwidth.

    python -m benchmarks.query_latency            # full: 512, 2k, 8k, 16k
    python -m benchmarks.query_latency --quick    # 512 and 2k, fewer repetitions
    python -m benchmarks.query_latency --wide-kv  # a model with Llama-3-8B's KV width per layer: 256, 2k, 6k
"""

from __future__ import annotations

import argparse
import random

import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

from benchmarks.common import (ForeignLoad, add_output_arguments, copy_bandwidth_gbs, keep_triton_out_without_cuda,
                               cache_argument, crop_to, machine, output_dir, percentiles, say_load, time_ms, write_json)
from engine.engine import Engine
from engine.kv_cache import CacheSpec
from engine.models import from_hf_model
from engine.runner import ModelRunner
from engine.session import Session

QUESTION_TOKENS = 16
PREFILL_CHUNK = 2048
BENCH_CONFIG = dict(
    vocab_size=512, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
    num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=16384 + 128,
)
# Llama-3-8B's per-layer KV width (8 KV heads x head_dim 128) over 8 layers: 64 KiB a cell in fp32, where
# BENCH_CONFIG's is 4 KiB; the attention over the cached context, not the question's own forward, then dominates
WIDE_KV_CONFIG = dict(
    vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=8,
    num_attention_heads=8, num_key_value_heads=8, head_dim=128, max_position_embeddings=8192,
)


def build_models(seed: int = 0, config: dict = BENCH_CONFIG) -> tuple[LlamaForCausalLM, Engine]:
    torch.manual_seed(seed)
    hf = LlamaForCausalLM(LlamaConfig(**config)).eval()
    runner = ModelRunner(from_hf_model(hf), CacheSpec(block_size=32, cells=config["max_position_embeddings"]))
    return hf, Engine(runner)


def measure_context(hf, engine: Engine, context: int, probe_reps: int, stateless_reps: int,
                    bandwidth_gbs: float, rng: random.Random) -> dict[str, float]:
    tokens = [rng.randrange(hf.config.vocab_size) for _ in range(context + QUESTION_TOKENS)]
    prefix, question = tokens[:context], tokens[context:]
    session = Session(f"ctx{context}")
    for start in range(0, context, PREFILL_CHUNK):
        engine.advance(session, prefix[start : start + PREFILL_CHUNK], logits="none")
    probe = percentiles(time_ms(lambda: engine.probe(session, question), probe_reps, warmup=10))
    ids = torch.tensor([tokens])
    with torch.inference_mode():
        stateless_fn = lambda: hf(ids, logits_to_keep=QUESTION_TOKENS)  # noqa: E731
        stateless = percentiles(time_ms(stateless_fn, stateless_reps, warmup=1))
        reference = stateless_fn().logits[0].float()
        kept, kept_logits = _kept_cache_side(hf, prefix, question, probe_reps)
    max_diff = (engine.probe(session, question) - reference).abs().max().item()
    engine.evict(session)
    kv_bytes = context * engine.runner.config.kv_bytes_per_token * engine.runner.kv.tensor.element_size()
    return {
        "context": context,
        "probe_p50_ms": probe["p50"], "probe_p99_ms": probe["p99"], "probe_n": probe["n"],
        "stateless_p50_ms": stateless["p50"], "stateless_p99_ms": stateless["p99"], "stateless_n": stateless["n"],
        "ratio_stateless_over_probe_p50": stateless["p50"] / probe["p50"],
        "kept_cache_p50_ms": kept["p50"], "kept_cache_p99_ms": kept["p99"], "kept_cache_n": kept["n"],
        "ratio_kept_cache_over_probe_p50": kept["p50"] / probe["p50"],
        "kept_cache_max_abs_logit_diff": (kept_logits - reference).abs().max().item(),
        "kv_bytes": kv_bytes,
        "kv_floor_ms": kv_bytes / (bandwidth_gbs * 1e9) * 1e3,
        "max_abs_logit_diff": max_diff,
    }


def _kept_cache_side(hf, prefix: list[int], question: list[int], reps: int) -> tuple[dict, torch.Tensor]:
    """transformers used statefully: the context prefilled once into a DynamicCache; each question is forwarded on
    it and cropped off again, so every repetition sees the same context. Returns its percentiles and the question's
    logits (Q, vocab), which must equal the stateless side's."""
    cache = DynamicCache(config=hf.config)
    cache_kwargs = {cache_argument(hf): cache, "use_cache": True}
    for start in range(0, len(prefix), PREFILL_CHUNK):
        hf(torch.tensor([prefix[start : start + PREFILL_CHUNK]]), logits_to_keep=1, **cache_kwargs)
    question_ids = torch.tensor([question])  # (1, Q)

    def ask() -> torch.Tensor:
        logits = hf(question_ids, **cache_kwargs).logits[0]  # (Q, vocab)
        crop_to(cache, len(prefix))
        return logits

    return percentiles(time_ms(ask, reps, warmup=10)), ask().float()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="contexts 512 and 2k only, fewer repetitions")
    parser.add_argument("--contexts", type=int, nargs="*", default=None)
    parser.add_argument("--wide-kv", action="store_true", help="a model with Llama-3-8B's KV width per layer "
                        "(WIDE_KV_CONFIG), contexts 256, 2k and 6k, --quick's repetitions; written to "
                        "query_latency_wide_kv.json")
    parser.add_argument("--seed", type=int, default=0)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    config = WIDE_KV_CONFIG if args.wide_kv else BENCH_CONFIG
    contexts = args.contexts or ([256, 2048, 6000] if args.wide_kv else [512, 2048] if args.quick else
                                 [512, 2048, 8192, 16384])
    few = args.quick or args.wide_kv  # a wide-KV stateless forward over 6k tokens takes ~10 s: fewer repetitions
    hf, engine = build_models(args.seed, config)
    bandwidth = copy_bandwidth_gbs()
    rng = random.Random(args.seed)
    rows = []
    print(f"model: Llama {config}, fp32, torch threads {torch.get_num_threads()}; "
          f"copy bandwidth {bandwidth:.1f} GB/s (read+write)")
    print(f"{'context':>8} {'probe p50':>10} {'probe p99':>10} {'stateless p50':>14} {'ratio':>8} "
          f"{'kept p50':>9} {'ratio':>6} {'KV floor':>9} {'probe/floor':>11} {'max|diff|':>10}")
    with ForeignLoad() as foreign:  # (the share of the CPU other processes took meanwhile: see say_load)
        for context in contexts:
            stateless_reps = 20 if context <= 2048 else (5 if context <= 8192 else 3)
            probe_reps = 50 if few else 200
            row = measure_context(hf, engine, context, probe_reps, 3 if few else stateless_reps, bandwidth, rng)
            rows.append(row)
            print(f"{context:>8} {row['probe_p50_ms']:>8.2f}ms {row['probe_p99_ms']:>8.2f}ms "
                  f"{row['stateless_p50_ms']:>12.1f}ms {row['ratio_stateless_over_probe_p50']:>7.1f}x "
                  f"{row['kept_cache_p50_ms']:>7.2f}ms {row['ratio_kept_cache_over_probe_p50']:>5.2f}x "
                  f"{row['kv_floor_ms']:>7.2f}ms {row['probe_p50_ms'] / row['kv_floor_ms']:>10.1f}x "
                  f"{row['max_abs_logit_diff']:>10.1e}")
    result = {"benchmark": "query_latency", "config": config, "question_tokens": QUESTION_TOKENS,
              "copy_bandwidth_gbs": bandwidth, "machine": machine(), "foreign_cpu_share": foreign.share,
              "contexts": rows}
    path = write_json("query_latency" + ("_wide_kv" if args.wide_kv else "") + ("_quick" if args.quick else ""), result,
                      output_dir(args))
    first, last = rows[0], rows[-1]
    print(f"query_latency: probe p50 {first['probe_p50_ms']:.2f} ms @{first['context']} -> "
          f"{last['probe_p50_ms']:.2f} ms @{last['context']} ({last['probe_p50_ms'] / first['probe_p50_ms']:.2f}x); "
          f"stateless/probe {last['ratio_stateless_over_probe_p50']:.0f}x, kept-cache/probe "
          f"{last['ratio_kept_cache_over_probe_p50']:.2f}x @{last['context']}  [{path}]")
    say_load(foreign.share)
    return result


if __name__ == "__main__":
    keep_triton_out_without_cuda()
    main()
