"""The codec seam: tick -> tokens, with per-stream state. Two implementations.

* `BinnedCodec` (tick-native, used by the built-in model): a fixed vocabulary,
  exactly `TOKENS_PER_TICK` tokens per tick, each describing the tick relative
  to the stream's previous one, plus question and answer tokens.
* `TextCodec` (any Hugging Face LM): one text line per tick, tokenized line by
  line, so a stream's tokens are the concatenation of per-tick encodings.

Both are deterministic: the same ticks through `new_state()` give the same tokens.
Both answer the query side's view of a codec (`queries.codec.QueryCodec`:
`vocab_size`, `questions`, `question_tokens`, `decode`) structurally, since
connectors/ and queries/ do not import each other; tests/test_query_codec.py checks it.

BinnedCodec slots, in order (bin i of edges e is (e[i-1], e[i]]):
  0. event  - trade: `buy` / `sell` / `trade` (side unknown);
              quote: spread vs the stream's previous quote `q_narrow` / `q_same` / `q_wide`
  1. gap    - ns since the stream's previous tick: `start` (first tick), `zero`, then `gap_edges_ns` bins
  2. move   - reference price vs the previous tick's, in bps (reference = trade price or quote mid):
              `zero` (|move| < 1e-6 bps), then sign x `move_edges_bps` bins of |move|
  3. size   - trade: `zero` or log2(size / stream's EWMA trade size) binned by `size_log2_edges`;
              quote: bid_size / (bid_size + ask_size) binned by `imbalance_edges`, `na` without sizes

Spec version 2 (instrument-agnostic; `BinnedSpec(version=2)`) keeps the four slots but measures
each against the stream's own running scale, so a token means the same on BTC, an FX pair or an equity:
  event - as v1, crossed with a coarse tag of the stream's per-tick RMS move in bps (running, zeros
          included; `scale_tag_edges_bps`), because the volatility and move questions are asked in
          absolute bps and the model must still tell a 0.05 bp market from a 5 bp one;
  gap   - `start`, `zero`, then log2(gap / running geometric mean gap) binned by `gap_log2_edges`;
  move  - `zero`, then sign x log2(|move| / running geometric mean |non-zero move|) binned by
          `move_log2_edges`. Geometric means, not arithmetic: bursts of microsecond gaps sit beside
          minute-long pauses, and on BTC one-tick moves (0.002 bp) beside multi-bp jumps, and an
          arithmetic mean would put all the typical ones in the lowest bin;
  size  - as v1 (already relative to the stream's EWMA).
Running scales are EWMAs whose weight is max(alpha, 1 / n) for the n-th observation (a plain mean
while warming up); each token is measured against the scale *before* its own tick updates it.
"""

from __future__ import annotations

import hashlib
import json
import math
from abc import ABC, abstractmethod
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal
from types import MappingProxyType
from typing import Any, NamedTuple

from connectors.calibration import Calibration
from connectors.questions import DEFAULT_QUESTIONS, Question, QuestionSpec
from connectors.ticks import QUOTE, TRADE, Tick

TOKENS_PER_TICK = 4
SPEC_FORMAT = "flashtick.binned_codec/1"
SPEC_VERSIONS = (1, 2)
_ZERO_BPS = 1e-6
MAX_MOVE_BPS = 1e12  # a move is clipped here (a 10^8-fold price change), far past any real one
# Fields only version 2 reads; a version-1 spec serialises without them, exactly as before they existed.
_V2_FIELDS = ("move_log2_edges", "gap_log2_edges", "scale_alpha", "scale_tag_edges_bps")


