"""Tick files that come zipped: a `.zip` of tick files (Binance's public data, a file a day; OKX's history;
many vendors' downloads) is unpacked into a private temporary folder and read like those files, given in
the archive's order.

Each unpacked copy keeps its member's own name under folders named as the archive's folder (and, above a day's
folder, the one that names the instrument: connectors/day_folders.py), so a symbol in either name still names the
stream (connectors/file_names.py `symbol_in_name`). The archive, not the copy, is
what a replay's fingerprint, a backtest's run key and rejected rows' locations name.
"""

from __future__ import annotations

import functools
import gzip
import re
import shlex
import shutil
import tempfile
import zipfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Callable, Iterator, NamedTuple

import polars as pl

from connectors.day_folders import folder_chain
from connectors.expansion import MEMBERS_VARIABLE, Bounded, bounded_gzip, expansion_limits
from connectors.text_encodings import Encoding, likely_encodings
from connectors.unreadable_files import UnreadableFile
from engine.quoting import quoted

ZIP_SUFFIX = ".zip"
COMPRESSED_SUFFIXES = (".gz", ".zst", ZIP_SUFFIX)
# how gzip, polars and zstd say a compressed file ended before its data did
CUT_SHORT = re.compile(r"end-of-stream|end of (file|stream)|unexpected end|truncated|incomplete frame", re.I)
TRUNCATED = "it looks truncated (an interrupted download?): download it again"
DAMAGED_SAID = "the file is corrupt (a download or a disk that changed its bytes?): download it again"


# how zlib, gzip and polars say compressed data is damaged (bytes changed, not cut): a CRC or a code that fails
DAMAGED = re.compile(r"crc|corrupt|invalid (distance|block|code|stored|literal)|incorrect (header|data)|"
                     r"decompress|not a gzipped file|checksum", re.I)


@contextmanager
def truncation_named(path: Path, name: str | None = None) -> Iterator[None]:
    """Reading a compressed file (`.csv.gz`, `.dbn.zst`, ...) that ends before its compressed data does, or whose
    data is damaged (a CRC that fails, an invalid code): the error names the file (`name`: as the user gave it, an
    archive's member) and says it looks truncated or damaged, where gzip's and zlib's own words ("Compressed file
    ended before the end-of-stream marker was reached", "CRC check failed", "Error -3 while decompressing data")
    or polars' ("unexpected end of file") name none; as is a zip archive's member whose CRC fails as it is unpacked
    (zipfile's "Bad CRC-32 for file 'AAPL.csv'"). zlib.error and zipfile.BadZipFile are neither an OSError nor an
    EOFError; databento-dbn's zstd reader raises a RuntimeError ("Restored data doesn't match checksum")."""
    try:
        yield
    except (EOFError, OSError, zlib.error, zipfile.BadZipFile, pl.exceptions.ComputeError, RuntimeError) as e:
        if not path.name.lower().endswith(COMPRESSED_SUFFIXES):
            raise
        if isinstance(e, EOFError) or CUT_SHORT.search(str(e)):
            raise UnreadableFile(f"{name or path}: its compressed data ends early ({e}); {TRUNCATED}") from None
        if isinstance(e, (zlib.error, gzip.BadGzipFile, zipfile.BadZipFile)) or DAMAGED.search(str(e)):
            raise UnreadableFile(f"{name or path}: its compressed data is damaged ({e}); {DAMAGED_SAID}") from None
        raise


def is_zip(path: Path) -> bool:
    return path.name.lower().endswith(ZIP_SUFFIX)


def text_opener(path: Path | str) -> Callable[..., IO[Any]]:
    """How a text file's text is opened: a `.gz` file's (FXCM's gzipped UTF-16) decompressed, so every check of its
    encoding and lines sees what its copy and polars read, not gzip's bytes. Bounded (connectors/expansion.py): a
    gzip bomb is refused by name at its first full read, before polars decompresses it."""
    return bounded_gzip if str(path).lower().endswith(".gz") else open


