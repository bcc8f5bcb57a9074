"""Soak: a real `flashtick serve` (built-in model, example queries, tick and answer logs on) fed the synthetic
market at a steady rate for N minutes; every 30 s its resident memory (RSS), ticks in, answers out and
answer freshness. Not in CI: run it by hand and put the result in docs/benchmarks.md.

    python -m benchmarks.soak --minutes 10 --rate 200

RSS growth is measured from the first sample after the warm-up (``--warmup-s``: the KV pool, the answer
history and the freshness window fill up first) to the last; flat means under 5%.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common import LOCAL_PORTS_EPILOG, add_output_arguments, machine, output_dir, write_json
from connectors.feed import FeedClient
from connectors.feed_pump import run_feed
from connectors.source import SyntheticSource
from connectors.synthetic import SyntheticConfig
from engine.service.client import ControlClient

ROOT = Path(__file__).resolve().parents[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def start_serve(data_dir: Path, config: Path) -> tuple[subprocess.Popen, dict[str, str]]:
    process = subprocess.Popen([sys.executable, "-m", "engine.service.cli", "serve", "--config", str(config),
                                "--data-dir", str(data_dir)], cwd=ROOT, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = ""
    while "flashtick serving" not in line:
        line = process.stderr.readline()
        if not line and process.poll() is not None:
            raise RuntimeError("serve exited before it was ready")
    threading.Thread(target=lambda: [None for _ in process.stderr], daemon=True).start()  # keep its pipe drained
    return process, dict(part.split("=", 1) for part in line.split("flashtick serving ", 1)[1].split())


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=LOCAL_PORTS_EPILOG)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=200.0, help="ticks per second, over 4 synthetic streams")
    parser.add_argument("--every-s", type=float, default=30.0)
    parser.add_argument("--warmup-s", type=float, default=120.0)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="flashtick-soak-") as tmp:
        config = Path(tmp) / "engine.yaml"
        config.write_text(f"queries: {ROOT / 'queries' / 'examples' / 'tick_model.yaml'}\n"
                          "endpoints: {ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', "
                          "control: 'tcp://127.0.0.1:0'}\n")
        process, endpoints = start_serve(Path(tmp) / "data", config)
        stop = threading.Event()
        client = FeedClient(endpoints["ingest"])
        feeder = threading.Thread(target=run_feed, daemon=True, kwargs=dict(
            source=SyntheticSource(SyntheticConfig(seed=0)), client=client, rate=args.rate, batch=16, stop=stop))
        samples = []
        started = time.monotonic()
        feeder.start()
        try:
            with ControlClient(endpoints["control"], timeout_s=30) as control:
                while (elapsed := time.monotonic() - started) < args.minutes * 60:
                    time.sleep(max(0.0, args.every_s * (len(samples) + 1) - elapsed))
                    stats = control.call("stats")["stats"]
                    sample = {"t_s": round(time.monotonic() - started, 1), "rss_mib": round(rss_mib(process.pid), 1),
                              "ticks_in": stats["ticks_in"], "answers_out": stats["answers_out"],
                              "freshness_ms": stats["freshness_ms"], "pending_tokens": stats["pending_tokens"]}
                    samples.append(sample)
                    print(f"{sample['t_s']:>7.1f} s  RSS {sample['rss_mib']:>7.1f} MiB  ticks {sample['ticks_in']:>8}  "
                          f"answers {sample['answers_out']:>8}  freshness p50/p99 "
                          f"{sample['freshness_ms'].get('p50', 0):.1f}/{sample['freshness_ms'].get('p99', 0):.1f} ms",
                          flush=True)
        finally:
            stop.set()
            feeder.join(10)
            client.close()
            process.terminate()
            process.wait(60)
    warm = [s for s in samples if s["t_s"] >= args.warmup_s] or samples
    growth = warm[-1]["rss_mib"] / warm[0]["rss_mib"] - 1
    result = {"benchmark": "soak", "minutes": args.minutes, "rate_ticks_per_s": args.rate, "machine": machine(),
              "load_avg": os.getloadavg(), "samples": samples, "rss_growth_after_warmup": growth}
    path = write_json("soak", result, output_dir(args))
    print(f"soak: {args.minutes:g} min at {args.rate:g} ticks/s: RSS {warm[0]['rss_mib']:.0f} -> "
          f"{warm[-1]['rss_mib']:.0f} MiB after warm-up ({growth:+.1%}), freshness p99 "
          f"{samples[-1]['freshness_ms'].get('p99', 0):.1f} ms  [{path}]")
    return result


if __name__ == "__main__":
    main()
