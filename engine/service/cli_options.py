"""The option groups several ``flashtick`` commands share, built once as argparse parents: the CURVE keys, the
client's --config, how tick files are read, the time range, a control command's --control and --timeout, and the
help texts more than one command shows. The commands' own parsers are cli_parser_clients.py and
cli_parser_local.py."""

from __future__ import annotations

import argparse
import functools
import os

from engine.path_words import map_or_user_path, user_path
from engine.service.cli_common import DEFAULT_CONTROL
from engine.service.cli_reading import FILE_ORDER
from engine.service.cli_types import GivenOnce, _timeout

CONTROL_HELP = f"the engine's control endpoint (default: the --config file's endpoints.control, else {DEFAULT_CONTROL})"
FILES_HELP = ("tick files (Parquet, CSV or .csv.gz, JSON lines, DBN, a .zip of them), folders of them (or patterns), "
              "or a replay list (.yaml); - (standard input) or a pipe is copied to a temporary file first")

SESSION_GAP_HELP = ("leave unscored every answer whose label horizon crosses a pause in its stream's event times "
                    "this long or longer, e.g. 1h (a weekend, a night, a halt: CME's 16:00-17:00 CT and Tokyo's "
                    "lunch, stamped on their bounds, are pauses of exactly 1h; the realised label is left null); "
                    "default: a horizon counts ticks whatever time passes, with a note when scored labels span "
                    "a pause of an hour or more")


class SharedOptions:
    """The parents the subcommands take, each built once, when a command's parser first names it: a command copies
    what it names, and one that reads no files (`list`) never builds the reading options (nor imports their presets
    table)."""

    @functools.cached_property
    def keys(self) -> argparse.ArgumentParser:  # --server-key, --client-key
        return _key_options()

    @functools.cached_property
    def clients(self) -> argparse.ArgumentParser:  # --config of a client of a running engine
        clients = argparse.ArgumentParser(add_help=False)
        clients.add_argument("--config", type=user_path, metavar="FILE",
                             help="the service YAML the engine runs with: connect to its endpoints (an endpoint flag "
                                  "overrides it; default: the default endpoints, 127.0.0.1:5555-5557)")
        return clients

    @functools.cached_property
    def reading(self) -> argparse.ArgumentParser:  # how tick files are read
        return _reading_options()

    @functools.cached_property
    def time_range(self) -> argparse.ArgumentParser:  # --from, --to
        return _time_range_options()


