"""Whether a module of the user's stands in for one of the engine's packages: the engine's packages have common
names (`engine`, `connectors`, `queries`), and a notebook's folder comes first on sys.path, so a `queries.py` kept
beside a notebook was imported in place of flashtick's `queries` and failed deep inside (review354 #4:
`No module named 'queries.limits'; 'queries' is not a package`). Said up front instead, naming the file.

Standard library only: it runs before any engine module is imported, which is what it guards.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

# pyproject.toml's, beside flashtick/ (engine/service/installation.py's OUR_PACKAGES, not imported: it is in one)
ENGINE_PACKAGES = ("engine", "connectors", "queries", "flashtick_kernels")
HOME = Path(__file__).resolve().parents[1]  # the folder that holds flashtick/ and them


def where_imported(package: str) -> list[Path]:
    """Where Python takes ``package`` from: the imported module's, else the one an import would find (found, not
    run); [] when it is nowhere (the import then fails on its own, saying so)."""
    module = sys.modules.get(package)
    if module is not None:
        places = list(getattr(module, "__path__", None) or []) or [getattr(module, "__file__", None)]
    else:
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            return []
        if spec is None:
            return []
        places = list(spec.submodule_search_locations or []) or [spec.origin]
    return [Path(place).resolve() for place in places if isinstance(place, str)]


def shadowed() -> list[str]:
    """Each engine package that Python takes from somewhere other than beside flashtick/, said with that place."""
    said = []
    for package in ENGINE_PACKAGES:
        places = where_imported(package)
        if places and HOME / package not in places:
            said.append(f"{places[0]} stands in for flashtick's package {package!r} ({HOME / package})")
    return said


def refuse_shadowed() -> None:
    """ImportError naming the user's module that stands in for an engine package, before flashtick imports it."""
    said = shadowed()
    if said:
        raise ImportError(f"flashtick: {'; '.join(said)}: Python imports it first (the script's or notebook's folder "
                          f"comes first on sys.path, and a module already imported stays), and flashtick's own modules "
                          f"would import it in place of theirs. Rename that file or folder (or start from another "
                          f"folder, in a fresh kernel if it was imported already)")
