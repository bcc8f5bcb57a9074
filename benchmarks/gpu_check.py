"""`make gpu-check`: the CUDA kernel tests, then workloads 1 and 2 on a ~1B-parameter Llama in bf16.

For a machine lent with a GPU (DEVELOPERS.md); fails at once, with a message, without CUDA.
Budget: under 8 minutes on one H100/H200-class GPU. Writes ONE JSON file:
$OUT/gpu_check.json when $OUT is set (the device runner's output folder), else
benchmarks/results/gpu_check.json.

  1. kernels   ``pytest -m gpu tests/test_kernels.py`` (Triton kernels vs their torch references)
  2. workload 1  16-token question latency at contexts 256..7k: flashtick probe vs transformers
                 stateless, random-weight Llama GPU_CONFIG (1.1B parameters), bf16, same tokens;
                 llama.cpp is not measured here (the peers wheel is a CPU build)
  3. workload 2  the streaming workload of benchmarks/streaming.py (8 and 32 streams, 3 questions
                 each) on a GPU_CONFIG-shaped model with the tick codec's vocabulary, bf16:
                 flashtick vs transformers stateless

    python -m benchmarks.gpu_check [--skip-kernels] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.common import RESULTS_DIR, machine, percentiles

GPU_CONFIG = dict(  # Llama-3.2-1B-like, with a 32k vocabulary: 1.1B parameters
    vocab_size=32000, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
    num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=8192,
)
CONTEXTS = (256, 1024, 2048, 4096, 7168)
QUESTION_TOKENS = 16


def require_cuda() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("gpu_check: CUDA is not available (torch.cuda.is_available() is False); "
                         "run it on a machine with an NVIDIA GPU and a CUDA build of torch")


def cuda_ms(fn, reps: int, warmup: int = 3) -> list[float]:
    """Wall ms per call with the device synchronised around each call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        fn()
        torch.cuda.synchronize()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return samples


def kernel_tests() -> dict:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                           "tests/test_kernels.py"], capture_output=True, text=True, timeout=240)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-15:]
    print("\n".join(tail), flush=True)
    return {"returncode": proc.returncode, "passed": proc.returncode == 0, "tail": tail,
            "wall_s": time.perf_counter() - started}


def workload1(quick: bool) -> dict:
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.kv_cache import CacheSpec
    from engine.models import from_hf_model
    from engine.engine import Engine
    from engine.runner import ModelRunner
    from engine.session import Session

    torch.manual_seed(0)
    with torch.device("cuda"):
        hf = LlamaForCausalLM(LlamaConfig(**GPU_CONFIG)).to(torch.bfloat16).eval()
    params = sum(p.numel() for p in hf.parameters())
    engine = Engine(ModelRunner(from_hf_model(hf, torch.bfloat16, "cuda"), CacheSpec(block_size=32, cells=8192 + 256)))
    rng = random.Random(0)
    stream = [rng.randrange(GPU_CONFIG["vocab_size"]) for _ in range(max(CONTEXTS))]
    questions = [[rng.randrange(GPU_CONFIG["vocab_size"]) for _ in range(QUESTION_TOKENS)] for _ in range(8)]
    rows = []
    for n in (CONTEXTS[:2] if quick else CONTEXTS):
        session = Session(f"ctx{n}")
        for start in range(0, n, 2048):
            engine.advance(session, stream[start : start + 2048], logits="none")
        i = iter(range(10**9))
        probe = cuda_ms(lambda: engine.probe(session, questions[next(i) % 8], logits="last"), 50, warmup=5)
        ids = [torch.tensor([stream[:n] + q], device="cuda") for q in questions]
        with torch.inference_mode():
            stateless = cuda_ms(lambda: hf(ids[next(i) % 8], logits_to_keep=1), 5, warmup=1)
            reference = hf(ids[0], logits_to_keep=1).logits[0, -1].float()
        diff = float((engine.probe(session, questions[0], logits="last")[-1] - reference).abs().max())
        engine.evict(session)
        row = {"context": n, "probe": percentiles(probe), "stateless": percentiles(stateless),
               "ratio_stateless_over_probe_p50": percentiles(stateless)["p50"] / percentiles(probe)["p50"],
               "max_abs_logit_diff_bf16": diff}
        rows.append(row)
        print(f"workload1 {n:>5}: probe p50 {row['probe']['p50']:.2f} ms, stateless p50 "
              f"{row['stateless']['p50']:.1f} ms ({row['ratio_stateless_over_probe_p50']:.0f}x), "
              f"max|diff| {diff:.2e}", flush=True)
    del hf, engine
    torch.cuda.empty_cache()
    return {"config": GPU_CONFIG, "parameters": params, "dtype": "bfloat16", "rows": rows}


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
    return streaming.run_workload(drivers, settings, [8] if quick else [8, 32], str(directory))


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-kernels", action="store_true")
    parser.add_argument("--quick", action="store_true", help="2 contexts, 8 streams only")
    args = parser.parse_args(argv)
    require_cuda()
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else RESULTS_DIR
    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict = {"benchmark": "gpu_check", "gpu": torch.cuda.get_device_name(), "machine": machine()}
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
