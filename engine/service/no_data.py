"""No data yet: the inputs of a replay (`backtest`, `feed replay`, `train`, `evaluate`) that hold no tick because
none has arrived, not because a command line is wrong. A job a scheduler runs every hour before the day's first file
lands, or while it holds its header alone, ends with its own exit status (exit_codes.NO_DATA), so that the
scheduler can skip or retry it and still alert on a typo (exit_codes.USAGE). The cases, said in docs/cli.md:

- a pattern given as an input (`'/data/today/*.csv'`) that matches no file (one inside a replay list: USAGE);
- a folder that holds no file at all (a drop folder still empty);
- files that hold no data row: each a header alone or zero bytes (a Parquet file of no rows alike).

A literal file name that is not there, a folder of other files (a readme, a PDF), rows that were all rejected or
filtered out are mistakes a re-run will not mend: those stay USAGE. The check runs in the service, before the
replay opens its inputs (`refuse_absent_inputs`), and where a reading ends with no tick (the commands' own refusals
raise NoData); connectors keep their own wording and errors.
"""

from __future__ import annotations

import glob
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from engine.path_words import shown_path


class NoData(ValueError):
    """The inputs hold no tick yet (the cases above): exit_codes.NO_DATA. A ValueError, as the refusals it
    specialises, for a Python caller that caught those."""


def refuse_absent_inputs(items: Iterable[Any]) -> None:
    """NoData for the first of the replay ``items`` (paths, (path, map) pairs, {"path": ...} entries) that stands
    for no file yet: a pattern that matches none, or an empty folder; nothing for any other (a file that is not
    there is the replay's to refuse, as a mistake)."""
    from connectors.input_paths import folder_held, is_pattern, item_path  # here: exit_codes imports NoData

    for item in items:
        path = item_path(item)
        if path is None:
            continue
        if is_pattern(path) and not glob.glob(str(path.expanduser()), recursive=True):
            where = "" if path.expanduser().is_absolute() else f" (in {shown_path(Path.cwd())})"
            # quoted as a shell takes it back: pasted unquoted, the shell would expand the pattern itself
            raise NoData(f"no file matches {shown_path(path)}{where}: no data yet (a pattern that names no file is "
                         f"expanded here as a shell would: * any name, ? one character, [abc] one of these, ** folders "
                         f"inside)")
        if path.is_dir() and not folder_held(path):
            raise NoData(f"{shown_path(path)} is an empty folder: no data yet (it holds no file)")
