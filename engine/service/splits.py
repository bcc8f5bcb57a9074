"""A user's tick files as per-stream token/label arrays, split in time into train / validation / test.

Each stream is cut on its own tick count: train = the first `train` fraction,
then a gap, validation, a gap, test = the rest. A gap holds at least the
longest question horizon, and every part's labels are computed from that
part's own marks only (connectors/labels.py), so no realised answer uses a tick
from the other side of a cut. Tokens are encoded over the whole stream (the
codec's state runs on, as a live session's would); a model's *context* may
reach back into earlier parts, which serving allows (the past is known), but
its training windows and answer targets come from the train part alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from connectors.codec import TOKENS_PER_TICK, BinnedCodec
from connectors.labels import NO_LABEL, label_series, marks_of
from connectors.ticks import Tick, shown_name, utc_text
from engine.quoting import quoted
from engine.service.backtest_scores import first_share
from engine.service.features import microstructure_features

PARTS = ("train", "validation", "test")


@dataclass(frozen=True)
class SplitSpec:
    """Fractions of each stream's ticks (summing to 1) and the gap in ticks between parts."""

    train: float = 0.70
    validation: float = 0.15
    test: float = 0.15
    gap: int = 0  # 0: the codec's longest question horizon
    # evaluate --test-from TIME: each stream's test part is its ticks stamped then or later (ns), the ticks before
    # it, less the gap, its train part (no validation part: evaluate fits its baselines on the train part alone)
    test_from_ns: int | None = None

    def __post_init__(self) -> None:
        if self.train <= 0 or self.test <= 0 or self.validation < 0:
            raise ValueError(f"split: train and test must be > 0 and validation >= 0, got {self.text()}")
        if abs(self.train + self.validation + self.test - 1.0) > 1e-6:
            raise ValueError(f"split: the parts must add up to 100, got {self.text()}")
        if self.gap < 0:
            raise ValueError(f"split gap must be >= 0 ticks, got {self.gap}")

    def text(self) -> str:
        """The parts as --split writes them: 64/18/18."""
        return "/".join(f"{100 * x:g}" for x in (self.train, self.validation, self.test))

    @classmethod
    def parse(cls, text: str, gap: int = 0) -> SplitSpec:
        """'70/15/15' (percent of each stream, in time order); '70/30' has no validation part."""
        try:
            parts = [float(x) / 100 for x in text.split("/")]
        except ValueError:
            raise ValueError("--split must look like 70/15/15 (train/validation/test percent), got "
                             f"{quoted(text)}") from None
        if len(parts) == 2:
            parts.insert(1, 0.0)
        if len(parts) != 3:
            raise ValueError(f"--split must look like 70/15/15 (train/validation/test percent), got {quoted(text)}")
        try:
            return cls(*parts, gap=gap)
        except ValueError as e:  # in the user's words: "--split 70/20", not the 70/0/20 it was read as
            reason = str(e).split(", got ")[0].removeprefix("split: ")
            raise ValueError(f"--split {text}: {reason}") from None


class StreamSplit(NamedTuple):
    """Tick index ranges of one stream's parts (half-open, in the stream's own tick numbering)."""

    train: range
    validation: range
    test: range


def split_ticks(n: int, spec: SplitSpec, gap: int, ts: np.ndarray | None = None) -> StreamSplit:
    """A stream of n ticks cut by ``spec``'s shares; with its test_from_ns, by the event times ``ts`` (n,): the test
    part from the first tick stamped then, the gap taken from the ticks before it, so the test part is whole."""
    if spec.test_from_ns is not None and ts is not None:
        cut = int(np.searchsorted(ts, spec.test_from_ns, side="left"))
        before = max(cut - gap, 0)
        return StreamSplit(range(0, before), range(before, before), range(cut, n))
    a = first_share(n, spec.train)
    b = first_share(n, spec.train + spec.validation)
    train = range(0, a)
    validation = range(a + gap, b) if spec.validation > 0 else range(a, a)
    test = range((b if spec.validation > 0 else a) + gap, n)
    return StreamSplit(train, validation, test)


@dataclass
class StreamData:
    """One stream: its tokens (n, TOKENS_PER_TICK), marks, ticks, parts and per-part labels (n, Q)."""

    name: str
    ticks: list[Tick]
    tokens: np.ndarray
    marks: np.ndarray
    parts: StreamSplit
    labels: np.ndarray  # label index per (tick, question) computed within the tick's part; NO_LABEL elsewhere

    @cached_property
    def ts(self) -> np.ndarray:
        """(n,) int64 each tick's event time, ns."""
        return np.array([t.ts for t in self.ticks], dtype=np.int64)

    @cached_property
    def features(self) -> np.ndarray:
        """(n, F) each tick's microstructure features (features.py), computed once: calibration, the answer
        heads and evaluate all read them."""
        return microstructure_features(self.ticks, self.marks)

    def points(self, part: str) -> tuple[np.ndarray, np.ndarray]:
        """(tick index, question index) of every labelled answer point in `part`, in time order."""
        r = getattr(self.parts, part)
        ii, qq = np.nonzero(self.labels[r.start : r.stop] >= 0)
        return ii + r.start, qq


