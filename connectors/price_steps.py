"""Price steps across a pause that look like a stock split, and one-tick steps that stay (a roll): a caution, never
a correction.

Replay takes prices as the files give them; corporate actions are not applied (docs/replay.md expects
split-adjusted files). A 2-for-1 split between two sessions then replays as a 50% crash, and every answer whose
label horizon spans it is scored as a move. This finds, per stream, the pauses in event time longer than
STEP_GAP_NS across which the price level changed by a ratio within SPLIT_TOLERANCE of a simple split ratio and
by more than STEP_TIMES the stream's typical tick-to-tick move, so that the user is told which stream, when
and by what ratio; so is a step of a price unit (pence to pounds: UNIT_RATIOS), and any step of LEVELS_APART-fold
or more, as two files' levels that far apart are (connectors/price_levels.py): inside one file as across two. A
stream sampled over an hour apart as a rule (daily bars, settlements: connectors/labels.py `ordinary_spacing`) has
every tick across such a pause: its steps are judged tick to tick, against its own spacing, so that a split is said
once, at its day, not at every pause whose windows straddle it.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

import numpy as np

from connectors.durations import duration_text
from connectors.futures_codes import futures_name
from connectors.labels import ordinary_spacing, session_gap_text
from connectors.market_zones import stock_name
from connectors.option_names import is_option_name
from connectors.price_levels import LEVELS_APART
from connectors.ticks import shown_name, utc_text

STEP_GAP_NS = 3_600_000_000_000  # a pause of over an hour: between sessions (a split is applied while closed)
# price after / price before of N-for-M splits and reverse splits (1/2: a 2-for-1 split halves the price)
SPLIT_RATIOS = tuple(Fraction(r) for r in ("1/2", "1/3", "2/3", "2", "3", "3/2", "1/4", "4", "1/10", "10"))
# a currency's minor unit beside its major one: a file whose vendor writes a stream's prices in pence, then in pounds
# (GBp/GBP; ZAc/ZAR, ILA/ILS alike), steps x0.01 (review440 #1: a pence file's switch to pounds went unsaid); fils
# beside dinars (Boursa Kuwait quotes in fils: KWD, BHD, OMR, JOD alike) x0.001
UNIT_RATIOS = (Fraction(1, 100), Fraction(100), Fraction(1, 1000), Fraction(1000))
UNIT_CHANGE = ("a change of price unit, between a currency's minor unit and its major one (pence and pounds: GBp/GBP; "
               "ZAc/ZAR, ILA/ILS, cents and dollars alike; fils and dinars, 1,000 to one)")
SPLIT_TOLERANCE = 0.03  # |log(step / ratio)| within log(1.03): the session's own move on top of the split
STEP_TIMES = 20  # ... and the step more than this many times the stream's median tick-to-tick move
SIDE_TICKS = 5  # the level on each side of the pause: the median of this many ticks' prices (one bad print aside)


class PriceStep(NamedTuple):
    stream: str
    before_ts: int  # the last tick before the pause
    after_ts: int  # the first tick after it
    step: float  # the price level after / before
    ratio: Fraction | None  # the split or unit ratio it is near; None: near none, but LEVELS_APART-fold or more
    times_typical: float  # |log step| / the stream's median |log move| between ticks
    sampled_ns: int = 0  # the stream's ordinary spacing where it is over STEP_GAP_NS (daily bars), else 0

    def caution(self, session_gap_ns: int | None) -> str:
        """The caution line: the stream, the pause, the ratio (a split's, a price unit's, or none: a level that
        far apart is two instruments' as often); what its answers' scores then are."""
        gap = self.after_ts - self.before_ts
        # on a daily series every tick is a pause: a --session-gap that cut this one would leave nothing scored
        cut = (f"its ticks are {duration_text(self.sampled_ns)} apart as a rule, so a --session-gap would leave "
               f"every answer unscored: adjust the prices before it" if self.sampled_ns else
               "--session-gap 1h leaves them unscored")
        scored = _unscored(gap, session_gap_ns) or f"the answers whose label horizon spans it are scored as that " \
                                                    f"move ({cut})"
        if self.ratio is None:
            what = (f"{LEVELS_APART:g}-fold or more and near no split ratio (two instruments under one name, or a "
                    f"change of price unit?): prices are replayed as the files give them, so one instrument in one "
                    f"unit is expected")
        elif self.ratio in UNIT_RATIOS:
            what = (f"near {self.ratio} ({UNIT_CHANGE}, or a data error?): prices are replayed as the files give "
                    f"them, so one unit throughout is expected: write the {'later' if self.ratio < 1 else 'earlier'} "
                    f"prices x{1 / self.ratio} (docs/replay.md)")
        else:
            kind = (f"a {self.ratio.denominator}-for-{self.ratio.numerator} split" if self.ratio < 1
                    else f"a {self.ratio.denominator}-for-{self.ratio.numerator} reverse split")
            what = (f"near {self.ratio} ({kind}, or a data error?): prices are replayed as the files give them, so "
                    f"split-adjusted files are expected (docs/replay.md)")
        return (f"{shown_name(self.stream)}: its price stepped x{self.step:.3g} across a pause of "
                f"{duration_text(gap)} in event time ({utc_text(self.before_ts)} to {utc_text(self.after_ts)}), "
                f"{self.times_typical:.0f} times its typical move, {what}; {scored}")


def split_like_steps(stream: str, ts: np.ndarray, prices: np.ndarray) -> list[PriceStep]:
    """The split-like steps of one stream: ``ts`` its ticks' event times (int64 ns, shape (n,)), ``prices`` each
    tick's own price (float64, shape (n,), a quote's mid or a trade's price), in replay order."""
    spacing = ordinary_spacing(ts)
    sampled = spacing > STEP_GAP_NS  # each tick a session of its own (a day): its every spacing is such a pause
    pauses = np.arange(len(ts) - 1) if sampled else np.nonzero(np.diff(ts) > STEP_GAP_NS)[0]  # j: tick j to j + 1
    if not len(pauses):
        return []
    option = is_option_name(stream)  # (as price_levels leaves an option's files out)
    log_prices = np.log(prices)
    moves = np.abs(np.diff(log_prices))
    moves = moves[moves > 0]
    typical = float(np.median(moves)) if len(moves) else 0.0
    steps = []
    for j in pauses:
        step = _sampled_step(prices, j) if sampled else _session_step(prices, j)
        if step is None:
            continue
        # an option's premium may move many-fold, or 100-fold, in a night: only its split ratios are said
        ratio = near_ratio(step, SPLIT_RATIOS if option else (*SPLIT_RATIOS, *UNIT_RATIOS))
        if ratio is None:
            if option or abs(np.log(step)) < np.log(LEVELS_APART):  # a move, or a gap, of one instrument
                continue
            ratio = None  # levels as far apart as two files' that get a caution (connectors/price_levels.py)
        times = abs(np.log(step)) / typical if typical > 0 else np.inf
        if times > STEP_TIMES:
            steps.append(PriceStep(stream, int(ts[j]), int(ts[j + 1]), step, ratio, times, spacing * sampled))
    return steps


def _session_step(prices: np.ndarray, j: int) -> float:
    """The level after the pause between ticks j and j + 1 over the level before: each the median of SIDE_TICKS
    ticks' prices, so that one bad print on either side does not make or hide a step."""
    before = float(np.median(prices[max(0, j + 1 - SIDE_TICKS) : j + 1]))
    return float(np.median(prices[j + 1 : j + 1 + SIDE_TICKS])) / before


def _sampled_step(prices: np.ndarray, j: int) -> float | None:
    """Tick j + 1's price over tick j's, on a series whose every tick is a session (a day): its windows of
    SIDE_TICKS would straddle a split at each of the pauses around it, each a few days' drift off the ratio. None
    where the step does not hold one tick further out on each side (half of it reverted: a lone bad day)."""
    step = float(prices[j + 1] / prices[j])
    outer = float(prices[min(j + 2, len(prices) - 1)] / prices[max(j - 1, 0)])  # tick j - 1 to tick j + 2
    return step if abs(np.log(outer / step)) < abs(np.log(step)) / 2 else None


# A step that stays within a session: a continuous futures series rolling from one contract to the next (CL 82.50
# -> 81.55) or a bad back-adjust. A lone bad print reverts at the next tick (connectors/lone_prints.py); news moves
# the price over several ticks, rarely by this many typical moves in one. Across a pause of STEP_GAP_NS or more a
# stock's step that stays is an opening gap as a rule (its 1% overnight): the pause note and --session-gap speak of
# those, and split_like_steps of a split's. A future's is looked at there too: a daily-session future's continuous
# series (LSEG's `FDXc1`) rolls at the session's change, across the night (review440 #5: only the pause note spoke).
LASTING_TIMES = 50  # a one-tick move this many times the stream's median (nonzero) move, or more ...
LASTING_TICKS = 20  # ... between two flat levels: the range of this many ticks' prices on each side ...
LASTING_LEVEL_TIMES = 5  # ... at most 1/this of the step (a fast market moves on both sides: BTC's 0.08% sweeps
# measure 0.5-2, CL's roll 24; a lone print's reverting tick puts the whole step in the range after it)
LASTING_MOST = 3  # a stream with more such steps jumps by nature (a thin market): said nothing of it


class LastingStep(NamedTuple):
    stream: str
    tick: int  # the stream's tick (1-based) the price stepped at
    before_ts: int  # the tick before it
    after_ts: int  # the tick itself
    before: float  # the level before: the median of LASTING_TICKS ticks' prices
    after: float  # the level after
    times_typical: float  # the one-tick |log move| / the stream's median |log move| between ticks

    def caution(self, session_gap_ns: int | None) -> str:
        """The caution line: the stream, where, by how much; what it may be, by the stream's name and the pause
        before it (a stock's halt reopens ~10% away after 5 minutes: no roll); what its answers' scores then are
        and what to do."""
        gap = self.after_ts - self.before_ts
        step = (f"{shown_name(self.stream)}: its price stepped from about {self.before:g} to {self.after:g} "
                f"({self.after / self.before - 1:+.2%}) at its tick {self.tick:,} ({utc_text(self.after_ts)}), "
                f"{self.times_typical:.0f} times its typical move, and stayed there")
        if (unit := near_ratio(self.after / self.before, UNIT_RATIOS)) is not None:  # x0.01 at noon: no roll
            scored = _unscored(gap, session_gap_ns) or "the answers whose label horizon spans it are scored as " \
                                                        "that move"
            return (f"{step} (x{unit}: {UNIT_CHANGE}, or a data error?): prices are replayed as the files give them, "
                    f"so one unit throughout is expected: write the {'later' if unit < 1 else 'earlier'} prices "
                    f"x{1 / unit}; {scored}")
        minute = 60 * 10**9  # --session-gap in whole minutes, at most the pause: it then cuts there
        future = futures_name(self.stream)
        halt = gap >= minute and not future
        # a stock's name (`000001.SZ`, `7203.T`) is no continuous futures series: SSE's and SZSE's stocks trade on,
        # sealed at their daily limit, without a halt (review433 #12: a limit-up was told as a roll)
        stock = stock_name(self.stream) and not future
        scored = _unscored(gap, session_gap_ns)
        if scored is None and stock:
            scored = "the answers whose label horizon spans it are scored as that move" + (
                f": --session-gap {session_gap_text(gap - gap % minute)}, since a pause of {duration_text(gap)} "
                f"falls there, leaves them unscored" if gap >= minute else "")
        if scored is None:
            contract = ("if the file holds the contract in a column, read a stream per contract (--columns "
                        "stream=SYMBOL+CONTRACT, then --streams to pick)")
            # across a night, the pause note's own cut (every pause of an hour or more) rather than this night's
            cut_at = STEP_GAP_NS if gap >= STEP_GAP_NS else gap - gap % minute
            cut = f"--session-gap {session_gap_text(cut_at)}, since a pause of {duration_text(gap)} falls there"
            scored = "the answers whose label horizon spans it are scored as that move: " + (
                f"{cut}, leaves them unscored; for a roll: {contract}" if halt else
                f"{contract}, or {cut}" if gap >= minute else contract)
        what = ("a stock's price limit (limit-up/limit-down), where the venue trades on at it or pauses, or a bad "
                "print that stayed?" if stock else
                "a trading halt's reopening (a stock's limit-up/limit-down pause), or a futures roll in a continuous "
                "series, or a bad back-adjust?" if halt else "a futures roll in a continuous series at the "
                "session's change, an opening gap, or a bad back-adjust?" if gap >= STEP_GAP_NS else "a futures roll "
                "in a continuous series, or a bad back-adjust?")
        return f"{step} ({what}): prices are replayed as the files give them; {scored}"


def near_ratio(step: float, ratios: tuple[Fraction, ...]) -> Fraction | None:
    """The one of ``ratios`` a step (the level after / before) is nearest, where within SPLIT_TOLERANCE of it."""
    ratio = min(ratios, key=lambda r: abs(np.log(step / float(r))))
    return ratio if abs(np.log(step / float(ratio))) <= np.log1p(SPLIT_TOLERANCE) else None


def _unscored(gap_ns: int, session_gap_ns: int | None) -> str | None:
    """What a caution says of the answers across a step whose pause --session-gap cuts; None where it does not."""
    if session_gap_ns is None or gap_ns < session_gap_ns:
        return None
    return ("the answers whose label horizon spans it are left unscored (--session-gap "
            f"{session_gap_text(session_gap_ns)})")


def lasting_steps(stream: str, ts: np.ndarray, prices: np.ndarray) -> list[LastingStep]:
    """The one-tick steps of one stream between two flat levels (``ts``, ``prices`` as split_like_steps takes them),
    none across a pause of STEP_GAP_NS or more unless the stream's name is a future's (a roll at the session's
    change), and none where the stream has over LASTING_MOST of them."""
    n = len(prices)
    if n < 2 * LASTING_TICKS:
        return []
    log_prices = np.log(prices)
    moves = np.diff(log_prices)  # (n - 1,) move into tick j + 1
    typical = np.abs(moves[moves != 0])
    typical = float(np.median(typical)) if len(typical) else 0.0
    if typical == 0:
        return []
    within = np.diff(ts) < STEP_GAP_NS
    big = np.nonzero((np.abs(moves) >= LASTING_TIMES * typical) & (within | futures_name(stream)))[0]
    if len(big) > 4 * LASTING_MOST:  # a jumpy stream: no need to look at each
        return []
    steps = []
    for j in big:
        lo, hi = j + 1 - LASTING_TICKS, j + 1 + LASTING_TICKS
        if lo < 0 or hi > n:
            continue
        before, after = log_prices[lo : j + 1], log_prices[j + 1 : hi]  # (LASTING_TICKS,) each side of the step
        if abs(moves[j]) >= LASTING_LEVEL_TIMES * max(np.ptp(before), np.ptp(after)):
            steps.append(LastingStep(stream, int(j) + 2, int(ts[j]), int(ts[j + 1]), float(np.exp(np.median(before))),
                                     float(np.exp(np.median(after))), abs(float(moves[j])) / typical))
    return steps if len(steps) <= LASTING_MOST else []


# A price pinned at one level (a stock sealed at its daily limit: every trade at it, its book one-sided): a run of
# this many ticks or more at one exact price, lasting this long, in a stream whose price moves elsewhere
PINNED_TICKS = 100
PINNED_NS = 30 * 60 * 10**9


class PinnedPrice(NamedTuple):
    stream: str
    price: float
    first_ts: int  # the run's first tick
    last_ts: int  # its last
    ticks: int

    def caution(self, session_gap_ns: int | None) -> str:
        """The caution line: where the price sat, how long, and what the answers there are (review433 #5: an hour
        sealed at the limit-up gave the model's own constant, always wrong forecast, and nothing said so)."""
        held = duration_text(self.last_ts - self.first_ts)
        return (f"{shown_name(self.stream)}: its price sat at {self.price:g} for {held} ({utc_text(self.first_ts)} "
                f"to {utc_text(self.last_ts)}), {self.ticks:,} ticks in a row at that one "
                f"price (a price limit, limit-up or limit-down, where the venue trades on at it, or a market that "
                f"did not move?): the ticks there "
                f"repeat one another, so the model's own answers there are near-constant, and every label there is "
                f"no move")


def pinned_prices(stream: str, ts: np.ndarray, prices: np.ndarray) -> list[PinnedPrice]:
    """The runs of one stream's ticks at one exact price, PINNED_TICKS or more over PINNED_NS or longer, where its
    price is not one level throughout (a series that never moves says so in its own notes), and whose name is no
    future's (a rates future's quotes can rest at one mid for an hour of size updates)."""
    if len(prices) < PINNED_TICKS or futures_name(stream):
        return []
    starts = np.flatnonzero(np.r_[True, prices[1:] != prices[:-1]])  # (runs,) each run's first tick
    if len(starts) < 2:
        return []
    ends = np.r_[starts[1:], len(prices)] - 1  # (runs,) its last tick
    pinned = np.flatnonzero((ends - starts + 1 >= PINNED_TICKS) & (ts[ends] - ts[starts] >= PINNED_NS))
    return [PinnedPrice(stream, float(prices[starts[k]]), int(ts[starts[k]]), int(ts[ends[k]]),
                        int(ends[k] - starts[k] + 1)) for k in pinned]


def price_steps(stream: str, ts: np.ndarray, prices: np.ndarray,
                offset: float = 0.0) -> list[PriceStep | LastingStep | PinnedPrice]:
    """Every step of one stream a caution is said for: split-like steps across a pause, steps that stay, then prices
    pinned at one level. ``offset``: the --price-offset its prices were read with. A split's or a unit's ratio is
    one of the prices as the files write them: tested on those, and not at all where some are at or below zero (a
    spread, a power price, a crude future's April 2020: none splits; verify55 R3: CL's 56.98 -> 25 was told a
    3-for-2 split by its shifted prices' x0.663)."""
    written = prices - offset
    splits = split_like_steps(stream, ts, written) if (written > 0).all() else []
    # a future's step across a pause near a split's ratio is said once, as the split-like one
    lasting = [step for step in lasting_steps(stream, ts, prices) if all(step.after_ts != s.after_ts for s in splits)]
    return [*splits, *lasting, *pinned_prices(stream, ts, prices)]
