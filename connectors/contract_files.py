"""Files of one futures contract each, named by its month (`CL_202501.csv` and `CL_202502.csv`, `CL-Jan25.csv`,
`FGBL_032025.csv`, a folder per month `CL/202501/trades.csv`), as brokers' and vendors' downloads are: the file-name
rule names the stream by the root alone (`CL`: the month token reads as a date), so the two contracts' ticks
interleaved into one stream, its price alternating between their levels, and each label across a switch scored
that jump (review441 #10). Files of one name-derived stream whose names hold different contract months and whose
times overlap (both contracts trading at once) are two contracts: each file's stream keeps its month
(`CL 202501`, as a contract month column's stream does), said in a note. Files whose times follow each other
(`AAPL_202401.csv` then `AAPL_202402.csv`, a month of one stock's trades each) stay one stream, as do a currency
or crypto pair's, which has no contract months (HistData's `DAT_ASCII_EURUSD_T_202401.csv`)."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace
from typing import Any

from connectors.file_names import PAIR, stream_from_name_note, symbol_in_name
from connectors.file_plan import FilePlan
from connectors.file_suffixes import file_stem

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
# A contract month in a name: 202501, 2025-01, 032025, 03.2025, Jan25, JAN2025; not a day (20250115, 2025-01-15)
MONTH_IN_NAME = re.compile(
    r"(?<![0-9])(?:(?P<year>20\d\d)[-_. ]?(?P<month>0[1-9]|1[0-2])|(?P<month2>0[1-9]|1[0-2])[-_. ]?(?P<year2>20\d\d))"
    r"(?![-_. ]?\d)"
    rf"|(?<![A-Za-z])(?P<name>{'|'.join(MONTHS)})[-_ ]?(?P<year3>(?:20)?\d\d)(?![-_. ]?\d)", re.IGNORECASE)


def contract_month(text: str) -> str | None:
    """The one contract month ``text`` (a file's stem or folder's name) holds, as YYYYMM; None for none or several."""
    found = list(MONTH_IN_NAME.finditer(text))
    if len(found) != 1:
        return None
    m = found[0]
    if m["name"]:
        return f"20{m['year3'][-2:]}{MONTHS.index(m['name'].lower()) + 1:02d}"
    return f"{m['year'] or m['year2']}{m['month'] or m['month2']}"


def _month_of(plan: FilePlan) -> str | None:
    """The contract month a file's name holds, else its folder's (`CL/202501/trades.csv`)."""
    return contract_month(file_stem(plan.path)) or contract_month(plan.path.parent.name)


def contracts_named_apart(plans: list[Any]) -> list[Any]:
    """``plans`` with each file of a contract month its own stream (module docstring), the file-name note replaced
    by one that says why."""
    named: dict[str, list[int]] = defaultdict(list)  # stream from the file's name -> its plans' indices
    for i, plan in enumerate(plans):
        cmap = getattr(plan, "columns", None)
        if isinstance(plan, FilePlan) and cmap.stream_col is None and cmap.stream is not None and \
                plan.span is not None and (found := symbol_in_name(plan.path)) is not None and \
                found[0] == cmap.stream and stream_from_name_note(plan.path, *found) in plan.notes:
            named[cmap.stream].append(i)
    apart = list(plans)
    for stream, indices in named.items():
        months = {i: _month_of(plans[i]) for i in indices}
        # (a currency or crypto pair has no contract months: HistData's DAT_ASCII_EURUSD_T_202401 is a month's data)
        if len(indices) < 2 or PAIR.match(stream) or None in months.values() or len(set(months.values())) < 2 or \
                not _overlapping([plans[i].span for i in indices]):
            continue
        for i in indices:
            plan = plans[i]
            contract = f"{stream} {months[i]}"
            said = (f"{plan.path.name}: stream {contract}, from the file name's root and contract month: files of "
                    f"{stream} named by different months trade at the same times, so each is a contract of its own "
                    f"(a stream each; --columns stream_name={stream} reads them as one)")
            old = stream_from_name_note(plan.path, *symbol_in_name(plan.path))
            apart[i] = replace(plan, columns=replace(plan.columns, stream=contract),
                               notes=tuple(said if note == old else _read_as_contract(note, plan.path.name, stream)
                                           for note in plan.notes))
    return apart


def _read_as_contract(note: str, file_name: str, root: str) -> str:
    """A file's layout note (`FILE: ...; read as ..., stream_name=CL, ...`) with its stream said as the file is
    read: the root's contract (the note after it names `CL 202501`), in words alike for every month's file, so the
    files' layout notes are still said as one."""
    if not note.startswith(f"{file_name}: ") or "; read as " not in note:
        return note
    return re.sub(rf"(?<=[ (])stream_name={re.escape(root)}(?=, |\)|$)",
                  f"stream from the file name's root and contract month ({root} YYYYMM)", note)


def _overlapping(spans: list[tuple[int, int]]) -> bool:
    """Whether any two of the files' spans (first, last time) overlap: contracts trading at once, not months of one
    series following each other."""
    ordered = sorted(spans)
    return any(later[0] < earlier[1] for earlier, later in zip(ordered, ordered[1:]))
