"""`flashtick feed`: push ticks (the seeded synthetic market, or replayed files) into a running engine, resuming
with no tick lost when it restarts mid-feed, and say what was not sent and why.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shlex
import signal
import sys
import threading
import time
from typing import Any

from engine.service.cli_common import (DEFAULT_ANSWERS, DEFAULT_CONTROL, DEFAULT_INGEST, curve_keys, exit_status,
                                       interrupted_status)
from engine.service.cli_reading import column_map_of, streams_to_read, time_range_of


def _synthetic_source(args: argparse.Namespace, engine_last_ts: dict[str, int]) -> Any:
    """The seeded market; ``engine_last_ts`` (stream -> the engine's last event time) places one started "now"
    (a year before the clock, connectors.synthetic.LIVE_START_BEHIND_NS) after the engine's last tick of its
    streams: a feed faster than the market's own pace runs event time faster than the clock, and the next one would
    be refused as ``ts_backwards`` until the clock caught up."""
    from connectors.source import SyntheticSource
    from connectors.synthetic import SyntheticConfig, stream_set

    config = SyntheticConfig(seed=args.seed, streams=stream_set(args.stream_count), start_ts=args.start_ts).anchored()
    held = [engine_last_ts[s.name] for s in config.streams if s.name in engine_last_ts]
    if args.start_ts is None and held and max(held) >= config.start_ts:
        start = max(held) + 1
        lead_s = (start - time.time_ns()) / 1e9
        where = f"{lead_s:.1f} s ahead of" if lead_s >= 0 else f"{-lead_s / 86_400:.1f} days behind"
        print(f"{args.command_name}: note: event time starts after the engine's last tick of these streams, {where} "
              f"the clock (earlier feeds ran faster than the market's pace; --start-ts to choose)", file=sys.stderr)
        config = dataclasses.replace(config, start_ts=start)
    return SyntheticSource(config, limit=args.ticks)


def _files_config(args: argparse.Namespace) -> Any:
    """The --config whose replay section reads the files, as backtest's does (cli.py's _client_endpoints), or None."""
    return getattr(args, "feed_config", None)


def _replay_source(args: argparse.Namespace) -> Any:
    from connectors.replay import FileReplay
    from engine.service.no_data import refuse_absent_inputs

    if args.max_gap is not None and args.speed is None:
        raise ValueError("--max-gap shortens the waits of --speed: without --speed a replay does not wait")
    refuse_absent_inputs(args.files)  # a pattern that matches no file yet, an empty folder: exit NO_DATA
    config = _files_config(args)
    return FileReplay([str(f) for f in args.files], columns=column_map_of(args, config), speed=args.speed,
                      max_gap_s=args.max_gap, streams=streams_to_read(args, config), time_range=time_range_of(args),
                      skip_bad_files=args.skip_bad_files)


def _replay_rejections(source: Any, sent: int, held: int = 0) -> list[str]:
    from engine.service.rejections import rejected_lines

    rejected = getattr(source, "rejected", None)
    return rejected_lines(dict(rejected), rejected.examples, sent, rejected.streams_of(), held) if rejected else []


def _say_rows_not_sent(source: Any, sent: int) -> bool:
    """Print the ticks of the files the feed did not send (rejected by the files' own checks, left out by a filter
    or as resends of a sequence number): their one record, so said however the feed ends, an error's included, before
    that error. Shares are of the ticks read, those the engine held already (not sent) among them. True when there
    were any."""
    from engine.service.rejections import not_passed_on

    held = sum(source.skipped.values()) if hasattr(source, "skipped") else 0
    resends = source.stats().get("left_out", {}).get("sequence_repeat", 0) if hasattr(source, "stats") else 0
    lines = _replay_rejections(source, sent, held)
    if not lines and not resends:
        return False
    print(not_passed_on(getattr(source, "rejected", {}), "sent", resends=resends), *lines, sep="\n",
          file=sys.stderr)
    return True


def _answers_for(args: argparse.Namespace) -> str | None:
    """Where to count a feed's rejections: as given, or the default engine's when feeding the default engine."""
    if args.answers is not None:
        return args.answers or None
    return DEFAULT_ANSWERS if args.endpoint == DEFAULT_INGEST else None


def _control_for(args: argparse.Namespace) -> str | None:
    """Where a feed asks what the engine holds after a restart: the same rule as ``_answers_for``."""
    if args.control is not None:
        return args.control or None
    return DEFAULT_CONTROL if args.endpoint == DEFAULT_INGEST else None


def _feed_resume(args: argparse.Namespace, stop: Any) -> Any:
    """A ControlFeedResume on the engine's control socket, or None (said) when there is none to ask."""
    from connectors.feed import EngineLost
    from engine.service.client import ControlClient, ControlError, ControlUnreachable
    from engine.service.feed_control import START_WAIT_S
    from engine.service.feed_resume import ControlFeedResume

    control = _control_for(args)
    if control is None:
        return None
    try:
        # (a short connect time-out: while the engine is down, each try gives up soon, and a signal is heard)
        return ControlFeedResume(lambda: ControlClient(control, timeout_s=5, connect_timeout_s=2, **curve_keys(args)),
                                 stop=stop, who=args.command_name)
    except EngineLost as e:  # a signal while the engine was starting: nothing was sent
        raise ConnectionError(f"{e}; nothing was sent") from None
    except ControlUnreachable:  # no engine there after the start wait: one error, not a note and then another
        raise ConnectionError(f"no engine answers on {control} (waited {START_WAIT_S:g} s): start `flashtick serve` "
                              f"first, or name its control socket with --control ADDR (--control '' feeds without "
                              f"asking it); nothing was sent") from None
    except ControlError as e:
        # (the socket asked is named: "--control to name it" misled where --control or --config had named it,
        # review435 #1)
        print(f"{args.command_name}: note: cannot ask the engine's control socket {control} ({e}): a restart of the "
              f"engine mid-feed will end the feed with an error instead of resuming (--control names another socket)",
              file=sys.stderr)
        return None


