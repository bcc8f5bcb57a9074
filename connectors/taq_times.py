"""The zone of NYSE TAQ's times, as WRDS serves them (daily TAQ's trades `ctm`, quotes `cqm`, NBBO `nbbom` and
the NBBO files with `BEST_*` columns; TAQ-like `SYMBOL,DATE,TIME_M,...` exports): wall-clock times in New York,
summer time included, written without an offset. Read as UTC they were 4 or 5 hours early, a 09:30 open at 05:30
New York time (review 115, finding 15). A detected TAQ layout is read in America/New_York, with a note, unless
--tz (a map's `tz`) says otherwise."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from connectors.column_map import ColumnMap
from connectors.field_names import normal_name

TAQ_ZONE = "America/New_York"
TAQ_CLOCK = "time_m"  # TAQ's time of day (to the nanosecond since 2015), beside its DATE
# columns no other layout has: WRDS's symbol root and share class, daily TAQ's correction, condition and sequence
# fields, monthly TAQ's G127
TAQ_MARKS = frozenset({"sym_root", "sym_suffix", "tr_corr", "tr_scond", "tr_seqnum", "qu_cond", "qu_seqnum",
                       "natbbo_ind", "nbbo_qu_cond", "g127", "best_bidex", "best_askex"})


def is_taq(cmap: ColumnMap, schema: Mapping[str, Any]) -> bool:
    """Whether a detected map reads a TAQ file's times: a date and a time-of-day column (`DATE+TIME_M`), the
    clock TAQ's TIME_M or the file holding a column only TAQ writes."""
    if len(cmap.ts_columns) != 2:
        return False
    columns = {normal_name(c) for c in schema}
    return normal_name(cmap.ts_columns[1]) == TAQ_CLOCK or bool(columns & TAQ_MARKS)


def taq_zone(cmap: ColumnMap, schema: Mapping[str, Any]) -> ColumnMap:
    """A detected TAQ map in New York's zone (before the keys given apply: --tz replaces it)."""
    return replace(cmap, tz=TAQ_ZONE) if cmap.tz is None and is_taq(cmap, schema) else cmap


def taq_zone_note(path: Path, detected: ColumnMap, cmap: ColumnMap) -> list[str]:
    """Said when a TAQ file's times are read in New York's zone because its layout is TAQ's."""
    if detected.tz != TAQ_ZONE or cmap.tz != TAQ_ZONE:
        return []
    return [f"{path.name}: its times ({'+'.join(cmap.ts_columns)}) read as New York wall-clock times "
            f"({TAQ_ZONE}, summer time included), the zone TAQ writes them in (--tz ZONE says otherwise)"]
