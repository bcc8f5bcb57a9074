"""Workload 2: streaming ticks with 3 standing questions per stream, flashtick vs llama.cpp vs
transformers stateless, on the built-in tick model (benchmarks/streaming.py describes the workload).

  flashtick            the engine loop: ticks -> codec -> one batched forward per step that advances
                       every stream and evaluates all due questions as probes
  llama.cpp            one Llama per stream on the same mmap'd GGUF (exported from the same
                       checkpoint), KV kept, new ticks eval'd, each question eval'd and rolled back
  stateless            transformers re-prefills context + question for every answer

    python -m benchmarks.peers_streaming                 # 1, 8, 32 streams, synthetic ticks
    python -m benchmarks.peers_streaming --replay        # ticks from --data-dir DIR (BTCUSDT; default ../shared/data)
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from benchmarks.common import RESULTS_DIR, machine, write_json
from benchmarks.gguf_export import export_gguf
from benchmarks.streaming import (
    FlashtickDriver, LlamaCppDriver, Settings, StatelessDriver, add_arguments, plot_throughput, run_workload,
    settings_from,
)

STREAMS = (1, 8, 32)
TARGET_RATIO_32 = 5.9  # the target: flashtick sustains >= 5.9x llama.cpp's tick rate at 32 streams


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, STREAMS)
    parser.add_argument("--no-stateless", action="store_true", help="skip the transformers side")
    args = parser.parse_args(argv)
    import llama_cpp

    settings = settings_from(args)
    ggufs: dict[Path, Path] = {}

    def drivers(streams, checkpoint, codec, window):
        if checkpoint not in ggufs:
            ggufs[checkpoint] = export_gguf(checkpoint, Path(tempfile.mkdtemp(prefix="flashtick-gguf-")) / "tick.gguf")
        out = [FlashtickDriver(checkpoint, streams, window),
               LlamaCppDriver(codec, window, ggufs[checkpoint], n_ctx=window.positions)]
        return out + ([] if args.no_stateless else [StatelessDriver(codec, window, checkpoint)])

    result = run_workload(drivers, settings, args.streams, args.model)
    result.update(benchmark="peers_streaming", llama_cpp_python=llama_cpp.__version__, machine=machine())
    for row in result["rows"]:
        sides = row["sides"]
        ours = sides["flashtick"]["max_sustained_ticks_per_s"]
        row["ratio_sustained_vs"] = {  # None where the peer sustains no rate at all
            n: ours / s["max_sustained_ticks_per_s"] if s["max_sustained_ticks_per_s"] else None
            for n, s in sides.items() if n != "flashtick"}
        row["ratio_ms_per_answer_round_vs"] = {n: s["common_rate"]["ms_per_answer_round"]
                                               / sides["flashtick"]["common_rate"]["ms_per_answer_round"]
                                               for n, s in sides.items() if n != "flashtick"}
    name = "peers_streaming" + ("_replay" if args.replay else "")
    if settings.slo_ms != Settings().slo_ms:
        name += f"_slo{settings.slo_ms:.0f}"
    path = write_json(name, result)
    plot_throughput(result, RESULTS_DIR / f"{name}.png", "Workload 2: sustained tick rate vs streams")
    last = result["rows"][-1]
    ratio = last["ratio_sustained_vs"].get("llama.cpp")
    print(f"peers_streaming: {last['streams']} streams sustained flashtick "
          f"{last['sides']['flashtick']['max_sustained_ticks_per_s']:.0f} ticks/s, llama.cpp "
          f"{last['sides']['llama.cpp']['max_sustained_ticks_per_s']:.0f} ticks/s "
          f"({'n/a' if ratio is None else f'{ratio:.1f}x'}; target {TARGET_RATIO_32}x); "
          f"freshness p99 @{settings.common_rate:.0f}/stream flashtick "
          f"{last['sides']['flashtick']['common_rate']['freshness_p99_ms']:.1f} ms vs llama.cpp "
          f"{last['sides']['llama.cpp']['common_rate']['freshness_p99_ms']:.1f} ms  [{path}]")
    return result


if __name__ == "__main__":
    main()
