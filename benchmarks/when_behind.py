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

``--backlog``: the engine alone (no sockets) drains a backlog like review285's, both ways in the same run:
``--busy`` streams of ``--busy-ticks`` trades each, one a message (as a live feed sends them: every message a tick
group, its queries due), beside ``--quiet`` streams of a few ticks, all queued before the first forward; then
forwards until idle, once with ``scheduler.roll_inside_forward: false`` (a stream stops at its roll point each
forward) and once with it on (a stream goes on past its roll points in the same forward). One comparable line:
forwards and seconds to drain, old vs new, and their ratios; JSON in when_behind_backlog.json.

    python -m benchmarks.when_behind --backlog --busy 5 --busy-ticks 600 --quiet 2500
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
from engine.service.pipeline import TickPipeline
from engine.service.server import Server

POLICIES = ("lag", "shed", "conflate")
QUOTE_SHARE = 0.8  # of the ticks sent; the rest are trades
QUIET_TICKS = 1  # --backlog: trades of each quiet stream


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


def backlog_messages(args: argparse.Namespace) -> list[list]:
    """The busy streams' trades one a message, interleaved in a seeded order, the quiet streams' among them."""
    rng = random.Random(args.seed)
    names = [(f"BUSY{i}", rng.uniform(10.0, 500.0)) for i in range(args.busy)]
    names += [(f"QUIET{i:04d}", rng.uniform(10.0, 500.0)) for i in range(args.quiet)]
    order = [i for i in range(args.busy) for _ in range(args.busy_ticks)]
    order += [args.busy + i for i in range(args.quiet) for _ in range(QUIET_TICKS)]
    rng.shuffle(order)
    mids = [mid for _, mid in names]
    ts, out = 1_700_000_000_000_000_000, []
    for i in order:
        ts += rng.randrange(1, 2 * 10**7)
        mids[i] *= 1.0 + rng.gauss(0.0, 2e-4)
        out.append([trade(names[i][0], ts, round(mids[i], 4), round(rng.uniform(0.1, 2.0), 3),
                          rng.choice(("buy", "sell")))])
    return out


def drain_backlog(inside: bool, messages: list[list], args: argparse.Namespace) -> dict:
    """Forwards and seconds (the forwards alone) from a backlog of ``messages`` to idle."""
    config = ServiceConfig.from_dict({"scheduler": {"roll_inside_forward": inside,
                                                    "max_batch_tokens": args.max_batch_tokens}})
    pipeline = TickPipeline(config)
    pipeline.registry.register(EXAMPLE_QUERIES.read_text())
    for message in messages:
        if pipeline.ingest_message(encode(message)):
            raise RuntimeError("a benchmark tick was refused")
    engine = pipeline.engine
    busy = {"forwards": 0, "seconds": 0.0, "cpu_seconds": 0.0}  # when the busy streams' last tick was computed
    answers, forwards = 0, 0
    started, cpu_started = time.perf_counter(), time.process_time()
    while (report := engine.step()) is not None:
        answers += len(report.outcomes)
        forwards += 1
        if any(p.stream.startswith("BUSY") for p in report.advanced):
            busy = {"forwards": forwards, "seconds": round(time.perf_counter() - started, 2),
                    "cpu_seconds": round(time.process_time() - cpu_started, 2)}
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    scheduler, runner = engine.scheduler.stats, engine.runner.stats
    # (the CPU time: on a shared host the wall clock also counts other processes' turns)
    return {"roll_inside_forward": inside, "forwards": runner.forwards, "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu_seconds, 2),
            "busy_done": busy, "answers": answers, "rolls": scheduler.rolls,
            "rolls_in_forward": scheduler.rolls_in_forward, "skipped_tokens": scheduler.skipped_tokens,
            "tokens_advanced": runner.tokens_advanced, "tokens_rebuilt": runner.tokens_rebuilt}


def backlog_main(args: argparse.Namespace) -> dict:
    messages = backlog_messages(args)
    drain_backlog(True, backlog_messages(argparse.Namespace(**{**vars(args), "busy": 1, "quiet": 4,
                                                                 "busy_ticks": 200})), args)  # warm-up
    load = os.getloadavg()
    old, new = (drain_backlog(inside, messages, args) for inside in (False, True))
    ratios = {key: round(old[key] / new[key], 2) if new[key] else None for key in ("forwards", "seconds",
                                                                                   "cpu_seconds")}
    ratios["busy_done"] = {key: round(old["busy_done"][key] / new["busy_done"][key], 2) if new["busy_done"][key]
                           else None for key in ("forwards", "seconds", "cpu_seconds")}
    payload = {"benchmark": "when_behind_backlog", "busy": args.busy, "busy_ticks": args.busy_ticks,
               "quiet": args.quiet, "quiet_ticks": QUIET_TICKS, "max_batch_tokens": args.max_batch_tokens,
               "threads": args.threads, "load_avg_start": load, "load_avg_end": os.getloadavg(),
               "machine": machine(), "old": old, "new": new, "old_over_new": ratios}
    path = write_json("when_behind_backlog", payload, output_dir(args))
    was, now, done = old["busy_done"], new["busy_done"], ratios["busy_done"]
    print(f"when_behind --backlog: {args.busy} busy streams x {args.busy_ticks:,} trades (one a message) beside "
          f"{args.quiet:,} quiet ones, {args.threads} thread(s): busy streams drained after {was['forwards']} "
          f"forwards {was['seconds']:.1f} s ({was['cpu_seconds']:.1f} s CPU) one roll per forward, "
          f"{now['forwards']} forwards {now['seconds']:.1f} s ({now['cpu_seconds']:.1f} s CPU) rolling inside a "
          f"forward, old / new {done['forwards']}x forwards {done['cpu_seconds']}x CPU; everything "
          f"{old['forwards']} vs {new['forwards']} forwards, {old['cpu_seconds']:.1f} vs {new['cpu_seconds']:.1f} "
          f"s CPU  ({path})")
    return payload


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
    parser.add_argument("--backlog", action="store_true",
                        help="drain a backlog in the engine alone, one roll per forward vs rolls inside a forward")
    parser.add_argument("--busy", type=int, default=5, help="--backlog: busy streams (default 5)")
    parser.add_argument("--busy-ticks", type=int, default=600, help="--backlog: trades of each busy stream")
    parser.add_argument("--quiet", type=int, default=2500, help=f"--backlog: quiet streams ({QUIET_TICKS} trades each)")
    parser.add_argument("--max-batch-tokens", type=int, default=4096, help="--backlog: scheduler.max_batch_tokens")
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.backlog:
        return backlog_main(args)
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
