"""The ``flashtick`` argument parser: every subcommand, the option groups several share (CURVE keys, reading the
files, the time range, train and evaluate's data options), the argparse types that check a value, and the parse
itself (an unknown option reported with its own command's usage; --log-timestamps read before the parse).

Longer than STYLE.md's ~400 lines by nature: one block per subcommand, each option with the help a user reads;
splitting it by command would scatter the shared groups (and `flashtick --help`) over many files.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import unicodedata
from pathlib import Path
from typing import Any

from engine.service.cli_common import DEFAULT_ANSWERS, DEFAULT_CONTROL, DEFAULT_INGEST, EXAMPLE_QUERIES
from engine.service.cli_reading import FILE_ORDER
from engine.service.cmd_answers import cmd_answers, cmd_ask, cmd_get, cmd_topics
from engine.service.cmd_backtest import cmd_backtest
from engine.service.cmd_evaluate import cmd_evaluate
from engine.service.cmd_feed import cmd_feed
from engine.service.cmd_local import cmd_keygen, cmd_ticklog_export
from engine.service.cmd_queries import cmd_list, cmd_register, cmd_unregister
from engine.service.cmd_serve import cmd_demo, cmd_serve
from engine.service.cmd_status import cmd_health, cmd_scores, cmd_stats
from engine.service.cmd_streams import cmd_forget, cmd_streams
from engine.service.cmd_subscribe import cmd_subscribe
from engine.service.cmd_train import SIZE_FLAGS, cmd_train


CONTROL_HELP = f"the engine's control endpoint (default: the --config file's endpoints.control, else {DEFAULT_CONTROL})"
FILES_HELP = ("tick files (Parquet, CSV or .csv.gz, JSON lines, DBN, a .zip of them), folders of them (or patterns), "
              "or a replay list (.yaml)")
ANSWERS_SHOWN = 100  # `answers` prints this many by default (--limit, --last, --all)
ANSWERS_EXIT_CODES = ("exit status: 0 when answers were printed, and with --after SEQ when SEQ is the topic's last "
                      "(nothing newer yet, said on stderr: a polling loop under `set -e` goes on); 1 when none was "
                      "printed otherwise (said on stderr): no answer published on the topic, an --after past its "
                      "last seq, or a name or prefix that names no topic or several; 2 for an error (the service "
                      "unreachable, a bad option)")
GET_EXIT_CODES = ("exit status: 0 when the cached answer was printed; 1 when there is none (why, on stderr), or when "
                  "the service holds none of the stream's ticks now (refused at this start, e.g. under a lowered "
                  "scheduler.max_streams): the answer printed is then from before, said on stderr; 2 for an error")


def _key_options() -> argparse.ArgumentParser:
    """--server-key and --client-key, shared by every command that connects to a service."""
    keys = argparse.ArgumentParser(add_help=False)
    group = keys.add_argument_group("CURVE keys (when the service has curve.enabled)")
    group.add_argument("--server-key", type=Path, default=os.environ.get("FLASHTICK_SERVER_KEY") or None,
                       metavar="FILE", help="the server's public key: its *.key certificate or a z85 key file "
                       "(default: $FLASHTICK_SERVER_KEY; none: no CURVE)")
    group.add_argument("--client-key", type=Path, default=os.environ.get("FLASHTICK_CLIENT_KEY") or None,
                       metavar="FILE", help="this client's keypair: a *.key_secret certificate (flashtick keygen); "
                       "needed when the server allows listed clients only (default: $FLASHTICK_CLIENT_KEY)")
    return keys


def _reading_options() -> argparse.ArgumentParser:
    """How tick files are read (docs/replay.md): `feed replay`, `backtest`, `train`, `evaluate` and `demo`."""
    reading = argparse.ArgumentParser(add_help=False)
    group = reading.add_argument_group("reading the files", "Without these options each file's layout is "
                                       "detected from its column names (time/timestamp/ts_event, symbol/ticker, "
                                       "price/px, size/qty/volume, side, bid, ask, bid_size, ask_size; "
                                       "docs/replay.md), or for a CSV without a header from its first rows, "
                                       "and printed. CSV delimiters (, ; tab |) and decimal commas are detected. "
                                       "--csv-names, --ts-unit, --ts-format, --tz and --date alone refine the "
                                       "detected layout.")
    from connectors.column_map import PRESETS  # light (no torch): the presets offered are the ones there are

    group.add_argument("--preset", help=f"column layout preset for every file: {', '.join(PRESETS)} "
                                        "(--columns keys override it)")
    group.add_argument("--columns", metavar="MAP", help="column map for every file: inline, e.g. "
                       "ts=time,price=px,size=qty,side=side,stream=symbol (stream= names the stream column, "
                       "stream_name= a fixed stream; ts=Date+Time joins a date and a time column; price_scale=10000 "
                       "divides fixed-point prices); without ts= it refines the detected map (stream=#RIC); or a "
                       "YAML file of docs/replay.md's keys")
    group.add_argument("--csv-names", metavar="A,B,...", help="the columns of a header-less CSV, in order")
    group.add_argument("--ts-unit", help="time column unit: ns, us, ms, s (since the epoch), epoch (one of those, "
                       "by the first time's magnitude), datetime (ISO 8601 text, with or without a UTC offset, or a "
                       "datetime column), seconds_after_midnight, ms_after_midnight, us_after_midnight, "
                       "ns_after_midnight (with --date), excel_days (a "
                       "spreadsheet's serial date: days since 1899-12-30); a --columns map "
                       "without it reads what the column's first value shows")
    group.add_argument("--ts-format", metavar="FORMAT", help="strftime codes of datetime text that is not ISO 8601, "
                       "e.g. '%%Y%%m%%d %%H:%%M:%%S%%.f' (implies --ts-unit datetime)")
    group.add_argument("--tz", help="time zone of naive times (datetime, *_after_midnight, excel_days), e.g. "
                                    "Europe/London (default UTC)")
    group.add_argument("--date", help="the day of *_after_midnight times, e.g. "
                                      "2024-03-01")
    group.add_argument("--price-offset", action="append", default=None, metavar="X|STREAM=X",
                       help="add X to every price, bid and ask read: an instrument that trades at zero or below (a "
                            "spread, a power market's negative hours) shifted above zero, as ticks must be; moves "
                            "keep their direction, their bps are of the shifted level. STREAM=X shifts that stream "
                            "alone (a calendar spread among its outrights; repeat it for several; STREAM may be a "
                            "glob, as --streams takes). 0 is refused: it shifts nothing (an option's 0 bid: "
                            "--zero-bid price)")
    group.add_argument("--price-format", choices=("decimal", "32nds"), default=None,
                       help="how price, bid and ask are written: 32nds reads CME's notation of Treasury futures "
                            "(110-16, 110-16+, 110'165: 110 and 16.5/32) beside decimals; decimal says 110'165 is "
                            "thousands grouped by an apostrophe")
    group.add_argument("--zero-bid", choices=("no_bid", "price"), default=None,
                       help="what a quote's 0 bid beside an ask is: no_bid (the default: TAQ's no bid, a one-sided "
                            "quote, rejected) or price (an option nobody bids: replayed, its mark ask / 2)")
    group.add_argument("--sequence", metavar="COLUMN",
                       help="the column of each row's sequence number (OPRA, TAQ, CME MDP, an exchange's update "
                            "id), compared within a stream: rows of equal times replay by stream, each stream's in "
                            "its order, across files too, not in file order; a "
                            "row without one is rejected (missing_field). The map's `sequence`")
    group.add_argument("--no-sequence", dest="sequence", action="store_const", const=FILE_ORDER,
                       help="rows of equal times in file order, as without --sequence (evaluate: not in the order "
                            "of the column its checkpoint was trained with)")
    group.add_argument("--hours", metavar="START-END[ ZONE]",
                       help="keep the rows stamped inside this time-of-day window, its end excluded, e.g. "
                            "'09:30-16:01 America/New_York' (regular US trading hours with the closing auction's "
                            "prints, stamped 16:00:00 or just after, which an end of 16:00 leaves out; seconds may "
                            "be given, 16:00:05; summer time followed; the zone may be left out with --tz); the "
                            "others are counted as filtered_out")
    group.add_argument("--streams", nargs="+", default=None, metavar="PATTERN",
                       help="read only these streams (names or fnmatch globs on the stream name as replay names "
                            "it, e.g. --streams NQM6 'ES*'); the other streams' ticks are counted as filtered_out, "
                            "and a pattern that matches no stream of the files is an error")
    return reading


def _time_range_options() -> argparse.ArgumentParser:
    """--from / --to, the event-time range read of the files (docs/replay.md): `backtest` and `feed replay`."""
    from connectors.time_range import TIME_SYNTAX  # light (no torch)

    window = argparse.ArgumentParser(add_help=False)
    group = window.add_argument_group("time range", f"read only the ticks stamped from --from (inclusive) to --to "
                                      f"(exclusive), each by its own event time; a time is {TIME_SYNTAX}; the rows "
                                      f"left out are counted in the summary")
    group.add_argument("--from", dest="time_from", metavar="TIME", help="the first event time read, e.g. 2024-01-02 "
                       "or 2024-01-02T14:30:00Z")
    group.add_argument("--to", dest="time_to", metavar="TIME", help="the event time the read stops before, e.g. "
                       "2024-01-03")
    return window


def _control_options(reply: str, detail: str = "", refused_at_once: bool = False) -> argparse.ArgumentParser:
    """--control and --timeout for one command of the control socket, its --timeout help saying what that command
    waits for: ``reply`` ("the list of registered queries"), then ``detail`` (": ..."), if any."""
    control_op = argparse.ArgumentParser(add_help=False)
    control_op.add_argument("--control", default=None, help=CONTROL_HELP)
    refused = "; at once when it is refused (exit 2)" if refused_at_once else ""
    control_op.add_argument("--timeout", type=_timeout, default=30.0, metavar="S",
                            help=f"seconds to wait for {reply} (default 30){detail}. The engine replies between "
                                 f"forwards, so a forward in progress delays it; a connection nothing accepts is "
                                 f"given up after the connect wait, the smaller of 10 s and S{refused}")
    return control_op


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flashtick", description="Streaming inference engine for market data.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    keys = _key_options()
    reading = _reading_options()
    time_range = _time_range_options()
    clients = argparse.ArgumentParser(add_help=False)  # what every client of a running engine shares
    clients.add_argument("--config", type=Path, metavar="FILE",
                         help="the service YAML the engine runs with: connect to its endpoints (an endpoint flag "
                              "overrides it; default: the default endpoints, 127.0.0.1:5555-5557)")

    p = sub.add_parser("serve", help="run the engine service (ZeroMQ ingest, answers, control)")
    p.add_argument("--config", type=Path, help="engine YAML config (default: built-in model, default endpoints, "
                                                "and its example queries)")
    p.add_argument("--queries", type=Path, help="queries YAML registered at start (overrides the config's; default: "
                   "the config's queries, and with no --config a tick model's examples, queries/examples/"
                   "tick_model.yaml, a text model none); the queries a data directory kept come back either way")
    p.add_argument("--model", type=Path, metavar="DIR", help="checkpoint directory (overrides the config's "
                   "model.path): a Hugging Face Llama, Mistral or Qwen2, or one written by flashtick train")
    log = p.add_mutually_exclusive_group()
    log.add_argument("--data-dir", type=Path, help="keep the tick log, the answer log and the registered queries "
                     "here, and recover from them on start (default: the config's log.dir, else "
                     "$XDG_STATE_HOME/flashtick/<model id>, i.e. ~/.local/state/flashtick/<model id>)")
    log.add_argument("--no-log", action="store_true", help="keep nothing on disk: a restart starts empty")
    scale = p.add_argument_group("scale-out (the ray extra: pip install 'flashtick[ray]'; docs/scale-out.md)")
    scale.add_argument("--shards", type=int, default=None, metavar="N",
                       help="run N engine shards as Ray actors behind this process's sockets (default: the config's "
                            "shards.count; 0: one engine in this process)")
    scale.add_argument("--ray-address", default=None, metavar="auto|HOST:PORT",
                       help="join a running Ray cluster (default: the config's shards.ray_address, else a local "
                            "Ray instance)")
    p.set_defaults(run=cmd_serve)

    p = sub.add_parser("feed", help="push ticks into a running engine")
    feed_sub = p.add_subparsers(dest="feed_source", required=True, metavar="SOURCE")
    feeding = argparse.ArgumentParser(add_help=False)  # what every feed source shares
    feeding.add_argument("--endpoint", default=None, help="the engine's ingest endpoint (default: the --config "
                         f"file's endpoints.ingest, else {DEFAULT_INGEST})")
    feeding.add_argument("--answers", default=None,
                         help="the engine's answers endpoint, to count this feed's rejections (default: the "
                              "--config file's, or the default one when --endpoint is the default ingest one; "
                              "'' to skip)")
    feeding.add_argument("--control", default=None,
                         help="the engine's control endpoint, to resume with no tick lost when the engine restarts "
                              "mid-feed (default: the --config file's, or the default one when --endpoint is the "
                              "default ingest one; '' to skip: a restart then ends the feed with an error)")
    f = feed_sub.add_parser("synthetic", help="the seeded synthetic market", parents=[keys, clients, feeding])
    f.add_argument("--seed", type=int, default=0, help="the market's seed: the same seed gives the same streams, "
                   "prices and sizes (default 0)")
    f.add_argument("--ticks", type=_count, default=None, help="stop after N ticks (default: endless)")
    f.add_argument("--rate", type=float, default=1000.0, help="ticks per second (default 1000)")
    f.add_argument("--start-ts", type=int, default=None,
                   help="event time of the first tick, ns since the epoch (default: a year before now, or just "
                        "after the engine's last tick of these streams when that is later)")
    f.set_defaults(run=cmd_feed)
    f = feed_sub.add_parser("replay", help="replay Parquet/CSV/DBN tick files",
                            parents=[keys, clients, feeding, reading, time_range])
    f.add_argument("files", nargs="+", type=Path, help=FILES_HELP)
    f.add_argument("--speed", type=_speed, default=None, help="real time x N (default: as fast as possible); a "
                   "wait of more than 5 s for the next tick (a night's or a weekend's gap) is said as it begins")
    f.add_argument("--max-gap", type=_positive, default=None, metavar="SECONDS", help="with --speed: wait at most "
                   "this many wall seconds between two ticks, skipping the rest of a longer gap (a night, a "
                   "weekend), e.g. --max-gap 5 (default: every gap at --speed)")
    f.add_argument("--rate", type=float, default=None, help="cap in ticks per second")
    f.add_argument("--ticks", type=_count, default=None,
                   help="stop after sending N ticks (default: every tick of the files)")
    f.add_argument("--batch-ms", type=float, default=None,
                   help="send each event-time batch of MS milliseconds as one message, cut as `backtest --batch-ms` "
                        "cuts them, so the live run answers at the ticks a backtest of the files answers at "
                        "(default: up to 256 ticks a message, as read)")
    f.set_defaults(run=cmd_feed)

    p = sub.add_parser("subscribe", help="print answers as they are published", parents=[keys, clients])
    p.add_argument("topics", nargs="*", default=[""], type=stream_name,
                   help="topic prefixes, e.g. dir20/ or dir20/BTCUSDT/")
    p.add_argument("--endpoint", "--answers", dest="endpoint", default=None,  # --answers: as `feed` names it
                   help=f"the engine's answers endpoint (default: the --config file's, else {DEFAULT_ANSWERS})")
    p.add_argument("--json", action="store_true", help="JSON lines (default: a live table on a terminal, "
                   "else one line per message)")
    p.add_argument("--count", type=_count, default=None, help="exit after N messages")
    p.add_argument("--control", default=None,
                   help="the engine's control endpoint, asked for the registered queries' topics when a prefix looks "
                        "mistaken (default: the --config file's, or the default one when --endpoint is the default "
                        "answers one; '' to skip)")
    p.set_defaults(run=cmd_subscribe)

    p = sub.add_parser("register", help="register (or replace) queries from a YAML file",
                       parents=[keys, clients, _control_options("the engine to check and register the queries")])
    p.add_argument("file", type=Path, help="a queries YAML file (docs/queries.md)")
    p.set_defaults(run=cmd_register)

    p = sub.add_parser("unregister", help="remove a registered query (its cached answers go too)",
                       parents=[keys, clients, _control_options("the engine to remove the query")])
    p.add_argument("name", help="the registered query's name")
    p.set_defaults(run=cmd_unregister)

    p = sub.add_parser("forget", help="drop one stream, its ordering guard included (a tick stamped ahead of the "
                                      "clock blocks its feed as ts_backwards): recorded in the tick log, logged",
                       parents=[keys, clients, _control_options("the engine to drop the stream")])
    p.add_argument("stream", type=stream_name, help="the stream's name")
    p.set_defaults(run=cmd_forget)

    p = sub.add_parser("list", help="the registered queries",
                       parents=[keys, clients, _control_options("the list of registered queries")])
    p.add_argument("--json", action="store_true", help="the full specs as JSON")
    p.set_defaults(run=cmd_list)

    p = sub.add_parser("get", help="the cached answer of a query on a stream (computes nothing)",
                       parents=[keys, clients, _control_options("the cached answer")], epilog=GET_EXIT_CODES)
    p.add_argument("stream", type=stream_name, help="the stream's name")
    p.add_argument("query", help="a registered query's name")
    p.set_defaults(run=cmd_get)

    p = sub.add_parser("answers", help="a topic's published answers after a seq (fill a gap)",
                       parents=[keys, clients, _control_options("the kept answers")], epilog=ANSWERS_EXIT_CODES)
    p.add_argument("topic", help="an answer topic, e.g. dir20/SYN.A/; or a query's name (dir20) or a topic prefix "
                                 "(dir20/) that names one published topic")
    p.add_argument("--after", type=int, default=None, metavar="SEQ",
                   help="the last seq you have (default: all that are kept)")
    many = p.add_mutually_exclusive_group()  # a topic keeps thousands: a terminal is not flooded by default
    many.add_argument("--limit", type=_count, default=ANSWERS_SHOWN, metavar="N",
                      help=f"print at most N, the oldest after --after (default {ANSWERS_SHOWN}); a note says where "
                           f"the next ones start")
    many.add_argument("--last", type=_count, default=None, metavar="N", help="print the newest N (after --after)")
    many.add_argument("--all", action="store_true", help="print every kept answer after --after")
    p.set_defaults(run=cmd_answers)

    p = sub.add_parser("topics", help="the answer topics published on, with their last seq (what a client that "
                       "was away looks for)", parents=[keys, clients, _control_options("the list of topics")])
    p.add_argument("prefix", nargs="?", default="", help="a topic prefix, e.g. dir20/ (default: every topic)")
    p.add_argument("--json", action="store_true", help="one JSON object: topic -> {last_seq, answer_ts}")
    p.set_defaults(run=cmd_topics)

    p = sub.add_parser("ask", help="ask a registered query (or a question of the model, e.g. direction_5, or, "
                       "of a text model, --question TEXT) on a stream now",
                       parents=[keys, clients, _control_options(
                           "the answer", ": one computed now waits for the stream's ticks accepted before the ask, so "
                           "an engine behind on a burst answers late (--max-stale: a cached one, without waiting for "
                           "the backlog)")])
    p.add_argument("stream", type=stream_name, help="the stream asked about: one that has sent data")
    p.add_argument("query", nargs="?", help="a registered query's name, or a question of the model's own "
                   "(direction_5, ...); leave it out with --question")
    p.add_argument("--kind", choices=("choice", "expectation"), default=None,
                   help="how a question of the model's own is asked when no query is registered by that name "
                        "(default choice)")
    p.add_argument("--max-stale", type=int, default=None, help="accept a cached answer up to N ticks old (read "
                   "by the engine between forwards: it waits for the forward in progress, seconds while the "
                   "engine is behind; a subscriber on the PUB socket has it at once)")
    p.add_argument("--question", metavar="TEXT", help="a text model: ask this free text after the stream's tick "
                   "lines (the op's `spec`), with --choices or --generate; as given, so a leading newline is "
                   "$'\\n...' in a shell")
    answer = p.add_mutually_exclusive_group()
    answer.add_argument("--choices", nargs="+", metavar="LABEL", help="with --question: the answers to choose "
                        "among, each as it follows the question (\" yes\" \" no\")")
    answer.add_argument("--generate", type=_count, metavar="N", help="with --question: generate up to N tokens "
                        "(the spec's max_tokens)")
    p.set_defaults(run=cmd_ask)

    p = sub.add_parser("stats", help="the engine's counters (JSON)",
                       parents=[keys, clients, _control_options("the counters")])
    p.add_argument("--json", action="store_true", help="(the output is JSON either way)")
    p.set_defaults(run=cmd_stats)

    p = sub.add_parser("scores", help="live scores: each query's answers against what the market did next, beside "
                       "the streams' own class frequencies", parents=[keys, clients, _control_options("the scores")])
    p.add_argument("--json", action="store_true", help="the stats op's `scores` as JSON")
    p.set_defaults(run=cmd_scores)

    p = sub.add_parser("streams", help="each stream's last accepted tick (ts, count): where a feed resumes after "
                       "a restart; exit 1 when a name given was refused (admission turned it away, or every tick "
                       "of it was bad)", parents=[keys, clients, _control_options("the streams' last ticks")])
    p.add_argument("names", nargs="*", type=stream_name, help="stream names (default: every stream)")
    p.add_argument("--idle-over", type=_non_negative, metavar="SECONDS",
                   help="list only the streams with no tick for longer than SECONDS (a name given and never seen "
                        "too) and exit 1 when there is one: a check for a feed gone quiet (exit 1 also when a name "
                        "given was refused)")
    p.add_argument("--json", action="store_true", help="one JSON object: streams (name -> {ticks, last_ts, "
                   "at_last_ts, last_price, idle_s} or null) and refused")
    p.set_defaults(run=cmd_streams)

    p = sub.add_parser("health", help="is the service up: status, uptime, streams, model",
                       parents=[keys, clients, _control_options("the health reply", ": none in time is exit 3, busy "
                                                                  "rather than down", refused_at_once=True)],
                       description=HEALTH_EXIT_STATUSES)
    p.set_defaults(run=cmd_health)

    p = sub.add_parser("ticklog", help="read a data directory's tick log back")
    ticklog_sub = p.add_subparsers(dest="ticklog_command", required=True, metavar="ACTION")
    t = ticklog_sub.add_parser("export", parents=[time_range],
                               help="write every accepted tick to a Parquet or CSV file that `backtest` and `feed "
                                    "replay` read as it is (docs/durability.md)")
    t.add_argument("data_dir", type=Path, metavar="DATA_DIR", help="the data directory (serve --data-dir); a serve "
                   "may be using it: the export reads what was logged when it began and changes nothing there")
    t.add_argument("--out", type=Path, required=True, metavar="FILE", help="the tick file: .parquet (or .pq) or .csv")
    t.add_argument("--streams", nargs="+", default=None, metavar="PATTERN",
                   help="export only these streams (names or fnmatch globs, e.g. --streams NQM6 'ES*')")
    t.add_argument("--skip-corrupt", action="store_true", help="export past a damaged record (its ticks are lost; "
                   "the log is left as it is) instead of stopping at it")
    t.set_defaults(run=cmd_ticklog_export)

    p = sub.add_parser("keygen", help="make a CURVE keypair: NAME.key (public) and NAME.key_secret")
    p.add_argument("name", help="file name stem, e.g. server or alice")
    p.add_argument("--dir", type=Path, default=Path("."), help="where to write them (default: here)")
    p.set_defaults(run=cmd_keygen)

    p = sub.add_parser("backtest", help="replay files in-process and score every answer",
                       parents=[reading, time_range])
    p.add_argument("files", nargs="+", type=Path, help=FILES_HELP)
    p.add_argument("--queries", type=Path, help="queries YAML (default: the config's queries, else for a tick model "
                   "its example queries, queries/examples/tick_model.yaml)")
    p.add_argument("--out", type=Path, required=True, help="answers Parquet file (.parquet or .pq)")
    p.add_argument("--config", type=Path, help="service YAML: model, budgets and its replay section")
    p.add_argument("--batch-ms", type=float, default=None, help="event-time width of a batch (default: the "
                                                                 "config's replay.batch_ms, 100)")
    p.add_argument("--model", type=Path, metavar="DIR", help="checkpoint directory (overrides the config's model.path)")
    p.add_argument("--test-from", type=float, default=None, metavar="FRACTION", help="score only the answers after "
                   "this fraction of each stream's ticks, e.g. 0.7 (every answer is still written)")
    p.add_argument("--max-ticks", type=_count, default=None, help="stop after N ticks")
    p.add_argument("--resume", action="store_true", help="continue an interrupted backtest of the same files, "
                   "queries and options from its last checkpoint (OUT.parts/)")
    p.add_argument("--checkpoint-s", type=float, default=None, help="wall seconds between answer checkpoints "
                   "(default: the config's replay.checkpoint_s, 10)")
    p.add_argument("--quiet", action="store_true", help="no progress bar (it shows only on a terminal anyway)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads for the forward (default: the "
                   "config's model.threads, 1)")
    p.add_argument("--by-stream", action="store_true", help="also a row per stream (instrument) under each query, "
                   "from the same answers (of several streams, OUT.scores.json has them as `by_stream` either way)")
    p.add_argument("--session-gap", type=_session_gap, default=None, metavar="DURATION",
                   help=SESSION_GAP_HELP + " (overrides the config's answers.session_gap_s; the adaptation's labels "
                   "end there too)")
    p.set_defaults(run=cmd_backtest)
    _add_train_parsers(sub, reading)

    # the reading options (--streams, --price-offset, ...) read the --replay files, as `feed replay` reads its own
    p = sub.add_parser("demo", help="the engine on the built-in model, a live feed and live answers",
                       parents=[reading])
    p.add_argument("--seconds", type=_positive, default=20.0, help="how long it feeds (default 20)")
    p.add_argument("--replay", type=Path, nargs="+",
                   help="replay these files (or folders of them) instead of the synthetic market")
    p.add_argument("--rate", type=_positive, default=None, help="ticks per second fed (default 400, halved while "
                   "the engine falls behind on this CPU; a rate given here is kept)")
    p.add_argument("--queries", type=Path, default=EXAMPLE_QUERIES, help="the standing queries (default: the "
                   "built-in model's examples)")
    p.set_defaults(run=cmd_demo)
    _add_log_timestamps(parser)
    return parser


def _add_log_timestamps(parser: argparse.ArgumentParser) -> None:
    """--log-timestamps on ``parser`` and on every subcommand under it, before or after the command alike. It is
    read before the parse (by asks_for_log_timestamps, so that the parse's own usage error is stamped too); the
    parsed value is never used, so no default: a subcommand's would overwrite the one given before the command."""
    parser.add_argument("--log-timestamps", dest="stamp_stderr", action="store_true", default=argparse.SUPPRESS,
                        help="start each line written to stderr with its UTC time (2026-12-03T12:40:01.123Z): for a "
                             "log kept in a file (a supervisor that stamps lines, journald or Kubernetes, needs none)")
    for command in {id(c): c for c in subcommands(parser).values()}.values():
        _add_log_timestamps(command)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands ``parser`` takes, by name (none for a command without any)."""
    return next((action.choices for action in parser._actions  # noqa: SLF001 - argparse's own
                 if isinstance(action, argparse._SubParsersAction)), {})  # noqa: SLF001


def _positive(text: str) -> float:
    """An argparse type: a finite number > 0 (a usage error, exit 2, otherwise)."""
    return _finite_number(text, zero_ok=False)


def _non_negative(text: str) -> float:
    """An argparse type: a finite number >= 0 (a usage error, exit 2, otherwise)."""
    return _finite_number(text, zero_ok=True)


def _speed(text: str) -> float:
    """An argparse type for `feed replay --speed`: a finite x real time > 0. 0, a negative or inf was refused by
    FileReplay as "speed must be None (as fast as possible) ...", a value no command line can give: the way to ask
    for as fast as possible is to leave the option out."""
    try:
        return _positive(text)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{e} (leave --speed out for as fast as possible)") from None


def _timeout(text: str) -> float:
    """An argparse type for every control command's --timeout: a finite number of seconds > 0. `inf` got past
    a check of `> 0` and was refused inside the client as "timeout_s ...", a name the user never typed."""
    return _finite_number(text, zero_ok=False, what="a finite number of seconds")


def _finite_number(text: str, zero_ok: bool, what: str = "a finite number") -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 <= value if zero_ok else 0 < value) or not value < math.inf:
        raise argparse.ArgumentTypeError(f"must be {what} {'>=' if zero_ok else '>'} 0, got {text!r}")
    return value


def _session_gap(text: str) -> int:
    """An argparse type: a duration such as 1h, 30m, 90s (ns, us, ms, s, m, h, d) -> int ns > 0."""
    from queries.trigger import parse_duration_ns

    try:
        return parse_duration_ns(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a duration such as 1h, 30m or 90s, got {text!r}") from None


SESSION_GAP_HELP = ("leave unscored every answer whose label horizon crosses a pause in its stream's event times "
                    "this long or longer, e.g. 1h (a weekend, a night, a halt: CME's 16:00-17:00 CT and Tokyo's "
                    "lunch, stamped on their bounds, are pauses of exactly 1h; the realised label is left null); "
                    "default: a horizon counts ticks whatever time passes, with a note when scored labels span "
                    "a pause of an hour or more")


def _count(text: str) -> int:
    """An argparse type: a whole number >= 1 (a usage error, exit 2, otherwise): `--ticks 0` is no run to do."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def _add_train_parsers(sub: Any, reading: argparse.ArgumentParser) -> None:
    """`train` and `evaluate`: the files, how to read (`reading`) and split them, and the scoring knobs they share."""
    data = argparse.ArgumentParser(add_help=False)
    data.add_argument("--split", default=None, help="train/validation/test percent of each stream, in time "
                      "order (default 70/15/15, evaluate: the split its checkpoint was trained with; 70/30: no "
                      "validation part, so train stops by --steps alone)")
    data.add_argument("--gap", type=int, default=0, help="ticks left out between parts (default and minimum: the "
                      "longest question horizon)")
    data.add_argument("--max-points", type=int, default=20_000, help="about this many test answer ticks scored per "
                      "stream (default 20000; evenly spread runs of half a window, so at least one run)")
    data.add_argument("--block", type=int, default=100, help="bootstrap block, consecutive answer points (default 100)")
    data.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (default 1000)")
    data.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resamples and of which test points "
                      "are scored (train: of the new weights and the windows trained on too) (default 0)")
    data.add_argument("--device", default="auto", help="auto (CUDA when present, else CPU), cpu or cuda[:N]")
    data.add_argument("--threads", type=int, default=None, help="torch CPU threads (default 1, as backtest's: "
                      "model.threads' default; a second thread spin-waits behind other processes on a shared machine)")
    data.add_argument("--json", action="store_true", help="print the record as JSON instead of the table")
    data.add_argument("--verbose", action="store_true", help="name each stream too short to split, one line each "
                      "(more than a few are otherwise summed up in one line)")
    data.add_argument("--by-stream", action="store_true", help="also a row per stream (instrument) under each "
                      "question, from the same answers (of several streams, the JSON has them as `by_stream` "
                      "either way)")
    data.add_argument("--batch-ms", type=float, default=None, metavar="MS", help="score only the last tick of "
                      "each event-time batch of MS milliseconds, where `backtest --batch-ms MS` answers (cut as it "
                      "cuts them), so the scores compare with `backtest --test-from`'s (default: every tick, "
                      "mid-burst ones included)")
    data.add_argument("--points-out", type=Path, default=None, metavar="FILE.parquet", help="write every scored "
                      "test answer point here: stream, tick, data_ts, question, realised label and each column's "
                      "probabilities, to recompute the table from")
    data.add_argument("--session-gap", type=_session_gap, default=None, metavar="DURATION",
                      help=SESSION_GAP_HELP + " (train: nor trained, calibrated or fitted on in any part; the "
                      "checkpoint records it, and evaluate or backtest with another says so)")

    p = sub.add_parser("train", parents=[reading, data], help="fit a tick model to your own tick files and score it")
    p.add_argument("files", nargs="+", type=Path, help=FILES_HELP)
    p.add_argument("--out", type=Path, required=True, help="checkpoint directory to write (new or empty)")
    p.add_argument("--overwrite", action="store_true", help="replace the checkpoint already in --out")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-scratch", action="store_true", help="a new model instead of fine-tuning")
    start.add_argument("--base", type=Path, metavar="DIR", help="checkpoint to fine-tune (default: the built-in model)")
    p.add_argument("--steps", type=int, default=300, help="optimiser steps (default 300)")
    p.add_argument("--batch", type=int, default=8, help="windows per step (default 8)")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default 5e-4 fine-tuning, 2e-3 new)")
    p.add_argument("--max-minutes", type=float, default=10.0,
                   help="end the optimisation, its validations included, by N "
                   "minutes (default 10): a step starts only while it and a validation fit; reading the files, "
                   "calibration, answer heads and scoring the test part come on top of it")
    p.add_argument("--eval-every", type=int, default=20, help="steps between validation checks (default 20)")
    p.add_argument("--patience", type=int, default=5, help="checks without a better validation loss before "
                   "stopping (default 5)")
    # The answers are what users act on: weighting their loss 3x, over 128 answer points a window, lifted the
    # fine-tuned direction_20 accuracy on all three shared instruments (docs/model.md, "Training on your own ticks")
    p.add_argument("--answer-weight", type=float, default=3.0, help="weight of the answer loss beside the "
                   "next-token loss (default 3)")
    p.add_argument("--questions-per-window", type=int, default=128, help="answer points trained per window "
                   "(default 128)")
    p.add_argument("--quiet", action="store_true", help="no progress bar or log lines, only the final table (and "
                   "one line on the streams too short to split, and one on the rows the files' reading rejected, if "
                   "any; the notes on what the split and scores mean, and the reading's cautions such as two "
                   "instruments in one stream, are said still)")
    size = p.add_argument_group("model size (with --from-scratch)")
    for flag, default in SIZE_FLAGS.items():
        size.add_argument(f"--{flag.replace('_', '-')}", type=int, default=None, help=f"(default {default})")
    p.add_argument("--window-ticks", type=int, default=127, help="ticks per training window (default 127)")
    p.add_argument("--no-head", action="store_true", help="answers from the model alone: no answer head (a "
                   "logistic regression on microstructure features blended with the model's answers, fitted on the "
                   "train and validation parts)")
    size.add_argument("--codec-version", type=int, choices=(1, 2), default=None,
                      help="BinnedCodec spec: 1 absolute bins, 2 relative to each stream's scales (default: the "
                      "built-in model's)")
    p.set_defaults(run=cmd_train)

    p = sub.add_parser("evaluate", parents=[reading, data], help="score a tick model on the test slice of tick files "
                       "against naive and logistic-regression baselines")
    p.add_argument("model", help="checkpoint directory (with codec.json), or 'builtin'")
    p.add_argument("files", nargs="+", type=Path, help=FILES_HELP)
    p.add_argument("--plot", type=Path, metavar="PNG", help="write the calibration diagram here (needs matplotlib): "
                   "a .png, .svg, .pdf, .jpg or .jpeg name, checked before the run")
    p.add_argument("--quiet", action="store_true", help="no notes on how the files were read, only the table (and "
                   "one line on the streams too short to split, and one on the rows the files' reading rejected, if "
                   "any; the notes on what the split and scores mean, and the reading's cautions such as two "
                   "instruments in one stream, are said still)")
    p.set_defaults(run=cmd_evaluate)


