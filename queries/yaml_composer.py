"""YAML text -> the node tree of a query document, every cost it can cause bounded before it is paid.

The text is composed (not loaded) with PyYAML's SafeLoader machinery, so each key keeps its node and start mark
for the loader (queries/yaml_loader.py) to read. Every cost a document can cause is bounded (queries/limits.py):
its size is checked before it is read, and while it is composed every node counts, an alias as many nodes as it
stands for, so a "billion laughs" stops at the budget after a few hundred nodes; nesting deeper than MAX_DEPTH and
recursive aliases are refused. libyaml's parser is used where PyYAML has it (4x less CPU a byte), under the same
counting composer. Errors quote at most a short excerpt.
"""

from __future__ import annotations

import yaml

from engine.yaml_files import MAX_DEPTH, TAB_PROBLEM, NodeBudget, yaml_problem
from queries.limits import QueryLimits, clip
from queries.spec_errors import QuerySpecError

_LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"  # libyaml's own cap (1000 levels): said as ours


class _Counting(NodeBudget):
    """NodeBudget (engine/yaml_files.py) with a query document's refusal: a QuerySpecError naming its source and
    line, and the budget named as the limit a service sets (max_yaml_nodes)."""

    budget_named = " (max_yaml_nodes)"

    def start_document(self, source: str, max_nodes: int) -> None:
        self.source = source
        self.start(max_nodes)

    def refuse(self, reason: str, event: yaml.Event) -> QuerySpecError:
        return QuerySpecError(reason, source=self.source, line=event.start_mark.line + 1)


class _PyComposer(_Counting, yaml.SafeLoader):
    """PyYAML's pure-Python reader, scanner and parser: for a PyYAML built without libyaml, and for text libyaml
    cannot take (a lone surrogate, which its UTF-8 encoding refuses, is told here as a ReaderError with its place)."""

    def __init__(self, text: str, source: str, max_nodes: int) -> None:
        yaml.SafeLoader.__init__(self, text)
        self.start_document(source, max_nodes)


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
            self.start_document(source, max_nodes)


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


def compose(text: str, source: str, limits: QueryLimits) -> yaml.Node | None:
    """The node tree of ``text``, refused (QuerySpecError) past ``limits`` or on a YAML error, with its line."""
    limit = limits.max_yaml_bytes
    # the size said exactly: ASCII text is a byte a character (checked without a copy), other text is encoded
    # unless it is huge, when its character count is a true lower bound of its bytes
    if text.isascii() or len(text) <= 4 * limit:
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        said = f"{size} bytes"
    else:
        size, said = len(text), f"at least {len(text)} bytes"
    if size > limit:
        raise too_big(said, limit, source)
    loader = None
    try:
        loader = _composer(text, source, limits.max_yaml_nodes)  # the reader checks characters here
        return loader.get_single_node()
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        if e.problem == _LIBYAML_TOO_DEEP:  # its scanner reads a flow ahead, so it may meet its cap before ours
            raise QuerySpecError(f"collections nested more than {MAX_DEPTH} deep", source=source,
                                 line=mark.line + 1 if mark else None) from None
        problem = yaml_problem(e, text)  # (a tab's context, "while scanning for the next token", helps no one)
        context = f" ({clip(e.context, 200)})" if e.context and problem != TAB_PROBLEM else ""
        raise QuerySpecError(f"YAML syntax error: {clip(problem, 200)}{context}", source=source,
                             line=mark.line + 1 if mark else None) from None
    except yaml.YAMLError as e:  # e.g. a ReaderError on a control character
        raise QuerySpecError(f"YAML error: {clip(str(e), 200)}", source=source) from None
    finally:
        if loader is not None:
            loader.dispose()


def too_big(size: str, limit: int, source: str) -> QuerySpecError:
    return QuerySpecError(f"the document is {size}, over the limit of {limit} (max_yaml_bytes)", source=source)
