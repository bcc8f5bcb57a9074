"""A tick's timestamp: the field's rule (`check_ts`: an int of ns in [0, 2**63)), the ordering rule (`check_order`:
never below the stream's last accepted ts), a live service's clock rule (`check_not_ahead`), what a ts that looks
counted in another unit says (`ts_unit_guess`, `ts_unit_hint`, `first_ts_hint`), and a ts in words (`utc_text`).

Apart from connectors/ticks.py because the same rules and words serve raw ticks, pre-tokenized items, file replay
and the service's notes.
"""

from __future__ import annotations

import math
import shlex
from datetime import datetime, timezone
from typing import Any

from connectors.field_names import renamed
from connectors.plain_values import time_hint
from connectors.tick_errors import InvalidTick
from connectors.wire_values import wire_value
from engine.quoting import quoted

TS_MAX = 2**63


def _float_ts_hint(ts: Any) -> str:
    """A float ns timestamp is most often a client whose numbers are doubles (JavaScript's): a double holds ns
    since the epoch only to ~256 ns, so the engine does not round it; say how to send an int64."""
    if not isinstance(ts, float) or not math.isfinite(ts) or abs(ts) < 2**53:
        return ""
    return ("; a double cannot hold ns since the epoch exactly: pack ts as a msgpack int64/uint64 (in JavaScript a "
            "BigInt, with @msgpack/msgpack's useBigInt64)")


Q_LONG_NULL = -(2**63)  # q's long null (0N, 0Nj) and its timestamp's (0Np) as the int64 a bridge sends


def q_null_said(value: Any) -> str:
    """What a refusal adds for q's long null sent as a number (a q bridge's `0N`/`0Np`): no value, not a number."""
    if isinstance(value, int) and not isinstance(value, bool) and value == Q_LONG_NULL:
        return (" (q's long null, 0N / 0Np: no value, not a number; drop such rows in q, `where not null ...`, or "
                "leave the field out where it is optional)")
    return ""


def check_ts(obj: dict) -> int:
    """The one timestamp-field rule: `ts` present, an int (not a bool), in [0, 2**63) (int64, from 1970).

    There is no wall-clock bound here: files from any year replay, a simulation
    may run ahead of the clock, and a backtest does not depend on when it runs.
    Event time only has to be monotonic per stream (`check_order`); a live
    service bounds it by its own clock too (`check_not_ahead`).
    """
    if "ts" not in obj:
        raise InvalidTick("missing_field", f"field \"ts\" is required{renamed(obj, 'ts')}")
    ts = obj["ts"]
    if isinstance(ts, bool) or not isinstance(ts, int):
        raise InvalidTick("ts_not_int", f"ts must be an int of nanoseconds, got {wire_value(ts, 24)}"
                                        f"{_float_ts_hint(ts)}{time_hint(ts)}")
    if not 0 <= ts < TS_MAX:
        # (bounded first: a Python caller's 10**400 / 10**9 overflows a float, an OverflowError where InvalidTick
        # is owed)
        past = f" ({beyond_int64_said(min(ts, 10**300) / 10**9)})" if ts >= TS_MAX else ""
        raise InvalidTick("ts_out_of_range", f"ts must be in [0, 2**63), got {ts}{past}{q_null_said(ts)}")
    return ts


LAST_INSTANT = "2262-04-11T23:47:16.854775807Z"  # the last instant int64 ns since the epoch hold (TS_MAX - 1)
_SECONDS_PER_YEAR = 365.2425 * 86_400


def beyond_int64_said(seconds: float) -> str:
    """A time int64 ns since the epoch do not hold, in words: its instant (to the us; a year past 9999 alone) and
    the limit it is past. The one wording of every such time, whatever its form: the wire's int, an epoch count
    scaled, a file's date-time text or Parquet datetime (`FilePlan` rejects theirs, which int64 cannot carry)."""
    try:
        instant = datetime.fromtimestamp(seconds, tz=timezone.utc)
        when = instant.strftime("%Y-%m-%dT%H:%M:%S") + (f".{instant.microsecond:06d}Z" if instant.microsecond else "Z")
    except (OverflowError, ValueError, OSError):  # past year 9999 (or before year 1): its year is all that says
        when = f"the year {1970 + seconds / _SECONDS_PER_YEAR:.0f}"
    if seconds < 0:
        return f"{when}, before 1970: ts counts ns since 1970-01-01"
    return f"{when}, past {LAST_INSTANT}, the last time int64 nanoseconds since the epoch hold"


# 2000-01-01 and 2100-01-01 in ns since the epoch. A ts between them counted in s, ms or us instead of ns reads as a
# time in January 1970: accepted (a simulation may start at 0), but most likely a client's unit mistake.
_Y2000_NS, _Y2100_NS = 946_684_800 * 10**9, 4_102_444_800 * 10**9
_UNITS = (("seconds", 10**9), ("milliseconds", 10**6), ("microseconds", 10**3))