def test_spans(streams: list[StreamData]) -> dict[str, tuple[int, int]]:
    """Each stream's test part as the event times (ns) of its first and last tick, of the streams that have one."""
    return {sd.name: (sd.ticks[sd.parts.test.start].ts, sd.ticks[sd.parts.test.stop - 1].ts)
            for sd in streams if len(sd.parts.test)}


OVERLAPS_NAMED = 4  # streams a time-overlap note names in one list; beyond it, how many more


def time_overlap_note(streams: list[StreamData]) -> str | None:
    """The split is per stream, in tick order: streams recorded over the same hours (two instruments of one
    exchange, two contract months of a future) have one's training ticks at the times of another's test slice.
    When they move together the test slice is then not out of sample; say so, for every test slice that another
    stream's training (or validation) ticks run past the start of, naming each such stream (a few, then a count):
    the one named might not be the one that matters most (a spread beside its own legs). A stream whose seen ticks
    all come after the test slice (consecutive contracts: M4 after H4) covers other hours: the model saw later data."""
    seen = {sd.name: (sd.ticks[0].ts, sd.ticks[max(sd.parts.validation.stop, sd.parts.train.stop) - 1].ts)
            for sd in streams}
    same_hours, later = [], []  # clauses: the test slices other streams' seen ticks overlap, or follow
    for tested in streams:
        test = tested.parts.test
        if not len(test):
            continue
        start, end = tested.ticks[test.start].ts, tested.ticks[test.stop - 1].ts
        past = [sd.name for sd in streams if sd is not tested and start < seen[sd.name][1]]
        if overlapping := [name for name in past if seen[name][0] <= end]:
            same_hours.append(f"{_possessive_list(overlapping)} training ticks run past the start of "
                              f"{tested.name}'s test slice")
        if after := [name for name in past if seen[name][0] > end]:
            later.append(f"{_possessive_list(after)} training ticks come after {tested.name}'s test slice begins")
    if not same_hours and not later:
        return None
    said = "; ".join([*([f"{_clause_list(same_hours)} (they cover the same hours)"] if same_hours else []),
                      *([f"{_clause_list(later)} (the model saw later data)"] if later else [])])
    slices = "that test slice is" if len(same_hours) + len(later) == 1 else "those test slices are"
    return (f"{said}: if they move together, {slices} not fully out of sample (split by time across streams: one "
            f"file per stream and period, or test on another period)")


def _clause_list(clauses: list[str]) -> str:
    """The first OVERLAPS_NAMED clauses, then how many more."""
    more = len(clauses) - OVERLAPS_NAMED
    return "; ".join(clauses[:OVERLAPS_NAMED]) + (f"; and so for {more} more streams' test slices" if more > 0 else "")


def _possessive_list(names: list[str]) -> str:
    """`A's`, `A's and B's`, `A's, B's and C's`; beyond OVERLAPS_NAMED, `A's, B's, C's, D's and 3 more streams'`."""
    owned = [f"{name}'s" for name in names[:OVERLAPS_NAMED]]
    if len(names) > OVERLAPS_NAMED:
        more = len(names) - OVERLAPS_NAMED
        return f"{', '.join(owned)} and {more} more " + ("stream's" if more == 1 else "streams'")
    return owned[0] if len(owned) == 1 else f"{', '.join(owned[:-1])} and {owned[-1]}"


def part_labels(codec: BinnedCodec, marks: np.ndarray, parts: StreamSplit, ts: np.ndarray | None = None,
                session_gap_ns: int | None = None) -> np.ndarray:
    """Labels per (tick, question), each part labelled from its own marks only; gap ticks stay unlabelled, and
    so do points whose horizon crosses a pause in event time (``ts``) of ``session_gap_ns`` or more."""
    out = np.full((len(marks), len(codec.questions)), NO_LABEL, dtype=np.int64)
    for r in parts:
        times = ts[r.start : r.stop] if ts is not None else None
        for qi, q in enumerate(codec.questions.values()):
            out[r.start : r.stop, qi] = label_series(q.spec, marks[r.start : r.stop], ts=times,
                                                     session_gap_ns=session_gap_ns)
    return out


