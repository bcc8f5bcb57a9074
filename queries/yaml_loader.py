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
its size is checked before it is read, and while it is composed every node
counts, an alias as many nodes as it stands for, so a "billion laughs" stops
at the budget after a few hundred nodes; nesting deeper than MAX_DEPTH and
recursive aliases are refused. Errors quote at most a short excerpt.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from engine.text_files import NotUtf8Error, decode_text
from queries.limits import QueryLimits, clip, excerpt
from queries.codec_questions import NamedQuestion, check_questions
from queries.spec import QuerySpec, QuerySpecError, check_limits, unanswerable_reason

_STRING_KEYS = frozenset({"name", "streams", "question", "topic", "choices", "stop", "kind"})
# Tags the SafeLoader resolver gives plain scalars that are not strings; in a string position we keep the text.
_IMPLICIT_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float", "timestamp"))
_MERGE_TAG = "tag:yaml.org,2002:merge"
_PLAIN_COLLECTIONS = frozenset({"tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"})
MAX_DEPTH = 32  # nested collections; a query document needs 5
_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"  # libyaml's own cap (1000 levels): said as ours


class _Counting:
    """SafeLoader's composer, counting every node it composes and, for an alias, the nodes it stands for.

    A node's expanded size is known once it is composed, and an alias can only
    name a node composed before it, so the count is exact and costs nothing
    extra. An alias to a node still being composed (a recursive alias) is refused.
    (A mixin: it sits before the composer in both loaders below.)
    """

    anchors: dict[str, yaml.Node]
    peek_event: Callable[[], yaml.Event]

    def start(self, source: str, max_nodes: int) -> None:
        self.source, self.max_nodes = source, max_nodes
        self.expanded = 0  # nodes so far, aliases expanded
        self.depth = 0
        self.sizes: dict[str, int] = {}  # anchor -> expanded size of its node, once composed

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.anchors:  # else SafeLoader raises "found undefined alias"
                if event.anchor not in self.sizes:
                    raise self.refuse(f"alias *{clip(event.anchor, 40)} refers to a node that contains it "
                                      f"(a recursive alias)", event)
                self.count(self.sizes[event.anchor], event)
            return super().compose_node(parent, index)
        if self.depth >= MAX_DEPTH:
            raise self.refuse(f"collections nested more than {MAX_DEPTH} deep", event)
        start = self.expanded
        self.count(1, event)
        self.depth += 1
        node = super().compose_node(parent, index)
        self.depth -= 1
        if event.anchor is not None:
            self.sizes[event.anchor] = self.expanded - start
        return node

    def count(self, nodes: int, event: yaml.Event) -> None:
        self.expanded += nodes
        if self.expanded > self.max_nodes:
            raise self.refuse(f"the document expands past the limit of {self.max_nodes} nodes, an alias counting "
                              f"every node it repeats (max_yaml_nodes)", event)

    def refuse(self, reason: str, event: yaml.Event) -> QuerySpecError:
        return QuerySpecError(reason, source=self.source, line=event.start_mark.line + 1)


class _PyComposer(_Counting, yaml.SafeLoader):
    """PyYAML's pure-Python reader, scanner and parser: for a PyYAML built without libyaml, and for text libyaml
    cannot take (a lone surrogate, which its UTF-8 encoding refuses, is told here as a ReaderError with its place)."""

    def __init__(self, text: str, source: str, max_nodes: int) -> None:
        yaml.SafeLoader.__init__(self, text)
        self.start(source, max_nodes)


try:
    from yaml._yaml import CParser  # libyaml's parser, where PyYAML was built with it (its wheels are)
except ImportError:  # pragma: no cover (a PyYAML without libyaml: the pure-Python one reads every document)
    CParser = None

if CParser is not None:
    class _CComposer(_Counting, yaml.composer.Composer, CParser, yaml.constructor.SafeConstructor,
                     yaml.resolver.Resolver):
        """libyaml's reader, scanner and parser, whose events our Python composer above makes nodes of: the pure
        Python scanner and parser cost ~90% of composing (a 248 KB `register`: 3-5 s of a loaded engine thread;
        these events: about a tenth of that), while the composer keeps every check (node budget, depth, recursive
        aliases) that yaml.CSafeLoader's own C composer would skip. Composer comes before CParser so its Python
        `get_single_node` and `compose_*` run, not CParser's C ones."""

        def __init__(self, text: str, source: str, max_nodes: int) -> None:
            CParser.__init__(self, text)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
            self.start(source, max_nodes)


def _composer(text: str, source: str, max_nodes: int) -> _Counting:
    """The faster composer that can read ``text`` (libyaml takes UTF-8 it encodes itself: no lone surrogates)."""
    if CParser is not None and (text.isascii() or _encodes(text)):
        return _CComposer(text, source, max_nodes)
    return _PyComposer(text, source, max_nodes)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


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


def _compose(text: str, doc: _Doc) -> yaml.Node | None:
    limit = doc.limits.max_yaml_bytes
    # the size said exactly: ASCII text is a byte a character (checked without a copy), other text is encoded
    # unless it is huge, when its character count is a true lower bound of its bytes
    if text.isascii() or len(text) <= 4 * limit:
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        said = f"{size} bytes"
    else:
        size, said = len(text), f"at least {len(text)} bytes"
    if size > limit:
        raise _too_big(said, limit, doc.source)
    loader = None
    try:
        loader = _composer(text, doc.source, doc.limits.max_yaml_nodes)  # the reader checks characters here
        return loader.get_single_node()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        if e.problem == _LIBYAML_TOO_DEEP:  # its scanner reads a flow ahead, so it may meet its cap before ours
            raise QuerySpecError(f"collections nested more than {MAX_DEPTH} deep", source=doc.source,
                                 line=mark.line + 1 if mark else None) from None
        context = f" ({clip(e.context, 200)})" if e.context else ""
        raise QuerySpecError(f"YAML syntax error: {clip(e.problem or '', 200)}{context}", source=doc.source,
                             line=mark.line + 1 if mark else None) from None
    except yaml.YAMLError as e:  # e.g. a ReaderError on a control character
        raise QuerySpecError(f"YAML error: {clip(str(e), 200)}", source=doc.source) from None
    finally:
        if loader is not None:
            loader.dispose()


def _too_big(size: str, limit: int, source: str) -> QuerySpecError:
    return QuerySpecError(f"the document is {size}, over the limit of {limit} (max_yaml_bytes)", source=source)


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
    nodes = _query_nodes(_compose(text, doc), doc, problems)
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
    for node in _query_nodes(_compose(text, doc), doc):
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
                raise _too_big(f"{size} bytes", limits.max_yaml_bytes, str(path))
            data = f.read(limits.max_yaml_bytes + 1)
    except OSError as e:
        raise QuerySpecError(f"cannot read query file: {e}", source=str(path)) from None
    if len(data) > limits.max_yaml_bytes:  # it grew since: refused before a character cut at the end is decoded
        raise _too_big(f"over {limits.max_yaml_bytes} bytes", limits.max_yaml_bytes, str(path))
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