def ts_unit_guess(ts: int) -> tuple[str, int] | None:
    """The unit ("seconds", ...) and its ns a ts looks counted in, when read in s, ms or us it falls in 2000..2100
    (as ns it is then a time in January 1970); None when it does not."""
    return next(((unit, per) for unit, per in _UNITS if _Y2000_NS // per <= ts < _Y2100_NS // per), None)


def ts_unit_hint(ts: int) -> str | None:
    """Why a ts looks like another unit than ns, in words (`ts_unit_guess`); None when it does not."""
    if (guess := ts_unit_guess(ts)) is None:
        return None
    unit, per = guess
    return (f"ts {ts} is {unit} since the epoch ({utc_text(ts * per)}) if read so, but ts counts nanoseconds "
            f"(x {per:,}); as nanoseconds it is in January 1970")


# A new stream's first ts refused as another unit's (check_ts_unit) only when, read in that unit, it is within this
# of the receiver's clock: a relative clock (a test's or simulation's 1, 2, 3, ... ns) is never that close to now
TS_UNIT_NEAR_CLOCK_NS = 86_400 * 10**9


def check_ts_unit(stream: str, ts: int, now_ns: int, last_ts: int | None) -> None:
    """The live service's unit rule (review310 #6): a ts that, counted in s, ms or us, is a present-day time
    (`ts_unit_guess`: as ns it is in January 1970) is refused as ts_unit, naming the probable unit, when the
    stream's earlier ticks are epoch times (2000 or later: it would go back 50 years) or, for a stream with none,
    when in that unit it is within TS_UNIT_NEAR_CLOCK_NS of the receiver's clock (a feed stamping time.time() in
    ms). So is a new stream's first ts that, counted from q's epoch (2000-01-01: `q_epoch_reading`), is within that
    of the clock: a kdb+ timestamp sent as its long. A stream on a clock of its own (small counts from 0, a
    simulation's) is left alone: its first tick is no
    present-day time in any unit, and its later ones follow earlier ticks that are no epoch times."""
    if last_ts is None and q_epoch_reading(ts) and abs(ts + Q_EPOCH_NS - now_ns) <= TS_UNIT_NEAR_CLOCK_NS:
        raise InvalidTick("ts_unit", f"ts {ts} reads as {utc_text(ts)}: ts is in nanoseconds since 1970-01-01; this "
                                     f"looks like ns since 2000-01-01, q's epoch (a kdb+ timestamp's long: "
                                     f"{utc_text(ts + Q_EPOCH_NS)} read so): send ts + {Q_EPOCH_NS:,}", stream)
    if ts >= _Y2000_NS or (guess := ts_unit_guess(ts)) is None:
        return
    unit, per = guess
    if last_ts is not None and last_ts < _Y2000_NS:
        return  # a clock of its own (or one accepted before this rule): its order rule alone applies
    if last_ts is None and abs(ts * per - now_ns) > TS_UNIT_NEAR_CLOCK_NS:
        return
    raise InvalidTick("ts_unit", f"ts {ts} reads as {utc_text(ts)}: ts is in nanoseconds since the epoch; this looks "
                                 f"like {unit} ({utc_text(ts * per)} read so): send ts x {per:,}", stream)


def first_ts_hint(ts: int) -> str | None:
    """Why a stream's first ts looks wrong, in words (0: an unset time; else `ts_unit_hint`, `q_epoch_hint`); None
    when it does not. Such a tick is accepted (a simulation may start at 0), but its stream then runs on a clock of
    its own."""
    if ts == 0:
        return "ts 0: an unset time? (ts counts nanoseconds since the epoch; its next ticks may be years later)"
    return ts_unit_hint(ts) or q_epoch_hint(ts)


# q's epoch, 2000-01-01: a kdb+ timestamp's long (pykx's and arrowkdb's raw `p`, a q bridge's `"j"$`) counts ns from
# it, so read from 1970 it is 946,684,800 s (~30 years) early: a 2026 tick reads as 1996 (review324 #5)
Q_EPOCH_NS = _Y2000_NS
_Y1980_NS = 315_532_800 * 10**9
# the UTC offsets (minutes) east of UTC that zones' clocks keep (the tz database, 2024): whole hours to +14:00, and
# the half and quarter hours of Iran, Afghanistan, India, Nepal, Myanmar, Eucla, Adelaide and Darwin, Lord Howe and
# Chatham. A local time sent as UTC is ahead by one of them (a zone west of UTC, -03:30 Newfoundland's, stamps behind:
# never refused as ahead)
EAST_OFFSETS_MIN = tuple(sorted({60 * hours for hours in range(1, 15)} | {210, 270, 330, 345, 390, 525, 570, 630,
                                                                          765, 825}))
# how far behind real time a feed of local times may run and still be named so (a delayed vendor feed, a file of
# today's times replayed minutes late); with the minute of skew allowed ahead, 50 min is the least ahead named so:
# never a count of ms read as s (at most 16.7 min)
LOCAL_TIME_LAG_NS = 600 * 10**9


def q_epoch_reading(ts: int) -> bool:
    """Whether ns since 1970 read as ns since q's epoch makes a present-day time the 1970 reading is not: before
    2000 (from 1980) read so, 2000..2100 as q counts. Only ns: q's timestamps are ns."""
    return _Y1980_NS <= ts < _Y2000_NS and ts + Q_EPOCH_NS < _Y2100_NS


def q_epoch_hint(ts: int) -> str | None:
    """A ts that looks counted from q's epoch (`q_epoch_reading`), in words; None otherwise."""
    if not q_epoch_reading(ts):
        return None
    return (f"ts {ts} is {utc_text(ts)}, but as ns since 2000-01-01 (q's epoch: a kdb+ timestamp sent as its long) it "
            f"is {utc_text(ts + Q_EPOCH_NS)}: if so, send ts + {Q_EPOCH_NS:,} (ns since 1970)")


def utc_text(ns: int) -> str:
    """A ts in ns since the epoch as ISO 8601 UTC, to the ns (``2191-10-26T06:13:20Z``,
    ``2026-05-28T20:26:40.000000001Z``): what an error shows beside the raw number."""
    seconds, fraction = divmod(ns, 10**9)
    when = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{when}.{fraction:09d}Z" if fraction else f"{when}Z"


def check_order(stream: str, ts: int, last_ts: int | None, now_ns: int | None = None) -> None:
    """The one ordering rule: ts may not go below the stream's last accepted ts (equal is fine:
    exchanges stamp many trades with one millisecond). ``now_ns`` (a live service's clock): a last ts still ahead of
    it is said, with how long the stream stays held back (review376 #1: the refusals named no cause)."""
    if last_ts is not None and ts < last_ts:
        ahead = "" if now_ns is None or last_ts <= now_ns else (
            f", which is stamped {_duration(last_ts - now_ns)} ahead of this service's clock: the stream's ticks "
            f"stamped before it are refused until the clock passes it (limits.max_ts_ahead_s bounds how far ahead a "
            f"tick is taken), or `flashtick forget {shlex.quote(stream)}` drops the stream and its guard")
        raise InvalidTick("ts_backwards", f"stream {quoted(stream)}: ts {ts} ({utc_text(ts)}) < previous {last_ts} "
                                          f"({utc_text(last_ts)}){ahead}", stream)


def check_not_ahead(stream: str, ts: int, now_ns: int, max_ahead_ns: int) -> None:
    """The live service's clock rule: ts at most ``max_ahead_ns`` past its wall clock ``now_ns``. A tick ahead (a
    forged stamp, a corrupt or mis-scaled time, a clock that runs ahead) would otherwise be accepted and then, as the
    stream's last ts, refuse every real tick after it as ts_backwards until the clock passes it, across restarts
    too, its answers reading younger than they are. Files replayed offline are never checked."""
    if ts - now_ns > max_ahead_ns:
        ahead = ts - now_ns
        raise InvalidTick("ts_in_future", f"stream {quoted(stream)}: ts {ts} ({utc_text(ts)}) is "
                                          f"{_duration(ahead)} ahead of this service's clock "
                                          f"({utc_text(now_ns)}); limits.max_ts_ahead_s allows "
                                          f"{_duration(max_ahead_ns)} ({_local_time_said(ahead)}a sender's clock or "
                                          f"unit mistake?): the stream's ticks after it are taken as before", stream)


def _local_time_said(ahead_ns: int) -> str:
    """"a venue's local time sent as UTC (UTC+05:30), " where ``ahead_ns`` is a zone's offset (EAST_OFFSETS_MIN),
    less up to LOCAL_TIME_LAG_NS (its feed behind real time, said) or plus up to a minute (clocks, the wire); ""
    otherwise (review411 #8: whole hours alone were named, not India's +05:30 nor a local-time feed minutes old)."""
    minute = 60 * 10**9
    for offset in EAST_OFFSETS_MIN:  # (the smallest offset that fits: the nearest one at or past ``ahead_ns``)
        behind = offset * minute - ahead_ns
        if -minute <= behind <= LOCAL_TIME_LAG_NS:
            late = f", its times {_duration(behind)} behind real time" if behind > minute else ""
            return f"a venue's local time sent as UTC (UTC+{offset // 60:02d}:{offset % 60:02d}{late}), "
    return ""


def _duration(ns: int) -> str:
    """A span in the largest unit that keeps it readable: 12.5 s, 3.2 h, 1 d, 60,227.9 d."""
    seconds = ns / 1e9
    unit, per = next(((u, p) for u, p in (("d", 86_400), ("h", 3_600), ("min", 60)) if seconds >= p), ("s", 1))
    return f"{seconds / per:,.1f}".removesuffix(".0") + f" {unit}"
