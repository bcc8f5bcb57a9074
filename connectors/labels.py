"""Realised answers: what the market did next, for every question. The one place it is computed.

Training (targets), the quality report (scoring) and backtests (scoring) all
call this module, so a question means the same thing everywhere.

An *answer point* is "just after tick i of a stream": the context holds ticks
0..i, the future is ticks i+1..i+horizon of the same stream. Moves are measured
on the stream's mark price (see connectors/questions.py).

Two entry points over one implementation:
* `label_series(spec, marks, regimes)` labels every answer point of a stream at
  once (vectorised; training and reports);
* `realised_label(question, ticks_after, mark, regime)` labels one answer point
  from the ticks that followed it (live scoring).

A horizon counts ticks, whatever time passes between them. Given each tick's event time and a session gap,
`label_series` leaves unlabelled every answer point whose horizon crosses a pause in the stream as long as the gap
or longer (a weekend, a night, a halt): what the market did after a close is not what an answer before it was about.
A pause of exactly the gap counts, because vendors stamp the last and first prints on a halt's bounds: CME's
16:00-17:00 CT halt and Tokyo's 11:30-12:30 lunch are then pauses of exactly 1 h, and `--session-gap 1h` cuts them.
`spanned_gaps` finds those points, for the notes that count them; `closes_spanned` those of a stream whose ticks are
not each such a pause by its sampling (`ordinary_spacing`: an hourly or daily series).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, replace
from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from connectors.questions import Question, QuestionSpec
from connectors.ticks import QUOTE, Tick
from engine.basis_points import bps_moved

NO_LABEL = -1
# Why a query is never scored, said alike by backtest and `flashtick scores` (a text model's service)
NO_LABEL_DEFINED = ("an answer is scored against what the ticks after it did, which only the named questions "
                    "(direction_5, ...) define; a free-text question and a surprise score have no such label (a text "
                    "model's choice query is scored once it says which named question its choices mean: `scored_as`, "
                    "docs/queries.md)")
REGIMES = ("calm", "volatile")


# A quote older than this (event time) when a trade prints outside its [bid, ask] no longer describes the market:
# the quote feed stopped (the session closed, an extended-hours or auction print, a halt's reopening). SIP NBBO,
# crypto book tickers and FX feeds requote many times a second while they trade, so a live quote is never this
# old beside a trade; a few seconds leaves room for a quote feed's lag behind the trades without ever moving the
# mark on it, yet a post-market session (hours after the last quote) follows its trades from its first print.
STALE_QUOTE_NS = 5_000_000_000


@dataclass
class MarkTracker:
    """A stream's mark price: its last mid; its last trade price until it first quotes, and from a trade that
    prints outside a stale quote's [bid, ask] (one older than STALE_QUOTE_NS) until its next quote."""

    mark: float | None = None
    quoted: bool = False
    bid: float = 0.0  # the last quote's, and its event time
    ask: float = 0.0
    quote_ts: int = 0
    following_trades: bool = False  # a trade left the stale quote: trades mark the stream until the next quote

    def update(self, tick: Tick) -> float:
        if tick.kind == QUOTE:
            self.mark, self.quoted, self.following_trades = 0.5 * (tick.bid + tick.ask), True, False
            self.bid, self.ask, self.quote_ts = tick.bid, tick.ask, tick.ts
        elif not self.quoted:
            self.mark = tick.price
        elif self.following_trades or self._leaves_stale_quote(tick):
            self.mark, self.following_trades = tick.price, True
        return self.mark

    def _leaves_stale_quote(self, trade: Tick) -> bool:
        outside = trade.price < self.bid or trade.price > self.ask
        return outside and trade.ts - self.quote_ts > STALE_QUOTE_NS

    def copy(self) -> MarkTracker:
        return replace(self)


class MarkSeries:
    """A stream's mark, event time and own price (a quote's mid, a trade's price) after each of its ticks, 24
    bytes a tick: all that labelling (and the price-step caution) needs of a stream's history, so a backtest of a
    day of many instruments keeps these rather than ticks (about 240 bytes each)."""

    def __init__(self) -> None:
        self.tracker = MarkTracker()
        self.marks = array("d")
        self.times = array("q")
        self.prices = array("d")

    def append(self, tick: Tick) -> None:
        self.marks.append(self.tracker.update(tick))
        self.times.append(tick.ts)
        self.prices.append(tick_price(tick))

    def __len__(self) -> int:
        return len(self.marks)

    def values(self) -> np.ndarray:
        """The marks, float64, shape (ticks,) (a view: valid until the next append)."""
        return np.frombuffer(self.marks, dtype=np.float64)

    def ts(self) -> np.ndarray:
        """The ticks' event times, int64 ns, shape (ticks,) (a view: valid until the next append)."""
        return np.frombuffer(self.times, dtype=np.int64)

    def own_prices(self) -> np.ndarray:
        """Each tick's own price (tick_price), float64, shape (ticks,) (a view: valid until the next append)."""
        return np.frombuffer(self.prices, dtype=np.float64)


