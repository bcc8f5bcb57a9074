"""Two commits side by side in one run: query latency and the flash-query loop, old vs new.

Each commit is checked out into its own temporary git worktree and measured by
its own code (so an API change between them does not matter), in child
processes with the same interpreter, threads and seeds. Rounds alternate the
order (old, new / new, old) so drift in the machine's load falls on both sides;
each metric is the median over rounds, and the line printed is new / old.

    python -m benchmarks.ab_commits --base 32c591f                 # HEAD vs 32c591f
    python -m benchmarks.ab_commits --base 32c591f --rounds 3 --streams 8 32 64
    python -m benchmarks.ab_commits --base 32c591f --rounds 7 --workloads query_latency

Metrics: probe p50 at each context (benchmarks.query_latency's workload), and
for the flash loop (benchmarks.flash's workload, flashtick's side only) the busy
milliseconds per answer round and freshness p50/p99 at the common rate, and the
highest sustained tick rate; ``bursts``: ticks/s of the flash loop fed 7 steps of
``--burst-ticks`` ticks of every stream (the most streams of ``--streams``), each
stream's step one open tick group (``python -m benchmarks.ab_commits --base B
--workloads bursts --streams 32``); ``backlog``: seconds (and forwards) to ingest and answer
``--backlog-ticks`` synthetic ticks of 4 streams sent as one message, as a feed catching up sends them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import add_output_arguments, machine, output_dir, write_json

ROOT = Path(__file__).resolve().parents[1]

QUERY_LATENCY = """
import json, random, sys
from benchmarks.query_latency import build_models, measure_context
hf, engine = build_models(0)
rng = random.Random(0)
rows = [measure_context(hf, engine, n, {reps}, 1, 20.0, rng) for n in {contexts}]
print("RESULT " + json.dumps({{str(r["context"]): r["probe_p50_ms"] for r in rows}}))
"""

FLASH = """
import json
from benchmarks.streaming import FlashtickDriver, Settings, run_workload
result = run_workload(lambda streams, ckpt, codec, window: [FlashtickDriver(ckpt, streams, window)],
                      Settings(), {streams}, None)
out = {{}}
for row in result["rows"]:
    side = row["sides"]["flashtick"]
    out[str(row["streams"])] = {{"ms_per_answer_round": side["common_rate"]["ms_per_answer_round"],
                                 "freshness_p50_ms": side["common_rate"]["freshness_p50_ms"],
                                 "freshness_p99_ms": side["common_rate"]["freshness_p99_ms"],
                                 "max_sustained_ticks_per_s": side["max_sustained_ticks_per_s"]}}
print("RESULT " + json.dumps(out))
"""

BURSTS = """
import gc, json, time
from benchmarks.streaming import FlashtickDriver, make_ticks, model_dir, window_policy
checkpoint, _ = model_dir(None)
window = window_policy(checkpoint)
out = {{}}
for per_step in {burst_ticks}:
    ticks = make_ticks({streams}, 64 + 7 * per_step, 0)
    names = sorted(ticks)
    driver = FlashtickDriver(checkpoint, {streams}, window)
    driver.reset({{name: t[:64] for name, t in ticks.items()}})
    gc.collect()
    gc.freeze()
    start = time.perf_counter()
    for step in range(7):  # each step: per_step ticks of every stream, one open group per stream
        driver.step([ticks[n][64 + step * per_step + k] for k in range(per_step) for n in names])
    out[str(per_step)] = {{"ticks_per_s": {streams} * 7 * per_step / (time.perf_counter() - start)}}
    gc.unfreeze()
print("RESULT " + json.dumps(out))
"""

BACKLOG = """
import gc, json, time
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
pipeline = TickPipeline(ServiceConfig.from_dict({{"queries": "queries/examples/tick_model.yaml"}}))
message = encode(SyntheticMarket(SyntheticConfig(seed=9)).next_batch({ticks}))
gc.collect()
gc.freeze()
start = time.perf_counter()
pipeline.ingest_message(message)  # one message: one tick group per stream, as a feed catching up sends it
pipeline.run_until_idle()
print("RESULT " + json.dumps({{"{ticks}": {{"seconds": time.perf_counter() - start,
                                         "forwards": pipeline.runner.stats.forwards}}}}))
