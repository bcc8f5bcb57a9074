"""Saturated bps questions: said at run time, not only in docs/model.md.

`volatility_50` and `move_bps_50` are bucketed in fixed bps. On an instrument whose tick is large against its
price (an option quoted at 0.05 moves 2,000 bps a cent) every window that moves at all lands in an end bucket
(`+12` / `-12`, `vhigh`), so the labels carry little information there and the answers even less. Backtests and
live scores count each stream's realised labels of such a question as they score them (``LabelCount``), and a
stream is *saturated* where most of its labels that show a move are end buckets; the bucket of no move (`0`,
`vlow`) is left out of both counts, so a quiet stream is not called saturated, nor a cheap one that rarely moves
called fine. ``saturation_note`` is the line both print: its reason is worded for any cause (an option's tick, a
spread near zero, a file of daily settlements), since it sees the labels, not the prices; a backtest that knows
the saturated streams were read from bar files (its reader's plans) says their bar spacing alone.

A question can also fall in one *inner* bucket on an instrument far quieter than its fixed edges: every 50-tick
window of EURUSD is `low` (0.3 to 1 bp), so `volatility_50` scored accuracy 1.000 with no note (review379 #4).
``one_class`` calls a stream so where at least ``ONE_CLASS_SHARE`` of its realised labels are one bucket (any but
an end bucket, which the saturation note says), and ``one_class_note`` names the bucket and the way out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from connectors.bar_lengths import shown_length
from connectors.bar_questions import horizon_span
from connectors.questions import QuestionSpec
from connectors.ticks import shown_name

SATURATED_SHOWN = 5  # saturated streams a note names
ONE_CLASS_SHARE = 0.95  # a stream's realised labels in one bucket at least this often: the question does not split it
ONE_CLASS_MIN = 20  # realised labels a stream needs before it is called one-class (a few may agree by chance)


@dataclass(frozen=True)
class EndBuckets:
    """A bps-bucketed question's end buckets (the outermost ones, the bucket of no move excepted)."""

    ends: frozenset[str]
    still: str  # the label of a window whose mark did not move (its bucket holds 0 bps)
    text: str  # the ends as a note says them: "-12 (-8 bps or less) or +12 (above 8 bps)"


@lru_cache(maxsize=64)  # (live scores ask at every answer scored)
def end_buckets(spec: QuestionSpec) -> EndBuckets | None:
    """The end buckets of a question bucketed in bps (kinds move and volatility); None for the others."""
    if spec.kind not in ("move", "volatility"):
        return None
    still = spec.labels[int(np.searchsorted(np.asarray(spec.edges), 0.0, side="left"))]  # as label_series buckets
    said = {spec.labels[0]: f"{spec.labels[0]} ({spec.edges[0]:g} bps or less)",
            spec.labels[-1]: f"{spec.labels[-1]} (above {spec.edges[-1]:g} bps)"}
    ends = [label for label in said if label != still]
    return EndBuckets(frozenset(ends), still, " or ".join(said[label] for label in ends))


@dataclass
class LabelCount:
    """One stream's realised labels of one bps-bucketed question: those that show a move, and of them those in
    an end bucket."""

    moved: int = 0
    at_ends: int = 0
    by_label: dict[str, int] = field(default_factory=dict)  # every realised label, the no-move bucket's too

    def add(self, label: str, buckets: EndBuckets) -> None:
        self.by_label[label] = self.by_label.get(label, 0) + 1
        if label != buckets.still:
            self.moved += 1
            self.at_ends += label in buckets.ends

    @property
    def saturated(self) -> bool:
        return 2 * self.at_ends > self.moved


