"""When a standing query fires: after every batch, every N ticks, every T of event time, when the price has moved N
basis points, or only when asked.

A "batch" is a tick group (one ingest message, one backtest batch): the engine checks triggers at the end
of each group, with the tick count and event time there, however many groups one forward advances.

Tick and interval triggers are anchored to a grid (multiples of N ticks, of T
ns of event time) rather than to the last firing, so a stream whose batches
do not line up with N still gets one answer per N ticks on average instead of
drifting to one per 2N. A batch that crosses several grid lines fires once.

Each kind is one row of `TRIGGER_TABLE`: how it is written (a word, or a mapping to its period), parsed, formatted
(YAML, wire, `flashtick list`) and placed on its grid, and how it behaves (`fires_by_itself`, `keeps_grid`); the
rest of flashtick asks the row (`Trigger.fires_by_itself`, ...), never compares the kind's name. Whether a trigger
fires at a group's end is queries/registry.py's `_fires`: a kind with no grid (`batch`) at every group, one with a
grid when its cell moves on, every kind at a stream's first group; one that does not fire by itself (`on_demand`)
is left out before that. A kind that fires on price moves (`on_moves`: `move_bps`) is not checked at group ends: the
service gives the registry each accepted tick's mark (`Registry.moved`), which fires it at that very tick.
"""

from __future__ import annotations

import difflib
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from collections.abc import Callable
from typing import Any, NamedTuple

from engine.quoting import quoted
from queries.limits import excerpt

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
        raise ValueError(f"interval must be a duration like \"500ms\", \"2s\", \"1m\" (units ns, us, ms, s, m, h, d) "
                         f"or an int of nanoseconds, got {excerpt(raw)}")
    if ns <= 0:
        raise ValueError(f"interval must be > 0, got {excerpt(raw)}")
    return ns


MIN_BARE_INTERVAL_NS = 1_000_000  # a bare int interval is ns: one under 1 ms is a unit left out (review381 #5)


def _interval_period(raw: Any) -> int:
    """An interval trigger's period: a duration, or an int of nanoseconds of at least 1 ms. `{interval: 10}` read as
    10 ns fired at every tick group without a word, where `10s` was meant: a bare int under 1 ms is refused."""
    ns = parse_duration_ns(raw)
    if isinstance(raw, int) and ns < MIN_BARE_INTERVAL_NS:
        raise ValueError(f"interval {raw} is {raw} nanoseconds (a bare int is ns), so the query would answer at every "
                         f"tick group: give the unit, e.g. {{interval: {raw}s}} or {{interval: {raw}ms}} (an int of "
                         f"ns is at least {MIN_BARE_INTERVAL_NS:,}, 1 ms; write \"{raw}ns\" if ns are meant)")
    return ns


def _tick_count(raw: Any) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 1:
        raise ValueError(f"ticks trigger needs an integer N >= 1, got {excerpt(raw)}")
    return raw


_BPS_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(bps|bp|basis points)?", re.IGNORECASE)
MILLI_BPS = 1_000  # a move_bps period is kept in thousandths of a basis point: an int, like every other period


def _move_size(raw: Any) -> int:
    """A move_bps period as written (10, 2.5: basis points, a number > 0) -> thousandths of a basis point."""
    fix = "write the basis points as a number, e.g. {move_bps: 10} or {move_bps: 2.5}"
    if isinstance(raw, str) and (m := _BPS_RE.fullmatch(raw.strip())) and m.group(2):  # "10bps": the unit is the key's
        fix = f"the unit is in the key's name: write {{move_bps: {m.group(1)}}}"
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise ValueError(f"move_bps trigger needs a number of basis points > 0, got {excerpt(raw)}; {fix}")
    if not math.isfinite(raw) or raw <= 0:
        raise ValueError(f"move_bps trigger needs a number of basis points > 0, got {excerpt(raw)}; {fix}")
    exact = Fraction(str(raw)) * MILLI_BPS  # (as written: 0.1 is 100 thousandths, not the binary float's digits)
    if exact.denominator != 1:
        raise ValueError(f"move_bps trigger takes basis points to 3 decimals (0.001 bp), got {excerpt(raw)}; "
                         f"round it, e.g. {{move_bps: {round(raw, 3) or 0.001}}}")
    return int(exact)


