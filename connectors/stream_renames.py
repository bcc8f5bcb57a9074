"""A live feed's names to the streams the engine keeps: `serve`'s `ingest.rename` and `ingest.slashes`, applied to
every wire tick before its checks and to the stream a `get`, `ask` or `forget` names (review379 #7).

* `rename` maps a venue's name to a stream name, one name each (`BTC-USD: BTC.coinbase`), or by a pattern: a key
  with `*` matches any name of that shape, each `*` some text, and its value holds as many `*`, each the text the
  key's matched, in order (`"*/*": "*-*.lmax"`: `EUR/USD` -> `EUR-USD.lmax`; `"*/*": "**"`: `EURUSD`), so an ECN's
  thirty pairs, and one added upstream, need one entry. A name is looked up whole first, then against the
  patterns in the order written; the first that matches names it.
* `slashes: dash` reads a `/` in a name as file replay does (connectors/stream_names.dashed_name: `EUR/USD` ->
  `EUR-USD`, one rule for files and the wire), for a name `rename` left as it was; `refuse` (the default) keeps
  the wire's `bad_stream` refusal, since `BTC-USD` may be another venue's own name, and merging the two is the
  desk's choice to make.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from connectors.stream_names import dashed_name

SLASH_POLICIES = ("refuse", "dash")  # ingest.slashes: what a '/' in a live stream's name does


def rename_pattern(source: str, target: str) -> re.Pattern[str]:
    """The regex of a pattern key (`*/*`), each `*` a group of one character or more, the last greedy; ValueError
    when the value does not hold as many `*` as the key."""
    stars = source.count("*")
    if target.count("*") != stars:
        raise ValueError(f"the pattern {source!r} holds {stars} '*' and its stream name {target!r} holds "
                         f"{target.count('*')}: each '*' of the name is the text a '*' of the pattern matched, in "
                         f"order")
    if source.replace("*", "") == "":
        raise ValueError(f"the pattern {source!r} is '*' alone: it would rename every stream; name a separator "
                         f"(`\"*/*\": \"*-*\"`)")
    parts = [re.escape(part) for part in source.split("*")]
    return re.compile("".join(part + ("(.+?)" if i < stars - 1 else "(.+)") for i, part in enumerate(parts[:-1]))
                      + parts[-1] + r"\Z", re.DOTALL)


class StreamRenames:
    """``ingest.rename`` (exact names and patterns) and ``ingest.slashes``, as a live name's reading."""

    def __init__(self, rename: Mapping[str, str], slashes: str = "refuse") -> None:
        self.exact = {source: target for source, target in rename.items() if "*" not in source}
        self.patterns = [(rename_pattern(source, target), target.split("*"))
                         for source, target in rename.items() if "*" in source]
        self.dash = slashes == "dash"

    def __bool__(self) -> bool:
        """Whether any name is read otherwise than as sent (none: a message goes on untouched)."""
        return bool(self.exact or self.patterns or self.dash)

    def renamed(self, name: str) -> str:
        """The stream a live name is kept as: ``name`` itself where nothing renames it."""
        if (target := self.exact.get(name)) is not None:
            return target
        for pattern, pieces in self.patterns:
            if (found := pattern.match(name)) is not None:
                return "".join(piece + (found[i + 1] if i < len(pieces) - 1 else "") for i, piece in enumerate(pieces))
        return dashed_name(name) if self.dash and "/" in name else name
