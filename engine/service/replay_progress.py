"""The progress bar of a backtest's replay: rows read of the files' total, ticks/s and ETA.

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
from typing import Any

from connectors.replay import FileReplay


class NoBar:
    """What the loop advances when no bar is shown: a count, and nothing drawn."""

    def __init__(self) -> None:
        self.n = 0

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
    if total is not None and max_ticks is not None:
        total = min(total, max_ticks)
    return tqdm(total=total, unit=" ticks", desc="replaying", file=sys.stderr, dynamic_ncols=True, smoothing=0.1)


def show_read(bar: Any, replay: FileReplay, ticks: int) -> None:
    """The bar at the rows read so far: the ``ticks`` taken from ``replay`` and the rows it rejected, as the
    files' total counts both (tqdm redraws at most 10 times a second, however often this is called)."""
    bar.update(ticks + sum(replay.rejected.values()) - bar.n)
