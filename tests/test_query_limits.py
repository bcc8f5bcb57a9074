"""Hostile query documents: every limit refuses with a short error naming it, fast, and nothing half-registered.

The YAML loader is also fuzzed: thousands of generated documents (random
nesting, anchors and aliases, tags, merge keys, duplicate keys, huge scalars,
random edits of valid documents) give specs or a QuerySpecError, never another
exception, each in bounded time, with a bounded message.
"""

from __future__ import annotations

import random
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.codec import BinnedCodec
from engine.service.config import ConfigError, LimitsSection, ServiceConfig
from queries.cache import AnswerCache
from queries.flash import FlashQueries
from queries.limits import QueryLimits
from queries.registry import Registry
from queries.spec import QuerySpec, QuerySpecError
import queries.yaml_composer
from queries.yaml_composer import MAX_DEPTH
from queries.yaml_loader import load_queries

EXAMPLES = Path(__file__).resolve().parent.parent / "queries" / "examples"
MAX_LINE = 500  # characters of one line of any error (queries.limits.clip)


def bomb(levels: int = 8, width: int = 9, key: str = "choices") -> str:
    """A "billion laughs" query document: each anchor is a list of `width` aliases of the one before."""
    names = "abcdefghij"
    anchors = ["&a [" + ",".join("l" * width) + "]"]
    anchors += [f"&{names[i]} [" + ",".join([f"*{names[i - 1]}"] * width) + "]" for i in range(1, levels)]
    return f"queries:\n- name: x\n  streams: [x]\n  kind: choice\n  question: q\n  {key}: [{','.join(anchors)}]\n"


def refused(text: str, limits: QueryLimits | None = None) -> QuerySpecError:
    with pytest.raises(QuerySpecError) as info:
        load_queries(text, "q.yaml", limits=limits)
    assert all(len(line) <= MAX_LINE for line in str(info.value).splitlines())
    return info.value


def surprise(name: str, topic: str = "{query}/{stream}/", streams: str = "[x]") -> str:
    return f"  - {{name: {name}, streams: {streams}, kind: surprise, topic: '{topic}'}}\n"


# -- the alias bomb, sizes, nesting ------------------------------------------------------------------


def test_the_8_level_alias_bomb_is_refused_in_milliseconds_with_a_short_error() -> None:
    text = bomb()
    assert len(text.encode()) < 400  # 9**8 = 43 million strings once expanded
    tracemalloc.start()
    start = time.perf_counter()
    try:
        error = refused(text)
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 5 and peak < 10 << 20  # about 2 ms and 100 kB here
    assert str(error) == ("q.yaml:6: the document expands past the limit of 100000 nodes, an alias counting every "
                          "node it repeats (max_yaml_nodes)")


def test_an_expanded_value_is_quoted_as_a_short_excerpt() -> None:
    """Within the node budget a refused value may still be large: the error quotes an excerpt of it."""
    error = refused(bomb(levels=5, key="question_tokens"), QueryLimits(max_yaml_nodes=10**6))
    assert "question_tokens" in str(error) and len(str(error)) < 200  # 59049 strings: once a 39 MB error
    huge = refused(f"queries:\n- {{name: x, streams: [x], kind: surprise, trigger: {'9' * 100_000}}}\n")
    assert "q.yaml:2: query \"x\": YAML error: cannot read \"99999" in str(huge) and "as !!int" in str(huge)
    assert len(str(huge)) < 200  # once a ValueError (more than 4300 digits) out of the loader
    hexed = refused(f"queries:\n- {{name: x, streams: [x], kind: surprise, trigger: {{ticks: 0x{'f' * 5000}}}}}\n")
    assert "period must be at most 2**63 - 1, got <an integer of 20000 bits>" in str(hexed)
    name = refused(f"queries:\n- {{name: {'n' * 200_000}, streams: [x], kind: surprise}}\n")
    assert "name must match" in str(name) and len(str(name)) < MAX_LINE


def test_documents_over_the_byte_limit_are_refused_unread(tmp_path) -> None:
    limits = QueryLimits(max_yaml_bytes=1000)
    text = "queries:\n" + "".join(surprise(f"q{i}") for i in range(40))
    assert "over the limit of 1000 (max_yaml_bytes)" in str(refused(text, limits))
    assert f"the document is {len(text) * 3} bytes, over" in str(refused(text * 3, limits))  # its size, exactly
    assert "the document is at least 5000 bytes, over" in str(refused("#" + "é" * 4999, limits))  # not encoded
    assert "the document is 1202 bytes" in str(refused("#" + "é" * 600 + "\n", limits))  # 602 characters
    path = tmp_path / "q.yaml"
    path.write_text(text)
    with pytest.raises(QuerySpecError, match=rf"^{path}: the document is {len(text)} bytes, over the limit"):
        Registry(limits=limits).register_file(path)
    assert len(Registry(limits=QueryLimits(max_yaml_bytes=len(text))).register_file(path)) == 40