def _say_zero_bids_refused(replay: Any, resume: Any, who: str) -> None:
    """Files read with --zero-bid price (a column map's zero_bid: price) fed to a service that reads a 0 bid as no
    bid (limits.zero_bid: no_bid) lose every such quote to a refusal: said once, before the first tick is sent,
    with the key that takes them. (A service of an earlier version does not say its reading: nothing is said.)"""
    if not any(getattr(plan, "zero_bid_is_price", False) for plan in replay.plans):
        return
    if resume.health().get("zero_bid") == "no_bid":
        print(f"{who}: warning: the files' 0 bids are read as prices (--zero-bid price), but the service "
              "reads a quote's 0 bid as no bid (limits.zero_bid: no_bid): it will refuse each such quote as "
              "missing_field; to take them, serve with limits.zero_bid: price in its config", file=sys.stderr,
              flush=True)


def _zero_bids_as_served(args: argparse.Namespace, resume: Any) -> bool:
    """Files fed to a service that reads a wire quote's 0 bid as a price (limits.zero_bid: price) have their 0 bids
    read so too, said in a note, where neither --zero-bid, the map nor --config says how (review401 #4: read as no
    bid, an option chain's unbid series were refused before they were sent, which the service would have taken
    off the wire). True when the files are to be read again."""
    if resume.health().get("zero_bid") != "price" or \
            "zero_bid" in (column_map_of(args, _files_config(args)) or {}):
        return False
    args.served_zero_bid = "price"
    print(f"{args.command_name}: note: the files' 0 bids beside an ask are read as prices (--zero-bid price), as the "
          f"service reads a quote's (limits.zero_bid: price); --zero-bid no_bid reads them as no bid",
          file=sys.stderr, flush=True)
    return True


_SERVED = "the engine's model"  # what the checkpoint notes call "this model", said by a feed


