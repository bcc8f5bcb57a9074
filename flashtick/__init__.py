"""flashtick's public Python API: `import flashtick`, then `flashtick.run_backtest(...)`, `flashtick.ControlClient`.

The engine's own packages (`engine`, `connectors`, `queries`, `flashtick_kernels`) keep their names (the design
card's folders); this package is the one name a user's code imports, re-exporting the entry points of
docs/python-clients.md and docs/replay.md. Importing it imports none of them: each name is looked up on first use
(PEP 562), so `import flashtick` and the clients start in a fraction of a second, without torch, polars or the
engine; torch comes in with the first backtest (`run_backtest`, and the exceptions defined beside it).

A module of the user's named like one of the engine's packages (a notebook's `queries.py` beside it: the notebook's
folder comes first on sys.path) would be imported in its place and fail deep inside; flashtick checks that first
and says which file stands in the way (flashtick/_shadowed.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from flashtick._shadowed import refuse_shadowed

# public name -> the module that defines it (imported when the name is first used)
_WHERE = {
    # backtests from Python (docs/replay.md, "From Python")
    "run_backtest": "engine.service.backtest",
    "BacktestReport": "engine.service.backtest_report",
    "QueryScore": "engine.service.backtest_scores",
    "BacktestInterrupted": "engine.service.backtest_loop",
    "AlreadyComplete": "engine.service.finished_backtest",
    "FilesHoldNoTicks": "engine.service.backtest",
    "TimeRange": "connectors.time_range",
    "TestStart": "engine.service.test_start",
    # configuration
    "ServiceConfig": "engine.service.config",
    "ConfigError": "engine.service.config_error",
    "QuerySpecError": "queries.spec_errors",
    # files and sources (docs/replay.md)
    "FileReplay": "connectors.replay",
    "NamedFrame": "connectors.frame_files",
    "ColumnMap": "connectors.column_map",
    "replay_ticks": "connectors.replay",
    "Source": "connectors.source",
    "SyntheticSource": "connectors.source",
    "SyntheticConfig": "connectors.synthetic",
    # feeding a running service (docs/python-clients.md)
    "FeedClient": "connectors.feed",
    "FeedTimeout": "connectors.feed",
    "EngineLost": "connectors.feed",
    "run_feed": "connectors.feed_pump",
    "ControlFeedResume": "engine.service.feed_resume",
    "Tick": "connectors.ticks",
    "trade": "connectors.ticks",
    "quote": "connectors.ticks",
    "InvalidTick": "connectors.ticks",
    # answers and control
    "AnswerSubscriber": "engine.service.client",
    "GaplessSubscriber": "engine.service.client",
    "ControlClient": "engine.service.client",
    "ControlError": "engine.service.client",
    "ControlTimeout": "engine.service.client",
    "ControlBusy": "engine.service.client",
    "ControlUnreachable": "engine.service.client",
    "ControlDropped": "engine.service.client",
    "read_public_key": "engine.service.auth",
    "read_keypair": "engine.service.auth",
}

# spelt out (not `[*_WHERE]`) so that linters and editors read it; tests/test_flashtick_package.py checks the two agree
__all__ = ["__version__",
           "run_backtest", "BacktestReport", "QueryScore", "BacktestInterrupted", "AlreadyComplete", "FilesHoldNoTicks",
           "TimeRange", "TestStart",
           "ServiceConfig", "ConfigError", "QuerySpecError",
           "FileReplay", "NamedFrame", "ColumnMap", "replay_ticks", "Source", "SyntheticSource", "SyntheticConfig",
           "FeedClient", "FeedTimeout", "EngineLost", "run_feed", "ControlFeedResume", "Tick", "trade", "quote",
           "InvalidTick",
           "AnswerSubscriber", "GaplessSubscriber", "ControlClient", "ControlError", "ControlTimeout", "ControlBusy",
           "ControlUnreachable", "ControlDropped", "read_public_key", "read_keypair"]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use and kept here (PEP 562)."""
    if name == "__version__":
        value: Any = _version()
    elif name in _WHERE:
        refuse_shadowed()
        value = getattr(importlib.import_module(_WHERE[name]), name)
    else:
        raise AttributeError(f"module 'flashtick' has no attribute {name!r}")
    globals()[name] = value  # the next look-up is a plain attribute's
    return value


def __dir__() -> list[str]:
    return sorted(__all__)  # what tab completion offers: the public names, not this module's helpers


def _version() -> str:
    """The installed distribution's version (pyproject.toml's in a source checkout, as `flashtick --version` and
    the `health` op say it)."""
    refuse_shadowed()
    from engine.service.release import package_version

    return package_version()


if TYPE_CHECKING:  # what type checkers and editors see (these imports never run)
    from connectors.column_map import ColumnMap
    from connectors.feed import EngineLost, FeedClient, FeedTimeout
    from connectors.feed_pump import run_feed
    from connectors.frame_files import NamedFrame
    from connectors.replay import FileReplay, replay_ticks
    from connectors.source import Source, SyntheticSource
    from connectors.synthetic import SyntheticConfig
    from connectors.ticks import InvalidTick, Tick, quote, trade
    from connectors.time_range import TimeRange
    from engine.service.auth import read_keypair, read_public_key
    from engine.service.backtest import FilesHoldNoTicks, run_backtest
    from engine.service.backtest_loop import BacktestInterrupted
    from engine.service.backtest_report import BacktestReport
    from engine.service.backtest_scores import QueryScore
    from engine.service.client import (AnswerSubscriber, ControlBusy, ControlClient, ControlDropped, ControlError,
                                       ControlTimeout, ControlUnreachable, GaplessSubscriber)
    from engine.service.config import ServiceConfig
    from engine.service.config_error import ConfigError
    from engine.service.feed_resume import ControlFeedResume
    from engine.service.finished_backtest import AlreadyComplete
    from engine.service.test_start import TestStart
    from queries.spec_errors import QuerySpecError

    __version__: str