def test_deep_nesting_and_recursive_aliases_are_refused() -> None:
    deep = f"queries:\n- {{name: x, streams: [x], kind: surprise, seed: {'[' * 10_000}{']' * 10_000}}}\n"
    start = time.perf_counter()
    assert f"nested more than {MAX_DEPTH} deep" in str(refused(deep))
    assert time.perf_counter() - start < 5  # loose: a loaded CI machine; unbounded work would take minutes
    assert "recursive alias" in str(refused("queries: &q [*q]\n"))
    assert "recursive alias" in str(refused("queries:\n- &m {name: x, streams: [x], kind: surprise, <<: *m}\n"))


def test_merge_key_bombs_count_too() -> None:
    """`<<:` merges copy the pairs they merge: nested merges grow like aliases and hit the same budget."""
    lines = ["queries:", "- name: x", "  streams: [x]", "  kind: surprise", "  trigger: [&m0 {a0: 1, b0: 2}"]
    lines += [f"    , &m{i} {{<<: [*m{i - 1}, *m{i - 1}, *m{i - 1}]}}" for i in range(1, 20)]
    lines.append("    ]")
    assert "max_yaml_nodes" in str(refused("\n".join(lines) + "\n"))


# -- query count, topics ---------------------------------------------------------------------------


def test_a_registration_past_max_queries_is_refused_whole() -> None:
    reg = Registry(limits=QueryLimits(max_queries=3))
    reg.register("queries:\n" + surprise("a") + surprise("b"))
    before = (reg.version, reg.list())
    with pytest.raises(QuerySpecError, match=r"registering 2 queries would make 4, over the limit of 3 "
                                             r"\(max_queries\); nothing was registered"):
        reg.register("queries:\n" + surprise("c") + surprise("d"))
    with pytest.raises(QuerySpecError, match="would make 4"):
        reg.register([QuerySpec(name=n, streams=("x",), kind="surprise") for n in "cd"])
    with pytest.raises(QuerySpecError, match=r"the document has 4 queries, over the limit of 3 \(max_queries\)"):
        reg.register("queries:\n" + "".join(surprise(n) for n in "abcd"))
    assert (reg.version, reg.list()) == before
    reg.register("queries:\n" + surprise("a") + surprise("b") + surprise("c"))  # two replaced, one new: 3
    assert [s.name for s in reg.list()] == ["a", "b", "c"]


def test_250k_queries_are_refused_in_well_under_a_second() -> None:
    text = "queries:\n" + "".join(surprise(f"q{i}") for i in range(250_000))
    reg = Registry()
    start = time.perf_counter()
    with pytest.raises(QuerySpecError, match="max_yaml_bytes"):
        reg.register(text)
    specs = [QuerySpec(name=f"q{i}", streams=("x",), kind="surprise") for i in range(1001)]
    with pytest.raises(QuerySpecError, match="1001 queries in one registration, over the limit of 1000"):
        reg.register(specs)
    assert time.perf_counter() - start < 5 and len(reg) == 0


@pytest.mark.parametrize("query, reason", [
    (surprise("x", "_heartbeat/"), "topic \"_heartbeat/\" starts with \"_\": topics starting with \"_\" are reserved"),
    (surprise("x", "_rejects/{stream}/"), "topic \"_rejects/{stream}/\" starts with \"_\""),
    (surprise("_hb"), "topic \"_hb/{stream}/\" starts with \"_\""),
    (surprise("x", "{stream}/{query}/"), "topic must not start with {stream}: a stream named \"_...\""),
    # a reviewer's topic held ESC sequences and a newline, which `flashtick topics` printed raw: a forged line
    (surprise("x", "x\\e[2J\\n{stream}/").replace("'", '"'),
     "topic \"x\\u001b[2J\\n{stream}/\" contains U+001B (a control, format or other non-printable character)"),
    (surprise("x", "a\\u202e/{stream}/").replace("'", '"'), "contains U+202E"),
    (surprise("x", "{query}/" + "t" * 300 + "/{stream}/"), "topic is 304 bytes without the stream name, over the "
                                                           "limit of 256 (max_topic_bytes)"),
])
def test_reserved_and_overlong_topics_are_refused_by_key(query: str, reason: str) -> None:
    error = refused("queries:\n" + query)
    assert str(error).startswith("q.yaml:2: query ") and reason in str(error)


