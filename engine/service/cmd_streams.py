"""The service client commands on its streams: `streams` (each stream's last accepted tick, the quiet ones, the
refused ones) and `forget` (drop one stream, its ordering guard included).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import Any

from connectors.text_templates import positional
from engine.quoting import quoted
from engine.service.cli_common import context_text, control_client, printable_json


def cmd_forget(args: argparse.Namespace) -> int | None:
    """`forget NAME...`: exact names (one: the op's `stream`, as ever; several: every one known or none dropped);
    `--glob PATTERN...`: every stream held each matches; `--dry-run`: how many would go, none dropped."""
    from engine.service.cli_types import stream_name

    from engine.service.control_client import ControlError

    names = args.streams if args.glob else [stream_name(name) for name in args.streams]
    try:
        return _forget(args, names)
    except ControlError as e:  # a pattern given as a name: an exact name it is not, said with the way to a glob
        if e.reason == "unknown_stream" and not args.glob and any(c in name for name in names for c in "*?["):
            raise ControlError(f"{e} (a name is exact: to forget the streams a pattern matches, give --glob; "
                               f"--dry-run says how many first)", e.reason) from None
        raise


def _forget(args: argparse.Namespace, names: list[str]) -> int | None:
    with control_client(args) as control:
        if not args.glob and len(names) == 1 and not args.dry_run:
            reply = control.call("forget", stream=names[0])
            print(f"forgot stream {quoted(names[0])}: its {reply['ticks']} ticks' session, answers and ordering "
                  f"guard (last ts {_with_utc(reply['last_ts'])}) are dropped; its next tick, of any time, starts it "
                  f"afresh")
            return None
        asks = [{"pattern": pattern} for pattern in names] if args.glob else [{"streams": names}]
        busy = 0
        for ask in asks:
            what = f"matching {quoted(ask['pattern'])}" if args.glob else "named"
            if args.dry_run:
                reply = control.call("forget", dry_run=True, **ask)
                print(f"would forget {reply['matched']} streams {what} ({_first(reply['streams'], reply['matched'])})"
                      f": --dry-run, none dropped")
                continue
            forgotten, ticks, first = 0, 0, []
            while True:  # (a pattern matching more than one request drops: asked again for the rest)
                reply = control.call("forget", **ask)
                forgotten, ticks = forgotten + reply["forgotten"], ticks + reply["ticks"]
                first = first or reply["streams"]
                busy += len(reply.get("busy", {}))
                for stream, why in reply.get("busy", {}).items():
                    print(f"flashtick forget: {quoted(stream)} not forgotten: {why}", file=sys.stderr)
                if not reply.get("remaining") or not reply["forgotten"]:
                    break
            print(f"forgot {forgotten} streams {what} ({_first(first, forgotten)}): their {ticks} ticks' sessions, "
                  f"answers and ordering guards are dropped; their next ticks, of any time, start them afresh")
    return 1 if busy else None


def _first(names: list[str], count: int) -> str:
    """The first names of ``count`` streams, as a `forget` of many says them."""
    return ", ".join(quoted(name) for name in names) + (", ..." if count > len(names) else "")


def _with_utc(ns: Any) -> str:
    """An event time in ns as the wire carries it, with its UTC time beside it to be read without a calculator
    (review375 #12: feeds in four zones): `1712296353450000000 (2024-04-05T05:52:33.45Z)`."""
    from connectors.ticks import utc_text

    return f"{ns} ({utc_text(ns)})" if type(ns) is int else str(ns)


def cmd_streams(args: argparse.Namespace) -> int | None:
    from connectors.ticks import counted, shown_name, slash_hint
    from engine.stream_patterns import did_you_mean

    listed: dict[str, dict | None] = {}  # what is printed (--idle-over: the quiet ones only), for --json
    refused: dict[str, dict] = {}
    forgotten: dict[str, dict] = {}  # (names given that were refused, their refusal no longer remembered: {error})
    refused_at_start: dict[str, Any] = {}  # (a listing of every stream: the logged ones this start refused, a count)
    refused_more = 0  # (... and the refused streams the service no longer remembers by name)
    with control_client(args) as control:
        after = ""
        # an order or a limit: one reply, the service's sort (review380 #10: the 10 stalest of 3,000 streams)
        ordered = {**({"sort": args.sort} if args.sort else {}), **({"limit": args.limit} if args.limit else {})}
        while True:  # every stream, a reply's page at a time (the names given: one reply)
            reply = control.call("streams", **({"streams": args.names} if args.names else {"after": after}),
                                 **ordered)
            refused.update(reply.get("refused") or {})
            forgotten.update(reply.get("refused_forgotten") or {})
            refused_at_start = reply.get("refused_at_start") or refused_at_start
            refused_more = reply.get("refused_more") or refused_more
            uptime_s = reply.get("uptime_s")  # (absent from an older server)
            for name, accepted in reply["streams"].items():
                if args.idle_over is None or _quiet(accepted, name in refused, uptime_s, args.idle_over):
                    listed[name] = accepted
            if args.names or ordered or not reply["truncated"] or not reply["streams"]:
                break
            after = list(reply["streams"])[-1]
        never_seen = [name for name in args.names
                      if reply["streams"].get(name) is None and name not in refused and name not in forgotten]
        held = _held_stream_names(control) if never_seen and not args.json else []
    if refused_at_start:
        print(f"flashtick streams: {counted(refused_at_start['streams'], 'logged stream')} refused at this start: "
              f"{refused_at_start['why']}", file=sys.stderr)  # (listed as refused: the line below counts them too)
    listing = not args.names and args.idle_over is None  # (a listing's refused streams: not quiet, ticks arrive)
    if listing and (refused or refused_more):
        _say_refused_listed(refused, refused_more)
    if args.json:
        print(printable_json({"streams": listed, **({"refused": refused} if refused else {}),
                              **({"refused_more": refused_more} if refused_more else {}),
                              **({"refused_forgotten": forgotten} if forgotten else {}),
                              **({"refused_at_start": refused_at_start} if refused_at_start else {})},
                             sort_keys=not ordered, indent=2))  # (ordered: as the service sorted them)
    else:
        for name, accepted in listed.items():
            if accepted is None and name in refused:  # admission turned it away: say so, and why
                print(f"flashtick streams: {shown_name(name)} refused: {refused[name]['error']}", file=sys.stderr)
                print(f"{shown_name(name)}\trefused ({refused[name]['ticks']} ticks)")
                continue
            if accepted is None and name in forgotten:  # refused earlier: its count and why no longer remembered
                print(f"flashtick streams: {shown_name(name)} refused earlier: {forgotten[name]['error']}",
                      file=sys.stderr)
                print(f"{shown_name(name)}\trefused earlier (no longer remembered)")
                continue
            if accepted is None:
                print(f"{shown_name(name)}\tnever seen")
                if hint := slash_hint(name) + did_you_mean([name], held):
                    print(f"flashtick streams: {quoted(name)} never seen{hint}", file=sys.stderr)
                continue
            idle = accepted.get("idle_s", "absent")  # absent: an older server
            quiet = "" if idle == "absent" else f"\tidle {idle:.1f}s" if idle is not None else \
                f"\tidle over {uptime_s:.0f}s (none since the start)" if uptime_s is not None else "\tidle n/a"
            # late: a script cutting the columns before it reads them as ever
            context = context_text(accepted, sep="\t")
            # (then whether its KV is in the pool: an evicted stream's next answer pays a rebuild; absent: not known)
            kv = "" if "resident" not in accepted else \
                f"\tkv {'resident' if accepted['resident'] else 'not resident'}\trebuilds {accepted['rebuilds']}"
            # (and, while some of it waits for a forward, how much and since when: a name the engine is behind on)
            waiting = "" if not accepted.get("waiting_ticks") else \
                f"\twaiting {accepted['waiting_ticks']} ticks {accepted['waiting_s']:.1f}s"
            # (last: its last tick's price as the model reads it, an ingest --price-offset added: review315 #9;
            # every digit --json has, not :g's 6 significant ones, which read 600000.04 as 600000: review410 #2)
            price = "" if accepted.get("last_price") is None else f"\tlast_price {positional(accepted['last_price'])}"
            # (after it, what a desk asks first after an incident: its ticks refused by reason, a clock running ahead)
            refusals = "".join(f"\trejected {reason} {n}" for reason, n in sorted(accepted.get("rejected", {}).items()))
            ahead = "" if "clock_ahead" not in accepted else f"\tclock ahead {-accepted['clock_offset_ms'] / 1e3:.3f}s"
            # (its UTC time inside the same column, so a script cutting the columns reads them as ever)
            print(f"{shown_name(name)}\tlast_ts {_with_utc(accepted['last_ts'])}\tticks {accepted['ticks']}{quiet}"
                  f"{context}{kv}{waiting}{price}{sequence_text(accepted)}{refusals}{ahead}")
        for name in refused if listing else ():  # after the held ones: the streams that hold nothing
            print(f"{shown_name(name)}\trefused ({refused[name]['ticks']} ticks)")
    # a name given that admission turned away holds nothing: a script checking its feeds hears it in the status
    named_refused = any(name in refused or name in forgotten for name in args.names)
    if ordered and reply.get("matched", 0) > len(reply["streams"]):
        print(f"flashtick streams: the first {len(reply['streams'])} of {reply['matched']} streams"
              f"{' by ' + args.sort if args.sort else ''}", file=sys.stderr)
    if args.idle_over is not None:
        print(f"flashtick streams: {len(listed)} stream{'s' if len(listed) != 1 else ''} with no tick for over "
              f"{args.idle_over:g}s", file=sys.stderr)
        return 1 if listed or named_refused else 0
    return 1 if named_refused else None


def sequence_text(accepted: dict) -> str:
    """Last on a stream's line (review323 #1, #2, #4): its last `seq` and, where not 0, its duplicates dropped (the
    restamped resends among them said), gaps (and numbers missing, those that came late), numberings begun again and
    ticks without `seq` taken as repeats at its last ts; "" for a server without them."""
    text = "" if accepted.get("last_seq") is None else f"\tlast_seq {accepted['last_seq']}"
    if accepted.get("duplicates"):
        restamped = f" ({accepted['duplicates_restamped']} restamped)" if accepted.get("duplicates_restamped") else ""
        text += f"\tduplicates {accepted['duplicates']}{restamped}"
    if accepted.get("seq_gaps"):  # (numbers that came late after all are not missing: review376 #3)
        late = f", {accepted['seq_late']} came late" if accepted.get("seq_late") else ""
        text += f"\tseq_gaps {accepted['seq_gaps']} ({accepted['seq_missing']} missing{late})"
    if accepted.get("seq_restarts"):
        text += f"\tseq_restarts {accepted['seq_restarts']}"
    if accepted.get("repeats_taken"):
        text += f"\trepeats_taken {accepted['repeats_taken']}"
    return text


def _say_refused_listed(refused: dict[str, dict], more: int) -> None:
    """A listing's refused streams, in one line on stderr: how many, by reason (the code before the error's
    colon), and how many more the service no longer remembers by name."""
    from connectors.ticks import counted
    from engine.service.rejections import MAX_REFUSED_STREAMS_KEPT  # (queries, below it: not before the parse)

    reasons = Counter(entry["error"].split(":", 1)[0] for entry in refused.values())
    by_reason = ", ".join(f"{reason} {n}" for reason, n in reasons.most_common())
    named = f"{counted(len(refused), 'stream')} refused, listed as refused ({by_reason})" if refused else ""
    # (counted as names leave that memory: one refused again after it left counts again, so at most this many)
    forgotten = (f"up to {counted(more, 'refused stream')} more no longer remembered by name (the service keeps the "
                 f"last {MAX_REFUSED_STREAMS_KEPT:,}; `_rejects/` named them)") if more else ""
    print(f"flashtick streams: {'; '.join(part for part in (named, forgotten) if part)}; `flashtick streams NAME` "
          f"says why", file=sys.stderr)


HINT_PAGES = 10  # `streams` pages (10,000 names each) read for a did-you-mean: a bounded wait on a huge service


def _held_stream_names(control: Any) -> list[str]:
    """The names of the streams the service holds, the first HINT_PAGES pages of them: what a name given and never
    seen (`SPY   241220C00450000` for the held `SPY241220C00450000`) is compared with."""
    names: list[str] = []
    after = ""
    for _ in range(HINT_PAGES):
        reply = control.call("streams", after=after)
        names += [name for name, accepted in reply["streams"].items() if accepted is not None]
        if not reply["truncated"] or not reply["streams"]:
            break
        after = list(reply["streams"])[-1]
    return names


def _quiet(accepted: dict | None, refused: bool, uptime_s: float | None, idle_over: float) -> bool:
    """Whether `streams --idle-over` lists a stream: no tick for longer than ``idle_over`` seconds. A name asked for
    and never seen is quiet (a feed that never came up, or a mistyped name) unless admission refuses its ticks (they
    do arrive); one restored from the tick log with no tick since has been quiet for the whole uptime."""
    if accepted is None:
        return not refused
    idle = accepted.get("idle_s")
    if idle is None:
        return uptime_s is None or uptime_s > idle_over
    return idle > idle_over
