"""A seeded synthetic trading day (1M ticks over 4 streams) through the chunked backtest, against its FLOP floor.

The day is ``SyntheticMarket(seed=0)``'s first 1,000,000 ticks (SYN.A .. SYN.D). A backtest of all of it
takes long on a shared 2-core machine, so by default the first ``--ticks`` of the day are backtested (the
built-in model, ``queries/examples/tick_model.yaml``, batch_ms 100, chunked) and the whole day is
extrapolated linearly (the cost per tick is flat: sessions roll at a fixed window). The floor is the ingest
alone: 2 x parameters x tokens FLOPs (4 tokens per tick) at this CPU's matmul rate, measured in the same run
(a 1024^3 fp32 matmul at the thread count the backtest runs with, before and after it; the best is used).

    python -m benchmarks.backtest_day                  # the first 100,000 ticks of the day, extrapolated
    python -m benchmarks.backtest_day --ticks 1000000  # the whole day
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import tempfile
import time
from pathlib import Path

import polars as pl
import torch

from benchmarks.common import add_output_arguments, machine, output_dir, time_ms, write_json
from connectors.codec import TOKENS_PER_TICK
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.backtest import run_backtest
from engine.models import BUILTIN_MODEL_DIR
from engine.service.config import ServiceConfig

DAY_TICKS = 1_000_000
QUERIES = Path(__file__).resolve().parents[1] / "queries" / "examples" / "tick_model.yaml"


def matmul_gflops(n: int = 1024) -> float:
    """The fastest fp32 GEMM this CPU runs from torch: MKL's sgemm, or oneDNN's (2-3x MKL's on AMD CPUs,
    engine/models/linear.py), whichever is faster here."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    gemms = [lambda: a @ b]
    if torch.backends.mkldnn.is_available():
        packed = torch.ops.mkldnn._reorder_linear_weight(b)
        gemms.append(lambda: torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [], ""))
    best_ms = min(min(time_ms(gemm, reps=10, warmup=3)) for gemm in gemms)
    return 2 * n**3 / (best_ms / 1e3) / 1e9


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=100_000, help="ticks of the day backtested (the rest "
                                                                   "extrapolated)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    n = min(args.ticks, DAY_TICKS)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="flashtick-backtest-day-") as tmp:
        ticks = SyntheticMarket(SyntheticConfig(seed=0)).next_batch(n)
        data = Path(tmp) / "day.parquet"
        pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(data)
        del ticks
        # the warm-up also sets torch's threads to the config's (model.threads), which the rate is measured at
        run_backtest(ServiceConfig(), [data], QUERIES, Path(tmp) / "warm.parquet", max_ticks=500, progress=False)
        rate_before = matmul_gflops()
        start = time.perf_counter()
        report = run_backtest(ServiceConfig(), [data], QUERIES, Path(tmp) / "day_answers.parquet", progress=False)
        seconds = time.perf_counter() - start
    rate = max(rate_before, matmul_gflops())
    params = checkpoint_parameters(BUILTIN_MODEL_DIR)
    floor_s = 2 * params * n * TOKENS_PER_TICK / (rate * 1e9)
    day_s = seconds * DAY_TICKS / n
    result = {
        "benchmark": "backtest_day",
        "day": "SyntheticMarket(SyntheticConfig(seed=0)), first 1,000,000 ticks, 4 streams",
        "ticks": report.ticks,
        "answers": report.answers,
        "seconds": seconds,
        "ticks_per_s": report.ticks / seconds,
        "extrapolated": n < DAY_TICKS,
        "day_seconds": day_s,
        "day_minutes": day_s / 60,
        "parameters": params,
        "matmul_gflops": rate,
        "floor_seconds": floor_s,
        "floor_day_seconds": floor_s * DAY_TICKS / n,
        "over_floor": seconds / floor_s,
        "machine": machine(),
        "load_avg_1m_before_after": [load_before[0], os.getloadavg()[0]],
        # the process's peak resident memory: the engine, the model, the run (scored a part at a time)
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    path = write_json("backtest_day", result, output_dir(args))
    how = f"extrapolated from {n:,} ticks" if n < DAY_TICKS else "measured"
    print(f"backtest_day: {report.ticks / seconds:,.0f} ticks/s chunked, a 1M-tick day in {day_s / 60:.1f} min "
          f"({how}); floor {floor_s * DAY_TICKS / n / 60:.1f} min (2 x {params / 1e6:.2f}M params x "
          f"{TOKENS_PER_TICK} tokens/tick at {rate:.0f} GFLOP/s) = {seconds / floor_s:.1f}x the floor; peak RSS "
          f"{result['peak_rss_mb']:.0f} MB  [{path}]")
    return result


def checkpoint_parameters(model_dir: Path) -> int:
    """Parameters as the checkpoint stores them (the engine keeps its linear weights as prepacked buffers, so
    counting the loaded module's parameters() would miss them)."""
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as f:
        return sum(math.prod(f.get_slice(name).get_shape()) for name in f.keys())


if __name__ == "__main__":
    main()