def test_topic_limit_holds_for_specs_registered_from_python() -> None:
    reg = Registry(limits=QueryLimits(max_topic_bytes=8))
    reg.register([QuerySpec(name="abc", streams=("x",), kind="surprise")])  # "abc//" is 5 bytes
    with pytest.raises(QuerySpecError, match="query \"abcdef\": topic is 10 bytes"):
        reg.register([QuerySpec(name="abcdef", streams=("x",), kind="surprise", topic="{query}/t/{stream}/")])
    with pytest.raises(QuerySpecError, match="reserved"):
        QuerySpec.from_dict({"name": "a", "streams": ["x"], "kind": "surprise", "topic": "_x/"})


def test_many_invalid_queries_are_listed_up_to_twenty_then_counted() -> None:
    error = refused("queries:\n" + "".join(surprise(f"q{i}", "_t/{stream}/") for i in range(50)))
    lines = str(error).splitlines()
    assert len(lines) == 21 and lines[-1] == "... and 30 more invalid queries" and len(error.problems) == 50


# -- the service config ----------------------------------------------------------------------------


def test_limits_are_service_config_keys_with_the_same_defaults() -> None:
    section = LimitsSection()
    assert QueryLimits() == QueryLimits(section.max_yaml_bytes, section.max_yaml_nodes, section.max_queries,
                                        section.max_topic_bytes)
    config = ServiceConfig.from_dict({"limits": {"max_queries": 7, "max_yaml_nodes": 50}})
    assert (config.limits.max_queries, config.limits.max_yaml_nodes) == (7, 50)
    with pytest.raises(ConfigError, match="limits.max_topic_bytes must be a finite number > 0"):
        ServiceConfig.from_dict({"limits": {"max_topic_bytes": 0}})
    with pytest.raises(ValueError, match="max_queries must be a positive integer"):
        QueryLimits(max_queries=True)


def test_the_compiled_query_cache_never_outgrows_the_registry() -> None:
    codec = BinnedCodec()
    reg = Registry(codec.questions)
    flash = FlashQueries(reg, AnswerCache(), codec, "m")
    ev = ("queries:\n  - {name: %s, streams: [x], question: direction_20, kind: expectation,\n"
          "     values: {up: %d, down: 0}}\n")
    for i in range(50):
        spec = reg.register(ev % (f"q{i % 5}", i))[0]
        assert flash.compiled(spec) is flash.compiled(spec) and flash.compiled(spec).values == (float(i), 0.0)
        flash.compiled(QuerySpec(name=f"adhoc{i}", streams=("x",), kind="surprise"))  # an ask: not kept
        assert len(flash._compiled) <= len(reg)
        if i % 7 == 0:
            reg.unregister(spec.name)


# -- fuzz ------------------------------------------------------------------------------------------
# Two generators: a Hypothesis strategy (shrinks a failure to a small document) and, for volume, a
# seeded one that Hypothesis drives with a seed per example (thousands of documents in a second or two).

FUZZ_LIMITS = QueryLimits(max_yaml_bytes=32 << 10, max_yaml_nodes=2000, max_queries=20)
ANCHORS = ("a", "b", "c")
SPECIAL = ["x", "SYN.*", "direction_20", "choice", "expectation", "generate", "surprise", "batch", "on_demand",
           "yes", "+5", "-0", "1e999", ".nan", "~", "null", "''", '"\\ud800"', '"\\x00"', "0x" + "f" * 400,
           "9" * 5000, "1.5", "2s", "500ms", "'{query}/{stream}/'", "_x/", "'{stream}/'", "!!int 0b", "!!bool maybe",
           "!!timestamp x", "!!timestamp 2024-01-01", "!!binary ===", "!!binary aGk=", "!!float abc", "!!str 5",
           "!!null x", "!!python/object:os.system x", "!!python/name:os.system ''", "!custom x", "!!merge x", "<<",
           "=", "*a", "*zz", "&a x", "'\x1f'"]
FIELD_KEYS = ["name", "streams", "kind", "question", "question_tokens", "choices", "values", "trigger", "topic",
              "max_tokens", "stop", "temperature", "seed", "ticks", "interval", "<<", "queries", "bogus", "? [a]",
              "? {a: 1}"]