"""


def checkout(rev: str, into: Path) -> str:
    """A detached worktree of ``rev``; returns its full commit id."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), rev], check=True,
                   capture_output=True)
    return subprocess.run(["git", "-C", str(into), "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def measure(tree: Path, code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"measuring {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def medians(runs: list[dict]) -> dict:
    """Median over rounds, key by key (nested one level for the flash metrics)."""
    first = runs[0]
    if all(isinstance(v, dict) for v in first.values()):
        return {k: medians([r[k] for r in runs]) for k in first}
    return {k: statistics.median(r[k] for r in runs) for k in first}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the old commit")
    parser.add_argument("--head", default="HEAD", help="the new commit (default HEAD)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--contexts", type=int, nargs="*", default=[512, 2048, 8192])
    parser.add_argument("--probe-reps", type=int, default=200)
    parser.add_argument("--streams", type=int, nargs="*", default=[8, 32, 64])
    parser.add_argument("--burst-ticks", type=int, nargs="*", default=[32, 128],
                        help="bursts workload: ticks of every stream per step (in one open group)")
    parser.add_argument("--backlog-ticks", type=int, default=8000,
                        help="backlog workload: ticks of 4 synthetic streams in one message")
    parser.add_argument("--workloads", nargs="*", choices=["query_latency", "flash", "bursts", "backlog"],
                        default=["query_latency", "flash"])
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    codes = {
        "query_latency": QUERY_LATENCY.format(reps=args.probe_reps, contexts=args.contexts),
        "flash": FLASH.format(streams=args.streams),
        "bursts": BURSTS.format(streams=max(args.streams), burst_ticks=args.burst_ticks),
        "backlog": BACKLOG.format(ticks=args.backlog_ticks),
    }
    workloads = {w: codes[w] for w in args.workloads}
    with tempfile.TemporaryDirectory(prefix="flashtick-ab-") as tmp:
        trees = {"old": Path(tmp) / "old", "new": Path(tmp) / "new"}
        commits = {"old": checkout(args.base, trees["old"]), "new": checkout(args.head, trees["new"])}
        try:
            runs: dict[str, dict[str, list[dict]]] = {w: {"old": [], "new": []} for w in workloads}
            for round_no in range(args.rounds):
                order = ("old", "new") if round_no % 2 == 0 else ("new", "old")
                for workload, code in workloads.items():
                    for side in order:
                        runs[workload][side].append(measure(trees[side], code))
                        print(f"round {round_no + 1} {workload} {side}: {runs[workload][side][-1]}", flush=True)
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                               capture_output=True)
    result = {"benchmark": "ab_commits", "commits": commits, "rounds": args.rounds, "machine": machine(),
              "threads": os.environ.get("OMP_NUM_THREADS", "torch default"), "workloads": {}}
    parts = []
    for workload, sides in runs.items():
        old, new = medians(sides["old"]), medians(sides["new"])
        ratios = {k: ({m: new[k][m] / old[k][m] if old[k][m] else None for m in new[k]}
                      if isinstance(new[k], dict) else new[k] / old[k]) for k in new}
        result["workloads"][workload] = {"old": old, "new": new, "new_over_old": ratios, "runs": sides}
    for context, ratio in result["workloads"].get("query_latency", {}).get("new_over_old", {}).items():
        parts.append(f"probe p50 @{context} {ratio:.3f}")
    for streams, ratio in result["workloads"].get("flash", {}).get("new_over_old", {}).items():
        parts.append(f"flash {streams} streams ms/round {ratio['ms_per_answer_round']:.3f}, "
                     f"sustained {ratio['max_sustained_ticks_per_s']:.2f}")
    for per_step, ratio in result["workloads"].get("bursts", {}).get("new_over_old", {}).items():
        parts.append(f"bursts of {per_step} ticks a stream ticks/s {ratio['ticks_per_s']:.2f}")
    for ticks, ratio in result["workloads"].get("backlog", {}).get("new_over_old", {}).items():
        parts.append(f"a backlog of {ticks} ticks in one message: time {ratio['seconds']:.3f}")
    name = "ab_commits" + ("" if workloads.keys() == {"query_latency", "flash"} else "_" + "_".join(workloads))
    path = write_json(name, result, output_dir(args))
    print(f"ab_commits new/old ({commits['new'][:7]} vs {commits['old'][:7]}): {'; '.join(parts)}  [{path}]")
    return result


if __name__ == "__main__":
    main()