def tick_price(tick: Tick) -> float:
    """A tick's own price level: a quote's mid, a trade's price (what it says, whatever the mark did)."""
    return 0.5 * (tick.bid + tick.ask) if tick.kind == QUOTE else tick.price


def marks_of(ticks: Sequence[Tick], tracker: MarkTracker | None = None) -> np.ndarray:
    """Mark after each tick of one stream, float64, shape (len(ticks),)."""
    tracker = tracker or MarkTracker()
    return np.array([tracker.update(t) for t in ticks], dtype=np.float64)


def move_bps(marks: np.ndarray, horizon: int) -> np.ndarray:
    """(m[i+h] - m[i]) / m[i] in bps for i < n - h, as the decimal prices say it (bps_moved: a move of exactly 0.5
    bp is in the (0.1, 0.5] bucket at 100.00 and at 1.0000 alike); shape (n - h,)."""
    return bps_moved(marks[horizon:], marks[:-horizon])


def realised_vol_bps(marks: np.ndarray, horizon: int) -> np.ndarray:
    """sqrt(sum of squared mark log-returns over ticks i+1..i+h) in bps; shape (n - h,); NaN for a window over a
    return that is not finite (an infinite mark), which would otherwise spoil every later window's running sum."""
    r2 = np.square(np.diff(np.log(marks)) * 1e4)
    lost = ~np.isfinite(r2)
    cs = np.concatenate([[0.0], np.cumsum(np.where(lost, 0.0, r2))])
    lost_before = np.concatenate([[0], np.cumsum(lost)])
    vol = np.sqrt(np.maximum(cs[horizon:] - cs[:-horizon], 0.0))
    return np.where(lost_before[horizon:] > lost_before[:-horizon], np.nan, vol)


def spanned_gaps(ts: np.ndarray, horizon: int, gap_ns: int) -> np.ndarray:
    """(n,) bool per answer point of a stream with event times ``ts`` (int64 ns, shape (n,)): whether its horizon
    (ticks i..i+horizon) holds two consecutive ticks ``gap_ns`` or more apart; False without a full horizon."""
    n = len(ts)
    out = np.zeros(n, dtype=bool)
    if n <= horizon or horizon < 1:
        return out
    wide = np.concatenate([[0], np.cumsum(np.diff(ts) >= gap_ns)])  # (n,) wide gaps among ticks 0..i
    out[: n - horizon] = wide[horizon:] > wide[: n - horizon]
    return out


def ordinary_spacing(ts: np.ndarray) -> int:
    """A stream's ordinary spacing: the median time (ns) between its consecutive ticks (``ts`` int64 ns, shape
    (n,), in replay order); 0 under two ticks. The median, so that a daily series' weekends and holidays (3-4 days)
    and an intraday feed's night both leave it at the spacing most ticks have. A stream whose ordinary spacing is
    itself a pause (an hourly auction, daily settlements or bars) has every tick across one by its sampling: the
    rules on pauses judge it against its own spacing (`closes_spanned`, connectors/price_steps.py)."""
    return int(np.median(np.diff(ts))) if len(ts) > 1 else 0


def closes_spanned(ts: np.ndarray, horizon: int, gap_ns: int) -> np.ndarray:
    """`spanned_gaps` for the notes on labels across a close: none on a stream whose ordinary spacing is ``gap_ns``
    or more (an hourly auction, daily settlements), whose every tick is such a pause by its sampling, not a close."""
    if ordinary_spacing(ts) >= gap_ns:
        return np.zeros(len(ts), dtype=bool)
    return spanned_gaps(ts, horizon, gap_ns)


def session_gap_text(ns: int) -> str:
    """A session gap as --session-gap takes it: 1h, 90m, 30s, 1.5s."""
    for unit, size in (("d", 86_400 * 10**9), ("h", 3_600 * 10**9), ("m", 60 * 10**9)):
        if ns % size == 0:
            return f"{ns // size}{unit}"
    return f"{ns / 1e9:g}s"