TAGS = ["", "", "", "!!set ", "!!omap ", "!!pairs ", "!!seq ", "!!map ", "!!str ", "!foo "]
VALID = [(EXAMPLES / name).read_text() for name in ("tick_model.yaml", "text_model.yaml")] + [bomb(levels=3)]
EDIT_TEXT = list("[]{}:,-&*!<>|'\"#?% \n\t\\") + ["&a ", "*a", "<<: *a", "!!set", "\n  - ", "\x00", "\ufeff", "é"]


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


SCALARS = st.one_of(st.sampled_from(SPECIAL), st.integers(-(2**70), 2**70).map(str),
                    st.text(max_size=12).map(_quoted), st.integers(1, 40_000).map(lambda n: "h" * n))
KEYS = st.one_of(st.sampled_from(FIELD_KEYS), SCALARS)


def _node(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    sequence = st.lists(children, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]")
    mapping = st.lists(st.tuples(KEYS, children), max_size=4).map(
        lambda kvs: "{" + ", ".join(f"{k}: {v}" for k, v in kvs) + "}")
    anchor = st.sampled_from(("",) * 3 + tuple(f"&{a} " for a in ANCHORS))
    return st.one_of(st.tuples(anchor, st.sampled_from(TAGS), st.one_of(sequence, mapping)).map("".join),
                     st.sampled_from([f"*{a}" for a in ANCHORS]))


NODES = st.recursive(SCALARS, _node, max_leaves=16)
DOCUMENTS = st.one_of(
    st.lists(st.lists(st.tuples(KEYS, NODES), max_size=6), max_size=3).map(
        lambda qs: "queries: [" + ", ".join("{name: q, streams: [\"*\"], kind: surprise, " + ", ".join(
            f"{k}: {v}" for k, v in kvs) + "}" for kvs in qs) + "]\n"),
    st.lists(st.tuples(st.sampled_from(["queries", "q"]), NODES), max_size=3).map(
        lambda kvs: "\n".join(f"{k}: {v}" for k, v in kvs)),
)


def _random_node(rng: random.Random, depth: int = 0) -> str:
    roll = rng.random()
    if roll < 0.01:
        return "[" * rng.randint(20, 60) + "]" * rng.randint(0, 60)  # past MAX_DEPTH, or unbalanced
    if depth >= 4 or roll < 0.45:
        pick = rng.random()
        if pick < 0.6:
            return rng.choice(SPECIAL)
        if pick < 0.8:
            return str(rng.randint(-(2**70), 2**70))
        if pick < 0.95:
            return _quoted("".join(chr(rng.randint(0x20, 0x2FF)) for _ in range(rng.randint(0, 10))))
        return "h" * rng.randint(1000, 40_000)
    if roll < 0.55:
        return "*" + rng.choice(ANCHORS)
    prefix = (f"&{rng.choice(ANCHORS)} " if rng.random() < 0.25 else "") + rng.choice(TAGS)
    items = [_random_node(rng, depth + 1) for _ in range(rng.randint(0, 5))]
    if rng.random() < 0.5:
        return prefix + "[" + ", ".join(items) + "]"
    keys = [rng.choice(FIELD_KEYS) if rng.random() < 0.8 else _random_node(rng, 4) for _ in items]
    return prefix + "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, items)) + "}"


def _random_document(rng: random.Random) -> str:
    """A query document built at random, or a valid one edited at random."""
    if rng.random() < 0.3:
        text = rng.choice(VALID)
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(len(text) + 1)
            text = text[:at] + rng.choice(EDIT_TEXT) + text[at + rng.randint(0, 4):]
        return text
    queries = []
    for _ in range(rng.randint(0, 4)):
        pairs = [(rng.choice(FIELD_KEYS), _random_node(rng, 1)) for _ in range(rng.randint(0, 6))]
        queries.append("{name: q, streams: [\"*\"], kind: surprise, " + ", ".join(f"{k}: {v}" for k, v in pairs) + "}")
    return "queries: [" + ", ".join(queries) + "]\n"


def _loads_or_refuses(text: str) -> None:
    start = time.perf_counter()
    try:
        specs = load_queries(text, "fuzz.yaml", limits=FUZZ_LIMITS)
    except QuerySpecError as e:
        message = str(e)
        assert message and all(len(line) <= MAX_LINE for line in message.splitlines()), text
        assert len(message.splitlines()) <= 21, text
    except Exception as e:
        raise AssertionError(f"{type(e).__name__}: {e} from the document {text!r}") from e
    else:
        assert all(isinstance(s, QuerySpec) and hash(s) is not None for s in specs)
        assert all(not s.topic_for("x").startswith("_") for s in specs)
    assert time.perf_counter() - start < 5, text  # bounded by the limits, whatever the document


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(DOCUMENTS)
def test_fuzz_generated_documents(text: str) -> None:
    _loads_or_refuses(text)


