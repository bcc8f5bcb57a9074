"""The process-wide settings a run changes for itself, put back when it returns (review354 #6): a notebook that
calls ``run_backtest`` keeps its own torch thread count and environment for the rest of its work.

What a run sets: torch's CPU threads (``model.threads``, pipeline.py), oneDNN's kernel cache capacities
(ONEDNN_PRIMITIVE_CACHE_CAPACITY, LRU_CACHE_CAPACITY: engine/models/linear.py, read once by oneDNN at its first kernel,
so putting the variables back changes nothing in this process's own cache) and MPLCONFIGDIR (calibration_plot.py,
only where matplotlib's own folder cannot be written). Runs may overlap in threads of one process (each thread's
answers are the same as a run alone only at the same thread count), so the state is taken when the first run begins
and put back when the last one ends, not by each.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from engine.models.linear import KERNEL_CACHE_VARIABLES

ENVIRONMENT = (*KERNEL_CACHE_VARIABLES, "MPLCONFIGDIR")

_lock = threading.Lock()
_running = 0
_before: tuple[int, dict[str, str | None]] | None = None


@contextmanager
def process_state_kept() -> Iterator[None]:
    """Run the body; once no run of this process is left in one, torch's thread count and ENVIRONMENT are as they
    were when the first began."""
    global _running, _before
    with _lock:
        if _running == 0:
            _before = torch.get_num_threads(), {name: os.environ.get(name) for name in ENVIRONMENT}
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0 and _before is not None:
                _put_back(*_before)
                _before = None


def _put_back(threads: int, environment: dict[str, str | None]) -> None:
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    for name, value in environment.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
