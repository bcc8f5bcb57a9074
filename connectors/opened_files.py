"""The files a replay opens, read into plans (connectors/planning.py makes each): zip archives and text files that
need a copy (UTF-16, lines ended by \\r alone) unpacked, JSON-lines files' Parquet copies made, all kept while the
replay lives (`OpenedFiles.close` removes them); files with nothing to read (no data rows, an archive's members
that are no tick files, a text file whose columns hold no tick layout) skipped, each with a note, and notes that
would name two files alike named by their paths (`named_apart`).
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from connectors import json_lines
from connectors.archives import TextCopy, Unpacked, is_zip, text_copy_needed, text_opener, truncation_named
from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.content_names import SHOWN_AS, NamedByContent, content_suffix
from connectors.csv_dialect import first_lines, sniff_csv
from connectors.derivative_data import NotTicks, not_ticks
from connectors.expansion import Progress
from connectors.file_plan import FilePlan
from connectors.file_scans import READ_TYPES, is_csv, is_dbn, is_tick_file, workbook_named_as_text
from connectors.file_suffixes import PARQUET_SUFFIXES
from connectors.databento_jobs import job_files, job_files_skipped
from connectors.derivative_streams import split_market_notes
from connectors.inverse_contracts import inverse_notes, plan_streams
from connectors.input_paths import folder_held, no_tick_folder
from connectors.json_lines import is_json_lines
from connectors.layout import NoTickLayout, detect_columns
from connectors.lobster_files import book_refusal, books_beside_messages, books_skipped
from connectors.map_options import Refine
from connectors.multiindex_tables import long_copy
from connectors.planning import plan_file, regular_file
from connectors.stream_copies import StreamCopy, is_stream
from connectors.unreadable_files import UnreadableFile, skipped_said, with_skip_hint
from engine.quoting import quoted
from engine.rust_paths import rust_path

def _members_skipped(archive: Path, not_tick_files: list[str], no_layout: list[tuple[str, str]],
                     read: bool) -> list[str]:
    """The notes on an archive's members that are no tick files: a name replay does not read (`.DS_Store`, a
    `notes.pdf`), a `.txt` whose columns hold no tick layout (a vendor's readme). Refused when nothing else in the
    archive read: then the archive holds no ticks, or its text files need a column map (the first one's error)."""
    if not read and no_layout:
        raise ValueError(no_layout[0][1])
    if not read and not_tick_files:
        raise ValueError(f"{archive}: the zip archive holds no tick file, only {', '.join(not_tick_files)}; replay "
                         f"reads {READ_TYPES}")
    notes = [f"{archive}: skipped {', '.join(not_tick_files)} inside: not tick files (replay reads "
             f"{READ_TYPES})"] if not_tick_files else []
    return notes + [_text_skipped(f"{archive} ({member} inside)", why) for member, why in no_layout]


def _text_skipped(named: str, why: str) -> str:
    """The note on a text file skipped among others: its columns hold no tick layout (`why`, the refusal)."""
    return f"{named}: skipped: a text file whose columns hold no tick layout (a readme?): " \
           f"{why.split(': ', 1)[-1].split('. ', 1)[0]}"


def named_apart(plans: list[Any]) -> list[Any]:
    """Plans whose notes would name their files alike (per-day folders: `2026-03-10/AAPL.parquet`,
    `2026-03-11/AAPL.parquet`, ...) name each by the path given instead; a name alone tells no day from another.
    A name that is unique stays short."""
    def names(plan: FilePlan) -> dict[str, str]:  # name in notes -> the file as given (an archive's note: the archive)
        return {plan.path.name: plan.given_name} | ({plan.origin.name: str(plan.origin)} if plan.origin else {})

    files_named: dict[str, set[str]] = defaultdict(set)
    for plan in plans:
        for name, given in (names(plan) if isinstance(plan, FilePlan) else {}).items():
            files_named[name].add(given)
    apart = []
    for plan in plans:
        if not isinstance(plan, FilePlan):
            apart.append(plan)
            continue
        alike = {name: given for name, given in names(plan).items() if len(files_named[name]) > 1}
        notes = tuple(next((type(note)(given + note[len(name):]) for name, given in alike.items()  # a Caution stays
                            if note.startswith(f"{name}: ")), note) for note in plan.notes)
        apart.append(replace(plan, notes=notes))
    return apart


def _member_copy(archive: Path, inside: Path) -> TextCopy | None:
    """`text_copy_needed` of an archive's member, its refusal naming the archive and the member."""
    try:
        return text_copy_needed(inside)
    except ValueError as e:
        raise ValueError(f"{archive} ({inside.name} inside): {str(e).split(': ', 1)[1]}") from None


def _no_data_rows(path: Path) -> bool:
    """True for a file with nothing to replay: zero bytes, a CSV of a header alone or blank lines, a Parquet file
    of no rows, a DBN file of its metadata header alone. Such a file (a day with no prints) is skipped; its layout
    cannot be told from no rows (a header alone reads its time column as epoch ns, which --tz would refuse)."""
    if not path.is_file():
        return False  # planning says it is missing
    if path.stat().st_size == 0:
        return True
    try:
        if is_dbn(path):
            from connectors.dbn import has_records

            return not has_records(path)
        if is_csv(path):
            return not sniff_csv(path).rows
        if is_json_lines(path):
            return json_lines.table(path).objects == 0
        if path.suffix.lower() in PARQUET_SUFFIXES:
            return pl.scan_parquet(rust_path(path)).select(pl.len()).collect().item() == 0
    except (OSError, ImportError, pl.exceptions.PolarsError, ValueError):
        return False  # not readable as such: planning says why
    except Exception:  # noqa: BLE001 - databento-dbn's own decode error: planning names the file as not DBN
        return False
    return False


def not_a_header(path: Path, cmap: ColumnMap | Refine | None) -> str | None:
    """The one line of a CSV of no data rows when it is no header of a tick table (no time nor price column
    detected, none of the columns a map names): a failed download saved as the day (an API's JSON error, "Access
    denied", an S3 XML error), which must not pass for a day without prints. None for a tick header, a blank file,
    and a `.txt` (a folder's one-line readme: the folder's check says it holds no tick file)."""
    if not is_csv(path) or path.suffix.lower() == ".txt":
        return None
    dialect = sniff_csv(path)
    with text_opener(path)(path, "rt", encoding="utf-8-sig", errors="replace", newline="") as f:
        lines, _ = first_lines(f, path, dialect.skipped + 1)
    if not dialect.header or not lines:
        return None
    line = lines[-1].strip()
    names = [name.strip() for name in next(csv.reader([line], delimiter=dialect.separator), [])]
    if isinstance(cmap, ColumnMap):  # the map says the columns: its header names one of them
        return None if set(names) & {v for v in cmap.to_dict().values() if isinstance(v, str)} else line
    try:
        detect_columns(path, {name: pl.String for name in names}, hints=cmap.keys if cmap is not None else None)
    except NoTickLayout:
        return line
    return None


def not_a_tick_file(named: str, line: str) -> ValueError:
    """The refusal of a one-line file that is no tick file: a CSV's line that is no tick header, a JSON-lines
    file's one object with no tick's fields (`{"error": "Access denied"}`): a failed download saved as the day."""
    shown = line if len(line) <= LINE_SHOWN else line[:LINE_SHOWN] + "..."
    return UnreadableFile(f"{named}: not a tick file: its one line holds no time or price column ({quoted(shown)}); a "
                      f"failed download's error saved as the file? Download it again (a day without prints "
                      f"is a header alone, or zero bytes)")


def _error_body(path: Path) -> str | None:
    """The one line of a JSON-lines file whose one line is an object holding no array of objects (an API's error
    body: `{"code": 403, "msg": ...}`); None for more lines, or for a REST response whose ticks sit in an array (its
    own refusal says how to lift them)."""
    with text_opener(path)(path, "rt", encoding="utf-8-sig", errors="replace") as f:
        lines = [line.strip() for _, line in zip(range(3), (line for line in f if line.strip()))]
    if len(lines) != 1:
        return None
    try:
        body = json.loads(lines[0])
    except ValueError:
        return None
    return lines[0] if isinstance(body, dict) and not _holds_objects(body) else None


def _holds_objects(value: Any) -> bool:
    """Whether a JSON value holds an array of objects at any depth (where a REST response keeps its ticks)."""
    if isinstance(value, dict):
        return any(_holds_objects(v) for v in value.values())
    return isinstance(value, list) and any(isinstance(v, dict) or _holds_objects(v) for v in value)


HEADER_ALONE = "a header alone or zero bytes"  # why a tick file of no data rows has none (a day left out)
JSON_NO_RECORDS = "a JSON answer of no records"  # a REST answer of none whose reader gives no reason of its own


def _skipped_said(skipped: list[tuple[str, str | None]]) -> list[Caution]:
    """The cautions on files of no data rows, said again at the run's end: a day with no prints, or a day missing
    from what is scored (a download that wrote a header alone). One per reason (`why`, e.g. HEADER_ALONE), so each
    file is said with the reason true of it; None: its reader's own note says why (Polygon's resultsCount 0)."""
    said = []
    for why in dict.fromkeys(why for _, why in skipped):
        named = [name for name, reason in skipped if reason == why]
        shown = ", ".join(named[:SKIPPED_SHOWN]) + (f", ... {len(named) - SKIPPED_SHOWN} more"
                                                    if len(named) > SKIPPED_SHOWN else "")
        if len(named) == 1:
            said.append(Caution(f"{named[0]}: no data rows; skipped" + (f" ({why}: a day left out)" if why else "")))
        else:
            said.append(Caution(f"{len(named)} files of no data rows skipped" +
                                (f" ({why}: days left out)" if why else "") + f": {shown}"))
    return said


LINE_SHOWN = 100  # characters of a refused one-line file shown
SKIPPED_SHOWN = 5  # files of no data rows named in the caution that says how many were skipped


class OpenedFiles:
    """A replay's files read into plans, with the notes on how (files skipped, bytes that are not UTF-8) and the
    copies unpacked for them (zip archives' files, text copies, JSON-lines files' Parquet copies)."""

    def __init__(self, skip_bad_files: bool = False) -> None:
        self.notes: list[str] = []
        # files that cannot be read, left out (connectors/unreadable_files.py): (file, why), for the run record
        self.skip_bad_files = skip_bad_files
        self.bad_files: list[tuple[str, str]] = []
        # files of no data rows, as named, and why they hold none: said once, with their count (_skipped_said)
        self.skipped: list[tuple[str, str | None]] = []
        # zip archives' files, unpacked, and JSON-lines files' Parquet copies, while the replay lives
        self.unpacked: list[Unpacked | json_lines.Opened | NamedByContent] = []

    def plans_of(self, specs: list[tuple[Path, ColumnMap | Refine | None, bool]], folder_texts: dict[Path, Path]
                 ) -> list[Any]:
        """Every file's plans. A `.txt` found in a folder whose columns hold no tick layout (a vendor's readme,
        HistData's status report) is skipped with a note while other files read, as a zip archive's member is.
        Where the only files given are a folder's `.txt` files of no data rows (a one-line readme), the folder is
        refused as one holding no tick file, as the docs say, not read as files of no ticks."""
        plans, no_layout, not_ticks_said = [], [], []
        if len(specs) > 1:  # one set of keys for several files (`trade.csv quote.csv`): each file's kind its own
            specs = [(path, replace(cmap, across_files=True) if isinstance(cmap, Refine) else cmap, explicit)
                     for path, cmap, explicit in specs]
        for spec in specs:
            try:
                plans += self._plans(*spec)
            except NotTicks as e:  # funding, mark prices, liquidations: the other files replay without it
                not_ticks_said.append(str(e))
            except UnreadableFile as e:  # cut short, damaged: refused, unless asked to replay the others without it
                if not self.skip_bad_files or len(specs) == 1:  # (one file given: nothing else to replay)
                    raise with_skip_hint(e, len(specs)) from None
                self.bad_files.append((str(spec[0]), str(e)))
                self.notes.append(skipped_said(e))
            except NoTickLayout as e:
                if spec[0] not in folder_texts:
                    raise
                no_layout.append((spec[0], str(e)))
        if self.bad_files and not plans and not self.skipped:
            raise ValueError(f"nothing to replay: no file given could be read ({len(self.bad_files)} skipped, the "
                             f"first: {self.bad_files[0][1]})")
        if not_ticks_said and not plans:
            raise ValueError("nothing to replay: " + ("; and ".join(not_ticks_said) if len(not_ticks_said) < 3 else
                             f"{not_ticks_said[0]}; and {len(not_ticks_said) - 1} more such files")) from None
        self.notes.extend(Caution(f"{why}. Skipped; the other files replay") for why in not_ticks_said)
        self.notes.extend(inverse_notes(plans))
        self.notes.extend(Caution(note) for note in split_market_notes(plans, plan_streams))
        if no_layout and not plans:
            raise ValueError(no_layout[0][1])
        if not plans and specs and all(spec[0] in folder_texts for spec in specs):
            folder = folder_texts[specs[0][0]]
            empty = tuple(path for path, _, _ in specs if folder_texts[path] == folder)
            raise no_tick_folder(folder, folder_held(folder), empty)
        self.notes.extend(_text_skipped(str(path), why) for path, why in no_layout)
        self.notes.extend(_skipped_said(self.skipped))
        return plans

    def _skip(self, path: Path, named: str, cmap: ColumnMap | Refine | None) -> None:
        """A file of no data rows skipped as a day without prints; refused when its one line is no tick header."""
        if (line := not_a_header(path, cmap)) is not None:
            raise not_a_tick_file(named, line)
        why: str | None = HEADER_ALONE
        # why a REST answer holds none (Polygon's resultsCount 0): said by its reader alone
        if is_json_lines(path) and path.stat().st_size > 0:
            notes = json_lines.table(path).notes
            self.notes.extend(notes)
            why = None if notes else JSON_NO_RECORDS
        self.skipped.append((named, why))

    def _plans(self, path: Path, cmap: ColumnMap | Refine | None, explicit: bool) -> list[Any]:
        """`_file_plans`, its refusal naming a stream's temporary copy (standard input's) as the user gave it."""
        try:
            return self._file_plans(path, cmap, explicit)
        except ValueError as e:
            if str(path) not in SHOWN_AS:
                raise
            e.args = (str(e).replace(str(path), SHOWN_AS[str(path)]),)
            raise

    def _file_plans(self, path: Path, cmap: ColumnMap | Refine | None, explicit: bool) -> list[Any]:
        """The file's plan; for a zip archive, one per file inside, each with the map the archive was given.
        None for a file with no data rows (a day without prints): skipped with a note."""
        if is_stream(path):  # a pipe, /dev/stdin, `-` given in Python: read whole into a file first, as the CLI does
            copy = StreamCopy(path)
            self.unpacked.append(copy)
            self.notes.append(copy.note)
            return self._plans(copy.path, cmap, explicit)
        regular_file(path)  # (a FIFO's open would wait for a writer; /dev/zero never ends)
        if (suffix := content_suffix(path)) is not None:  # `EQY_US_ALL_TRADE_20240308(.gz)`: by its content
            return self._named_by_content(NamedByContent(path, suffix), cmap, explicit)
        if why := workbook_named_as_text(path) or book_refusal(path):  # (an .xlsx renamed .csv: before its bytes
            raise ValueError(why)  # are copied as text; LOBSTER's order book alone: its message file is read)
        with truncation_named(path):  # the first read of a .csv.gz's text: a damaged one is named here
            # UTF-16, Windows-1252 or GBK text, or \r alone ends lines: read a copy (text of no encoding it tells:
            # refused, never read with its odd bytes replaced)
            copied = text_copy_needed(path) if is_csv(path) else None
        if is_json_lines(path) and path.is_file():  # its Parquet copy lives while the replay does
            self.unpacked.append(json_lines.Opened(path))
        if not isinstance(cmap, ColumnMap) and not is_zip(path) and (long := long_copy(path)) is not None:
            self.unpacked.append(long)  # yfinance's MultiIndex columns: read by name (a full map reads the file)
            plan = plan_file(long.paths[0], cmap, explicit)
            return [replace(plan, origin=path, notes=(long.note, *plan.notes))]
        if not is_zip(path) and copied is None:
            with truncation_named(path):
                if (why := not_ticks(path, cmap, str(path))) is not None:
                    raise NotTicks(why)
                if _no_data_rows(path):
                    self._skip(path, str(path), cmap)
                    return []
                try:
                    return [plan_file(path, cmap, explicit)]
                except NoTickLayout:  # one JSON object with no tick's fields: an API's error body, not a layout
                    if is_json_lines(path) and (line := _error_body(path)) is not None:
                        raise not_a_tick_file(str(path), line) from None
                    raise
        with truncation_named(path):  # (a cut .csv.gz's copy stops where its data does)
            unpacked = Unpacked(path, is_tick_file) if copied is None else Unpacked.text_copy(path, copied)
        self.unpacked.append(unpacked)
        plans, no_layout, progress = [], [], Progress()
        if books := books_beside_messages(unpacked.paths):  # LOBSTER's sample download: a day's two files zipped
            self.notes.append(f"{path}: {books_skipped(books)}")
        if job := job_files(unpacked.paths):  # a Databento batch job's zip
            self.notes.append(f"{path}: {job_files_skipped(job)}")
        for i, inside in enumerate(unpacked.paths):
            progress.tick(lambda: f"reading {path}: {i:,} of its {len(unpacked.paths):,} files planned")
            if inside in books or inside in job:
                continue
            copy = None
            if copied is None and is_csv(inside) and (member := _member_copy(path, inside)):  # such a file in a zip
                copy = Unpacked.text_copy(inside, member)
                self.unpacked.append(copy)
                inside = copy.paths[0]
            if is_json_lines(inside):
                self.unpacked.append(json_lines.Opened(inside))
            if _no_data_rows(inside):
                self._skip(inside, str(path) if copied else f"{path} ({inside.name} inside)", cmap)
                continue
            if (why := not_ticks(inside, cmap, f"{path} ({inside.name} inside)", archive=path)) is not None:
                raise NotTicks(why)  # a zipped funding, mark-price or liquidations file: skipped beside others
            try:
                plan = plan_file(inside, cmap, explicit)
            except ValueError as e:  # named as the user knows it: the archive, not where it was unpacked
                said = str(e).replace(str(inside), str(path) if copied else f"{path} ({inside.name} inside)")
                if copied is None and isinstance(e, NoTickLayout) and inside.suffix.lower() == ".txt":
                    no_layout.append((unpacked.members[i], said))  # a readme or licence, unless nothing else reads
                    continue
                raise (UnreadableFile if isinstance(e, UnreadableFile) else ValueError)(said) from None
            if isinstance(plan, FilePlan):
                plan = replace(plan, origin=path, notes=(unpacked.note(i, copy), *plan.notes))
            else:
                plan.origin = path  # a DBN file inside
            plans.append(plan)
        self.notes.extend(_members_skipped(path, unpacked.left_out, no_layout, read=bool(plans)))
        return plans

    def _named_by_content(self, link: NamedByContent, cmap: ColumnMap | Refine | None, explicit: bool) -> list[Any]:
        """The plans of a file read through a link named by its content, each naming the file as given."""
        self.unpacked.append(link)
        try:
            plans = self._plans(link.path, cmap, explicit)
        except ValueError as e:
            e.args = (link.named(str(e)),)
            raise
        self.notes.append(link.note())
        return [replace(plan, given=link.given, notes=tuple(type(n)(link.named(n)) for n in plan.notes))
                if isinstance(plan, FilePlan) else plan for plan in plans]

    def close(self) -> None:
        """Remove the temporary folders the zip archives and UTF-16 files were unpacked into."""
        for unpacked in self.unpacked:
            unpacked.close()