def _read_as_served(args: argparse.Namespace, resume: Any) -> bool:
    """Files fed to a service whose model was trained on prices read with --price-offset (or --price-format,
    --zero-bid, --sequence: its `health` says which) are read so unless the option is given, said as `backtest
    --model` and `evaluate` say it: the model reads a stream's ticks as it learnt them, however they come. An
    option given otherwise is warned of. True when an option was taken (the files are then read again)."""
    from connectors.price_offsets import checked_price_offset
    from engine.service.checkpoint_notes import take_recorded, trained_options
    from engine.service.reading_record import PRICE_OPTIONS, reading_mismatch, reading_of
    from engine.service.reply_caveats import ingest_shift_text

    health = resume.health()
    served = health.get("reading")
    if not isinstance(served, dict) or not served:
        return False
    taken: list[str] = []
    # (health says the price options alone: the files fed are not the training files, and a feed does not split)
    take_recorded(args, {str(k): str(v) for k, v in served.items()}, trained_options(False, False), taken.append)
    for line in taken:
        print(f"{args.command_name}: note: {line.replace('this model', _SERVED)}",
              file=sys.stderr, flush=True)
    files_map = column_map_of(args, _files_config(args))
    if (ingest := health.get("ingest_price_offset")) is not None:  # the engine adds it to every tick: sent without
        resume.ingest_offset = checked_price_offset(str(ingest))
        files_offset = checked_price_offset((files_map or {}).get("price_offset"))
        print(f"{args.command_name}: note: the engine adds {ingest_shift_text(str(ingest))} (--price-offset "
              f"{ingest}: its model was trained so): {_sent_as(files_offset, resume.ingest_offset)}",
              file=sys.stderr, flush=True)
    if (mismatch := reading_mismatch(served, reading_of(files_map), PRICE_OPTIONS)) is not None:
        print(f"{args.command_name}: warning: {mismatch.replace('this model', _SERVED)}",
              file=sys.stderr, flush=True)
    return bool(taken)


def _sent_as(files_offset: Any, ingest_offset: Any) -> str:
    """How the ticks a feed sends differ from its files' prices: read with ``files_offset`` (its --price-offset),
    they go out with the engine's ``ingest_offset`` taken off (wire_offsets.unshifted_tick), so shifted by the
    difference where the two differ (review410 #7: said to go out as the files print them, they went out 12 up)."""
    from connectors.price_offsets import offset_of, shown_offset
    from connectors.shifted_prices import shifted

    names = dict.fromkeys(name for offset in (files_offset, ingest_offset) if isinstance(offset, dict)
                          for name in offset)
    differences = {name: shifted(offset_of(files_offset, name), -offset_of(ingest_offset, name)) for name in names}
    unnamed = [offset if not isinstance(offset, dict) else 0.0 for offset in (files_offset, ingest_offset)]
    rest = shifted(unnamed[0] or 0.0, -(unnamed[1] or 0.0))  # (a bare offset: every stream neither dict names)
    said = [f"{name} {difference:+g}" for name, difference in differences.items() if difference]
    if rest:
        said.append(f"{rest:+g} to {'every other stream' if names else 'every stream'}")
    if not said:
        return "the ticks go out as the files print them, read with the offset only for this feed's checks"
    read = f"--price-offset {shown_offset(files_offset)}" if files_offset is not None else "no --price-offset"
    return (f"these files are read with {read}, so the ticks go out shifted by the difference ({', '.join(said)}), "
            f"not as the files print them, and the model sees them as read here, not as it was trained")


def _batch_ns(args: argparse.Namespace) -> int | None:
    """`feed replay`'s event-time batch (ns), one message each: --batch-ms, else the backtest's default (the
    --config file's replay.batch_ms, else 100 ms), so the defaults of the two agree (review381 #3: 256 ticks a
    message answered `batch` queries twice a stream where the backtest answered 300); None with --packed."""
    if getattr(args, "feed_source", None) != "replay":
        return None
    batch_ms = getattr(args, "batch_ms", None)
    if getattr(args, "packed", False):
        if batch_ms is not None:
            raise ValueError("--packed sends up to 256 ticks a message as read, --batch-ms one message an event-time "
                             "batch: give one of them")
        return None
    if batch_ms is None:
        from engine.service.config_replay import ReplaySection

        batch_ms = getattr(args, "config_batch_ms", None) or ReplaySection.batch_ms
    if not 0 < batch_ms < math.inf:
        raise ValueError(f"--batch-ms must be a number of milliseconds > 0, got {batch_ms:g}")
    return int(batch_ms * 1e6)  # as the backtest rounds it


# A stream takes its ticks in time order only, across restarts too: one fed before (read without --price-offset,
# say) is fed again from its start only into an engine that does not hold it, or under another name. `forget` is
# named first: it drops the one stream and keeps every other, where a new data directory drops them all
def _ways_to_start_over(lead: str, forget: str | None) -> str:
    """The ways to feed a stream again from its start, after ``lead``; ``forget``: the `flashtick forget` argument
    (None: said before them, so not again)."""
    first = f"`flashtick forget {forget}` drops that one stream at the engine (its answers too), or " if forget else ""
    return (f"{lead} to feed a stream again from its start (read another way: --price-offset, --price-format), "
            f"{first}restart `flashtick serve` with another --data-dir or with --no-log (it then holds no stream), or "
            f"give the stream another name (a file of one stream: --columns ...,stream_name=NAME)")


