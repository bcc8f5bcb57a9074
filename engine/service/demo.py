"""`make demo`: the engine on the built-in model, a live feed, and the answers updating in the terminal.

Everything runs in this process on 127.0.0.1 with ephemeral ports: the server
thread (the same Server that `flashtick serve` runs), a feed thread pushing the
synthetic market (or replayed files) through a real PUSH socket, and this
thread subscribed to the answer topics. Stops after ``seconds`` or on Ctrl-C
and prints a summary.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connectors.feed import HEARTBEAT_TOPIC, FeedClient, run_feed
from connectors.replay import FileReplay
from connectors.source import SyntheticSource
from connectors.synthetic import SyntheticConfig
from engine.service.rejections import rejected_lines
from engine.service.client import AnswerSubscriber, render_table
from engine.service.config import EndpointsSection, LimitsSection, ServiceConfig
from engine.service.server import Server

REDRAW_S = 0.5
DEMO_RATE = 400.0  # ticks/s: kept up with at ~5-50 ms freshness on 2018+ x86 cores with AVX-512
SLOW_LAG_S = 0.5  # a heartbeat saying data waits longer than this halves an adapting demo's rate
MIN_RATE = 25.0


def run_demo(seconds: float, queries: Path, replay: list[Path] | None = None, rate: float = DEMO_RATE,
             adapt: bool = True, streams: list[str] | None = None, columns: Any = None,
             stop_when: Callable[[dict], bool] | None = None) -> dict:
    """Returns the service's stats, with ``demo``: the rate fed at the end and the rates it was lowered from.
    ``adapt``: halve the rate when the heartbeats say the engine fell behind (a slower CPU than the default rate
    was chosen on: a first run should show answers seconds old only if asked to). ``streams``: the replay's
    streams to feed (names or globs; None: every one); ``columns``: its column map (None: each file's detected).
    A replay says how it read the files first and, after the summary, the rows it did not feed and why, as
    `feed replay` does. ``stop_when``: stop before ``seconds`` once it holds of the returned ``demo`` part so far
    (a test waits on what the demo did, not on how much of it a busy host fits into some seconds)."""
    # the files read before the model loads: a file's mistake is said first, and how each was read
    source = FileReplay([str(f) for f in replay], columns=columns, streams=streams) if replay else \
        SyntheticSource(SyntheticConfig(seed=0))
    for line in getattr(source, "notes", ()):
        print(f"flashtick demo: note: {line}", file=sys.stderr, flush=True)
    if replay and not source.plans:  # every file skipped: refused as backtest refuses it, before the model loads
        source.close()
        raise ValueError("the files hold no ticks (no data rows): nothing to demo")
    local = "tcp://127.0.0.1:0"
    # no clock bound (limits.max_ts_ahead_s): a demo's files may be dated anywhere, a simulation's in the future too
    config = ServiceConfig(endpoints=EndpointsSection(ingest=local, answers=local, control=local),
                           limits=LimitsSection(max_ts_ahead_s=None), queries=str(queries))
    print("loading the built-in model ...", file=sys.stderr, flush=True)
    server = Server(config)
    endpoints = server.bind()
    server_thread = threading.Thread(target=server.serve_forever, name="flashtick-server", daemon=True)
    server_thread.start()
    client = FeedClient(endpoints["ingest"])

    def start_feed(rate: float) -> tuple[threading.Thread, threading.Event]:
        stop = threading.Event()
        feeder = threading.Thread(target=run_feed, args=(source, client), kwargs={"rate": rate, "stop": stop},
                                  name="flashtick-feed", daemon=True)
        feeder.start()
        return feeder, stop

    table: dict[str, dict] = {}
    lowered_from: list[float] = []
    settled = True  # the lag fell back under SLOW_LAG_S since the last lowering (its backlog drains first)
    started = time.monotonic()
    feeder, stop = None, threading.Event()
    quiet_beats = 0  # heartbeats with nothing waiting since the replay's feed ended
    try:
        with AnswerSubscriber(endpoints["answers"], [""]) as sub:
            time.sleep(0.2)  # let the subscription reach the PUB socket before data flows
            feeder, stop = start_feed(rate)
            next_draw = time.monotonic()
            while time.monotonic() - started < seconds:
                if stop_when is not None and stop_when(demo_part(rate, lowered_from)):
                    break
                if quiet_beats >= 2:  # every row fed and computed: nothing more would show until --seconds
                    print("flashtick demo: the files are fed and computed; stopping", file=sys.stderr, flush=True)
                    break
                message = sub.recv(timeout_s=0.05)
                if message and not message[0].startswith("_"):
                    table[message[0]] = message[1]
                elif message and message[0].startswith(HEARTBEAT_TOPIC) and replay and not feeder.is_alive() \
                        and source.done:
                    quiet_beats = quiet_beats + 1 if not message[1].get("pending_tokens") else 0
                if message and message[0].startswith(HEARTBEAT_TOPIC) and adapt:
                    lag_s = message[1].get("lag_s") or 0.0
                    if lag_s > SLOW_LAG_S and settled and rate / 2 >= MIN_RATE:
                        stop.set()
                        feeder.join(5)
                        lowered_from.append(rate)
                        rate, settled = rate / 2, False
                        feeder, stop = start_feed(rate)
                        print(f"flashtick demo: the engine fell behind (data waiting {lag_s:.1f} s): feeding "
                              f"{rate:.0f} ticks/s from now on (--rate N fixes it)", file=sys.stderr, flush=True)
                    settled = settled or lag_s < SLOW_LAG_S
                if time.monotonic() >= next_draw:
                    title = (f"flashtick demo: built-in tick model, {'replay' if replay else 'synthetic market'} "
                             f"at {rate:.0f} ticks/s, {time.monotonic() - started:4.1f}/{seconds:.0f} s  "
                             "(Ctrl-C stops)")
                    render_table(table, sys.stdout, title)
                    next_draw = time.monotonic() + REDRAW_S * (1 if sys.stdout.isatty() else 8)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        feeder.join(5) if feeder is not None and feeder.is_alive() else None
        fed_s = time.monotonic() - started
        client.close()
        read_whole = source.done  # (before close, which ends it)
        source.close()
        stats = server.pipeline.stats()
        if stats["pending_tokens"]:  # a loaded CPU: the stop below can take seconds, say why the run overruns
            print(f"flashtick demo: stopping after {fed_s:.1f} s of feed; computing the {stats['pending_tokens']:,} "
                  f"tokens still waiting first (a clean stop drops nothing accepted)", file=sys.stderr, flush=True)
        server.stop()
        server_thread.join()  # a clean stop computes what was accepted: a thread left in a forward aborts the exit
    print_summary(stats, fed_s, time.monotonic() - started)
    if replay:
        print_file_rejects(source, read_whole)
    if lowered_from:
        print(f"fed at {rate:.0f} ticks/s after starting at {lowered_from[0]:.0f} (this CPU fell behind at "
              f"{', '.join(f'{r:.0f}' for r in lowered_from)})")
    return {**stats, "demo": demo_part(rate, lowered_from)}


def demo_part(rate: float, lowered_from: list[float]) -> dict:
    """What ``run_demo`` returns of the demo itself: the rate fed (at the end) and the rates it was lowered from."""
    return {"rate": rate, "lowered_from": list(lowered_from)}


def print_summary(stats: dict, fed_s: float, stopped_s: float) -> None:
    """``fed_s``: how long the feed ran (the ticks/s is over it); ``stopped_s``: when the stop was done, once what
    was waiting was computed."""
    fresh = stats.get("freshness_ms", {})
    runner = stats["runner"]
    late_s = stopped_s - fed_s
    overrun = f" (stopped {late_s:.1f} s later: the waiting tokens computed)" if late_s >= 1 else ""
    print(f"\nsummary after {fed_s:.1f} s of feed{overrun}: {stats['ticks_in']} ticks in "
          f"({stats['ticks_in'] / fed_s:.0f}/s), "
          f"{stats['answers_out']} answers, {sum(stats['rejected'].values())} rejected by the engine, "
          f"{runner['forwards']} forwards, {stats['streams']} streams, "
          f"KV {stats['kv_cells_used']}/{stats['kv_cells_capacity']} cells")
    if fresh:
        print(f"answer freshness (tick read off the socket -> answer cached): p50 {fresh['p50']:.2f} ms, "
              f"p99 {fresh['p99']:.2f} ms")
    scored = {query: s for query, s in stats.get("scores", {}).items() if s["scored"]}
    if scored:  # each answer against what the market did next, beside the stream's own class frequencies
        print("live scores (answers whose future has arrived): " + "; ".join(
            f"{query} {s['scored']} scored, accuracy {s['accuracy']:.3f} (majority {s['majority_accuracy']:.3f}), "
            f"Brier {s['brier']:.3f} (class frequencies {s['prior_brier']:.3f}"
            + (f", the model's own {s['model_brier']:.3f})" if s.get("model_brier") is not None else ")")
            for query, s in scored.items()))


def print_file_rejects(source: FileReplay, read_whole: bool) -> None:
    """The rows of the files not fed, by reason with the first of each (the summary's `rejected` counts the
    engine's refusals, which a file's rows checked before sending never reach), and the cautions said again.
    ``read_whole``: the replay reached the files' end (else the counts are of the rows read so far)."""
    rejected = dict(source.rejected)
    if rejected:
        left_out = rejected.get("filtered_out", 0)  # a filter's choice (--streams, a keep), not an error
        how = f" ({left_out} of them left out by a filter)" if left_out else ""
        read = "" if read_whole else " read so far"
        print(f"{sum(rejected.values())} rows of the files{read} not fed{how}:",
              *rejected_lines(rejected, source.rejected.examples, source.emitted), sep="\n")
    for found in source.found_notes:
        print(f"note: {found}")
    for caution in source.cautions:
        print(f"warning (said above too): {caution}")
