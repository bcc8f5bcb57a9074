"""Stream-name patterns: the fnmatch glob rule shared by query `streams` (queries/spec.py) and the replay's stream
selection (connectors/stream_selection.py), below both layers so one rule serves them."""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Callable, Iterable

from engine.quoting import quoted

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
                return f"unclosed \"[\" at position {i}"
            i = close
        i += 1
    return None


def _folded(name: str) -> str:
    """A stream name as a close-match compares it: spaces dropped and case folded, so the compact OSI form
    `SPY241220C00450000` meets the padded `SPY   241220C00450000` and `es` meets `ES`."""
    return name.replace(" ", "").casefold()


def close_matches(pattern: str, names: Iterable[str], limit: int = 3) -> list[str]:
    """The names of `names` that `pattern` (matching none of them) was most likely meant to be: those equal to it
    (or, for a glob, matched by it) once spaces and case are folded, else difflib's closest on the folded forms."""
    by_folded: dict[str, list[str]] = {}
    for name in names:
        by_folded.setdefault(_folded(name), []).append(name)
    wanted = _folded(pattern)
    if GLOB_CHARS & set(pattern):
        glob = re.compile(fnmatch.translate(wanted))
        return sorted(name for folded, same in by_folded.items() if glob.match(folded) for name in same)[:limit]
    close = [wanted] if wanted in by_folded else difflib.get_close_matches(wanted, list(by_folded), n=limit)
    return [name for folded in close for name in sorted(by_folded[folded])][:limit]


def did_you_mean(patterns: Iterable[str], names: Iterable[str], written: Callable[[str], str] = str) -> str:
    """`; did you mean "X"?` (names quoted as every error quotes them: engine/quoting.py) for the patterns that
    have a close match among `names` (each named when more than one pattern missed), or "" when none has: the end
    of a 'matches none of the streams' message. ``written``: a name as what was given takes it (a pattern:
    glob_escaped)."""
    patterns, names = list(patterns), list(names)
    hints = []
    for pattern in patterns:
        if close := close_matches(pattern, names):
            meant = " or ".join(quoted(written(name)) for name in close)
            hints.append(meant if len(patterns) == 1 else f"{meant} for {quoted(pattern)}")
    return f"; did you mean {', '.join(hints)}?" if hints else ""


def glob_escaped(name: str, reserved: str = "") -> str:
    """``name`` as a glob that matches it alone: each glob character, and each of ``reserved`` (what an option's own
    syntax takes: --price-offset's `|`), in a set of its own (`ES[H27]` -> `ES[[]H27]`, `BZN|FR` -> `BZN[|]FR`)."""
    return "".join(f"[{c}]" if c in GLOB_CHARS or c in reserved else c for c in name)


def unmatched_hint(patterns: Iterable[str], names: Iterable[str]) -> str:
    """What ends a 'match none of the streams' message: for a pattern that is itself the name of one of ``names``
    (`ES[H27]`, the contract, read as a glob whose `[H27]` is one character of H, 2 or 7), the escaped glob that
    matches it; else the close names, each as a pattern matching it alone (``did_you_mean``: `EFF` for `eff`)."""
    patterns, names = list(patterns), list(names)
    held = set(names)
    literal = [p for p in patterns if GLOB_CHARS & set(p) and p in held]
    if literal:
        return "; " + "; ".join(f"the stream {quoted(p)} exists, and its name reads as a glob: write "
                                f"{quoted(glob_escaped(p))} to match it" for p in literal)
    return did_you_mean(patterns, names, glob_escaped)
