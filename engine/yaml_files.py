"""YAML documents a user writes (the service config, column maps, replay lists), read safely and strictly.

`safe_load_unique` is ``yaml.safe_load`` that refuses a key given twice in one mapping: PyYAML keeps the last
silently, so a section appended at the end of a config (a second ``kv:``) would drop the first one's settings
without a word. It reads an unquoted `yes`, `no`, `on` or `off` *key* as that text (YAML 1.2's core schema), not as
a boolean (YAML 1.1's, PyYAML's default); values keep PyYAML's reading, except with ``text_words``: in a column map
or a replay list every scalar is a column's name, a cell's value or a path, so every one is read as the text
written (only `~`/`null`/nothing is none): a `keep` of TAQ's `00` or `010` stays `00` and `010`, not 0 and 8 (YAML
1.1's octal), and `yes` stays `yes`; a key that takes a number converts it where it is read. The
error is a ``yaml.YAMLError`` with the line of both, so callers that already turn YAML errors
into one line say it alike. (Query documents have their own loader, queries/yaml_loader.py, which does the same
with each key's position kept for its messages.) Every alias counts the nodes it stands for, so a "billion laughs"
stops at a budget (`NodeBudget`, shared with the query composer), and a recursive alias is refused by name.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from engine.quoting import quoted


_BOOL_TAG = "tag:yaml.org,2002:bool"
_CORE_BOOLS = ("true", "false")  # YAML 1.2's core schema: the only booleans; `yes`/`no`/`on`/`off` are text


def _word_not_bool(node: yaml.Node) -> bool:
    """Whether `node` is a YAML 1.1 boolean that YAML 1.2 reads as text: an unquoted `yes`, `no`, `on`, `off`."""
    return node.tag == _BOOL_TAG and node.value.lower() not in _CORE_BOOLS


MAX_DEPTH = 32  # nested collections; a query document needs 5, a config 4
MAX_FILE_NODES = 1_000_000  # nodes of a config, column map or replay list with every alias expanded (~10 MB of YAML)


class NodeBudget:
    """SafeLoader's composer, counting every node it composes and, for an alias, the nodes it stands for, refusing
    past ``max_nodes``, nesting deeper than MAX_DEPTH and an alias to a node that contains it (a recursive alias).

    A node's expanded size is known once it is composed, and an alias can only
    name a node composed before it, so the count is exact and costs nothing
    extra: a "billion laughs" stops after a few hundred nodes. (A mixin: it sits before the composer.)
    """

    anchors: dict[str, yaml.Node]
    peek_event: Callable[[], yaml.Event]

    def start(self, max_nodes: int) -> None:
        self.max_nodes = max_nodes
        self.expanded = 0  # nodes so far, aliases expanded
        self.depth = 0
        self.sizes: dict[str, int] = {}  # anchor -> expanded size of its node, once composed

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.anchors:  # else SafeLoader raises "found undefined alias"
                if event.anchor not in self.sizes:
                    raise self.refuse(f"alias *{event.anchor[:40]} refers to a node that contains it (a recursive "
                                      f"alias)", event)
                self.count(self.sizes[event.anchor], event)
            return super().compose_node(parent, index)  # type: ignore[misc]
        if self.depth >= MAX_DEPTH:
            raise self.refuse(f"collections nested more than {MAX_DEPTH} deep", event)
        start = self.expanded
        self.count(1, event)
        self.depth += 1
        node = super().compose_node(parent, index)  # type: ignore[misc]
        self.depth -= 1
        if event.anchor is not None:
            self.sizes[event.anchor] = self.expanded - start
        return node

    def count(self, nodes: int, event: yaml.Event) -> None:
        self.expanded += nodes
        if self.expanded > self.max_nodes:
            raise self.refuse(f"the document expands past the limit of {self.max_nodes} nodes, an alias counting "
                              f"every node it repeats{self.budget_named}", event)

    budget_named = ""  # how the limit is named where the user may change it

    def refuse(self, reason: str, event: yaml.Event) -> Exception:
        """The error for ``reason`` at ``event``: a YAML error with its place (a query composer's: its own)."""
        return yaml.composer.ComposerError(None, None, reason, event.start_mark)


class _UniqueKeyLoader(NodeBudget, yaml.SafeLoader):
    def __init__(self, stream: Any) -> None:
        yaml.SafeLoader.__init__(self, stream)
        # review406 #1, #2: a config of nested aliases hung every command given it (its ${VAR} walk expanded them),
        # and a recursive alias ended in Python's RecursionError, no file or line
        self.start(MAX_FILE_NODES)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: its keys may be overridden after it
                continue
            if _word_not_bool(key_node):
                # YAML 1.1 reads an unquoted `yes`/`no`/`on`/`off` key as a boolean: a side_map of Kalshi's
                # `{yes: buy, no: sell}` matched no cell and rejected every row. A key is a name or a value the
                # data holds: read it as the text written, as YAML 1.2 does
                key_node.tag = "tag:yaml.org,2002:str"
            key = self.construct_object(key_node, deep=True)
            try:
                line = first.get(key)
            except TypeError:  # an unhashable key: the base class says so
                break
            if line is not None:  # (by key, not line: `{a: 1, a: 2}` is on one)
                raise yaml.constructor.ConstructorError(
                    None, None, f"found duplicate key {quoted(key)} (first at line {line}); the last would win "
                                "silently",
                    key_node.start_mark)
            first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


class _TextWordsLoader(_UniqueKeyLoader):
    def construct_as_written(self, node: yaml.ScalarNode) -> str:
        # a `keep: {corr: [00, 01]}` was [0, 1] (and `010` 8, octal): the rows of `00` were left out as filtered_out;
        # a `keep: {regular: [yes]}` was True, compared as "true": it kept no row of a cell `yes`
        return self.construct_scalar(node)


# every tag PyYAML resolves a plain scalar to, but null: a number, a boolean, a date read as written
for _tag in ("bool", "int", "float", "timestamp"):
    _TextWordsLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _TextWordsLoader.construct_as_written)


