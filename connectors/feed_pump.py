"""The feed pump: `run_feed` sends any Source (a file replay, the synthetic market) through a FeedClient until it
is done, in messages of `batch` ticks or of one event-time batch each, capped at `rate` ticks a second (a paced
replay keeps its files' clock itself: the pump says when it runs behind), with the engine's rejections of its
streams counted (RejectWatch) and, with a FeedResume, a restart of the engine mid-feed resumed with no tick lost
or sent twice; it returns the feed's FeedStats. `flashtick feed` (engine/service/cmd_feed.py) runs it.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable, Mapping

from connectors.event_time_batches import MAX_BATCH_TICKS, EventTimeCutter
from connectors.feed import EngineLost, FeedClient, FeedResume, FeedTimeout
from connectors.feed_stats import FeedStats
from connectors.reject_watch import RejectWatch
from connectors.source import BEHIND_SAID_S, Source
from connectors.ticks import Tick
from connectors.wire_payload import pack
from engine.quoting import quoted


def run_feed(
    source: Source,
    client: FeedClient,
    rate: float | None = None,
    max_ticks: int | None = None,
    batch: int = 256,
    *,
    batch_ns: int | None = None,
    stop: threading.Event | None = None,
    idle_sleep_s: float = 0.001,
    answers: str | None = None,
    ready_timeout_s: float = 5.0,
    settle_s: float = 5.0,
    resume: FeedResume | None = None,
    say: Callable[[str], None] | None = None,
    warn: Callable[[str], None] | None = None,
) -> FeedStats:
    """Pump `source` into `client` until it is done, `max_ticks` are sent or `stop` is set.

    `say` hears, at most every BEHIND_SAY_EVERY_S, that a paced source (FileReplay's `speed`) runs behind its
    pace (`behind_s`): the engine pushes back, or this machine cannot read the files that fast; and, as each
    begins, a wait of more than a few seconds for its next tick (a night's gap; `take_long_waits`).

    `rate` caps ticks per second (None: as fast as the source and socket go);
    each message carries up to `batch` ticks, or with `batch_ns` one event-time
    batch (EventTimeCutter: the tick groups of a backtest with that batch width;
    a batch leaves once a tick past its end is read, or the source ends, or, from a paced source, once its clock
    passes the batch's end: so a pause in the file holds no batch back; a stop or `max_ticks` inside a batch holds
    that batch back, unsent, for the next run to send whole: FeedStats.held_back). A source with nothing ready is
    polled again after `idle_sleep_s`, since sources never block. Raises
    FeedTimeout when the engine takes nothing (see FeedClient).

    With `answers` (the engine's answers endpoint) the rejections of our streams
    are counted into the stats: the feed waits for a first heartbeat (at most
    `ready_timeout_s`) before it sends, and after the last send until two
    heartbeats pass with no new rejection (at most `settle_s`); `warn` hears them as they come (RejectWatch's
    `say`: the first of each reason at once, then the counts at most every REJECTS_SAY_EVERY_S).

    With `resume` (and a `client` made with ``watch_connection``), a connection to the engine that drops mid-feed
    (a restart) is resumed: what the engine does not hold of what was sent goes again, each message as it first
    went (so an event-time batch is still one tick group), then the feed goes on.
    Without it, EngineLost ends the feed.
    """
    if rate is not None and not (isinstance(rate, (int, float)) and 0 < rate < float("inf")):
        raise ValueError("rate must be a number of ticks per second > 0 (or not given, for no cap), got "
                         f"{quoted(rate)}")
    if max_ticks is not None and (isinstance(max_ticks, bool) or not isinstance(max_ticks, int) or max_ticks < 0):
        raise ValueError(f"max_ticks must be None or an int >= 0, got {quoted(max_ticks)}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, got {quoted(batch)}")
    cutter = None if batch_ns is None else EventTimeCutter(batch_ns)
    if answers is None:
        stats = _pump(source, client, rate, max_ticks, batch, stop, idle_sleep_s, None, resume, cutter, say)
        return _finish(stats, client, None, resume, stop)
    with RejectWatch(answers, say=warn, tag=client.tag, **client.curve) as watch:
        _wait_ready(watch, client, ready_timeout_s, resume)
        stats = _pump(source, client, rate, max_ticks, batch, stop, idle_sleep_s, watch, resume, cutter, say)
        stats = _finish(stats, client, watch, resume, stop)
        if not stats.unconfirmed:  # (an engine still taking what was sent, stopped waiting on: no rejection settles)
            watch.settle(settle_s)
        return stats._replace(rejected=dict(watch.rejected), unattributed=watch.unattributed,
                              others=watch.others, first_errors=dict(watch.first_errors))


def _wait_ready(watch: RejectWatch, client: FeedClient, timeout_s: float, resume: FeedResume | None) -> None:
    """The first heartbeat; with ``resume``, an engine that restarts before it (its connection dropped) is waited
    for as a restart mid-feed is, rather than ending the feed as if nothing served at the endpoint."""
    try:
        watch.wait_ready(timeout_s)
    except FeedTimeout:
        if resume is None or not client.dropped():
            raise
        resume.lost([], rejected(watch))  # nothing sent yet: waits for the engine, says so, sends nothing
        watch.wait_ready(timeout_s)


BEHIND_SAY_EVERY_S = 10.0  # a paced replay running behind is said at most this often

FINISH_STALL_S = 30.0  # after the last send, how long the engine may account for no more of what was sent


def _finish(stats: FeedStats, client: FeedClient, watch: RejectWatch | None, resume: FeedResume | None,
            stop: threading.Event | None) -> FeedStats:
    """With ``resume``: after the last send, wait until the engine has taken (accepted or refused) every tick sent,
    resuming as mid-feed if the connection drops meanwhile (what sat unread in its queue goes with a stopping
    engine), so the feed ends only once nothing it sent is still in flight; or until it takes no more for
    FINISH_STALL_S, or ``stop`` is set (a Ctrl-C waited out a backlog of a minute: review442 #4), the rest counted
    as ``unconfirmed``."""
    if resume is None:
        if client.dropped():  # after the last send: what was in flight may be lost, and nothing can tell
            raise EngineLost(f"the connection to the engine at {client.endpoint} dropped after the last send (a "
                             f"restart?): what was in flight may not have reached it")
        return stats
    began = time.monotonic()
    left, stalled_at = None, began + FINISH_STALL_S
    while True:
        if watch is not None:
            watch.poll(100)
        else:
            time.sleep(0.1)
        if client.dropped():
            _send(client, [], resume, watch, lost=True)
            continue
        now = resume.unconfirmed(rejected(watch))
        stopped = stop is not None and stop.is_set()
        if now == 0 or stopped or (now == left and time.monotonic() >= stalled_at):
            return stats._replace(unconfirmed=now, restarts=resume.restarts, resent=resume.resent,
                                  lost=resume.lost_ticks, superseded=resume.superseded_ticks,
                                  sent_twice=resume.sent_twice_ticks, wait_s=time.monotonic() - began)
        if now != left:
            left, stalled_at = now, time.monotonic() + FINISH_STALL_S


def _pump(source: Source, client: FeedClient, rate: float | None, max_ticks: int | None, batch: int,
          stop: threading.Event | None, idle_sleep_s: float, watch: RejectWatch | None,
          resume: FeedResume | None = None, cutter: EventTimeCutter | None = None,
          say: Callable[[str], None] | None = None) -> FeedStats:
    t0 = paced_from = time.monotonic()
    said_behind_at = -math.inf
    sent = messages = paced = split = 0  # sent: ticks read from the source (a cutter's open batch leaves later)
    control_s = [0.0]  # time in resume.sent: the engine's `streams` replies

    def send(ticks: list[Tick]) -> int:
        nonlocal split
        if cutter is None:
            return _send(client, ticks, resume, watch, control_s=control_s)
        sending = 0
        for done in cutter.add(ticks) if ticks else cutter.flush():
            split += len(done) > MAX_BATCH_TICKS
            for i in range(0, len(done), MAX_BATCH_TICKS):
                sending += _send(client, done[i : i + MAX_BATCH_TICKS], resume, watch, control_s=control_s)
        return sending

    restarts = resume.restarts if resume is not None else 0
    # A paced source (FileReplay's `speed`) with an event-time cutter: the open batch goes once the source's clock
    # passes its end, not when the next tick comes (after a pause in the file, that is the whole pause late).
    speed = getattr(source, "speed", None) if cutter is not None else None
    read_at: tuple[int, int] | None = None  # (monotonic ns after the read, event ts) of the last tick read
    while (max_ticks is None or sent < max_ticks) and not (stop is not None and stop.is_set()):
        want = batch if max_ticks is None else min(batch, max_ticks - sent)
        if rate is not None:
            # Tick number k may leave at paced_from + k / rate; the +1 lets the first one go at once.
            allowed = int((time.monotonic() - paced_from) * rate) + 1 - (sent - paced)
            if allowed <= 0:
                time.sleep(max(0.0, paced_from + (sent - paced) / rate - time.monotonic()))
                continue
            want = min(want, allowed)
        polled_ns = time.monotonic_ns()
        ticks = source.next_batch(want)
        if say is not None and (max_gap_s := getattr(source, "max_gap_s", False)) is not False:  # a paced replay
            for wait in source.take_long_waits():
                say(wait.text(source.speed, max_gap_s))
        if ticks:
            if watch is not None:
                watch.streams.update(t.stream for t in ticks)
            messages += send(ticks)
            sent += len(ticks)
            if speed is not None:
                read_at = (time.monotonic_ns(), ticks[-1].ts)
            behind = getattr(source, "behind_s", 0.0)
            if say is not None and behind >= BEHIND_SAID_S and time.monotonic() - said_behind_at >= BEHIND_SAY_EVERY_S:
                said_behind_at = time.monotonic()
                say(f"{behind:.1f} s behind --speed {source.speed:g} (the engine pushes back, or this machine "
                    f"cannot read the files that fast): the ticks leave late, in order, none dropped")
            if resume is not None and resume.restarts != restarts:  # time lost to a restart is not made up in a burst
                restarts, paced_from, paced = resume.restarts, time.monotonic(), sent
            if watch is not None:
                watch.poll()
        elif source.done:
            break
        else:
            if read_at is not None and cutter is not None and _window_passed(cutter.end, speed, read_at, polled_ns):
                messages += send([])  # the open batch is complete: nothing stamped before its end is left
            time.sleep(idle_sleep_s)
    held_back = 0
    if cutter is not None and source.done:
        messages += send([])  # the last batch
    elif cutter is not None:  # stopped (a signal, max_ticks) inside a batch: a part sent alone would be a tick group
        held_back = len(cutter.held)  # the backtest never has; the next run sends it whole (it asks what is held)
        sent -= held_back
    return FeedStats(sent, messages, time.monotonic() - t0, split_batches=split, control_s=control_s[0],
                     held_back=held_back)


def _window_passed(end: int | None, speed: float, read_at: tuple[int, int], polled_ns: int) -> bool:
    """Whether the paced source's clock had passed ``end`` (an open batch's) when it was polled at ``polled_ns``,
    from its last read ``read_at``: the read tick was due when the read returned, and the clock runs ``speed``
    event ns a wall ns from there (a gap cut to --max-gap only runs it ahead). So an empty poll begun after that
    proves no tick stamped before ``end`` is left to come, and the batch can go as the backtest cuts it."""
    if end is None:
        return False
    wall_ns, ts = read_at
    return ts + (polled_ns - wall_ns) * speed >= end


def _send(client: FeedClient, ticks: list[Tick], resume: FeedResume | None, watch: RejectWatch | None,
          lost: bool = False, control_s: list[float] | None = None) -> int:
    """Send ``ticks`` as one message; where the connection dropped first (``lost``: it is known to have, and
    ``resume`` is given), send what the engine lacks of what went before, each message as it first went (one
    tick group each, as the feed cut them: an event-time batch of ``batch_ns`` stays one), then these. Returns the
    messages sent; ``control_s[0]`` gains the time ``resume.sent`` took (its control calls)."""
    pending, messages = [ticks], 0
    while pending:
        message = pending.pop(0)
        try:
            if lost:
                lost = False
                raise EngineLost("the connection dropped")
            if not message:
                continue
            payload, n = pack(client.outgoing(message))
            if watch is not None and watch.max_message_bytes is not None:  # the engine's, from its heartbeats
                client.max_message_bytes = watch.max_message_bytes
            limit = client.max_message_bytes
            if limit is not None and n > 1 and len(payload) > limit:  # in halves, never refused whole as oversize
                pending[:0] = [message[: n // 2], message[n // 2 :]]
                continue
            client.send_packed(payload, n)
        except EngineLost:
            if resume is None:
                raise
            if watch is not None:
                watch.poll()
            pending = resume.lost([message, *pending], rejected(watch))
            continue
        if resume is not None:
            began = time.monotonic()
            resume.sent(message, rejected(watch))
            if control_s is not None:
                control_s[0] += time.monotonic() - began
        messages += 1
    return messages


def rejected(watch: RejectWatch | None) -> Mapping[str, int]:
    return watch.rejected_by_stream if watch is not None else {}