class Codec(ABC):
    """Turns one stream's ticks into tokens (tick side) and questions into probe tokens (query side).

    Tick side: state is per stream and owned by the caller (connectors.encoder.StreamEncoder);
    it is a small value object whose shallow copy is independent of it, so an encoder can
    encode on a copy and keep the original when the tick is refused downstream.
    Query side: every codec answers every member; what a codec cannot do it says so
    through the member's result (no attribute probing).
    """

    vocab_size: int
    questions: Mapping[str, Question]
    """Named questions the model was trained to answer (empty when questions are free text)."""
    end_tokens: frozenset[int] = frozenset()
    """Token ids that end a generated answer (the model's end of sequence); the tick codec has none."""

    @abstractmethod
    def new_state(self) -> Any:
        """Fresh state for a stream that has seen no tick yet."""

    @abstractmethod
    def encode(self, tick: Tick, state: Any) -> list[int]:
        """Tokens for `tick`, given (and advancing) its stream's state."""

    def state_record(self, state: Any) -> dict[str, Any]:
        """``state`` as plain values (a tick log keeps it where retention may drop the ticks that made it)."""
        return asdict(state)

    def state_from_record(self, record: dict[str, Any]) -> Any:
        """The state ``state_record`` wrote; a record of other fields (another codec) gives fresh state."""
        fresh = self.new_state()
        try:
            return type(fresh)(**record)
        except TypeError:
            return fresh

    @abstractmethod
    def question_tokens(self, text: str) -> list[int] | None:
        """Probe tokens of a free-text question or answer choice; None when this codec cannot
        tokenize free text (its questions are asked by name, see `questions`)."""

    @abstractmethod
    def decode(self, tokens: Sequence[int]) -> str:
        """Readable text of generated tokens."""

    def encode_stream(self, ticks: list[Tick]) -> list[int]:
        state = self.new_state()
        return [tok for t in ticks for tok in self.encode(t, state)]


def _check_increasing(name: str, edges: tuple[float, ...], positive: bool) -> None:
    if not edges:
        raise ValueError(f"{name} must not be empty")
    if any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"{name} must increase strictly, got {edges}")
    if positive and edges[0] <= 0:
        raise ValueError(f"{name} must be > 0, got {edges}")


@dataclass(frozen=True)
class BinnedSpec:
    """Everything that defines a BinnedCodec; ships as codec.json beside the model."""

    gap_edges_ns: tuple[int, ...] = (
        100_000, 1_000_000, 10_000_000, 50_000_000, 200_000_000, 1_000_000_000, 5_000_000_000, 30_000_000_000,
    )
    move_edges_bps: tuple[float, ...] = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
    size_log2_edges: tuple[float, ...] = (-3.0, -1.5, -0.5, 0.5, 1.5, 3.0)
    imbalance_edges: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8)
    size_ewma_alpha: float = 0.05
    questions: tuple[QuestionSpec, ...] = DEFAULT_QUESTIONS
    vocab_size: int = 128
    version: int = 1  # 1: absolute bps / ns bins (the v1 built-in model); 2: relative to the stream's own scales
    # Version 2 only (see the module docstring):
    move_log2_edges: tuple[float, ...] = (-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.5, 5.0)
    gap_log2_edges: tuple[float, ...] = (-7.0, -4.5, -2.5, -1.0, 0.0, 1.0, 2.5, 4.5)
    # ~200 observations: slow enough that a volatile spell still shows as big moves and short gaps
    scale_alpha: float = 0.005
    # per-tick RMS move, bps: the volatility_50 edges (0.3, 1, 3, 10) over sqrt(50)
    scale_tag_edges_bps: tuple[float, ...] = (0.042, 0.14, 0.42, 1.4)

    def __post_init__(self) -> None:
        if self.version not in SPEC_VERSIONS:
            raise ValueError(f"spec.version must be one of {SPEC_VERSIONS} (the codec spec's version), got "
                             f"{self.version}")
        _check_increasing("move_log2_edges", self.move_log2_edges, positive=False)
        _check_increasing("gap_log2_edges", self.gap_log2_edges, positive=False)
        _check_increasing("scale_tag_edges_bps", self.scale_tag_edges_bps, positive=True)
        if not 0 < self.scale_alpha <= 1:
            raise ValueError(f"scale_alpha must be in (0, 1], got {self.scale_alpha}")
        _check_increasing("gap_edges_ns", self.gap_edges_ns, positive=True)
        _check_increasing("move_edges_bps", self.move_edges_bps, positive=True)
        _check_increasing("size_log2_edges", self.size_log2_edges, positive=False)
        _check_increasing("imbalance_edges", self.imbalance_edges, positive=True)
        if self.imbalance_edges[-1] >= 1:
            raise ValueError(f"imbalance_edges must lie in (0, 1), got {self.imbalance_edges}")
        if not 0 < self.size_ewma_alpha <= 1:
            raise ValueError(f"size_ewma_alpha must be in (0, 1], got {self.size_ewma_alpha}")
        names = [q.name for q in self.questions]
        if len(set(names)) != len(names):
            raise ValueError(f"question names must be unique, got {names}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["questions"] = [q.to_dict() for q in self.questions]
        if self.version == 1:  # byte-for-byte the codec.json v1 checkpoints ship
            for name in ("version", *_V2_FIELDS):
                del d[name]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> BinnedSpec:
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown codec spec keys: {', '.join(f'spec.{key}' for key in sorted(unknown))}")
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k != "questions"}
        kw["questions"] = tuple(QuestionSpec.from_dict(q) for q in d.get("questions", []))
        return cls(**kw)


