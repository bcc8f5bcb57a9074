"""Flash queries on the built-in tick model: 8, 32 and 64 streams, 3 standing questions each,
flashtick's engine loop vs the same workload answered statelessly (transformers re-prefills the
context + question for every answer). The workload and the virtual-time rate search are in
benchmarks/streaming.py.

Reports per stream count: ticks/s ingested at the highest sustained rate (freshness p99 <= SLO),
answer freshness (tick arrival -> answer cached) p50/p99 at a common per-stream rate, the
cached-answer read latency (AnswerCache.get), and the stateless ratio.

    python -m benchmarks.flash                # 8, 32, 64 streams, synthetic ticks
    python -m benchmarks.flash --replay       # ticks from --data-dir DIR (BTCUSDT; default ../shared/data)
"""

from __future__ import annotations

import argparse

from benchmarks.common import (add_output_arguments, keep_triton_out_without_cuda, machine, output_dir, require_extra,
                               write_json)
from benchmarks.streaming import (
    FlashtickDriver, Settings, StatelessDriver, add_arguments, plot_throughput, run_workload, settings_from,
)

STREAMS = (8, 32, 64)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, STREAMS)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    require_extra("bench", "matplotlib")  # the plot, drawn after the run
    settings = settings_from(args)

    def drivers(streams, checkpoint, codec, window):
        return [FlashtickDriver(checkpoint, streams, window), StatelessDriver(codec, window, checkpoint)]

    result = run_workload(drivers, settings, args.streams, args.model)
    result.update(benchmark="flash", machine=machine())
    for row in result["rows"]:
        ours, theirs = row["sides"]["flashtick"], row["sides"]["transformers stateless"]
        row["cached_read"] = ours["cached_read"]
        row["ratio_sustained_vs_stateless"] = (ours["max_sustained_ticks_per_s"] / theirs["max_sustained_ticks_per_s"]
                                               if theirs["max_sustained_ticks_per_s"] else None)
        row["ratio_ms_per_answer_round_stateless_over_flashtick"] = (
            theirs["common_rate"]["ms_per_answer_round"] / ours["common_rate"]["ms_per_answer_round"])
    name = "flash" + ("_replay" if args.replay else "")
    if settings.slo_ms != Settings().slo_ms:
        name += f"_slo{settings.slo_ms:.0f}"
    path = write_json(name, result, output_dir(args))
    plot_throughput(result, path.with_suffix(".png"), "Flash queries: sustained tick rate vs streams")
    parts = []
    for row in result["rows"]:
        f = row["sides"]["flashtick"]
        parts.append(f"{row['streams']}: {f['max_sustained_ticks_per_s']:.0f} ticks/s, p99 "
                     f"{f['common_rate']['freshness_p99_ms']:.1f} ms, stateless/flash per answer round "
                     f"{row['ratio_ms_per_answer_round_stateless_over_flashtick']:.0f}x")
    read = next((r["cached_read"] for r in result["rows"] if r["cached_read"]), {"mean_ns": float("nan")})
    print(f"flash: {'; '.join(parts)}; cached read {read['mean_ns']:.0f} ns  [{path}]")
    return result


if __name__ == "__main__":
    keep_triton_out_without_cuda()
    main()