def move_text(milli_bps: int) -> int | float:
    """A move_bps period as written: 10000 -> 10, 2500 -> 2.5 (basis points)."""
    whole, part = divmod(milli_bps, MILLI_BPS)
    return whole if part == 0 else milli_bps / MILLI_BPS


def duration_text(ns: int) -> str:
    """A duration as the largest unit that divides it exactly: 500000000 -> '500ms'."""
    for unit in ("d", "h", "m", "s", "ms", "us", "ns"):
        if ns % _UNIT_NS[unit] == 0:
            return f"{ns // _UNIT_NS[unit]}{unit}"
    raise AssertionError("unreachable: every unit divides by 1 ns")


class TriggerKind(NamedTuple):
    """One kind of trigger, and everything the rest of flashtick asks of it: how it is written and read, and how
    it behaves. A kind named here is parsed, checked, formatted (YAML, wire, `flashtick list`), round-tripped and
    documented from this row alone (tests/test_trigger_kinds.py goes over every row).

    ``form``: the period's form in errors, or None for a kind written as the word alone (no period).
    ``parse``: raw YAML/wire value -> the period, an int >= 1 (None for a word).
    ``text``: the period -> what a person writes (YAML and `flashtick list`); ``parse`` reads it back.
    ``example``: a written period (the tests round-trip it; None for a word).
    ``cell``: (period, ticks, event_ts) -> the grid cell a stream is in (a new cell means fire), or None: no grid.
    ``fires_by_itself``: False for a kind answered only when asked (`on_demand`): left out of firing, of a
    backtest and of what a restart owes.
    ``keeps_grid``: its grid is event time, which an idle stream's expiry does not start over (registry.drop_stream).
    ``wire``: the period -> its form on the wire (control replies; `QuerySpec.to_dict`), which ``parse`` reads back:
    the int itself where ``parse`` takes an int (as `{interval: 500000000}`), else ``text``.
    ``on_moves``: it fires on the stream's price, not at group ends: at the tick whose mark has moved the period
    (thousandths of a basis point) from the mark at its last firing (Registry.moved; docs/queries.md).
    """

    form: str | None
    parse: Callable[[Any], int] | None
    text: Callable[[int], Any]
    example: Any
    cell: Callable[[int, int, int], int] | None
    fires_by_itself: bool = True
    keeps_grid: bool = False
    wire: Callable[[int], Any] = int
    on_moves: bool = False


def _word(_: int) -> Any:
    raise AssertionError("unreachable: a word trigger has no period")


