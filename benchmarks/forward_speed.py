"""The CPU forward at small batches, one engine per linear-weight format, all in one run.

The peers' tiny Llama (benchmarks.peers_latency.BENCH_CONFIG, seeded), the same tokens on every side:
  probe      a 16-token question on a session holding 256 / 1k / 4k / 7k tokens (nothing committed)
  tick       a 4-token advance (one tick of the built-in codec) on a session near 1k tokens
  batch      one forward advancing 32 sessions by 8 tokens each (256 rows: workload 2's ingest shape)
Sides (engine/models/linear.py): ``torch`` (nn.Linear as loaded: the earlier path), ``float32-mkl``
(transposed weights, torch.mm), ``float32-onednn`` (oneDNN-packed fp32 weights; ``float32``, the default,
is one of these two by CPU vendor), ``bfloat16`` (oneDNN-packed bf16 weights, fp32 accumulation, fp32
activations and KV). Rounds alternate the sides' order; each number is the median over rounds of
each round's p50. Logits are compared with the ``torch`` side before timing.

    python -m benchmarks.forward_speed                 # 5 rounds
    python -m benchmarks.forward_speed --rounds 3 --contexts 256 1024 --threads 1
"""

from __future__ import annotations

import argparse
import random
import statistics

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from benchmarks.common import (add_output_arguments, keep_triton_out_without_cuda, machine, output_dir, percentiles,
                               time_ms, write_json)
from benchmarks.peers_latency import BENCH_CONFIG, QUESTION_TOKENS
from benchmarks.common import ForeignLoad
from engine.batch import Advance
from engine.engine import Engine
from engine.kv_cache import CacheSpec
from engine.models import from_hf_model
from engine.models.linear import resolve_format
from engine.runner import ModelRunner
from engine.session import Session

SIDES = ("torch", "float32-mkl", "float32-onednn", "bfloat16")
CONTEXTS = (256, 1024, 4096, 7168)
TICK_TOKENS = 4
BATCH_STREAMS, BATCH_TOKENS = 32, 8


class Side:
    """One engine over the shared weights, with its sessions already holding their contexts."""

    def __init__(self, hf: LlamaForCausalLM, weights: str, stream: list[int], contexts: list[int]) -> None:
        cells = max(contexts) + 64 * 1024
        self.engine = Engine(ModelRunner(from_hf_model(hf, weights=weights), CacheSpec(block_size=32, cells=cells)))
        self.stream = stream
        self.sessions = {n: self._session(f"ctx{n}", stream[:n]) for n in contexts}
        self.reset_advancing()

    def reset_advancing(self) -> None:
        """The sessions the tick and batch workloads grow, back at their starting lengths (untimed)."""
        for session in [getattr(self, "ticker", None)] + getattr(self, "batch", []):
            if session is not None:
                self.engine.evict(session)
        self.ticker = self._session("tick", self.stream[:1024])
        self.batch = [self._session(f"b{i}", self.stream[i : i + 200]) for i in range(BATCH_STREAMS)]

    def _session(self, name: str, tokens: list[int]) -> Session:
        session = Session(name)
        for start in range(0, len(tokens), 2048):
            self.engine.advance(session, tokens[start : start + 2048], logits="none")
        return session

    def probe(self, context: int, question: list[int]) -> torch.Tensor:
        return self.engine.probe(self.sessions[context], question, logits="last")

    def tick(self, tokens: list[int]) -> torch.Tensor:
        return self.engine.advance(self.ticker, tokens, logits="last")

    def advance_batch(self, tokens: list[int]) -> list[torch.Tensor]:
        return self.engine.run([Advance(s, tokens, "last") for s in self.batch])


def workloads(contexts: list[int], questions: list[list[int]], rng: random.Random) -> dict[str, tuple]:
    """name -> (method, argument list cycled through, reps)."""
    ticks = [[rng.randrange(BENCH_CONFIG["vocab_size"]) for _ in range(TICK_TOKENS)] for _ in range(16)]
    chunks = [[rng.randrange(BENCH_CONFIG["vocab_size"]) for _ in range(BATCH_TOKENS)] for _ in range(4)]
    out = {f"probe@{n}": (lambda side, q, n=n: side.probe(n, q), questions, 100) for n in contexts}
    out[f"tick {TICK_TOKENS} tokens @1k"] = (Side.tick, ticks, 100)
    out[f"batch {BATCH_STREAMS}x{BATCH_TOKENS} tokens"] = (Side.advance_batch, chunks, 10)
    return out