def longest_horizon(codec: BinnedCodec) -> int:
    return max(q.spec.horizon for q in codec.questions.values())


def gap_note(codec: BinnedCodec, spec: SplitSpec) -> str | None:
    """What `prepare` does to a --gap below the longest question horizon (widens it), in words; None otherwise."""
    if 0 < spec.gap < longest_horizon(codec):  # a label must not cross a cut
        return (f"--gap {spec.gap} is below the longest question horizon; {longest_horizon(codec)} ticks are left "
                f"out between the parts instead, so no label uses a tick across a cut")
    return None


def min_part_ticks(codec: BinnedCodec, window_ticks: int) -> int:
    """The fewest ticks each part of a stream must hold, for `train` and `evaluate` alike (one rule, so that they
    name the same minimum for the same model and stream): a whole window of the model and the tick after it
    (training draws its windows from a part) and, past an answer point, the longest question horizon (so every
    question has an answer point to score in each part)."""
    return max(window_ticks + 1, longest_horizon(codec) + 1)


SHORT_NAMED = 3  # streams too short to split said one line each; more (an option chain's) are summed up in one


def short_streams_line(codec: BinnedCodec, streams: dict[str, list[Tick]], kept: Iterable[str], spec: SplitSpec,
                       min_ticks: int) -> str | None:
    """The streams of ``streams`` not ``kept`` (too short to split) in one line: how many of how many, their
    shortest and longest, what the split needs, and the longest few by name (nearest to enough); None if none.
    An option chain leaves out thousands of 3-tick series, which a line each (or an error naming each) buries."""
    if (short := _short_streams(streams, kept)) is None:
        return None
    needed = ticks_needed(spec, max(spec.gap, longest_horizon(codec)), min_ticks)
    return (f"{short.count} of the {len(streams):,} streams are too short to split ({short.span}; this split needs "
            f"{needed:,} ticks in a stream, each part at least {min_ticks}), left out: {short.named}")


class _ShortStreams(NamedTuple):
    count: str  # "1,556"
    span: str  # "3 to 160 ticks"
    named: str  # "A (160), B (150), C (3) and 1,553 more"


def _short_streams(streams: dict[str, list[Tick]], kept: Iterable[str]) -> _ShortStreams | None:
    kept = set(kept)
    short = {name: len(ticks) for name, ticks in streams.items() if name not in kept}
    if not short:
        return None
    shortest, longest = min(short.values()), max(short.values())
    span = f"{shortest:,} ticks each" if shortest == longest else f"{shortest:,} to {longest:,} ticks"
    named = sorted(short, key=lambda name: (-short[name], name))[:SHORT_NAMED]
    examples = ", ".join(f"{shown_name(name)} ({short[name]:,})" for name in named)
    more = f" and {len(short) - len(named):,} more" if len(short) > len(named) else ""
    return _ShortStreams(f"{len(short):,}", span, examples + more)


def prepare(codec: BinnedCodec, streams: dict[str, list[Tick]], spec: SplitSpec,
            min_ticks: int, training: bool = True, name_all: bool = False,
            session_gap_ns: int | None = None, rejected: Mapping[str, int] | None = None
            ) -> tuple[list[StreamData], list[str]]:
    """Streams long enough to split (each part >= `min_ticks`: min_part_ticks), and a note per stream left out;
    ``training``: for `train` (its refusal may then say what a split without a validation part does to training);
    ``session_gap_ns``: labels end at a pause that long or longer in event time (evaluate --session-gap).
    Refused when none is: the streams named one by one when few or ``name_all`` (--verbose), else summed up, and
    the ticks the reading did not take (``rejected``, read_streams'), which may be why."""
    gap = max(spec.gap, longest_horizon(codec))
    out, skipped = [], []
    by_time = spec.test_from_ns is not None
    for name, ticks in sorted(streams.items()):
        times = np.array([t.ts for t in ticks], dtype=np.int64) if by_time else None
        parts = split_ticks(len(ticks), spec, gap, times)
        short = [p for p, r in zip(PARTS, parts)
                 if len(r) < min_ticks and (p != "validation" or (spec.validation and not by_time))]
        if short:
            under = "empty" if min_ticks == 1 else f"under {min_ticks} ticks"
            skipped.append(f"{name}: {len(ticks):,} ticks leave its {' and '.join(short)} "
                           f"part{'s' if len(short) > 1 else ''} {under}")
            continue
        tokens = np.array(codec.encode_stream(ticks), dtype=np.int64).reshape(-1, TOKENS_PER_TICK)
        marks = marks_of(ticks)
        data = StreamData(name, ticks, tokens, marks, parts, np.zeros(0, dtype=np.int64))
        data.labels = part_labels(codec, marks, parts, data.ts if session_gap_ns is not None else None,
                                  session_gap_ns)
        out.append(data)
    if not out:
        longest, n = max(((name, len(ticks)) for name, ticks in streams.items()), key=lambda kv: (kv[1], kv[0]))
        if name_all or len(skipped) <= SHORT_NAMED:
            short = "; ".join(skipped)
        else:
            summed = _short_streams(streams, ())
            short = (f"its {summed.count} streams hold {summed.span} (the longest: {summed.named}; --verbose names "
                     f"each)")
        if by_time:  # the shares' advice does not apply: the cut is a time
            cut = utc_text(spec.test_from_ns)
            raise ValueError("no stream is long enough to split: " + short + f" (--test-from {cut}: each stream "
                             f"needs at least {min_ticks:,} ticks from then on, and {min_ticks:,} more than the gap "
                             f"of {gap} ticks before it, its train part, where the baselines are fitted: give files "
                             f"from before it too (the model's training files serve; they are not scored))"
                             + _not_taken(rejected, sum(map(len, streams.values()))))
        raise ValueError("no stream is long enough to split: " + short + f" (this split needs "
                         f"{ticks_needed(spec, gap, min_ticks):,} ticks in a stream: "
                         f"{_what_would_split(longest, n, spec, gap, min_ticks, training)})"
                         + _not_taken(rejected, sum(map(len, streams.values()))))
    return out, skipped