def _key_options() -> argparse.ArgumentParser:
    """--server-key and --client-key, shared by every command that connects to a service."""
    keys = argparse.ArgumentParser(add_help=False)
    group = keys.add_argument_group("CURVE keys (when the service has curve.enabled)")
    group.add_argument("--server-key", type=user_path, default=os.environ.get("FLASHTICK_SERVER_KEY") or None,
                       metavar="FILE", help="the server's public key: its *.key certificate or a z85 key file "
                       "(default: $FLASHTICK_SERVER_KEY; none: no CURVE)")
    group.add_argument("--client-key", type=user_path, default=os.environ.get("FLASHTICK_CLIENT_KEY") or None,
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
    _add_layout_options(group)
    _add_value_options(group)
    _add_row_filters(group)
    group.add_argument("--skip-bad-files", action="store_true",
                       help="leave out each file that cannot be read (a .gz cut short by a download that died, "
                            "damaged bytes, an error page saved as the day), named at the start and again at the "
                            "end and kept in the run record, and read the others (default: such a file refuses the "
                            "run)")
    return reading


def _add_layout_options(group: argparse._ArgumentGroup) -> None:
    """Which column is which, and how its times are written."""
    # the presets' own table (no polars, numpy or torch: `feed replay` builds this parser, a client of the service);
    # the presets offered are the ones there are
    from connectors.presets import PRESET_MAPS

    group.add_argument("--preset", action=GivenOnce,
                       help=f"column layout preset for every file: {', '.join(PRESET_MAPS)} "
                            "(--columns keys override it)")
    group.add_argument("--columns", action=GivenOnce, metavar="MAP", type=map_or_user_path,
                       help="column map for every file: inline, "
                       "e.g. "
                       "ts=time,price=px,size=qty,side=side,stream=symbol (stream= names the stream column, "
                       "stream_name= a fixed stream; ts=Date+Time joins a date and a time column; price_scale=10000 "
                       "divides fixed-point prices); without ts= it refines the detected map (stream=#RIC); or a "
                       "YAML file of docs/replay.md's keys")
    group.add_argument("--csv-names", action=GivenOnce, metavar="A,B,...",
                       help="the columns of a header-less CSV, in order")
    group.add_argument("--ts-unit", action=GivenOnce,
                       help="time column unit: ns, us, ms, s (since the epoch), epoch (one of those, "
                       "by the first time's magnitude), datetime (ISO 8601 text, with or without a UTC offset, or a "
                       "datetime column), seconds_after_midnight, ms_after_midnight, us_after_midnight, "
                       "ns_after_midnight (with --date), hhmmss, hhmmss_ms, hhmmss_us, hhmmss_ns (a wall clock's "
                       "digits, KRX's 090001418 is hhmmss_ms), excel_days (a "
                       "spreadsheet's serial date: days since 1899-12-30), ns_since_2000 (q's timestamp as a long: ns "
                       "since q's epoch 2000-01-01); a --columns map "
                       "without it reads what the column's first value shows")
    group.add_argument("--ts-format", action=GivenOnce, metavar="FORMAT",
                       help="strftime codes of datetime text that is not ISO 8601, "
                       "e.g. '%%Y%%m%%d %%H:%%M:%%S%%.f' (implies --ts-unit datetime)")
    group.add_argument("--tz", action=GivenOnce,
                       help="time zone of naive times (datetime, *_after_midnight, excel_days), e.g. "
                            "Europe/London (default UTC); --from/--to without an offset are on its clock too")
    group.add_argument("--date", action=GivenOnce,
                       help="the day of *_after_midnight times and of times of day, e.g. 2024-03-01, or file_name "
                            "(the date each file's name holds: a night session's date, the day it opens, its rows "
                            "after midnight on the next day)")
    group.add_argument("--bar-stamp", action=GivenOnce, choices=("close", "open"), default=None,
                       help="a bar file's stamp: open (the default: each bar at its time as written, its start, as "
                            "most vendors stamp bars) or close (each bar at its start plus its length, as a live bar "
                            "builder sends it: the length from --bar-length, else the file's name or its median "
                            "step); the map's bar_stamp (close, start)")
    group.add_argument("--bar-length", action=GivenOnce, metavar="N{s,m,h,d,w}", default=None,
                       help="with --bar-stamp close: each bar's length, added to its start, e.g. 1m, 5m, 1h, 1d; "
                            "the map's bar_length")


def _add_value_options(group: argparse._ArgumentGroup) -> None:
    """How prices are written and shifted, and the order of rows of equal times."""
    # (here, not at the top: a parser built with another distribution's `connectors` says so, cli.py)
    from connectors.map_vocabulary import PRICE_FORMATS

    group.add_argument("--price-offset", action="append", default=None, metavar="X|STREAM=X",
                       help="add X to every price, bid and ask read: an instrument that trades at zero or below (a "
                            "spread, a power market's negative hours) shifted above zero, as ticks must be; moves "
                            "keep their direction, their bps are of the shifted level. STREAM=X shifts that stream "
                            "alone (a calendar spread among its outrights; repeat it for several; STREAM may be a "
                            "glob, as --streams takes; a name's own '|' in a set: 'A[|]B=1'). 0 is refused: it "
                            "shifts nothing (an option's 0 bid: --zero-bid price)")
    group.add_argument("--price-format", action=GivenOnce, choices=PRICE_FORMATS,  # the column map's price_format
                       help="how price, bid and ask are written: 32nds reads CME's notation of Treasury futures "
                            "(110-16, 110-16+, 110'165: 110 and 16.5/32; the 2- and 3-year notes' eighths of a 32nd, "
                            "104-161 ... 104-168: 104 16.125/32 ... 16.875/32) beside decimals; eighths reads CBOT "
                            "grains' cents and eighths of a cent (450'4 or 450-4: 450.5; 450'2, 450'6); decimal "
                            "says 110'165 is thousands grouped by an apostrophe; sqrt_price_x96 reads a Uniswap v3 "
                            "pool's sqrtPriceX96, with --columns token_decimals=D0/D1,base_token=0|1 (docs/replay.md)")
    group.add_argument("--zero-bid", action=GivenOnce, choices=("no_bid", "price"), default=None,
                       help="what a quote's 0 bid beside an ask is: no_bid (TAQ's no bid, a one-sided quote, rejected) "
                            "or price (an option nobody bids: replayed, its mark ask / 2); the default is the "
                            "service's limits.zero_bid (--config's; feed: its health's), else no_bid")
    group.add_argument("--sequence", metavar="COLUMN", action=GivenOnce, set_by={FILE_ORDER: "--no-sequence"},
                       help="the column of each row's sequence number (OPRA, TAQ, CME MDP, an exchange's update "
                            "id), compared within a stream: rows of equal times replay by stream, each stream's in "
                            "its order, across files too, not in file order; a "
                            "row without one is rejected (missing_field). The map's `sequence`")
    group.add_argument("--no-sequence", dest="sequence", action=GivenOnce, const=FILE_ORDER,
                       set_by={FILE_ORDER: "--no-sequence"},
                       help="rows of equal times in file order, as without --sequence (evaluate: not in the order "
                            "of the column its checkpoint was trained with)")


def _add_row_filters(group: argparse._ArgumentGroup) -> None:
    """Which rows are read: a time-of-day window and the streams."""
    group.add_argument("--hours", metavar="START-END[ ZONE]", action="append", default=None,
                       help="keep the rows stamped inside this time-of-day window, its end excluded, e.g. "
                            "'09:30-16:01 America/New_York' (regular US trading hours with the closing auction's "
                            "prints, stamped 16:00:00 or just after, which an end of 16:00 leaves out; seconds may "
                            "be given, 16:00:05; summer time followed; the zone may be left out with --tz); several "
                            "windows, repeated or in one, keep a lunch break out: --hours '09:00-11:30,12:30-15:00 "
                            "Asia/Tokyo'; hours past 24 are the next day's (JPX's night session, 16:30-30:00); the "
                            "others are counted as filtered_out")
    group.add_argument("--streams", nargs="+", action="extend", default=None, metavar="PATTERN",
                       help="read only these streams (names or fnmatch globs on the stream name as replay names "
                            "it, e.g. --streams NQM6 'ES*'; repeated, all of them); the other streams' ticks are "
                            "counted as filtered_out, "
                            "and a pattern that matches no stream of the files is an error")


def _time_range_options() -> argparse.ArgumentParser:
    """--from / --to, the event-time range read of the files (docs/replay.md): `backtest`, `feed replay`, `ticklog
    export`, and `train` and `evaluate`, whose split then cuts the ticks inside the range alone."""
    from connectors.time_range import TIME_SYNTAX  # light (no torch)

    window = argparse.ArgumentParser(add_help=False)
    group = window.add_argument_group("time range", f"read only the ticks stamped from --from (inclusive) to --to "
                                      f"(exclusive), each by its own event time; a time is {TIME_SYNTAX}; the rows "
                                      f"left out are counted in the summary (train, evaluate: before the split, "
                                      f"which cuts the ticks kept)")
    group.add_argument("--from", action=GivenOnce, dest="time_from", metavar="TIME",
                       help="the first event time read, e.g. 2024-01-02 "
                       "or 2024-01-02T14:30:00Z")
    group.add_argument("--to", action=GivenOnce, dest="time_to", metavar="TIME",
                       help="the event time the read stops before, e.g. "
                       "2024-01-03")
    return window


def _control_options(reply: str, detail: str = "") -> argparse.ArgumentParser:
    """--control and --timeout for one command of the control socket, its --timeout help saying what that command
    waits for: ``reply`` ("the list of registered queries"), then ``detail`` (": ..."), if any."""
    control_op = argparse.ArgumentParser(add_help=False)
    control_op.add_argument("--control", default=None, help=CONTROL_HELP)
    control_op.add_argument("--timeout", type=_timeout, default=30.0, metavar="S",
                            help=f"seconds to wait for {reply} (default 30){detail}. The engine replies between "
                                 f"forwards, so a forward in progress delays it; a connection nothing accepts is "
                                 f"given up after the connect wait, the smaller of 10 s and S; at once when it is "
                                 f"refused (nothing listens there: exit 4, docs/cli.md)")
    return control_op

