"""Reads a query document: YAML text -> QuerySpecs, with the line of every problem.

The text is composed (not loaded) with PyYAML's SafeLoader so each key keeps
its node and start mark; scalars are then built with SafeLoader's constructor,
so unknown tags such as `!!python/object` are errors, never objects. Duplicate
keys, which PyYAML would silently resolve to the last one, are rejected.

In positions that hold strings (name, kind, streams, question, topic, choices,
stop, and every mapping key) a plain scalar is taken as written, so
`choices: [yes, no]` gives "yes"/"no" rather than booleans and the value label
`+5` stays "+5" rather than the int 5.

Every cost a document can cause is bounded before it is paid (queries/limits.py):
its size, its nodes (aliases expanded) and its depth, while it is composed
(queries/yaml_composer.py). Errors quote at most a short excerpt.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from engine.text_files import NotUtf8Error, decode_text
from queries.codec_questions import NamedQuestion, check_questions
from queries.limits import QueryLimits, clip, excerpt
from queries.spec import QuerySpec, QuerySpecError, check_limits, unanswerable_reason
from queries.yaml_composer import compose, too_big

_STRING_KEYS = frozenset({"name", "streams", "question", "topic", "choices", "stop", "kind"})
# Tags the SafeLoader resolver gives plain scalars that are not strings; in a string position we keep the text.
_IMPLICIT_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float", "timestamp"))
_MERGE_TAG = "tag:yaml.org,2002:merge"
_PLAIN_COLLECTIONS = frozenset({"tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"})


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


class _Doc:
    """One document being read: the SafeLoader constructor for scalars, and where errors are reported."""

    def __init__(self, source: str, limits: QueryLimits) -> None:
        self.source, self.limits = source, limits
        self.constructor = yaml.SafeLoader("")
        self._pairs: dict[int, dict[str, tuple[yaml.Node, yaml.Node]]] = {}  # id(node) -> pairs; flatten once

    def error(self, reason: str, node: yaml.Node | None, query: str | None = None) -> QuerySpecError:
        return QuerySpecError(reason, source=self.source, line=_line(node) if node is not None else None, query=query)

    def pairs(self, node: yaml.MappingNode, query: str | None = None) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        """key -> (key node, value node); duplicate keys are errors (PyYAML would keep the last silently)."""
        if id(node) in self._pairs:
            return self._pairs[id(node)]
        seen: dict[str, yaml.Node] = {}
        for k, _ in node.value:
            if not isinstance(k, yaml.ScalarNode):
                raise self.error("mapping keys must be plain strings", k, query)
            if k.tag != _MERGE_TAG:
                if k.value in seen:
                    raise self.error(f"duplicate key {excerpt(k.value)} (first at line {_line(seen[k.value])})", k,
                                     query)
                seen[k.value] = k
        try:
            self.constructor.flatten_mapping(node)  # `<<: *defaults` merges; explicit keys override merged ones
        except yaml.MarkedYAMLError as e:  # a merge of something that is not a mapping
            raise self.yaml_error(e, query) from None
        out = {}
        for k, v in node.value:
            if not isinstance(k, yaml.ScalarNode):
                raise self.error("mapping keys must be plain strings", k, query)
            out[k.value] = (k, v)
        self._pairs[id(node)] = out
        return out

    def yaml_error(self, e: yaml.MarkedYAMLError, query: str | None) -> QuerySpecError:
        mark = e.problem_mark or e.context_mark
        return QuerySpecError(f"YAML error: {clip(e.problem or '', 200)}", source=self.source,
                              line=mark.line + 1 if mark else None, query=query)

    def construct(self, node: yaml.Node) -> Any:
        """SafeLoader's object for a tagged or plain scalar (or a collection with a tag of its own)."""
        try:
            return self.constructor.construct_object(node, deep=True)
        except yaml.MarkedYAMLError:
            raise
        except Exception as e:  # SafeConstructor raises ValueError, KeyError, ... on e.g. `!!bool maybe`
            tag = node.tag.replace("tag:yaml.org,2002:", "!!")
            reason = f"cannot read {excerpt(node.value)} as {tag} ({type(e).__name__})"
            raise yaml.constructor.ConstructorError(None, None, reason, node.start_mark) from None

    def value(self, node: yaml.Node, strings: bool) -> Any:
        if isinstance(node, yaml.ScalarNode):
            if strings and not node.style and node.tag in _IMPLICIT_TAGS:
                return node.value  # as written: `yes` stays "yes", `+5` stays "+5"
            return self.construct(node)
        if node.tag not in _PLAIN_COLLECTIONS:  # `!!python/object/apply` and friends: let SafeLoader refuse them
            return self.construct(node)
        if isinstance(node, yaml.SequenceNode):
            return [self.value(n, strings) for n in node.value]
        # keys are always strings in a query document: `+5: 5.0` labels "+5"
        return {key: self.value(v, strings) for key, (_, v) in self.pairs(node).items()}

    def query(self, node: yaml.Node, index: int, questions: Mapping[str, NamedQuestion] | None) -> QuerySpec:
        label = f"query #{index + 1}"
        _untagged(node, self, label)
        if not isinstance(node, yaml.MappingNode):
            raise self.error(f"each query must be a mapping of keys, got {_node_kind(node)}", node, label)
        pairs = self.pairs(node, label)
        name_node = pairs.get("name", (None, None))[1]
        if isinstance(name_node, yaml.ScalarNode) and name_node.value:
            label = name_node.value
        try:
            raw = {key: self.value(v, key in _STRING_KEYS) for key, (_, v) in pairs.items()}
            spec = QuerySpec.from_dict(raw)
            check_limits(spec, self.limits)
            if questions is not None:
                check_questions(spec, questions)
            return spec
        except QuerySpecError as e:
            raise e.located(self.source, self.key_line(node, pairs, e.key, e.item), label) from None
        except yaml.MarkedYAMLError as e:  # an unknown tag, e.g. `!!python/object`, or a malformed `!!int`
            raise self.yaml_error(e, label) from None

    @staticmethod
    def key_line(node: yaml.Node, pairs: dict, key: str | None, item: int | str | None) -> int:
        """The line of `key` (of its `item`-th element or `item` label when known), else of the query itself."""
        key = key.split("[")[0] if key else key
        if key not in pairs:
            return _line(node)
        key_node, value_node = pairs[key]
        if isinstance(item, int) and isinstance(value_node, yaml.SequenceNode) and item < len(value_node.value):
            return _line(value_node.value[item])
        if isinstance(item, str) and isinstance(value_node, yaml.MappingNode):
            return next((_line(k) for k, _ in value_node.value if k.value == item), _line(key_node))
        return _line(key_node)


