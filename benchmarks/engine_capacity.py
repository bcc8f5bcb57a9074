"""What one engine sustains: ticks/s at 1 torch thread with the 4 example queries on every stream.

The workload is the service's own step on the built-in tick model, through TickPipeline (ingest, plan, one
forward, commit, answers): S streams, every one of them ticking once a step, so every example query of every
stream (dir20, vol50, move50 on each batch; surprise on its move trigger) is due after each step. That is the
scanner's worst case, every name printing between two forwards; a step's ticks over its wall time is the rate the
engine keeps up with. Past it, `limits.when_behind` decides (lag, shed, conflate) or `--shards` adds engines
(docs/scale-out.md).

    python -m benchmarks.engine_capacity                      # 50, 200, 800 streams, ~10 s of steps each
    python -m benchmarks.engine_capacity --streams 100 --seconds 5

One comparable line: sustained ticks/s per stream count; JSON in engine_capacity.json.
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.common import add_output_arguments, machine, output_dir, percentiles, write_json
from benchmarks.threads import step_times
from engine.service.cli import EXAMPLE_QUERIES
from engine.service.config import ServiceConfig

HISTORY_TICKS = 16  # ticks each stream takes before the timed steps, so its questions see a context
WARM_UP_STEPS = 2


def sustained(streams: int, seconds: float, threads: int) -> dict:
    """Every stream ingests one tick, then the engine runs until idle; repeated for ``seconds`` of steps (at
    least 5 after 2 of warm-up), on the default KV pool (it holds 1,927 full windows on a host of 16 GiB or more:
    no eviction at these counts). Returns the step times (ms) and the ticks/s they sustain."""
    config = ServiceConfig.from_dict({"queries": str(EXAMPLE_QUERIES), "log": {"enabled": False},
                                      "model": {"threads": threads}})
    times = step_times(streams, WARM_UP_STEPS + 5, threads, config=config, history=HISTORY_TICKS, seconds=seconds)
    steps = times[WARM_UP_STEPS:]
    mean_ms = sum(steps) / len(steps)
    return {"streams": streams, "threads": threads, "steps": len(steps), **percentiles(steps),
            "mean_ms": mean_ms, "ticks_per_s": streams / (mean_ms / 1e3)}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[50, 200, 800])
    parser.add_argument("--seconds", type=float, default=10.0, help="timed steps per stream count")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (model.threads; shipped: 1)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    cells = []
    for streams in args.streams:
        cells.append(sustained(streams, args.seconds, args.threads))
        c = cells[-1]
        print(f"{streams} streams: step p50 {c['p50']:.1f} ms, mean {c['mean_ms']:.1f} ms -> "
              f"{c['ticks_per_s']:.0f} ticks/s", flush=True)
    result = {"benchmark": "engine_capacity", "threads": args.threads, "torch_threads": torch.get_num_threads(),
              "queries": str(EXAMPLE_QUERIES.name), "machine": machine(), "cells": cells}
    path = write_json("engine_capacity", result, output_dir(args))
    line = ", ".join(f"{c['streams']} streams {c['ticks_per_s']:.0f}" for c in cells)
    print(f"engine_capacity: sustained ticks/s at {args.threads} thread(s), 4 example queries on every stream, every "
          f"stream ticking each step: {line}  [{path}]")
    return result


if __name__ == "__main__":
    main()