@dataclass
class BinnedState:
    """What BinnedCodec remembers about one stream."""

    last_ts: int | None = None
    last_ref: float | None = None
    last_spread: float | None = None
    size_ewma: float | None = None
    ticks: int = 0
    # Version 2 running scales and how many observations each has absorbed (for the warm-up weight).
    move_log2_mean: float | None = None  # of |non-zero move| in bps
    moves_seen: int = 0
    move_sq_mean: float | None = None  # of move^2 in bps^2, zeros included (the scale tag)
    gap_log2_mean: float | None = None  # of positive gaps in ns
    gaps_seen: int = 0
    ticks_moved: int = 0  # ticks with a previous reference price (observations in move_sq_mean)


def _log2_ratio(num: float, den: float) -> float:
    """log2(num / den) for num > 0 and den >= 0, also where the quotient under- or overflows a float (a size of
    1e-305 after ones of 1e20): the same bits as math.log2(num / den) wherever that is defined."""
    if den <= 0:
        return math.inf
    q = num / den
    return math.log2(q) if 0 < q < math.inf else math.log2(num) - math.log2(den)


def _running(mean: float | None, x: float, n: int, alpha: float) -> float:
    """EWMA with weight max(alpha, 1/n) for the n-th value: the plain mean until n reaches 1/alpha."""
    return x if mean is None else mean + max(alpha, 1.0 / n) * (x - mean)


class TokenBin(NamedTuple):
    """What one tick token means: its slot and the half-open value range (lo, hi]."""

    slot: str
    name: str
    lo: float
    hi: float


