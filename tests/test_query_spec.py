"""Query YAML: every rejection names file, line and reason; valid documents round-trip."""

from __future__ import annotations

import textwrap
from pathlib import Path

import msgpack
import pytest

from connectors.questions import DEFAULT_QUESTIONS
from queries.registry import Registry
from queries.spec import QuerySpec, QuerySpecError, Trigger, dump_queries
from queries.yaml_loader import load_queries
from queries.trigger import parse_duration_ns

EXAMPLES = Path(__file__).resolve().parent.parent / "queries" / "examples"
CODEC_QUESTIONS = {q.name: q for q in DEFAULT_QUESTIONS}

GOOD = """\
queries:
  - name: dir
    streams: [BTC-USD, "ETH-*"]
    question: direction_20
    kind: choice
    trigger: {ticks: 20}
  - name: gen
    streams: [a]
    question: "What next?"
    kind: generate
    trigger: {interval: 500ms}
    stop: ["\\n"]
    seed: 3
"""


def doc(query_body: str) -> str:
    """A one-query document; the query's first key is on line 2."""
    first, _, rest = query_body.partition("\n")
    return "queries:\n  - " + first + "\n" + textwrap.indent(textwrap.dedent(rest), "    ") + "\n"


def rejected(text: str, *, questions=None) -> QuerySpecError:
    with pytest.raises(QuerySpecError) as info:
        load_queries(text, "queries.yaml", questions)
    return info.value


def test_good_document_parses_with_defaults():
    d, g = load_queries(GOOD, "good.yaml")
    assert d.streams == ("BTC-USD", "ETH-*") and d.trigger == Trigger("ticks", 20) and d.topic == "{query}/{stream}/"
    assert d.choices is None and d.max_tokens is None and d.names_question
    assert g.trigger == Trigger("interval", 500_000_000)
    assert (g.max_tokens, g.stop, g.temperature, g.seed) == (16, ("\n",), 0.0, 3)
    assert not g.names_question


