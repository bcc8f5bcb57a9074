"""The codec seam: tick -> tokens, with per-stream state. Two implementations.

* `BinnedCodec` (tick-native, used by the built-in model): a fixed vocabulary,
  exactly `TOKENS_PER_TICK` tokens per tick, each describing the tick relative
  to the stream's previous one, plus question and answer tokens.
* `TextCodec` (any Hugging Face LM, connectors/text_codec.py): one text line per tick, tokenized line by
  line, so a stream's tokens are the concatenation of per-tick encodings.

This module holds the seam (`Codec`) and `BinnedCodec`'s encoding rules; the binned codec's spec
(connectors/binned_spec.py), vocabulary (binned_vocab.py) and per-stream state (binned_scales.py) have files of
their own.

Both are deterministic: the same ticks through `new_state()` give the same tokens.
Both answer the query side's view of a codec (`queries.codec.QueryCodec`:
`vocab_size`, `questions`, `question_tokens`, `label_tokens`, `question_overlap`, `decode`) structurally,
since connectors/ and queries/ do not import each other; tests/test_query_codec.py checks it.

BinnedCodec slots, in order (bin i of edges e is (e[i-1], e[i]]):
  0. event  - trade: `buy` / `sell` / `trade` (side unknown);
              quote: spread vs the stream's previous quote `q_narrow` / `q_same` / `q_wide`
  1. gap    - ns since the stream's previous tick: `start` (first tick), `zero`, then `gap_edges_ns` bins
  2. move   - reference price vs the previous tick's, in bps (reference = trade price or quote mid), as the
              decimal prices say it (engine/basis_points.py: exactly 1 bp is in (0.3, 1] at any price level):
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

import json
import math
from abc import ABC, abstractmethod
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from types import MappingProxyType
from typing import Any

from connectors.binned_scales import BinnedState, log2_ratio, running_mean
# BinnedSpec and SPEC_VERSIONS are imported from here by the service, benchmarks and tests: kept importable
from connectors.binned_spec import CODEC_JSON_KEYS, SPEC_FORMAT, SPEC_VERSIONS, BinnedSpec
from connectors.binned_vocab import ZERO_BPS, TokenBin, tick_tokens
from connectors.calibration import Calibration
from connectors.questions import Question, QuestionSpec
from connectors.ticks import QUOTE, Tick
from engine.basis_points import BPS, decimal_bps
from engine.quoting import quoted

TOKENS_PER_TICK = 4
MAX_MOVE_BPS = 1e12  # a move is clipped here (a 10^8-fold price change), far past any real one
__all__ = ["TOKENS_PER_TICK", "MAX_MOVE_BPS", "SPEC_VERSIONS", "BinnedSpec", "Codec", "BinnedCodec"]


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
    scored_questions: Mapping[str, QuestionSpec] = MappingProxyType({})
    """Named questions a free-text choice query may be scored as (`scored_as`): none here, a tick model's queries
    name their question; a text codec's are DEFAULT_QUESTIONS (connectors/text_codec.py)."""
    end_tokens: frozenset[int] = frozenset()
    """Token ids that end a generated answer (the model's end of sequence); the tick codec has none."""
    question_overlap: int = 0
    """How many of a stream's last tokens a free-text question's tokens stand in for (TextCodec: a tokenizer that
    merges a question's leading newline into the line's); none for the tick codec."""

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
        """Probe tokens of a free-text question, as it follows a stream's ticks; None when this codec cannot
        tokenize free text (its questions are asked by name, see `questions`)."""

    @abstractmethod
    def label_tokens(self, text: str) -> list[int] | None:
        """Tokens of a free-text answer choice (or value label), as it follows the question; None as above."""

    @abstractmethod
    def decode(self, tokens: Sequence[int]) -> str:
        """Readable text of generated tokens."""

    def encode_stream(self, ticks: list[Tick]) -> list[int]:
        state = self.new_state()
        return [tok for t in ticks for tok in self.encode(t, state)]


