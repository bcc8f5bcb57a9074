"""The progress bar of a backtest's replay: rows read of the files' total (ticks taken of --max-ticks where that
ends the run first), ticks/s and ETA, and where the replay is: the event time reached and the file it read it from
(review382 #6: over a month of daily files, "which day" is what tells whether to wait). The same place is said
when a Ctrl-C stops the run (`position_text`).

``progress=None`` (the default, and the CLI's without --quiet) is automatic: a bar on stderr when it is a terminal,
a notebook's own bar (tqdm.notebook's widget where ipywidgets is installed, else the text bar) when run in a Jupyter
kernel, whose stderr is no terminal (review354 #10), and nothing in a log or a pipe. ``True`` always shows one,
``False`` never. tqdm is imported only when a bar is shown: tqdm starts its monitor thread for every bar made, a
disabled one too, so a run without a bar makes none (review354 #6). The loop (backtest_loop.py) and a resume's
rebuild (backtest_resume.py) advance it (`show_read`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from connectors.replay import FileReplay
from connectors.tick_times import utc_text


class NoBar:
    """What the loop advances when no bar is shown: a count, and nothing drawn."""

    def __init__(self) -> None:
        self.n = 0
        self.counts_ticks = False

    def update(self, n: int = 1) -> None:
        self.n += n

    def set_description(self, _: str) -> None:
        pass

    def close(self) -> None:
        pass


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (IPython's shell with a kernel behind it): its stderr is a stream
    to the notebook, never a terminal, yet a person watches it."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return getattr(shell, "kernel", None) is not None


def progress_bar(enabled: bool | None, replay: FileReplay, max_ticks: int | None) -> Any:
    """Rows read (valid or rejected) of the files' total, ticks/s and ETA: on stderr when it is a terminal, in the
    notebook when run in one (``enabled`` None), always (True) or never (False)."""
    notebook = enabled is not False and in_notebook()
    if not (notebook or enabled or (enabled is None and sys.stderr.isatty())):
        return NoBar()
    if notebook and importlib.util.find_spec("ipywidgets") is not None:  # (tqdm's widget cannot draw without it)
        from tqdm.notebook import tqdm
    else:  # a terminal's bar; in a notebook without ipywidgets, the same text redrawn in the cell's output
        from tqdm import tqdm
    total = replay.rows()
    # --max-ticks ends the run before the files do: the bar counts ticks taken against it, not rows read (rows a
    # --streams filter leaves out ran the count past its total, losing the % and the ETA)
    counts_ticks = max_ticks is not None and (total is None or max_ticks < total)
    bar = tqdm(total=max_ticks if counts_ticks else total, unit=" ticks", desc="replaying", file=sys.stderr,
               dynamic_ncols=True, smoothing=0.1)
    bar.counts_ticks = counts_ticks
    return bar


def show_read(bar: Any, replay: FileReplay, ticks: int) -> None:
    """The bar at the rows read so far: the ``ticks`` taken from ``replay`` and the rows it rejected or a filter
    left out, as the files' total counts both; or the ticks alone, when it counts them against --max-ticks (tqdm
    redraws at most 10 times a second, however often this is called)."""
    read = ticks if bar.counts_ticks else ticks + sum(replay.rejected.values())
    bar.update(read - bar.n)


def show_position(bar: Any, replay: FileReplay, ts: int, origin: tuple[int, int]) -> None:
    """The bar's description: the event time reached and the file of the tick there (``origin``: FileReplay's
    file index and row), e.g. `replaying 2024-03-12 14:03Z AAPL/2024-03-12.csv.gz (19/34)`; redrawn with the count,
    so a call per batch costs a string."""
    if isinstance(bar, NoBar):
        return
    when = utc_text(ts)
    bar.set_description(f"replaying {when[:10]} {when[11:16]}Z {_file_words(replay, origin[0])}", refresh=False)


def position_text(replay: FileReplay, ts: int, origin: tuple[int, int]) -> str:
    """Where a replay is, in words, for the line a stop says: `event time 2024-03-13T13:45:02Z, file
    AAPL/2024-03-13.csv.gz (21 of 34)`."""
    return f"event time {utc_text(ts)}, file {_file_words(replay, origin[0], ' of ')}"


def _file_words(replay: FileReplay, index: int, of: str = "/") -> str:
    """A file as its folder and name (a folder of daily files per symbol: `AAPL/2024-03-12.csv.gz`) and its place
    among the files read."""
    plans = replay.plans
    if not 0 <= index < len(plans):
        return "?"
    path = Path(str(getattr(plans[index], "given_name", None) or plans[index].path))
    short = f"{path.parent.name}/{path.name}" if path.parent.name else path.name
    return f"{short} ({index + 1}{of}{len(plans)})"
