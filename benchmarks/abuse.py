"""A burst of new streams against a live server: control latency during it, time to absorb it, memory.

20,000 one-tick streams arrive in under a second (the shape of a feed bug or an
attack); an existing stream keeps ticking. Measured over real sockets on
127.0.0.1: `health` round-trip latency while the burst is absorbed, how long
until the engine is idle again, when the existing stream's next answer comes,
RSS growth, and RSS after the burst's streams expire (scheduler.stream_idle_s).

    python -m benchmarks.abuse                   # 20,000 streams
"""

from __future__ import annotations

import argparse
import dataclasses
import resource
import threading
import time

from benchmarks.common import LOCAL_PORTS_EPILOG, add_output_arguments, machine, output_dir, percentiles, write_json
from connectors.synthetic import DEFAULT_STREAMS, SyntheticConfig, SyntheticMarket
from connectors.ticks import encode, trade
from engine.service.cli import EXAMPLE_QUERIES
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.config import EndpointsSection, ServiceConfig
from engine.service.server import Server

import zmq


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=LOCAL_PORTS_EPILOG)
    parser.add_argument("--streams", type=int, default=20_000)
    parser.add_argument("--idle-s", type=float, default=20.0, help="scheduler.stream_idle_s for the run")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    local = "tcp://127.0.0.1:0"
    config = dataclasses.replace(ServiceConfig(queries=str(EXAMPLE_QUERIES)),
                                 endpoints=EndpointsSection(ingest=local, answers=local, control=local))
    config = dataclasses.replace(config, scheduler=dataclasses.replace(config.scheduler, stream_idle_s=args.idle_s))
    server = Server(config)
    endpoints = server.bind()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.connect(endpoints["ingest"])
    old = SyntheticMarket(SyntheticConfig(seed=0, streams=(dataclasses.replace(DEFAULT_STREAMS[0], name="OLD"),)))
    with ControlClient(endpoints["control"]) as control, AnswerSubscriber(endpoints["answers"], ["dir20/OLD/"]) as sub:
        push.send(encode(old.next_batch(64)))
        while control.call("stats")["stats"]["pending_tokens"] or server.pipeline.ticks_in < 64:
            time.sleep(0.05)
        rss_before = rss_mb()
        started = time.perf_counter()
        base_ts = 1_700_000_000_000_000_000
        for start in range(0, args.streams, 1000):
            burst = [trade(f"NEW{i:06d}", base_ts + i, 100.0, 1.0, "buy") for i in range(start, start + 1000)]
            push.send(encode(burst))
        push.send(encode(old.next_batch(1)))
        sent_s = time.perf_counter() - started
        latencies, old_answer_s = [], None
        while True:
            t = time.perf_counter()
            stats = control.call("stats")["stats"]
            latencies.append((time.perf_counter() - t) * 1e3)
            while old_answer_s is None and (message := sub.recv(timeout_s=0.0)) is not None:
                if message[1]["version"] == 65:
                    old_answer_s = time.perf_counter() - started
            seen = stats["ticks_in"] + sum(stats["rejected"].values())  # past scheduler.max_streams: refused
            if seen >= 64 + args.streams + 1 and not stats["pending_tokens"] and old_answer_s:
                break
            time.sleep(0.05)
        absorbed_s = time.perf_counter() - started
        rss_peak = rss_mb()
        time.sleep(args.idle_s + 2 * config.limits.heartbeat_s)
        push.send(encode(old.next_batch(1)))  # the old stream stays alive
        time.sleep(2 * config.limits.heartbeat_s)
        after = control.call("stats")["stats"]
    server.stop()
    thread.join(30)
    push.close()
    result = {"benchmark": "abuse", "streams": args.streams, "machine": machine(),
              "send_s": sent_s, "absorbed_s": absorbed_s, "old_stream_answer_s": old_answer_s,
              "control_latency_ms": percentiles(latencies), "rss_mb": {"before": rss_before, "peak": rss_peak,
                                                                       "after_expiry": rss_mb()},
              "accepted": after["ticks_in"] - 64 - 2, "rejected": after["rejected"],
              "streams_after_expiry": after["streams"], "streams_expired": after["streams_expired"]}
    path = write_json("abuse", result, output_dir(args))
    lat = result["control_latency_ms"]
    print(f"abuse: {args.streams} new streams ({result['rejected']} refused) absorbed in {absorbed_s:.1f} s; control "
          f"p50/p99 {lat['p50']:.1f}/"
          f"{lat['p99']:.1f} ms during it; the old stream's next answer after {old_answer_s:.1f} s; RSS "
          f"{rss_before:.0f} -> {rss_peak:.0f} MB, {result['rss_mb']['after_expiry']:.0f} MB after expiry "
          f"({after['streams_expired']} expired)  [{path}]")
    return result


if __name__ == "__main__":
    main()
