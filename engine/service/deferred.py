"""A command's function (its run, its usage check) named by the parser without importing it: `Deferred("cmd_queries",
"cmd_list")` imports engine/service/cmd_queries.py when `flashtick list` runs, so that building the parser imports
no command's module, and a client command (`ask`, `list`, `health`) imports its own module alone (cli_parser.py
builds only the parser of the command given)."""

from __future__ import annotations

import importlib
from typing import Any


class Deferred:
    """``name`` of engine/service/``module``.py, imported at its first call and called with what it is given."""

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = f"engine.service.{module}", name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(self.module), self.name)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Deferred({self.module}.{self.name})"
