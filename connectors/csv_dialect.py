"""A CSV's dialect, read from its first lines: its delimiter, its decimal separator (connectors/number_separators.py),
whether its first line is a header, and those lines' cells (`Dialect`, `sniff_csv`). Beside it, the bound on a
line's length that every read of a CSV keeps (a corrupt file's run of NULs is refused, not read whole), and the
rows with more fields than the file's columns, found once polars refuses a file for one.
"""

from __future__ import annotations

import csv
import functools
import re
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple

from connectors.archives import text_opener, truncation_named
from connectors.bloomberg_names import bdh_security, bdh_title_lines
from connectors.column_names import TIME_HEADERS
from connectors.field_names import normal_name
from connectors.number_separators import NUMBER, ColumnNumbers, columns_numbers, decimal_reading
from connectors.trailer_lines import trailer_line
from engine.quoting import quoted


SEPARATORS = ",;\t|"  # a CSV's delimiter is the one its first line has most of, outside quotes
SAMPLE_LINES = 20  # lines read to sniff a CSV
GUESS_LINES = 500  # of a header-less CSV's lines, which its layout's guess weighs a column over
DATE_LIKE = re.compile(r"^(\d{4}[-./]?\d\d[-./]?\d\d|\d\d?[-./]\d\d?[-./]\d{2,4})([ T-]|$)")
NUMBER_LINES = 2000  # lines read to tell a file's decimal separator (a cell that tells may come late)
# The longest line a CSV's first lines may have, in characters: Python csv's own field limit, so no cell of a line
# read is refused by csv. A tick file's line is under a few KB (a 5,000-column export's about 20 KB); a longer one is
# a corrupt or binary file (a crashed writer's run of NULs), refused once that much is read, not read whole first.
MAX_LINE_CHARS = 131_072
MAX_COLUMNS = 10_000  # a CSV's columns: vendors' widest exports hold hundreds; each costs every read of the file
SNIFF_CHARS = 1 << 23  # characters of a CSV's first lines read to sniff it at most (long lines: fewer lines)


@dataclass(frozen=True)
class Dialect:
    """What a CSV's first lines say: its delimiter, whether numbers use a decimal comma (`1,0853` or `42.002,00`
    in a `;` file; `decimal_reading`), and whether its first line is a header; `rows` are the first lines' cells,
    header excluded. `numbers`: how its numbers' separators were read, for a note ("" when nothing was to say).
    `long_rows`: (row, its number of fields) for each row with more fields than the file's columns, found only
    once polars has refused the file for one (`long_rows`): read truncated, then rejected. `empty_tails`: rows
    whose fields past the columns are all empty (`...;sell;`, as broker exports end every line), found with them:
    read truncated, losing nothing."""

    separator: str
    decimal_comma: bool
    header: bool
    rows: tuple[tuple[str, ...], ...]
    long_rows: tuple[tuple[int, int], ...] = ()
    numbers: str = ""
    empty_tails: int = 0
    skipped: int = 0  # lines above the header, a banner's (`_banner_lines`): polars and line numbers skip them
    banner: tuple[str, ...] = ()  # that banner's lines, for the note that says they were skipped
    trailer: str = ""  # its last line when that is a trailer (NYSE's `END|20240308|1166`): skipped, said
    # what each column's cells say of its numbers' marks (`columns_numbers`; none where `decimal` was given or a
    # comma-delimited file's quoted cells told a decimal comma), and the decimal mark of each number column once a
    # map names them (connectors/column_decimals.py): (column, a decimal comma)
    columns: tuple[ColumnNumbers, ...] = ()
    column_decimals: tuple[tuple[str, bool], ...] = ()
    # a header-less file's first GUESS_LINES data rows, for its layout's guess that weighs a column over more rows
    # than `rows` (connectors/headerless_csv.py: a size's round lots, seldom in its first rows); dropped once the
    # layout is guessed (file_layout.py), so that a plan of each of 365 daily files holds none
    sample: tuple[tuple[str, ...], ...] = ()

    def decimal_comma_of(self, column: str) -> bool:
        """Whether a number column's cells are read with a decimal comma: its own decision, else the file's."""
        return dict(self.column_decimals).get(column, self.decimal_comma)

    @property
    def ragged(self) -> bool:
        """Whether polars reads it truncating rows longer than its columns (`long_rows`, `empty_tails`)."""
        return bool(self.long_rows or self.empty_tails)

    @property
    def width(self) -> int:
        """The file's number of columns as its first lines show: the most common row width (header excluded)."""
        widths = Counter(len(row) for row in self.rows)
        return widths.most_common(1)[0][0] if widths else 0

    def tails_empty(self, width: int) -> bool:
        """Whether the first rows are longer than `width` columns by empty cells: most of them end with a separator
        past it (`...;100;`, as broker exports end every line); a few with a cell there are stray rows, not a
        column the names left out."""
        longer = [row[width:] for row in self.rows if len(row) > width]
        empty = sum(not any(cell.strip() for cell in tail) for tail in longer)
        return self.width > width and 2 * empty > len(self.rows)


