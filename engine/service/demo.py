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

from connectors.cautions import labelled
from connectors.feed import FeedClient
from connectors.feed_pump import run_feed
from connectors.replay import FileReplay
from connectors.service_topics import HEARTBEAT_TOPIC
from connectors.source import SyntheticSource
from connectors.synthetic import SyntheticConfig
from engine.service.rejections import not_passed_on, rejected_lines
from engine.service.answer_display import render_table
from engine.service.client import AnswerSubscriber
from engine.service.config import EndpointsSection, LimitsSection, ServiceConfig
from engine.service.server import Server

REDRAW_S = 0.5
DEMO_RATE = 400.0  # ticks/s: kept up with at ~5-50 ms freshness on 2018+ x86 cores with AVX-512
SLOW_LAG_S = 0.5  # a heartbeat saying data waits longer than this halves an adapting demo's rate
MIN_RATE = 25.0
# heartbeats (one a second) a halved rate is given before it is judged: its data still waiting as long as when it
# was halved, or longer, it is halved again (halved once only, the demo fed twice what this CPU computed for a whole
# minute, its answers 22 s old). A rate this CPU keeps up with, fed at half what it computes, clears what waited at
# the halving in about as long again: still behind after twice that, it is halved again too
JUDGED_AFTER_BEATS = 3
QUIET_BEATS = 2  # heartbeats in a row with nothing waiting once the feed ended: everything fed is computed
# heartbeat intervals without one after which the demo's own server is taken for stuck (its loop in a forward that
# never ends, its process frozen) and the demo stops, where it waited for the QUIET_BEATS for ever: a forward under
# load takes under a second (docs/benchmarks.md: p99 706 ms with 20,000 new streams), and a heartbeat follows each
SILENT_BEATS = 10
PROGRESS_EVERY_S = 5.0  # while the stop computes what is waiting
# a Ctrl-C stops now: the summary says what was left uncomputed (limits.drain_s's 7 s of computing are serve's)
DEMO_DRAIN_S = 1.0


class DemoServerSilent(RuntimeError):
    """The demo's own server sent no heartbeat for SILENT_BEATS intervals: what it computed is not known."""


class RateControl:
    """The rate an adapting demo feeds at, from the heartbeats' lag (how long the oldest data not computed has
    waited, in the ingest queue or for a forward): halved when it is over SLOW_LAG_S, and again while it stays
    over it and has not shortened since (a halved rate this CPU still cannot keep up with); halved anew if it falls
    behind again once caught up."""

    def __init__(self, rate: float, adapt: bool) -> None:
        self.rate = rate
        self.adapt = adapt
        self.lowered_from: list[float] = []
        self.settled = True  # the lag fell back under SLOW_LAG_S since the last lowering
        self.beats_since_lowered = 0
        self.lag_when_lowered = 0.0  # the lag at the last lowering

    def lowers(self, lag_s: float) -> bool:
        """Whether this heartbeat's lag halves the rate (then ``rate`` is the new one)."""
        self.beats_since_lowered += 1
        self.settled = self.settled or lag_s < SLOW_LAG_S
        judged = self.beats_since_lowered >= JUDGED_AFTER_BEATS
        not_shortening = judged and lag_s >= self.lag_when_lowered
        not_cleared = judged and self.beats_since_lowered >= 2 * self.lag_when_lowered  # (beats: seconds)
        if not self.adapt or lag_s <= SLOW_LAG_S or self.rate / 2 < MIN_RATE or \
                not (self.settled or not_shortening or not_cleared):
            return False
        self.lowered_from.append(self.rate)
        self.rate, self.settled = self.rate / 2, False
        self.beats_since_lowered, self.lag_when_lowered = 0, lag_s
        return True

    def part(self) -> dict:
        """What ``run_demo`` returns of the demo itself: the rate fed (at the end) and the rates it was lowered
        from."""
        return {"rate": self.rate, "lowered_from": list(self.lowered_from)}


