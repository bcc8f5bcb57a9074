"""A query document's YAML nodes read as values: each key with its line, duplicate keys refused, tags refused or
built by SafeLoader, strings kept as written.

Scalars are built with SafeLoader's constructor, so unknown tags such as `!!python/object` are errors, never
objects. Duplicate keys, which PyYAML would silently resolve to the last one, are rejected; `<<: *defaults`
merges, explicit keys overriding merged ones.

In positions that hold strings (name, kind, streams, question, topic, choices, stop, and every mapping key) a plain
scalar is taken as written, so `choices: [yes, no]` gives "yes"/"no" rather than booleans and the value label `+5`
stays "+5" rather than the int 5.

`YamlDocument.query` turns one query's mapping into a QuerySpec and locates its refusal on the line of the key at
fault; the loader (queries/yaml_loader.py) walks the document's structure and gathers the problems.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from queries.answer_kinds import LABELLED_KINDS
from queries.codec_questions import NamedQuestion, check_questions, free_text_refused
from queries.limits import QueryLimits, clip, excerpt
from queries.spec import QuerySpec, QuerySpecError, check_limits, names_a_question

_STRING_KEYS = frozenset({"name", "streams", "question", "topic", "choices", "stop", "kind", "scored_as"})
# Tags the SafeLoader resolver gives plain scalars that are not strings; in a string position we keep the text.
_IMPLICIT_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("bool", "int", "float", "timestamp"))
_MERGE_TAG = "tag:yaml.org,2002:merge"
_INT_TAG = "tag:yaml.org,2002:int"
_PLAIN_COLLECTIONS = frozenset({"tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"})


def line_of(node: yaml.Node) -> int:
    return node.start_mark.line + 1


class YamlDocument:
    """One document being read: the SafeLoader constructor for scalars, and where errors are reported."""

    def __init__(self, source: str, limits: QueryLimits) -> None:
        self.source, self.limits = source, limits
        self.constructor = yaml.SafeLoader("")
        self._pairs: dict[int, dict[str, tuple[yaml.Node, yaml.Node]]] = {}  # id(node) -> pairs; flatten once

    def error(self, reason: str, node: yaml.Node | None, query: str | None = None) -> QuerySpecError:
        return QuerySpecError(reason, source=self.source, line=line_of(node) if node is not None else None, query=query)

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
                    raise self.error(f"duplicate key {excerpt(k.value)} (first at line {line_of(seen[k.value])})", k,
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
        untagged(node, self, label)
        if not isinstance(node, yaml.MappingNode):
            raise self.error(f"each query must be a mapping of keys, got {node_kind(node)}", node, label)
        name_node = _name_node(node)  # (before the keys are read: a duplicate key's error names the query too)
        if isinstance(name_node, yaml.ScalarNode) and name_node.value:
            label = name_node.value
        pairs = self.pairs(node, label)  # (a duplicate `name` is refused: the first one is the name)
        for key, (_, value_node) in pairs.items():
            if key not in _STRING_KEYS:
                self.refuse_radix_ints(key, value_node, label)
        try:
            raw = {key: self.value(v, key in _STRING_KEYS) for key, (_, v) in pairs.items()}
            question = raw.get("question")
            if questions and raw.get("kind") in LABELLED_KINDS and isinstance(question, str) \
                    and not names_a_question(question):  # a tick model's: why first, before a missing `choices`
                raise QuerySpecError(free_text_refused(question, questions), key="question")
            spec = QuerySpec.from_dict(raw)
            check_limits(spec, self.limits)
            if questions is not None:
                check_questions(spec, questions)
            return spec
        except QuerySpecError as e:
            raise e.located(self.source, self.key_line(node, pairs, e.key, e.item), label) from None
        except yaml.MarkedYAMLError as e:  # an unknown tag, e.g. `!!python/object`, or a malformed `!!int`
            raise self.yaml_error(e, label) from None

    def refuse_radix_ints(self, key: str, node: yaml.Node, query: str) -> None:
        """A count written `010` or `0x10`: YAML 1.1 reads them as 8 and 16 (`{ticks: 010}` fired every 8 ticks,
        review381 #4), where a zero-padded 10 was most likely meant; refused, naming what YAML made of it. Plain
        decimal ints (and `0`) pass; a quoted one is text, refused where a number is wanted."""
        if isinstance(node, yaml.SequenceNode):
            for item in node.value:
                self.refuse_radix_ints(key, item, query)
        elif isinstance(node, yaml.MappingNode) and node.tag in _PLAIN_COLLECTIONS:
            for k, v in node.value:
                self.refuse_radix_ints(k.value if isinstance(k, yaml.ScalarNode) else key, v, query)
        elif isinstance(node, yaml.ScalarNode) and not node.style and node.tag == _INT_TAG:
            written = node.value.lstrip("+-").replace("_", "")
            radix = ("hexadecimal" if written[:2].lower() == "0x" else "binary" if written[:2].lower() == "0b"
                     else "base 60" if ":" in written else "octal" if len(written) > 1 and written[0] == "0" else None)
            if radix is None or len(written) > 40:  # (a number that long is refused as too large anyway)
                return
            try:
                read = self.construct(node)
            except (yaml.MarkedYAMLError, ValueError):  # (`!!int 0b`, 5,000 digits: refused as they are, below)
                return
            meant = ("-" if node.value.startswith("-") else "") + (written.lstrip("0") or "0")
            said = (f"the octal number {read}, not {meant}: write {meant}" if radix == "octal" else
                    f"the {radix} number {read}: write it in decimal, {read}")
            raise self.error(f"{key}: {node.value} is read by YAML 1.1 as {said} (numbers written with a leading "
                             f"0, 0x, 0b or a colon are refused)", node, query)

    @staticmethod
    def key_line(node: yaml.Node, pairs: dict, key: str | None, item: int | str | None) -> int:
        """The line of `key` (of its `item`-th element or `item` label when known), else of the query itself."""
        key = key.split("[")[0] if key else key
        if key not in pairs:
            return line_of(node)
        key_node, value_node = pairs[key]
        if isinstance(item, int) and isinstance(value_node, yaml.SequenceNode) and item < len(value_node.value):
            return line_of(value_node.value[item])
        if isinstance(item, str) and isinstance(value_node, yaml.MappingNode):
            return next((line_of(k) for k, _ in value_node.value if k.value == item), line_of(key_node))
        return line_of(key_node)


def _name_node(node: yaml.MappingNode) -> yaml.Node | None:
    """The value node of a query mapping's `name` key as written (the first, should it be given twice)."""
    return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == "name"), None)


def untagged(node: yaml.Node, doc: YamlDocument, query: str | None = None) -> yaml.Node:
    """A document's mapping or list as written, or an error naming the tag it carries: a tag such as
    `!!python/object` on a collection is never ignored, and never constructed."""
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _PLAIN_COLLECTIONS:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        raise doc.error(f"the tag {excerpt(tag)} is not allowed: a query document holds plain mappings, lists and "
                        f"scalars", node, query)
    return node


_SCALAR_KINDS = {"tag:yaml.org,2002:null": "null", "tag:yaml.org,2002:bool": "a boolean",
                 "tag:yaml.org,2002:int": "an integer", "tag:yaml.org,2002:float": "a number"}


def node_kind(node: yaml.Node) -> str:
    """What a node holds, in YAML's words (a list, a mapping, null, a string, ...), for an error's "got ..."."""
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    return _SCALAR_KINDS.get(node.tag, "a string")