def safe_load_unique(text: str, text_words: bool = False) -> Any:
    """``yaml.safe_load(text)``, refusing duplicate keys (yaml.YAMLError naming both lines); `text_words`: every
    scalar but null is the text written (`00`, `yes`, `1e9`, `2024-03-01`), keys and values."""
    loader = _TextWordsLoader if text_words else _UniqueKeyLoader
    return yaml.load(text, Loader=loader)  # noqa: S506 (a SafeLoader subclass)


def yaml_error_line(error: yaml.YAMLError, text: str | None = None) -> str:
    """A YAML error in one line: the problem (``yaml_problem``, with the document's ``text`` when known) and where
    (PyYAML's own text spans several, quoting the source)."""
    mark = getattr(error, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    problem = yaml_problem(error, text) or " ".join(str(error).split())
    return f"{problem}{where}"


TAB_PROBLEM = "a tab: YAML indents with spaces only; replace the tabs with spaces"


def yaml_problem(error: yaml.YAMLError, text: str | None) -> str:
    """What PyYAML found wrong in the document ``text``, a tab where it stopped named as a tab with what to do, for
    configs and query files alike: PyYAML said `found character '\\t' that cannot start any token`, its C loader
    (the query files') not even which character (review442 #5)."""
    mark = getattr(error, "problem_mark", None)
    if text is not None and mark is not None:
        lines = text.split("\n")  # (the marks count lines at \n)
        if mark.line < len(lines) and lines[mark.line][mark.column : mark.column + 1] == "\t":
            return TAB_PROBLEM
    return getattr(error, "problem", None) or ""


# What a value read from YAML (or msgpack, for a control request) is, in the words of the YAML its user wrote: an
# error that says "got NoneType" or "got dict" speaks Python to someone who wrote `~` or `{x: 1}`. bool before int,
# datetime before date: each is a subclass of the next.
_YAML_KINDS: tuple[tuple[type | tuple[type, ...], str], ...] = (
    (type(None), "null"), (bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
    ((bytes, bytearray), "binary data"), ((list, tuple), "a list"), (Mapping, "a mapping"), ((set, frozenset), "a set"),
    (datetime.datetime, "a timestamp"), (datetime.date, "a date"))


def yaml_kind(value: Any) -> str:
    """``value``'s kind as YAML names it, for an error's "got ...": null, a boolean, an integer, a number, a string,
    a list, a mapping, ... (a value YAML cannot hold keeps its Python type's name)."""
    for python_type, words in _YAML_KINDS:
        if isinstance(value, python_type):
            return words
    return type(value).__name__