@pytest.mark.parametrize("body, line, reason", [
    ("""name: dir
        streams: [a]
        question: direction_20
        kind: choice
        trigerr: batch""", 6, "unknown key \"trigerr\" (allowed: name, streams"),
    ("""name: dir
        streams: [a, "ETH-[abc"]
        kind: surprise""", 3, "streams[1] \"ETH-[abc\" is not a valid glob: unclosed \"[\""),
    ("""name: dir
        streams: []
        kind: surprise""", 3, "at least one stream"),
    ("""name: dir
        streams: [a]
        kind: choice
        question: "Up?"
        choices: []""", 6, "choices must not be empty"),
    ("""name: dir
        streams: [a]
        kind: choice
        question: "Up?"
        choices: [up, down,
                  up]""", 7, "choice \"up\" appears twice"),
    ("""name: dir
        streams: [a]
        kind: choice
        question: "Up or down?\"""", 2, "needs \"choices\""),
    ("""name: dir
        streams: [a]
        kind: expectation
        question: "How far?"
        values: {a: 1, b: .nan}""", 6, "values[\"b\"] must be a finite number"),
    ("name: dir\n    streams: [a]\n    kind: choice\n    choices: [x]\n    question: " + "x" * 1001,
     6, "question is 1001 characters, over the limit of 1000"),
    ("""name: dir
        streams: [a]
        kind: choice
        choices: [x]
        question_tokens: [1, 2,
          -3]""", 7, "question_tokens[2] must be >= 0"),
    ("""name: dir
        streams: [a]
        kind: choice
        choices: [x]
        question_tokens: [""" + ", ".join(["1"] * 65) + "]", 6, "over the limit of 64"),
    ("""name: dir
        streams: [a]
        kind: choice
        choices: [x]
        question: q
        question_tokens: [1]""", 6, "exactly one of \"question\" or \"question_tokens\""),
    ("""name: dir
        streams: [a]
        kind: surprise
        question: direction_20""", 5, "question does not apply to surprise"),
    ("""name: dir
        streams: [a]
        kind: surprise
        trigger: {tick: 3}""", 5, "unknown trigger \"tick\""),
    ("""name: dir
        streams: [a]
        kind: surprise
        trigger: {ticks: 0}""", 5, "ticks trigger needs an integer N >= 1"),
    ("""name: dir
        streams: [a]
        kind: surprise
        trigger: {interval: 5 parsecs}""", 5, "interval must be a duration like \"500ms\""),
    ("""name: dir
        streams: [a]
        kind: surprise
        trigger: on_demand""", 5, "trigger on_demand does not apply to surprise queries"),
    ("""name: dir
        streams: [a]
        kind: surprise
        trigger: {interval: 1.5ns}""", 5, "not a whole number of nanoseconds"),
    ("""name: dir
        streams: [a]
        kind: surprise
        trigger: always""", 5, "unknown trigger \"always\""),
    ("""name: dir
        streams: [a]
        kind: surprise
        topic: "{query}/{stream}\"""", 5, "topic must end with \"/\""),
    ("""name: dir
        streams: [a]
        kind: surprise
        topic: "{query}/{venue}/\"""", 5, "only use the placeholders {query} and {stream}, got {venue}"),
    ("""name: dir
        streams: [a]
        kind: surprise
        topic: "{stream!r}/\"""", 5, "got {stream!r}"),
    ("""name: dir
        streams: ["*"]
        kind: surprise
        topic: "all/\"""", 5, "topic must contain {stream}"),
    ("""name: dir
        streams: [a]
        kind: choice
        question: direction_20
        max_tokens: 5""", 6, "max_tokens applies only to generate queries, not choice"),
    ("""name: dir
        streams: [a]
        kind: expectation
        question: move_bps_50
        choices: [a]""", 6, "choices applies only to choice queries, not expectation"),
    ("""name: dir
        streams: [a]
        kind: generate
        question: "Say"
        score: per_token""", 6, "score applies only to choice and expectation queries, not generate"),
    ("""name: dir
        streams: [a]
        kind: choice
        question: "Up?"
        choices: [" yes", " no"]
        score: mean""", 7, "score must be one of sequence, per_token, got \"mean\""),
    ("""name: dir
        streams: [a]
        kind: generate
        question: "Say"
        max_tokens: 257""", 6, "max_tokens must be in 1..256"),
    ("""name: dir
        streams: [a]
        kind: generate
        question: "Say"
        max_tokens: true""", 6, "max_tokens must be an integer, got true"),
    # in YAML's words, never Python's (NoneType, dict, list, None)
    ("""name: dir
        streams: ~
        kind: surprise""", 3, "streams must be a list of strings, got null"),
    ("""name: dir
        streams: {x: 1}
        kind: surprise""", 3, "streams must be a list of strings, got a mapping"),
    ("""name: dir
        streams: [a]
        kind: expectation
        question: move_bps_50
        values: [1, 2]""", 6, "values must be a mapping of label -> number, got a list"),
    ("""name: dir
        streams: [a]
        kind: choice
        question: direction_5
        trigger: {ticks: ~}""", 6, "ticks trigger needs an integer N >= 1, got null"),
    ("""name: dir
        streams: [a]
        kind: generate
        question: "Say"
        temperature: -0.1""", 6, "temperature must be >= 0"),
    ("""name: dir
        streams: [a]
        kind: guess""", 4, "kind must be one of choice, expectation, generate, surprise"),
    ("""name: "bad name!"
        streams: [a]
        kind: surprise""", 2, "name must match [A-Za-z0-9_.-]+"),
    ("""streams: [a]
        kind: surprise""", 2, "missing required key \"name\""),
    ("""name: dir
        streams: [a]
        kind: surprise
        kind: choice""", 5, "duplicate key \"kind\" (first at line 4)"),
    ("""name: dir
        streams: [a]
        kind: choice
        question: !!python/object/apply:os.system ["true"]""", 5, "could not determine a constructor"),
])
def test_rejections_name_file_line_and_reason(body, line, reason):
    err = rejected(doc(body))
    assert str(err).startswith(f"queries.yaml:{line}: query "), str(err)
    assert reason in str(err), str(err)
    assert err.line == line and err.source == "queries.yaml"


@pytest.mark.parametrize("text, line", [
    ("queries:\n  - !!python/object:argparse.Namespace {name: d, streams: [a], kind: surprise}\n", 2),
    ("queries: !!python/object/apply:os.system ['true']\n", 1),
    ("!!python/object:x\nqueries: []\n", 1),
])
def test_a_tag_on_a_collection_is_refused_not_ignored(text, line):
    """A tagged mapping or list is refused by its tag: neither ignored (the query registered as if plain) nor built."""
    err = rejected(text)
    assert err.line == line and "is not allowed: a query document holds plain mappings, lists and scalars" in str(err)
    assert "!!python/object" in str(err)


def test_query_name_is_in_the_message():
    err = rejected(doc("name: dir\n    streams: [a]\n    kind: surprise\n    trigerr: batch"))
    assert str(err).startswith("queries.yaml:5: query \"dir\": unknown key \"trigerr\"")


