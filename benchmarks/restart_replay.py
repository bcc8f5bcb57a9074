"""How fast a restart replays a tick log of answered ticks, on the built-in model: the ticks/s a `serve` restart
reaches on `log.retention_bytes` of log (docs/configuration.md cites it).

A data directory is written as a live service writes it: ``--ticks`` synthetic ticks over ``--streams`` streams, in
messages of ``--message-ticks``, each message answered as it comes by one standing query of each trigger kind
(`batch`, `ticks`, `interval`, `move_bps`, `surprise`: their answers are logged, and a restart re-feeds them to the
answer adaptation). Then a fresh pipeline starts on a copy of it, ``--reps`` times: the CPU time of the replay
(the tick log read, encoded and booked, the answers re-fed), of the answer log read back, and of the tail (each
window's prefill), and the wall time of the whole start. CPU time, since the shared hosts this runs on are loaded.

    python -m benchmarks.restart_replay --ticks 50000 --streams 40
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import add_output_arguments, machine, output_dir, write_json
from connectors.synthetic import DEFAULT_STREAMS, SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service import durability, engine_restart
from engine.service.config import LogSection, ServiceConfig
from engine.service.pipeline import TickPipeline

QUERIES = """queries:
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: vol50, streams: ["*"], question: volatility_50, kind: choice, trigger: {ticks: 50}}
  - {name: move50, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {interval: 1s}}
  - {name: moved, streams: ["*"], question: direction_5, kind: choice, trigger: {move_bps: 3}}
  - {name: surprise, streams: ["*"], kind: surprise, trigger: batch, topic: "surprise/{stream}/"}
"""
PHASES = {"replay": (durability.DataDir, "replay"), "answers": (durability.DataDir, "restore_answers"),
          "tail": (engine_restart.EngineRestart, "_answer_tail")}


def config(data_dir: Path, queries: Path) -> ServiceConfig:
    base = dataclasses.replace(ServiceConfig(queries=str(queries)), log=LogSection(dir=str(data_dir)))
    return dataclasses.replace(base, model=dataclasses.replace(base.model, threads=1))


def write_log(data_dir: Path, queries: Path, ticks: int, streams: int, message_ticks: int) -> float:
    """The data directory, answered live; the seconds it took."""
    market = SyntheticMarket(SyntheticConfig(seed=0, streams=tuple(
        dataclasses.replace(DEFAULT_STREAMS[i % 4], name=f"S{i}") for i in range(streams))))
    batch = market.next_batch(ticks)
    pipeline = TickPipeline(config(data_dir, queries))
    start = time.perf_counter()
    for i in range(0, ticks, message_ticks):
        pipeline.ingest_message(encode(batch[i : i + message_ticks]))
        pipeline.step()
    pipeline.run_until_idle()
    pipeline.close()
    return time.perf_counter() - start


def timed_phases() -> tuple[dict[str, float], Callable[[], None]]:
    """CPU seconds of each restart phase (PHASES), filled as they run; and what puts the methods back."""
    spent: dict[str, float] = {}
    originals = {name: getattr(owner, method) for name, (owner, method) in PHASES.items()}

    def wrapped(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.process_time() - started
        return run

    for name, (owner, method) in PHASES.items():
        setattr(owner, method, wrapped(name, originals[name]))

    def restore() -> None:
        for name, (owner, method) in PHASES.items():
            setattr(owner, method, originals[name])
    return spent, restore


def restart(data_dir: Path, queries: Path, work: Path) -> dict[str, float]:
    """One start on a copy of ``data_dir``: wall and CPU seconds, each phase's CPU seconds, ticks recovered."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(data_dir, work)
    spent, put_back = timed_phases()
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        pipeline = TickPipeline(config(work, queries))
    finally:
        put_back()
    result = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
              **{f"{name}_cpu_s": seconds for name, seconds in spent.items()}, "ticks": pipeline.ticks_in}
    pipeline.close()
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=50_000)
    parser.add_argument("--streams", type=int, default=40)
    parser.add_argument("--message-ticks", type=int, default=20)
    parser.add_argument("--reps", type=int, default=2, help="restarts timed (medians)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    result: dict = {"benchmark": "restart_replay", "ticks": args.ticks, "streams": args.streams,
                    "message_ticks": args.message_ticks, "machine": machine(), "load_avg_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="flashtick-restart-") as tmp:
        queries = Path(tmp) / "q.yaml"
        queries.write_text(QUERIES)
        result["live_s"] = write_log(Path(tmp) / "data", queries, args.ticks, args.streams, args.message_ticks)
        result["log_bytes"] = sum(f.stat().st_size for f in (Path(tmp) / "data" / "ticks").iterdir())
        runs = [restart(Path(tmp) / "data", queries, Path(tmp) / "work") for _ in range(args.reps)]
    assert all(run["ticks"] == args.ticks for run in runs)
    result["runs"] = runs
    for key in runs[0]:
        result[key] = statistics.median(run[key] for run in runs)
    result["replay_ticks_per_cpu_s"] = args.ticks / result["replay_cpu_s"]
    result["replay_cpu_s_per_gib"] = result["replay_cpu_s"] / result["log_bytes"] * (1 << 30)
    result["load_avg_after"] = os.getloadavg()
    path = write_json("restart_replay", result, output_dir(args))
    print(f"restart_replay: {args.ticks:,} ticks of {args.streams} streams ({result['log_bytes'] / args.ticks:.0f} B a "
          f"tick): replay {result['replay_cpu_s']:.2f} s CPU = {result['replay_ticks_per_cpu_s']:,.0f} ticks/CPU-s "
          f"(~{result['replay_cpu_s_per_gib'] / 60:.0f} min a GiB), whole start {result['cpu_s']:.1f} s CPU, "
          f"{result['wall_s']:.1f} s wall, load {result['load_avg_before'][0]:.1f}  [{path}]")
    return result


if __name__ == "__main__":
    main()
