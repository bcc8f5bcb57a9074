"""A replay's files taken together, outside the merge by event time (connectors/replay.py): the streams selected
checked against the streams they hold (a pattern matching none refused, a DBN instrument id named by its symbol),
the time range against their spans, the cautions they give together, what reading them found (said at a run's
end), the sequence columns they are read by, and per file its name in the fingerprint and the lines of a
JSON-lines file's rows."""

from __future__ import annotations

from typing import Any

from connectors import json_lines
from connectors.capture_clocks import two_clocks
from connectors.file_overlaps import overlapping_files, time_spans
from connectors.file_plan import source_path
from connectors.json_lines import is_json_lines
from connectors.price_levels import far_apart_levels
from connectors.price_offsets import offset_names
from connectors.sequence_watch import SequenceWatch
from connectors.share_classes import share_class_spellings
from connectors.stream_selection import NoStreamMatched, StreamSelection
from connectors.time_range import TimeRange
from connectors.venue_notes import mixed_venues
from engine.quoting import quoted


def source_name(plan: Any) -> str:
    """A plan's file as the fingerprint names it: the archive's path and the file's name inside, if zipped."""
    origin = getattr(plan, "origin", None)
    return str(plan.path.resolve()) if origin is None else f"{origin.resolve()}!{plan.path.name}"


def message_lines(plan: Any) -> list[int] | None:
    """Each row's line (0-based) in a JSON-lines file whose messages hold several ticks, a row each; None where a
    row is a line already (or a record of a REST dump, or a row of any other file)."""
    if not is_json_lines(plan.path):
        return None
    line_of = json_lines.table(plan.path).line_of
    return None if line_of is None else line_of.to_list()


def across_files_notes(plans: list[Any], selection: StreamSelection | None) -> list[str]:
    """Cautions on what the files say together: one stream of several venues, or of two files over one time;
    one share class under two spellings, trades in one and quotes in the other; two files of one stream whose
    prices lie far apart; two captures of one stream read on two clocks."""
    spans = [time_spans(plan) for plan in plans]  # one scan of each file's streams, for each
    return mixed_venues(plans) + overlapping_files(plans, selection, spans) \
        + share_class_spellings(plans, spans, selection) \
        + far_apart_levels(plans, spans, selection) + two_clocks(plans, spans)


def selection_note(plans: list[Any], selection: StreamSelection) -> str:
    """The note naming the streams selected; refused when a pattern matches none of the streams the files
    hold. A DBN file without symbology names its streams by instrument id, known only once decoded: then the
    patterns are checked against the other files' streams alone, and only a pattern that none matches
    passes unchecked."""
    held, unknown = set(), []
    for plan in plans:
        names = plan.stream_names()
        if names is None:
            unknown.append(source_path(plan).name)
        else:
            held |= names
    if not unknown:
        try:
            return selection.check(held)
        except NoStreamMatched as e:  # a DBN instrument id given for its symbol: said, with the symbol
            ids = {i: symbols for plan in plans if hasattr(plan, "symbols_of_ids")
                   for i, symbols in plan.symbols_of_ids().items()}
            named = [f"{p} is the instrument id of {' / '.join(ids[p])}" for p in selection.unmatched(held)
                     if p in ids]
            if not named:
                raise
            raise NoStreamMatched(f"{e}; {'; '.join(named)} (a DBN file's streams are named by symbol: select "
                                  f"that)") from None
    kept = [s for s in sorted(held) if selection.matches(s)]
    return (f"streams selected {selection.quoted()}: {', '.join(kept) or 'none'} of the "
            f"other files, and whichever match in {', '.join(unknown)} (no symbology: streams named by "
            f"instrument id, unchecked); the others' ticks are left out and counted as filtered_out")


def check_range(plans: list[Any], time_range: TimeRange) -> None:
    """Refuse a range that holds none of the files' times, when every file says its first and last."""
    spans = [getattr(plan, "span", None) for plan in plans]
    if not spans or None in spans or any(time_range.overlaps(*span) for span in spans):
        return
    first, last = min(s[0] for s in spans), max(s[1] for s in spans)
    raise ValueError(time_range.holds_none("the files' ticks", first, last))


def sequence_columns(plans: list[Any]) -> str:
    """The sequence columns the files are read by (a map's `sequence`), quoted, or "" when none is."""
    names = sorted({column for plan in plans
                    if (column := getattr(getattr(plan, "columns", None), "sequence", None)) is not None})
    return " / ".join(map(quoted, names))


def found_on_read(plans: list[Any], sequences: SequenceWatch | None) -> list[str]:
    """What reading the files found on the way, said at a run's end (known once their records are read): DBN
    instruments named by their id outside their mapping's dates, cancels and fills of orders a book never saw
    (a file starting mid-session), and streams a per-stream price_offset names that no file holds."""
    notes = [note for plan in plans for note in plan.found_on_read()]
    if sequences is not None:
        notes += sequences.notes(sequence_columns(plans))
    shifted = [plan for plan in plans if isinstance(plan.price_offset, dict)]
    named = {name: 0.0 for plan in shifted for name in plan.price_offset}
    held = {stream for plan in shifted for stream in plan.streams_held()}
    if unheld := sorted(offset_names(named, held)):
        shown = ", ".join(sorted(held)[:8]) + (", ..." if len(held) > 8 else "")
        notes.append(f"price_offset names stream(s) {', '.join(map(quoted, unheld))}, which the files never "
                     f"hold: not shifted (their streams: {shown or 'none'})")
    return notes

