"""The service client commands on its streams: `streams` (each stream's last accepted tick, the quiet ones, the
refused ones) and `forget` (drop one stream, its ordering guard included).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from engine.service.cli_common import context_text, control_client, printable_json


def cmd_forget(args: argparse.Namespace) -> None:
    with control_client(args) as control:
        reply = control.call("forget", stream=args.stream)
    print(f"forgot stream {args.stream!r}: its {reply['ticks']} ticks' session, answers and ordering guard (last ts "
          f"{reply['last_ts']}) are dropped; its next tick, of any time, starts it afresh")


def cmd_streams(args: argparse.Namespace) -> int | None:
    from connectors.ticks import counted, shown_name, slash_hint
    from engine.stream_patterns import did_you_mean

    listed: dict[str, dict | None] = {}  # what is printed (--idle-over: the quiet ones only), for --json
    refused: dict[str, dict] = {}
    refused_at_start: dict[str, Any] = {}  # (a listing of every stream: the logged ones this start refused, a count)
    with control_client(args) as control:
        after = ""
        while True:  # every stream, a reply's page at a time (the names given: one reply)
            reply = control.call("streams", **({"streams": args.names} if args.names else {"after": after}))
            refused.update(reply.get("refused") or {})
            refused_at_start = reply.get("refused_at_start") or refused_at_start
            uptime_s = reply.get("uptime_s")  # (absent from an older server)
            for name, accepted in reply["streams"].items():
                if args.idle_over is None or _quiet(accepted, name in refused, uptime_s, args.idle_over):
                    listed[name] = accepted
            if args.names or not reply["truncated"] or not reply["streams"]:
                break
            after = list(reply["streams"])[-1]
        never_seen = [name for name in args.names if reply["streams"].get(name) is None and name not in refused]
        held = _held_stream_names(control) if never_seen and not args.json else []
    if refused_at_start:  # left out of the listing, which holds what the service holds: a line, not the list
        print(f"flashtick streams: {counted(refused_at_start['streams'], 'logged stream')} refused at this start, "
              f"not listed: {refused_at_start['why']}; the start log names them, `flashtick streams NAME` says why",
              file=sys.stderr)
    if args.json:
        print(printable_json({"streams": listed, **({"refused": refused} if refused else {}),
                              **({"refused_at_start": refused_at_start} if refused_at_start else {})},
                             sort_keys=True, indent=2))
    else:
        for name, accepted in listed.items():
            if accepted is None and name in refused:  # admission turned it away: say so, and why
                print(f"flashtick streams: {shown_name(name)} refused: {refused[name]['error']}", file=sys.stderr)
                print(f"{shown_name(name)}\trefused ({refused[name]['ticks']} ticks)")
                continue
            if accepted is None:
                print(f"{shown_name(name)}\tnever seen")
                if hint := slash_hint(name) + did_you_mean([name], held):
                    print(f"flashtick streams: {name!r} never seen{hint}", file=sys.stderr)
                continue
            idle = accepted.get("idle_s", "absent")  # absent: an older server
            quiet = "" if idle == "absent" else f"\tidle {idle:.1f}s" if idle is not None else \
                f"\tidle over {uptime_s:.0f}s (none since the start)" if uptime_s is not None else "\tidle n/a"
            # late: a script cutting the columns before it reads them as ever
            context = context_text(accepted, sep="\t")
            # (then whether its KV is in the pool: an evicted stream's next answer pays a rebuild; absent: not known)
            kv = "" if "resident" not in accepted else \
                f"\tkv {'resident' if accepted['resident'] else 'not resident'}\trebuilds {accepted['rebuilds']}"
            print(f"{shown_name(name)}\tlast_ts {accepted['last_ts']}\tticks {accepted['ticks']}{quiet}{context}{kv}")
    # a name given that admission turned away holds nothing: a script checking its feeds hears it in the status
    named_refused = any(name in refused for name in args.names)
    if args.idle_over is not None:
        print(f"flashtick streams: {len(listed)} stream{'s' if len(listed) != 1 else ''} with no tick for over "
              f"{args.idle_over:g}s", file=sys.stderr)
        return 1 if listed or named_refused else 0
    return 1 if named_refused else None


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