class BinnedCodec(Codec):
    """Tick-native codec: 4 tokens per tick from a fixed vocabulary, plus Q/A tokens."""

    def __init__(self, spec: BinnedSpec | None = None, calibration: Calibration | None = None) -> None:
        self.spec = spec or BinnedSpec()
        s = self.spec
        # How answers are read off this checkpoint's logits; not part of the spec or codec.json (see
        # connectors/calibration.py for why it has a file of its own).
        self.calibration = calibration or Calibration()
        self.calibration.check({q.name: len(q.labels) for q in s.questions})
        table = tick_tokens(s)
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
                ratio = 0.0 if state.size_ewma is None else log2_ratio(tick.size, state.size_ewma)
                size_tok = self.token("size", str(bisect_left(s.size_log2_edges, ratio)))
                a = s.size_ewma_alpha
                state.size_ewma = (tick.size if state.size_ewma is None
                                   else state.size_ewma + a * (tick.size - state.size_ewma))
        gap = None if state.last_ts is None else tick.ts - state.last_ts
        move = 0.0 if state.last_ref is None else (ref - state.last_ref) / state.last_ref * BPS
        move = min(max(move, -MAX_MOVE_BPS), MAX_MOVE_BPS)  # finite: an inf would make the running scales NaN
        if s.version == 1:
            gap_name = self._gap_name_v1(gap)
            # in bps as the decimal prices say it: a move of exactly 1 bp is binned alike at 100.00 and at 1.0000
            move_name = self._move_name_v1(decimal_bps(move))  # (review410 #6; v2's bins are its own moves' ratios)
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
        state.gap_log2_mean = running_mean(state.gap_log2_mean, log_gap, state.gaps_seen, self.spec.scale_alpha)
        return str(bisect_left(self.spec.gap_log2_edges, rel))

    def _move_name_v1(self, move: float) -> str:
        if abs(move) < ZERO_BPS:
            return "zero"
        return ("+" if move > 0 else "-") + str(bisect_left(self.spec.move_edges_bps, abs(move)))

    def _move_name_v2(self, move: float, state: BinnedState) -> str:
        """`zero`, or sign and log2(|move| / geometric mean |non-zero move|) (0 for the first); updates the
        scales. The stream's first tick has no move and does not count towards the RMS."""
        s = self.spec
        if state.last_ref is not None:
            state.ticks_moved = state.ticks_moved + 1
            state.move_sq_mean = running_mean(state.move_sq_mean, move * move, state.ticks_moved, s.scale_alpha)
        if abs(move) < ZERO_BPS:
            return "zero"
        log_move = math.log2(abs(move))
        rel = 0.0 if state.move_log2_mean is None else log_move - state.move_log2_mean
        state.moves_seen += 1
        state.move_log2_mean = running_mean(state.move_log2_mean, log_move, state.moves_seen, s.scale_alpha)
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

    def label_tokens(self, text: str) -> None:
        """None: a tick vocabulary has no words, so answers are a named question's labels."""
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
            raise ValueError(f"not a BinnedCodec spec: format {quoted(found)}, expected {quoted(SPEC_FORMAT)}")
        if unknown := sorted(set(d) - set(CODEC_JSON_KEYS)):  # a key read by nothing is refused, not ignored
            under = [key for key in unknown if key in BinnedSpec.__dataclass_fields__]
            hint = f" ({', '.join(under)} belongs under spec: spec.{under[0]})" if under else ""
            raise ValueError(f"unknown codec.json key{'s' * (len(unknown) > 1)} {', '.join(unknown)}; known keys: "
                             f"{', '.join(CODEC_JSON_KEYS)}{hint}")
        if not isinstance(d.get("spec"), dict):
            raise ValueError("codec.json has no spec mapping (its edges, questions and version)")
        codec = cls(BinnedSpec.from_dict(d["spec"]))
        if d.get("vocab") is not None and d["vocab"] != codec.names:
            raise ValueError("codec spec vocab does not match the vocabulary this version builds from it")
        return codec
