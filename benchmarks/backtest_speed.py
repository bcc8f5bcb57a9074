"""Backtest speed: today's batch-by-batch path vs chunked evaluation, on the shared Binance trades, in one run.

Both sides are ``run_backtest`` with the built-in model and ``queries/examples/tick_model.yaml`` over the same
ticks and the same event-time batches (``batch_ms``): ``chunked=False`` runs the engine to idle after every
batch (one forward per batch), ``chunked=True`` advances many batches per forward and answers each batch's
due queries at its own cut. Reported: ticks/s of each (whole backtest: replay, engine, answer table, scores),
the speedup, and the largest difference between their answers (probabilities, expectations, NLLs), after
checking that both give the same rows (query, stream, seq, ticks, data_ts, text). The machine is shared: the
sides run interleaved, ``--rounds`` times in alternating order, and medians are reported, with the CPU time
of the process beside the wall time (``speedup_cpu``).

Both sides run the whole file by default (about a minute per round on 2 cores); ``--ticks N`` takes a slice.
``--also-batch-ms 10 1`` adds finer batches (closer to tick by tick) on the first ``--also-ticks`` trades,
where one forward per batch costs more and the chunked side about the same.

    python -m benchmarks.backtest_speed                          # the whole file, batch_ms 100
    python -m benchmarks.backtest_speed --also-batch-ms 10 1     # + finer batches on the first 4,000 trades
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.common import add_data_dir_argument, add_output_arguments, machine, output_dir, write_json
from engine.service.backtest import run_backtest
from engine.service.config import ServiceConfig

QUERIES = Path(__file__).resolve().parents[1] / "queries" / "examples" / "tick_model.yaml"
EXACT = ["query", "stream", "topic", "seq", "ticks", "data_ts", "text"]


def timed_backtest(trades: Path, out: Path, ticks: int | None, chunked: bool, batch_ms: float
                   ) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of this process, ticks replayed) for one whole backtest."""
    start, cpu = time.perf_counter(), time.process_time()
    report = run_backtest(ServiceConfig(), [trades], QUERIES, out, batch_ms=batch_ms, max_ticks=ticks,
                          progress=False, chunked=chunked)
    return time.perf_counter() - start, time.process_time() - cpu, report.ticks


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


def compare(trades: Path, out: Path, ticks: int | None, batch_ms: float, rounds: int) -> dict:
    """Both sides on the same ticks and batches, interleaved and repeated in alternating order (a shared
    machine's load hits each alike), medians reported; and how far their answers are apart."""
    times: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for r in range(rounds):
        for chunked in (False, True) if r % 2 == 0 else (True, False):
            name = "chunked" if chunked else "batches"
            wall, cpu, n = timed_backtest(trades, out / f"{name}.parquet", ticks, chunked, batch_ms)
            times[chunked].append((wall, cpu))
    diff, rows, mismatched = answer_diff(out / "batches.parquet", out / "chunked.parquet")
    batch_s, batch_cpu = (statistics.median(x) for x in zip(*times[False]))
    chunk_s, chunk_cpu = (statistics.median(x) for x in zip(*times[True]))
    side = lambda s, cpu, runs: {"seconds": s, "ticks_per_s": n / s, "cpu_seconds": cpu,  # noqa: E731
                                 "runs_seconds": [w for w, _ in runs]}
    return {"batch_ms": batch_ms, "ticks": n, "rounds": rounds, "batch_by_batch": side(batch_s, batch_cpu,
                                                                                       times[False]),
            "chunked": side(chunk_s, chunk_cpu, times[True]), "speedup": batch_s / chunk_s,
            "speedup_cpu": batch_cpu / chunk_cpu, "max_abs_diff": diff, "answers": rows,
            "rows_with_different_fields": mismatched}


def line(run: dict) -> str:
    return (f"{run['ticks']} trades, batch_ms {run['batch_ms']:g}: batch-by-batch "
            f"{run['batch_by_batch']['ticks_per_s']:,.1f} ticks/s, chunked {run['chunked']['ticks_per_s']:,.1f} "
            f"ticks/s, speedup {run['speedup']:.1f}x (CPU time {run['speedup_cpu']:.1f}x), max abs diff "
            f"{run['max_abs_diff']:.2e} over "
            f"{run['answers']} answers ({run['rows_with_different_fields']} rows differ)")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_dir_argument(parser)
    parser.add_argument("--ticks", type=int, default=None, help="replay only the first N trades (a slice)")
    parser.add_argument("--batch-ms", type=float, default=100.0, help="event-time batch (the headline figures)")
    parser.add_argument("--also-batch-ms", type=float, nargs="*", default=[],
                        help="finer batches, compared on the first --also-ticks trades")
    parser.add_argument("--also-ticks", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved repetitions of each side (medians)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    trades = args.data_dir / "binance-btcusdt-spot" / "trades.csv"
    if not trades.is_file():
        raise SystemExit(f"backtest_speed: {trades} not found (the shared Binance trades; see --data-dir)")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="flashtick-backtest-speed-") as tmp:
        out = Path(tmp)
        timed_backtest(trades, out / "warm.parquet", 200, True, args.batch_ms)  # warm-up: imports, allocator
        head = compare(trades, out, args.ticks, args.batch_ms, args.rounds)
        print(line(head), flush=True)
        also = []
        for batch_ms in args.also_batch_ms:
            also.append(compare(trades, out, args.also_ticks, batch_ms, args.rounds))
            print(line(also[-1]), flush=True)
    result = {
        "benchmark": "backtest_speed",
        "data": str(trades.relative_to(args.data_dir)),
        "queries": "queries/examples/tick_model.yaml",
        "model": "built-in",
        "slice": "the whole file" if args.ticks is None else f"the first {head['ticks']} trades of the file",
        **head,
        "finer_batches": also,
        "machine": machine(),
        "load_avg_1m_before_after": [load_before[0], os.getloadavg()[0]],
    }
    path = write_json("backtest_speed", result, output_dir(args))
    print(f"backtest_speed: {line(head)}  [{path}]")
    return result


if __name__ == "__main__":
    main()
