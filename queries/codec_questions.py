"""A query checked against the serving model's codec questions: the named questions (`direction_20`) that supply
a choice or expectation query's labels and values.

A one-word question names a codec question; the loader (queries/yaml_loader.py) and the registry check here that
it exists and that the labels a query gives are its own, so a typo is refused at registration with the labels
that would do. The spec itself (queries/spec.py) knows no model: this check runs only once a model is bound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from queries.answer_kinds import LABELLED_KINDS
from engine.quoting import quoted
from queries.limits import excerpt
from queries.spec import QuerySpec
from queries.spec_errors import QuerySpecError
from queries.spec_values import did_you_mean


def free_text_refused(question: str, questions: Mapping[str, NamedQuestion]) -> str:
    """Why a tick model (one whose codec names its questions) refuses a free-text ``question``, said first, before
    a missing `choices` would be (review381 #8: a user who added them got this refusal second)."""
    return (f"question {excerpt(question)} is free text, and a tick model cannot read free text: it answers its "
            f"codec's questions by name ({', '.join(questions)}){did_you_mean(question, questions)}")


class NamedQuestion(Protocol):
    """What the loader needs of a codec question (connectors' `Question` and `QuestionSpec` both fit)."""

    @property
    def labels(self) -> Sequence[str]: ...

    @property
    def values(self) -> Any: ...  # truthy when the question carries a value per label


def check_questions(spec: QuerySpec, questions: Mapping[str, NamedQuestion]) -> None:
    """Checks a spec against the model's codec questions: names exist, choices and value labels are theirs."""
    if not spec.names_question or spec.kind not in LABELLED_KINDS:
        return
    known = questions.get(spec.question)
    if known is None:
        if spec.labels is None:  # with its own labels a one-word question is free text, not a codec name
            # a codec with named questions is a tick model's, which reads no free text; a text model's has none
            hint = ("a tick model answers only those" if questions else
                    f"give {quoted('choices' if spec.kind == 'choice' else 'values')} to ask it as text")
            names = ", ".join(questions) or "none: this model asks free-text questions"
            raise QuerySpecError(f"question {excerpt(spec.question)} is not one of the codec's questions ({names}); "
                                 f"{hint}{did_you_mean(spec.question, questions)}", query=spec.name, key="question")
        return
    if spec.kind == "expectation" and spec.values is None and not known.values:
        raise QuerySpecError(f"codec question {excerpt(spec.question)} has no values per label; an expectation "
                             f"query on it needs \"values\"", query=spec.name, key="question")
    for label in spec.labels or ():
        if label not in known.labels:
            key = "choices" if spec.kind == "choice" else "values"
            item = spec.choices.index(label) if spec.choices is not None else label
            raise QuerySpecError(f"{excerpt(label)} is not an answer of codec question {excerpt(spec.question)} "
                                 f"(labels: {', '.join(known.labels)})", query=spec.name, key=key, item=item)