def _forget_argument(streams: list[str]) -> str:
    """What `flashtick forget` is given for ``streams``: the stream's name, quoted for a shell, when it is one."""
    return shlex.quote(streams[0]) if len(streams) == 1 else "STREAM"


def _start_over(source: Any) -> str:
    """The ways to start over for the streams whose ticks the engine held, led by `flashtick forget STREAM` for
    those whose last tick at the engine is stamped ahead of this machine's clock: such a tick (forged, or a sender's
    clock mistake) refuses every real tick after it, and forgetting it is the way out."""
    from connectors.durations import duration_text
    from connectors.ticks import shown_name

    now = time.time_ns()
    held = sorted(getattr(source, "skipped", {}))
    ahead = {stream: source.last_ts[stream] - now for stream in held if source.last_ts.get(stream, now) > now}
    if not ahead:
        return _ways_to_start_over(";", _forget_argument(held))
    named = ", ".join(f"{shown_name(stream)} by {duration_text(ns)}" for stream, ns in list(ahead.items())[:8])
    more = f", ... ({len(ahead)} streams)" if len(ahead) > 8 else ""
    return (f"; the engine's last tick of {'a stream' if len(ahead) == 1 else 'streams'} here is stamped ahead of "
            f"this machine's clock ({named}{more}): a tick from the future (forged, or a sender's clock mistake) "
            f"refuses every real one after it. `flashtick forget {_forget_argument(list(ahead)[:1])}` drops that "
            f"stream at the engine, its ordering guard included, so its next tick, of any time, starts it afresh: "
            f"then feed these files again{_ways_to_start_over('. Else,', None)}")


def _default_action(signum: int) -> None:
    """``signum`` back to what it does without the feed's handler: SIGINT raises KeyboardInterrupt, SIGTERM ends."""
    signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)


def _restore_signals() -> None:
    for signum in (signal.SIGINT, signal.SIGTERM):
        _default_action(signum)


def _stop_on_signals(stop: threading.Event) -> list[int]:
    """SIGTERM (a supervisor's stop) and SIGINT end the feed after the current batch, with its summary (what was
    sent, what the engine accounted for); a second one is the default action. Returns the signals received."""
    interrupted: list[int] = []

    def request_stop(signum: int, _: Any) -> None:
        interrupted.append(signum)
        stop.set()
        _default_action(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, request_stop)
    return interrupted


def _sent(args: argparse.Namespace, source: Any, resume: Any, stop: threading.Event, batch_ns: int | None) -> Any:
    """The feed itself: ``source`` pushed to the engine until it ends or ``stop``; its FeedStats. On an error, the
    rows not sent are said first; the resume's control client is closed and the signals restored however it ends."""
    from connectors.feed import EngineLost, FeedClient, new_tag
    from connectors.feed_pump import run_feed

    client = None
    try:
        # tagged: the engine echoes the tag in its rejections, so this feed counts its own rejections, not those of
        # another publisher of the same streams; the one the engine's placing reply gave (placed_feeds.py), if any
        tag = getattr(resume, "tag", None) or new_tag()

        def note(line: str) -> None:
            print(f"{args.command_name}: note: {line}", file=sys.stderr, flush=True)

        # (a send that waits for a slow engine says so, and waits while the engine reads: back-pressure)
        with FeedClient(args.endpoint, watch_connection=True, tag=tag, say=note, **curve_keys(args)) as client:
            # (an engine of an earlier version says no ingest offset: the ticks go out as read, shifted)
            client.ingest_offset = getattr(resume, "ingest_offset", None)
            stats = run_feed(source, client, rate=args.rate, max_ticks=args.ticks, answers=_answers_for(args),
                             resume=resume, stop=stop, batch_ns=batch_ns, say=note,
                             warn=lambda line: print(f"{args.command_name}: {line}", file=sys.stderr, flush=True))
            if resume is not None and stats.ticks:
                _say_untrained(resume, args.command_name)
            return stats
    except Exception as e:  # the engine lost, a send timed out: the rows not sent of what was read are said first
        _say_rows_not_sent(source, client.ticks if client is not None else 0)
        if isinstance(e, EngineLost):
            raise ConnectionError(f"{e}; stopped here, with {client.ticks} ticks sent: `flashtick streams` says "
                                  f"what the engine holds of each stream") from None
        raise
    finally:
        if resume is not None:
            resume.close()
        _restore_signals()