def run_demo(seconds: float, queries: Path, replay: list[Path] | None = None, rate: float = DEMO_RATE,
             adapt: bool = True, streams: list[str] | None = None, columns: Any = None,
             stop_when: Callable[[dict], bool] | None = None, skip_bad_files: bool = False) -> dict:
    """Returns the service's stats once it stopped, with ``demo``: the rate fed at the end, the rates it was
    lowered from, and whether a Ctrl-C cut the run short (``interrupted``: said after the summary, which then says
    what it left uncomputed; else every tick fed is computed before it). ``adapt``: halve the rate while the
    heartbeats say the engine falls behind (a slower CPU than the default rate was chosen on: a first run should
    show answers seconds old only if asked to). ``streams``: the replay's streams to feed (names or globs; None:
    every one); ``columns``: its column map (None: each file's detected). A replay says how it read the files first
    and, after the summary, the rows it did not feed and why, as `feed replay` does. ``stop_when``: stop feeding
    before ``seconds`` once it holds of the returned ``demo`` part so far (a test waits on what the demo did, not
    on how much of it a busy host fits into some seconds). ``skip_bad_files``: FileReplay's (--skip-bad-files)."""
    # the files read before the model loads: a file's mistake is said first, and how each was read
    source = FileReplay([str(f) for f in replay], columns=columns, streams=streams,
                        skip_bad_files=skip_bad_files) if replay else \
        SyntheticSource(SyntheticConfig(seed=0))
    for line in getattr(source, "notes", ()):
        print(f"flashtick demo: {labelled(line)}", file=sys.stderr, flush=True)
    if replay and not source.plans:  # every file skipped: refused as backtest refuses it, before the model loads
        source.close()
        raise ValueError("the files hold no ticks (no data rows): nothing to demo")
    local = "tcp://127.0.0.1:0"
    # no clock bound (limits.max_ts_ahead_s): a demo's files may be dated anywhere, a simulation's in the future too
    config = ServiceConfig(endpoints=EndpointsSection(ingest=local, answers=local, control=local),
                           limits=LimitsSection(max_ts_ahead_s=None, drain_s=DEMO_DRAIN_S), queries=str(queries))
    print("loading the built-in model ...", file=sys.stderr, flush=True)
    server = Server(config, serve_hints=False)  # the demo's own lines say what its user can act on
    endpoints = server.bind()
    server_thread = threading.Thread(target=server.serve_forever, name="flashtick-server", daemon=True)
    server_thread.start()
    demo = _LiveDemo(source, FeedClient(endpoints["ingest"]), RateControl(rate, adapt), seconds,
                     "replay" if replay else "synthetic market", config.limits.heartbeat_s)
    interrupted = False
    try:
        with AnswerSubscriber(endpoints["answers"], [""]) as sub:
            time.sleep(0.2)  # let the subscription reach the PUB socket before data flows
            demo.feed(sub, stop_when)
            demo.finish(sub)
    except KeyboardInterrupt:  # stops at once, with its summary; told from a whole run (review442 #6: it was not)
        interrupted = True
    finally:
        demo.stop_feed()
        read_whole = source.done  # (before close, which ends it)
        source.close()
        server.stop()
        # a clean stop computes what was accepted: a thread left in a forward aborts the exit. A server that went
        # silent may never end its forward: given as long again, then left (the error says why)
        server_thread.join(None if demo.heard else demo.silent_limit_s)
    stats = server.pipeline.stats()  # after the stop: what was computed in the end
    print_summary(stats, demo.fed_s, time.monotonic() - demo.started, demo.client.ticks)
    if replay:
        print_file_rejects(source, read_whole)
    control = demo.control
    if control.lowered_from:
        print(f"fed at {control.rate:.0f} ticks/s after starting at {control.lowered_from[0]:.0f} (this CPU fell "
              f"behind at {', '.join(f'{r:.0f}' for r in control.lowered_from)})")
    if interrupted:
        print(f"flashtick demo: interrupted by SIGINT (Ctrl-C): the summary above is of the {demo.client.ticks:,} "
              f"ticks fed until then", file=sys.stderr, flush=True)
    return {**stats, "demo": {**control.part(), "interrupted": interrupted}}


