"""How the rows a replay rejected are said: one line per reason, and a warning when a reason took so many rows
that a column is likely misread. Shared by backtest, demo, train/evaluate and `feed replay`, whose end (Ctrl-C's
included) must not wait for torch to load for a few lines of text: hence a module of its own. And how an ask on a
stream none of whose ticks was taken says so, in one wording for the server and its shards, and a backtest's query
whose streams are in the files but lost every tick."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping

from connectors.shifted_prices import SAID_STREAMS, lifting_offset, offset_option
from connectors.ticks import counted, shown_name
from engine.service.log_lines import named_few
from engine.service.rejected_share import FILTERED_OUT, NO_MARKET
from queries.limits import excerpt

MAX_REFUSED_STREAMS_KEPT = 1024  # streams with no accepted tick whose refusals `streams` and `ask` can say
REFUSED_HOLDER = "refused"  # what LookalikeNames calls the names of those streams (a lookalike of one is refused)
LOUD_REJECT_SHARE = 0.05  # a reason rejecting this share of a file's rows is more likely a misread column than bad data
# reasons no misread column gives: rows a filter left out, and quotes of no market (0/0: a halt, a LULD pause)
NOT_LOUD = (FILTERED_OUT, NO_MARKET)


def rejected_lines(rejected: dict[str, int], examples: dict[str, str], accepted: int | None = None,
                   streams: dict[str, str] | None = None, held: int = 0) -> list[str]:
    """One line per rejection reason, most frequent first, with the streams that lost rows to it where ``streams``
    says them (reason -> `CLK0 1750, CLM6-N6 59`) and the first such row where one is known; with the
    ``accepted`` tick count, first a warning naming each reason (but rows a filter leaves out) that rejected at
    least LOUD_REJECT_SHARE of the ticks read (a filter's rows apart): everything after leaves them out, so a
    misread column must not pass as a run that worked (FIX's sell side 2 read as no side rejected 39% of a futures
    file, every sell). The share
    is of ticks (accepted and rejected), not rows: a row with a trade and the quote it met (a bar file's close
    beside its bid and ask) is two ticks, each accepted or rejected on its own. ``held``: ticks read that a feed
    did not send, stamped at or before the engine's last tick of their stream (a file fed again), counted among the
    ticks read and said as such: a re-feed's rejects are the same share of the file as the first feed's, not all of
    what was read."""
    streams = streams or {}

    def said(reason: str) -> str:
        parts = [streams[reason]] if reason in streams else []
        parts += [f"first: {examples[reason]}"] if reason in examples else []
        return f" ({'; '.join(parts)})" if parts else ""

    lines = [f"  {'left out' if reason == 'filtered_out' else 'rejected'} {reason}: {count}{said(reason)}"
             for reason, count in sorted(rejected.items(), key=lambda kv: (-kv[1], kv[0]))]
    # a filter's rows (--streams of a whole-market file) are no part of the share: they would hide a misread column
    total = (accepted or 0) + held + sum(n for reason, n in rejected.items() if reason != "filtered_out")
    by_count = sorted(rejected.items(), key=lambda kv: -kv[1])
    loud = [f"{reason} {count} ({count / total:.0%})" for reason, count in by_count
            if accepted is not None and reason not in NOT_LOUD and count >= LOUD_REJECT_SHARE * total]
    if loud:
        of_held = f" ({held} of them not sent: stamped at or before the engine's last tick of their stream)" \
            if held else ""
        lines.insert(0, f"warning: {' and '.join(loud)} of the {total} ticks read{of_held} rejected, left out of "
                        f"every answer and score: is a column read as the file means it? (the first such row below; "
                        f"docs/replay.md)")
    return lines


def not_passed_on(rejected: Mapping[str, int], verb: str, so_far: bool = False, resends: int = 0) -> str:
    """The heading over ``rejected_lines`` where a feed (``verb`` "sent") or a demo ("fed") did not pass ticks on:
    counted as ticks, as ``rejected_lines``' shares and backtest count them. A row's quote fed beside its refused
    price-less trade is one tick not fed, not a row ("rows ... not fed" read as the quotes lost too, review156).
    ``so_far``: the replay stopped before the files' end. ``resends``: ticks left out as a sequence number's repeat
    (--sequence), counted too, as backtest's summary counts them (review431 #7: 50 of 51 were missing). Ends with a
    colon where ``rejected_lines`` follow (any rejected)."""
    left_out = rejected.get("filtered_out", 0)  # a filter's choice (--streams, a keep), not an error
    how = ", ".join(([f"{left_out} of them left out by a filter"] if left_out else [])
                    + ([f"{resends} left out as resends of a sequence number"] if resends else []))
    read = " so far" if so_far else ""
    return (f"{counted(sum(rejected.values()) + resends, 'tick')} read{read} from the files not {verb}"
            f"{f' ({how})' if how else ''}{':' if rejected else ''}")


def rejected_in_one_line(rejected: dict[str, int], accepted: int) -> str | None:
    """What a --quiet run keeps of ``rejected_lines``: the rows rejected in one line (how many of the ticks read, by
    reason, most first), a warning when a reason took LOUD_REJECT_SHARE of them, as ``rejected_lines`` warns (a
    misread column must not pass silently under --quiet either); the rows a filter left out (--streams) said as
    such, as backtest says them, not as rejected; None when there were none."""
    counts = sorted(((reason, n) for reason, n in rejected.items() if n and reason != "filtered_out"),
                    key=lambda kv: (-kv[1], kv[0]))
    left_out = rejected.get("filtered_out", 0)
    total = accepted + sum(n for _, n in counts)  # (a filter's rows apart, as `rejected_lines` counts them)
    filtered = f"{left_out} left out by a filter" if left_out else ""
    if not counts:
        return (f"note: {left_out} of the {total + left_out} ticks read left out by a filter (--streams, --from/--to, "
                f"--hours or a map's keep: not an error)") if left_out else None
    said = (f"{sum(n for _, n in counts)} of the {total} ticks read rejected "
            f"({', '.join(f'{reason} {n}' for reason, n in counts)}), left out of every answer and score"
            + (f", and {filtered}" if filtered else ""))
    loud = [f"{reason} {n / total:.0%}" for reason, n in counts
            if reason not in NOT_LOUD and n >= LOUD_REJECT_SHARE * total]
    if loud:
        return (f"warning: {said}: {' and '.join(loud)} of them, is a column read as the file means it? (without "
                f"--quiet: the first such row; docs/replay.md)")
    return f"note: {said} (without --quiet: the first row of each reason)"


def no_accepted_tick(stream: str, ticks: int, first_error: str) -> str:
    """Why a stream holds nothing though its feed sent ticks: every one was refused (``first_error``, "reason:
    why"), where "has sent no data" would send the operator to the feed."""
    return (f"stream {excerpt(stream)} has no accepted tick: its {counted(ticks, 'tick')} "
            f"{'was' if ticks == 1 else 'were'} refused (the first: {first_error})")


def forgotten_refusal(stream: str, more: int, false_match: float) -> str:
    """Why a stream holds nothing whose refusal fell out of the MAX_REFUSED_STREAMS_KEPT remembered (``more``: how
    many times one did, `refused_more`): it was refused, and how many ticks and why are no longer known; a name the
    filter of forgotten names (forgotten_refusals.py) matches by chance (``false_match``) is said to be possible."""
    from engine.service.forgotten_refusals import NEGLIGIBLE_FALSE_MATCH

    chance = (f"; known from a filter of the forgotten names that also matches {false_match:.1%} of names never "
              f"refused" if false_match >= NEGLIGIBLE_FALSE_MATCH else "")
    return (f"stream {excerpt(stream)} has no accepted tick: it was refused earlier, and how many of its ticks and "
            f"why are no longer remembered (the service keeps the last {MAX_REFUSED_STREAMS_KEPT:,} refused streams; "
            f"up to {more:,} more fell out of that memory, counted as refused_more by `flashtick streams`; "
            f"`_rejects/` named each with its reason{chance})")


def turned_away_warning(turned_away: Mapping[str, list], limit: str) -> str:
    """The start's warning of the logged streams admission refused (name -> [ticks, the first why]) under
    ``limit`` (admission_limit's words): one engine's replay and a sharded front door's say it alike."""
    names = sorted(turned_away)
    ticks = sum(ticks for ticks, _ in turned_away.values())
    return (f"warning: {counted(len(names), 'logged stream')} refused at this start ({named_few(names)}; "
            f"{counted(ticks, 'logged tick')}): {limit}; was the limit lowered since they were logged? Their ticks "
            f"stay in the tick log (a start with the limit raised restores them) and their last answers are still "
            f"served (`get`); `streams` and `ask` say they were refused")


def admission_limit(max_streams: int, when_full: str, admitted: int, window: int, cells: int,
                    shards: int = 0) -> str:
    """Which limit turns new streams away, in words: the lower of scheduler.max_streams and, with when_full: refuse,
    the streams the KV pool holds at a full window each (``admitted``, of ``window`` tokens in ``cells``). Admission
    checks both, so the lower is the one met; with ``shards``, each shard's own limits."""
    each = f" on each of {shards} shards" if shards else ""
    if when_full == "refuse" and admitted < max_streams:
        return (f"admitted {admitted} streams{each}, the most kv.cells={cells} holds at a full window of {window} "
                f"tokens each (scheduler.when_full: refuse; raise kv.cells, or keep when_full: evict for many mostly "
                f"quiet streams)")
    return f"scheduler.max_streams {max_streams} reached{each} (raise it to admit more streams)"


def lost_streams(by_stream: Mapping[str, Mapping[str, int]], replayed: set[str]) -> dict[str, Counter]:
    """The streams of the files none of whose ticks was replayed, each with its rows refused by reason (most
    rows first); ``by_stream``: reason -> stream -> rows (connectors/rejected_rows.py RejectCounter.by_stream)."""
    lost: defaultdict[str, Counter] = defaultdict(Counter)
    for reason, counts in by_stream.items():
        for stream, rows in counts.items():
            if stream not in replayed:
                lost[stream][reason] += rows
    return dict(sorted(lost.items(), key=lambda kv: (-kv[1].total(), kv[0])))


def every_tick_refused(lost: Mapping[str, Counter], lowest: Mapping[str, float]) -> str:
    """What a query is told whose streams match none replayed but these (``lost``: lost_streams' of them): that
    they are in the files, how their ticks were refused, and the way out, where a did-you-mean of other names would
    lead the user away (a spread whose every price was below zero). ``lowest``: a stream's lowest price refused
    as nonpositive_price, for the offset that lifts it above zero."""
    named = list(lost)[:SAID_STREAMS]
    more = f", and {counted(len(lost) - SAID_STREAMS, 'stream')} more" if len(lost) > SAID_STREAMS else ""
    by_reason = {stream: ", ".join(f"{reason} {rows}" for reason, rows in lost[stream].most_common())
                 for stream in named}
    said = ", ".join(f"{shown_name(stream)} ({reasons})" for stream, reasons in by_reason.items()) + more
    one = len(lost) == 1
    reasons = set().union(*(lost[stream] for stream in named))
    how = "left out by a filter" if reasons == {"filtered_out"} else "rejected"
    ways = []
    if offsets := [offset_option(stream, lifting_offset(lowest[stream])) for stream in named
                   if "nonpositive_price" in lost[stream] and stream in lowest]:
        ways.append(f"to lift {'its' if one else 'their'} prices above zero, {' '.join(offsets)} (docs/replay.md)")
    if "filtered_out" in reasons:
        ways.append("a filter (--streams, --from/--to, --hours, a map's keep) leaves such rows out on purpose: "
                    "widen it to answer there")
    if reasons - {"nonpositive_price", "filtered_out"} or not ways:
        ways.append("the rejected lines say why, with the first such row")
    return (f"{said}, {'which is' if one else 'which are'} in the files, but every tick of {'it' if one else 'them'} "
            f"was {how}: {'; '.join(ways)}")