@settings(max_examples=250, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 2**32 - 1))
def test_fuzz_thousands_of_seeded_documents(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(10):
        _loads_or_refuses(_random_document(rng))


HOSTILE = [  # (document, its error's start, a part of it): each refused alike by libyaml's parser and PyYAML's own
    ("queries: [{name: a, name: b}]", "q.yaml:1: query \"a\": ", "duplicate key \"name\" (first at line 1)"),
    ("queries:\n- name: a\n  streams: [x]\n  kind: surprise\n  trigger: {ticks: 1, ticks: 2}\n",
     "q.yaml:2: query \"a\": ", "duplicate key \"ticks\" (first at line 5)"),
    ("queries: []\nqueries: []\n", "q.yaml:2: ", "duplicate key \"queries\" (first at line 1)"),
    ("queries: [{name: a, streams: [x], kind: surprise, bogus: 1}]", 'q.yaml:1: query "a": ', 'unknown key "bogus"'),
    ("queries: []\nextra: 1\n", "q.yaml:2: ", "unknown top-level key \"extra\" (allowed: queries)"),
    ("queries: !!python/object/apply:os.system ['touch {marker}']", "q.yaml:1: ", "the tag "),
    ("queries: [{name: a, streams: [x], kind: surprise, seed: !!python/object/apply:os.system ['touch {marker}']}]",
     "q.yaml:1: query \"a\": YAML error: ", "could not determine a constructor"),
    ("queries:\n- {name: x, streams: [x], kind: surprise, seed: " + "[" * 40 + "]" * 40 + "}\n", "q.yaml:2: ",
     f"collections nested more than {MAX_DEPTH} deep"),
    ("queries:\n- {name: x, streams: [x], kind: surprise, seed: " + "[" * 5000 + "]" * 5000 + "}\n", "q.yaml:2: ",
     f"collections nested more than {MAX_DEPTH} deep"),
    ("queries: &q [*q]\n", "q.yaml:1: ", "recursive alias"),
    (bomb(), "q.yaml:6: ", "(max_yaml_nodes)"),
]


@pytest.fixture(params=["libyaml", "pure-python"])
def parser(request, monkeypatch) -> str:
    """Each document read by both of PyYAML's parsers: libyaml's (the one used where PyYAML has it: ~10x faster on
    a large `register`) and its pure-Python one (a PyYAML built without libyaml, and text libyaml cannot take)."""
    if request.param == "libyaml":
        assert queries.yaml_composer.CParser is not None, "this PyYAML has no libyaml: the fast parser is not tested"
    else:
        monkeypatch.setattr(queries.yaml_composer, "CParser", None)  # what a PyYAML without libyaml has
    return request.param


@pytest.mark.parametrize("text, start, part", HOSTILE)
def test_both_parsers_refuse_hostile_documents_alike_and_load_safely(parser, tmp_path, text, start, part) -> None:
    marker = tmp_path / "ran"
    error = str(refused(text.replace("{marker}", str(marker))))
    assert error.startswith(start) and part in error, error
    assert not marker.exists()  # safe loading: no tag ever constructs a Python object


def test_both_parsers_read_a_valid_document_alike(parser) -> None:
    text = ("queries:\n- {name: big, streams: [" + ",".join(f"S{i}" for i in range(37000)) + "], "
            "question: direction_5, kind: choice, choices: [yes, no, +5]}\n"
            "- {name: \"on\", streams: [\"*\"], kind: surprise, topic: \"t/{stream}/\"}\n")
    big, on = load_queries(text, "q.yaml")
    assert big.streams == tuple(f"S{i}" for i in range(37000)) and big.choices == ("yes", "no", "+5")
    assert (on.name, on.streams, on.topic) == ("on", ("*",), "t/{stream}/")


def test_a_lone_surrogate_is_refused_by_either_parser(parser) -> None:
    """An escaped lone surrogate in a topic: libyaml refuses the escape as it scans, PyYAML's parser reads it and
    the topic check refuses it; unescaped (text decoded with surrogates), the pure-Python reader refuses it."""
    error = str(refused("queries:\n" + surprise("x", "t/\\ud800/", streams="x").replace("'", '"')))
    assert error.startswith("q.yaml:2: ") and ("is not valid Unicode text" in error if parser == "pure-python" else
                                               "found invalid Unicode character escape code" in error), error
    assert "special characters are not allowed" in str(refused("queries: [\ud800]"))