class _LiveDemo:
    """The feed thread, the answers table and what the heartbeats say, from the first tick fed to the stop."""

    def __init__(self, source: Any, client: FeedClient, control: RateControl, seconds: float, what: str,
                 heartbeat_s: float) -> None:
        """``heartbeat_s``: the server's limits.heartbeat_s; SILENT_BEATS of them without one stop the demo."""
        self.source, self.client, self.control = source, client, control
        self.seconds, self.what = seconds, what
        self.silent_limit_s = SILENT_BEATS * heartbeat_s
        self.last_beat = time.monotonic()  # (the server started serving just before)
        self.heard = True  # False once it went silent for silent_limit_s
        self.table: dict[str, dict] = {}
        self.feeder: threading.Thread | None = None
        self.stop_feeding = threading.Event()
        self.started = time.monotonic()
        self.fed_s: float | None = None  # set once the feed stopped
        self.quiet_beats = 0  # heartbeats in a row with nothing waiting since the feed ended
        self.pending_tokens, self.lag_s, self.ticks_in = 0, 0.0, 0  # as the last heartbeat said
        self.next_draw = time.monotonic()
        self.said_behind = False

    def start_feed(self) -> None:
        self.stop_feeding = threading.Event()
        self.feeder = threading.Thread(target=run_feed, args=(self.source, self.client),
                                       kwargs={"rate": self.control.rate, "stop": self.stop_feeding},
                                       name="flashtick-feed", daemon=True)
        self.feeder.start()

    def stop_feed(self) -> None:
        """The feed thread stopped and its socket closed (what it sent is delivered: FeedClient's linger)."""
        self.stop_feeding.set()
        if self.feeder is not None and self.feeder.is_alive():
            self.feeder.join(5)
        if self.fed_s is None:
            self.fed_s = time.monotonic() - self.started
        self.client.close()

    def feed(self, sub: AnswerSubscriber, stop_when: Callable[[dict], bool] | None) -> None:
        """Feed for ``seconds``, until ``stop_when`` holds, or until a replay's files are fed and computed."""
        self.start_feed()
        replay_done = lambda: self.what == "replay" and not self.feeder.is_alive() and self.source.done  # noqa: E731
        while time.monotonic() - self.started < self.seconds:
            if stop_when is not None and stop_when(self.control.part()):
                break
            if self.quiet_beats >= QUIET_BEATS:  # every row fed and computed: nothing more would show
                print("flashtick demo: the files are fed and computed; stopping", file=sys.stderr, flush=True)
                break
            heartbeat = self._receive(sub, counting_quiet=replay_done())
            if heartbeat is not None:
                self._adapt()
            self._check_heard()
            self._draw(f"at {self.control.rate:.0f} ticks/s, {time.monotonic() - self.started:4.1f}/"
                       f"{self.seconds:.0f} s")
        self.stop_feed()

    def finish(self, sub: AnswerSubscriber) -> None:
        """Compute every tick fed before the stop, however long this CPU takes (said, with progress; Ctrl-C stops
        now): the summary's answers and scores then cover every tick in."""
        if self.quiet_beats >= QUIET_BEATS:
            return
        if self.pending_tokens or self.lag_s:  # a loaded CPU: the stop can take a while, say why the run overruns
            print(f"flashtick demo: stopping after {self.fed_s:.1f} s of feed; computing what is still waiting first: "
                  f"{self._waiting()} (Ctrl-C stops now and says what is left)", file=sys.stderr, flush=True)
        self.quiet_beats = 0
        next_progress = time.monotonic() + PROGRESS_EVERY_S
        while self.quiet_beats < QUIET_BEATS:
            self._receive(sub, counting_quiet=True)
            self._check_heard()
            if time.monotonic() >= next_progress and (self.pending_tokens or self.lag_s):
                print(f"flashtick demo: still waiting: {self._waiting()}", file=sys.stderr, flush=True)
                next_progress = time.monotonic() + PROGRESS_EVERY_S
            self._draw(f"fed for {self.fed_s:.0f} s; computing what is still waiting")

    def _waiting(self) -> str:
        """What the last heartbeat said is still to compute, and of the ticks fed, how many the engine has read."""
        return (f"{self.client.ticks - self.ticks_in:,} of the {self.client.ticks:,} ticks fed not read yet, "
                f"{self.pending_tokens:,} tokens to compute, the oldest data waiting {self.lag_s:.1f} s")

    def _receive(self, sub: AnswerSubscriber, counting_quiet: bool) -> dict | None:
        """One message: an answer into the table; a heartbeat returned (and its pending tokens counted)."""
        message = sub.recv(timeout_s=0.05)
        if not message:
            return None
        if not message[0].startswith("_"):
            self.table[message[0]] = message[1]
            return None
        if not message[0].startswith(HEARTBEAT_TOPIC):
            return None
        heartbeat = message[1]
        self.last_beat = time.monotonic()
        self.pending_tokens, self.lag_s = heartbeat.get("pending_tokens") or 0, heartbeat.get("lag_s") or 0.0
        self.ticks_in = heartbeat.get("ticks_in") or 0
        if counting_quiet:  # nothing for a forward, nor left unread in the ingest queue (the lag's other half)
            self.quiet_beats = 0 if self.pending_tokens or self.lag_s else self.quiet_beats + 1
        return heartbeat

    def _check_heard(self) -> None:
        """Raises DemoServerSilent once no heartbeat came for silent_limit_s."""
        if time.monotonic() - self.last_beat <= self.silent_limit_s:
            return
        self.heard = False
        raise DemoServerSilent(
            f"no heartbeat from the demo's own server in {self.silent_limit_s:g} s ({SILENT_BEATS} heartbeat "
            f"intervals); its engine is stuck or stopped: stopping without a summary "
            f"({self.client.ticks:,} ticks fed, {self.ticks_in:,} read as of its last heartbeat)")

    def _adapt(self) -> None:
        lag_s = self.lag_s
        if self.control.lowers(lag_s):
            self.stop_feeding.set()
            self.feeder.join(5)
            self.start_feed()
            print(f"flashtick demo: the engine fell behind (data waiting {lag_s:.1f} s): feeding "
                  f"{self.control.rate:.0f} ticks/s from now on (--rate N fixes it)", file=sys.stderr, flush=True)
        elif not self.control.adapt and lag_s > SLOW_LAG_S and not self.said_behind:
            self.said_behind = True
            print(f"flashtick demo: the engine is behind at {self.control.rate:.0f} ticks/s (data waiting "
                  f"{lag_s:.1f} s): answers lag, and the stop computes what waits; a lower --rate keeps up",
                  file=sys.stderr, flush=True)

    def _draw(self, progress: str) -> None:
        if time.monotonic() < self.next_draw:
            return
        render_table(self.table, sys.stdout, f"flashtick demo: built-in tick model, {self.what} {progress}  "
                                             "(Ctrl-C stops)")
        self.next_draw = time.monotonic() + REDRAW_S * (1 if sys.stdout.isatty() else 8)


