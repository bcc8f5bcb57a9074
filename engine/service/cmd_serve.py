"""The commands that run the engine in this process: `serve` (the service behind its ZeroMQ sockets: its config
from the options, its start lines, its stop on a signal) and `demo` (the engine with a live feed and live answers).
"""

from __future__ import annotations

import argparse
import atexit
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from engine.service.cli_common import (EXAMPLE_QUERIES, TEXT_EXAMPLE_QUERIES, exit_status, is_tick_model,
                                       service_config)
from engine.service.cli_reading import column_map_of


def default_data_dir(model_id: str) -> Path:
    """Where `serve` keeps its logs when not told: the user's state directory, one folder per model. A relative
    $XDG_STATE_HOME is ignored, as the XDG base directory spec says: taken as given, the data directory (and what a
    restart recovers) depended on the folder the service was started from (review224 #11)."""
    given = os.environ.get("XDG_STATE_HOME", "")
    state = Path(given) if os.path.isabs(given) else Path.home() / ".local" / "state"
    return state / "flashtick" / "".join(c if c.isalnum() or c in "._-" else "_" for c in model_id)


def _serve_config(args: argparse.Namespace) -> Any:
    """The service config for `serve`; with neither --config nor --queries, a tick model (the built-in one, or a
    checkpoint with codec.json) registers the example queries (a model with nothing asked of it publishes
    nothing), a text model none. The logs are on unless --no-log."""
    import dataclasses

    if args.config is None and args.queries is None:
        config = service_config(None, None, serving=True, model=args.model)
        if is_tick_model(config):
            print(f"flashtick: no --config or --queries: registering {EXAMPLE_QUERIES.name} (the built-in model's "
                  f"example queries)", file=sys.stderr, flush=True)
            config = dataclasses.replace(config, queries=str(EXAMPLE_QUERIES))
        else:  # a text model's questions are free text: only the user can write them
            print(f"flashtick: no --config or --queries: no standing queries; register yours while serving with "
                  f"`flashtick register FILE` (a text model's example: {TEXT_EXAMPLE_QUERIES})",
                  file=sys.stderr, flush=True)
    else:
        config = service_config(args.config, args.queries, serving=True, model=args.model)
    if args.no_log or (not config.log.enabled and args.data_dir is None):
        data_dir = None
    else:
        data_dir = str(args.data_dir or config.log.dir or default_data_dir(config.model.model_id))
    config = dataclasses.replace(config, log=dataclasses.replace(config.log, dir=data_dir))
    # a config without `queries:` (one written for its ports) asks what backtest asks, unless the data directory
    # holds queries registered before (a restart brings those back as they were)
    saved = data_dir is not None and (Path(data_dir) / "queries.yaml").is_file()
    if args.config is not None and config.queries is None and is_tick_model(config) and not saved:
        print(f"flashtick: no `queries:` in the config and none saved: registering {EXAMPLE_QUERIES.name} (the "
              f"built-in model's example queries, as backtest asks them; `flashtick unregister NAME` drops one)",
              file=sys.stderr, flush=True)
        config = dataclasses.replace(config, queries=str(EXAMPLE_QUERIES))
    if args.shards is not None or args.ray_address is not None:
        from engine.service.config import ConfigError

        shards = {"count": config.shards.count if args.shards is None else args.shards,
                  "ray_address": args.ray_address or config.shards.ray_address}
        try:
            config = dataclasses.replace(config, shards=dataclasses.replace(config.shards, **shards))
        except ConfigError as e:
            raise ConfigError(f"--shards/--ray-address: {e}") from None
        if args.ray_address and not config.shards.count:
            raise ConfigError("--ray-address needs --shards N (N >= 1)")
    return config


# The signals `serve` stops cleanly on (what was accepted computed, the summary said): SIGHUP too, the one a closed
# terminal or some supervisors send, which killed the process without its drain
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StoppedWhileStarting(BaseException):
    """A stop signal before the service serves, raised out of whatever the start was doing (loading the model,
    replaying the tick log): each start step lets go of what it holds on any BaseException (its sockets, the shards,
    the data directory's lock), and cmd_serve says so and exits 0. Not an Exception: no `except Exception` of a
    start step takes it for that step's own failure."""


