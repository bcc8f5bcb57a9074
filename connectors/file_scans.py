"""A tick file read lazily: which kind it is by its name (Parquet, CSV, JSON lines, DBN; `is_csv`, `is_tick_file`,
and why another is not read), and the scans of its rows that layout detection, the notes on a file's contents and
a plan read it with (`scan_file`, `first_text`, `distinct_text`, `time_sample`). Together because `scan_file` reads
each kind its own way. connectors/file_plan.py's `FilePlan` reads a file's rows through them."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Sequence

import polars as pl

from connectors import json_lines
from connectors.archives import ZIP_SUFFIX, not_utf8
from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.trailer_lines import trailer_prefix
from connectors.utc_offsets import OFFSET_PATTERN, UTC_OFFSET
from connectors.file_suffixes import CSV_SUFFIXES, DBN_SUFFIXES, PARQUET_SUFFIXES
from connectors.json_columns import lists_as_text, nested_fields
from connectors.iqfeed_level1 import is_level1_capture
from connectors.json_lines import JSON_LINES_SUFFIXES, is_json_lines
from connectors.map_vocabulary import NUMERIC_FIELDS
from connectors.number_separators import CURRENCY_SIGN, NUMBER_WRITTEN, code_after
from connectors.parquet_footer import int96_columns
from connectors.shell_words import shell_word
from connectors.small_csv_scans import held_scan
from engine.quoting import quoted
from engine.rust_paths import rust_path


def is_dbn(path: Path) -> bool:
    return path.name.lower().endswith(DBN_SUFFIXES)


def is_csv(path: Path) -> bool:
    """A CSV by its suffix, but for a capture of IQFeed's Level 1 messages, read as a table of its ticks
    (connectors/iqfeed_level1.py, through connectors/json_lines.py)."""
    return path.name.lower().endswith(CSV_SUFFIXES) and not is_level1_capture(path)


TICK_FILE_SUFFIXES = PARQUET_SUFFIXES + CSV_SUFFIXES + JSON_LINES_SUFFIXES + DBN_SUFFIXES
READ_TYPES = ", ".join(TICK_FILE_SUFFIXES + (f"{ZIP_SUFFIX} (of these)",  # said where a file is not one
                                              "a .gz or .log of JSON lines (hftbacktest's captures)"))
TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".tar.zst", ".tar")


def is_tick_file(path: Path) -> bool:
    """A name replay reads as ticks: a `.DS_Store` or a `notes.pdf` in an archive is none (a dotfile is an
    archiver's metadata, whatever its suffix); a `.gz` or `.log` of JSON lines is (json_lines.is_json_lines)."""
    return (path.name.lower().endswith(TICK_FILE_SUFFIXES) or is_json_lines(path)) and not path.name.startswith(".")


def unsupported_type(path: Path) -> str:
    """Why replay cannot read ``path``: a tar archive named as one, with what to do (its suffix is not `.gz`)."""
    if tar := next((s for s in TAR_SUFFIXES if path.name.lower().endswith(s)), None):
        return (f"{path}: a tar archive ({tar}), which replay does not unpack: extract it (tar xf {path}) and give "
                f"the files inside, or give them zipped (.zip)")
    if path.suffix.lower() == ZSTD_SUFFIX:
        return _zstd_refusal(path)
    if path.suffix.lower() not in SPREADSHEET_SUFFIXES and (kind := sniffed_container(path)) is not None:
        return kind  # its name says nothing of it (an attachment that lost its extension)
    sheet = SPREADSHEET_HINT if path.suffix.lower() in SPREADSHEET_SUFFIXES else ""
    hint = OTHER_KIND_HINTS.get(path.suffix.lower(), "")
    return f"{path}: unsupported file type {quoted(path.suffix.lower())}{hint}; replay reads {READ_TYPES}{sheet}"


ZSTD_SUFFIX = ".zst"


def _zstd_refusal(path: Path) -> str:
    """Why a zstd-compressed file other than DBN's (Databento's CSV downloads, `.csv.zst`) is not read, with the
    commands that read it: no zstd decoder is among replay's dependencies (a `.dbn.zst` is decoded by DBN's own
    reader; polars' decoder reads a CSV, not the lines the plan checks first), so it is decompressed outside, to a
    file that keeps its name, or into standard input, which loses what a name gives (review390 #4)."""
    plain = path.with_name(path.name[: -len(ZSTD_SUFFIX)])
    given = shell_word(str(path))
    gzipped = plain.with_name(plain.name + ".gz")
    as_gzip = (f", or as gzip, which replay reads, zstd -dc {given} | gzip > {shell_word(str(gzipped))}"
               if is_tick_file(gzipped) else "")
    return (f"{path}: compressed with zstd, which replay does not decompress (but for .dbn.zst): decompress it, "
            f"zstd -d {given} (writes {shell_word(str(plain))}, read under its own name){as_gzip}; or stream it, "
            f"zstd -dc {given} | flashtick backtest - --out ..., read as standard input: no --resume, and nothing "
            f"its name says (its stream is `stdin` unless a symbol column or --columns stream_name= names one; "
            f"a date in its name is not read) (docs/replay.md)")


ZIP_MAGIC = b"PK\x03\x04"
OLE2_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # a legacy Office file's (.xls)
# a zipped workbook's own member: Excel's (.xlsx, .xlsm), OpenDocument's (.ods, its `mimetype` says which)
WORKBOOK_MEMBERS = {"xl/workbook.xml": ("an Excel workbook", ".xlsx"),
                    "xl/workbook.bin": ("an Excel workbook", ".xlsb")}


def sniffed_container(path: Path) -> str | None:
    """Why a file whose name says no kind replay reads is not read, from its first bytes, when they say a workbook
    (a zip holding `xl/workbook.xml`, OpenDocument's spreadsheet, a legacy .xls) or a zip archive without its
    `.zip` (review374 #11: an e-mailed `.xlsx` that lost its extension was `unsupported file type ""`, no word of
    a workbook); None for any other file."""
    import zipfile

    try:
        with open(path, "rb") as f:
            head = f.read(8)
        if head.startswith(OLE2_MAGIC):
            return _workbook_refusal(path, "a legacy Excel workbook", ".xls", "its first bytes")
        if not head.startswith(ZIP_MAGIC):
            return None
        with zipfile.ZipFile(path) as archive:
            members = set(archive.namelist())
            mimetype = archive.read("mimetype").decode("ascii", "replace") if "mimetype" in members else ""
    except (OSError, zipfile.BadZipFile, KeyError):
        return None
    if kind := next((said for member, said in WORKBOOK_MEMBERS.items() if member in members), None):
        return _workbook_refusal(path, *kind, "its content (a zip holding xl/workbook.*)")
    if "spreadsheet" in mimetype:
        return _workbook_refusal(path, "an OpenDocument spreadsheet", ".ods", "its content")
    return (f"{path}: a zip archive by its content, though its name lacks .zip: name it {path.name}{ZIP_SUFFIX} "
            f"(replay reads the tick files inside a .zip)")


def workbook_named_as_text(path: Path) -> str | None:
    """Why a file named as a CSV is not read as one when its first bytes say a workbook or a zip (an `.xlsx` saved
    or renamed `.csv`: polars' words were "found more fields than defined in 'Schema'"); None for a text file."""
    return sniffed_container(path) if is_csv(path) and not path.name.lower().endswith(".gz") else None


def _workbook_refusal(path: Path, kind: str, suffix: str, told_by: str) -> str:
    named = f"its name says {path.suffix}" if path.suffix else "its name lacks the extension"
    return (f"{path}: {kind} ({suffix}) by {told_by}, though {named} (an e-mail attachment that lost its own, a "
            f"file renamed?); replay does not open workbooks: name it {path.stem if path.suffix else path.name}"
            f"{suffix} to open it, then{SPREADSHEET_HINT.removeprefix(';')}")


# what a file of these suffixes that replay does not read is, and what it reads instead
OTHER_KIND_HINTS = {
    ".gz": " (its text is not JSON lines, and its name says no other kind: name a gzipped CSV .csv.gz)",
    ".log": " (its first line is not a JSON object)",
    ".npz": " (NumPy arrays, as hftbacktest converts its captures to: replay its raw collector files instead, the "
            ".gz of JSON lines)",
}


# a workbook, which replay does not open: what it reads instead is one save away (review259 #8)
SPREADSHEET_SUFFIXES = (".xlsx", ".xlsm", ".xlsb", ".xls", ".ods", ".numbers")
SPREADSHEET_HINT = ("; save the sheet as CSV first (Excel: File > Save As > 'CSV UTF-8' or 'CSV (Comma delimited)', "
                    "in German 'CSV (Trennzeichen-getrennt)'): its ';' separators, decimal commas and dd.mm.yyyy dates "
                    "are read")


def scan_file(path: Path, names: Sequence[str] | None, dialect: Dialect | None,
              overrides: dict[str, pl.DataType] | None = None, marks_kept: bool = False) -> pl.LazyFrame:
    """A file's rows; a CSV's `marks_kept`: a byte-order mark inside the file left in its cell (to show it)."""
    if names is not None and not is_csv(path):
        raise ValueError(f"{path}: names (the columns of a header-less CSV) apply to CSV files, not "
                         f"{quoted(path.name)}")
    suffix = path.suffix.lower()
    if suffix in PARQUET_SUFFIXES:  # its struct columns' fields by path (`trade.price`), its lists of values as text
        # (`12,37`), as a JSON line's are
        rows = pl.scan_parquet(rust_path(path))
        spark = _spark_instants(path)
        instants = spark + int96_instants(path, spark)
        rows = rows.with_columns(pl.col(c).dt.replace_time_zone("UTC") for c in instants)
        return lists_as_text(nested_fields(clocks_as_text(rows)))
    if is_json_lines(path):  # parsed once into a Parquet copy, a row per line
        return pl.scan_parquet(rust_path(json_lines.table(path).copy))
    if is_csv(path):  # a small one parsed once per way of reading it: planning asks it some 25 questions
        options = (tuple(names) if names is not None else None, dialect,
                   tuple((k, repr(v)) for k, v in overrides.items()) if overrides is not None else None, marks_kept)
        return held_scan(path, options, lambda: _scan_csv(path, names, dialect, overrides, marks_kept))
    raise ValueError(unsupported_type(path))


def _scan_csv(path: Path, names: Sequence[str] | None, dialect: Dialect | None,
              overrides: dict[str, pl.DataType] | None, marks_kept: bool) -> pl.LazyFrame:
    """`scan_file` of a CSV, from the file itself."""
    names = list(names) if names is not None else None
    # Typed on purpose: polars infers CSV types from the first rows, and a later "61837.5" in an inferred
    # int column would abort the whole replay. Unparsable cells become nulls, rejected as missing_field.
    # Header names lose the spaces around them (`time; price`); the BOM, CRLF and quotes polars handles.
    # names given for a file whose first line is a header (file_layout's `_names_over_header`): it is skipped
    header = names is None or dialect.header
    if names is not None and dialect.ragged:  # polars counts a header-less file's columns from its rows
        typed = {name: (overrides or {}).get(name, pl.String) for name in names}
        return _without_joined_marks(marks_kept, pl.scan_csv(
            rust_path(path), has_header=header, schema=typed, ignore_errors=overrides is not None,
            encoding=_encoding(path), skip_rows=dialect.skipped, separator=dialect.separator,
            decimal_comma=dialect.decimal_comma, truncate_ragged_lines=True,
            comment_prefix=trailer_prefix(dialect.trailer, dialect.separator),
            extra_columns="ignore"))  # every row one longer (`...;100;`, `tails_empty`): polars counts it
    return _without_joined_marks(marks_kept, pl.scan_csv(
        rust_path(path), has_header=header, new_columns=names, schema_overrides=overrides,
        encoding=_encoding(path), ignore_errors=overrides is not None, separator=dialect.separator,
        skip_rows=dialect.skipped, decimal_comma=dialect.decimal_comma,
        truncate_ragged_lines=dialect.ragged, comment_prefix=trailer_prefix(dialect.trailer, dialect.separator),
        with_column_names=None if names else lambda found: [n.strip() for n in found]))


def clocks_as_text(rows: pl.LazyFrame) -> pl.LazyFrame:
    """A Parquet file's times of day (Arrow's time32/time64, a q time as pykx and arrowkdb write it) and timespans
    (Duration, q's `n`) as clock text to the ns (`09:30:00.265336495`), which a date column, a `--date` or a date in
    the file's name or folder gives the day of, as it does a CSV's. Polars' own cast of a time to text drops the
    fraction of the second (review324 #1), and it casts no duration to text at all (#4). A timespan of a day or more
    is written past 24:00 (`25:30:00`: 01:30 the day after, connectors/past_midnight.py); a negative one is null."""
    schema = rows.collect_schema()
    times = [c for c, dtype in schema.items() if dtype == pl.Time]
    spans = [c for c, dtype in schema.items() if isinstance(dtype, pl.Duration)]
    if not times and not spans:
        return rows
    return rows.with_columns([pl.col(c).dt.to_string("%H:%M:%S%.9f") for c in times]
                             + [_span_clock(pl.col(c).dt.total_nanoseconds()).alias(c) for c in spans])


def _span_clock(ns: pl.Expr) -> pl.Expr:
    """Nanoseconds after midnight -> `HH:MM:SS.fffffffff` (hours past 23 as written: `25:30:00...`)."""
    seconds = ns // 10**9
    parts = [(seconds // 3600).cast(pl.String).str.zfill(2), pl.lit(":"),
             (seconds // 60 % 60).cast(pl.String).str.zfill(2), pl.lit(":"),
             (seconds % 60).cast(pl.String).str.zfill(2), pl.lit("."), (ns % 10**9).cast(pl.String).str.zfill(9)]
    return pl.when(ns >= 0).then(pl.concat_str(parts))


SPARK_SCHEMA = "org.apache.spark.sql.parquet.row.metadata"  # the key-value metadata Spark writes its schema in


def _spark_instants(path: Path) -> list[str]:
    """The columns a Spark-written Parquet file holds as Spark's `timestamp` type (an instant, UTC-normalised; as
    INT96, Spark's default, it carries no zone annotation, so polars reads it as naive), which its schema in the
    file's metadata says: read as UTC instants, so no note invites --tz and a tz given for them is refused, as for
    any zoned column. Spark wrote them as UTC, and --tz shifted them by the zone's offset (review284 #6). Its
    `timestamp_ntz` stays naive (wall-clock times)."""
    try:
        spark = pl.read_parquet_metadata(rust_path(path)).get(SPARK_SCHEMA)
        fields = json.loads(spark).get("fields", []) if spark else []
    except (OSError, ValueError, pl.exceptions.PolarsError, AttributeError):
        return []  # (a damaged file is said by the read itself)
    named = {f.get("name"): f.get("type") for f in fields if isinstance(f, dict)}
    schema = pl.read_parquet_schema(rust_path(path))
    return [c for c, dtype in schema.items() if named.get(c) == "timestamp" and isinstance(dtype, pl.Datetime)
            and dtype.time_zone is None]


def int96_instants(path: Path, spark: list[str] | None = None) -> list[str]:
    """The INT96 timestamp columns of a Parquet file that Spark's metadata does not name (Impala's, Hive's, older
    parquet-mr's: `_spark_instants` reads Spark's): UTC instants by those writers' convention (Impala and Hive
    normalise to UTC on write), though polars reads INT96 as naive. Read as UTC, with a note (planning.py) saying
    so and how a file whose writer stored local times is read in its zone (fix302 #4)."""
    if path.suffix.lower() not in PARQUET_SUFFIXES or not (found := int96_columns(path)):
        return []
    spark = _spark_instants(path) if spark is None else spark  # (`spark`: those columns, when already read)
    schema = pl.read_parquet_schema(rust_path(path))
    return [c for c in found if c not in spark and isinstance(schema.get(c), pl.Datetime)
            and schema[c].time_zone is None]


def _encoding(path: Path) -> str:
    """How polars reads a CSV's text: as UTF-8, or where any of it is not (the whole file checked once, before the
    read: `not_utf8`, which the replay's caution quotes), its bytes that are not UTF-8 replaced, as the caution says,
    rather than the read stopping on the first one with polars' bare "invalid utf-8 sequence"."""
    return "utf8-lossy" if not_utf8(path) else "utf8"


BYTE_ORDER_MARK = "\ufeff"


def _without_joined_marks(marks_kept: bool, rows: pl.LazyFrame) -> pl.LazyFrame:
    """A CSV's rows without the byte-order mark that starts a line inside it: two Windows exports joined
    (`cat a.csv b.csv`) carry the second one's mark into its first cell, which would not read. Polars drops only
    the file's own first one. A first column read as numbers cannot hold it: that row is rejected naming the mark."""
    first = None if marks_kept else next(iter(schema := rows.collect_schema()), None)
    if first is None or schema[first] != pl.String:
        return rows
    return rows.with_columns(pl.col(first).str.strip_chars_start(BYTE_ORDER_MARK))


SAMPLE_ROWS = 200_000  # rows a layout's heuristics look at (a side code, venues, corrections): one pass, bounded


def distinct_text(path: Path, names: Sequence[str] | None, dialect: Dialect | None, column: str,
                   limit: int, rows: int | None = None) -> list[str]:
    """Up to `limit` distinct non-empty values of a column (of its first `rows` rows; None: all), as text, sorted."""
    scan = scan_file(path, names, dialect, {column: pl.String} if is_csv(path) else None)
    if scan.collect_schema()[column].is_nested():
        return []  # lists of lists or of records (book levels, messages' ticks) have no text a note reads
    scan = scan if rows is None else scan.head(rows)
    values = scan.select(pl.col(column).cast(pl.String).str.strip_chars().drop_nulls().unique().head(limit))
    return sorted(v for v in values.collect().to_series().to_list() if v)


def currency_codes(path: Path, cmap: ColumnMap, dialect: Dialect | None) -> dict[str, str]:
    """Each numeric column of a CSV whose every non-empty cell (of its first SAMPLE_ROWS rows) writes one ISO code
    after its number (`61.836,63 EUR`), and that code: read without it, as a currency sign is. A cell past them with
    another code is no number (rejected, its unit named), never read as if in the same currency."""
    if dialect is None:
        return {}
    codes = {}
    for column in {getattr(cmap, f) for f in NUMERIC_FIELDS} - {None}:
        first = first_text(path, cmap.names, dialect, column)
        if first is None or (code := code_after(first)) is None:
            continue
        cells = scan_file(path, cmap.names, dialect, {column: pl.String}).head(SAMPLE_ROWS) \
            .select(pl.col(column).str.strip_chars()).filter(pl.col(column) != "")
        coded = pl.col(column).str.contains(rf"^{NUMBER_WRITTEN}\s*{code}$").all()
        if cells.select(coded).collect().item():
            codes[column] = code
    return codes


def code_counts(path: Path, cmap: ColumnMap, dialect: Dialect | None, column: str) -> dict[str, int]:
    """Each ISO code a CSV column writes after its numbers (`0.7250 GBP`, `72.50 GBX`) in its first SAMPLE_ROWS rows,
    and its cells, most first."""
    if dialect is None:
        return {}
    codes = scan_file(path, cmap.names, dialect, {column: pl.String}).head(SAMPLE_ROWS).select(
        pl.col(column).str.strip_chars().str.extract(rf"^{NUMBER_WRITTEN}\s*([A-Z]{{3}})$", 1).alias("code")
    ).drop_nulls().group_by("code").len().sort("len", "code", descending=[True, False]).collect()
    return {code: n for code, n in codes.iter_rows() if code_after(f"1 {code}") is not None}


def signed_cells(path: Path, cmap: ColumnMap, dialect: Dialect | None, column: str) -> tuple[int, int]:
    """(the cells that write a currency sign with their number, the non-empty cells) of a column's first
    SAMPLE_ROWS rows: a sign on some cells only (`£0.7250` beside bare `72.50`) may mark another unit."""
    cells = scan_file(path, cmap.names, dialect, {column: pl.String} if is_csv(path) else None).head(SAMPLE_ROWS) \
        .select(pl.col(column).cast(pl.String).str.strip_chars()).filter(pl.col(column) != "")
    return cells.select(pl.col(column).str.contains(CURRENCY_SIGN).sum(), pl.len()).collect().row(0)


def first_text(path: Path, names: Sequence[str] | None, dialect: Dialect | None,
                columns: str | tuple[str, ...], pattern: str | None = None) -> str | None:
    """The first non-empty value of a column (of date and time columns: joined by a space), as text (None: empty);
    with `pattern`, the first that matches it. A CSV line of one field among rows of several (a junk line, `oops`,
    which the read rejects: connectors/junk_lines.py) is passed over: its text would decide how a column is read."""
    columns = (columns,) if isinstance(columns, str) else tuple(columns)
    names = tuple(names) if names is not None else None
    try:
        stat = path.stat()
    except OSError:  # (the scan says what is wrong with it)
        return _first_text(path, names, dialect, columns, pattern)
    return _first_text_once(path, stat.st_size, stat.st_mtime_ns, names, dialect, columns, pattern)


# A plan asks the same few columns' first values again and again (a small CSV's: 14 asks of 5 columns, each a
# polars query); the file's size and mtime are in the key, so a file written again is read again
@functools.lru_cache(maxsize=256)
def _first_text_once(path: Path, _size: int, _mtime_ns: int, names: tuple[str, ...] | None, dialect: Dialect | None,
                     columns: tuple[str, ...], pattern: str | None) -> str | None:
    return _first_text(path, names, dialect, columns, pattern)


def _first_text(path: Path, names: tuple[str, ...] | None, dialect: Dialect | None, columns: tuple[str, ...],
                pattern: str | None) -> str | None:
    overrides = {c: pl.String for c in columns} if is_csv(path) else None
    text = pl.concat_str([pl.col(c).cast(pl.String).str.strip_chars() for c in columns], separator=" ")
    scan = scan_file(path, names, dialect, overrides)
    schema = scan.collect_schema()
    if any(schema[c].is_nested() for c in columns if c in schema):
        return None  # a list or a record (a JSON capture's `channels`) has no text a layout reads
    if pattern is None and is_csv(path) and len(schema) > 1:  # (a pattern's scan: not junk)
        scan = scan.filter(pl.sum_horizontal(pl.all().is_not_null()) > 1)
    found = scan.select(text.alias("t"))
    found = found.filter(pl.col("t").str.strip_chars() != "")
    if pattern is not None:
        found = found.filter(pl.col("t").str.contains(pattern))
    found = found.head(1).collect()
    return found.item() if found.height else None


def time_sample(path: Path, names: Sequence[str] | None, dialect: Dialect | None,
                columns: str | tuple[str, ...]) -> str | None:
    """The time text that says how a datetime column is read: its first time carrying a UTC offset, wherever it
    is (a file whose first rows are naive and later ones carry offsets reads as the one whose first row has it),
    else its first time."""
    first = first_text(path, names, dialect, columns)
    if first is None or UTC_OFFSET.search(first):
        return first
    zoned = first_text(path, names, dialect, columns, OFFSET_PATTERN)
    # (a footer's words, `Downloaded from Barchart.com as of 03-06-2026 04:34pm CST`, hold a zoned 12-hour clock
    # too: a time that begins as the first one does, with a digit or not, is the column's)
    return zoned if zoned is not None and zoned[:1].isdigit() == first[:1].isdigit() else first