def label_series(spec: QuestionSpec, marks: np.ndarray, regimes: np.ndarray | None = None,
                 ts: np.ndarray | None = None, session_gap_ns: int | None = None) -> np.ndarray:
    """Label index (into spec.labels) per answer point; NO_LABEL without enough future or ground truth, and,
    given the ticks' event times ``ts`` and ``session_gap_ns``, where the horizon crosses a gap that long or longer.

    `regimes` holds the hidden regime index (0 calm, 1 volatile) per tick, synthetic data only.
    """
    n = len(marks)
    out = np.full(n, NO_LABEL, dtype=np.int64)
    if spec.kind == "regime":
        if regimes is not None:
            out[:] = regimes
        return out
    h = spec.horizon
    if n <= h:
        return out
    # Ingest bounds prices to [1e-12, 1e15] (connectors/ticks.py PRICE_RANGE), but marks given here directly (a Python
    # caller's own array) are not checked, so two may be too far apart for float64 (5e-324 after 1e308: the move
    # overflows to inf). Such a window has no label: NO_LABEL,
    # counted unscorable as one without enough future, never bucketed as the largest move, nor a numpy warning.
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        value = realised_vol_bps(marks, h) if spec.kind == "volatility" else move_bps(marks, h)
    if spec.kind == "direction":
        labels = np.where(value > spec.flat_bps, 2, np.where(value < -spec.flat_bps, 0, 1))
    else:
        labels = np.searchsorted(np.asarray(spec.edges), value, side="left")
    out[: n - h] = np.where(np.isfinite(value), labels, NO_LABEL)
    if ts is not None and session_gap_ns is not None:
        out[spanned_gaps(ts, h, session_gap_ns)] = NO_LABEL
    return out


def window_labels(spec: QuestionSpec, marks: np.ndarray, ts: np.ndarray | None = None,
                  session_gap_ns: int | None = None) -> np.ndarray:
    """(n - horizon,) the label of each answer point i < n - horizon as ``label_series`` gives it for that point's
    own window alone, ``label_series(spec, marks[i : i + horizon + 1])[0]``, all at once: the same float64 operations
    on the same values in the same order (a window's volatility sums its squared returns left to right from 0.0, as
    a window's own cumulative sum does; a whole stream's running sum would round otherwise), so a label realised in
    a batch (a restart re-feeding many answers, the adaptation's labels due) is bit for bit the one realised alone."""
    h = spec.horizon
    n = len(marks) - h
    if n <= 0:
        return np.full(0, NO_LABEL, dtype=np.int64)
    if spec.kind != "volatility":  # (a regime is never labelled from marks; a move is elementwise: no sum at all)
        return label_series(spec, marks, ts=ts, session_gap_ns=session_gap_ns)[:n]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        r2 = np.square(np.diff(np.log(marks)) * 1e4)  # (n + h - 1,)
        lost = ~np.isfinite(r2)
        sums = np.cumsum(sliding_window_view(np.where(lost, 0.0, r2), h), axis=1)[:, -1]  # (n,) each window's own
        vol = np.where(sliding_window_view(lost, h).any(axis=1), np.nan, np.sqrt(np.maximum(sums, 0.0)))
    out = np.where(np.isfinite(vol), np.searchsorted(np.asarray(spec.edges), vol, side="left"), NO_LABEL)
    if ts is not None and session_gap_ns is not None:
        out[spanned_gaps(ts, h, session_gap_ns)[:n]] = NO_LABEL
    return out.astype(np.int64)


def persistence_series(spec: QuestionSpec, marks: np.ndarray, ts: np.ndarray | None = None,
                       session_gap_ns: int | None = None) -> np.ndarray:
    """The naive "same as the last interval" answer per answer point: the label the past
    `horizon` ticks would have had. NO_LABEL where the past is too short (or crosses a gap of
    ``session_gap_ns`` or more, given the event times ``ts``) or for hidden-state questions."""
    out = np.full(len(marks), NO_LABEL, dtype=np.int64)
    if spec.kind == "regime":
        return out
    realised = label_series(spec, marks, ts=ts, session_gap_ns=session_gap_ns)
    h = spec.horizon
    if len(marks) > h:  # a stream shorter than the horizon has no past interval anywhere
        out[h:] = realised[: len(marks) - h]
    return out


def realised_label(
    question: Question | QuestionSpec, ticks_after: Sequence[Tick], mark: MarkTracker, regime: str | None = None
) -> str | None:
    """The realised answer at one answer point, or None when the future is too short
    (or, for the regime question, when no ground truth is given).

    `mark` is the stream's tracker at the answer point (not modified); `ticks_after`
    are the stream's ticks after it, in order; `regime` is the hidden regime label
    in force at the answer point (synthetic data only).
    """
    spec = question.spec if isinstance(question, Question) else question
    if spec.kind == "regime":
        return regime if regime in REGIMES else None
    if mark.mark is None or len(ticks_after) < spec.horizon:
        return None
    future = marks_of(ticks_after[: spec.horizon], mark.copy())
    idx = label_series(spec, np.concatenate([[mark.mark], future]))[0]
    return spec.labels[idx] if idx != NO_LABEL else None
