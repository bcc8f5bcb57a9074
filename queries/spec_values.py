"""Checks of one value in a query, each refusal naming its key: a list of strings, text the wire can carry, an
integer in range, a finite number, an option object (Gate, Lookup) parsed from its YAML or wire form.

Shared by the spec's own checks (queries/spec.py) and those of its answer kinds and topic: the same value is refused
in the same words wherever it is given. Each returns the value as the spec stores it (a list as a tuple, an int
number as a float) or raises the QuerySpecError of `fail`.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable
from typing import Any

from engine.yaml_files import yaml_kind
from queries.limits import excerpt
from queries.spec_errors import fail


def str_list(key: str, raw: Any, *, allow_scalar: bool = False) -> tuple[str, ...]:
    if allow_scalar and isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list | tuple):
        raise fail(key, f"{key} must be a list of strings, got {yaml_kind(raw)}")
    for i, s in enumerate(raw):
        if not isinstance(s, str) or not s:
            raise fail(key, f"{key}[{i}] must be a non-empty string, got {excerpt(s)}", i)
        wire_text(f"{key}[{i}]", s, i)
    return tuple(raw)


def wire_text(key: str, s: str, item: int | str | None = None) -> str:
    """`s`, refused if it cannot go on the wire: a lone surrogate (YAML's "\\ud800") has no UTF-8 form."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise fail(key, f"{key} {excerpt(s)} is not valid Unicode text (it holds a lone surrogate)", item) from None
    return s


def checked_int(key: str, raw: Any, lo: int, hi: int | None = None, item: int | None = None) -> int:
    # bool is an int subclass; `max_tokens: true` is a typo, not 1
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise fail(key, f"{key} must be an integer, got {excerpt(raw)}", item)
    if raw < lo or (hi is not None and raw > hi):
        bound = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise fail(key, f"{key} must be {bound}, got {excerpt(raw)}", item)
    return raw


def parsed_option(key: str, kind: Any, raw: Any) -> Any:
    """An option object (Gate, Lookup) as given, or parsed from its YAML/wire form; errors name the key."""
    if isinstance(raw, kind):
        return raw
    try:
        return kind.parse(raw)
    except (TypeError, ValueError) as e:
        raise fail(key, str(e)) from None


def finite_float(key: str, raw: Any, item: int | str | None = None) -> float:
    try:  # an int past the float range is refused here too
        finite = isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw)
    except OverflowError:
        finite = False
    if not finite:
        raise fail(key, f"{key} must be a finite number, got {excerpt(raw)}", item)
    return float(raw)


def _folded(word: str) -> str:
    return word.lower().replace("_", "").replace("-", "").replace(" ", "")


def meant_word(word: Any, options: Iterable[str]) -> str | None:
    """The one of ``options`` that ``word`` most likely misspells: the same but for case, `_`, `-` and spaces
    (`Choice`, `Direction_5`, `direction5`), else a close spelling (`choise`); None when none is close."""
    if not isinstance(word, str):
        return None
    options = list(options)
    same = [option for option in options if _folded(option) == _folded(word)]
    if len(same) == 1:
        return same[0]
    close = difflib.get_close_matches(word.lower(), options, n=1, cutoff=0.8)
    return close[0] if close else None


def did_you_mean(word: Any, options: Iterable[str]) -> str:
    """"; did you mean X?" after a refusal of ``word``, or "" (meant_word)."""
    meant = meant_word(word, options)
    return f"; did you mean {meant}?" if meant is not None and meant != word else ""
