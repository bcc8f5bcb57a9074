"""A file that several entries of a replay list read, each keeping other values of one column (LSEG's legacy local
times of several venues, each venue's RICs in its own zone: replay_entries.once_each lets such entries through):
each entry is told which of the rows its keep leaves out it counts (keep_filter.SharedKeep), so that the run's
summary counts each row of the file once. Each entry counted the rows the others read as "left out by a filter".
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from connectors.file_plan import FilePlan
from connectors.keep_filter import SharedKeep, keep_values
from connectors.replay_entries import apart_column


def shared_keeps(plans: list[Any]) -> list[Any]:
    """``plans`` with each entry of a file so read told the rows it counts (the module doc); others as they are."""
    by_file: dict[Path, list[int]] = {}
    for i, plan in enumerate(plans):
        if isinstance(plan, FilePlan) and plan.columns.keep and plan.book is None:
            by_file.setdefault(plan.path.resolve(), []).append(i)
    shared = list(plans)
    for indices in (indices for indices in by_file.values() if len(indices) > 1):
        keeps = [plans[i].columns.keep for i in indices]
        if (column := apart_column(keeps)) is None:
            continue
        values = [keep_values(keep[column]) for keep in keeps]
        for n, i in enumerate(indices):
            shared[i] = replace(plans[i], shared_keep=SharedKeep(list(keeps[n]).index(column), values[n],
                                                                 (*values[:n], *values[n + 1:]), first=n == 0))
    return shared