def _untagged(node: yaml.Node, doc: _Doc, query: str | None = None) -> yaml.Node:
    """A document's mapping or list as written, or an error naming the tag it carries: a tag such as
    `!!python/object` on a collection is never ignored, and never constructed."""
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _PLAIN_COLLECTIONS:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        raise doc.error(f"the tag {excerpt(tag)} is not allowed: a query document holds plain mappings, lists and "
                        f"scalars", node, query)
    return node


_SCALAR_KINDS = {"tag:yaml.org,2002:null": "null", "tag:yaml.org,2002:bool": "a boolean",
                 "tag:yaml.org,2002:int": "an integer", "tag:yaml.org,2002:float": "a number"}


def _node_kind(node: yaml.Node) -> str:
    """What a node holds, in YAML's words (a list, a mapping, null, a string, ...), for an error's "got ..."."""
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    return _SCALAR_KINDS.get(node.tag, "a string")


def _query_nodes(root: yaml.Node | None, doc: _Doc, problems: list[QuerySpecError] | None = None) -> list[yaml.Node]:
    """The document's query mappings. An unknown top-level key beside `queries` goes to ``problems`` when given (so
    the queries' own problems are reported with it, not after it is fixed), else it is raised."""
    form = "a mapping with a single key 'queries' holding a list of queries"
    if root is None:
        raise doc.error(f"empty document; expected {form}", None)
    _untagged(root, doc)
    if not isinstance(root, yaml.MappingNode):
        hint = " (put the list under 'queries:')" if isinstance(root, yaml.SequenceNode) else ""
        raise doc.error(f"expected {form}, got {_node_kind(root)}{hint}", root)
    top = doc.pairs(root)
    for key, (key_node, _) in top.items():
        if key != "queries":
            unknown = doc.error(f"unknown top-level key {excerpt(key)} (allowed: queries)", key_node)
            if problems is None or "queries" not in top:
                raise unknown
            problems.append(unknown)
    if "queries" not in top:
        raise doc.error(f"missing key 'queries'; expected {form}", root)
    seq = _untagged(top["queries"][1], doc)
    if not isinstance(seq, yaml.SequenceNode):
        raise doc.error(f"'queries' must be a list of query mappings, got {_node_kind(seq)}", seq)
    if len(seq.value) > doc.limits.max_queries:
        raise doc.error(f"the document has {len(seq.value)} queries, over the limit of {doc.limits.max_queries} "
                        f"(max_queries)", seq)
    return seq.value


