"""A feed faster than the engine: how fresh the answers stay under each `limits.when_behind` policy.

One live server at a time (the built-in model, queries/examples/tick_model.yaml, real sockets on 127.0.0.1)
is fed a market of many streams, mostly quotes (as a top-of-book feed is), one tick a message stamped with the
wall clock as it is sent, at a rate above what the engine computes, for a fixed time. A subscriber to `dir20/`
measures each answer's data age (received - the answered tick's `ts`). Then the feed stops and the time until
the engine is idle again is measured. The three policies run in the same process, one after the other:

    lag       keep everything: answers fall further behind for as long as the overload lasts
    shed      refuse the ticks past the projected bound, the streams holding most of the backlog first (trades too)
    conflate  keep every trade and each stream's newest quote read between two forwards

    python -m benchmarks.when_behind                       # 2,000 ticks/s, 20 streams, 10 s a policy
    python -m benchmarks.when_behind --rate 4000 --seconds 20

One comparable line: the p99 data age of each policy and the ratio lag / conflate; JSON in
benchmarks/results/when_behind.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import threading
import time

import torch
import zmq

from benchmarks.common import LOCAL_PORTS_EPILOG, add_output_arguments, machine, output_dir, percentiles, write_json
from connectors.ticks import encode, quote, trade
from engine.service.cli import EXAMPLE_QUERIES
from engine.service.client import AnswerSubscriber
from engine.service.config import EndpointsSection, ServiceConfig
from engine.service.server import Server

POLICIES = ("lag", "shed", "conflate")
QUOTE_SHARE = 0.8  # of the ticks sent; the rest are trades


def market(streams: int, seed: int) -> list[tuple[str, float]]:
    """Each stream's name and starting mid."""
    rng = random.Random(seed)
    return [(f"COIN{i:02d}-USDT", rng.uniform(1.0, 5_000.0)) for i in range(streams)]


def publish(endpoint: str, names: list[tuple[str, float]], rate: float, seconds: float, seed: int,
            sent: dict[str, int]) -> None:
    """One tick a message at ``rate`` a second for ``seconds``, stamped now; counts what it sent by kind."""
    rng = random.Random(seed)
    mids = [mid for _, mid in names]
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.connect(endpoint)
    started = time.perf_counter()
    n = 0
    while (elapsed := time.perf_counter() - started) < seconds:
        due = int(elapsed * rate) + 1
        while n < due:
            i = rng.randrange(len(names))
            mids[i] *= 1.0 + rng.gauss(0.0, 2e-4)
            mid, now = mids[i], time.time_ns()
            if rng.random() < QUOTE_SHARE:
                tick = quote(names[i][0], now, mid * (1 - 1e-4), mid * (1 + 1e-4), 1.0, 1.0)
                sent["quotes"] += 1
            else:
                tick = trade(names[i][0], now, mid, rng.uniform(0.1, 2.0), rng.choice(("buy", "sell")))
                sent["trades"] += 1
            push.send(encode(tick))
            n += 1
        time.sleep(0.001)
    push.close(linger=5000)


def run_policy(policy: str, args: argparse.Namespace) -> dict:
    local = "tcp://127.0.0.1:0"
    config = ServiceConfig(queries=str(EXAMPLE_QUERIES))
    config = dataclasses.replace(config, endpoints=EndpointsSection(ingest=local, answers=local, control=local),
                                 limits=dataclasses.replace(config.limits, when_behind=policy,
                                                            max_lag_s=args.max_lag_s))
    server = Server(config)
    endpoints = server.bind()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.ready.wait(120)
    names = market(args.streams, args.seed)
    sent = {"quotes": 0, "trades": 0}
    ages_ms: list[float] = []
    with AnswerSubscriber(endpoints["answers"], ["dir20/"]) as sub:
        time.sleep(0.5)
        feed = threading.Thread(target=publish, args=(endpoints["ingest"], names, args.rate, args.seconds,
                                                      args.seed, sent))
        started = time.perf_counter()
        feed.start()
        while feed.is_alive():
            message = sub.recv(timeout_s=0.05)
            if message is not None:
                ages_ms.append((time.time_ns() - message[1]["data_ts"]) / 1e6)
        feed_s = time.perf_counter() - started
        while server.pipeline.busy or server.pipeline.ticks_in + _dropped(server) < sum(sent.values()):
            if time.perf_counter() - started > feed_s + args.drain_limit_s:
                break
            while (message := sub.recv(timeout_s=0.0)) is not None:
                ages_ms.append((time.time_ns() - message[1]["data_ts"]) / 1e6)
            time.sleep(0.02)
        caught_up_s = time.perf_counter() - started - feed_s
    stats = server.pipeline.stats()
    server.stop()
    thread.join(60)
    return {"policy": policy, "sent": dict(sent), "ticks_in": stats["ticks_in"],
            "conflated": stats.get("conflated", 0), "shed": stats["rejected"].get("overloaded", 0),
            "answers_during_feed": len(ages_ms), "data_age_ms": percentiles(ages_ms) if ages_ms else {},
            "caught_up_s_after_feed": round(caught_up_s, 2), "feed_s": round(feed_s, 2)}


def _dropped(server: Server) -> int:
    stats = server.pipeline.stats()
    return stats.get("conflated", 0) + stats["rejected"].get("overloaded", 0)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=LOCAL_PORTS_EPILOG)
    parser.add_argument("--rate", type=float, default=2000.0, help="ticks a second sent (default 2000)")
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each policy is fed")
    parser.add_argument("--max-lag-s", type=float, default=0.5, help="limits.max_lag_s for the run (default 0.5)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--drain-limit-s", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=POLICIES)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    runs = {policy: run_policy(policy, args) for policy in args.policies}
    p99 = {policy: run["data_age_ms"].get("p99") for policy, run in runs.items()}
    ratio = p99["lag"] / p99["conflate"] if p99.get("lag") and p99.get("conflate") else None
    payload = {"benchmark": "when_behind", "rate": args.rate, "streams": args.streams, "seconds": args.seconds,
               "max_lag_s": args.max_lag_s, "quote_share": QUOTE_SHARE, "load_avg_start": os.getloadavg(),
               "machine": machine(), "runs": runs, "p99_data_age_lag_over_conflate": ratio}
    path = write_json("when_behind", payload, output_dir(args))
    line = ", ".join(f"{policy} p99 data age {runs[policy]['data_age_ms'].get('p99', float('nan')):,.0f} ms "
                     f"({runs[policy]['ticks_in']:,} of {sum(runs[policy]['sent'].values()):,} ticks computed)"
                     for policy in runs)
    print(f"when_behind: {args.rate:g} ticks/s over {args.streams} streams for {args.seconds:g} s, "
          f"{args.threads} thread(s): {line}" + (f"; lag / conflate {ratio:.1f}x" if ratio else "") + f"  ({path})")
    return payload


if __name__ == "__main__":
    main()