def utf16_encoding(path: Path) -> str | None:
    """The encoding of a UTF-16 text file (MetaTrader's and some Windows tools' exports, FXCM's `.csv.gz`): "utf-16"
    when it starts with a byte-order mark, "utf-16-le"/"-be" without one when enough characters of its first TEXT_HEAD
    bytes are ASCII, a zero byte after/before each (`_zero_high_bytes`); None for anything else. So large a
    sample, not the first line: a CJK vendor's header of Chinese column names can fill the first 256 bytes with
    characters of no zero byte; its rows of digits and separators past it tell."""
    try:
        with text_opener(path)(path, "rb") as f:
            head = f.read(TEXT_HEAD)
    except (OSError, EOFError):  # (the read that plans it says why)
        return None
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return "utf-16"
    head = head[: len(head) // 2 * 2]
    if len(head) < 8:
        return None
    evens, odds = head[0::2], head[1::2]
    if _zero_high_bytes(odds, evens):
        return "utf-16-le"
    if _zero_high_bytes(evens, odds):
        return "utf-16-be"
    return None


def _zero_high_bytes(high: bytes, low: bytes) -> bool:
    """Whether a text file's first characters, as pairs of bytes, are UTF-16 with these high and low bytes: a
    quarter of them or more ASCII (a zero high byte: a CSV's digits, separators and line ends), and few zero low
    bytes. Not every one, nor half: a header's `€` (0x20AC) has a high byte that is not zero, and a CJK vendor's
    header and symbol names are mostly such characters. Text in one-byte encodings and UTF-8 has no zero bytes at
    all; a CJK character may have a zero low byte (U+4E00), hence few, not none."""
    zero_high, zero_low = high.count(0), low.count(0)
    return 4 * zero_high >= len(high) and 4 * zero_low < zero_high


UNZIP_PREFIX = "flashtick-unzip-"  # the temporary folder an archive's members are unpacked into (`Unpacked`)
TEXT_HEAD = 1 << 16  # bytes of a text file checked for UTF-8
COPY_CHARS = 1 << 20  # characters a text copy (`Unpacked.text_copy`) reads and writes at a time


def not_utf8(path: Path) -> str | None:
    """Why a text file that is not UTF-16 cannot be read as UTF-8 (polars reads UTF-8 only): its first line that
    is not, with the likely encoding and the command that converts it, which names the file by the path as given (it
    pastes where the user ran ours; an archive's member by its name); None when all of it is UTF-8. The whole file
    is checked once (`_first_not_utf8`: a Euronext export's `Société Générale` may first come at line 1,500), so
    the read is decided before it starts. The encoding named is the one whose reading looks like words of its
    script (connectors/text_encodings.py), two when the text cannot tell them apart."""
    if (found := _legacy_text(path)) is None:
        return None
    line, likely = found
    if not likely:
        return f"its text is not UTF-8 (line {line}); convert it to UTF-8 (iconv -f ENCODING -t utf-8)"
    source, converted = _iconv_command(path, likely[0].iconv)
    if len(likely) > 1:  # the sample cannot tell: both named, the user sees which text reads right
        return (f"its text is not UTF-8 (line {line}): it reads as {likely[0].said} or as {likely[1].said}, which "
                f"its text cannot tell apart; convert it with the one whose text reads right, e.g. {source} > "
                f"{shlex.quote(converted)} (or iconv -f {likely[1].iconv})")
    return (f"its text is not UTF-8 (line {line}): it reads as {likely[0].said}; convert it first, e.g. {source} > "
            f"{shlex.quote(converted)}")


def legacy_encoding(path: Path) -> tuple[Encoding, str] | None:
    """The one encoding a text file that is neither UTF-8 nor UTF-16 is in (Windows-1252, GBK, Shift_JIS, ...), and
    what a note says of its reading, with the command that converts it should its text still read wrong; None for a
    file of UTF-8. A ValueError, the command first, where its text cannot tell which (two readings, or none): read
    as UTF-8, each such byte replaced, a German export's `Stück` was no size column and every trade had size 1
    (review373 #3)."""
    if (found := _legacy_text(path)) is None:
        return None
    line, likely = found
    if len(likely) != 1:
        raise ValueError(f"{_shown(path)}: {not_utf8(path)}; then replay the converted file (replay reads UTF-8 "
                         f"and UTF-16, and a text whose encoding it can tell)")
    source, converted = _iconv_command(path, likely[0].iconv)
    return likely[0], (f"its text is {likely[0].said}, not UTF-8 (from line {line}), and is read as such; were its "
                       f"names or symbols to read wrong, convert it to UTF-8 first, e.g. {source} > "
                       f"{shlex.quote(converted)}, with the encoding it is in")


def _legacy_text(path: Path) -> tuple[int, list[Encoding]] | None:
    """(the first line that is not UTF-8, its likely encodings) of a text file, None when it is all UTF-8."""
    try:
        stat = path.stat()
        found = _first_not_utf8(str(path), stat.st_size, stat.st_mtime_ns)
    except (OSError, EOFError):
        return None
    if found is None:
        return None
    line, sample = found
    return line, likely_encodings(sample)


def _shown(path: Path) -> str:
    """A file as the user knows it: an archive's member, unpacked in a temporary folder, by its name."""
    return path.name if any(part.startswith(UNZIP_PREFIX) for part in path.parts) else str(path)


def _iconv_command(path: Path, iconv: str) -> tuple[str, str]:
    """The command that converts a file from `iconv` to UTF-8, and the file it writes."""
    shown = _shown(path)
    gzipped = shown.lower().endswith(".gz")
    converted = str(Path(shown).with_name(f"utf8_{Path(shown).name[:-3] if gzipped else Path(shown).name}"))
    # iconv reads bytes as they are: a gzipped file's text is what `gunzip -c` gives, not the file itself
    source = f"gunzip -c {shlex.quote(shown)} | iconv -f {iconv} -t utf-8" if gzipped else \
        f"iconv -f {iconv} -t utf-8 {shlex.quote(shown)}"
    return source, converted


SCAN_CHUNK = 1 << 20  # bytes of a text file checked for UTF-8 at a time (an ASCII chunk at C speed)


@functools.lru_cache(maxsize=32)
def _first_not_utf8(path: str, size: int, mtime_ns: int) -> tuple[int, bytes] | None:
    """(line, up to TEXT_HEAD bytes from that line's start) of a text file's first line that is not UTF-8, else
    None; a `.gz` file's text decompressed. Cached by the file's size and time (several steps of one read ask).
    Lines are counted only once such a byte is found: a file of UTF-8 is read once, at the speed of `isascii`."""
    opener = text_opener(path)
    done, carry = 0, b""  # bytes checked before `text`
    with opener(path, "rb") as f:
        while (chunk := f.read(SCAN_CHUNK)) or carry:
            text, carry = carry + chunk, b""
            try:
                text.isascii() or text.decode("utf-8")
            except UnicodeDecodeError as e:
                if e.end == len(text) and chunk and e.reason == "unexpected end of data":  # cut by the chunk
                    done, carry = done + e.start, text[e.start:]
                    continue
                bad = done + e.start
                break
            done += len(text)
        else:
            return None
    lines, line_start, at = 1, 0, 0  # counted again up to the byte found, a chunk at a time
    with opener(path, "rb") as f:
        while at < bad:
            chunk = f.read(min(SCAN_CHUNK, bad - at))
            if (last := chunk.rfind(b"\n")) >= 0:
                lines, line_start = lines + chunk.count(b"\n"), at + last + 1
            at += len(chunk)
        f.seek(max(line_start, bad - TEXT_HEAD // 2))  # (a line past half of TEXT_HEAD: the bytes before the one)
        return lines, f.read(TEXT_HEAD)


class TextCopy(NamedTuple):
    """Why a CSV is read through a copy (``Unpacked.text_copy``): what polars could not read in it as it is."""

    encoding: str | None  # a UTF-16 file's (utf16_encoding): polars reads UTF-8 only
    cr_lines: bool  # its lines end in \r alone: polars ends lines at \n only, and read the file as one line
    # a \r alone inside its first line (`size\r\r1722...\r\n`: text converted twice): polars read the header and
    # the first row as one line, that row lost without a count and the header's last name misread (review309 #7)
    cr_inside: bool = False
    legacy: str = ""  # a legacy encoding's reading (`legacy_encoding`: Windows-1252, GBK, ...), as its note says it


def text_copy_needed(path: Path) -> TextCopy | None:
    """How a CSV must be copied before polars can read it (``Unpacked.text_copy``): UTF-16 text, text of one legacy
    encoding (`legacy_encoding`: Windows-1252, GBK, Big5, Shift_JIS, ...; a ValueError where its text cannot tell
    which), or lines ended by \\r alone (classic Mac OS, and Excel for Mac's "CSV (Macintosh)"), told by its first
    TEXT_HEAD bytes holding a \\r and no \\n; None when it reads as it is."""
    encoding, legacy = utf16_encoding(path), ""
    if encoding is None and (found := legacy_encoding(path)) is not None:
        encoding, legacy = found[0].python, found[1]
    try:
        with text_opener(path)(path, "rb") as f:
            head = f.read(TEXT_HEAD)
    except (OSError, EOFError):  # (the read that plans it says why)
        head = b""
    if encoding is not None and not legacy:  # a UTF-16 \r or \n is two bytes, one of them maybe part of another
        head = head.decode(encoding, errors="replace").encode()
    cr_lines = b"\r" in head and b"\n" not in head
    cr_inside = not cr_lines and LONE_CR.search(head.split(b"\n", 1)[0]) is not None
    return TextCopy(encoding, cr_lines or cr_inside, cr_inside and not cr_lines, legacy) \
        if encoding is not None or cr_lines or cr_inside else None


LONE_CR = re.compile(rb"\r(?=[^\r\n])")  # a \r that ends no line (`\r\r\n`, Windows' doubled CR, ends one)


def tick_members(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The files of an archive, less folders and the metadata some archivers add (`__MACOSX/`, `._*`)."""
    return [m for m in archive.infolist() if not m.is_dir() and not m.filename.startswith("__MACOSX/")
            and not Path(m.filename).name.startswith("._")]


def member_names(archive_path: Path) -> dict[str, str]:
    """An archive's tick files' names inside it (their folders included) by their own names, as `Unpacked` names
    its copies: one name to a member, since an archive holding a name in two folders is refused."""
    with zipfile.ZipFile(archive_path) as archive:
        return {Path(m.filename).name: m.filename for m in tick_members(archive)}


class TemporaryFolder:
    """Owns ``_dir``, a temporary folder of copies, removed on close (or when the object is collected)."""

    _dir: str | None = None

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __del__(self) -> None:
        self.close()


class Unpacked(TemporaryFolder):
    """One archive's files, unpacked; ``paths`` are readable until ``close`` (or garbage collection)."""

    def __init__(self, archive_path: Path, is_ticks: Callable[[Path], bool] = lambda _: True) -> None:
        """``is_ticks``: whether a member's name is a tick file's; the others are not unpacked but named in
        ``left_out`` (a `.DS_Store` Finder adds, a vendor's `notes.pdf`)."""
        self.archive = archive_path
        self._dir: str | None = None
        self.transcoded = ""  # a text file's copy (`text_copy`), not an archive's members: how it was read
        try:
            archive = zipfile.ZipFile(archive_path)
        except zipfile.BadZipFile as e:  # a zip's directory is at its end: a cut download has none
            with open(archive_path, "rb") as f:
                cut = f"; {TRUNCATED}" if f.read(4) == b"PK\x03\x04" else ""
            raise ValueError(f"{archive_path}: not a readable zip archive ({e}){cut}") from None
        with archive:
            members = tick_members(archive)
            if not members:
                raise ValueError(f"{archive_path}: the zip archive holds no files")
            if len(members) > (most := expansion_limits().members):
                raise ValueError(f"{archive_path}: the zip archive holds {len(members):,} files, over the limit of "
                                 f"{most:,}; unpack it and give the folder, or set {MEMBERS_VARIABLE} higher")
            self.left_out = [m.filename for m in members if not is_ticks(Path(m.filename))]
            members = [m for m in members if is_ticks(Path(m.filename))]
            names = [Path(m.filename).name for m in members]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"{archive_path}: the zip archive holds {quoted(twice[0])} in more than one folder; "
                                 f"unpack it and give the files")
            self._dir = tempfile.mkdtemp(prefix=UNZIP_PREFIX)
            folder = Path(self._dir).joinpath(*folder_chain(archive_path))
            folder.mkdir(parents=True)
            self.paths: list[Path] = []
            try:
                for member, name in zip(members, names):
                    self.paths.append(folder / name)
                    # bounded: a member that expands past the limits is refused by name, its copy removed
                    with Bounded(archive.open(member), f"{archive_path} ({member.filename} inside)",
                                 member.compress_size) as src, open(self.paths[-1], "wb") as dst:
                        shutil.copyfileobj(src, dst, 1 << 20)
            except BaseException:
                self.close()
                raise
        self.members = [m.filename for m in members]

    def note(self, index: int, copied: Unpacked | None = None) -> str:
        """What the replay says about the archive's ``index``-th file; ``copied``: that file's own text copy
        (``text_copy``: UTF-16, lines ended by \r alone), said in the words a plain file's copy is said in."""
        if self.transcoded:
            return f"{self.archive.name}: {self.transcoded}"
        which = "its one file" if len(self.members) == 1 else f"file {index + 1} of {len(self.members)}"
        how = f": {copied.transcoded}" if copied is not None else ""
        return f"{self.archive.name}: read {self.members[index]}, {which}{how}"

    @classmethod
    def text_copy(cls, path: Path, how: TextCopy) -> Unpacked:
        """A CSV polars cannot read as it is (``text_copy_needed``) as a copy it reads: UTF-16 text as UTF-8, lines
        ended by \\r alone ended by \\n (Python's universal newlines: a \\r\\n or \\n further on stays one line end).
        Streamed a megabyte at a time, never held whole; a `.gz` file's copy is not compressed. Read, named and
        closed as an archive's one member is."""
        copy = cls.__new__(cls)
        said = [*([how.legacy] if how.legacy else ["UTF-16 text, read as UTF-8"] if how.encoding else []),
                *(["a line end of \\r alone inside its first line (a file converted twice?), read as a line end"]
                 if how.cr_inside else
                 ["lines ended by \\r alone (classic Mac OS), read as lines ended by \\n"] if how.cr_lines else [])]
        copy.archive, copy.members, copy.transcoded, copy.left_out = path, [path.name], "; ".join(said), []
        copy._dir = tempfile.mkdtemp(prefix="flashtick-text-")
        gz = path.name.lower().endswith(".gz")
        copy.paths = [Path(copy._dir).joinpath(*folder_chain(path), path.name[:-3] if gz else path.name)]
        copy.paths[0].parent.mkdir(parents=True)
        # bytes that are not UTF-8 pass through as they are (surrogateescape): polars replaces them, as in the file
        errors = "strict" if how.encoding else "surrogateescape"
        try:
            with text_opener(path)(path, "rt", encoding=how.encoding or "utf-8", errors=errors,
                                   newline=None if how.cr_lines else "") as src, \
                    open(copy.paths[0], "w", encoding="utf-8", errors=errors, newline="") as dst:
                shutil.copyfileobj(src, dst, COPY_CHARS)
        except UnicodeDecodeError as e:  # a byte its encoding has no character for, past the sample that told it
            copy.close()
            raise ValueError(f"{_shown(path)}: {how.legacy or 'its UTF-16 text'}; but it holds a byte that encoding "
                             f"has no character for ({e.object[e.start:e.end]!r}, {e.reason}): convert it yourself"
                             f" with the encoding it is in") from None
        return copy