def logit_diffs(sides: dict[str, Side], contexts: list[int], question: list[int]) -> dict[str, float]:
    """Max |logit - torch side's| over the question's last row at every context."""
    base = {n: sides["torch"].probe(n, question) for n in contexts}
    return {name: max(float((side.probe(n, question) - base[n]).abs().max()) for n in contexts)
            for name, side in sides.items()}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--contexts", type=int, nargs="*", default=list(CONTEXTS))
    parser.add_argument("--sides", nargs="*", default=list(SIDES), choices=SIDES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    hf = LlamaForCausalLM(LlamaConfig(**BENCH_CONFIG)).eval()
    rng = random.Random(args.seed)
    vocab = BENCH_CONFIG["vocab_size"]
    stream = [rng.randrange(vocab) for _ in range(max(args.contexts))]
    questions = [[rng.randrange(vocab) for _ in range(QUESTION_TOKENS)] for _ in range(32)]
    sides = {name: Side(hf, name, stream, args.contexts) for name in ["torch"] + [s for s in args.sides
                                                                                  if s != "torch"]}
    diffs = logit_diffs(sides, args.contexts, questions[0])
    jobs = workloads(args.contexts, questions, rng)
    samples: dict[str, dict[str, list[float]]] = {w: {s: [] for s in sides} for w in jobs}
    shares = []
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for side in sides.values():
            side.reset_advancing()
        with ForeignLoad() as foreign:
            for work, (method, items, reps) in jobs.items():
                for name in order:
                    state = {"i": 0}

                    def call(side=sides[name], method=method, items=items, state=state):
                        state["i"] += 1
                        return method(side, items[state["i"] % len(items)])
                    samples[work][name].append(percentiles(time_ms(call, reps, warmup=5))["p50"])
        shares.append(foreign.share)
    rows = {w: {s: statistics.median(v) for s, v in per.items()} for w, per in samples.items()}
    print(f"threads {torch.get_num_threads()}, rounds {args.rounds}, other processes "
          f"{100 * statistics.median(shares):.0f}% CPU (median over rounds); p50 ms, median over rounds")
    print(f"{'workload':>26} " + " ".join(f"{s:>10}" for s in sides) + "   best / torch")
    for work, per in rows.items():
        best = min(v for s, v in per.items() if s != "torch")
        print(f"{work:>26} " + " ".join(f"{per[s]:>10.3f}" for s in sides) + f"   {best / per['torch']:.2f}x")
    print("max |logit diff| vs torch side: " + ", ".join(f"{s} {d:.2g}" for s, d in diffs.items()))
    result = {"benchmark": "forward_speed", "config": BENCH_CONFIG, "rounds": args.rounds, "machine": machine(),
              "float32_is": resolve_format("float32"),
              "foreign_cpu_share_per_round": shares, "p50_ms_median_over_rounds": rows,
              "p50_ms_per_round": samples, "max_abs_logit_diff_vs_torch": diffs}
    path = write_json("forward_speed", result, output_dir(args))
    probe = [w for w in rows if w.startswith("probe@")]
    print("forward_speed: probe p50 " + ", ".join(
        f"@{w[6:]} {rows[w]['torch']:.2f}->" + "/".join(f"{rows[w][s]:.2f}" for s in sides if s != "torch")
        for w in probe)
          + f" ms (torch->{'/'.join(s for s in sides if s != 'torch')}; float32 = {resolve_format('float32')}); batch "
          + "/".join(f"{v:.1f}" for v in rows[f"batch {BATCH_STREAMS}x{BATCH_TOKENS} tokens"].values())
          + f" ms  [{path}]")
    return result


if __name__ == "__main__":
    keep_triton_out_without_cuda()
    main()