def _open_text(path: Path) -> Any:
    opener = text_opener(path)
    return opener(path, "rt", encoding="utf-8-sig", errors="replace", newline="")


class LongRows(NamedTuple):
    rows: tuple[tuple[int, int], ...]  # (row, fields) of each row with cells past the file's columns
    empty_tails: int  # rows with fields past its columns that are all empty


def long_rows(path: Path, dialect: Dialect, width: int | None = None) -> LongRows:
    """The rows of a CSV with more fields than its columns: a pass over the whole file in Python, taken only when
    polars refuses the file for such a row (the normal read never pays for it). Rows count as polars counts them:
    from 0 after the header. `width`: the columns a header-less file is given. A row whose fields past the columns
    are all empty ends with a separator (Excel and broker exports end every line with `;` but not the header):
    that empty cell is no data, and such rows are counted apart, to be read, not rejected (review259 #3)."""
    with _open_text(path) as f:
        rows = csv.reader(f, delimiter=dialect.separator)
        with csv_error_named(path, lambda: rows.line_num):
            for _ in range(dialect.skipped):
                next(rows, None)
            header = len(next(rows, ())) if dialect.header else None
            width = header or width or dialect.width
            longer = [(i, row) for i, row in enumerate(rows) if len(row) > width]
    extra = tuple((i, len(row)) for i, row in longer if any(cell.strip() for cell in row[width:]))
    return LongRows(extra, len(longer) - len(extra))


@contextmanager
def csv_error_named(path: Path, line: Callable[[], int]) -> Iterator[None]:
    """Python csv's error (`field larger than field limit (131072)`, a NUL or a quote it cannot read) as a
    ValueError that names the file and `line()`, the line it was reading: its own names neither."""
    try:
        yield
    except csv.Error as e:
        raise ValueError(f"{path}: line {line()}: cannot read it as CSV ({e})") from None


def first_lines(f: Any, path: Path, count: int) -> tuple[list[str], list[int]]:
    """A text file's first `count` lines that are not blank (fewer past SNIFF_CHARS), and their line numbers. Each
    is read with a bound: a line longer than MAX_LINE_CHARS is refused as soon as that much of it is read, naming
    the file and the line, so a corrupt file's gigabyte without a newline is neither held whole nor read through."""
    lines: list[str] = []
    numbers: list[int] = []
    number = read = 0
    while len(lines) < count and read < SNIFF_CHARS:
        line = f.readline(MAX_LINE_CHARS + 2)  # room for the line's \r\n
        if not line:
            break
        number += 1
        if len(line.rstrip("\r\n")) > MAX_LINE_CHARS:
            raise ValueError(f"{path}: line {number} is longer than {MAX_LINE_CHARS:,} characters without a newline "
                             f"(a corrupt or binary file?)")
        read += len(line)
        if line.strip():
            lines.append(line)
            numbers.append(number)
    return lines, numbers