def _say_untrained(resume: Any, command: str) -> None:
    """The engine's ``untrained_token`` caveat once a feed has sent its ticks: a stream sent a token its model never
    trained on (trades without a side, for the built-in model). The engine's log says it; the feed's user reads it
    here (review410 #1)."""
    from engine.service.untrained_tokens import UNTRAINED_TOKEN

    for caveat in resume.health().get("caveats", []):
        if caveat.get("kind") == UNTRAINED_TOKEN:
            print(f"{command}: warning: the engine says: {caveat['text']}", file=sys.stderr, flush=True)


def _say_feed_summary(stats: Any, stop: threading.Event, source: Any, replay: Any, who: str) -> None:
    """What the feed sent and what the source has to say after it: the time range's rows left out, its pace, the
    waits shortened, the ticks the engine held, what it found, and its cautions again; ``who``: the command's full
    name (`flashtick feed replay`), the prefix of its every line as of its errors."""
    from connectors.after_held import AfterHeld

    print(stats.summary() + ("; stopped by a signal" if stop.is_set() else ""), file=sys.stderr)
    if replay is not None and replay.time_range is not None:
        print(f"{who}: {replay.time_range.text()}: {replay.range_left_out} row(s) of the files outside "
              f"it left out", file=sys.stderr)
    if (pace := getattr(source, "pace", lambda: None)()) is not None:
        print(f"{who}: {pace}", file=sys.stderr)
    if replay is not None and (shortened := replay.gaps.summary()) is not None:
        print(f"{who}: {shortened}", file=sys.stderr)
    if isinstance(source, AfterHeld) and (skipped := source.said()):
        print(f"{who}: {skipped}", file=sys.stderr)
    for found in getattr(source, "found_notes", ()):
        print(f"{who}: note: {found}", file=sys.stderr)
    for caution in getattr(source, "cautions", ()):
        print(f"{who}: warning (said above too): {caution}", file=sys.stderr)


def _check_fed(args: argparse.Namespace, stats: Any, source: Any, stopped: bool) -> None:
    """A feed that sent nothing, or nothing the engine took, ends in an error saying why (after the rows not sent);
    a file fed again with nothing new is said, and no error. ``stopped``: by a signal, which also cuts short the
    wait for the engine to take what was sent (its line says what was not yet taken)."""
    from connectors.after_held import AfterHeld
    from connectors.feed_pump import FINISH_STALL_S

    held = sum(source.skipped.values()) if isinstance(source, AfterHeld) else 0  # ticks the engine held: not sent
    # (a stop inside the first event-time batch sends nothing, holding it back: not a file without ticks)
    none_sent = stats.ticks == 0 and not stats.held_back
    older = none_sent and held and source.older() is not None  # no re-feed: older ticks than the engine's
    if none_sent and held and not older:  # a file fed again: nothing new to send is no error
        print(f"{args.command_name}: nothing new to send: every tick of the files"
              f"{' of the streams selected' if source.selection is not None else ''} is stamped at or before the "
              f"engine's last tick of its stream (held, if these files were fed before; `flashtick streams` says "
              f"what it has){_start_over(source)}", file=sys.stderr)
    # rows the files' own checks refused, before any was sent: said before any error below, whichever ends the feed
    said_rows = _say_rows_not_sent(source, stats.ticks)
    if stats.unconfirmed and not stopped:
        raise ConnectionError(f"the engine has neither accepted nor refused {stats.unconfirmed} of the ticks sent "
                              f"(none more for {FINISH_STALL_S:g} s): they may be lost; `flashtick streams` says what "
                              f"it holds")
    if older:
        raise ValueError("nothing was sent: the files' ticks are older than the engine's last tick of their stream "
                         f"(above){_start_over(source)}")
    if said_rows and none_sent and not held:
        left_out = source.rejected.get("filtered_out", 0)
        raise ValueError("every row of the files was rejected; nothing was sent (reasons above)"
                         if sum(source.rejected.values()) > left_out else
                         "every row of the files was left out by a filter (above); nothing was sent")
    if none_sent and args.feed_source == "replay" and not held and not stopped:  # (a stop before the first send)
        from engine.service.no_data import NoData

        raise NoData("the files hold no ticks (no data rows): nothing was sent")
    if stats.rejected is not None and stats.ticks and sum(stats.rejected.values()) >= stats.ticks:
        raise ValueError(f"the engine rejected every tick sent ({stats.ticks}; reasons above): none was accepted")


