"""What the way flashtick is installed allows: writing into the package's own built-in model folder (the
developers' training tool, in a source checkout only; `flashtick train` never), and the diagnosis of another
distribution that provides one of our top-level packages.

Standard library only: the clash diagnosis runs after an import failed, when our own modules may not import.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

# the wheel's top-level packages (pyproject.toml); their names are fixed by the design card's folder layout
OUR_PACKAGES = ("engine", "connectors", "queries", "flashtick_kernels", "flashtick")  # flashtick: the public API
OUR_DISTRIBUTION = "flashtick"
# where this installation keeps them: engine/service/installation.py -> the folder holding engine/
PACKAGES_HOME = Path(__file__).resolve().parents[2]


def is_source_checkout(folder: Path) -> bool:
    """Whether ``folder`` is part of a source checkout (inside a git work tree, not installed under a
    site-packages folder): only there are the package's own files the developer's to rewrite."""
    resolved = folder.resolve()
    if {"site-packages", "dist-packages"} & set(resolved.parts):
        return False
    return any((parent / ".git").exists() for parent in (resolved, *resolved.parents))


def builtin_write_refusal(out: Path, builtin: Path, calibrate_only: bool = False) -> str | None:
    """Why a command must not write its checkpoint into ``out``, or None. Rewriting the built-in model of an
    installed package changes every later serve and backtest in that environment and leaves pip's record of the
    install wrong, so that is done only in a source checkout; elsewhere the user writes a copy and serves it."""
    if out.resolve() != builtin.resolve() or is_source_checkout(builtin):
        return None
    if calibrate_only:
        how = (f"copy it to a new folder first (cp -r {builtin} DIR), give --out DIR, then use that copy with "
               f"--model DIR (serve, backtest, evaluate)")
    else:
        how = "give --out DIR (a new directory), then use it with --model DIR (serve, backtest, evaluate)"
    return (f"--out {out} is the built-in model of the installed package (not a source checkout): rewriting it "
            f"would change every later serve and backtest in this environment; {how}")


def user_train_refusal(out: Path, builtin: Path) -> str | None:
    """Why `flashtick train` must not write its checkpoint into ``out``, or None. The user command never rewrites
    the built-in model, not even in a source checkout: the default of every serve, backtest and evaluate would
    change under the user; `python -m engine.service.train_builtin` (rebuilding it from its recipe) is the one tool that
    does. Resolved paths, so a symlink to the folder or a path through `..` counts as the folder."""
    if out.resolve() != builtin.resolve():
        return None
    return (f"--out {out} is the built-in model's folder, which flashtick train never rewrites (not even with "
            f"--overwrite): give another --out (a new directory), then use it with --model DIR (serve, backtest, "
            f"evaluate)")


def clash_diagnosis() -> str | None:
    """One line naming the other distributions that provide (or, earlier on sys.path, shadow) one of our top-level
    packages, and the fix; None when there is none. Reads every installed distribution's metadata (most of a
    second in a large environment): call it after an import failed, never on the normal start."""
    providers = importlib.metadata.packages_distributions()
    clashes: list[str] = []
    for package in OUR_PACKAGES:
        others = sorted({d for d in providers.get(package, []) if d.lower() != OUR_DISTRIBUTION})
        if others:
            clashes.append(f"'{package}' is also installed by {', '.join(_with_version(d) for d in others)}")
            continue
        found = _found_at(package)
        if found is not None and found != PACKAGES_HOME / package:
            clashes.append(f"'{package}' is imported from {found}, not flashtick's {PACKAGES_HOME / package}")
    if not clashes:
        return None
    names = sorted({d for p in OUR_PACKAGES for d in providers.get(p, []) if d.lower() != OUR_DISTRIBUTION})
    uninstall = (f"or pip uninstall {' '.join(names)} and then pip install --force-reinstall flashtick (the "
                 f"uninstall removes the files the two share)" if names else "or remove or rename that folder")
    return (f"flashtick: {'; '.join(clashes)} (another project under the same top-level name, whose files stand "
            f"in for flashtick's): install flashtick into a virtualenv of its own (python -m venv), {uninstall}")


def _with_version(distribution: str) -> str:
    try:
        return f"{distribution} {importlib.metadata.version(distribution)}"
    except importlib.metadata.PackageNotFoundError:
        return distribution


def _found_at(package: str) -> Path | None:
    """The folder Python imports ``package`` from (without running it), or None."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):  # a half-imported package in sys.modules without a spec
        return None
    if spec is None or not spec.submodule_search_locations:
        return None if spec is None or spec.origin is None else Path(spec.origin).resolve()
    return Path(list(spec.submodule_search_locations)[0]).resolve()
