"""Which flashtick release this is: its version and, run from a git checkout, the commit, so that a data directory,
a backtest's checkpoint, `--version` and `health` say which release wrote or serves them (review321 #5: three
releases all said 0.1.0, and an upgrade could not tell whose files it opened).

The version is pyproject.toml's when running from a source checkout (an editable install's metadata keeps the
version it was installed at, which a `git pull` does not move), else the installed distribution's. The commit is
read from the checkout's .git files (no `git` process: a start pays nothing for it); an installed wheel has none.
Standard library only, as installation.py: `--version` must work when our other modules do not import.
"""

from __future__ import annotations

import functools
import importlib.metadata
import tomllib
from pathlib import Path
from typing import Any, NamedTuple

from engine.service.installation import OUR_DISTRIBUTION, PACKAGES_HOME

# what a record written before releases were recorded (every 0.1.0 build) is said to be written by
BEFORE_RECORDS = "a flashtick before 0.2.0 (releases before it recorded none)"


class Release(NamedTuple):
    """``version``: the package version (pyproject.toml); ``commit``: the checkout's full commit id, or None."""
    version: str
    commit: str | None

    def __str__(self) -> str:
        """`0.2.0 (git 6d353ba1)`, or `0.2.0` for an installed wheel."""
        return self.version + (f" (git {self.commit[:8]})" if self.commit else "")

    def record(self) -> dict[str, Any]:
        """As a data directory's and a checkpoint's JSON hold it."""
        return {"version": self.version, "commit": self.commit}


@functools.cache
def this_release() -> Release:
    """The running flashtick's release (read once per process)."""
    return Release(_checkout_version() or _installed_version(), _checkout_commit(PACKAGES_HOME))


def recorded_release(record: Any) -> str:
    """How a refusal or a note names the release a record says wrote it: `0.2.0 (git 6d353ba1)`, or, for a record
    with none (or a damaged one), BEFORE_RECORDS."""
    if not isinstance(record, dict) or not isinstance(record.get("version"), str):
        return BEFORE_RECORDS
    commit = record.get("commit")
    return str(Release(record["version"], commit if isinstance(commit, str) else None))


def same_release(record: Any) -> bool:
    """Whether ``record`` (a Release.record() read back) is this very release: the same version and commit (a
    checkout with other commits computes with other code, whatever its version says)."""
    return isinstance(record, dict) and record == this_release().record()


def package_version() -> str:
    """flashtick's own version (pyproject.toml's in a checkout, else the installed one's; "unknown" for a source
    tree without pyproject.toml that was never installed): `health`'s `version`."""
    return this_release().version


def release_fields() -> dict[str, Any]:
    """`health`'s `version` (str) and `commit` (str, the checkout's full commit id; null for an installed wheel)."""
    release = this_release()
    return {"version": release.version, "commit": release.commit}


def version_line() -> str:
    """`flashtick --version`'s line: flashtick's release, then torch's and Python's versions, what a bug report needs
    (torch's read from its metadata, not imported: a second and more on a busy machine)."""
    import platform

    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = "not installed"
    release = this_release()
    commit = f"git {release.commit[:8]}, " if release.commit else ""
    return f"flashtick {release.version} ({commit}torch {torch}, Python {platform.python_version()})"


def _installed_version() -> str:
    try:
        return importlib.metadata.version(OUR_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _checkout_version() -> str | None:
    """pyproject.toml's version beside our packages, when that file is flashtick's (a source checkout)."""
    try:
        project = tomllib.loads((PACKAGES_HOME / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, ValueError):
        return None
    if project.get("name") != OUR_DISTRIBUTION or not isinstance(project.get("version"), str):
        return None
    return project["version"]


def _checkout_commit(home: Path) -> str | None:
    """The commit HEAD names in the git checkout at ``home`` (its .git a folder, or a worktree's file pointing to
    one), read from the files git keeps (a loose ref, else packed-refs); None when there is none or it is unreadable."""
    try:
        git = home / ".git"
        if git.is_file():  # a worktree or submodule: "gitdir: PATH"
            git = (home / git.read_text(encoding="utf-8").split(":", 1)[1].strip()).resolve()
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if not head.startswith("ref:"):
            return head if _is_commit(head) else None  # a detached HEAD holds the id itself
        ref = head.split(":", 1)[1].strip()
        common = git / "commondir"  # (a worktree keeps its branches in the main repository's folder)
        roots = [git] + ([(git / common.read_text(encoding="utf-8").strip()).resolve()] if common.is_file() else [])
        for root in roots:
            if (root / ref).is_file():
                commit = (root / ref).read_text(encoding="utf-8").strip()
                return commit if _is_commit(commit) else None
            if (root / "packed-refs").is_file():
                for line in (root / "packed-refs").read_text(encoding="utf-8").splitlines():
                    commit, _, name = line.partition(" ")
                    if name == ref and _is_commit(commit):
                        return commit
    except (OSError, IndexError, UnicodeDecodeError):
        return None
    return None


def _is_commit(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)