def test_yaml_syntax_error_carries_its_line():
    err = rejected("queries:\n  - name: dir\n    streams: [a, b\n    kind: surprise\n  - x: [\n")
    assert str(err).startswith("queries.yaml:") and "YAML syntax error" in str(err)
    assert err.line is not None and err.line >= 3
    err = rejected("queries:\n  - name: dir\n\tkind: surprise\n")
    # named as a tab, with what to do (review442 #5: "found character that cannot start any token", no character)
    assert err.line == 3 and str(err) == ("queries.yaml:3: YAML syntax error: a tab: YAML indents with spaces only; "
                                          "replace the tabs with spaces")


@pytest.mark.parametrize("text, line, reason", [
    ("", None, "empty document"),
    ("- name: a\n", 1, "put the list under \"queries:\""),
    ("queries: []\nextra: 1\n", 2, "unknown top-level key \"extra\" (allowed: queries)"),
    ("query: []\n", 1, "unknown top-level key \"query\""),
    ("queries:\n", 1, "\"queries\" must be a list of query mappings, got null"),
    ("queries: {a: 1}\n", 1, "\"queries\" must be a list of query mappings, got a mapping"),
    ("queries:\n  - just a string\n", 2, "each query must be a mapping of keys, got a string"),
    ("queries:\n  - [1]\n", 2, "each query must be a mapping of keys, got a list"),
])
def test_document_shape_errors(text, line, reason):
    err = rejected(text)
    assert err.line == line and reason in str(err), str(err)


def test_duplicate_query_names_rejected_at_the_second():
    text = "queries:\n  - {name: a, streams: [x], kind: surprise}\n  - {name: b, streams: [x], kind: surprise}\n" \
           "  - {name: a, streams: [y], kind: surprise}\n"
    err = rejected(text)
    assert str(err) == "queries.yaml:4: query \"a\": duplicate query name (first defined at line 2)"


def test_a_duplicate_name_is_reported_even_when_its_copies_have_problems_of_their_own():
    text = ("queries:\n  - {name: dup, streams: [x], kind: nope}\n"
            "  - {name: dup, streams: [y], kind: surprise, oops: 1}\n")
    err = rejected(text)
    reasons = [str(p) for p in err.problems]
    assert [p.line for p in err.problems] == [2, 3, 3], reasons
    assert "query \"dup\": kind must be" in reasons[0]
    assert "query \"dup\": duplicate query name (first defined at line 2)" in reasons[1]
    assert "query \"dup\": unknown key \"oops\"" in reasons[2]


def test_a_gate_names_every_key_it_lacks():
    base = "queries:\n  - {name: g, streams: [x], kind: choice, question: direction_20, gate: %s}\n"
    assert "gate needs max_stale_ticks (both are required" in str(rejected(base % "{min_prob: 0.9}"))
    assert "gate needs min_prob and max_stale_ticks" in str(rejected(base % "{audit: false}"))
    # a given key out of range is said with the missing one, not on the next try (review397 #2)
    assert "gate needs max_stale_ticks (both are required: {min_prob: P, max_stale_ticks: N}); gate.min_prob must be " \
           "a probability in (0, 1], got 1.5" in str(rejected(base % "{min_prob: 1.5}"))


def test_all_bad_queries_reported_together():
    text = "queries:\n  - {name: a, streams: [x], kind: surprise, oops: 1}\n  - {name: b, streams: [x], kind: nope}\n"
    err = rejected(text)
    assert [p.line for p in err.problems] == [2, 3]
    assert "query \"a\": unknown key \"oops\"" in str(err) and "query \"b\": kind must be" in str(err)


def test_codec_questions_checked_when_given():
    ok = "queries:\n  - {name: a, streams: [x], kind: choice, question: direction_20}\n"
    assert load_queries(ok, "q.yaml", CODEC_QUESTIONS)[0].question == "direction_20"
    typo = rejected(ok.replace("direction_20", "direction_02"), questions=CODEC_QUESTIONS)
    assert "question \"direction_02\" is not one of the codec's questions (direction_5, direction_20" in str(typo)
    assert typo.line == 2
    no_values = rejected(ok.replace("choice", "expectation"), questions=CODEC_QUESTIONS)
    assert "has no values per label" in str(no_values)
    bad_label = "queries:\n  - name: a\n    streams: [x]\n    kind: choice\n    question: direction_20\n" \
                "    choices: [up, sideways]\n"
    err = rejected(bad_label, questions=CODEC_QUESTIONS)
    assert err.line == 6 and "\"sideways\" is not an answer of codec question \"direction_20\"" in str(err)
    # a text model has no codec questions: a bare identifier needs its own labels
    assert "this model asks free-text questions" in str(rejected(ok, questions={}))
    expect = ok.replace("choice, question: direction_20", "expectation, question: move_bps_50")
    assert load_queries(expect, "q.yaml", CODEC_QUESTIONS)[0].values is None


