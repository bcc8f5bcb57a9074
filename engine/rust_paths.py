"""File paths handed to the libraries written in Rust (polars, safetensors), whatever the locale.

Python names a file by the str its file-system encoding (the locale's) decodes from the name's bytes; such a library
encodes the str it is given as UTF-8. Under a UTF-8 locale the two agree. Under Latin-1 a file named `é` (UTF-8
bytes c3 a9) is the str 'Ã©' to Python and was opened by polars as c3 83 c2 a9: "No such file" for a file that
exists, and an output folder's part "vanished" ("another process removed the folder"); under an ASCII locale the str
holds surrogate escapes, which polars took for no path at all ("Object does not have a .read() method"). `rust_path`
gives the str whose UTF-8 is the name's own bytes. `written_path` goes the other way, for a path written in a UTF-8
text file (a config's `model.path`, a replay list's entries): Python's str for the file whose name is those bytes.
"""

from __future__ import annotations

import codecs
import locale
import os
import sys
from pathlib import Path

from engine.quoting import quoted


def rust_path(path: str | Path) -> str:
    """``path`` as a Rust library must be given it (see the module's docstring); itself, as a str, under a UTF-8
    file-system encoding. A name whose bytes are not UTF-8 (a file named under a Latin-1 locale) cannot be given to
    such a library at all: ValueError naming the path and the locale."""
    if _utf8_names():
        return str(path)
    raw = os.fsencode(path)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{quoted(str(path), limit=len(str(path)))}: this file name's bytes are not UTF-8 (the "
                         f"locale's encoding is {locale.nl_langinfo(locale.CODESET)}), and polars and safetensors, "
                         "which read and write these files, take UTF-8 names only; rename it (e.g. convmv -f latin1 "
                         "-t utf-8 --notest FILE) or copy it to an ASCII name") from None


def written_path(text: str) -> str:
    """A path as a UTF-8 text file writes it (engine.text_files), as Python names that file: its UTF-8 bytes decoded
    by the file-system encoding (itself under a UTF-8 one). Under Latin-1 `données/` from a config becomes
    'donnÃ©es/', which os.stat encodes back to the name's bytes; left as read, Python would look for byte 0xe9 for
    `é`, another name (and under an ASCII locale could not encode it at all)."""
    if _utf8_names():
        return text
    return os.fsdecode(text.encode("utf-8", "surrogateescape"))


def _utf8_names() -> bool:
    """Whether Python's file-system encoding is UTF-8 (a UTF-8 locale, or Python's UTF-8 mode): nothing to convert."""
    return codecs.lookup(sys.getfilesystemencoding()).name == "utf-8"