def cmd_feed(args: argparse.Namespace) -> int | None:
    from connectors.after_held import AfterHeld
    from connectors.cautions import labelled

    batch_ns = _batch_ns(args)
    stop = threading.Event()
    try:  # (a Ctrl-C while it reads the files' layout or waits for the engine: its signal handler is not set yet)
        source = replay = _replay_source(args) if args.feed_source == "replay" else None  # a file's mistakes first
        resume = _feed_resume(args, stop)
    except KeyboardInterrupt as e:  # (SIGTERM's too: the CLI raises it as one until the feed's handler is set)
        print(f"{args.command_name}: interrupted while starting (reading the files, or waiting for the engine); "
              "nothing was sent", file=sys.stderr)
        return interrupted_status(e)
    if replay is not None and resume is not None:
        as_trained = _read_as_served(args, resume)
        if _zero_bids_as_served(args, resume) or as_trained:  # the engine reads prices otherwise: the files re-read
            source = replay = _replay_source(args)
    if source is None:
        source = _synthetic_source(args, resume.last_ts if resume is not None else {})
    elif resume is not None and resume.last_ts:  # a file fed again (after a restart): from where the engine is
        source = AfterHeld(source, resume.last_ts, resume.at_last_ts, resume.base, resume.fed_by)
    if replay is not None and resume is not None:
        _say_zero_bids_refused(replay, resume, args.command_name)
        resume.price_offset_of = replay.price_offset_of
    for line in getattr(source, "notes", ()):
        print(f"{args.command_name}: {labelled(line)}", file=sys.stderr)
    interrupted = _stop_on_signals(stop)
    try:
        stats = _sent(args, source, resume, stop, batch_ns)
    except ConnectionError as e:  # a stop while it waited for an engine that was down: interrupted, not unreachable
        if not interrupted:
            raise
        print(f"{args.command_name}: {e}", file=sys.stderr, flush=True)
        return exit_status(interrupted[0])
    _say_feed_summary(stats, stop, source, replay, args.command_name)
    _check_fed(args, stats, source, stopped=bool(interrupted))
    if interrupted:  # cut short: told from a whole feed by its exit, 128 + the signal, as backtest's (review337 #4)
        print(f"{args.command_name}: interrupted by {signal.Signals(interrupted[0]).name}: {stats.ticks:,} ticks sent "
              f"(the summary above); {_rest_after_stop(args, stats, source, resume)}", file=sys.stderr, flush=True)
        return exit_status(interrupted[0])
    return _rejected_status(args, stats, source)


def _rest_after_stop(args: argparse.Namespace, stats: Any, source: Any, resume: Any) -> str:
    """What is left to send after a stop, and what a re-run does: the rest; or nothing, every tick sent, when the
    stop cut short the wait for the engine to take them (it said "the same command sends the rest": review442 #4)."""
    if not ((source.done and not stats.held_back) or (args.ticks is not None and stats.ticks >= args.ticks)):
        return ("the same command sends the rest" if resume is not None else  # (it asks the engine what it holds)
                "with no control socket to ask what the engine holds, a re-run sends it all again")
    if not stats.unconfirmed:
        return "every tick was sent, nothing is left to send"
    return (f"every tick was sent; the stop came while the engine was still taking them, {stats.unconfirmed:,} not "
            f"yet (queued at the engine: `flashtick streams` says what it holds, and the same command sends only "
            f"what it lacks)")


def _rejected_status(args: argparse.Namespace, stats: Any, source: Any) -> int | None:
    """--max-rejected-share over the ticks the files' reading rejected and the engine refused, of those read (sent,
    held by the engine already, rejected)."""
    from connectors.after_held import AfterHeld
    from engine.service.rejected_share import rejected_share_status

    held = sum(source.skipped.values()) if isinstance(source, AfterHeld) else 0
    refused = sum(stats.rejected.values()) if stats.rejected is not None else 0
    return rejected_share_status(dict(getattr(source, "rejected", None) or {}), stats.ticks + held,
                                 getattr(args, "max_rejected_share", None), args.command_name, refused_after=refused)
