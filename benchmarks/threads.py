"""torch threads for the engine's forward: 1 vs 2, on a quiet machine and beside a busy process.

The shipped default (`model.threads`) is chosen from this. The workload is the
service's own step on the built-in tick model: S streams each take one tick
and answer the example queries' three questions in the same forward, through
TickPipeline (ingest, plan, one forward, commit). "Busy" starts one process
that spins on a core, as another job on a shared machine does.

    python -m benchmarks.threads                 # 32 streams, 200 steps per cell
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import subprocess
import sys
import time

import torch

from benchmarks.common import ForeignLoad, add_output_arguments, machine, output_dir, percentiles, say_load, write_json
from connectors.synthetic import DEFAULT_STREAMS, SyntheticConfig, SyntheticMarket
from engine.service.cli import EXAMPLE_QUERIES
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline


def step_times(streams: int, steps: int, threads: int, config: ServiceConfig | None = None, history: int = 64,
               seconds: float = 0.0) -> list[float]:
    """ms per step: every stream ingests one tick, then the engine runs until idle (advance + due questions); at
    least ``steps`` of them and ``seconds`` of them, after ``history`` ticks a stream so the questions see a
    context. ``config``: the service's (default: the example queries, the default KV pool)."""
    pipeline = TickPipeline(config or ServiceConfig(queries=str(EXAMPLE_QUERIES)), live_scores=False)
    try:
        torch.set_num_threads(threads)  # after the pipeline, which applies model.threads
        names = tuple(dataclasses.replace(DEFAULT_STREAMS[i % len(DEFAULT_STREAMS)], name=f"S{i:04d}")
                      for i in range(streams))
        market = SyntheticMarket(SyntheticConfig(seed=0, streams=names))
        for _ in range(history):
            for tick in market.next_batch(streams):
                pipeline.ingest(tick)
        pipeline.run_until_idle()
        times: list[float] = []
        start_all = time.perf_counter()
        while len(times) < steps or time.perf_counter() - start_all < seconds:
            for tick in market.next_batch(streams):
                pipeline.ingest(tick)
            start = time.perf_counter()
            pipeline.run_until_idle()
            times.append((time.perf_counter() - start) * 1e3)
        return times
    finally:
        pipeline.close()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=32)
    parser.add_argument("--steps", type=int, default=200)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    cells = []
    for load in ("quiet", "busy"):
        neighbour = (subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load == "busy" else None)
        try:
            for threads in (1, 2):
                with ForeignLoad() as foreign:  # ("busy": the spinner we started counts as foreign too)
                    times = step_times(args.streams, args.steps, threads)
                cells.append({"load": load, "threads": threads, **percentiles(times),
                              "mean_ms": statistics.fmean(times), "foreign_cpu_share": foreign.share})
                print(f"{load:>5} threads={threads}: step p50 {cells[-1]['p50']:.2f} ms, "
                      f"p99 {cells[-1]['p99']:.2f} ms  [other processes {100 * foreign.share:.0f}% CPU]", flush=True)
        finally:
            if neighbour is not None:
                neighbour.kill()
    by = {(c["load"], c["threads"]): c for c in cells}
    result = {"benchmark": "threads", "streams": args.streams, "steps": args.steps, "machine": machine(),
              "cells": cells,
              "two_over_one_p50": {load: by[(load, 2)]["p50"] / by[(load, 1)]["p50"] for load in ("quiet", "busy")}}
    path = write_json("threads", result, output_dir(args))
    ratio = result["two_over_one_p50"]
    print(f"threads: step p50 with 2 threads / 1 thread: quiet {ratio['quiet']:.2f}x, beside a busy process "
          f"{ratio['busy']:.2f}x ({args.streams} streams, built-in model)  [{path}]")
    # a "quiet" cell is quiet only if nothing else ran: say so when something did (the busy cells' spinner is ours)
    say_load(max(c["foreign_cpu_share"] for c in cells if c["load"] == "quiet"))
    return result


if __name__ == "__main__":
    main()
