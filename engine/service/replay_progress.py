"""The progress bar of a backtest's replay: rows read of the files' total, ticks/s and ETA.

Shown on stderr only when it is a terminal (a log or a pipe gets no bar), and tqdm is imported only when a run
starts; the loop (backtest_loop.py) and a resume's rebuild (backtest_resume.py) advance it (`show_read`).
"""

from __future__ import annotations

import sys
from typing import Any

from connectors.replay import FileReplay


def progress_bar(enabled: bool, replay: FileReplay, max_ticks: int | None) -> Any:
    """Rows read (valid or rejected) of the files' total, ticks/s and ETA, on stderr when it is a terminal."""
    from tqdm import tqdm

    show = enabled and sys.stderr.isatty()
    total = replay.rows() if show else None
    if total is not None and max_ticks is not None:
        total = min(total, max_ticks)
    return tqdm(total=total, unit=" ticks", desc="replaying", disable=not show, file=sys.stderr,
                dynamic_ncols=True, smoothing=0.1)


def show_read(bar: Any, replay: FileReplay, ticks: int) -> None:
    """The bar at the rows read so far: the ``ticks`` taken from ``replay`` and the rows it rejected, as the
    files' total counts both (tqdm redraws at most 10 times a second, however often this is called)."""
    bar.update(ticks + sum(replay.rejected.values()) - bar.n)
