"""Where a train/evaluate split falls against a market closure: a validation or test part that starts right after a
closure longer than a day (a weekend, a holiday), or straddles one. Split by ticks (70/15/15 per stream), a file of
FX quotes that ends an hour after Sunday's reopen puts both held-out parts in that reopen, the thinnest hours of the
week, and their scores then say little of a typical week (review379 #11). Found here from each stream's tick times,
said on the split's line by engine/service/evaluation_report.py (`closure_text`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from connectors.durations import duration_text
from connectors.ticks import utc_text
from engine.service.splits import StreamData

CLOSURE_NS = 86_400 * 10**9  # a pause between two ticks of a stream longer than a day: its market was closed
REOPEN_NS = 3_600 * 10**9  # a part whose first tick is within this of a reopen starts right after the closure
HELD_OUT = ("validation", "test")


def split_closures(streams: list[StreamData]) -> list[dict[str, Any]]:
    """Per held-out part (validation, test), the first stream's closure it starts right after (within REOPEN_NS of
    the reopen, the closure the last before the part) or straddles (a closure between two of its ticks): the part,
    how, the stream, the closure's last tick before and first after (UTC text) and its length in ns."""
    found: dict[str, dict[str, Any]] = {}
    for sd in streams:
        ts = sd.ts
        closed = np.nonzero(np.diff(ts) > CLOSURE_NS)[0] if len(ts) > 1 else np.array([], dtype=np.int64)
        for part, held in zip(HELD_OUT, sd.parts[1:]):
            if part in found or not len(held):
                continue
            inside = [j for j in closed if held.start <= j < held.stop - 1]
            before = [j for j in closed if j < held.start]
            if inside:
                j, how = int(inside[0]), "straddles"
            elif before and ts[held.start] - ts[before[-1] + 1] < REOPEN_NS:
                j, how = int(before[-1]), "starts"
            else:
                continue
            found[part] = {"part": part, "how": how, "stream": sd.name, "closed": utc_text(int(ts[j])),
                           "reopened": utc_text(int(ts[j + 1])), "closure_ns": int(ts[j + 1] - ts[j]),
                           "after_ns": int(ts[held.start] - ts[j + 1])}
    return list(found.values())


def closure_text(closures: list[dict[str, Any]]) -> str:
    """The split line's note on `split_closures`, or "" when no held-out part is near a closure."""
    if not closures:
        return ""
    by_closure: dict[tuple[str, str, str], list[str]] = {}  # parts near one closure said together
    for c in closures:
        by_closure.setdefault((c["stream"], c["closed"], c["reopened"]), []).append(
            f"{c['part']} straddles" if c["how"] == "straddles" else
            f"{c['part']} starts {duration_text(c['after_ns'])} after")
    said = []
    for (stream, closed, reopened), parts in by_closure.items():
        length = next(c["closure_ns"] for c in closures if (c["stream"], c["closed"]) == (stream, closed))
        said.append(f"{' and '.join(parts)} a {duration_text(length)} market closure of {stream} ({closed} to "
                    f"{reopened})")
    return (f"; note: {'; '.join(said)}: held-out ticks at a reopen (the week's thinnest hours) or across a closure "
            f"score what a typical session is not like; files that end away from a closure put the split elsewhere")