def print_summary(stats: dict, fed_s: float, stopped_s: float, fed_ticks: int | None = None) -> None:
    """``stats``: the service's once it stopped; ``fed_s``: how long the feed ran (the ticks/s is over it);
    ``stopped_s``: when the stop was done; ``fed_ticks``: how many the feed sent. What it left uncomputed or
    unread (a Ctrl-C while it computed) is said."""
    fresh = stats.get("freshness_ms", {})
    runner = stats["runner"]
    late_s, left = stopped_s - fed_s, stats["pending_tokens"]
    unread = 0 if fed_ticks is None else max(0, fed_ticks - stats["ticks_in"] - sum(stats["rejected"].values()))
    if left or unread:
        never = f"{unread:,} ticks fed never read" if unread else ""
        uncomputed = f"{left:,} tokens of the last ticks left uncomputed" if left else ""
        overrun = (f" (stopped {late_s:.1f} s later, {' and '.join(filter(None, (never, uncomputed)))}: the answers "
                   f"and live scores below do not cover those ticks)")
    else:
        overrun = f" (stopped {late_s:.1f} s later: every tick in computed)" if late_s >= 1 else ""
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
    """The ticks of the files not fed, by reason with the first of each (the summary's `rejected` counts the
    engine's refusals, which a file's rows checked before sending never reach), and the cautions said again.
    ``read_whole``: the replay reached the files' end (else the counts are of the ticks read so far)."""
    rejected = dict(source.rejected)
    if rejected:
        print(not_passed_on(rejected, "fed", so_far=not read_whole),
              *rejected_lines(rejected, source.rejected.examples, source.emitted), sep="\n")
    for found in source.found_notes:
        print(f"note: {found}")
    for caution in source.cautions:
        print(f"warning (said above too): {caution}")