def parse_document(
    text: str, source: str, questions: Mapping[str, NamedQuestion] | None = None, limits: QueryLimits | None = None,
    answerable: Callable[[QuerySpec], object] | None = None, lines: dict[str, int] | None = None,
) -> list[QuerySpec]:
    """All problems are reported together, the first of each query, in one QuerySpecError. ``answerable`` (see
    Registry) checks each valid query against the serving model here, so its refusal has the query's line too.
    ``lines``, when given, is filled with what ``query_lines`` gives, at no cost of its own (for ``located_in``)."""
    doc = _Doc(source, limits or QueryLimits())
    problems: list[QuerySpecError] = []
    nodes = _query_nodes(compose(text, doc.source, doc.limits), doc, problems)
    specs: list[QuerySpec] = []
    first_line: dict[str, int] = {} if lines is None else lines
    for i, node in enumerate(nodes):
        # A name used twice is reported whether or not either copy has a problem of its own
        name, name_line = _name_of(doc, node)
        duplicate = name is not None and name in first_line
        if duplicate:
            problems.append(QuerySpecError(f"duplicate query name (first defined at line {first_line[name]})",
                                           source=source, line=name_line, query=name))
        elif name is not None:
            first_line[name] = name_line
        try:
            spec = doc.query(node, i, questions)
        except QuerySpecError as e:
            problems.append(e)
            continue
        if duplicate:
            continue
        if answerable is not None:
            try:
                answerable(spec)
            except ValueError as e:
                problems.append(QuerySpecError(unanswerable_reason(e, spec), source=source, line=_line(node),
                                               query=spec.name))
                continue
        specs.append(spec)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise QuerySpecError(f"{len(problems)} invalid queries", problems=problems)
    return specs


def _name_of(doc: _Doc, node: yaml.Node) -> tuple[str | None, int]:
    """A query node's `name` as written and its line, before the query is parsed; None when it has no plain one."""
    if not isinstance(node, yaml.MappingNode):
        return None, _line(node)
    try:
        pairs = doc.pairs(node)
    except QuerySpecError:  # its own problem, reported when the query is parsed
        return None, _line(node)
    name_node = pairs.get("name", (None, None))[1]
    if isinstance(name_node, yaml.ScalarNode) and name_node.tag == "tag:yaml.org,2002:str" and name_node.value:
        return name_node.value, doc.key_line(node, pairs, "name", None)
    return None, _line(node)


def load_queries(
    text: str, source: str = "<string>", questions: Mapping[str, NamedQuestion] | None = None,
    limits: QueryLimits | None = None, answerable: Callable[[QuerySpec], object] | None = None,
    lines: dict[str, int] | None = None,
) -> list[QuerySpec]:
    """Parses a query document (see the module docstring). Every problem raises one QuerySpecError.

    `questions` (the model codec's questions by name) makes the loader check
    question names, choices and value labels against the codec; None defers
    that check to whoever binds the query to a model. `limits` default to
    QueryLimits(): a caller that passes none still gets the safe bounds.
    `lines`: see parse_document.
    """
    return parse_document(text, source, questions, limits, answerable, lines)


def query_lines(text: str, source: str = "<string>", limits: QueryLimits | None = None) -> dict[str, int]:
    """Each query's name -> the line it is named on, in a document ``load_queries`` accepted: for problems found
    later, across documents (a topic that clashes with a query registered before), to be located like the rest."""
    doc = _Doc(source, limits or QueryLimits())
    lines: dict[str, int] = {}
    for node in _query_nodes(compose(text, doc.source, doc.limits), doc):
        name, line = _name_of(doc, node)
        if name is not None:
            lines.setdefault(name, line)
    return lines


def read_queries_file(path: str | Path, limits: QueryLimits | None = None) -> str:
    """A query file's text, refused (QuerySpecError) when it cannot be read or is over ``max_yaml_bytes``."""
    limits = limits or QueryLimits()
    try:
        with Path(path).open("rb") as f:
            if (size := os.fstat(f.fileno()).st_size) > limits.max_yaml_bytes:
                raise too_big(f"{size} bytes", limits.max_yaml_bytes, str(path))
            data = f.read(limits.max_yaml_bytes + 1)
    except OSError as e:
        raise QuerySpecError(f"cannot read query file: {e}", source=str(path)) from None
    if len(data) > limits.max_yaml_bytes:  # it grew since: refused before a character cut at the end is decoded
        raise too_big(f"over {limits.max_yaml_bytes} bytes", limits.max_yaml_bytes, str(path))
    try:
        return decode_text(data, path)  # UTF-8 whatever the locale
    except NotUtf8Error as e:
        raise QuerySpecError(e.reason, source=str(path)) from None


def no_query(source: str, outcome: str) -> QuerySpecError:
    """The refusal of a query document that lists none (`queries: []`), said alike by `register`, `serve` and
    `backtest` (each with the ``outcome`` it would have for that command): most likely the wrong file, so it is not
    taken as "ask nothing"."""
    return QuerySpecError(f"lists no query (queries: []): {outcome}", source=source)


def located_in(error: QuerySpecError, text: str, source: str, limits: QueryLimits | None = None,
               lines: dict[str, int] | None = None) -> QuerySpecError:
    """``error``, about a query of the document ``text`` but found after it was parsed (a topic that clashes with
    a query registered before, a model that cannot answer it), located in it as its other problems are:
    `file:line: query 'name': reason`. One that is located already comes back as it is. ``lines``: the document's
    ``query_lines`` when its parse kept them (parse_document), so it is not composed again."""
    if error.source is not None or len(error.problems) > 1:
        return error
    lines = query_lines(text, source, limits) if lines is None else lines
    return error.located(source, lines.get(error.query or ""), None)
