"""Whether a backtest's scores are in-sample: the notes run_backtest says (through `note`, and on its report's
``in_sample``) when it scored answers on ticks its model trained on, so a notebook's sweep hears them as the CLI's
user does (review420 #6: they were the CLI's alone). The checks themselves are checkpoint_notes.in_sample_note (a
`flashtick train` checkpoint), base_lineage.lineage_caution (the models a fine-tune descends from) and
builtin_in_sample.py's (the built-in model); this module picks which apply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from connectors.column_map import ColumnMap
from connectors.map_options import Refine
from connectors.time_range import TimeRange
from engine.service.backtest_report import BacktestReport
from engine.service.base_lineage import checkpoint_lineage, lineage_caution
from engine.service.builtin_in_sample import SEEN_END, builtin_in_sample_note, builtin_span_caution
from engine.service.checkpoint_notes import checkpoint_evaluation, in_sample_note
from engine.service.reading_record import reading_mismatch, reading_of, recorded_reading


def in_sample_notes(report: BacktestReport, files: list[Path], max_ticks: int | None,
                    same_reading: bool) -> list[str]:
    """Why ``report``'s scores are not out of sample, if they are not: a checkpoint's (the run's ``files`` among its
    training files, or their ticks inside the span it trained on, or inside the span a model it descends from trained
    on: base_lineage.py), else the built-in model's (a file of a shared set it trained on, else a stream scored
    inside that set's training span); a connectors.cautions.Caution is said as a warning. ``same_reading``: the
    files are read as training read them, over no time range (reads_as_trained), so training's tick positions are
    this run's."""
    scored = {stream: (first, report.split_ends[stream]) for stream, first in report.split_times.items()
              if stream in report.split_ends}
    if report.model_path is not None:
        evaluation = checkpoint_evaluation(Path(report.model_path))
        said = in_sample_note(evaluation, files, report, report.test_from, max_ticks, same_reading=same_reading)
        if said is None:  # its base's ticks, or its base's base's (review443 #1)
            said = lineage_caution(checkpoint_lineage(report.model_path), scored, "the scored span",
                                   "give a --test-from after that span's end")
        return [] if said is None else [said]
    if (said := builtin_in_sample_note(files, scored_from(report.test_from),
                                       f"give --test-from {SEEN_END:g} or later")) is not None:
        return [said]
    caution = builtin_span_caution(scored)  # a copy of those ticks elsewhere (review400 #5)
    return [] if caution is None else [caution]


def reads_as_trained(model_path: str | None, columns: Any, streams: list[str] | None,
                     time_range: TimeRange | None) -> bool:
    """Whether a backtest reads its files as ``model_path``'s training recorded reading them (the column map's
    reading options and the streams: reading_record.reading_mismatch), over no time range: then the tick
    positions its evaluation.json names are this run's. A model that recorded no reading counts as read alike.
    ``columns`` is run_backtest's: the CLI's column map (cli_reading.column_map_of), or a Python caller's map, preset
    name, ColumnMap or Refine."""
    if time_range is not None:
        return False
    recorded = recorded_reading(model_path)
    return recorded is None or reading_mismatch(recorded, reading_of(_as_map(columns), streams)) is None


def _as_map(columns: Any) -> Mapping[str, Any] | None:
    """run_backtest's ``columns`` as the command line's column map writes it (map_from_options)."""
    if isinstance(columns, str):  # a preset's name, as --preset NAME
        return {"preset": columns}
    if isinstance(columns, ColumnMap):
        return columns.to_dict()
    if isinstance(columns, Refine):
        return columns.keys
    return columns


def scored_from(test_from: Any) -> float | None:
    """Where a run's scored part starts, as a fraction of each stream's ticks (None: every answer is scored, or
    from an event time on)."""
    return test_from if isinstance(test_from, float) else None
