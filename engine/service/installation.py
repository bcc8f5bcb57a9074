"""What the way flashtick is installed allows: writing into the package's own built-in model folder (a source
checkout only)."""

from __future__ import annotations

from pathlib import Path

# the wheel's top-level packages (pyproject.toml); their names are fixed by the design card's folder layout
OUR_PACKAGES = ("engine", "connectors", "queries", "flashtick_kernels")


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
