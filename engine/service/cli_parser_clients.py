"""The parsers of the ``flashtick`` commands that connect to a running service: `feed`, `subscribe`, the control
commands (`register` ... `health`). One function a subcommand, its options and their help as a user reads them;
what the command does is in its engine/service/cmd_*.py."""

from __future__ import annotations

import argparse
from typing import Any

from engine.path_words import user_path
from engine.service.cli_common import DEFAULT_ANSWERS, DEFAULT_INGEST
from engine.service.cli_options import FILES_HELP, SharedOptions, _control_options
from engine.service.cli_types import _count, _non_negative, _positive, _speed, stream_name
from engine.service.deferred import Deferred
from engine.service.rejected_share import add_max_rejected_share

ANSWERS_SHOWN = 100  # `answers` prints this many by default (--limit, --last, --all)
ANSWERS_EXIT_CODES = ("exit status: 0 when answers were printed, and with --after SEQ when SEQ is the topic's last "
                      "(nothing newer yet, said on stderr: a polling loop under `set -e` goes on); 1 when none was "
                      "printed otherwise (said on stderr): no answer published on the topic, an --after past its "
                      "last seq, or a name or prefix that names no topic or several; 2 for a bad option or name, 3 or "
                      "4 for a service busy or unreachable (docs/cli.md)")
GET_EXIT_CODES = ("exit status: 0 when the cached answer was printed; 1 when there is none (why, on stderr), or when "
                  "the service holds none of the stream's ticks now (refused at this start, e.g. under a lowered "
                  "scheduler.max_streams): the answer printed is then from before, said on stderr; 2 for a "
                  "bad option or name, 3 or 4 for a service busy or unreachable (docs/cli.md)")
HEALTH_EXIT_STATUSES = (
    "Prints the service's health reply as JSON; a failure as one JSON object too, {\"ok\": false, \"command\", "
    "\"error\", \"exit_status\"} (besides stderr's line). Exit status: 0 serving; 1 starting or degraded (the "
    "reply says why); "
    "2 a usage error or bad option (a --timeout under 0.1 s among them: refused before asking); "
    "4 nothing answers (the service is down, or not yet bound in its first seconds: at once when the connection is "
    "refused, after the connect wait, the smaller of 10 s and --timeout, when nothing answers it at all, as behind a "
    "firewall that drops it; 2 before review337); "
    "3 connected, but no reply within --timeout: a service is there and busy (a long forward, a restart catching up "
    "on what it owes), not down. The engine answers between forwards, so a probe's --timeout must cover one forward "
    "under load: while it is behind (heartbeats' behind, stats' owed_ticks) give it several seconds. A liveness "
    "probe should restart on 4, and on 3 only once it has lasted far longer than a catch-up could (a stuck engine "
    "gives 3 too): a restart while catching up starts the catch-up over, owing more.")


def add_feed(sub: Any, shared: SharedOptions, help: str) -> None:
    """`flashtick feed synthetic` and `feed replay`: the endpoints they share, and each source's own."""
    keys, clients, reading, time_range = shared.keys, shared.clients, shared.reading, shared.time_range
    p = sub.add_parser("feed", help=help)
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
    f.add_argument("--rate", type=_positive, default=1000.0, help="ticks per second (default 1000)")
    f.add_argument("--stream-count", type=_count, default=4, metavar="N",
                   help="how many streams: the first N of SYN.A .. SYN.D, past 4 also SYN.5, SYN.6, ... (a load "
                        "test of many streams); the seed and N together give the same ticks (default 4)")
    f.add_argument("--start-ts", type=int, default=None,
                   help="event time of the first tick, ns since the epoch (default: a year before now, or just "
                        "after the engine's last tick of these streams when that is later)")
    f.set_defaults(run=Deferred("cmd_feed", "cmd_feed"))
    f = feed_sub.add_parser("replay", help="replay Parquet/CSV/DBN tick files",
                            parents=[keys, clients, feeding, reading, time_range])
    f.add_argument("files", nargs="+", type=user_path, help=FILES_HELP)
    add_max_rejected_share(f)
    f.add_argument("--speed", type=_speed, default=None, help="real time x N (default: as fast as possible); a "
                   "wait of more than 5 s for the next tick (a night's or a weekend's gap) is said as it begins")
    f.add_argument("--max-gap", type=_positive, default=None, metavar="SECONDS", help="with --speed: wait at most "
                   "this many wall seconds between two ticks, skipping the rest of a longer gap (a night, a "
                   "weekend), e.g. --max-gap 5 (default: every gap at --speed)")
    f.add_argument("--rate", type=_positive, default=None, help="cap in ticks per second")
    f.add_argument("--ticks", type=_count, default=None,
                   help="send at most N ticks, in whole event-time batches: the batch the Nth tick falls in is "
                        "held back, not sent in part, for the next run (default: every tick of the files)")
    f.add_argument("--batch-ms", type=float, default=None,
                   help="send each event-time batch of MS milliseconds as one message (a batch of more than 8,192 "
                        "ticks as messages of 8,192), cut as `backtest --batch-ms` cuts them, so the live run answers "
                        "at the ticks a backtest of the files answers at (default: the backtest's, the --config "
                        "file's replay.batch_ms, else 100)")
    f.add_argument("--packed", action="store_true",
                   help="send up to 256 ticks a message as read instead (the most throughput): each message is one "
                        "tick group, so `batch`, `ticks` and `surprise` queries answer once a message, not as a "
                        "backtest does")
    f.set_defaults(run=Deferred("cmd_feed", "cmd_feed"))


