"""Which streams of a replay's files are read: fnmatch globs on the stream name as replay names it.

A vendor file of many instruments (a DBN file of NQ, ZN and 6E futures, a tick history of many RICs, a TAQ
file of every symbol) is read for the few a user names: `FileReplay(..., streams=["NQM6", "ES*"])`, or
`--streams` on the command line. Ticks of the other streams are counted as `filtered_out`, never dropped
silently, and a pattern that matches none of the streams the files hold is refused with the ones they do and the
closest of them (`SPY241220C00450000` for `SPY   241220C00450000`: engine/stream_patterns.py's unmatched_hint,
which writes a name holding a glob character as the pattern that matches it: `ES[[]H27]`).

Patterns are checked as query stream patterns are (the glob rule is engine/stream_patterns.py's, shared with
queries/spec.py).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence

from connectors.ticks import shown_name
from engine.quoting import quoted, quoted_list
from engine.stream_patterns import GLOB_CHARS, unclosed_bracket, unmatched_hint

SHOWN_STREAMS = 8  # streams named in a message; the rest counted


class NoStreamMatched(ValueError):
    """A selection pattern that matches none of the streams the files hold."""


def shown(names: Sequence[str]) -> str:
    """Stream names for a message: the first few, and how many there are in all."""
    more = f", ... ({len(names)} in all)" if len(names) > SHOWN_STREAMS else ""
    return ", ".join(map(shown_name, names[:SHOWN_STREAMS])) + more


class StreamSelection:
    """The streams a replay reads, by exact name or glob; checked when built, with messages a user can act on."""

    def __init__(self, patterns: str | Iterable[str]) -> None:
        patterns = [patterns] if isinstance(patterns, str) else list(patterns)
        if not patterns:
            raise ValueError("streams must name at least one stream or glob (None: every stream)")
        for pattern in patterns:
            if not isinstance(pattern, str) or not pattern:
                raise ValueError(f"streams: each must be a non-empty stream name or glob, got {quoted(pattern)}")
            if why := unclosed_bracket(pattern):
                raise ValueError(f"streams: {quoted(pattern)} is not a valid glob: {why}")
            if "/" in pattern:  # replay renames EUR/USD to EUR-USD: answer topics use '/'
                raise ValueError(f"streams: {quoted(pattern)} has a \"/\", which no replayed stream name has (EUR/USD "
                                 f"replays as EUR-USD): select {quoted(pattern.replace('/', '-'))}")
            if pattern.startswith("_") or pattern != pattern.strip(" "):
                raise ValueError(f"streams: {quoted(pattern)} starts with \"_\" or a space, or ends with a space, "
                                 "which no stream name does: it would match no stream")
        self.patterns = tuple(dict.fromkeys(patterns))
        self._exact = frozenset(p for p in self.patterns if not GLOB_CHARS & set(p))
        self._globs = tuple(re.compile(fnmatch.translate(p)) for p in self.patterns if GLOB_CHARS & set(p))

    def matches(self, stream: str) -> bool:
        return stream in self._exact or any(glob.match(stream) for glob in self._globs)

    def unmatched(self, streams: Iterable[str]) -> list[str]:
        """The patterns that match none of `streams`."""
        streams = list(streams)
        return [p for p in self.patterns if not any(StreamSelection([p]).matches(s) for s in streams)]

    def check(self, held: Iterable[str]) -> str:
        """The note naming the streams kept of those the files hold; NoStreamMatched for a pattern that matches
        none of them (a typo must not run on nothing, or on fewer instruments than asked for)."""
        held = sorted(set(held))
        if missing := self.unmatched(held):
            raise NoStreamMatched(f"streams {quoted_list(missing)} match none of the streams the files hold "
                                  f"({shown(held) or 'none'}){unmatched_hint(missing, held)}")
        kept = [s for s in held if self.matches(s)]
        return (f"streams selected {self.quoted()}: {shown(kept)}, {len(kept)} of the {len(held)} the "
                f"files hold; the others' ticks are left out and counted as filtered_out")

    def quoted(self) -> str:
        """The patterns as a message names them, each quoted as JSON writes it (engine/quoting.py): `["ICE:BRN F7",
        "EPEX:DE H13"]`, not four words, nor a Python list."""
        return quoted_list(self.patterns)

    def __repr__(self) -> str:
        return f"StreamSelection({list(self.patterns)!r})"