LINE_SCAN_BYTES = 1 << 24  # bytes of a CSV read at a time by `check_line_lengths`
# said where a line too long holds \r: lines ended by \r alone (classic Mac OS), which polars reads as one
CR_ALONE = ", or lines ended by \\r alone: replay reads lines ended by \\n"


def check_line_lengths(path: Path) -> None:
    """Refuse a CSV that has a line longer than MAX_LINE_CHARS anywhere, as `first_lines` does in the lines layout
    detection reads: polars would read a later one whole (a crashed writer's gigabyte of NULs, mid-file).

    A byte scan in chunks, not a Python loop per line: from each line's start, the last newline within the next
    MAX_LINE_CHARS + 1 bytes (`rfind`, C) skips every line that ends there, so a file of short lines takes a step
    per MAX_LINE_CHARS bytes and costs about its read from the page cache (a 200k-line, 8.5 MB CSV: 0.01 s, on a
    1 s plan). Only a line of that many bytes or more is decoded, to count its characters as `first_lines` does
    (UTF-8: up to 4 bytes each), at most 4 * MAX_LINE_CHARS of it. Lines end at `\\n`, as polars reads them."""
    limit = MAX_LINE_CHARS
    most = 4 * limit + 2  # the bytes of a line of `limit` characters at most, with its CR LF
    number, data, end_of_file = 1, b"", False  # the line that `data` starts
    with truncation_named(path), text_opener(path)(path, "rb") as f:
        while not end_of_file:
            chunk = f.read(LINE_SCAN_BYTES)
            end_of_file, data, start = not chunk, data + chunk, 0
            while start < len(data) and (end_of_file or start + most < len(data)):
                newline = data.rfind(b"\n", start, start + limit + 1)
                if newline < 0:  # a line of `limit` bytes or more: count its characters
                    newline = data.find(b"\n", start, start + most + 1)
                    line = data[start : newline if newline >= 0 else start + most + 1].rstrip(b"\r")
                    if len(line.decode("utf-8", errors="replace")) > limit:
                        cr_alone = CR_ALONE if b"\r" in line else ""
                        raise ValueError(f"{path}: line {number} is longer than {limit:,} characters without a "
                                         f"newline (a corrupt or binary file?{cr_alone})")
                    if newline < 0:  # the file's last line, without a newline
                        break
                number += data.count(b"\n", start, newline + 1)
                start = newline + 1
            data = data[start:]


def sniff_csv(path: Path, decimal: str | None = None) -> Dialect:
    """A CSV's dialect; `decimal` ("comma" / "point", the map's key) states its decimal separator. Read once per
    file as it is (planning asks three times: a zip of 300 small files spent 6 s of 15 sniffing them, fix339)."""
    try:
        stat = path.stat()
    except OSError:
        return _sniffed(path, decimal)  # (the open says what is wrong)
    return _sniffed_once(path, stat.st_size, stat.st_mtime_ns, decimal)


@functools.lru_cache(maxsize=64)  # (size and mtime in the key: a file written again is read again)
def _sniffed_once(path: Path, _size: int, _mtime_ns: int, decimal: str | None) -> Dialect:
    return _sniffed(path, decimal)


