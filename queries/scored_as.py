"""`scored_as`: which realised label a text model's choice query means, so its answers are scored like a tick
model's named question (direction_5, ...) wherever scores exist (backtest, live `scores`, evaluate).

A text model reads free text, so its choices are words (`[" down", " flat", " up"]`); the realised labels are the
named question's (`down`, `flat`, `up`, connectors/labels.py). `scored_as` joins the two, one choice per label:

    scored_as: direction_5                                  # the choices map in order to the labels
    scored_as: {question: direction_5, choices: {" falls": down, " same": flat, " rises": up}}

The spec checks the form here (it knows no model); `mapping` checks it against the serving codec's scorable
questions (queries/probe_answers.py asks it when the query is compiled), refusing a map that misses a label or a
choice by name. One choice per label, so a realised label is one choice: an answer's `probs` are scored as given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from engine.quoting import quoted
from engine.yaml_files import yaml_kind
from queries.limits import excerpt
from queries.spec_errors import fail

_KEYS = ("question", "choices")


@dataclass(frozen=True)
class ScoredAs:
    """A named question and, when given, each choice's label in it (None: the choices map in order)."""

    question: str
    labels: Mapping[str, str] | None = None  # choice -> the question's label

    @classmethod
    def parse(cls, raw: Any) -> ScoredAs:
        """From YAML or the wire: a question name, or {question, choices: {choice: label}}."""
        if isinstance(raw, ScoredAs):
            return raw
        if isinstance(raw, str):
            return cls(_name(raw))
        if not isinstance(raw, Mapping):
            raise fail("scored_as", f"scored_as must be a question name (direction_5) or a mapping {{question, "
                                    f"choices: {{choice: label}}}}, got {yaml_kind(raw)}")
        unknown = [key for key in raw if key not in _KEYS]
        if unknown:
            raise fail("scored_as", f"scored_as: unknown key {excerpt(unknown[0])} (allowed: {', '.join(_KEYS)})")
        if "question" not in raw:
            raise fail("scored_as", "scored_as needs \"question\": the named question its choices mean (direction_5)")
        labels = raw.get("choices")
        if labels is None:
            return cls(_name(raw["question"]))
        if not isinstance(labels, Mapping) or not labels:
            raise fail("scored_as", f"scored_as.choices must map each choice to a label of the question, got "
                                    f"{yaml_kind(labels)}")
        for choice, label in labels.items():
            if not isinstance(label, str) or not label:
                raise fail("scored_as", f"scored_as.choices[{excerpt(choice)}] must be a label (a string), got "
                                        f"{excerpt(label)}")
        return cls(_name(raw["question"]), MappingProxyType(dict(labels)))

    def to_obj(self) -> str | dict[str, Any]:
        """The YAML/wire form `parse` reads back equal."""
        if self.labels is None:
            return self.question
        return {"question": self.question, "choices": dict(self.labels)}

    def check_choices(self, choices: Sequence[str]) -> None:
        """The explicit map names exactly the query's choices (what the question's labels are is the model's)."""
        if self.labels is None:
            return
        stray = next((c for c in self.labels if c not in choices), None)
        if stray is not None:
            raise fail("scored_as", f"scored_as.choices maps {excerpt(stray)}, which is not one of the choices "
                                    f"({', '.join(map(excerpt, choices))})")
        unmapped = next((c for c in choices if c not in self.labels), None)
        if unmapped is not None:
            raise fail("scored_as", f"choice {excerpt(unmapped)} has no label in scored_as.choices: map every choice")

    def mapping(self, choices: Sequence[str], question_labels: Sequence[str]) -> dict[str, str]:
        """Choice -> label, checked to be one choice per label of the question (``question_labels``): a ValueError
        names the label left uncovered, the one mapped twice, or the label the question does not have."""
        named = quoted(self.question)
        listed = ", ".join(question_labels)
        if self.labels is None:
            if len(choices) != len(question_labels):
                raise ValueError(f"scored_as {named}: its {len(question_labels)} labels ({listed}) map in order to "
                                 f"the choices, and there are {len(choices)}; give one choice per label, or map "
                                 f"them (scored_as: {{question: {self.question}, choices: {{choice: label}}}})")
            return dict(zip(choices, question_labels))
        by_label: dict[str, str] = {}
        for choice, label in self.labels.items():
            if label not in question_labels:
                raise ValueError(f"scored_as maps {quoted(choice)} to {quoted(label)}, which is not a label of "
                                 f"{named} (labels: {listed})")
            if label in by_label:
                raise ValueError(f"scored_as maps both {quoted(by_label[label])} and {quoted(choice)} to "
                                 f"{quoted(label)}: one choice per label of {named}")
            by_label[label] = choice
        missing = [label for label in question_labels if label not in by_label]
        if missing:
            raise ValueError(f"scored_as leaves {', '.join(map(quoted, missing))} of {named} (labels: {listed}) "
                             f"without a choice: an answer is scored only where every label is one")
        return dict(self.labels)


def _name(raw: Any) -> str:
    if not isinstance(raw, str) or not raw.isidentifier():
        raise fail("scored_as", f"scored_as must name a question (direction_5, direction_20, volatility_50, "
                                f"move_bps_50), got {excerpt(raw)}")
    return raw