def saturation_note(spec: QuestionSpec, buckets: EndBuckets, saturated: list[str], streams: int,
                    bar_spacing: Mapping[str, int] | None = None) -> str:
    """What a backtest summary and `flashtick scores` say of a question saturated on the ``saturated`` streams
    (sorted) of the ``streams`` it labelled. ``bar_spacing``: the streams read from bar files -> their ordinary
    spacing (ns), as the backtest knows them from its reader's plans; when every saturated stream is one, the
    bars' spacing is the cause and the note says it alone."""
    shown = ", ".join(map(shown_name, saturated[:SATURATED_SHOWN])) + (
        f", ... ({len(saturated)} in all)" if len(saturated) > SATURATED_SHOWN else "")
    said = (f"{spec.name} is saturated on {len(saturated)} of {streams} streams ({shown}): most of their realised "
            f"labels that show a move are {buckets.text}: its buckets are fixed in bps over {spec.horizon} ticks, ")
    bars = bar_spacing or {}
    if saturated and all(stream in bars for stream in saturated):
        spacings = {bars[stream] for stream in saturated}
        span = (f" ({shown_length(spacing)} apart: {spec.horizon} bars span {horizon_span(spec.horizon, spacing)})"
                if len(spacings) == 1 and (spacing := next(iter(spacings))) > 0 else "")
        return (said + f"and these streams are bars read from bar files{span}: {spec.horizon} bars move more than "
                f"its outer edges on most instruments, so its answers say little there; ask direction_5/direction_20 "
                f"of them, which read a sign at any spacing (docs/replay.md, \"Bars and the built-in questions\")")
    return (said + "too narrow for these streams' moves over that many rows (bars: 50 one-minute or daily bars move "
            "more than its outer edges on most instruments; else one step of the price is many bps: a tick large "
            "against the price, a price near zero, settlements a day apart), so its answers say little there; ask "
            "direction_5/direction_20 of them, which read a sign at any spacing (docs/model.md; bars: "
            "docs/replay.md, \"Bars and the built-in questions\")")


class OneClass(NamedTuple):
    """A stream whose realised labels of a bps-bucketed question are nearly all one bucket."""
    stream: str
    label: str
    count: int  # its labels in that bucket
    labelled: int  # all its realised labels


def one_class(stream: str, by_label: Mapping[str, int], buckets: EndBuckets) -> OneClass | None:
    """``stream`` as one-class where ``ONE_CLASS_SHARE`` or more of its (at least ``ONE_CLASS_MIN``) realised labels
    are one bucket; an end bucket is left to the saturation note, which says more of it."""
    labelled = sum(by_label.values())
    if labelled < ONE_CLASS_MIN:
        return None
    label, count = max(by_label.items(), key=lambda item: (item[1], item[0]))
    if label in buckets.ends or count < ONE_CLASS_SHARE * labelled:
        return None
    return OneClass(stream, label, count, labelled)


def bucket_text(spec: QuestionSpec, label: str) -> str:
    """A bucket of a bps-bucketed question as a note says it: `low ((0.3, 1] bps)`, `vlow (0.3 bps or less)`."""
    i, edges = spec.labels.index(label), spec.edges
    span = (f"{edges[0]:g} bps or less" if i == 0 else f"above {edges[-1]:g} bps" if i == len(edges)
            else f"({edges[i - 1]:g}, {edges[i]:g}] bps")
    return f"{label} ({span})"


def one_class_note(spec: QuestionSpec, found: Sequence[OneClass], streams: int) -> str:
    """What a backtest summary and `flashtick scores` say of a question whose realised labels fall in one bucket on
    the ``found`` streams (sorted) of the ``streams`` it labelled: an accuracy there is the bucket's, not skill."""
    shown = ", ".join(f"{shown_name(f.stream)}: {bucket_text(spec, f.label)} on {f.count} of {f.labelled}"
                      for f in found[:SATURATED_SHOWN]) + (
        f", ... ({len(found)} in all)" if len(found) > SATURATED_SHOWN else "")
    return (f"{spec.name} does not split {len(found)} of {streams} streams ({shown}): {ONE_CLASS_SHARE:.0%} or more "
            f"of their realised labels fall in one bucket, its buckets being fixed in bps over {spec.horizon} ticks, "
            f"so a high accuracy there is that bucket's share, not skill, and its answers say little there; "
            f"ask another question of them (direction_5/direction_20 read a sign at any scale). A fine-tune on "
            f"their ticks (flashtick train FILES --out DIR, docs/model.md) fits the answers to them, but the fixed "
            f"buckets still do not split them")