def _not_taken(rejected: Mapping[str, int] | None, taken: int) -> str:
    """The ticks read but not taken, for the error of streams too short to split: how many of how many, and each
    reason's line with its first row and its fix (the reading's, `Rejected.said`, else the counts); '' if none."""
    if not rejected or not (count := sum(rejected.values())):
        return ""
    said = getattr(rejected, "said", None) or [f"{reason} {n:,}" for reason, n in rejected.items()]
    return (f"; {count:,} of the {count + taken:,} ticks read were not taken, which may be why: "
            f"{'; '.join(said)}")


def _what_would_split(name: str, n: int, spec: SplitSpec, gap: int, min_ticks: int, training: bool = True) -> str:
    """A --split that `name`'s n ticks do split, or how many ticks any split needs: a suggested split that fails
    too (50/25/25 for 230 ticks) sends the user round again."""
    fits = split_that_fits(n, spec, gap, min_ticks)
    floor = "none empty" if min_ticks == 1 else f"each at least {min_ticks} ticks"
    if fits is not None:
        unvalidated = " (no validation part: training then stops by --steps alone)" if training and \
            spec.validation and not fits.validation else ""
        percents = [f"{100 * x:g}" for x in (fits.train, fits.validation, fits.test) if x]
        return f"more ticks, or --split {'/'.join(percents)}, whose parts of {name}'s {n:,} ticks are {floor}" \
               f"{unvalidated}"
    return (f"no split works for {name}'s {n:,} ticks, the longest stream: any split needs at least "
            f"{3 * min_ticks + 2 * gap:,} ticks ({2 * min_ticks + gap:,} without a validation part), its parts "
            f"{floor} with {gap} ticks left out between them")


def split_that_fits(n: int, spec: SplitSpec, gap: int, min_ticks: int) -> SplitSpec | None:
    """The whole-percent split nearest `spec` (least total move of its parts) whose every part of n ticks holds at
    least `min_ticks`: with a validation part if `spec` has one, else (or failing that) without; None if none."""
    def fits(split: SplitSpec) -> bool:
        parts = split_ticks(n, split, gap)
        return all(len(r) >= min_ticks for p, r in zip(PARTS, parts) if p != "validation" or split.validation)

    wanted = np.array([spec.train, spec.validation, spec.test]) * 100
    for validated in (True, False) if spec.validation else (False,):
        percents = [(t, v, 100 - t - v) for t in range(1, 100) for v in (range(1, 100 - t) if validated else (0,))]
        fitting = [p for p in percents if fits(SplitSpec(*(x / 100 for x in p)))]
        if fitting:
            best = min(fitting, key=lambda p: (np.abs(np.array(p) - wanted).sum(), p))
            return SplitSpec(*(x / 100 for x in best))
    return None


def ticks_needed(spec: SplitSpec, gap: int, min_ticks: int) -> int:
    """The fewest ticks a stream needs for every part of `spec` to hold at least `min_ticks`."""
    def enough(n: int) -> bool:
        parts = split_ticks(n, spec, gap)
        return all(len(r) >= min_ticks for p, r in zip(PARTS, parts) if p != "validation" or spec.validation)

    high = min_ticks
    while not enough(high):
        high *= 2
    low = high // 2  # not enough (or below min_ticks): the answer is in (low, high]
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high
