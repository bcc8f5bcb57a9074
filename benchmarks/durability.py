"""What the tick log costs on ingest, and how fast a restart recovers, on the built-in model.

Ingest: the same synthetic ticks (8 streams, messages of 100) through TickPipeline.ingest_message with
no log and with the log at each fsync policy, in one run: ticks/s of the ingest path alone (decode,
validate, encode, log, queue) and end to end with the engine computing the example queries. Recovery:
a fresh pipeline over the data directory replays the log (sessions rebuilt, queries off) vs feeding the
same ticks live (queries on); reported per 100k ticks. Slow consumer: a real server fed over ZeroMQ, with
and without a subscriber that never reads (tiny high-water mark), to the time every tick is computed.

    python -m benchmarks.durability                # 20,000 ticks
    python -m benchmarks.durability --ticks 100000 # the issue's recovery figure
    python -m benchmarks.durability --recovery-only --ticks 1000000 --streams 8     # a restart's time vs log size
    python -m benchmarks.durability --recovery-only --ticks 300000 --streams 300    # ... and vs stream count
    python -m benchmarks.durability --recovery-only --ticks 10000 --message-ticks 1 --answered  # answered live

``--recovery-only``: ticks logged through ingest alone (nothing computed, as a service whose every answer is
owed), then a fresh pipeline's start on that directory timed: replay, each window's rebuild and the owed answers
(JSON: ``durability_recovery.json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import torch
import zmq

from benchmarks.common import LOCAL_PORTS_EPILOG, add_output_arguments, machine, output_dir, write_json
from connectors.synthetic import DEFAULT_STREAMS, SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.cli import EXAMPLE_QUERIES
from connectors.feed import FeedClient
from engine.service.config import EndpointsSection, LogSection, ServiceConfig
from engine.service.pipeline import TickPipeline
from engine.service.server import Server


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
    seconds = time.perf_counter() - start
    pipeline.close()
    return seconds


def served(ticks: list, stalled_subscriber: bool) -> float:
    """Seconds from the first tick sent to a real server until every tick is in and computed."""
    endpoints = EndpointsSection(ingest="tcp://127.0.0.1:0", answers="tcp://127.0.0.1:0", control="tcp://127.0.0.1:0")
    server = Server(dataclasses.replace(config(None), endpoints=endpoints))
    server.bind()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.ready.wait(10)
    stalled = zmq.Context.instance().socket(zmq.SUB)
    if stalled_subscriber:  # subscribed to everything, reads nothing
        stalled.rcvhwm = 1
        stalled.rcvbuf = 4096
        stalled.connect(server.endpoints["answers"])
        stalled.setsockopt(zmq.SUBSCRIBE, b"")
        time.sleep(0.3)
    start = time.perf_counter()
    with FeedClient(server.endpoints["ingest"]) as client:
        for i in range(0, len(ticks), 100):
            client.send(ticks[i : i + 100])
        while server.pipeline.ticks_in < len(ticks) or server.pipeline.engine.busy:
            time.sleep(0.005)
    seconds = time.perf_counter() - start
    stalled.close(linger=0)
    server.stop()
    thread.join(30)
    return seconds


def recovery_only(ticks: int, streams: int, out_dir: Path, message_ticks: int = 100, answered: bool = False) -> dict:
    """A data directory of ``ticks`` ticks over ``streams`` streams, logged with nothing computed (``answered``:
    every message answered as it came, as a live service does); then the seconds a fresh pipeline takes to start
    on it (what a restart costs before the sockets are bound)."""
    market = SyntheticMarket(SyntheticConfig(seed=0, streams=tuple(
        dataclasses.replace(DEFAULT_STREAMS[i % 4], name=f"S{i}") for i in range(streams))))
    result: dict = {"benchmark": "durability_recovery", "ticks": ticks, "streams": streams,
                    "message_ticks": message_ticks, "answered": answered, "machine": machine(),
                    "load_avg_before": os.getloadavg(), "threads": torch.get_num_threads()}
    with tempfile.TemporaryDirectory(prefix="flashtick-recovery-") as tmp:
        part = market.next_batch(ticks)
        messages = [encode(part[i : i + message_ticks]) for i in range(0, ticks, message_ticks)]
        result["live_s"] = feed(TickPipeline(config(Path(tmp) / "data")), messages, answered)
        result["log_bytes"] = sum(f.stat().st_size for f in (Path(tmp) / "data" / "ticks").iterdir())
        start = time.perf_counter()
        recovered = TickPipeline(config(Path(tmp) / "data"))
        result["recovery_s"] = time.perf_counter() - start
        stats = recovered.data.stats()
        result.update(replay_and_rebuild_s=stats["recovery_s"], rebuild_forwards=stats["rebuild_forwards"],
                      owed_answers=len(recovered.recovered))
        assert recovered.ticks_in == ticks
        recovered.close()
    result["us_per_tick"] = result["recovery_s"] * 1e6 / ticks
    result["bytes_per_tick"] = result["log_bytes"] / ticks
    result["load_avg_after"] = os.getloadavg()
    path = write_json("durability_recovery", result, out_dir)
    print(f"recovery: {ticks:,} ticks of {streams} streams in messages of {message_ticks}"
          f"{', each answered' if answered else ''} "
          f"({result['bytes_per_tick']:.0f} B a tick) in "
          f"{result['recovery_s']:.1f} s = {result['us_per_tick']:.1f} us a tick, {result['owed_answers']} owed "
          f"answers, "
          f"{torch.get_num_threads()} threads, load {result['load_avg_before'][0]:.2f}  [{path}]")
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=LOCAL_PORTS_EPILOG)
    parser.add_argument("--ticks", type=int, default=20_000)
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions of every side (medians)")
    parser.add_argument("--recovery-only", action="store_true", help="only a restart's time on a logged directory")
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--message-ticks", type=int, default=100, help="ticks per logged message (--recovery-only)")
    parser.add_argument("--answered", action="store_true",
                        help="--recovery-only: every message answered as it came (the answer adaptation relearns)")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    if args.recovery_only:
        return recovery_only(args.ticks, args.streams, output_dir(args), args.message_ticks, args.answered)
    streams = tuple(dataclasses.replace(DEFAULT_STREAMS[i % 4], name=f"S{i}") for i in range(args.streams))
    ticks = SyntheticMarket(SyntheticConfig(seed=0, streams=streams)).next_batch(args.ticks)
    messages = [encode(ticks[i : i + 100]) for i in range(0, len(ticks), 100)]
    result: dict = {"benchmark": "durability", "ticks": args.ticks, "reps": args.reps, "machine": machine(),
                    "load_avg_before": os.getloadavg(), "ingest_only": {},
                    "end_to_end": {}}
    with tempfile.TemporaryDirectory(prefix="flashtick-durability-") as tmp:
        # sides interleaved, repeated, medians: a shared machine's load hits every side alike
        runs: dict[str, list[float]] = {}
        for rep in range(args.reps):
            for policy in ("off", "never", "group", "always"):
                data = None if policy == "off" else Path(tmp) / f"ingest-{policy}-{rep}"
                subset = messages if policy != "always" else messages[: max(1, len(messages) // 20)]
                seconds = feed(TickPipeline(config(data, "group" if policy == "off" else policy)), subset, False)
                runs.setdefault(policy, []).append(len(subset) * 100 / seconds)  # messages of 100 ticks
        for policy, rates in runs.items():
            result["ingest_only"][policy] = statistics.median(rates)
            print(f"ingest only, log {policy:>6}: {statistics.median(rates):,.0f} ticks/s (median of {len(rates)})",
                  flush=True)
        runs = {}
        for rep in range(args.reps):
            for policy in ("off", "group"):
                data = None if policy == "off" else Path(tmp) / f"e2e-{rep}"
                runs.setdefault(policy, []).append(args.ticks / feed(TickPipeline(config(data)), messages, True))
        for policy, rates in runs.items():
            result["end_to_end"][policy] = statistics.median(rates)
            print(f"end to end, log {policy:>6}: {statistics.median(rates):,.0f} ticks/s (median of {len(rates)})",
                  flush=True)
        start = time.perf_counter()
        recovered = TickPipeline(config(Path(tmp) / "e2e-0"))
        recovery_s = time.perf_counter() - start
        assert recovered.ticks_in == args.ticks
        recovered.close()
    slow = min(args.ticks, 5_000)
    none, stalled = [], []
    for _ in range(args.reps):
        none.append(served(ticks[:slow], False))
        stalled.append(served(ticks[:slow], True))
    result["slow_consumer"] = {"ticks": slow, "seconds_no_subscriber": statistics.median(none),
                               "seconds_stalled_subscriber": statistics.median(stalled)}
    result["slow_consumer"]["stalled_over_none_time"] = (result["slow_consumer"]["seconds_stalled_subscriber"]
                                                         / result["slow_consumer"]["seconds_no_subscriber"])
    print(f"slow consumer: {slow} ticks computed in {result['slow_consumer']['seconds_no_subscriber']:.2f} s with no "
          f"subscriber, {result['slow_consumer']['seconds_stalled_subscriber']:.2f} s with one that reads nothing",
          flush=True)
    live_s = args.ticks / result["end_to_end"]["off"]
    result.update(
        logged_over_unlogged_throughput=result["end_to_end"]["group"] / result["end_to_end"]["off"],
        logged_over_unlogged_ingest_only=result["ingest_only"]["group"] / result["ingest_only"]["off"],
        recovery_s_per_100k=recovery_s * 100_000 / args.ticks, live_s_per_100k=live_s * 100_000 / args.ticks,
        recovery_over_live_time=recovery_s / live_s)
    path = write_json("durability", result, output_dir(args))
    print(f"durability: logged/unlogged throughput {result['logged_over_unlogged_throughput']:.3f} end to end, "
          f"{result['logged_over_unlogged_ingest_only']:.3f} ingest only (fsync group); recovery "
          f"{result['recovery_s_per_100k']:.1f} s per 100k ticks = {result['recovery_over_live_time']:.2f}x live  "
          f"[{path}]")
    return result


if __name__ == "__main__":
    main()
