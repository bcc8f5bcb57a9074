"""A standing query as written in YAML: which streams, what is asked, when, and where answers go.

`QuerySpec` validates itself when built, so a spec built from Python, from a
control-socket dict (`from_dict`) or from YAML (`load_queries`) obeys the same
rules. The loader (queries/yaml_loader.py) adds where an error is:
every `QuerySpecError` it raises names the source, the line YAML gives for the
offending key, the query and the reason, e.g.
`queries.yaml:12: query 'dir': unknown key 'trigerr' (allowed: name, ...)`.

A document is a mapping with the single key `queries` holding a list of query
mappings. A bare list is refused (with that hint): one form to document, and
room for top-level keys later without guessing what a list meant.

The rules of a spec's parts live beside it: its answer kinds and their keys (queries/answer_kinds.py), its topic
(queries/answer_topics.py), its trigger (queries/trigger.py), the checks of one value (queries/spec_values.py) and
the error they raise (queries/spec_errors.py). Checks against a model's codec are in queries/codec_questions.py.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from engine.quoting import quoted
from engine.stream_patterns import GLOB_CHARS, unclosed_bracket  # (one glob rule for query streams and --streams)
from engine.yaml_files import yaml_kind
from queries.answer_kinds import KINDS, LABELLED_KINDS, OPTION_KEYS, checked_kind_options
from queries.answer_topics import DEFAULT_TOPIC, check_topic, renders
from queries.limits import QueryLimits, clip, excerpt
from queries.scored_as import ScoredAs
from queries.spec_errors import QuerySpecError, fail
from queries.spec_values import checked_int, did_you_mean, str_list, wire_text
from queries.speculation import Gate, Lookup
from queries.trigger import TRIGGER_TABLE, Trigger

# LABELLED_KINDS (queries/answer_kinds.py) stays importable from here: engine/service/control_ops.py imports it so
__all__ = ["FIELDS", "KINDS", "LABELLED_KINDS", "QueryLimits", "QuerySpec", "QuerySpecError", "Trigger",
           "check_limits", "dump_queries"]

MAX_NAME = 64
MAX_QUESTION_CHARS = 1000
MAX_QUESTION_TOKENS = 64

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
# A question that reads like an identifier names a codec question (`direction_20`).
_QUESTION_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def refused_name(name: str) -> str | None:
    """Why a new query may not take ``name`` though it matches the name rule, or None: `.` and `..` (topics
    `../S/`) and a leading `-` (`flashtick unregister -h` printed the help). Checked when a query is registered,
    not when one a data directory kept is restored (one registered before this rule still starts)."""
    if name in (".", "..") or name.startswith("-"):
        return (f"name {excerpt(name)} is refused: a name may not be \".\" or \"..\" (its topics would read as "
                f"paths) nor start with \"-\" (the command line would read it as an option)")
    return None


def never_cached(spec: QuerySpec) -> bool:
    """Whether ``spec``'s answers never reach the answer cache that `get` reads: a trigger that does not fire by
    itself (`on_demand`) is computed when asked (a generate query's `preposition` keeps one ahead, for asks)."""
    return not spec.trigger.fires_by_itself


def refused_gate(spec: QuerySpec) -> str | None:
    """Why ``spec``'s `gate` is refused, or None: on a query whose answers are never cached it could serve no ask
    (review397 #1: an on_demand choice query with a gate was computed on every ask, `gate_coverage` 0). Checked
    when a query is registered, not when one a data directory kept is restored (as refused_name)."""
    if spec.gate is None or not never_cached(spec) or spec.preposition:
        return None
    return (f"gate does not apply to trigger {spec.trigger.kind}: its answers are computed when asked and never "
            f"cached, so a gate has none to serve (give it a trigger that fires by itself, e.g. {{ticks: 10}}, or, "
            f"on a generate query, preposition: true)")


def names_a_question(question: Any) -> bool:
    """Whether a query's `question` reads as a codec question's name (`direction_20`) rather than free text."""
    return isinstance(question, str) and bool(_QUESTION_NAME_RE.fullmatch(question))


def unanswerable_reason(error: ValueError, spec: QuerySpec) -> str:
    """Why the serving model cannot answer ``spec`` (a Registry's ``answerable`` raised ``error``), without the
    query's own name in front: the QuerySpecError it goes into names the query."""
    reason = error.reason if isinstance(error, QuerySpecError) else str(error)
    named = f"query {excerpt(spec.name)}: "
    return reason[len(named):] if reason.startswith(named) else reason


@dataclass(frozen=True)
class QuerySpec:
    """One standing query. Lists may be passed as lists; they are stored as tuples.

    Generate options left as None get their defaults (max_tokens 16,
    temperature 0 = greedy, no stop strings) on generate queries and are
    rejected by name on other kinds.
    """

    name: str
    streams: tuple[str, ...]
    kind: str
    question: str | None = None
    question_tokens: tuple[int, ...] | None = None
    choices: tuple[str, ...] | None = None
    values: Mapping[str, float] | None = None
    trigger: Trigger = field(default_factory=Trigger)
    topic: str = DEFAULT_TOPIC
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    temperature: float | None = None
    seed: int | None = None
    preposition: bool | None = None  # generate: decode after each batch, off the critical path, for asks
    lookup: Lookup | None = None  # generate: prompt-lookup drafts (greedy only); default on, `false`: off
    gate: Gate | None = None  # choice, expectation, generate: answer an ask from a confident, fresh cached answer
    score: str | None = None  # choice, expectation: how label tokens are scored (answer_kinds.SCORES); None: sequence
    scored_as: ScoredAs | None = None  # a text choice query: the named question its choices mean (queries/scored_as.py)
    _exact: frozenset[str] = field(init=False, repr=False, compare=False)
    _globs: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _yaml_item: str | None = field(init=False, default=None, repr=False, compare=False)  # (yaml_item's, once)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.fullmatch(self.name) or len(self.name) > MAX_NAME:
            raise fail("name", f"name must match [A-Za-z0-9_.-]+ and be at most {MAX_NAME} chars, "
                               f"got {excerpt(self.name)}")
        try:
            self._validate()
        except QuerySpecError as e:
            raise QuerySpecError(e.reason, query=self.name, key=e.key, item=e.item) from None

    def _set(self, attr: str, value: Any) -> None:
        object.__setattr__(self, attr, value)  # normalising a frozen instance, once, while it is being built

    def _validate(self) -> None:
        if self.kind not in KINDS:
            raise fail("kind", f"kind must be one of {', '.join(KINDS)}, got {excerpt(self.kind)}"
                               f"{did_you_mean(self.kind, KINDS)}")
        self._validate_streams()
        self._validate_question()
        self._validate_options()
        self._validate_scored_as()
        if not isinstance(self.trigger, Trigger):
            try:
                self._set("trigger", Trigger.parse(self.trigger))
            except ValueError as e:
                raise fail("trigger", str(e)) from None
        if self.kind == "surprise" and not self.trigger.fires_by_itself:  # an ask reads the cached score, and
            # only an ingest forward that fires the query writes one: such a query would never answer
            fired = ", ".join(kind for kind, row in TRIGGER_TABLE.items() if row.fires_by_itself)
            raise fail("trigger", f"trigger {self.trigger.kind} does not apply to surprise queries: their score "
                                  f"comes from the ingest forward when the query fires (use {fired})")
        check_topic(self.topic, self.name, several_streams=len(self.streams) > 1 or bool(self._globs))

    def _validate_streams(self) -> None:
        streams = str_list("streams", self.streams, allow_scalar=True)
        if not streams:
            raise fail("streams", "streams must name at least one stream or glob")
        for i, s in enumerate(streams):
            if why := unclosed_bracket(s):
                raise fail("streams", f"streams[{i}] {excerpt(s)} is not a valid glob: {why}", i)
            if "/" in s:  # the wire refuses such a name (bad_stream): answer topics are <query>/<stream>/
                raise fail("streams", f"streams[{i}] {excerpt(s)} has a \"/\", which no stream name has (topics "
                                      f"use it): it would match no stream", i)
            if s.startswith("_"):  # the wire refuses these too: '_' topics are the engine's own (heartbeats)
                raise fail("streams", f"streams[{i}] {excerpt(s)} starts with \"_\", which no stream name does (topics "
                                      f"starting with \"_\" are the engine's own): it would match no stream", i)
            if s != s.strip(" "):
                raise fail("streams", f"streams[{i}] {excerpt(s)} starts or ends with a space, which no stream name "
                                      f"does: it would match no stream", i)
        self._set("streams", streams)
        self._set("_exact", frozenset(s for s in streams if not GLOB_CHARS & set(s)))
        self._set("_globs", tuple(re.compile(fnmatch.translate(s)) for s in streams if GLOB_CHARS & set(s)))

    def _validate_question(self) -> None:
        q, toks = self.question, self.question_tokens
        if self.kind == "surprise":
            if q is not None or toks is not None:
                key = "question" if q is not None else "question_tokens"
                raise fail(key, f"{key} does not apply to surprise queries: they score the latest tick itself")
            return
        if (q is None) == (toks is None):
            raise fail("question", f"{self.kind} query needs exactly one of \"question\" or \"question_tokens\"")
        if q is not None:
            if not isinstance(q, str) or not q:  # (whitespace is a prompt: a text model reads "\n" as one)
                raise fail("question", f"question must be a non-empty string, got {excerpt(q)}")
            if len(q) > MAX_QUESTION_CHARS:
                raise fail("question", f"question is {len(q)} characters, over the limit of {MAX_QUESTION_CHARS}")
            wire_text("question", q)
        else:
            if not isinstance(toks, list | tuple) or not toks:
                raise fail("question_tokens", f"question_tokens must be a non-empty list of token ids, "
                                              f"got {excerpt(toks)}")
            if len(toks) > MAX_QUESTION_TOKENS:
                raise fail("question_tokens", f"question_tokens has {len(toks)} tokens, over the limit of "
                                              f"{MAX_QUESTION_TOKENS}")
            tokens = tuple(checked_int(f"question_tokens[{i}]", t, 0, item=i) for i, t in enumerate(toks))
            self._set("question_tokens", tokens)

    def _validate_options(self) -> None:
        given = {key: getattr(self, key) for key in OPTION_KEYS}
        for attr, value in checked_kind_options(self.kind, given, self.names_question).items():
            self._set(attr, value)

    def _validate_scored_as(self) -> None:
        if self.scored_as is None:
            return
        if self.kind != "choice" or self.choices is None or self.names_question:
            why = (f"not {self.kind}" if self.kind != "choice" else
                   "whose question names a codec question, which is scored as itself" if self.names_question else
                   "without choices")
            raise fail("scored_as", f"scored_as applies only to choice queries with a free-text question and their "
                                    f"own choices, {why}")
        scored_as = ScoredAs.parse(self.scored_as)
        scored_as.check_choices(self.choices)
        self._set("scored_as", scored_as)

    def __hash__(self) -> int:
        # The generated hash would hash every field, `values` included: a read-only mapping, which is unhashable.
        # Equal specs agree on these fields, so they still hash equal.
        return hash((self.name, self.kind, self.streams, self.question, self.question_tokens, self.topic))

    @property
    def names_question(self) -> bool:
        """True when `question` is an identifier naming a codec question, which supplies labels and values."""
        return names_a_question(self.question)

    @property
    def labels(self) -> tuple[str, ...] | None:
        """The answer labels the spec itself gives (choices or value labels); None when the codec supplies them."""
        if self.choices is not None:
            return self.choices
        return tuple(self.values) if self.values is not None else None

    def matches(self, stream: str) -> bool:
        return stream in self._exact or any(g.fullmatch(stream) for g in self._globs)

    def topic_for(self, stream: str) -> str:
        return self.topic.format(query=self.name, stream=stream)

    def publishes_on(self, topic: str) -> bool:
        """Whether ``topic`` is one of this query's (``topic_for`` of some stream name)."""
        return renders(topic, self.topic, self.name)

    def to_dict(self) -> dict[str, Any]:
        """Plain msgpack-able primitives; `from_dict(to_dict())` gives an equal spec. Unset options are left out."""
        d: dict[str, Any] = {"name": self.name, "streams": list(self.streams), "kind": self.kind}
        if self.question is not None:
            d["question"] = self.question
        if self.question_tokens is not None:
            d["question_tokens"] = list(self.question_tokens)
        if self.choices is not None:
            d["choices"] = list(self.choices)
        if self.values is not None:
            d["values"] = dict(self.values)
        d["trigger"] = self.trigger.to_obj()
        d["topic"] = self.topic
        if self.kind == "generate":
            d.update(max_tokens=self.max_tokens, stop=list(self.stop or ()), temperature=self.temperature)
            if self.seed is not None:
                d["seed"] = self.seed
            if self.preposition:
                d["preposition"] = True
            if self.lookup != Lookup():
                d["lookup"] = False if self.lookup is None else self.lookup.to_obj()
        if self.gate is not None:
            d["gate"] = self.gate.to_obj()
        if self.score is not None:
            d["score"] = self.score
        if self.scored_as is not None:
            d["scored_as"] = self.scored_as.to_obj()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> QuerySpec:
        """Builds a spec from a plain mapping (a control-socket request), rejecting unknown keys by name."""
        if not isinstance(d, Mapping):
            raise QuerySpecError(f"a query must be a mapping, got {yaml_kind(d)}")
        name = d.get("name") if isinstance(d.get("name"), str) else None
        unknown = [k for k in d if k not in FIELDS]
        if unknown:
            raise QuerySpecError(f"unknown key {excerpt(unknown[0])} (allowed: {', '.join(FIELDS)})", query=name,
                                 key=clip(str(unknown[0]), 100))
        missing = [k for k in ("name", "streams", "kind") if k not in d]
        if missing:
            raise QuerySpecError(f"missing required key {quoted(missing[0])}", query=name)
        return cls(**d)

    def to_yaml(self) -> str:
        """A complete document (`queries:` holding this one query) that `load_queries` reads back equal."""
        return dump_queries([self])

    def yaml_item(self) -> str:
        """This query as an item of dump_queries' `queries:` list, made once (the spec is frozen): a data
        directory's save writes every registered query after each register and unregister, and dumping them all
        afresh each time made removing a large file's queries one by one quadratic (review397 #7)."""
        if self._yaml_item is None:
            fields = self.to_dict()
            fields["trigger"] = self.trigger.to_yaml()  # (its period as a person writes it: "500ms")
            text = yaml.safe_dump({"queries": [fields]}, sort_keys=False, allow_unicode=True)
            self._set("_yaml_item", text.removeprefix(QUERIES_HEADER))
        return self._yaml_item


FIELDS = tuple(f for f in QuerySpec.__dataclass_fields__ if not f.startswith("_"))


def dump_queries(specs: Sequence[QuerySpec]) -> str:
    """`queries:` holding ``specs`` as a person writes them (a trigger's period too: "500ms", not 500000000);
    `load_queries` reads it back equal (queries.yaml of a data directory is written with it)."""
    if not specs:
        return yaml.safe_dump({"queries": []})
    return QUERIES_HEADER + "".join(spec.yaml_item() for spec in specs)


QUERIES_HEADER = "queries:\n"  # a dumped list's first line, each query's item following it


def check_limits(spec: QuerySpec, limits: QueryLimits) -> None:
    """The configurable rules (queries/limits.py) a spec must also pass to be registered."""
    size = len(spec.topic_for("").encode("utf-8"))
    if size > limits.max_topic_bytes:
        raise QuerySpecError(f"topic is {size} bytes without the stream name, over the limit of "
                             f"{limits.max_topic_bytes} (max_topic_bytes)", query=spec.name, key="topic")
