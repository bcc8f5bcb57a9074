"""`make gpu-check`: the CUDA kernel tests, then workloads 1 and 2 on a ~1B-parameter Llama in bf16.

For a machine lent with a GPU (DEVELOPERS.md); fails at once, with a message, without CUDA.
Budget: under 8 minutes on one H100/H200-class GPU. Writes ONE JSON file:
$OUT/gpu_check.json when $OUT is set (the device runner's output folder), else
benchmarks/results/local/gpu_check.json (git-ignored; ``--out-dir DIR``, or ``--save-reference`` for
benchmarks/results/).

  1. kernels   ``pytest -m gpu`` on tests/test_kernels.py, test_split_kv.py, test_fused.py and
                 test_cuda_graphs.py (Triton kernels vs their torch references, the fused decoder vs
                 transformers in fp32, graph replays vs eager forwards)
  2. workload 1  16-token question latency at contexts 1k..32k: flashtick probe vs transformers
                 with its kept DynamicCache (forward the question, crop back) and stateless,
                 random-weight Llama GPU_CONFIG (1.1B parameters), bf16, same tokens; per row
                 ``parity_vs_fp32``: the engine's bf16 logits and transformers' own bf16 logits,
                 each against the same weights run in fp32 by transformers (rounding the model
                 to bf16 also rounds its rotary inv_freq buffer: comparing engine bf16 with a
                 ``.to(bfloat16)`` transformers model measured that reference's error, not ours);
                 ``batched_probes``: 1/8/32/64 16-token probes at 2k context in one forward;
                 llama.cpp is not measured here (the peers wheel is a CPU build)
  3. workload 2  the streaming workload of benchmarks/streaming.py (8, 32 and 256 streams,
                 3 questions each) on a GPU_CONFIG-shaped model with the tick codec's
                 vocabulary, bf16: flashtick vs transformers stateless

    python -m benchmarks.gpu_check [--skip-kernels] [--quick]
    python -m benchmarks.gpu_check --smoke          # CPU, a tiny model: checks the script, measures nothing
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.common import add_output_arguments, cache_argument, crop_to, machine, output_dir, percentiles

GPU_CONFIG = dict(  # Llama-3.2-1B-like, with a 32k vocabulary: 1.1B parameters
    vocab_size=32000, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
    num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
)
CONTEXTS = (1024, 4096, 16384, 32768)
BATCHED_PROBES = (1, 8, 32, 64)
BATCHED_CONTEXT = 2048
QUESTION_TOKENS = 16
SMOKE_CONFIG = dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024)


def require_cuda() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("gpu_check: CUDA is not available (torch.cuda.is_available() is False); "
                         "run it on a machine with an NVIDIA GPU and a CUDA build of torch")


def synchronize() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def cuda_ms(fn, reps: int, warmup: int = 3) -> list[float]:
    """Wall ms per call with the device synchronised around each call."""
    for _ in range(warmup):
        fn()
    synchronize()
    samples = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        fn()
        synchronize()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return samples


def kernel_tests() -> dict:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                           "tests/test_kernels.py", "tests/test_split_kv.py", "tests/test_fused.py",
                           "tests/test_cuda_graphs.py"],
                          capture_output=True, text=True, timeout=240)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
    print("\n".join(tail), flush=True)
    return {"returncode": proc.returncode, "passed": proc.returncode == 0, "tail": tail,
            "wall_s": time.perf_counter() - started}


def workload1(quick: bool, smoke: bool = False) -> dict:
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    from engine.batch import Probe
    from engine.engine import Engine
    from engine.kv_cache import CacheSpec
    from engine.models import from_hf_model
    from engine.runner import ModelRunner
    from engine.session import Session

    device, config = ("cpu", SMOKE_CONFIG) if smoke else ("cuda", GPU_CONFIG)
    dtype = torch.float32 if smoke else torch.bfloat16
    contexts = (64, 256) if smoke else CONTEXTS[:2] if quick else CONTEXTS
    vocab = config["vocab_size"]
    torch.manual_seed(0)
    with torch.device(device):
        fp32 = LlamaForCausalLM(LlamaConfig(**{**config, "max_position_embeddings": max(contexts) + 256})).eval()
    hf = copy.deepcopy(fp32).to(dtype)  # transformers' own low-precision model (inv_freq rounded too)
    params = sum(p.numel() for p in fp32.parameters())
    batched_context = 128 if smoke else BATCHED_CONTEXT
    cells = max(contexts) + 256 + max(BATCHED_PROBES) * 32
    engine = Engine(ModelRunner(from_hf_model(fp32, dtype, device), CacheSpec(block_size=32, cells=cells)))
    rng = random.Random(0)
    stream = [rng.randrange(vocab) for _ in range(max(contexts))]
    questions = [[rng.randrange(vocab) for _ in range(QUESTION_TOKENS)] for _ in range(max(BATCHED_PROBES))]
    reps = 5 if smoke else 50
    rows = []
    for n in contexts:
        session = Session(f"ctx{n}")
        for start in range(0, n, 2048):  # the context in prefill chunks of at most 2048 tokens
            engine.advance(session, stream[start : min(n, start + 2048)], logits="none")
        assert len(session.tokens) == n
        i = iter(range(10**9))
        probe = cuda_ms(lambda: engine.probe(session, questions[next(i) % 8], logits="last"), reps, warmup=5)
        graphs, engine.runner.graphs = engine.runner.graphs, None  # the same probe, every forward eager
        probe_eager = cuda_ms(lambda: engine.probe(session, questions[next(i) % 8], logits="last"), reps, warmup=2)
        engine.runner.graphs = graphs
        with torch.inference_mode():
            cache = DynamicCache()
            hf(torch.tensor([stream[:n]], device=device), logits_to_keep=1, **{cache_argument(hf): cache},
               use_cache=True)

            def kept() -> None:
                hf(torch.tensor([questions[next(i) % 8]], device=device), logits_to_keep=1,
                   **{cache_argument(hf): cache}, use_cache=True)
                crop_to(cache, n)

            transformers_kept = cuda_ms(kept, reps, warmup=3)
            del cache
            ids = [torch.tensor([stream[:n] + q], device=device) for q in questions[:8]]
            stateless = cuda_ms(lambda: hf(ids[next(i) % 8], logits_to_keep=1), 2 if smoke else 5, warmup=1)
            exact = fp32(ids[0], logits_to_keep=1).logits[0, -1].float()
            theirs = hf(ids[0], logits_to_keep=1).logits[0, -1].float()
        ours = engine.probe(session, questions[0], logits="last")[-1].float()
        engine.evict(session)
        row = {"context": n, "probe": percentiles(probe), "probe_eager": percentiles(probe_eager),
               "transformers_kept": percentiles(transformers_kept),
               "stateless": percentiles(stateless),
               "ratio_kept_over_probe_p50": percentiles(transformers_kept)["p50"] / percentiles(probe)["p50"],
               "ratio_stateless_over_probe_p50": percentiles(stateless)["p50"] / percentiles(probe)["p50"],
               "parity_vs_fp32": {"engine_bf16": float((ours - exact).abs().max()),
                                  "transformers_bf16": float((theirs - exact).abs().max())}}
        rows.append(row)
        print(f"workload1 {n:>5}: probe p50 {row['probe']['p50']:.2f} ms (eager {row['probe_eager']['p50']:.2f}), "
              f"transformers kept "
              f"{row['transformers_kept']['p50']:.2f} ms ({row['ratio_kept_over_probe_p50']:.1f}x), stateless "
              f"{row['stateless']['p50']:.1f} ms; max|diff| vs fp32: engine "
              f"{row['parity_vs_fp32']['engine_bf16']:.3f}, "
              f"transformers {row['parity_vs_fp32']['transformers_bf16']:.3f}", flush=True)
    del fp32, hf
    batched = []
    session = Session("batched")
    engine.advance(session, stream[:batched_context], logits="none")
    for count in BATCHED_PROBES:
        items = [Probe(session, questions[j], "last") for j in range(count)]
        ms = cuda_ms(lambda: engine.run(items), reps, warmup=3)
        batched.append({"probes": count, "context": batched_context, "p50_ms": percentiles(ms)["p50"]})
        print(f"batched probes {count:>3} at {batched_context}: p50 {batched[-1]['p50_ms']:.2f} ms", flush=True)
    graph_stats = vars(engine.runner.graphs.stats) if engine.runner.graphs is not None else None
    del engine
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return {"config": config, "parameters": params, "dtype": str(dtype).removeprefix("torch."), "rows": rows,
            "batched_probes": batched, "cuda_graphs": graph_stats}


def workload2(quick: bool) -> dict:
    from transformers import LlamaConfig, LlamaForCausalLM

    from benchmarks import streaming
    from connectors.codec import BinnedCodec

    codec = BinnedCodec()
    directory = Path(tempfile.mkdtemp(prefix="flashtick-gpu-1b-"))
    torch.manual_seed(0)
    with torch.device("cuda"):
        hf = LlamaForCausalLM(LlamaConfig(**{**GPU_CONFIG, "vocab_size": codec.vocab_size,
                                             "max_position_embeddings": 1024})).to(torch.bfloat16)
    hf.save_pretrained(directory)
    del hf
    (directory / "codec.json").write_text(codec.to_json())

    def drivers(streams, checkpoint, codec, window):
        return [streaming.FlashtickDriver(checkpoint, streams, window, dtype="bfloat16", device="cuda"),
                streaming.StatelessDriver(codec, window, checkpoint, torch.bfloat16, "cuda")]

    settings = streaming.Settings(duration_s=1.0, refine=1, common_rate=20.0)
    return streaming.run_workload(drivers, settings, [8] if quick else [8, 32, 256], str(directory))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-kernels", action="store_true")
    parser.add_argument("--quick", action="store_true", help="2 contexts, 8 streams only")
    parser.add_argument("--smoke", action="store_true", help="on the CPU with a tiny model, workload 1 only: "
                        "checks this script runs; its numbers mean nothing")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.smoke:
        torch.set_num_threads(1)
        result = {"benchmark": "gpu_check", "smoke": True, "workload1": workload1(False, smoke=True)}
        print("gpu_check --smoke: ok (CPU, tiny model: nothing measured)")
        return result
    require_cuda()
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else output_dir(args)
    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict = {"benchmark": "gpu_check", "gpu": torch.cuda.get_device_name(), "machine": machine()}
    result["batched_probes"] = []  # filled from workload 1 (a top-level key of the contract)
    started = time.perf_counter()
    path = out_dir / "gpu_check.json"
    for name, run in (("kernels", None if args.skip_kernels else kernel_tests),
                      ("workload1", lambda: workload1(args.quick)), ("workload2", lambda: workload2(args.quick))):
        if run is None:
            continue
        try:
            result[name] = run()
        except Exception as e:  # keep what the other parts measured: one failure must not lose the file
            result[name] = {"error": f"{type(e).__name__}: {e}"}
            print(f"gpu_check: {name} failed: {e}", flush=True)
        if name == "workload1" and "batched_probes" in result[name]:
            result["batched_probes"] = result[name]["batched_probes"]
        path.write_text(json.dumps(result, indent=2, default=str) + "\n")  # after each part
    result["wall_s"] = time.perf_counter() - started
    path.write_text(json.dumps(result, indent=2, default=str) + "\n")
    ok = result.get("kernels", {"passed": True}).get("passed") and not any(
        "error" in result.get(k, {}) for k in ("workload1", "workload2"))
    w1 = result.get("workload1", {}).get("rows", [{}])[-1]
    print(f"gpu_check: {'ok' if ok else 'FAILED'} in {result['wall_s']:.0f} s; probe p50 "
          f"{w1.get('probe', {}).get('p50', float('nan')):.2f} ms @{w1.get('context')} (1.1B bf16)  [{path}]")
    if not ok:
        raise SystemExit(1)
    return result


if __name__ == "__main__":
    main()
