"""The answer kinds a query can ask for, the keys each one owns, and the checks of those keys.

`choice` and `expectation` are answered by a distribution over labels (`LABELLED_KINDS`: the kinds scored, and the
ways a codec's named question is asked), `generate` by decoded text, `surprise` by the latest tick's own score.
Each option key belongs to one kind (`KIND_OPTIONS`) and is refused by name on the others; `score` and `gate` apply
to several. QuerySpec (queries/spec.py) hands the options as given to `checked_kind_options` and stores what it
returns: the options checked, with their defaults filled in.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from types import MappingProxyType
from typing import Any

from engine.yaml_files import yaml_kind
from queries.limits import excerpt
from queries.spec_errors import fail
from queries.spec_values import checked_int, finite_float, parsed_option, str_list, wire_text
from queries.speculation import Gate, Lookup

KINDS = ("choice", "expectation", "generate", "surprise")
# the kinds answered by a distribution over labels: the ones scored, and the ways a codec's named question is asked
LABELLED_KINDS = ("choice", "expectation")
MAX_CHOICES = 256
MAX_GEN_TOKENS = 256
# How a choice's or value's label is scored when it spans several tokens: `sequence`, the probability of its whole
# token sequence (a label of more tokens is less likely for that alone); `per_token`, its mean log-probability per
# token (a length-normalised score, as evaluation harnesses do with labels of unequal length).
SCORES = ("sequence", "per_token")
KIND_OPTIONS = {
    "choice": ("choices",),
    "expectation": ("values",),
    "generate": ("max_tokens", "stop", "temperature", "seed", "preposition", "lookup"),
    "surprise": (),
}
# every key checked_kind_options reads: the kinds' own, then those several kinds take
OPTION_KEYS = (*(key for keys in KIND_OPTIONS.values() for key in keys), "score", "gate")


def checked_kind_options(kind: str, given: Mapping[str, Any], names_question: bool) -> dict[str, Any]:
    """The options of a query of ``kind`` checked in a fixed order, the first problem raised: ``given`` holds each of
    OPTION_KEYS as the spec was given it (None: not given); ``names_question``, whether its question names a codec
    question (which supplies labels). Returns the options the spec stores normalised, by attribute name."""
    checked: dict[str, Any] = {}
    for owner, options in KIND_OPTIONS.items():
        for opt in options:
            if owner != kind and given[opt] is not None:
                raise fail(opt, f"{opt} applies only to {owner} queries, not {kind}")
    if kind == "choice":
        checked["choices"] = _checked_choices(given["choices"], names_question)
    elif kind == "expectation":
        checked["values"] = _checked_values(given["values"], names_question)
    elif kind == "generate":
        checked.update(_checked_generate(given))
    score, gate = given["score"], given["gate"]
    if score is not None:
        if kind not in LABELLED_KINDS:
            raise fail("score", f"score applies only to {' and '.join(LABELLED_KINDS)} queries, not {kind}")
        if score not in SCORES:
            raise fail("score", f"score must be one of {', '.join(SCORES)}, got {excerpt(score)}")
    if gate is not None:
        if kind == "surprise":
            raise fail("gate", "gate does not apply to surprise queries: their answer is always the cached one")
        checked["gate"] = parsed_option("gate", Gate, gate)
    return checked


def _checked_generate(given: Mapping[str, Any]) -> dict[str, Any]:
    """A generate query's options with their defaults: 16 tokens, no stop strings, greedy, no preposition, lookup."""
    checked: dict[str, Any] = {}
    max_tokens, temperature, preposition = given["max_tokens"], given["temperature"], given["preposition"]
    checked["max_tokens"] = checked_int("max_tokens", 16 if max_tokens is None else max_tokens, 1, MAX_GEN_TOKENS)
    checked["stop"] = str_list("stop", () if given["stop"] is None else given["stop"])
    temp = finite_float("temperature", 0.0 if temperature is None else temperature)
    if temp < 0:
        raise fail("temperature", f"temperature must be >= 0 (0 = greedy), got {temp}")
    checked["temperature"] = temp
    if given["seed"] is not None:
        checked_int("seed", given["seed"], -(2**63), 2**64 - 1)
    preposition = False if preposition is None else preposition
    if not isinstance(preposition, bool):
        raise fail("preposition", f"preposition must be true or false, got {excerpt(preposition)}")
    checked["preposition"] = preposition
    checked["lookup"] = parsed_option("lookup", Lookup, True if given["lookup"] is None else given["lookup"])
    return checked


def _checked_choices(choices: Any, names_question: bool) -> tuple[str, ...] | None:
    if choices is None:
        if not names_question:
            raise fail("choices", "choice query with a free-text question or question_tokens needs \"choices\"")
        return None
    choices = str_list("choices", choices)
    _check_label_count("choices", choices, "labels", "one choice ({}) is always the answer, with probability 1: "
                                                     "give at least two")
    dup = next((c for i, c in enumerate(choices) if c in choices[:i]), None)
    if dup is not None:
        raise fail("choices", f"choice {excerpt(dup)} appears twice", choices.index(dup, choices.index(dup) + 1))
    return choices


def _checked_values(values: Any, names_question: bool) -> Mapping[str, float] | None:
    if values is None:
        if not names_question:
            raise fail("values", "expectation query with a free-text question or question_tokens needs \"values\"")
        return None
    if not isinstance(values, Mapping):
        raise fail("values", f"values must be a mapping of label -> number, got {yaml_kind(values)}")
    _check_label_count("values", values, "values", "one label ({}) is always the answer: its value is the "
                                                   "expectation whatever the model says; give at least two")
    for label in values:
        if not isinstance(label, str) or not label:
            raise fail("values", f"value labels must be non-empty strings, got {excerpt(label)}", label)
        wire_text("values", label, label)
    checked = {label: finite_float(f"values[{excerpt(label)}]", v, label) for label, v in values.items()}
    return MappingProxyType(checked)


def _check_label_count(key: str, labels: Collection[str], given_by_codec: str, lone: str) -> None:
    """Refuses a query's ``key`` (its choices or values) when it holds no label (the codec question gives its
    ``given_by_codec`` when the key is left out), one (``lone`` says why, its {} the label) or too many."""
    if not labels:
        raise fail(key, f"{key} must not be empty (omit it to use a codec question's {given_by_codec})")
    if len(labels) == 1:
        raise fail(key, lone.format(excerpt(next(iter(labels)))))
    if len(labels) > MAX_CHOICES:
        raise fail(key, f"{len(labels)} {key}, over the limit of {MAX_CHOICES}")