def add_subscribe(sub: Any, shared: SharedOptions, help: str) -> None:
    """`flashtick subscribe`."""
    keys, clients = shared.keys, shared.clients
    p = sub.add_parser("subscribe", help=help, parents=[keys, clients])
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
    p.set_defaults(run=Deferred("cmd_subscribe", "cmd_subscribe"))


def _control_command(sub: Any, shared: SharedOptions, name: str, control: argparse.ArgumentParser,
                     **parser: Any) -> argparse.ArgumentParser:
    """A command of the control socket: the CURVE keys, the client's --config and ``control`` (its --control and
    --timeout, from _control_options), in that order in its help; ``parser``: add_parser's help, epilog, ..."""
    return sub.add_parser(name, parents=[shared.keys, shared.clients, control], **parser)


def _add_json_command(sub: Any, shared: SharedOptions, name: str, run: Deferred, reply: str, json_help: str,
                      **parser: Any) -> None:
    """A control command whose one option of its own is --json (``json_help``: what it prints then); ``reply``: what
    its --timeout waits for (_control_options)."""
    p = _control_command(sub, shared, name, control=_control_options(reply), **parser)
    p.add_argument("--json", action="store_true", help=json_help)
    p.set_defaults(run=run)


def add_register(sub: Any, shared: SharedOptions, help: str) -> None:
    p = _control_command(sub, shared, "register", help=help,
                         control=_control_options("the engine to check and register the queries"))
    p.add_argument("file", type=user_path, help="a queries YAML file (docs/queries.md)")
    p.set_defaults(run=Deferred("cmd_queries", "cmd_register"))


def add_unregister(sub: Any, shared: SharedOptions, help: str) -> None:
    p = _control_command(sub, shared, "unregister", help=help,
                         control=_control_options("the engine to remove the queries"))
    p.add_argument("names", nargs="*", metavar="name", help="registered queries' names (all removed as one change, "
                   "or none when one is not registered)")
    p.add_argument("--file", type=user_path, default=None,
                   help="also every query named in this queries YAML file (the one `register` was given)")
    p.set_defaults(run=Deferred("cmd_queries", "cmd_unregister"),
                   check_usage=Deferred("cmd_queries", "check_unregister"))


def add_forget(sub: Any, shared: SharedOptions, help: str) -> None:
    p = _control_command(sub, shared, "forget", help=help,
                         control=_control_options("the engine to drop the stream"))
    p.add_argument("streams", nargs="+", metavar="stream", help="the streams' exact names (every one known, or "
                   "none is dropped); with --glob, patterns")
    p.add_argument("--glob", action="store_true", help="each name is a pattern (* ? [..], quoted from the shell: "
                   "'FG001*') and drops every stream held that it matches; without it a name is exact, so a typo "
                   "cannot drop a universe")
    p.add_argument("--dry-run", action="store_true", help="say how many streams (and which first) it would drop, "
                   "and drop none")
    p.set_defaults(run=Deferred("cmd_streams", "cmd_forget"))


def add_list(sub: Any, shared: SharedOptions, help: str) -> None:
    _add_json_command(sub, shared, "list", Deferred("cmd_queries", "cmd_list"), "the list of registered queries",
                      "the full specs as JSON", help=help)


def add_get(sub: Any, shared: SharedOptions, help: str) -> None:
    p = _control_command(sub, shared, "get", help=help,
                         control=_control_options("the cached answer"), epilog=GET_EXIT_CODES)
    p.add_argument("stream", type=stream_name, help="the stream's name")
    p.add_argument("query", help="a registered query's name")
    p.set_defaults(run=Deferred("cmd_answers", "cmd_get"))


def add_answers(sub: Any, shared: SharedOptions, help: str) -> None:
    p = _control_command(sub, shared, "answers", help=help,
                         control=_control_options("the kept answers"), epilog=ANSWERS_EXIT_CODES)
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
    p.set_defaults(run=Deferred("cmd_answers", "cmd_answers"))


