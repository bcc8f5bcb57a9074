"""The ``flashtick`` command line: serve, feed, subscribe, register, ask, stats, backtest, demo.

Errors are one readable line on stderr (exit status 2), never a traceback.
The parser is long by nature (one block per subcommand); each command's work
is a small function below it.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

DEFAULT_INGEST = "tcp://127.0.0.1:5555"
DEFAULT_ANSWERS = "tcp://127.0.0.1:5556"
DEFAULT_CONTROL = "tcp://127.0.0.1:5557"
EXAMPLE_QUERIES = Path(__file__).resolve().parents[2] / "queries" / "examples" / "tick_model.yaml"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flashtick", description="Streaming inference engine for market data.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("serve", help="run the engine service (ZeroMQ ingest, answers, control)")
    p.add_argument("--config", type=Path, help="engine YAML config (default: built-in model, default endpoints, "
                                                "and its example queries)")
    p.add_argument("--queries", type=Path, help="queries YAML registered at start (overrides the config's)")
    p.set_defaults(run=cmd_serve)

    p = sub.add_parser("feed", help="push ticks into a running engine")
    feed_sub = p.add_subparsers(dest="feed_source", required=True, metavar="SOURCE")
    f = feed_sub.add_parser("synthetic", help="the seeded synthetic market")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--ticks", type=int, default=None, help="stop after N ticks (default: endless)")
    f.add_argument("--rate", type=float, default=1000.0, help="ticks per second (default 1000)")
    f.add_argument("--endpoint", default=DEFAULT_INGEST)
    f.set_defaults(run=cmd_feed)
    f = feed_sub.add_parser("replay", help="replay Parquet/CSV tick files")
    f.add_argument("files", nargs="+", type=Path)
    f.add_argument("--preset", help="column mapping preset (binance-trades, binance-bbo, dukascopy; default: detect)")
    f.add_argument("--speed", type=float, default=None, help="real time x N (default: as fast as possible)")
    f.add_argument("--rate", type=float, default=None, help="cap in ticks per second")
    f.add_argument("--ticks", type=int, default=None)
    f.add_argument("--endpoint", default=DEFAULT_INGEST)
    f.set_defaults(run=cmd_feed)

    p = sub.add_parser("subscribe", help="print answers as they are published")
    p.add_argument("topics", nargs="*", default=[""], help="topic prefixes, e.g. dir20/ or dir20/BTCUSDT/")
    p.add_argument("--endpoint", default=DEFAULT_ANSWERS)
    p.add_argument("--json", action="store_true", help="JSON lines instead of a live table")
    p.add_argument("--count", type=int, default=None, help="exit after N messages")
    p.set_defaults(run=cmd_subscribe)

    p = sub.add_parser("register", help="register (or replace) queries from a YAML file")
    p.add_argument("file", type=Path)
    p.add_argument("--control", default=DEFAULT_CONTROL)
    p.set_defaults(run=cmd_register)

    p = sub.add_parser("ask", help="ask a registered query on a stream now")
    p.add_argument("stream")
    p.add_argument("query")
    p.add_argument("--max-stale", type=int, default=None, help="accept a cached answer up to N ticks old")
    p.add_argument("--control", default=DEFAULT_CONTROL)
    p.set_defaults(run=cmd_ask)

    p = sub.add_parser("stats", help="the engine's counters")
    p.add_argument("--control", default=DEFAULT_CONTROL)
    p.set_defaults(run=cmd_stats)

    p = sub.add_parser("backtest", help="replay files in-process and score every answer")
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--queries", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True, help="answers Parquet file")
    p.add_argument("--config", type=Path)
    p.add_argument("--preset", help="column mapping preset for every file (default: detect per file)")
    p.add_argument("--batch-ms", type=float, default=100.0, help="event-time width of a batch (default 100)")
    p.add_argument("--max-ticks", type=int, default=None, help="stop after N ticks")
    p.set_defaults(run=cmd_backtest)

    p = sub.add_parser("demo", help="the engine on the built-in model, a live feed and live answers")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--replay", type=Path, nargs="*", help="replay these files instead of the synthetic market")
    p.add_argument("--rate", type=float, default=400.0, help="ticks per second fed (default 400)")
    p.add_argument("--queries", type=Path, default=EXAMPLE_QUERIES)
    p.set_defaults(run=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args) or 0
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # one readable line for the user, not a traceback
        message = str(e).strip() or type(e).__name__
        print(f"flashtick {args.command}: error: {message}", file=sys.stderr)
        return 2


def _service_config(path: Path | None, queries: Path | None = None) -> Any:
    from engine.service.config import ServiceConfig

    config = ServiceConfig.load(path) if path else ServiceConfig()
    if queries is not None:
        import dataclasses

        if not queries.is_file():
            raise FileNotFoundError(f"queries file {queries} does not exist")
        config = dataclasses.replace(config, queries=str(queries))
    return config


def cmd_serve(args: argparse.Namespace) -> None:
    from engine.service.server import Server

    config = _service_config(args.config, args.queries)
    if args.config is None and args.queries is None:  # the built-in model with nothing asked of it shows nothing
        config = _service_config(None, EXAMPLE_QUERIES)
        print(f"flashtick: no --config or --queries: registering {EXAMPLE_QUERIES.name} (the built-in model's "
              f"example queries)", file=sys.stderr, flush=True)
    server = Server(config)
    endpoints = server.bind()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: server.stop())
    print("flashtick serving " + " ".join(f"{k}={v}" for k, v in endpoints.items()), file=sys.stderr, flush=True)
    server.serve_forever()
    stats = server.pipeline.stats()
    print(f"flashtick stopped: {stats['ticks_in']} ticks in, {stats['answers_out']} answers out", file=sys.stderr)


def _source(args: argparse.Namespace) -> Any:
    if args.feed_source == "synthetic":
        from connectors.source import SyntheticSource
        from connectors.synthetic import SyntheticConfig

        return SyntheticSource(SyntheticConfig(seed=args.seed), limit=args.ticks)
    from connectors.replay import FileReplay

    return FileReplay([str(f) for f in args.files], columns=args.preset, speed=args.speed)


def cmd_feed(args: argparse.Namespace) -> None:
    from connectors.feed import FeedClient, run_feed

    source = _source(args)
    with FeedClient(args.endpoint) as client:
        stats = run_feed(source, client, rate=args.rate, max_ticks=args.ticks)
    print(f"sent {stats.ticks} ticks in {stats.messages} messages over {stats.seconds:.1f} s", file=sys.stderr)


def cmd_subscribe(args: argparse.Namespace) -> None:
    from engine.service.client import AnswerSubscriber, render_table

    table: dict[str, dict] = {}
    seen = 0
    with AnswerSubscriber(args.endpoint, args.topics) as sub:
        while args.count is None or seen < args.count:
            message = sub.recv(timeout_s=1.0)
            if message is None:
                continue
            seen += 1
            topic, payload = message
            if args.json:
                print(json.dumps({"topic": topic, **payload}, sort_keys=True), flush=True)
            else:
                table[topic] = payload
                render_table(table, sys.stdout)


def cmd_register(args: argparse.Namespace) -> None:
    from engine.service.client import ControlClient

    with ControlClient(args.control) as control:
        reply = control.call("register", yaml=args.file.read_text())
    print(f"registered {', '.join(reply['registered'])} (registry version {reply['version']})")


def cmd_ask(args: argparse.Namespace) -> None:
    from engine.service.client import ControlClient

    with ControlClient(args.control) as control:
        reply = control.call("ask", stream=args.stream, query=args.query, max_stale_ticks=args.max_stale)
    print(json.dumps(reply["answer"], sort_keys=True, indent=2))


def cmd_stats(args: argparse.Namespace) -> None:
    from engine.service.client import ControlClient

    with ControlClient(args.control) as control:
        print(json.dumps(control.call("stats")["stats"], sort_keys=True, indent=2))


def cmd_backtest(args: argparse.Namespace) -> None:
    from engine.service.backtest import run_backtest

    report = run_backtest(_service_config(args.config), [str(f) for f in args.files], args.queries, args.out,
                          columns=args.preset, batch_ms=args.batch_ms, max_ticks=args.max_ticks)
    print(report.summary())


def cmd_demo(args: argparse.Namespace) -> None:
    from engine.service.demo import run_demo

    run_demo(seconds=args.seconds, queries=args.queries, replay=args.replay, rate=args.rate)


if __name__ == "__main__":
    sys.exit(main())