def _sniffed(path: Path, decimal: str | None) -> Dialect:
    with _open_text(path) as f:
        lines, numbers = first_lines(f, path, NUMBER_LINES + 1)
    # a BDH export's title block holds dates (`Start Date,7/1/2024`), which no banner does: known by its Security
    above = _banner_lines(lines, MAX_BANNER_LINES) or bdh_title_lines(lines)
    skipped = numbers[above] - 1 if above else 0
    banner = tuple(line.strip() for line in lines[:above])
    lines, numbers = lines[above:], numbers[above:]
    first = re.sub(r'"[^"]*"', "", lines[0]) if lines else ""
    best = max(SEPARATORS, key=first.count)  # ties go to the earlier one: ',' first
    separator = best if first.count(best) else ","
    reader = csv.reader(lines, delimiter=separator)
    with csv_error_named(path, lambda: numbers[reader.line_num - 1] if reader.line_num else 1):
        rows = [tuple(c.strip() for c in row) for row in reader]
    if rows and len(rows[0]) > MAX_COLUMNS:  # before any read that costs its width (a 240 KB file of 20,000)
        raise ValueError(f"{path}: line {numbers[0]} has {len(rows[0]):,} columns, over the {MAX_COLUMNS:,} replay "
                         f"reads (a tick file needs a few): write the columns the ticks need to a file of their own "
                         f"(e.g. with polars' or pandas' usecols, or csvcut -c) and replay that")
    header = bool(rows) and not any(NUMBER.match(c) or DATE_LIKE.match(c) or c.lower() in ("true", "false")
                                    for c in rows[0])
    data = rows[1:] if header else rows
    columns: tuple[ColumnNumbers, ...] = ()
    if decimal is not None:
        decimal_comma, numbers = decimal == "comma", ""  # given: the map says it (describe_map)
    else:
        columns = columns_numbers(data) if separator != "," else ()
        decimal_comma, numbers = decimal_reading(separator, data, columns)
        if separator == "," and not numbers:
            # no quoted cell told a decimal comma: a quoted `"1,234"` still reads two ways, so each number column is
            # decided by its own cells, the others, the time, or its name, else refused (column_decimals.py)
            columns = columns_numbers(data, comma_delimited=True)
    trailer = trailer_line(path, separator, [row[0] for row in rows if row])
    return Dialect(separator, decimal_comma, header, tuple(data[:SAMPLE_LINES]), numbers=numbers, skipped=skipped,
                   banner=banner, trailer=trailer, columns=columns, sample=() if header else tuple(data[:GUESS_LINES]))


MAX_BANNER_LINES = 10  # a vendor's title and disclaimer above its table: 1 (CryptoDataDownload's URL) to 5 seen
LONG_BANNER_LINES = 100  # lines looked through for a banner too long to skip, only once a file reads no layout


def _unquoted(line: str) -> str:
    """A line with its quoted cells' separators blanked, their text kept: a header quoted cell by cell
    (`"Date","Time",...`, FactSet's and Excel's) is still no row of empty cells, which a padded title row is
    (review291 #5)."""
    return re.sub(r'"([^"]*)"', lambda quoted: re.sub(r"[,;\t|]", " ", quoted.group(1)), line)


def _banner_lines(lines: list[str], most: int) -> int:
    """How many of a CSV's first lines are a banner above its table: a title, a URL, a disclaimer (CryptoDataDownload's
    `https://www.CryptoDataDownload.com`, a `trades` title, a vendor's 2-5 lines of copyright), at most `most`,
    above lines that all have the same two or more of one separator (a file of one column has none in any line: no
    banner). Each banner line is one by `_banner_line`."""
    for above in range(1, min(most, len(lines) - 2) + 1):
        below = [_unquoted(line) for line in lines[above:above + SAMPLE_LINES]]
        # each separator the table's lines share two or more of (`;` and the decimal comma of
        # `45512,99;61.837,63;0,02`): a line with more than half of any of them is one of the table's (a header)
        widths = {sep: count for sep in SEPARATORS if (count := _shared_count(below, sep)) >= 2}
        # (the table's first line is none: a title row padded as the table is would pass for it)
        if widths and all(_banner_line(_unquoted(line), widths) for line in lines[:above]) \
                and not _banner_line(below[0], widths):
            return above
    return 0


