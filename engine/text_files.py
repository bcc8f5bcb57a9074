"""The text files flashtick reads and writes (YAML queries, configs, column maps, replay lists; JSON model files,
manifests and scores) are UTF-8 whatever the locale.

Python's own ``read_text()`` and ``open()`` decode in the locale's encoding: under a Latin-1 locale a UTF-8 query
file's `Société` was registered as `SociÃ©tÃ©` (exit 0, a query that never answers), and under an ASCII one it
failed with a codec error naming no file. YAML and JSON are UTF-8 by their own specs, and `serve --queries` read
them so already; every reader goes through here, and a file that is not UTF-8 is refused naming it, the line, and
how to convert it. Writers pass ``encoding="utf-8"`` (ENCODING) themselves.
"""

from __future__ import annotations

import shlex
from pathlib import Path

ENCODING = "utf-8"


class NotUtf8Error(ValueError):
    """A text file that is not UTF-8: `PATH: reason`, the reason naming the line and the command that converts it
    (``reason`` alone, for a caller whose errors name the file their own way)."""

    def __init__(self, path: str | Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.reason = reason


def read_text(path: str | Path) -> str:
    """``path``'s text, decoded as UTF-8 whatever the locale (a leading byte-order mark dropped: JSON refuses one,
    and YAML ignores it); NotUtf8Error when it is not UTF-8, OSError as ``read_bytes`` raises it."""
    return decode_text(Path(path).read_bytes(), path)


def decode_text(data: bytes, path: str | Path) -> str:
    """The bytes of the text file ``path`` as text (read_text), for a caller that read them itself."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        shown = shlex.quote(str(path))
        converted = shlex.quote(str(Path(path).with_name(f"utf8_{Path(path).name}")))
        raise NotUtf8Error(path, f"its text is not UTF-8 (line {line}: byte 0x{data[e.start]:02x}), and flashtick "
                                 f"reads it as UTF-8 whatever the locale; save it as UTF-8, e.g. iconv -f cp1252 -t "
                                 f"utf-8 {shown} > {converted} (-f: the encoding it was written in)") from None