def add_topics(sub: Any, shared: SharedOptions, help: str) -> None:
    p = _control_command(sub, shared, "topics", help=help, control=_control_options("the list of topics"))
    p.add_argument("prefix", nargs="?", default="", help="a topic prefix, e.g. dir20/ (default: every topic)")
    p.add_argument("--json", action="store_true", help="one JSON object: topic -> {last_seq, answer_ts}")
    p.set_defaults(run=Deferred("cmd_answers", "cmd_topics"))


def add_ask(sub: Any, shared: SharedOptions, help: str) -> None:
    p = _control_command(sub, shared, "ask", help=help,
                         control=_control_options(
                             "the answer", ": one computed now waits for the stream's ticks accepted before the ask, "
                             "so an engine behind on a burst answers late (--max-stale: a cached one, without waiting "
                             "for the backlog)"))
    p.add_argument("stream", type=stream_name, help="the stream asked about: one that has sent data")
    p.add_argument("query", nargs="?", help="a registered query's name, or a question of the model's own "
                   "(direction_5, ...); leave it out with --question")
    p.add_argument("--kind", choices=("choice", "expectation"), default=None,
                   help="how a question of the model's own is asked when no query is registered by that name "
                        "(default choice)")
    p.add_argument("--max-stale", type=int, default=None, help="accept a cached answer up to N ticks old (read "
                   "by the engine between forwards: it waits for the forward in progress, seconds while the "
                   "engine is behind; a subscriber on the PUB socket has it at once); a query's gate never serves "
                   "one older, and without --max-stale the answer is computed")
    p.add_argument("--question", metavar="TEXT", help="a text model: ask this free text after the stream's tick "
                   "lines (the op's `spec`), with --choices or --generate; as given, so a leading newline is "
                   "$'\\n...' in a shell")
    answer = p.add_mutually_exclusive_group()
    answer.add_argument("--choices", nargs="+", metavar="LABEL", help="with --question: the answers to choose "
                        "among, each as it follows the question (\" yes\" \" no\")")
    answer.add_argument("--generate", type=_count, metavar="N", help="with --question: generate up to N tokens "
                        "(the spec's max_tokens)")
    # a query or --question: said as the line is parsed
    p.set_defaults(run=Deferred("cmd_answers", "cmd_ask"), check_usage=Deferred("cmd_answers", "ask_spec"))


def add_stats(sub: Any, shared: SharedOptions, help: str) -> None:
    _add_json_command(sub, shared, "stats", Deferred("cmd_status", "cmd_stats"), "the counters", "(the output is "
                      "JSON either way, a failure's too: {\"ok\": false, \"command\", \"error\", \"exit_status\"})",
                      help=help)
    sub.choices["stats"].set_defaults(json_on_stdout=True)


def add_scores(sub: Any, shared: SharedOptions, help: str) -> None:
    _add_json_command(sub, shared, "scores", Deferred("cmd_status", "cmd_scores"), "the scores",
                      "the stats op's `scores` as JSON", help=help)


def add_streams(sub: Any, shared: SharedOptions, help: str) -> None:
    p = _control_command(sub, shared, "streams", help=help, control=_control_options("the streams' last ticks"))
    p.add_argument("names", nargs="*", type=stream_name, help="stream names (default: every stream)")
    p.add_argument("--sort", choices=("idle", "waiting", "ticks", "name"), help="order the streams: idle (the most "
                   "idle first), waiting (the longest waiting for a forward first), ticks (the most first), name "
                   "(the default); the service sorts, so with --limit the reply stays small")
    p.add_argument("--limit", type=_count, metavar="N", help="the first N streams of the order only")
    p.add_argument("--idle-over", type=_non_negative, metavar="SECONDS",
                   help="list only the streams with no tick for longer than SECONDS (a name given and never seen "
                        "too) and exit 1 when there is one: a check for a feed gone quiet (exit 1 also when a name "
                        "given was refused)")
    p.add_argument("--json", action="store_true", help="one JSON object: streams (name -> {ticks, last_ts, "
                   "at_last_ts, last_price, last_seq, duplicates, seq_gaps, seq_missing, repeats_taken, idle_s} or "
                   "null), refused (name -> {ticks, error}) and refused_more")
    p.set_defaults(run=Deferred("cmd_streams", "cmd_streams"))


def add_health(sub: Any, shared: SharedOptions, help: str) -> None:
    p = _control_command(sub, shared, "health", help=help,
                         control=_control_options("the health reply", ": none in time is exit 3, busy rather than "
                                                  "down"),
                         description=HEALTH_EXIT_STATUSES)
    # its reply is JSON: a failure is one on stdout too
    p.set_defaults(run=Deferred("cmd_status", "cmd_health"), json_on_stdout=True)
