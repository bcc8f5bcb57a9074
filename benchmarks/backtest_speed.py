"""Backtest speed: today's batch-by-batch path vs chunked evaluation, on the shared Binance trades, in one run.

Both sides are ``run_backtest`` with the built-in model and ``queries/examples/tick_model.yaml`` over the same
ticks and the same event-time batches (``batch_ms``): ``chunked=False`` runs the engine to idle after every
batch (one forward per batch), ``chunked=True`` advances many batches per forward and answers each batch's
due queries at its own cut. Reported: ticks/s of each (whole backtest: replay, engine, answer table, scores),
the speedup, and the largest difference between their answers (probabilities, expectations, NLLs), after
checking that both give the same rows (query, stream, seq, ticks, data_ts, text).

The batch-by-batch side takes minutes per few thousand ticks on a 2-core machine, so both sides run on the
first ``--ticks`` trades (a slice, recorded in the JSON); the chunked side also runs the whole file.

    python -m benchmarks.backtest_speed                 # first 4,000 trades both ways + the whole file chunked
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.common import add_data_dir_argument, machine, write_json
from engine.service.backtest import run_backtest
from engine.service.config import ServiceConfig

QUERIES = Path(__file__).resolve().parents[1] / "queries" / "examples" / "tick_model.yaml"
EXACT = ["query", "stream", "topic", "seq", "ticks", "data_ts", "text"]


def timed_backtest(trades: Path, out: Path, ticks: int | None, chunked: bool, batch_ms: float) -> tuple[float, int]:
    """(seconds, ticks replayed) for one whole backtest."""
    start = time.perf_counter()
    report = run_backtest(ServiceConfig(), [trades], QUERIES, out, batch_ms=batch_ms, max_ticks=ticks,
                          progress=False, chunked=chunked)
    return time.perf_counter() - start, report.ticks


def answer_diff(a: Path, b: Path) -> tuple[float, int, int]:
    """(max abs diff of the numeric answers, rows, rows whose exact fields differ) of two answer tables."""
    x, y = (pl.read_parquet(p).sort(["query", "stream", "seq"]) for p in (a, b))
    if x.height != y.height:
        return float("inf"), x.height, abs(x.height - y.height)
    mismatched = sum(1 for r, s in zip(x.select(EXACT).iter_rows(), y.select(EXACT).iter_rows()) if r != s)
    diff = 0.0
    for column in ("expected", "nll"):
        diff = max(diff, float(np.nanmax(np.abs(x[column].to_numpy() - y[column].to_numpy()), initial=0.0)))
    for p, q in zip(x["probs"], y["probs"]):
        if p is not None and q is not None:
            pd, qd = json.loads(p), json.loads(q)
            diff = max(diff, max(abs(pd[k] - qd.get(k, float("inf"))) for k in pd))
    return diff, x.height, mismatched


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_dir_argument(parser)
    parser.add_argument("--ticks", type=int, default=4000, help="trades replayed by both sides (a slice)")
    parser.add_argument("--batch-ms", type=float, default=100.0)
    parser.add_argument("--skip-full", action="store_true", help="do not also run the whole file chunked")
    args = parser.parse_args(argv)
    trades = args.data_dir / "binance-btcusdt-spot" / "trades.csv"
    if not trades.is_file():
        raise SystemExit(f"backtest_speed: {trades} not found (the shared Binance trades; see --data-dir)")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="flashtick-backtest-speed-") as tmp:
        out = Path(tmp)
        timed_backtest(trades, out / "warm.parquet", 200, True, args.batch_ms)  # warm-up: model load, allocator
        batch_s, n = timed_backtest(trades, out / "batches.parquet", args.ticks, False, args.batch_ms)
        chunk_s, n_chunked = timed_backtest(trades, out / "chunked.parquet", args.ticks, True, args.batch_ms)
        assert n == n_chunked
        diff, rows, mismatched = answer_diff(out / "batches.parquet", out / "chunked.parquet")
        full = None
        if not args.skip_full:
            full_s, full_n = timed_backtest(trades, out / "full.parquet", None, True, args.batch_ms)
            full = {"ticks": full_n, "seconds": full_s, "ticks_per_s": full_n / full_s}
    result = {
        "benchmark": "backtest_speed",
        "data": str(trades.relative_to(args.data_dir)),
        "queries": "queries/examples/tick_model.yaml",
        "model": "built-in",
        "batch_ms": args.batch_ms,
        "slice": f"first {n} trades of the file, both sides (the batch-by-batch side is too slow for the whole file)",
        "ticks": n,
        "batch_by_batch": {"seconds": batch_s, "ticks_per_s": n / batch_s},
        "chunked": {"seconds": chunk_s, "ticks_per_s": n / chunk_s},
        "chunked_whole_file": full,
        "speedup": batch_s / chunk_s,
        "max_abs_diff": diff,
        "answers": rows,
        "rows_with_different_fields": mismatched,
        "machine": machine(),
        "load_avg_1m_before_after": [load_before[0], os.getloadavg()[0]],
    }
    path = write_json("backtest_speed", result)
    whole = f"; whole file chunked {full['ticks_per_s']:,.0f} ticks/s" if full else ""
    print(f"backtest_speed: {n} trades, batch-by-batch {n / batch_s:,.1f} ticks/s, chunked {n / chunk_s:,.1f} "
          f"ticks/s, speedup {result['speedup']:.1f}x, max abs diff {diff:.2e} over {rows} answers "
          f"({mismatched} rows differ){whole}  [{path}]")
    return result


if __name__ == "__main__":
    main()
