"""docs/architecture.md's "Where each concept lives" names every module of the package, and only files that exist.

The README sends a newcomer to that table to find where a concept lives, so a module it leaves out is one they
cannot find (47 were missing once: `flashtick train` and `evaluate` among them). A row's file cell holds
backticked paths; a bare name (`cmd_feed.py`) sits in the folder of the last path before it in the same cell, and
a folder (`engine/models/builtin/`) covers what is under it. A package's `__init__.py` counts as a module only when
it defines a function or class (the kernels' backend choice does; a package marker or a list of exports does not).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGES = ("engine", "flashtick_kernels", "queries", "connectors", "flashtick")
TABLE_HEADING = "## Where each concept lives"


def table_rows(text: str) -> list[tuple[int, str]]:
    """(line number, file cell) of every row of the table under TABLE_HEADING."""
    start = text.index(TABLE_HEADING)
    first_line = text[:start].count("\n") + 1
    rows = []
    for number, line in enumerate(text[start:].splitlines(), start=first_line):
        if line.startswith("## ") and number > first_line:
            break
        if line.startswith("|") and not re.match(r"^\|\s*-", line) and not line.startswith("| concept |"):
            rows.append((number, line.strip().strip("|").rsplit("|", 1)[-1].strip()))
    return rows


def named_paths(text: str) -> list[tuple[int, str]]:
    """(line number, path relative to the repository) of every file or folder the table's file cells name."""
    named = []
    for number, cell in table_rows(text):
        folder = None
        for token in re.findall(r"`([^`]+)`", cell):
            if "/" in token:
                folder = token.rstrip("/") if token.endswith("/") else token.rsplit("/", 1)[0]
                named.append((number, token))
            else:
                assert folder is not None, f"architecture.md:{number}: {token!r} has no folder before it in its cell"
                named.append((number, f"{folder}/{token}"))
    return named


def is_module(path: Path) -> bool:
    if path.name != "__init__.py":
        return True
    tree = ast.parse(path.read_text())
    return any(isinstance(node, (ast.FunctionDef, ast.ClassDef)) for node in tree.body)


def package_modules() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "__pycache__" not in path.parts and is_module(path):
                found.append(path.relative_to(ROOT).as_posix())
    return found


def unlisted(modules: list[str], named: list[str]) -> list[str]:
    folders = [n for n in named if n.endswith("/")]
    return [m for m in modules if m not in named and not any(m.startswith(f) for f in folders)]


def test_the_table_names_every_module_of_the_package() -> None:
    named = [path for _, path in named_paths(ARCHITECTURE.read_text())]
    missing = unlisted(package_modules(), named)
    assert not missing, ("docs/architecture.md's table of where each concept lives names no row for "
                         f"{', '.join(missing)}: add a row saying what concept each holds")


def test_every_file_the_table_names_exists() -> None:
    stale = [f"architecture.md:{number}: {path}" for number, path in named_paths(ARCHITECTURE.read_text())
             if not (ROOT / path).exists()]
    assert not stale, f"the table names files that do not exist: {stale}"


def test_the_check_reads_bare_names_in_their_cells_folder_and_catches_a_missing_module() -> None:
    text = (f"{TABLE_HEADING}\n\n| concept | file |\n|---|---|\n| a | `engine/service/a.py`, `b.py` |\n"
            "| c | `engine/models/builtin/` |\n\n## Next\n| d | `connectors/d.py` |\n")
    named = [path for _, path in named_paths(text)]
    assert named == ["engine/service/a.py", "engine/service/b.py", "engine/models/builtin/"]
    modules = ["engine/service/a.py", "engine/service/b.py", "engine/models/builtin/x.py", "connectors/d.py"]
    assert unlisted(modules, named) == ["connectors/d.py"]  # a row past the table's end names nothing