def test_plain_scalars_in_string_positions_stay_as_written():
    text = "queries:\n  - name: 1234\n    streams: [0700, on]\n    kind: expectation\n    question: '?'\n" \
           "    values: {+5: 5, -1.25: -1.25, 0: 0, yes: 1}\n"
    (spec,) = load_queries(text)
    assert spec.name == "1234" and spec.streams == ("0700", "on")
    assert dict(spec.values) == {"+5": 5.0, "-1.25": -1.25, "0": 0.0, "yes": 1.0}


def test_anchors_and_merge_keys():
    text = textwrap.dedent("""\
        defaults: &d {streams: ["SYN.*"], kind: choice, trigger: {ticks: 5}}
        queries:
          - {<<: *d, name: a, question: direction_5}
          - {<<: *d, name: b, question: direction_20, trigger: batch}
        """)
    assert "unknown top-level key \"defaults\"" in str(rejected(text))  # anchors must live inside queries
    text = textwrap.dedent("""\
        queries:
          - &a {name: a, streams: ["SYN.*"], kind: choice, question: direction_5, trigger: {ticks: 5}}
          - {<<: *a, name: b, question: direction_20, trigger: batch}
        """)
    a, b = load_queries(text)
    assert a.trigger == Trigger("ticks", 5) and b.trigger == Trigger("batch") and b.streams == a.streams


def test_matches_exact_and_globs():
    spec = QuerySpec(name="q", streams=["BTC-USD", "ETH-*", "SYN.[AB]", "x?"], kind="surprise")
    assert all(spec.matches(s) for s in ("BTC-USD", "ETH-USD", "ETH-", "SYN.A", "SYN.B", "xy"))
    assert not any(spec.matches(s) for s in ("btc-usd", "BTC-USDT", "SYN.C", "x", "xyz", "XETH-USD"))
    assert QuerySpec(name="q", streams="a[]]", kind="surprise").matches("a]")  # fnmatch's leading-']' rule


def test_topic_for():
    spec = QuerySpec(name="dir", streams=("BTC-USD",), kind="surprise")
    assert spec.topic_for("BTC-USD") == "dir/BTC-USD/"
    fixed = QuerySpec(name="dir", streams=("BTC-USD",), kind="surprise", topic="btc/{{raw}}/")
    assert fixed.topic_for("BTC-USD") == "btc/{raw}/"


def test_round_trips_through_yaml_dict_and_msgpack():
    specs = load_queries(GOOD) + Registry().register_file(EXAMPLES / "text_model.yaml")
    assert load_queries(dump_queries(specs)) == specs
    for spec in specs:
        assert load_queries(spec.to_yaml()) == [spec]
        wire = msgpack.unpackb(msgpack.packb(spec.to_dict()))
        assert QuerySpec.from_dict(wire) == spec
    assert "interval: 500ms" in specs[1].to_yaml()


def test_every_spec_is_hashable_and_equal_specs_hash_equal():
    """`values:` was stored as a read-only mapping, which made the spec unhashable (and the flash cache raise)."""
    text = GOOD + "  - {name: ev, streams: [a], question: up or down, kind: expectation, values: {up: 1, down: -1}}\n"
    specs = load_queries(text) + Registry().register_file(EXAMPLES / "text_model.yaml")
    again = load_queries(dump_queries(specs))
    assert again == specs and [hash(s) for s in again] == [hash(s) for s in specs]
    assert len(set(specs) | set(again)) == len(specs) and {s: s.name for s in specs}[again[2]] == "ev"
    other = QuerySpec.from_dict({**specs[2].to_dict(), "values": {"up": 2, "down": -1}})
    assert other != specs[2] and other not in set(specs)


def test_from_dict_rejects_unknown_keys_by_name():
    with pytest.raises(QuerySpecError, match="query \"a\": unknown key \"trigger_every\""):
        QuerySpec.from_dict({"name": "a", "streams": ["x"], "kind": "surprise", "trigger_every": 3})


