"""When a standing query fires: after every batch, every N ticks, every T of event time, or only when asked.

A "batch" is a tick group (one ingest message, one backtest batch): the engine checks triggers at the end
of each group, with the tick count and event time there, however many groups one forward advances.

Tick and interval triggers are anchored to a grid (multiples of N ticks, of T
ns of event time) rather than to the last firing, so a stream whose batches
do not line up with N still gets one answer per N ticks on average instead of
drifting to one per 2N. A batch that crosses several grid lines fires once.

Each kind is named once: a word (`WORD_TRIGGERS`) or a mapping to its period (`PERIODIC_TRIGGERS`, with the form
the errors show and the parser of its period); `Trigger.cell` places a periodic one on its grid. Whether a trigger
fires at a group's end is queries/registry.py's `_fires`: a kind with no grid (`batch`) at every group, one with a
grid when its cell moves on, every kind at a stream's first group. `on_demand` is left out before that (registry.py,
and backtests: engine/service/backtest.py): it never fires by itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from collections.abc import Callable
from typing import Any, NamedTuple

from queries.limits import excerpt

WORD_TRIGGERS = ("batch", "on_demand")  # written as the word alone; no period
_UNIT_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000,
            "d": 86_400_000_000_000}  # d: 24 h of event time from the epoch (UTC midnights; no calendar, no DST)
_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(ns|us|ms|s|m|h|d)")
MAX_PERIOD = 2**63 - 1  # an int64, like every count and timestamp on the wire


def parse_duration_ns(raw: Any) -> int:
    """'500ms', '2s', '1.5m', '1d', '250us' or a positive int of nanoseconds -> int ns."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        ns = raw
    elif isinstance(raw, str) and (m := _DURATION_RE.fullmatch(raw.strip())):
        exact = Fraction(m.group(1)) * _UNIT_NS[m.group(2)]
        if exact.denominator != 1:
            raise ValueError(f"interval {excerpt(raw)} is not a whole number of nanoseconds")
        ns = int(exact)
    else:
        raise ValueError(f"interval must be a duration like '500ms', '2s', '1m' (units ns, us, ms, s, m, h, d) "
                         f"or an int of nanoseconds, got {excerpt(raw)}")
    if ns <= 0:
        raise ValueError(f"interval must be > 0, got {excerpt(raw)}")
    return ns


def _tick_count(raw: Any) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 1:
        raise ValueError(f"ticks trigger needs an integer N >= 1, got {excerpt(raw)}")
    return raw


class Periodic(NamedTuple):
    """A trigger written `{kind: period}`: the period's form in errors, and its parser (raw YAML -> int >= 1)."""

    form: str
    parse: Callable[[Any], int]


PERIODIC_TRIGGERS = {  # kind -> Periodic; Trigger.cell gives each its grid
    "ticks": Periodic("N", _tick_count),
    "interval": Periodic("'500ms' | '2s' | '1m' | '1d' | <int ns>", parse_duration_ns),
}
TRIGGER_KINDS = (*WORD_TRIGGERS, *PERIODIC_TRIGGERS)
_FORMS = (", ".join(repr(word) for word in WORD_TRIGGERS) + ", "
          + " or ".join(f"{{{kind}: {periodic.form}}}" for kind, periodic in PERIODIC_TRIGGERS.items()))


@dataclass(frozen=True)
class Trigger:
    """`every` is N ticks for 'ticks', T nanoseconds of event time for 'interval', 0 otherwise."""

    kind: str = "batch"
    every: int = 0

    def __post_init__(self) -> None:
        if self.kind not in TRIGGER_KINDS:
            raise ValueError(f"trigger kind must be one of {', '.join(TRIGGER_KINDS)}, got {excerpt(self.kind)}")
        periodic = self.kind in PERIODIC_TRIGGERS
        if periodic and (not isinstance(self.every, int) or isinstance(self.every, bool) or self.every < 1):
            raise ValueError(f"{self.kind} trigger needs a period >= 1, got {excerpt(self.every)}")
        if periodic and self.every > MAX_PERIOD:
            raise ValueError(f"{self.kind} trigger period must be at most 2**63 - 1, got {excerpt(self.every)}")
        if not periodic and self.every != 0:
            raise ValueError(f"{self.kind} trigger takes no period, got {excerpt(self.every)}")

    @classmethod
    def parse(cls, raw: Any) -> Trigger:
        """From YAML/wire form: a word of WORD_TRIGGERS ('batch', 'on_demand') or {kind: period} of
        PERIODIC_TRIGGERS ({ticks: N}, {interval: '2s' or int ns})."""
        if isinstance(raw, str):
            if raw in WORD_TRIGGERS:
                return cls(raw)
            raise ValueError(f"unknown trigger {excerpt(raw)}; expected {_FORMS}")
        if raw is None:  # `trigger:` with nothing after it (YAML null): leave the key out for the default
            raise ValueError(f"trigger is empty (YAML null): leave the key out for the default 'batch', or give "
                             f"{_FORMS}")
        if not isinstance(raw, dict) or len(raw) != 1:
            raise ValueError(f"trigger must be {_FORMS}, got {excerpt(raw)}")
        (key, value), = raw.items()
        if key in PERIODIC_TRIGGERS:
            return cls(key, PERIODIC_TRIGGERS[key].parse(value))
        raise ValueError(f"unknown trigger {excerpt(key)} (allowed: {', '.join(TRIGGER_KINDS)})")

    def to_obj(self) -> str | dict[str, int]:
        return self.kind if self.every == 0 else {self.kind: self.every}

    def interval_text(self) -> str:
        """The period as the largest unit that divides it exactly: 500000000 -> '500ms'."""
        for unit in ("d", "h", "m", "s", "ms", "us", "ns"):
            if self.every % _UNIT_NS[unit] == 0:
                return f"{self.every // _UNIT_NS[unit]}{unit}"
        raise AssertionError("unreachable: every unit divides by 1 ns")

    def cell(self, ticks: int, event_ts: int) -> int | None:
        """The grid cell a stream is in (a new cell means fire), or None for triggers without a grid."""
        if self.kind == "ticks":
            return ticks // self.every
        if self.kind == "interval":
            return event_ts // self.every
        return None
