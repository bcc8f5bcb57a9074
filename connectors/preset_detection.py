"""Which vendor preset a file's header names (layout detection's first step, connectors/layout.py), and a
preset read less its filter: a file with the preset's columns but not its keep column (coinbase-matches without
`type`) is read by the preset's map with no filter, and its note names the preset and the column it lacks."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from connectors.column_map import PRESETS, ColumnMap
from connectors.presets import detected_by


def detected_preset(names: list[str]) -> ColumnMap | None:
    """The headered preset whose columns (and `detected_by`) a file has, as detection reads it; None when none fits.
    A preset without `detected_by` is never picked: only given by name."""
    if (name := _fitting_preset(names)) is None:
        return None
    cmap = PRESETS[name]
    # no keep column: the preset less its filter, and no longer named it, so that a refinement (rebuilt from the
    # preset's keys) does not bring the filter back (its note names it: preset_lacking_keep)
    return cmap if set(cmap.keep or ()) <= set(names) else replace(cmap, keep=None, preset=None)


def _fitting_preset(names: Sequence[str]) -> str | None:
    """The name of the headered, detected preset whose columns (less its keep columns) a file has, else None."""
    for name, cmap in PRESETS.items():
        sign = detected_by(name)
        if cmap.names is None and sign is not None and set(cmap.source_columns()) - set(cmap.keep or ()) | sign \
                <= set(names):
            return name
    return None


def preset_lacking_keep(names: Sequence[str]) -> tuple[str, list[str]] | None:
    """The preset detection read a file by less its filter, and the keep columns the file lacks (coinbase-matches
    without `type`); None when the file has them all, or fits no preset."""
    if (name := _fitting_preset(names)) is None:
        return None
    lacking = [column for column in PRESETS[name].keep or () if column not in names]
    return (name, lacking) if lacking else None
