"""Stream names that print alike: `LOOK.A`, `LOOK\u2024A` (ONE DOT LEADER), fullwidth `ＬＯＯＫ.A` and `LOOK\uff0eA`
(FULLWIDTH FULL STOP) are four valid names, one for Unicode NFKC. Each is a fine name alone (a CJK vendor's names
may hold fullwidth characters), so none is refused for its form; a NEW name that NFKC folds to the fold of a name
the service knows already (held, expired, or remembered as refused) is refused as `bad_stream`, naming that one,
so one instrument is not split into streams that look the same in topics, logs and `flashtick streams`.

Characters that print as nothing are left out of the fold: Unicode's default-ignorable code points (a combining
grapheme joiner, variation selectors, Mongolian free variation selectors, the Hangul fillers, tags) and the blank
braille pattern, which `str.isprintable` passes and NFKC keeps: `LOOK.A` + U+034F printed as `LOOK.A` and was a
stream of its own (review406 #5). The fold keeps case (NFKC, not casefold): `look.a` is a stream of its own, as it
always was. The rule is for the wire (StreamEncoders' live ingest, the one place names come in, for one engine and
for a sharded front door alike); a tick log's names replay as they were logged, an earlier version's lookalikes
included.
"""

from __future__ import annotations

import re
import unicodedata

from connectors.stream_names import _excerpt  # (the one way a refused name is quoted: escaped, cut)
from connectors.tick_errors import InvalidTick


# Default_Ignorable_Code_Point (Unicode's DerivedCoreProperties.txt) but for the format characters (Cf) and
# unassigned ones that `str.isprintable` refuses already, and U+2800 BRAILLE PATTERN BLANK, which renders as a space
_PRINTS_AS_NOTHING = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2800\u3164\ufe00-\ufe0f\uffa0"
                                "\U000e0000-\U000e0fff]")


def nfkc_fold(stream: str) -> str:
    """The name as NFKC writes it, case kept, less what prints as nothing (an ASCII name is its own fold)."""
    if stream.isascii():
        return stream
    return _PRINTS_AS_NOTHING.sub("", unicodedata.normalize("NFKC", _PRINTS_AS_NOTHING.sub("", stream)))


class LookalikeNames:
    """The names known, by their fold, each with who holds it ("encoders": held or expired there; "refused": the
    service's memory of streams it refused): a name is known while anyone holds it. Adding and discarding are
    idempotent, so each holder says what it knows without counting."""

    def __init__(self) -> None:
        self._by_fold: dict[str, dict[str, set[str]]] = {}  # fold -> {name: its holders}, the first known first

    def add(self, stream: str, holder: str) -> None:
        self._by_fold.setdefault(nfkc_fold(stream), {}).setdefault(stream, set()).add(holder)

    def discard(self, stream: str, holder: str) -> None:
        fold = nfkc_fold(stream)
        names = self._by_fold.get(fold, {})
        holders = names.get(stream)
        if holders is None:
            return
        holders.discard(holder)
        if not holders:
            del names[stream]
            if not names:
                del self._by_fold[fold]

    def lookalike(self, stream: str) -> str | None:
        """The known name ``stream`` would print like (the first known of its fold), None when there is none."""
        names = self._by_fold.get(nfkc_fold(stream))
        return None if not names or stream in names else next(iter(names))

    def check_new(self, stream: str) -> None:
        """Raise bad_stream (carrying ``stream``: a valid name) when another known name has its fold."""
        known = self.lookalike(stream)
        if known is None:
            return
        folded = next((f" (U+{ord(c):04X} {unicodedata.name(c, '')} in {_excerpt(name)})" for name in (stream, known)
                       for c in name if unicodedata.normalize("NFKC", c) != c or _PRINTS_AS_NOTHING.match(c)), "")
        known, fold = (_excerpt(name, readable=True) for name in (known, nfkc_fold(stream)))  # (printable names)
        raise InvalidTick("bad_stream", f"stream {_excerpt(stream)} prints like {known}, a stream this service knows "
                                        f"already: Unicode NFKC, less what prints as nothing, folds both to "
                                        f"{fold}{folded}, and two such streams "
                                        f"look the same in topics, logs and `flashtick streams`; send its ticks as "
                                        f"{known} if it is that instrument, or give it a name of its own", stream)
