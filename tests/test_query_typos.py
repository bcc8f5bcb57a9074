"""A researcher's slips in a queries file, each refused with a line that says what was read and what to write
(review381 #4, #5, #7, #8, #9): YAML 1.1's octal and hex ints, an interval of bare nanoseconds, names a shell or a
path reads otherwise, `kind` and `question` typos, free text on a tick model, and a duplicate key named by its query."""

from __future__ import annotations

import json

import pytest

from connectors.questions import DEFAULT_QUESTIONS
from queries.registry import Registry
from queries.spec import QuerySpecError
from queries.yaml_loader import load_queries

QUESTIONS = {q.name: q for q in DEFAULT_QUESTIONS}


def refusal(body: str) -> str:
    with pytest.raises(QuerySpecError) as refused:
        load_queries(f"queries:\n  - {{name: a, streams: [X], {body}}}\n", "q.yaml", QUESTIONS)
    return str(refused.value)


@pytest.mark.parametrize(("trigger", "said"), [
    ("{ticks: 010}", "ticks: 010 is read by YAML 1.1 as the octal number 8, not 10: write 10"),
    ("{ticks: 0x10}", "ticks: 0x10 is read by YAML 1.1 as the hexadecimal number 16: write it in decimal, 16"),
    ("{ticks: 0b101}", "ticks: 0b101 is read by YAML 1.1 as the binary number 5"),
    ("{interval: 0100000000}", "interval: 0100000000 is read by YAML 1.1 as the octal number 16777216, not 100000000"),
    ("{move_bps: 07}", "move_bps: 07 is read by YAML 1.1 as the octal number 7, not 7"),
])
def test_an_octal_or_hex_looking_number_is_refused_with_what_yaml_made_of_it(trigger: str, said: str) -> None:
    error = refusal(f"kind: choice, question: direction_5, trigger: {trigger}")
    assert error.startswith('q.yaml:2: query "a": ') and said in error, error
    assert "(numbers written with a leading 0, 0x, 0b or a colon are refused)" in error


def test_every_int_key_is_checked_and_plain_decimals_pass() -> None:
    assert "max_tokens: 016 is read by YAML 1.1 as the octal number 14, not 16" in refusal(
        "kind: generate, question: hi, max_tokens: 016")
    assert "seed: 0x1F" in refusal("kind: generate, question: hi, seed: 0x1F")
    spec, = load_queries("queries:\n  - {name: a, streams: [X], kind: generate, question: hi, max_tokens: 10, "
                         "seed: 0, trigger: {ticks: 1_000}}\n", "q.yaml")
    assert (spec.max_tokens, spec.seed, spec.trigger.every) == (10, 0, 1000)
    spec, = load_queries("queries:\n  - {name: a, streams: [X], kind: choice, question: direction_5, "
                         "choices: ['010', up]}\n", "q.yaml")  # (a label is text: taken as written)
    assert spec.choices == ("010", "up")


@pytest.mark.parametrize("period", ["10", "999999"])
def test_a_bare_int_interval_under_a_millisecond_is_refused_with_the_unit_to_write(period: str) -> None:
    error = refusal(f"kind: choice, question: direction_5, trigger: {{interval: {period}}}")
    assert f"interval {period} is {period} nanoseconds (a bare int is ns), so the query would answer at every tick " \
           f"group: give the unit, e.g. {{interval: {period}s}}" in error, error


def test_an_interval_of_a_millisecond_or_more_in_ns_or_with_a_unit_is_taken() -> None:
    for period, ns in (("1000000", 10**6), ("10s", 10 * 10**9), ("10ns", 10), ("1000000000", 10**9)):
        spec, = load_queries(f"queries:\n  - {{name: a, streams: [X], kind: surprise, trigger: {{interval: {period}}}}}"
                             f"\n", "q.yaml")
        assert spec.trigger.every == ns


@pytest.mark.parametrize("name", ['"."', '".."', '"-h"', '"--config"'])
def test_names_read_as_paths_or_options_are_refused(name: str) -> None:
    text = f"queries:\n  - {{name: {name}, streams: [X], kind: choice, question: direction_5}}\n"
    with pytest.raises(QuerySpecError) as refused:
        Registry().register(text, "q.yaml")
    assert str(refused.value).startswith(f'q.yaml:2: query {json.dumps(json.loads(name))}: name ')
    assert 'a name may not be "." or ".." (its topics would read as paths) nor start with "-"' in str(refused.value)
    restored = Registry()  # one a data directory kept from before the rule still comes back (and can be removed)
    assert [s.name for s in restored.register(text, "queries.yaml", restoring=True)] == [json.loads(name)]
    restored.unregister(json.loads(name))
    for fine in ("a.b", "a-", "x_", "v1.2"):
        Registry().register(f"queries:\n  - {{name: '{fine}', streams: [X], kind: choice, question: direction_5}}\n")


@pytest.mark.parametrize(("body", "said"), [
    ("kind: Choice, question: direction_5", 'got "Choice"; did you mean choice?'),
    ("kind: choise, question: direction_5", 'got "choise"; did you mean choice?'),
    ("kind: Expectation, question: move_bps_50", 'got "Expectation"; did you mean expectation?'),
    ("kind: choice, question: Direction_5", "a tick model answers only those; did you mean direction_5?"),
    ("kind: choice, question: direction5", "a tick model answers only those; did you mean direction_5?"),
    ("kind: choice, question: direction_50", "a tick model answers only those; did you mean direction_5?"),
])
def test_kind_and_question_typos_get_a_did_you_mean(body: str, said: str) -> None:
    error = refusal(body)
    assert said in error, error


def test_a_question_nothing_is_close_to_gets_no_guess() -> None:
    error = refusal("kind: choice, question: spread_bps")
    assert "is not one of the codec's questions" in error and "did you mean" not in error


def test_free_text_on_a_tick_model_says_first_that_it_cannot_be_read() -> None:
    """The first refusal asked for `choices`; a user who added them was refused again for the free text itself."""
    for body in ('kind: choice, question: "Will it rise?"', 'kind: choice, question: "Will it rise?", '
                                                            'choices: [yes, no]'):
        error = refusal(body)
        assert 'question "Will it rise?" is free text, and a tick model cannot read free text: it answers its ' \
               "codec's questions by name (direction_5, direction_20" in error, error
    with pytest.raises(QuerySpecError, match='needs "choices"'):  # a text model (no named questions): choices
        load_queries('queries:\n  - {name: a, streams: [X], kind: choice, question: "Will it rise?"}\n', "q", {})


def test_a_duplicate_key_names_its_query() -> None:
    text = "queries:\n  - name: a\n    streams: [X]\n    question: direction_5\n    question: direction_20\n" \
           "    kind: choice\n"
    with pytest.raises(QuerySpecError) as refused:
        load_queries(text, "dupkey.yaml")
    assert str(refused.value) == 'dupkey.yaml:5: query "a": duplicate key "question" (first at line 4)'
    with pytest.raises(QuerySpecError, match=r'^q:3: query #1: duplicate key "kind"'):  # no name: its number
        load_queries("queries:\n  - kind: choice\n    kind: choice\n", "q")
