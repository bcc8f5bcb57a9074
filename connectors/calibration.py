"""Per-question answer calibration of a tick model: p = softmax(z / temperature + bias) over a named
question's answer logits z (queries.probe_answers.calibrated_logits applies it, everywhere an answer is read).

It ships as `calibration.json` beside `codec.json`, not inside it, so each file has one owner:
codec.json is the tokenization contract (the same for a base model and every model fine-tuned from it,
pinned by a token hash), written by the codec; calibration is a function of one set of *weights*
(fitted on their validation logits by engine/service/calibrate.py) and must be refitted, or reset,
whenever the weights change. Keeping it apart means a fine-tune can never inherit its base model's
calibration by copying codec.json, and old codec.json files stay byte for byte what they were.
A checkpoint without calibration.json, or a question it does not name, answers uncalibrated
(temperature 1, bias 0: exactly softmax(z)).

    {"format": "flashtick.calibration/1", "source": "what it was fitted on",
     "questions": {"direction_5": {"temperature": 1.3, "bias": [0.1, -0.2, 0.1],
                                    "points": 9000, "nll_raw": 0.62, "nll_calibrated": 0.58}, ...}}
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engine.quoting import quoted
from engine.text_files import ENCODING, read_text

CALIBRATION_FILE = "calibration.json"
CALIBRATION_FORMAT = "flashtick.calibration/1"
_TOP_KEYS = ("format", "source", "questions")


_FIT_RECORD = ("nll_raw", "nll_calibrated", "heldout_nll_raw", "heldout_nll_calibrated", "heldout_brier_raw",
               "heldout_brier_calibrated")  # how the fit went, for the record: finite numbers or absent


@dataclass(frozen=True)
class AnswerCalibration:
    """One question's calibration: temperature T > 0 and one logit bias per answer (() = all zeros).
    `points`, `nll_raw`, `nll_calibrated` record the fit (validation answer points, mean NLL in nats)."""

    temperature: float = 1.0
    bias: tuple[float, ...] = ()
    points: int = 0
    nll_raw: float | None = None  # on the points it was fitted to (in sample: always improves)
    nll_calibrated: float | None = None
    # cross-fitted: each half of the points scored by the fit on the other half, raw and calibrated (a fit kept
    # only when it is better on both; engine/service/calibrate.py)
    heldout_nll_raw: float | None = None
    heldout_nll_calibrated: float | None = None
    heldout_brier_raw: float | None = None
    heldout_brier_calibrated: float | None = None

    def __post_init__(self) -> None:
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise ValueError(f"temperature must be a finite number > 0, got {quoted(t)}")
        if not all(isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in self.bias):
            raise ValueError(f"bias must be finite numbers, got {quoted(list(self.bias))}")
        if isinstance(self.points, bool) or not isinstance(self.points, int) or self.points < 0:
            raise ValueError(f"points must be an integer >= 0, got {quoted(self.points)}")
        for name in _FIT_RECORD:
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise ValueError(f"{name} must be a finite number or absent, got {quoted(v)}")

    @property
    def identity(self) -> bool:
        return self.temperature == 1.0 and not any(self.bias)

    def to_dict(self) -> dict:
        d = {"temperature": self.temperature, "bias": list(self.bias), "points": self.points}
        return d | {k: getattr(self, k) for k in _FIT_RECORD if getattr(self, k) is not None}

    @classmethod
    def from_dict(cls, d: Mapping) -> AnswerCalibration:
        if not isinstance(d, Mapping):
            raise ValueError(f"must be a mapping, got {type(d).__name__}")
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown keys {', '.join(map(quoted, sorted(unknown)))} "
                             f"(known: {', '.join(sorted(cls.__dataclass_fields__))})")
        bias = d.get("bias", [])
        if not isinstance(bias, list):
            raise ValueError(f"bias must be a list of numbers, got {quoted(bias)}")
        return cls(**{k: v for k, v in d.items() if k != "bias"}, bias=tuple(bias))


IDENTITY = AnswerCalibration()


@dataclass(frozen=True)
class Calibration:
    """A checkpoint's calibration: per question name, and a line saying what it was fitted on."""

    questions: Mapping[str, AnswerCalibration] = field(default_factory=dict)
    source: str = "none (uncalibrated: temperature 1, bias 0)"

    def get(self, name: str) -> AnswerCalibration:
        return self.questions.get(name, IDENTITY)

    @property
    def identity(self) -> bool:
        return all(c.identity for c in self.questions.values())

    def check(self, answers: Mapping[str, int]) -> None:
        """Every calibrated question exists (question name -> number of answers) and has a bias per answer."""
        for name, cal in self.questions.items():
            if name not in answers:
                raise ValueError(f"{CALIBRATION_FILE}: questions.{name}: not a question of this codec "
                                 f"(questions: {', '.join(sorted(answers))})")
            if cal.bias and len(cal.bias) != answers[name]:
                raise ValueError(f"{CALIBRATION_FILE}: questions.{name}.bias: {answers[name]} answers need "
                                 f"{answers[name]} biases, got {len(cal.bias)}")

    def to_json(self) -> str:
        return json.dumps({"format": CALIBRATION_FORMAT, "source": self.source,
                           "questions": {n: c.to_dict() for n, c in self.questions.items()}}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> Calibration:
        d = json.loads(text)
        if not isinstance(d, dict) or d.get("format") != CALIBRATION_FORMAT:
            got = d.get("format") if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"{CALIBRATION_FILE}: format must be {quoted(CALIBRATION_FORMAT)}, got {quoted(got)}")
        unknown = set(d) - set(_TOP_KEYS)
        if unknown:
            raise ValueError(f"{CALIBRATION_FILE}: unknown keys {', '.join(map(quoted, sorted(unknown)))} "
                             f"(known: {', '.join(_TOP_KEYS)})")
        questions = d.get("questions", {})
        if not isinstance(questions, dict):
            raise ValueError(f"{CALIBRATION_FILE}: questions must be a mapping of question name -> calibration")
        parsed = {}
        for name, entry in questions.items():
            try:
                parsed[name] = AnswerCalibration.from_dict(entry)
            except (TypeError, ValueError) as e:
                raise ValueError(f"{CALIBRATION_FILE}: questions.{name}: {e}") from None
        return cls(parsed, str(d.get("source", Calibration.source)))


def read_calibration(model_dir: Path) -> Calibration:
    """The calibration a checkpoint directory ships, or none (identity) when it has no calibration.json."""
    path = Path(model_dir) / CALIBRATION_FILE
    if not path.is_file():
        return Calibration()
    try:
        return Calibration.from_json(read_text(path))
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def write_calibration(model_dir: Path, calibration: Calibration) -> None:
    """Write a checkpoint's calibration.json (identity included: it says the weights are uncalibrated)."""
    (Path(model_dir) / CALIBRATION_FILE).write_text(calibration.to_json() + "\n", encoding=ENCODING)
