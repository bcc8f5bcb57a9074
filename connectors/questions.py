"""Standing questions a tick model can answer, independent of how they are tokenized.

A `QuestionSpec` says what is asked and how its realised answer is measured
(see connectors/labels.py, the one place that computes it). A codec turns a
spec into a `Question` by assigning token ids to the question and its answers.

The mark price used by every question is the stream's mid (last quote), or the
last trade price while the stream has not quoted yet. "Next N ticks" counts
ticks of the same stream after the answer point, trades and quotes alike.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from connectors.calibration import IDENTITY, AnswerCalibration
from engine.quoting import quoted, quoted_choices, quoted_list, quoted_words

QUESTION_KINDS = ("direction", "regime", "volatility", "move")

# A mark change smaller than this (in bps) is float noise, not a move.
FLAT_EPS_BPS = 1e-6


@dataclass(frozen=True)
class QuestionSpec:
    """What is asked. `edges` are bucket edges in bps, bucket i is (edges[i-1], edges[i]]."""

    name: str
    kind: str
    horizon: int
    labels: tuple[str, ...]
    description: str
    edges: tuple[float, ...] = ()
    values: tuple[float, ...] = ()
    flat_bps: float = FLAT_EPS_BPS

    def __post_init__(self) -> None:
        if self.kind not in QUESTION_KINDS:
            raise ValueError(f"question {quoted(self.name)}: kind must be one of {quoted_choices(QUESTION_KINDS)}, got "
                             f"{quoted(self.kind)}")
        if self.kind != "regime" and self.horizon < 1:
            raise ValueError(f"question {quoted(self.name)}: horizon must be >= 1 ticks, got {self.horizon}")
        if len(set(self.labels)) != len(self.labels) or len(self.labels) < 2:
            raise ValueError(f"question {quoted(self.name)}: needs >= 2 distinct labels, got {self.labels}")
        if self.kind in ("volatility", "move"):
            if len(self.edges) != len(self.labels) - 1:
                raise ValueError(f"question {quoted(self.name)}: {len(self.labels)} labels need "
                                 f"{len(self.labels) - 1} edges")
            if any(b <= a for a, b in zip(self.edges, self.edges[1:])):
                raise ValueError(f"question {quoted(self.name)}: edges must increase strictly, got "
                                 f"{quoted_list(self.edges)}")
        if self.kind == "direction" and self.labels != ("down", "flat", "up"):
            raise ValueError(f'question {quoted(self.name)}: direction labels are ["down", "flat", "up"]')
        if self.kind == "regime" and self.labels != ("calm", "volatile"):
            raise ValueError(f'question {quoted(self.name)}: regime labels are ["calm", "volatile"]')
        if self.values and len(self.values) != len(self.labels):
            raise ValueError(f"question {quoted(self.name)}: values must match labels one to one")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> QuestionSpec:
        known = set(cls.__dataclass_fields__)
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"unknown question spec keys {quoted_words(sorted(unknown))} (known: "
                             f"{quoted_words(sorted(known))})")
        tupled = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        return cls(**tupled)


@dataclass(frozen=True)
class Question:
    """A question as a codec tokenizes it.

    Ask it by appending `tokens` to a stream's tick tokens (as a probe, never
    committed) and reading the next-token distribution restricted to
    `answers.values()`. `values` maps labels to bucket midpoints for
    expectation-style questions (E[move] = sum p(label) * value), else None.
    `calibration` is how the checkpoint's answer logits are read (connectors/calibration.py).
    """

    name: str
    tokens: list[int]
    answers: dict[str, int]
    values: dict[str, float] | None
    horizon: int
    description: str
    spec: QuestionSpec = field(repr=False)
    calibration: AnswerCalibration = IDENTITY

    @property
    def labels(self) -> tuple[str, ...]:
        return self.spec.labels


_MOVE_EDGES = (-8.0, -2.0, -0.5, -0.1, 0.1, 0.5, 2.0, 8.0)
# Bucket midpoints; the open-ended outer buckets get 1.5x their inner edge.
_MOVE_VALUES = (-12.0, -5.0, -1.25, -0.3, 0.0, 0.3, 1.25, 5.0, 12.0)

DEFAULT_QUESTIONS: tuple[QuestionSpec, ...] = (
    QuestionSpec(
        "direction_5", "direction", 5, ("down", "flat", "up"),
        "Sign of the mark move over the next 5 ticks (flat = unchanged mark).",
    ),
    QuestionSpec(
        "direction_20", "direction", 20, ("down", "flat", "up"),
        "Sign of the mark move over the next 20 ticks (flat = unchanged mark).",
    ),
    QuestionSpec(
        "regime", "regime", 0, ("calm", "volatile"),
        "Hidden volatility regime in force at the last tick (ground truth on synthetic data only).",
    ),
    QuestionSpec(
        "volatility_50", "volatility", 50, ("vlow", "low", "mid", "high", "vhigh"),
        "Realised volatility over the next 50 ticks: sqrt(sum of squared mark log-returns), in bps, bucketed.",
        edges=(0.3, 1.0, 3.0, 10.0),
    ),
    QuestionSpec(
        "move_bps_50", "move", 50, tuple(f"{v:+g}" if v else "0" for v in _MOVE_VALUES),
        "Mark move over the next 50 ticks in bps, bucketed; labels are bucket midpoints (expectation-style).",
        edges=_MOVE_EDGES, values=_MOVE_VALUES,
    ),
)