TRIGGER_TABLE: dict[str, TriggerKind] = {
    "batch": TriggerKind(None, None, _word, None, None),
    "on_demand": TriggerKind(None, None, _word, None, None, fires_by_itself=False),
    "ticks": TriggerKind("N", _tick_count, int, 50, lambda every, ticks, event_ts: ticks // every),
    "interval": TriggerKind('"500ms" | "2s" | "1m" | "1d" | <int ns, >= 1 ms>', _interval_period, duration_text,
                            "500ms", lambda every, ticks, event_ts: event_ts // every, keeps_grid=True),
    "move_bps": TriggerKind("N (basis points, a number > 0)", _move_size, move_text, 10, None, wire=move_text,
                            on_moves=True),
}
WORD_TRIGGERS = tuple(kind for kind, row in TRIGGER_TABLE.items() if row.form is None)  # written as the word alone
PERIODIC_TRIGGERS = {kind: row for kind, row in TRIGGER_TABLE.items() if row.form is not None}  # {kind: period}
TRIGGER_KINDS = tuple(TRIGGER_TABLE)
_FORMS = (", ".join(quoted(word) for word in WORD_TRIGGERS) + ", "
          + " or ".join(f"{{{kind}: {row.form}}}" for kind, row in PERIODIC_TRIGGERS.items()))


@dataclass(frozen=True)
class Trigger:
    """`every` is N ticks for 'ticks', T nanoseconds of event time for 'interval', thousandths of a basis point for
    'move_bps', 0 otherwise. `written`: the period
    as its YAML or wire gave it ("1.5m", 1500000000, 50), kept beside the parsed one so that `flashtick list`,
    queries.yaml and the wire show what the user wrote (review336 #10: `1.5m` listed as `interval:90s`); None for a
    trigger built in Python (shown in the unit that divides it) and for a word. Not compared: `1.5m` and `90s` are
    the same trigger."""

    kind: str = "batch"
    every: int = 0
    written: int | str | None = field(default=None, compare=False)

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
        if self.written is not None and (not periodic or self.row.parse(self.written) != self.every):
            raise ValueError(f"{self.kind} trigger written {excerpt(self.written)} is not its period {self.every}")

    @classmethod
    def parse(cls, raw: Any) -> Trigger:
        """From YAML/wire form: a word of WORD_TRIGGERS ('batch', 'on_demand') or {kind: period} of
        PERIODIC_TRIGGERS ({ticks: N}, {interval: '2s' or int ns}), the period kept as written."""
        if isinstance(raw, str):
            if raw in WORD_TRIGGERS:
                return cls(raw)
            raise ValueError(f"unknown trigger {excerpt(raw)}; expected {_FORMS}{_word_hint(raw)}")
        if raw is None:  # `trigger:` with nothing after it (YAML null): leave the key out for the default
            raise ValueError(f"trigger is empty (YAML null): leave the key out for the default \"batch\", or give "
                             f"{_FORMS}")
        if not isinstance(raw, dict) or len(raw) != 1:
            raise ValueError(f"trigger must be {_FORMS}, got {excerpt(raw)}")
        (key, value), = raw.items()
        if key in PERIODIC_TRIGGERS:
            try:
                every = PERIODIC_TRIGGERS[key].parse(value)
            except ValueError as e:
                raise ValueError(f"{e}{_quoted_number_hint(key, value)}") from None
            # (a duration's own spaces dropped, "500 ms" -> "500ms": `list` shows it as one word on its line)
            return cls(key, every, re.sub(r"\s+", "", value) if isinstance(value, str) else value)
        raise ValueError(_mapping_refused(key, value))
    @property
    def row(self) -> TriggerKind:
        """This trigger's kind as TRIGGER_TABLE describes it."""
        return TRIGGER_TABLE[self.kind]

    @property
    def fires_by_itself(self) -> bool:
        """False for a kind answered only when asked (`on_demand`)."""
        return self.row.fires_by_itself

    @property
    def on_moves(self) -> bool:
        """It fires where the stream's price moved (`move_bps`), at that tick, rather than at group ends."""
        return self.row.on_moves

    @property
    def move_bps(self) -> float:
        """A `move_bps` trigger's move in basis points (its period is kept in thousandths of one)."""
        return self.every / MILLI_BPS

    @property
    def keeps_grid(self) -> bool:
        """Its grid is event time: an idle stream's expiry keeps it (registry.drop_stream)."""
        return self.row.keeps_grid

    def to_obj(self) -> str | dict[str, Any]:
        """The wire form (control replies, `QuerySpec.to_dict`); `parse` reads it back."""
        if self.every == 0:
            return self.kind
        return {self.kind: self.row.wire(self.every) if self.written is None else self.written}

    def to_yaml(self) -> str | dict[str, Any]:
        """The written form (queries.yaml, `to_yaml`): the period as a person writes it; `parse` reads it."""
        if self.every == 0:
            return self.kind
        return {self.kind: self.row.text(self.every) if self.written is None else self.written}

    def text(self) -> str:
        """On one line, as `flashtick list` shows it, the period as written: batch, on_demand, ticks:50,
        interval:1.5m."""
        if self.every == 0:
            return self.kind
        return f"{self.kind}:{self.row.text(self.every) if self.written is None else self.written}"

    def interval_text(self) -> str:
        """The period as the largest unit that divides it exactly: 500000000 -> '500ms'."""
        return duration_text(self.every)

    def cell(self, ticks: int, event_ts: int) -> int | None:
        """The grid cell a stream is in (a new cell means fire), or None for triggers without a grid."""
        grid = self.row.cell
        return None if grid is None else grid(self.every, ticks, event_ts)


def _folded(word: str) -> str:
    """A trigger's name with case and `-`/`_` folded, as a hand or another tool writes it (`On-Demand`)."""
    return word.strip().lower().replace("-", "_").replace(" ", "_")


def _meant_kind(word: Any) -> str | None:
    """The kind of TRIGGER_TABLE that ``word`` (a misspelt name) most likely means, or None."""
    if not isinstance(word, str):
        return None
    folded = _folded(word)
    if folded in TRIGGER_TABLE:
        return folded
    close = difflib.get_close_matches(folded, TRIGGER_KINDS, n=1, cutoff=0.75)
    return close[0] if close else None


def _as_written(kind: str, period: Any = None) -> str:
    """How ``kind`` is written in a queries file: the word, or `{kind: period}` (the row's example without one)."""
    row = TRIGGER_TABLE[kind]
    if row.form is None:
        return f"trigger: {kind}"
    shown = row.example if period is None else period
    return f"trigger: {{{kind}: {shown if isinstance(shown, int) else quoted(shown)}}}"


def _word_hint(word: str) -> str:
    """After "unknown trigger" for a word: a periodic kind written without its period (`ticks`, or `ticks:50` as
    `flashtick list` shows it), or a kind misspelt (`Batch`, `on-demand`): how to write it."""
    name, colon, period = word.partition(":")
    kind = _meant_kind(name)
    if kind is None:
        return ""
    if TRIGGER_TABLE[kind].form is None:
        return f"; did you mean {_as_written(kind)}?"
    if colon and period.strip():  # (`list`'s one-line form, pasted): a mapping in YAML
        value = period.strip()
        return f"; a period is written as a mapping: {_as_written(kind, int(value) if value.isdigit() else value)}"
    return f"; {kind} takes a period, written as a mapping: {_as_written(kind)}"


def _mapping_refused(key: Any, value: Any) -> str:
    """Why a one-key mapping is not a trigger: a word kind written as a mapping (`{batch: true}`, which is
    `trigger: batch`), a kind misspelt (`{Ticks: 50}`), or no kind at all."""
    kind = _meant_kind(key)
    if kind is not None and TRIGGER_TABLE[kind].form is None:
        return (f"trigger {excerpt(key)} takes no value: it is written as the word alone, {_as_written(kind)} "
                f"(not a mapping, as {{{excerpt(key)}: {excerpt(value)}}})")
    hint = f"; did you mean {_as_written(kind, value)}?" if kind is not None else ""
    return f"unknown trigger {excerpt(key)}; expected {_FORMS}{hint}"


def _quoted_number_hint(kind: str, value: Any) -> str:
    """After a period refused: a number YAML read as text because it was quoted (`{ticks: "50"}`); not for a kind
    whose periods are text as a rule (`{interval: "5"}` meant 5 s more likely than 5 ns)."""
    if isinstance(value, str) and value.strip().isdigit() and isinstance(PERIODIC_TRIGGERS[kind].example, int):
        try:
            Trigger(kind, PERIODIC_TRIGGERS[kind].parse(int(value)))
        except ValueError:
            return ""
        return f" (quoted in the YAML: drop the quotes, {_as_written(kind, int(value))})"
    return ""
