"""Stream-name patterns: the fnmatch glob rule shared by query `streams` (queries/spec.py) and the replay's stream
selection (connectors/stream_selection.py), below both layers so one rule serves them."""

from __future__ import annotations

GLOB_CHARS = frozenset("*?[")  # a pattern with none of these is an exact stream name


def unclosed_bracket(pattern: str) -> str | None:
    """Why `pattern` is not a usable fnmatch glob, or None (fnmatch itself treats a lone `[` as a literal)."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "[":
            j = i + 1
            if j < len(pattern) and pattern[j] == "!":
                j += 1
            if j < len(pattern) and pattern[j] == "]":
                j += 1  # a leading ']' is a member of the set, as in fnmatch
            close = pattern.find("]", j)
            if close < 0:
                return f"unclosed '[' at position {i}"
            i = close
        i += 1
    return None