class StartingStop:
    """The handler of STOP_SIGNALS from `serve`'s `starting` line until it serves. It raises StoppedWhileStarting
    (so the process exits 0, as a stop while serving does: it died by the signal, rc 143, which a supervisor checking
    for 0 flagged), writing nothing: what the log holds stays as it was, and the next start replays it. A second
    signal ends the process at once (by the signal), should unwinding the start hang."""

    def __init__(self) -> None:
        self.signum: int | None = None  # the signal that stopped the start
        self.logged = False  # whether a data directory keeps what was accepted (known once the config is read)

    def __call__(self, signum: int, _frame: Any) -> None:
        self.signum = signum  # (kept: a library that swallows the raise does not make the start go on to serve)
        for each in STOP_SIGNALS:
            signal.signal(each, signal.SIG_DFL)
        raise StoppedWhileStarting(signum)

    def line(self) -> str:
        """What the log says of the stop."""
        name = signal.Signals(self.signum).name if self.signum is not None else "a signal"
        kept = ("nothing accepted is lost: the tick log holds it, and the next start replays it and computes what "
                "is owed" if self.logged else "nothing was accepted (ingest is bound once the start ends)")
        return f"flashtick: stopped while starting ({name}); {kept}"


class ServingStop:
    """The handler of STOP_SIGNALS once serving: the first stops the service (its drain, limits.drain_s); a second
    during the drain ends the process at once, by that signal (143 for SIGTERM), as the docs promise (review392 #6:
    it was ignored, and the drain ran its whole drain_s). Nothing accepted is lost: the tick log holds it (fsynced
    per log.fsync) and the next start replays it and computes what is owed, as after a SIGKILL."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.signalled = False

    def __call__(self, signum: int, _frame: Any) -> None:
        if not self.signalled:
            self.signalled = True
            self.server.stop()
            return
        for each in STOP_SIGNALS:  # (a third ends it even if the line below cannot be written)
            signal.signal(each, signal.SIG_DFL)
        # said and ended from a thread: this handler runs between two bytecodes of the main thread, which may hold
        # stderr's lock (a line being written), and a print here would wait on it for ever
        threading.Thread(target=_end_by, args=(signum, getattr(self.server.pipeline, "data", None)),
                         daemon=True).start()


def _end_by(signum: int, data: Any) -> None:
    """The process ended by ``signum``, said first, in the log and in the data directory's lock (``data``, None
    without a tick log), whose next start then says a stop cut short, not a crash (review412 #12)."""
    name = signal.Signals(signum).name
    if data is not None:
        data.mark_ended_by_signal(name)
    kept = ("nothing accepted is lost: the tick log holds it, and the next start replays it and computes what is owed"
            if data is not None else "what was accepted and not answered is lost (no tick log)")
    print(f"flashtick: WARNING: a second {name} during the stop: ending now, without the rest of the drain; {kept}",
          file=sys.stderr, flush=True)
    os.kill(os.getpid(), signum)


def _byte_size_text(size: int) -> str:
    """``size`` in the largest binary unit it reaches, at most two decimals: `256 MiB`, `1.5 GiB`, `4 KiB` (a pool
    of 1024 cells of 4 KiB said as `0.00 GiB` read as no pool at all)."""
    unit, scale = next(((unit, scale) for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
                        if size >= scale), ("bytes", 1))
    return f"{f'{size / scale:.2f}'.rstrip('0').rstrip('.')} {unit}"


def _kv_pool_line(server: Any) -> str:
    """The KV pool's size as allocated, and the key that sets it: `KV pool: 4096 cells x 64 KiB = 256 MiB (...)`;
    then each session's window in effect (a window changed between restarts is applied, and seen here)."""
    from engine.service.config_kv import DEFAULT_KV_MAX_BYTES, DEFAULT_KV_MEMORY_SHARE

    pipeline, kv = server.pipeline, server.config.kv
    if server.config.shards.count:
        cells, cell_bytes = pipeline.shard_kv_cells, pipeline.shard_kv_cell_bytes
        count = server.config.shards.count  # (the total too: a config sized for one engine holds it N times over)
        each = f" per shard (x {count}: {_byte_size_text(count * cells * cell_bytes)} of KV on all shards together)"
        window = pipeline.window
    else:
        cells, cell_bytes, each = pipeline.runner.kv.num_blocks * kv.block_size, pipeline.runner.kv.cell_bytes, ""
        window = pipeline.engine.scheduler.window
    key = ("kv.cells" if kv.cells is not None else "kv.bytes" if kv.bytes is not None else
           f"the default: 1/{DEFAULT_KV_MEMORY_SHARE} of this host's memory or its cgroup's limit"
           f"{', shared by the shards' if server.config.shards.count else ''}, at most "
           f"{_byte_size_text(DEFAULT_KV_MAX_BYTES)}{' each' if server.config.shards.count else ''}; "
           f"on the CPU its memory is taken as its cells are first used; "
           f"kv.cells or kv.bytes sets it")
    width = f"{cell_bytes // 1024} KiB" if cell_bytes % 1024 == 0 else f"{cell_bytes} bytes"
    window_key = _window_cause(pipeline, window, server.config.scheduler.window is not None)
    return (f"flashtick: KV pool{each}: {cells} cells x {width} = {_byte_size_text(cells * cell_bytes)} ({key}); "
            f"each session's window: {window} tokens ({window_key}); "
            + _streams_in_pool(cells, window, kv.block_size, server.config.scheduler.stream_idle_s))


def _streams_in_pool(cells: int, window: int, block: int, idle_s: float | None) -> str:
    """What the pool holds counted in streams (review355 #6: a US feed of thousands of sparse names learnt it only
    from the thrash warning): streams at a full window (the window and the block a roll may straddle), and at one
    block, the least a stream that has ticked holds (a name that printed a few times); and what frees it."""
    from engine.service.stream_capacity import full_window_cells, resident_streams

    freed = (f"an idle stream's KV is freed after scheduler.stream_idle_s ({idle_s:g} s), its context kept"
             if idle_s is not None else "scheduler.stream_idle_s is null: a stream's KV is never freed for idleness")
    at_block, at_full = resident_streams(cells, block, window)
    return (f"it holds {at_full:,} stream{'s' if at_full != 1 else ''} at a full window "
            f"({full_window_cells(block, window)} cells each) and {at_block:,} at one block of {block} cells, the "
            f"least a stream that has ticked holds; {freed}")


def _capacity_note(server: Any) -> str | None:
    """The warning for a scheduler.max_streams above what the KV pool holds resident (stream_capacity.py)."""
    from engine.service.stream_capacity import capacity_note

    pipeline, config = server.pipeline, server.config
    if config.shards.count:
        cells, window = pipeline.shard_kv_cells, pipeline.window
    else:
        cells, window = pipeline.runner.kv.num_blocks * config.kv.block_size, pipeline.engine.scheduler.window
    return capacity_note(config.scheduler.max_streams, config.scheduler.when_full, cells, config.kv.block_size,
                         window, config.shards.count)


def _few_ticks(server: Any) -> str | None:
    """The warning for a session window that holds fewer than ~32 ticks of the model's codec (answer_context.py)."""
    from connectors.text_codec import TextCodec
    from engine.service.answer_context import few_ticks_warning, tokens_per_tick

    pipeline = server.pipeline
    sharded = bool(server.config.shards.count)  # (the front door holds no engine: its shards said their numbers)
    window = pipeline.window if sharded else pipeline.engine.scheduler.window
    positions = pipeline.max_positions if sharded else pipeline.engine.blocks.max_positions
    return few_ticks_warning(window, tokens_per_tick(pipeline.codec), " (a typical trade line of its template)",
                             positions=positions, explicit=server.config.scheduler.window is not None,
                             text=isinstance(pipeline.codec, TextCodec))


def _window_cause(pipeline: Any, window: int, explicit: bool) -> str:
    """Why the window is what it is (engine/context_rolls.py window_cause, as a backtest's summary says it); the
    sharded front door has no engine of its own (its shards fitted the window): the model's positions."""
    from engine.context_rolls import window_cause

    engine = getattr(pipeline, "engine", None)
    if engine is None:
        return "scheduler.window" if explicit else "the model's positions, at most what the pool holds: " \
            "scheduler.window sets it"
    return window_cause(engine.blocks, window, explicit)


def _start(args: argparse.Namespace, stopping: StartingStop) -> tuple[Any, dict[str, str]]:
    """The server of ``args``, its model loaded and its streams recovered, and its bound endpoints."""
    from engine.service.config import ConfigError
    from engine.service.data_dir_open import DataDirFull
    from engine.service.descriptor_limit import raise_open_file_limit
    from engine.service.early_start import EarlyStart

    from engine.service.log_levels import level_the_log

    config = _serve_config(args)
    level_the_log(config.log.format)
    stopping.logged = config.log.dir is not None
    raise_open_file_limit()  # a client connection takes a descriptor: a soft 1024 turned clients away silently
    # control and metrics bound before the engine's imports (torch: seconds on a loaded host), answering "starting"
    early = EarlyStart(config)
    try:
        from engine.service.server import Server
    except BaseException:
        early.close()
        raise
    try:
        server = Server(config, early=early)
    except (ConfigError, DataDirFull) as e:
        raise _data_dir_named(e, _data_dir_key(args, config)) from None
    return server, server.bind()


def _data_dir_key(args: argparse.Namespace, config: Any) -> str:
    """Where the data directory came from, as the start's lines and errors name it: `--data-dir`, `log.dir`, or
    `the default` (default_data_dir)."""
    if args.data_dir is not None:
        return "--data-dir"
    return "log.dir" if config.log.dir != str(default_data_dir(config.model.model_id)) else "the default"


def _data_dir_named(error: Exception, key: str) -> Exception:
    """``error``, of the data directory (which names it `log.dir ...`, the config's key), naming where it came from
    instead (review442 #8: a full or read-only --data-dir, or default, said `log.dir`, a key nobody had set): the
    option, or the default with the ways around it."""
    text = str(error)
    if key == "log.dir" or not text.startswith("log.dir "):
        return error
    if key == "--data-dir":
        return type(error)(text.replace("log.dir", "--data-dir"))
    return type(error)(text.replace("log.dir", "the default data directory", 1).replace("log.dir", "--data-dir")
                       + "; --data-dir DIR keeps it elsewhere, --no-log keeps nothing")


def _started(args: argparse.Namespace) -> tuple[Any, dict[str, str]] | None:
    """``_start`` under StartingStop: the server and its endpoints, or None (said) when a stop signal came first."""
    stopping = StartingStop()
    for signum in STOP_SIGNALS:
        signal.signal(signum, stopping)
    server = None
    try:
        server, endpoints = _start(args, stopping)
        serving_stop = ServingStop(server)
        for signum in STOP_SIGNALS:  # from here a stop drains what was accepted (serve_forever)
            signal.signal(signum, serving_stop)
        if stopping.signum is not None:  # (its raise was swallowed on the way: stopped all the same)
            raise StoppedWhileStarting(stopping.signum)
    except (StoppedWhileStarting, Exception):
        # any failure once a stop signal came is the stop's: its raise swallowed inside a half-done import (numpy's,
        # review442 #7) leaves that module broken, and the next use of it fails with a nonsense error (exit 2)
        if stopping.signum is None:
            raise
        if server is not None:  # stopped once bound: its sockets and the data directory's lock let go, as serving's
            server.close()
        print(stopping.line(), file=sys.stderr, flush=True)
        return None
    return server, endpoints


def _say_setup(args: argparse.Namespace, server: Any) -> None:
    """The start lines on what serves: where it logs, its shards, its model and KV pool, and the notes on how the
    model's training read its files."""
    # (here, not at the top: the CLI's parser imports this module before it can name a shadowing package)
    from engine.service.market_caveat import start_note
    from engine.service.reply_caveats import model_caveats
    from engine.service.trained_streams import TrainedStreams
    config, data = server.config, server.pipeline.data
    print(f"flashtick: logging accepted ticks and published answers in {data.root} ({_data_dir_key(args, config)}; "
          f"--no-log to keep nothing)" if data is not None else "flashtick: the tick log is off (--no-log or "
          "log.enabled: false): nothing is kept on disk; a restart starts empty", file=sys.stderr, flush=True)
    if server.config.shards.count:
        print(f"flashtick: {server.config.shards.count} engine shards (Ray actors) behind these sockets",
              file=sys.stderr, flush=True)
    model = server.config.model
    print(f"flashtick: model {model.model_id} ("
          f"{'the built-in tick model' if model.path is None else Path(model.path).expanduser().resolve()})",
          file=sys.stderr, flush=True)  # a wrong model.path is seen at the start, not in the answers
    print(_kv_pool_line(server), file=sys.stderr, flush=True)  # a pool of GiBs is seen at the start, not in top
    if (capacity := _capacity_note(server)) is not None:  # max_streams past what the pool holds resident
        print(f"flashtick: {capacity}", file=sys.stderr, flush=True)
    if (few := _few_ticks(server)) is not None:  # a window of a handful of ticks (a Mistral sliding_window), said
        print(f"flashtick: {few}", file=sys.stderr, flush=True)
    for caveat in model_caveats(server.config):  # (the same in every ask, get and health reply: reply_caveats.py)
        print(f"flashtick: note: {caveat['text']}", file=sys.stderr, flush=True)
    # a spot-trained model's caveat (said in each reply about a derivatives stream), or what a model trained on
    # derivatives was trained on (market_caveat.py)
    if (markets := start_note(server.config.model.path)) is not None:
        print(f"flashtick: note: {markets}", file=sys.stderr, flush=True)
    if (trained := TrainedStreams(server.config.model.path).start_note()) is not None:  # (review443 #2)
        print(f"flashtick: note: {trained}", file=sys.stderr, flush=True)


def _say_serving(server: Any, endpoints: dict[str, str]) -> None:
    """The start's last lines: open sockets' warnings, the serving line (what a probe waits for), and what it will
    not do (no standing queries) or does (CURVE)."""
    from engine.service.descriptor_limit import low_limit_warning
    from engine.service.exposure import open_socket_warnings
    from engine.service.reply_caveats import regime_caveat

    for warning in open_socket_warnings(endpoints, server.config.curve):  # before the serving line a probe waits for
        print(f"flashtick: {warning}", file=sys.stderr, flush=True)
    if (few := low_limit_warning()) is not None:
        print(f"flashtick: {few}", file=sys.stderr, flush=True)
    if (regime := regime_caveat(server.pipeline.registry.list(), server.pipeline.codec.questions)) is not None:
        print(f"flashtick: note: {regime['text']}", file=sys.stderr, flush=True)  # before the serving line
    feeds = "".join(f" feed={feed}" for feed in server.config.endpoints.feeds)  # SUBscribed to (connects)
    print("flashtick serving " + " ".join(f"{k}={v}" for k, v in endpoints.items()) + feeds, file=sys.stderr,
          flush=True)
    if not len(server.pipeline.registry):  # e.g. a config written for its ports only: say why nothing comes out
        example = f" (the built-in model's examples: {EXAMPLE_QUERIES})" if is_tick_model(server.config) else ""
        print(f"flashtick: no standing queries are registered (no `queries:` file in the config, none saved in the "
              f"data directory): nothing is published until you register some with `flashtick register FILE`"
              f"{example}", file=sys.stderr, flush=True)
    curve = server.config.curve
    if curve.enabled:
        who = f"clients listed in {curve.clients_dir}" if curve.clients_dir else "any client with the server key"
        print(f"flashtick: CURVE on control, answers{' and ingest' if curve.ingest else ''}; {who}",
              file=sys.stderr, flush=True)


def _stopped_line(server: Any) -> str:
    """The summary once serving stopped: ticks in (this run's and the tick log's), answers out, rejects, conflation."""
    stats = server.pipeline.stats()
    rejected = stats["rejected"]
    refused = f", {sum(rejected.values())} rejected ({', '.join(f'{r} {n}' for r, n in sorted(rejected.items()))})" \
        if rejected else ""
    data = server.pipeline.data  # after a restart, ticks_in counts the tick log's ticks too
    recovered = getattr(data, "recovered_ticks", 0) if data is not None else 0
    earlier = f" ({stats['ticks_in'] - recovered} this run, {recovered} from the tick log)" if recovered else ""
    conflated = f", {stats['conflated']} quotes conflated (when_behind: conflate)" if stats.get("conflated") else ""
    # what the stop could not read at all (stop_drain.py): on the wire, lost with the socket, its senders must resend
    unread = (getattr(server, "unread_at_stop", None) or {}).get("unread_messages")
    left = f", about {unread} messages left unread at the ingest socket (not accepted: send them again)" \
        if unread else ""
    return (f"flashtick stopped: {stats['ticks_in']} ticks in{earlier}, {stats['answers_out']} answers out this run"
            f"{refused}{conflated}{left}")


def cmd_serve(args: argparse.Namespace) -> int | None:
    # said before the imports (torch: seconds on a loaded host), so a supervisor's log shows a start began
    from engine.service.log_levels import level_the_log
    from engine.service.release import this_release

    level_the_log()  # a severity on every line from the first (json once the config says log.format: json)
    config_file = f"config {args.config.absolute()}" if args.config is not None else "no config file"
    print(f"flashtick {this_release()} starting (pid {os.getpid()}, {config_file})", file=sys.stderr, flush=True)
    if (started := _started(args)) is None:
        return 0
    server, endpoints = started
    _say_setup(args, server)
    _say_serving(server, endpoints)
    server.serve_forever()
    print(_stopped_line(server), file=sys.stderr)
    _flush_on_exit(server)


def _flush_on_exit(server: Any) -> None:
    """At the process's exit, wait (server.STOP_FLUSH_S at most) for the last answers, `_rejects/` entries and control
    replies the closed sockets still queue: a process that exits without terminating its ZeroMQ context drops them
    unsent. At exit, not now: the context is the process's shared one (zmq.Context.instance()), which a caller that
    goes on after serve (a test running it in-process) still uses."""
    from engine.service.server import STOP_FLUSH_S

    context = server.context
    if context.closed:  # (a CURVE service's own context, terminated by close(): flushed there)
        return

    def flush() -> None:
        if context.closed:
            return
        term = threading.Thread(target=context.term, name="flashtick-flush", daemon=True)
        term.start()
        term.join(STOP_FLUSH_S + 0.5)  # (a socket left open would hold term() for ever: the exit does not wait)

    atexit.register(flush)


def cmd_demo(args: argparse.Namespace) -> int | None:
    from engine.service.demo import DEMO_RATE, run_demo

    columns = column_map_of(args)
    if args.replay is None and (columns is not None or args.streams is not None or args.skip_bad_files):
        raise ValueError("the reading options (--streams, --price-offset, --columns, ...) read files: give them "
                         "with --replay FILE ...")
    ran = run_demo(seconds=args.seconds, queries=args.queries, replay=args.replay, rate=args.rate or DEMO_RATE,
                   adapt=args.rate is None, streams=args.streams, columns=columns, skip_bad_files=args.skip_bad_files)
    # cut short by a Ctrl-C: exit 130, as every command (a script running `make demo` as a smoke test tells it)
    return exit_status(signal.SIGINT) if ran["demo"]["interrupted"] else None
