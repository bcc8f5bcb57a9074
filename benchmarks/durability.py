"""What the tick log costs on ingest, and how fast a restart recovers, on the built-in model.

Ingest: the same synthetic ticks (8 streams, messages of 100) through TickPipeline.ingest_message with
no log and with the log at each fsync policy, in one run: ticks/s of the ingest path alone (decode,
validate, encode, log, queue) and end to end with the engine computing the example queries. Recovery:
a fresh pipeline over the data directory replays the log (sessions rebuilt, queries off) vs feeding the
same ticks live (queries on); reported per 100k ticks.

    python -m benchmarks.durability                # 20,000 ticks
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

from benchmarks.common import machine, write_json
from connectors.synthetic import DEFAULT_STREAMS, SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.cli import EXAMPLE_QUERIES
from engine.service.config import LogSection, ServiceConfig
from engine.service.pipeline import TickPipeline


def config(data_dir: Path | None, fsync: str = "group") -> ServiceConfig:
    return dataclasses.replace(ServiceConfig(queries=str(EXAMPLE_QUERIES)),
                               log=LogSection(dir=str(data_dir) if data_dir else None, fsync=fsync))


def feed(pipeline: TickPipeline, messages: list[bytes], compute: bool) -> float:
    """Seconds to take every message in (and, with ``compute``, to answer everything due)."""
    start = time.perf_counter()
    for message in messages:
        pipeline.ingest_message(message)
        if compute:
            pipeline.step()
    if compute:
        pipeline.run_until_idle()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=20_000)
    args = parser.parse_args(argv)
    streams = tuple(dataclasses.replace(DEFAULT_STREAMS[i % 4], name=f"S{i}") for i in range(8))
    ticks = SyntheticMarket(SyntheticConfig(seed=0, streams=streams)).next_batch(args.ticks)
    messages = [encode(ticks[i : i + 100]) for i in range(0, len(ticks), 100)]
    result: dict = {"benchmark": "durability", "ticks": args.ticks, "machine": machine(), "ingest_only": {},
                    "end_to_end": {}}
    with tempfile.TemporaryDirectory(prefix="flashtick-durability-") as tmp:
        for policy in ("off", "never", "group", "always"):
            data = None if policy == "off" else Path(tmp) / f"ingest-{policy}"
            seconds = feed(TickPipeline(config(data, "group" if policy == "off" else policy)), messages, False)
            result["ingest_only"][policy] = args.ticks / seconds
            print(f"ingest only, log {policy:>6}: {args.ticks / seconds:,.0f} ticks/s", flush=True)
        for policy in ("off", "group"):
            data = None if policy == "off" else Path(tmp) / "e2e"
            seconds = feed(TickPipeline(config(data)), messages, True)
            result["end_to_end"][policy] = args.ticks / seconds
            print(f"end to end, log {policy:>6}: {args.ticks / seconds:,.0f} ticks/s", flush=True)
        start = time.perf_counter()
        recovered = TickPipeline(config(Path(tmp) / "e2e"))
        recovery_s = time.perf_counter() - start
        assert recovered.ticks_in == args.ticks
    live_s = args.ticks / result["end_to_end"]["off"]
    result.update(
        logged_over_unlogged_throughput=result["end_to_end"]["group"] / result["end_to_end"]["off"],
        logged_over_unlogged_ingest_only=result["ingest_only"]["group"] / result["ingest_only"]["off"],
        recovery_s_per_100k=recovery_s * 100_000 / args.ticks, live_s_per_100k=live_s * 100_000 / args.ticks,
        recovery_over_live_time=recovery_s / live_s)
    path = write_json("durability", result)
    print(f"durability: logged/unlogged throughput {result['logged_over_unlogged_throughput']:.3f} end to end, "
          f"{result['logged_over_unlogged_ingest_only']:.3f} ingest only (fsync group); recovery "
          f"{result['recovery_s_per_100k']:.1f} s per 100k ticks = {result['recovery_over_live_time']:.2f}x live  [{path}]")
    return result


if __name__ == "__main__":
    main()