def test_direct_construction_validates():
    with pytest.raises(QuerySpecError, match="query \"a\": choices must not be empty"):
        QuerySpec(name="a", streams=("x",), kind="choice", question="Up?", choices=())
    spec = QuerySpec(name="a", streams=("x",), kind="generate", question="Say", trigger={"interval": "2s"})
    assert spec.trigger == Trigger("interval", 2_000_000_000) and spec.max_tokens == 16


def test_examples_load_against_their_models():
    tick = Registry(CODEC_QUESTIONS).register_file(EXAMPLES / "tick_model.yaml")
    assert {s.kind for s in tick} == {"choice", "expectation", "surprise"} and len(tick) >= 3
    text = Registry({}).register_file(EXAMPLES / "text_model.yaml")
    assert {s.kind for s in text} >= {"choice", "generate"}


def test_missing_file_is_a_query_spec_error(tmp_path):
    with pytest.raises(QuerySpecError, match="cannot read query file"):
        Registry().register_file(tmp_path / "nope.yaml")
    path = tmp_path / "q.yaml"
    path.write_text("queries:\n  - {name: a, streams: [x], kind: surprise, bogus: 1}\n")
    with pytest.raises(QuerySpecError, match=rf"^{path}:2: query \"a\": unknown key \"bogus\""):
        Registry().register_file(path)


@pytest.mark.parametrize("text, ns", [("500ms", 500_000_000), ("2s", 2_000_000_000), ("1m", 60_000_000_000),
                                      ("1.5s", 1_500_000_000), ("250us", 250_000), (7, 7), ("1h", 3_600 * 10**9),
                                      ("1d", 86_400 * 10**9), ("0.5d", 43_200 * 10**9), ("2d", 172_800 * 10**9)])
def test_durations(text, ns):
    assert parse_duration_ns(text) == ns
    assert parse_duration_ns(Trigger("interval", ns).interval_text()) == ns


def test_a_whitespace_question_is_a_prompt_and_an_empty_one_is_refused() -> None:
    """A text model's question may be a bare separator ("\\n"); only an empty string has nothing to ask."""
    (spec,) = load_queries('queries: [{name: nl, streams: [x], kind: choice, question: "\\n", choices: [" a", " b"]}]')
    assert spec.question == "\n"
    with pytest.raises(QuerySpecError, match="question must be a non-empty string, got \"\""):
        load_queries('queries: [{name: e, streams: [x], kind: choice, question: "", choices: [" a", " b"]}]')


def test_queries_that_could_never_answer_anything_useful_are_refused() -> None:
    """A reviewer's `streams: ["AAA/x"]` (no stream name has a '/') and `choices: [up]` (always p=1) were taken."""
    slash = rejected('queries:\n  - {name: a, streams: ["AAA/x", ZZZ], question: direction_5, kind: choice}\n')
    assert str(slash) == ('queries.yaml:2: query "a": streams[0] "AAA/x" has a "/", which no stream name has (topics '
                          "use it): it would match no stream")
    one = rejected("queries:\n  - {name: b, streams: ['*'], question: direction_5, kind: choice, choices: [up]}\n")
    assert "one choice (\"up\") is always the answer, with probability 1: give at least two" in str(one)
    value = rejected("queries:\n  - {name: c, streams: ['*'], question: move_bps_50, kind: expectation,\n"
                     "     values: {up: 1}}\n")
    assert "one label (\"up\") is always the answer" in str(value)
    underscore = rejected("queries:\n  - {name: d, streams: [_hb*], question: direction_5, kind: choice}\n")
    assert "streams[0] \"_hb*\" starts with \"_\", which no stream name does" in str(underscore)
    for pattern in ("' BTC'", "'BTC* '"):
        spaced = rejected(f"queries:\n  - {{name: e, streams: [{pattern}], question: direction_5, kind: choice}}\n")
        assert "starts or ends with a space, which no stream name does: it would match no stream" in str(spaced)


def test_an_empty_trigger_says_to_leave_the_key_out() -> None:
    error = rejected("queries:\n  - {name: a, streams: ['*'], question: direction_5, kind: choice, trigger: null}\n")
    assert "trigger is empty (YAML null): leave the key out for the default \"batch\"" in str(error)


def test_an_unknown_top_level_key_is_reported_with_the_queries_own_problems() -> None:
    error = rejected("extra_top: 1\nqueries:\n  - {name: a, streams: ['*'], question: direction_5, kind: choise}\n")
    lines = str(error).splitlines()
    assert any('queries.yaml:1: unknown top-level key "extra_top" (allowed: queries)' in line for line in lines), lines
    assert any("queries.yaml:3: query \"a\"" in line and "kind" in line for line in lines), lines
