"""The stream-name rules (`check_stream`: printable text of at most `MAX_STREAM_BYTES` UTF-8 bytes, no '/', no
leading '_', no space at either end; `check_normalized`: Unicode NFC on the wire), what a refusal or a hint says of a
name (`slash_hint`, `venue_caution`), and how a name is shown in a line of output (`shown_name`).

Apart from connectors/ticks.py because a name is checked and shown wherever streams are named (ingest, control
requests, file replay, the CLI), not only in a tick.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from connectors.tick_errors import InvalidTick
from engine.quoting import quoted
from connectors.wire_values import check_text

MAX_STREAM_BYTES = 128  # the service's default for limits.max_stream_bytes
EMPTY_NAME = "an empty name (\"\", as kdb+ writes its null symbol)"
# A spreadsheet's or a terminal's error value in a cell (Bloomberg's `#N/A N/A`, `#N/A Invalid Security`: a ticker
# that did not resolve; Excel's `#VALUE!`, `#REF!`): no instrument's name, so a file's stream cell holding one is
# read as empty (missing_stream, its text named), never as a stream of its own (review291 #2)
ERROR_CELL = r"^#(N/A(\s.*)?|VALUE!|REF!|DIV/0!|NUM!|NAME\?|NULL!|SPILL!|CALC!|GETTING_DATA)$"


def error_cell_hint(text: str | None) -> str:
    """What a stream cell read as empty holds when it is an error value (ERROR_CELL); '' otherwise."""
    if text is None or not re.match(ERROR_CELL, text.strip()):
        return ""
    return (f": {quoted(text.strip())} is a spreadsheet or terminal error value (a ticker that did not resolve), no "
            f"instrument's name: fix the cell at the source")


# The one rule for a '/' in an instrument's name (`EUR/USD`), which no stream name holds since answer topics use it as
# their separator: file replay (a symbol column, a Hive partition's value, --price-offset's names) and, with
# ingest.slashes: dash, live ingest read it as this (review379 #7: one pair was EUR-USD in files and refused live)
SLASH, SLASH_AS = "/", "-"


def dashed_name(name: str) -> str:
    """``name`` with each '/' read as '-' (`EUR/USD` -> `EUR-USD`): the shared rule (SLASH_AS)."""
    return name.replace(SLASH, SLASH_AS)


def slash_hint(name: str) -> str:
    """For a name asked for that has a '/' (`EUR/USD`), which no stream has: the name file replay gives that
    instrument (`EUR-USD`), else ""."""
    if not isinstance(name, str) or "/" not in name or len(name) > 64:
        return ""
    return f" (no stream name has a '/', which answer topics use as their separator: file replay names " \
           f"{quoted(name)} {quoted(dashed_name(name))}{venue_caution(dashed_name(name))})"


def venue_caution(dashed: str) -> str:
    """What to know before sending `BTC/USD` as `BTC-USD`, said wherever '/' -> '-' is suggested or done: that may be
    another venue's own name for the instrument (Coinbase's), and one engine fed by both would merge their ticks.
    The example name is quoted as JSON writes it (engine/quoting.py), in a wire error and a file's note alike."""
    example = f", e.g. {quoted(dashed + '.kraken')}" if len(dashed) <= 32 else ""
    return f"; it may be another venue's name too: name it by venue{example}"  # (a rejection is kept short)