def _signed_bins(edges: tuple[float, ...]) -> list[tuple[str, float, float]]:
    bounds = (0.0, *edges, math.inf)
    pos = [(f"+{i}", bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
    neg = [(f"-{i}", -bounds[i + 1], -bounds[i]) for i in range(len(bounds) - 1)]
    return [("zero", -_ZERO_BPS, _ZERO_BPS)] + pos + neg


def _bins(edges: tuple[float, ...], lo: float) -> list[tuple[str, float, float]]:
    bounds = (lo, *edges, math.inf)
    return [(str(i), bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


class BinnedCodec(Codec):
    """Tick-native codec: 4 tokens per tick from a fixed vocabulary, plus Q/A tokens."""

    def __init__(self, spec: BinnedSpec | None = None, calibration: Calibration | None = None) -> None:
        self.spec = spec or BinnedSpec()
        s = self.spec
        # How answers are read off this checkpoint's logits; not part of the spec or codec.json (see
        # connectors/calibration.py for why it has a file of its own).
        self.calibration = calibration or Calibration()
        self.calibration.check({q.name: len(q.labels) for q in s.questions})
        table: list[TokenBin] = [TokenBin("special", "<pad>", math.nan, math.nan)]
        events = ("buy", "sell", "trade", "q_narrow", "q_same", "q_wide")
        if s.version == 1:
            table += [TokenBin("event", n, math.nan, math.nan) for n in events]
        else:  # event x scale tag; lo/hi carry the tag's range of the per-tick RMS move in bps
            table += [TokenBin("event", f"{n}/s{k}", lo, hi)
                      for k, (_, lo, hi) in enumerate(_bins(s.scale_tag_edges_bps, 0.0)) for n in events]
        table += [TokenBin("gap", "start", math.nan, math.nan), TokenBin("gap", "zero", -math.inf, 0.0)]
        if s.version == 1:
            table += [TokenBin("gap", n, lo, hi) for n, lo, hi in _bins(s.gap_edges_ns, 0.0)]
            table += [TokenBin("move", n, lo, hi) for n, lo, hi in _signed_bins(s.move_edges_bps)]
        else:  # log2 of gap and |move| over their running geometric means
            table += [TokenBin("gap", n, lo, hi) for n, lo, hi in _bins(s.gap_log2_edges, -math.inf)]
            table += [TokenBin("move", "zero", math.nan, math.nan)]
            table += [TokenBin("move", f"{sign}{n}", lo, hi) for sign in "+-"
                      for n, lo, hi in _bins(s.move_log2_edges, -math.inf)]
        table += [TokenBin("size", "zero", -math.inf, 0.0)]
        table += [TokenBin("size", n, lo, hi) for n, lo, hi in _bins(s.size_log2_edges, -math.inf)]
        table += [TokenBin("imbalance", "na", math.nan, math.nan)]
        table += [TokenBin("imbalance", n, lo, hi) for n, lo, hi in _bins(s.imbalance_edges, -math.inf)]
        self.n_tick_tokens = len(table)
        self.questions: dict[str, Question] = {}
        for q in s.questions:
            table.append(TokenBin("question", q.name, math.nan, math.nan))
        for q in s.questions:
            first = len(table)
            table += [TokenBin("answer", f"{q.name}:{label}", math.nan, math.nan) for label in q.labels]
            self.questions[q.name] = Question(
                name=q.name,
                tokens=[self.n_tick_tokens + s.questions.index(q)],
                answers={label: first + i for i, label in enumerate(q.labels)},
                values=dict(zip(q.labels, q.values)) if q.values else None,
                horizon=q.horizon,
                description=q.description,
                spec=q,
                calibration=self.calibration.get(q.name),
            )
        if len(table) > s.vocab_size:
            raise ValueError(f"vocab_size {s.vocab_size} too small: codec needs {len(table)} tokens")
        table += [TokenBin("special", f"<reserved_{i}>", math.nan, math.nan) for i in range(s.vocab_size - len(table))]
        self.table = table
        self.vocab_size = s.vocab_size
        self.names = [f"{b.slot}:{b.name}" for b in table]
        self._id = {n: i for i, n in enumerate(self.names)}
        if len(self._id) != len(self.names):
            raise ValueError("token names collide; question names must be unique")
        self.pad_id = 0

    # --- encoding -------------------------------------------------------------------
    def new_state(self) -> BinnedState:
        return BinnedState()

    def token(self, slot: str, name: str) -> int:
        return self._id[f"{slot}:{name}"]

    def encode(self, tick: Tick, state: BinnedState) -> list[int]:
        s = self.spec
        if tick.kind == QUOTE:
            spread = tick.ask - tick.bid
            ref = 0.5 * (tick.bid + tick.ask)
            tol = 1e-9 * ref  # spreads are differences of floats; ignore ulp noise
            if state.last_spread is None or abs(spread - state.last_spread) <= tol:
                event = "q_same"
            else:
                event = "q_narrow" if spread < state.last_spread else "q_wide"
            state.last_spread = spread
            if tick.bid_size is None or tick.ask_size is None or tick.bid_size + tick.ask_size <= 0:
                size_tok = self.token("imbalance", "na")
            else:
                imb = tick.bid_size / (tick.bid_size + tick.ask_size)
                size_tok = self.token("imbalance", str(bisect_left(s.imbalance_edges, imb)))
        else:
            ref = tick.price
            event = tick.side or "trade"
            if tick.size <= 0:
                size_tok = self.token("size", "zero")
            else:
                ratio = 0.0 if state.size_ewma is None else _log2_ratio(tick.size, state.size_ewma)
                size_tok = self.token("size", str(bisect_left(s.size_log2_edges, ratio)))
                a = s.size_ewma_alpha
                state.size_ewma = tick.size if state.size_ewma is None else state.size_ewma + a * (tick.size - state.size_ewma)
        gap = None if state.last_ts is None else tick.ts - state.last_ts
        move = 0.0 if state.last_ref is None else (ref - state.last_ref) / state.last_ref * 1e4
        move = min(max(move, -MAX_MOVE_BPS), MAX_MOVE_BPS)  # finite: an inf would make the running scales NaN
        if s.version == 1:
            gap_name = self._gap_name_v1(gap)
            move_name = self._move_name_v1(move)
        else:
            event = f"{event}/s{self._scale_tag(state)}"  # the scale before this tick, like the other slots
            gap_name = self._gap_name_v2(gap, state)
            move_name = self._move_name_v2(move, state)
        state.last_ts, state.last_ref = tick.ts, ref
        state.ticks += 1
        return [self.token("event", event), self.token("gap", gap_name), self.token("move", move_name), size_tok]

    def _gap_name_v1(self, gap: int | None) -> str:
        if gap is None:
            return "start"
        return "zero" if gap <= 0 else str(bisect_left(self.spec.gap_edges_ns, gap))

    def _gap_name_v2(self, gap: int | None, state: BinnedState) -> str:
        """log2 of the gap over the running geometric mean gap (0 for the first positive gap); updates the mean."""
        if gap is None:
            return "start"
        if gap <= 0:
            return "zero"  # simultaneous events say something of their own; they stay out of the mean
        log_gap = math.log2(gap)
        rel = 0.0 if state.gap_log2_mean is None else log_gap - state.gap_log2_mean
        state.gaps_seen += 1
        state.gap_log2_mean = _running(state.gap_log2_mean, log_gap, state.gaps_seen, self.spec.scale_alpha)
        return str(bisect_left(self.spec.gap_log2_edges, rel))

    def _move_name_v1(self, move: float) -> str:
        if abs(move) < _ZERO_BPS:
            return "zero"
        return ("+" if move > 0 else "-") + str(bisect_left(self.spec.move_edges_bps, abs(move)))

    def _move_name_v2(self, move: float, state: BinnedState) -> str:
        """`zero`, or sign and log2(|move| / geometric mean |non-zero move|) (0 for the first); updates the
        scales. The stream's first tick has no move and does not count towards the RMS."""
        s = self.spec
        if state.last_ref is not None:
            state.ticks_moved = state.ticks_moved + 1
            state.move_sq_mean = _running(state.move_sq_mean, move * move, state.ticks_moved, s.scale_alpha)
        if abs(move) < _ZERO_BPS:
            return "zero"
        log_move = math.log2(abs(move))
        rel = 0.0 if state.move_log2_mean is None else log_move - state.move_log2_mean
        state.moves_seen += 1
        state.move_log2_mean = _running(state.move_log2_mean, log_move, state.moves_seen, s.scale_alpha)
        return ("+" if move > 0 else "-") + str(bisect_left(s.move_log2_edges, rel))

    def _scale_tag(self, state: BinnedState) -> int:
        # Before the stream's second tick there is no move yet; tag 0 stands in for that one tick.
        rms = 0.0 if state.move_sq_mean is None else math.sqrt(state.move_sq_mean)
        return bisect_left(self.spec.scale_tag_edges_bps, rms)

    # --- decoding / introspection ---------------------------------------------------
    def describe(self, token_id: int) -> TokenBin:
        """What a token means; tick tokens carry their bin's (lo, hi] range."""
        return self.table[token_id]

    def is_tick_token(self, token_id: int) -> bool:
        return 0 < token_id < self.n_tick_tokens

    def decode(self, tokens: Sequence[int]) -> str:
        """Token names ("event:buy gap:3 ..."); an id outside the vocabulary shows as its number."""
        return " ".join(self.names[t] if 0 <= t < len(self.names) else str(t) for t in tokens)

    def question_tokens(self, text: str) -> None:
        """None: a tick vocabulary has no words, so questions are asked by name (`questions`)."""
        return None

    # --- spec -----------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps({"format": SPEC_FORMAT, "spec": self.spec.to_dict(), "vocab": self.names}, indent=1)

    def with_calibration(self, calibration: Calibration) -> BinnedCodec:
        """The same codec reading answers with `calibration` (e.g. one just fitted to new weights)."""
        return BinnedCodec(self.spec, calibration)

    @classmethod
    def from_json(cls, text: str) -> BinnedCodec:
        d = json.loads(text)
        if not isinstance(d, dict) or d.get("format") != SPEC_FORMAT:
            found = d.get("format") if isinstance(d, dict) else None
            raise ValueError(f"not a BinnedCodec spec: format {found!r}, expected {SPEC_FORMAT!r}")
        if unknown := sorted(set(d) - set(_CODEC_JSON_KEYS)):  # a key read by nothing is refused, not ignored
            under = [key for key in unknown if key in BinnedSpec.__dataclass_fields__]
            hint = f" ({', '.join(under)} belongs under spec: spec.{under[0]})" if under else ""
            raise ValueError(f"unknown codec.json key{'s' * (len(unknown) > 1)} {', '.join(unknown)}; known keys: "
                             f"{', '.join(_CODEC_JSON_KEYS)}{hint}")
        if not isinstance(d.get("spec"), dict):
            raise ValueError("codec.json has no spec mapping (its edges, questions and version)")
        codec = cls(BinnedSpec.from_dict(d["spec"]))
        if d.get("vocab") is not None and d["vocab"] != codec.names:
            raise ValueError("codec spec vocab does not match the vocabulary this version builds from it")
        return codec


_CODEC_JSON_KEYS = ("format", "spec", "vocab")  # codec.json's top level (to_json)

_TEMPLATE_FIELDS = ("stream", "ts", "kind", "price", "size", "side", "bid", "ask", "bid_size", "ask_size", "mid", "gap_ms")


class _Missing:
    """A field the tick does not carry (a quote's sizes, a trade's bid): written `?` whatever the format spec, never
    Python's `None` in a model's prompt."""

    def __format__(self, spec: str) -> str:
        return "?"

    def __str__(self) -> str:
        return "?"


MISSING = _Missing()


class _Positional(float):
    """A tick's float that, written without a format spec, reads as a trader writes it: positional, shortest digits
    (`0.00009`, `100.5`, `2.0`), never Python's exponent form (`9e-05`, `1e+16`). A template's own format spec
    (`{size:.8f}`, `{price:e}`) is applied as Python applies it."""

    def __format__(self, spec: str) -> str:
        if spec:  # a plain float, so a spec it cannot take is refused naming `float`, not this class
            return format(float(self), spec)
        text = repr(float(self))
        if "e" not in text:  # also nan and inf, which have no positional form
            return text
        positional = format(Decimal(text), "f")  # the same shortest digits, without the exponent
        return positional if "." in positional else positional + ".0"


def _template_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """What a template is formatted with: floats written positionally, a missing value (None) as `?`."""
    return {key: MISSING if value is None else _Positional(value) if type(value) is float else value
            for key, value in values.items()}


def _field_refusal(tpl: str, values: Mapping[str, Any]) -> str | None:
    """The first field of `tpl` its value cannot be written with (`{size:d}` of a float), said with the field's type
    and a spec that type takes; None when each field alone can be written."""
    import string

    written = _template_values(values)
    for _, name, spec, conversion in string.Formatter().parse(tpl):
        if name is None:
            continue
        one = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        try:
            one.format(**written)
        except (ValueError, TypeError, IndexError, KeyError) as e:
            kind, works = {float: ("a float", ".2f"), int: ("an int of ns", "d")}.get(type(values[name]),
                                                                                     ("text", ">8"))
            return f"{one}: {name} is {kind}, which that spec cannot write ({e}); write e.g. {{{name}:{works}}}"
    return None


# What each field is when given, for checking a template before any tick comes: text, an int (ns), floats
_SAMPLE_FIELDS = {"stream": "BTCUSDT", "ts": 1_700_000_000_000_000_000, "kind": "trade", "price": 100.5, "size": 2.0,
                  "side": "buy", "bid": 100.25, "ask": 100.75, "bid_size": 3.0, "ask_size": 4.0, "mid": 100.5,
                  "gap_ms": "0.0"}


@dataclass(frozen=True)
class TextCodecConfig:
    """Line templates (str.format fields: see _TEMPLATE_FIELDS); each must end with a newline. A float field
    without a format spec is written positionally (`0.00009`, not `9e-05`); one with a spec as str.format writes it."""

    trade_template: str = "T {side} {price} x {size} +{gap_ms}ms\n"
    quote_template: str = "Q {bid}/{ask} {bid_size}x{ask_size} +{gap_ms}ms\n"
    gap_decimals: int = 1

    def __post_init__(self) -> None:
        import string

        for name in ("trade_template", "quote_template"):
            tpl = getattr(self, name)
            if not tpl.endswith("\n"):
                raise ValueError(f"{name} must end with a newline so lines stay separate, got {tpl!r}")
            try:
                fields = [f for _, f, _, _ in string.Formatter().parse(tpl) if f is not None]
            except ValueError as e:  # `{price` unclosed, a lone `}`: named by its key, as every template error
                raise ValueError(f"{name} {tpl!r} is not a format string: {e} (write a literal brace as {{{{ or "
                                 f"}}}})") from None
            bad = [f for f in fields if f not in _TEMPLATE_FIELDS]
            if bad:
                raise ValueError(f"{name} uses unknown fields {bad}; allowed: {_TEMPLATE_FIELDS}")
            try:  # a format spec the values cannot take ({size:d} of a float) fails here, not on every tick
                tpl.format(**_template_values(_SAMPLE_FIELDS))
            except (ValueError, TypeError, IndexError, KeyError) as e:
                which = _field_refusal(tpl, _SAMPLE_FIELDS) or (
                    f"{type(e).__name__}: {e} (price, size, bid, ask, sizes and mid are floats, ts an int of ns, "
                    f"gap_ms, stream, kind and side text)")
                raise ValueError(f"{name} {tpl!r} cannot write a tick: {which}") from None
        if self.gap_decimals < 0:
            raise ValueError(f"gap_decimals must be >= 0, got {self.gap_decimals}")


@dataclass
class TextState:
    last_ts: int | None = None
    ticks: int = field(default=0)


# Ticks whose tokens a data directory records (TextCodec.encoding_record): a stream's first line and later ones,
# both kinds, a missing field, sub-millisecond gaps and floats a formatting change would write otherwise (exponents)
_RECORDED_TICKS = (
    Tick("X", 1_700_000_000_000_000_000, TRADE, price=100.5, size=2.0, side="buy"),
    Tick("X", 1_700_000_000_001_234_567, QUOTE, bid=100.25, ask=100.75),
    Tick("X", 1_700_000_000_001_300_000, QUOTE, bid=0.00009, ask=0.00011, bid_size=3.0, ask_size=4.0),
    Tick("X", 1_700_000_002_000_000_000, TRADE, price=1.23e-05, size=1e16, side="sell"),
    Tick("X", 1_700_000_002_000_000_000, TRADE, price=12345.678, size=0.5),
)


# Text a piece is encoded after when the tokenizer treats the start of a text apart (below): every tick line ends with
# one, so a line, a question or a label in a prompt follows text like it, never the start of the text.
CONTINUATION_ANCHOR = "\n"


class TextCodec(Codec):
    """One line of text per tick, each tokenized as its own piece with a Hugging Face tokenizer.

    `tokenizer` is a `transformers` tokenizer or a `tokenizers.Tokenizer`; special
    tokens are never added, so stream tokens = concatenation of per-line tokens
    and a session's prefix never changes when more ticks arrive. `end_tokens`: ids that end a
    generated answer besides the tokenizer's own eos (a checkpoint's config may list more).

    SentencePiece-style tokenizers (Llama 2, Mistral: a Metaspace pre-tokenizer, or the legacy Prepend("▁")
    normalizer) write a space before the start of a text, so a line tokenized on its own would begin with a
    "▁" that the same line inside a prompt does not have. `encoding` says how pieces are tokenized, chosen once
    here from sample pieces: ``plain`` (each on its own, e.g. byte-level BPE, where that already equals the
    pieces' tokens in the whole text) or ``continuation`` (a stream's first line as the start of the text,
    every other line, question and label after `CONTINUATION_ANCHOR`, whose tokens are dropped), so the
    concatenation equals the tokenizer's tokens of the concatenated text.
    """

    def __init__(self, tokenizer: Any, config: TextCodecConfig | None = None, end_tokens: Iterable[int] = ()) -> None:
        self.tokenizer = tokenizer
        self.config = config or TextCodecConfig()
        eos = getattr(tokenizer, "eos_token_id", None)
        self.end_tokens = frozenset(end_tokens) | (frozenset() if eos is None else {eos})
        self.questions: Mapping[str, Question] = MappingProxyType({})  # questions are free text
        # Count added tokens too: they are valid ids the model must embed.
        if hasattr(tokenizer, "get_vocab_size"):  # tokenizers.Tokenizer
            self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        else:  # transformers tokenizer
            self.vocab_size = len(tokenizer)
        self._anchor = self._raw_tokens(CONTINUATION_ANCHOR)
        self.encoding = self._choose_encoding()
        # decoded once: a generate answer's text is decoded again at every token it adds (its stop strings)
        self._anchor_text = self.tokenizer.decode(self._anchor) if self.encoding == "continuation" else ""

    def _choose_encoding(self) -> str:
        """``continuation`` when a sample piece's tokens after the anchor are not its tokens on its own and the
        anchor's tokens stay apart from every sample's; else ``plain``, the tokenizer's own tokens of each piece."""
        samples = [self.render_values(_SAMPLE_FIELDS, self.config.trade_template), "\nWill the price rise? Answer:",
                   " yes", "yes", self.render_values(_SAMPLE_FIELDS, self.config.quote_template)]
        after_anchor = [self._raw_tokens(CONTINUATION_ANCHOR + text) for text in samples]
        if all(tokens[len(self._anchor):] == self._raw_tokens(text) for text, tokens in zip(samples, after_anchor)):
            return "plain"
        if self._anchor and all(tokens[: len(self._anchor)] == self._anchor for tokens in after_anchor):
            return "continuation"
        return "plain"  # the anchor merges into what follows it: no continuation to take its tokens off

    def fingerprint(self) -> str:
        """A digest of the tokenizer itself (vocabulary, merges, normalisation): tokenizers of one size differ."""
        backend = getattr(self.tokenizer, "backend_tokenizer", self.tokenizer)
        text = backend.to_str() if hasattr(backend, "to_str") else json.dumps(sorted(self.tokenizer.get_vocab().items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def encoding_record(self) -> str:
        """How this code writes and tokenizes ticks, beyond the tokenizer's files and the templates: the encoding
        chosen at load and a digest of the tokens a few fixed ticks encode to (number formatting, gaps, a first
        line and later ones). A data directory records it: code that encodes its logged ticks otherwise is told."""
        state = self.new_state()
        tokens = [self.encode(tick, state) for tick in _RECORDED_TICKS]
        return f"{self.encoding}:{hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:16]}"

    def new_state(self) -> TextState:
        return TextState()

    def render(self, tick: Tick, state: TextState) -> str:
        gap_ms = 0.0 if state.last_ts is None else (tick.ts - state.last_ts) / 1e6
        values = {k: getattr(tick, k) for k in _TEMPLATE_FIELDS if k not in ("mid", "gap_ms")}
        values["mid"] = tick.mid
        values["gap_ms"] = f"{gap_ms:.{self.config.gap_decimals}f}"
        tpl = self.config.quote_template if tick.kind == QUOTE else self.config.trade_template
        return self.render_values(values, tpl)

    @staticmethod
    def render_values(values: Mapping[str, Any], template: str) -> str:
        """``template`` with ``values``: floats positional without a format spec, a missing one (None) as `?`."""
        return template.format(**_template_values(values))

    def _raw_tokens(self, text: str) -> list[int]:
        out = self.tokenizer.encode(text, add_special_tokens=False)
        return list(out.ids) if hasattr(out, "ids") else list(out)

    def tokenize(self, text: str, at_start: bool = False) -> list[int]:
        """Tokens of ``text`` as they are inside a prompt: at its start with ``at_start``, else after a line.
        A piece whose tokens after the anchor do not begin with the anchor's own (the two merged) is tokenized
        on its own."""
        if self.encoding == "plain" or at_start:
            return self._raw_tokens(text)
        tokens = self._raw_tokens(CONTINUATION_ANCHOR + text)
        if tokens[: len(self._anchor)] != self._anchor:
            return self._raw_tokens(text)
        return tokens[len(self._anchor):]

    def encode(self, tick: Tick, state: TextState) -> list[int]:
        line = self.render(tick, state)
        at_start = state.ticks == 0
        state.last_ts = tick.ts
        state.ticks += 1
        return self.tokenize(line, at_start)

    def question_tokens(self, text: str) -> list[int]:
        """Tokens of a question's (or a label's) text, as they are after a stream's ticks (or the question)."""
        return self.tokenize(text)

    def decode(self, tokens: Sequence[int]) -> str:
        """Text of generated tokens as they read after a prompt (with ``continuation``, a leading space a
        tokenizer's decoder drops at the start of a text is kept)."""
        if self.encoding == "plain":
            return self.tokenizer.decode(list(tokens))
        text = self.tokenizer.decode(self._anchor + list(tokens))
        if text.startswith(self._anchor_text):
            return text[len(self._anchor_text):]
        return self.tokenizer.decode(list(tokens))