def _shared_count(lines: list[str], sep: str) -> int:
    """How many of `sep` the table's `lines` share: the most common count, where no line has fewer; 0 where one
    has. A line with more is still the table's: a stray separator that a once-touched cell leaves (`...;sell;`),
    which is then rejected as extra_fields; counted as no separator of the table, a `;` file of decimal commas
    kept only the commas, and its header, having none, was skipped as a banner (review259 #2)."""
    counts = [line.count(sep) for line in lines]
    most = Counter(counts).most_common(1)[0][0]
    return most if min(counts) == most else 0


def _banner_line(line: str, widths: dict[str, int]) -> bool:
    """Whether a line above a table (whose lines have `widths` of each separator) is a banner's: no cell of it is a
    number or starts with a date, so a header-less file's first row, whose cells are its numbers and times, is never
    one (text around a date, `Exported 2024-06-03 10:15 UTC`, is a banner's); and it has at most half of each
    separator the table's lines share (a header one short of rows ending with a separator stays the header, and so
    does a `;` file's header above rows of decimal commas), or cells all empty but its first (a spreadsheet's title
    row saved as CSV: `Kursdaten Export;;;`)."""
    if any(NUMBER.match(cell.strip()) or DATE_LIKE.match(cell.strip()) for cell in re.split(r"[,;\t|]", line)):
        return False
    cells = re.split(r"[,;\t|]", line)
    if len(cells) > 1 and normal_name(cells[0].strip().strip('"')) in TIME_HEADERS and \
            not any(c.strip() for c in cells[1:]):
        return False  # `Datetime,,,,,`: a header whose other names were on lines above (pandas' MultiIndex), cut off
    few = all(line.count(sep) <= count // 2 for sep, count in widths.items())
    return few or all(not cell.strip() for sep in widths for cell in line.split(sep)[1:])


def banner_note(path: Path, dialect: Dialect | None) -> list[str]:
    """The note on the lines skipped above a CSV's header: a banner's, or a BDH export's title block."""
    if dialect is None or not dialect.skipped:
        return []
    lines, text = len(dialect.banner), " / ".join(dialect.banner)[:80]
    if bdh_security(dialect.banner[0]) is not None:
        return [f"{path.name}: its first {lines} lines, {quoted(text)}, are a Bloomberg BDH export's title block, "
                "skipped (the table's header is the line after it)"]
    said = "its first line" if lines == 1 else f"its first {lines} lines"
    return [f"{path.name}: {said}, {quoted(text)}, {'is no CSV row' if lines == 1 else 'are no CSV rows'} (no cell of "
            f"{'it' if lines == 1 else 'them'} a number or a date, and few or no separators, or only empty cells "
            f"after the first, above a table that has them): skipped as a banner (up to {MAX_BANNER_LINES} lines "
            f"are)"]


def banner_refusal(path: Path, dialect: Dialect | None) -> str | None:
    """Why a CSV whose columns read as no tick layout (or lack the map's) may not: a banner too long to skip (more
    than MAX_BANNER_LINES lines) above its table, whose first line was read as the header, with the command that
    removes it; else None. Looked for only then: a file that reads pays nothing for it."""
    if dialect is None or dialect.skipped:
        return None
    with _open_text(path) as f:
        lines, numbers = first_lines(f, path, LONG_BANNER_LINES + SAMPLE_LINES + 1)
    gzipped = path.name.lower().endswith(".gz")
    plain = Path(path.name[:-3] if gzipped else path.name)
    if not (above := _banner_lines(lines, LONG_BANNER_LINES)):
        # a title block with dates in it (Bloomberg BDH's `Start Date,7/1/2024,`): no banner, but a later line that
        # names a time column as a header does is where the table starts (review291 #5)
        if (above := _time_header_below(lines)) is None:
            return None
        header = numbers[above]
        cells = [c.strip().strip('"') for c in re.split(r"[,;\t|]", lines[above])]
        if repeated := sorted({c for c in cells if c and cells.count(c) > 1}):  # BDH's tickers side by side
            named = [c.strip().strip('"') for c in re.split(r"[,;\t|]", lines[above - 1]) if c.strip().strip('"')]
            return (f"{path}: its line {header} ({quoted(lines[above].strip(), 60)}) repeats {', '.join(repeated)} "
                    f"under the names above it ({', '.join(named[:5])}): a sheet of several securities side by side "
                    f"(Bloomberg BDH's wide layout), which replays as one: save one security per file (its dates "
                    f"and fields alone), or one long table with a ticker column, first (docs/replay.md)")
        if (joined := _names_above(lines, above)) is not None:  # `Datetime,,,,,`: the names are the lines above
            return (f"{path}: its first {above + 1} lines hold its column names between them (a multi-row header, "
                    f"as pandas writes a MultiIndex), line {header} ({quoted(lines[above].strip(), 60)}) naming only "
                    f"the time: write one header line in their place that names every column, e.g. "
                    f"{quoted(joined, 200)}, and replay that file; leaving the lines out would read the columns by "
                    f"their position, which is no name (docs/replay.md)")
        return (f"{path}: its first {above} lines ({quoted(lines[0].strip(), 60)} ... "
                f"{quoted(lines[above - 1].strip(), 60)}) are a title block above a table whose header looks to be "
                f"line {header} ({quoted(lines[above].strip(), 60)}), and are not skipped as a banner is (some hold a "
                "number or a date): the title's first line was read as the header. Remove them first, e.g. "
                f"{_cut(path, header, gzipped)} > {plain.stem}-table{plain.suffix}, and replay that file "
                f"(docs/replay.md)")
    header = numbers[above]
    return (f"{path}: its first {above} lines ({quoted(lines[0].strip(), 60)} ... "
            f"{quoted(lines[above - 1].strip(), 60)}) look like a title or banner above a table whose header is line "
            f"{header}, and only up to {MAX_BANNER_LINES} such lines are skipped: the banner's first line was read as "
            f"the header. Remove the banner first, e.g. {_cut(path, header, gzipped)} > "
            f"{plain.stem}-table{plain.suffix}, and replay that file (docs/replay.md)")


def _names_above(lines: list[str], header: int) -> str | None:
    """One header line made of a multi-row header's names, each column's joined with a space (`Datetime,Close
    AAPL,...`), when line `header` names its first column alone (`Datetime,,,,,`); else None."""
    sep = next((s for s in ",;\t|" if s in lines[header]), ",")
    cells = lines[header].rstrip("\r\n").split(sep)
    if len(cells) < 2 or not cells[0].strip() or any(c.strip() for c in cells[1:]):
        return None
    rows = [line.rstrip("\r\n").split(sep) for line in lines[:header]]
    if any(len(row) != len(cells) for row in rows):
        return None
    names = [" ".join(row[i].strip().strip('"') for row in rows[1:] if row[i].strip()) if i else cells[0].strip()
             for i in range(len(cells))]
    names = [" ".join(filter(None, (rows[0][i].strip().strip('"'), name))) if i else name
             for i, name in enumerate(names)]
    return sep.join(names)


def _cut(path: Path, header: int, gzipped: bool) -> str:
    """The command that leaves out a file's lines above its header, line `header`."""
    return f"zcat {path} | tail -n +{header}" if gzipped else f"tail -n +{header} {path}"


def _time_header_below(lines: list[str]) -> int | None:
    """The index of the first line after the first that names a time column (`Dates`, `Time`: TIME_HEADERS)
    among two or more cells, as a header does; None when the first line names one itself, or none does."""
    def names_time(line: str) -> bool:
        cells = [normal_name(c.strip().strip('"')) for c in re.split(r"[,;\t|]", line)]
        return len(cells) > 1 and any(c in TIME_HEADERS for c in cells)
    if not lines or names_time(lines[0]):
        return None
    return next((i for i, line in enumerate(lines[1:], start=1) if names_time(line)), None)
