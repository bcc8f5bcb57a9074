"""Reads a query document: YAML text -> QuerySpecs, with the line of every problem.

The text is composed (not loaded) so each key keeps its node and start mark
(queries/yaml_composer.py); the nodes are read as values by
queries/yaml_document.py: tags such as `!!python/object` are errors, never
objects, duplicate keys are rejected, and strings are kept as written
(`choices: [yes, no]` gives "yes"/"no"). This module reads the document's
structure (`queries:` and its list), gathers every query's problem into one
error, and holds the entry points: `load_queries`, `query_lines`,
`read_queries_file`, `located_in`.

Every cost a document can cause is bounded before it is paid (queries/limits.py):
its size, its nodes (aliases expanded) and its depth, while it is composed
(queries/yaml_composer.py). Errors quote at most a short excerpt.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from engine.path_words import cannot_read
from engine.text_files import NotUtf8Error, decode_text
from queries.codec_questions import NamedQuestion
from queries.limits import QueryLimits, excerpt
from queries.spec import QuerySpec, QuerySpecError, unanswerable_reason
from queries.spec_errors import QueryFileMissing
from queries.yaml_composer import compose, too_big
from queries.yaml_document import YamlDocument, line_of, node_kind, untagged


def _query_nodes(
    root: yaml.Node | None, doc: YamlDocument, problems: list[QuerySpecError] | None = None,
) -> list[yaml.Node]:
    """The document's query mappings. An unknown top-level key beside `queries` goes to ``problems`` when given (so
    the queries' own problems are reported with it, not after it is fixed), else it is raised."""
    form = "a mapping with a single key \"queries\" holding a list of queries"
    if root is None:
        raise doc.error(f"empty document; expected {form}", None)
    untagged(root, doc)
    if not isinstance(root, yaml.MappingNode):
        hint = " (put the list under \"queries:\")" if isinstance(root, yaml.SequenceNode) else ""
        raise doc.error(f"expected {form}, got {node_kind(root)}{hint}", root)
    top = doc.pairs(root)
    for key, (key_node, _) in top.items():
        if key != "queries":
            unknown = doc.error(f"unknown top-level key {excerpt(key)} (allowed: queries)", key_node)
            if problems is None or "queries" not in top:
                raise unknown
            problems.append(unknown)
    if "queries" not in top:
        raise doc.error(f"missing key \"queries\"; expected {form}", root)
    seq = untagged(top["queries"][1], doc)
    if not isinstance(seq, yaml.SequenceNode):
        raise doc.error(f"\"queries\" must be a list of query mappings, got {node_kind(seq)}", seq)
    if len(seq.value) > doc.limits.max_queries:
        raise doc.error(f"the document has {len(seq.value)} queries, over the limit of {doc.limits.max_queries} "
                        f"(max_queries)", seq)
    return seq.value


def parse_document(
    text: str, source: str, questions: Mapping[str, NamedQuestion] | None = None, limits: QueryLimits | None = None,
    answerable: Callable[[QuerySpec], object] | None = None, lines: dict[str, int] | None = None,
    across: Callable[[list[QuerySpec]], list[QuerySpecError]] | None = None,
) -> list[QuerySpec]:
    """All problems are reported together, the first of each query, in one QuerySpecError. ``answerable`` (see
    Registry) checks each valid query against the serving model here, so its refusal has the query's line too.
    ``lines``, when given, is filled with what ``query_lines`` gives, at no cost of its own (for ``located_in``).
    ``across``: the problems found across the valid queries (Registry's topic clashes), listed with the others
    when there are others (alone, the caller raises them itself)."""
    doc = YamlDocument(source, limits or QueryLimits())
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
                problems.append(QuerySpecError(unanswerable_reason(e, spec), source=source, line=line_of(node),
                                               query=spec.name))
                continue
        specs.append(spec)
    if problems and across is not None:
        flagged = {problem.query for problem in problems}
        problems += [QuerySpecError(e.reason, source=source, line=first_line.get(e.query), query=e.query, key=e.key)
                     for e in across(specs) if e.query not in flagged]
        problems.sort(key=lambda problem: problem.line or 0)  # (in the file's order, as each was found)
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise QuerySpecError(f"{len(problems)} invalid queries", problems=problems)
    return specs


def _name_of(doc: YamlDocument, node: yaml.Node) -> tuple[str | None, int]:
    """A query node's `name` as written and its line, before the query is parsed; None when it has no plain one."""
    if not isinstance(node, yaml.MappingNode):
        return None, line_of(node)
    try:
        pairs = doc.pairs(node)
    except QuerySpecError:  # its own problem, reported when the query is parsed
        return None, line_of(node)
    name_node = pairs.get("name", (None, None))[1]
    if isinstance(name_node, yaml.ScalarNode) and name_node.tag == "tag:yaml.org,2002:str" and name_node.value:
        return name_node.value, doc.key_line(node, pairs, "name", None)
    return None, line_of(node)


def load_queries(
    text: str, source: str = "<string>", questions: Mapping[str, NamedQuestion] | None = None,
    limits: QueryLimits | None = None, answerable: Callable[[QuerySpec], object] | None = None,
    lines: dict[str, int] | None = None, across: Callable[[list[QuerySpec]], list[QuerySpecError]] | None = None,
) -> list[QuerySpec]:
    """Parses a query document (see the module docstring). Every problem raises one QuerySpecError.

    `questions` (the model codec's questions by name) makes the loader check
    question names, choices and value labels against the codec; None defers
    that check to whoever binds the query to a model. `limits` default to
    QueryLimits(): a caller that passes none still gets the safe bounds.
    `lines` and `across`: see parse_document.
    """
    return parse_document(text, source, questions, limits, answerable, lines, across)


def query_lines(text: str, source: str = "<string>", limits: QueryLimits | None = None) -> dict[str, int]:
    """Each query's name -> the line it is named on, in a document ``load_queries`` accepted: for problems found
    later, across documents (a topic that clashes with a query registered before), to be located like the rest."""
    doc = YamlDocument(source, limits or QueryLimits())
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
        refusal = QueryFileMissing if isinstance(e, FileNotFoundError) else QuerySpecError
        raise refusal(cannot_read(e, "query file"), source=str(path)) from None
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