def parse_command_line(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """parse_args, but an unknown option is reported with the usage of the (sub)command it was given to (which
    shows the options it has), not the top-level `flashtick COMMAND ...` usage; one given before the command is said
    to be (argparse reported it as the command's)."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        given = sys.argv[1:] if argv is None else argv
        # flashtick's own options take no value: the first word that is not an option is the command
        before = given[:next((i for i, token in enumerate(given) if not token.startswith("-")), len(given))]
        if early := [token for token in unknown if token in before]:
            parser.error(f"unrecognized arguments: {' '.join(early)} (given before the command {args.command}: "
                         f"a command's own options go after it)")
        command = parser
        while True:  # down to the deepest subcommand chosen: `feed replay`, `subscribe`, ...
            chosen = next((action.choices[value] for action in command._actions  # noqa: SLF001 - argparse's own
                           if isinstance(action, argparse._SubParsersAction)  # noqa: SLF001
                           and (value := getattr(args, action.dest, None)) in action.choices), None)
            if chosen is None:
                break
            command = chosen
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def asks_for_log_timestamps(parser: argparse.ArgumentParser, argv: list[str]) -> bool:
    """Whether ``argv`` gives --log-timestamps (or an abbreviation argparse takes for it at that place: before the
    command, or after it among the command's options), read before the parse so that the parse's own usage error
    is stamped like every other line of the run."""
    command = parser
    for token in argv:
        if token == "--":  # what follows is positional, whatever it looks like
            break
        if not token.startswith("-"):  # a (sub)command goes a level down; another word is an argument's
            command = subcommands(command).get(token, command)
            continue
        name = token.split("=", 1)[0]
        options = [option for action in command._actions for option in action.option_strings]  # noqa: SLF001
        if name.startswith("--") and [o for o in options if o.startswith(name)] == ["--log-timestamps"]:
            return True
    return False


def stream_name(text: str) -> str:
    """A stream name (or topic) typed at the command line, in Unicode NFC, the one form the engine takes: a name
    pasted from a macOS file name (NFD) names the stream that prints alike."""
    return unicodedata.normalize("NFC", text)


HEALTH_EXIT_STATUSES = (
    "Prints the service's health reply as JSON. Exit status: 0 serving; 1 starting or degraded (the reply says why); "
    "2 nothing answers (the service is down, or not yet bound in its first seconds: at once when the connection is "
    "refused, after the connect wait, the smaller of 10 s and --timeout, when nothing answers it at all, as behind a "
    "firewall that drops it), or another error (a --timeout under 0.1 s among them: refused before asking); "
    "3 connected, but no reply within --timeout: a service is there and busy (a long forward, a restart catching up "
    "on what it owes), not down. The engine answers between forwards, so a probe's --timeout must cover one forward "
    "under load: while it is behind (heartbeats' behind, stats' owed_ticks) give it several seconds. A liveness "
    "probe should restart on 2, and on 3 only once it has lasted far longer than a catch-up could (a stuck engine "
    "gives 3 too): a restart while catching up starts the catch-up over, owing more.")
