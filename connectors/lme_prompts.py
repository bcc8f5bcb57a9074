"""An LME trade file's `Prompt` beside its `Metal`: CAD 3M (three months forward) and CAD Cash (spot) are two
contracts, each its own series a little apart in price (the contango), so a file that mixes prompts of one metal
read by `Metal` alone would merge two series into one stream, its price stepping between them at every switch.
Where the detected stream column is `Metal` and a `Prompt` column beside it holds several values, the stream is
both, `CAD.3M` and `CAD.Cash`, as a contract month is joined to its symbol (connectors/layout.py), said in a note;
a file of one prompt keeps the metal's name (`CAD`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from connectors.column_map import ColumnMap
from connectors.column_names import PROMPT_NAMES
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.file_scans import distinct_text
from connectors.shell_words import columns_option
from engine.quoting import quoted

METAL_NAMES = ("metal",)  # the stream column an LME file names its instrument by (connectors/field_names.py)
PROMPTS_SHOWN = 3


def prompt_beside_metal(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                        dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """The map with the stream read as `Metal+Prompt` (CAD.3M) and the note that says so, when the detected stream
    column is a metal and the prompt column beside it holds several values; else as it was."""
    metal = cmap.stream_col
    prompt = next((n for n in schema if normal_name(n) in PROMPT_NAMES), None)
    if metal is None or "+" in metal or normal_name(metal) not in METAL_NAMES or prompt is None \
            or prompt in cmap.source_columns():
        return cmap, []
    prompts = distinct_text(path, names, dialect, prompt, PROMPTS_SHOWN + 1)
    if len(prompts) < 2:  # one prompt: the metal names its one series
        return cmap, []
    shown = ", ".join(prompts[:PROMPTS_SHOWN]) + (", ..." if len(prompts) > PROMPTS_SHOWN else "")
    return replace(cmap, stream_col=f"{metal}+{prompt}"), [
        f"{path.name}: streams from columns {quoted(metal)} and {quoted(prompt)} joined by a '.' (CAD.3M): the file "
        f"mixes prompts ({shown}), each a contract of its own price series ({columns_option(f'stream={metal}')} reads "
        f"a metal's prompts as one stream)"]