def check_stream(stream: Any, max_bytes: int = MAX_STREAM_BYTES, venue_name: bool = False) -> str:
    """The one stream-name rule, for raw and pre-tokenized ticks alike.

    A name is a non-empty str of at most `max_bytes` UTF-8 bytes whose characters
    are all printable (`str.isprintable`: no control character or NUL, no format
    character such as a bidi override or a zero-width one, no line or paragraph
    separator, no surrogate, no private-use or unassigned code point, and no
    space but the ASCII one), with no '/', no leading '_' and no space at either
    end. Anything else is `bad_stream`, with the rule it broke. ``venue_name``: a
    venue's name that a service renames before it checks it (`ingest.rename`,
    `ingest.slashes: dash`), so the last three rules, which a rename can mend,
    are left to the service (review392 #10).
    """
    if stream is None:
        raise InvalidTick("missing_stream", "field \"stream\" is required and must be non-empty")
    if stream == "":  # kdb+'s null symbol (` `), a blank cell read as text: said as empty, not as absent
        raise InvalidTick("missing_stream", f"field \"stream\" is {EMPTY_NAME}: a stream name is required")
    check_text("stream", stream)
    if len(stream) > max_bytes:  # a character is at least one byte: a 1 MB name stops here, unread
        raise InvalidTick("bad_stream", f"stream name of {len(stream)} characters (so at least as many UTF-8 bytes) "
                                        f"is longer than {max_bytes} bytes")
    if not stream.isprintable():
        bad = next(c for c in stream if not c.isprintable())
        raise InvalidTick("bad_stream", f"stream {_excerpt(stream)} contains {_describe(bad)}; names must be printable")
    size = len(stream.encode())  # cannot fail: surrogates are not printable
    if size > max_bytes:
        raise InvalidTick("bad_stream", f"stream name of {size} UTF-8 bytes is longer than {max_bytes} bytes")
    if venue_name:
        return stream
    if "/" in stream:  # answer topics are "<query>/<stream>/": a '/' would make prefix subscriptions ambiguous
        dashed = dashed_name(stream)
        named = f"{quoted(dashed)}{venue_caution(dashed)}"
        raise InvalidTick("bad_stream", f"stream {_excerpt(stream, 64)} contains \"/\", which answer topics use as a "
                                        f"delimiter (file replay names it {named})")
    if stream[0] == "_":
        raise InvalidTick("bad_stream", f"stream {_excerpt(stream, 64)} starts with \"_\": topics starting with "
                                        "\"_\" are the service's own (_heartbeat/, _rejects/)")
    if stream[0] == " " or stream[-1] == " ":
        raise InvalidTick("bad_stream", f"stream {_excerpt(stream, 64)} starts or ends with a space")
    return stream


def check_normalized(stream: str) -> str:
    """A wire stream name is in Unicode NFC: `Société` sent with a precomposed é and with e + U+0301 would be two
    streams that print alike. Refused as `bad_stream`, naming the form to send; file replay normalises its names
    instead (macOS writes file names in NFD). Not part of `check_stream`, which a tick log's names pass through
    again at a restart: a name an earlier version accepted is not refused there."""
    if not stream.isascii() and not unicodedata.is_normalized("NFC", stream):
        nfc = unicodedata.normalize("NFC", stream)
        raise InvalidTick("bad_stream", f"stream {_excerpt(stream)} is not in Unicode NFC: send it as "
                                        f"{_excerpt(nfc, readable=True)} (its NFC form), so that one name is one "
                                        f"stream")
    return stream


_CATEGORY_NAMES = {"Cc": "a control character", "Cf": "a format character", "Cs": "a surrogate",
                   "Co": "a private-use character", "Cn": "an unassigned code point", "Zl": "a line separator",
                   "Zp": "a paragraph separator", "Zs": "a space other than ' '"}


def _describe(char: str) -> str:
    name = unicodedata.name(char, "")
    what = _CATEGORY_NAMES.get(unicodedata.category(char), "a non-printable character")
    return f"U+{ord(char):04X}{' ' + name if name else ''} ({what})"


def _excerpt(stream: str, limit: int = 32, readable: bool = False) -> str:
    """The start of a refused name, quoted as JSON writes it with every character past ASCII escaped, so that it
    cannot reorder or hide text where it is shown; ``readable``: a name to use instead (an NFC form), its printable
    letters kept."""
    return quoted(stream[:limit], ascii_only=not readable) + ("..." if len(stream) > limit else "")


def shown_name(name: str) -> str:
    r"""A stream name (a topic, a pattern) for a line of output, by one rule: as it is when it reads as itself; in
    quotes as Python writes a string (repr) when it holds a backslash, a quote or a character that does not print:
    backslashes doubled, a control character or bidi mark escaped, printable letters kept (`Société`). So
    `C:\feed\ES` shows as 'C:\\feed\\ES', and a name with a backslash and an n in it cannot be read as one
    with a newline (nor a name in quotes as a quoted name)."""
    if name.isprintable() and not any(c in name for c in "\\'\""):
        return name
    return repr(name)
