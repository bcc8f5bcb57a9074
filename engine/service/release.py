"""Which flashtick release this is: its version and, run from a git checkout, the commit, so that a data directory,
a backtest's checkpoint, `--version` and `health` say which release wrote or serves them (review321 #5: three
releases all said 0.1.0, and an upgrade could not tell whose files it opened).

The version is pyproject.toml's when running from a source checkout (an editable install's metadata keeps the
version it was installed at, which a `git pull` does not move), else the installed distribution's. The commit is
read from the checkout's .git files; whether its tracked files are modified from it, from `git status --porcelain
--untracked-files=no` (one git process, once per process, only in a checkout); an installed wheel has neither.
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
    """``version``: the package version (pyproject.toml); ``commit``: the checkout's full commit id, or None;
    ``dirty``: whether the checkout's tracked files differ from that commit (as `git describe --dirty`), None where
    that is unknown (no checkout, no git): the same commit with an edited constant computes other answers
    (review349 #4)."""
    version: str
    commit: str | None
    dirty: bool | None = None

    def __str__(self) -> str:
        """`0.2.0 (git 6d353ba1)`, `0.2.0 (git 6d353ba1-dirty)` for a modified checkout, `0.2.0` for a wheel."""
        return self.version + (f" (git {self.short_commit})" if self.commit else "")

    @property
    def short_commit(self) -> str:
        """The commit's first 8 digits, `-dirty` after them for a modified checkout (as `git describe --dirty`)."""
        return (self.commit or "")[:8] + ("-dirty" if self.dirty else "")

    def record(self) -> dict[str, Any]:
        """As a data directory's and a checkpoint's JSON hold it (`dirty` only with a commit)."""
        return {"version": self.version, "commit": self.commit} | ({"dirty": self.dirty} if self.commit else {})


@functools.cache
def this_release() -> Release:
    """The running flashtick's release (read once per process)."""
    commit = _checkout_commit(PACKAGES_HOME)
    return Release(_checkout_version() or _installed_version(), commit,
                   _checkout_dirty(PACKAGES_HOME) if commit else None)


def recorded_release(record: Any) -> str:
    """How a refusal or a note names the release a record says wrote it: `0.2.0 (git 6d353ba1)`, or, for a record
    with none (or a damaged one), BEFORE_RECORDS."""
    if not isinstance(record, dict) or not isinstance(record.get("version"), str):
        return BEFORE_RECORDS
    commit, dirty = record.get("commit"), record.get("dirty")
    return str(Release(record["version"], commit if isinstance(commit, str) else None, dirty is True))


def same_release(record: Any) -> bool:
    """Whether ``record`` (a Release.record() read back) is this very release: the same version and commit (a
    checkout with other commits computes with other code, whatever its version says)."""
    return isinstance(record, dict) and record == this_release().record()


def package_version() -> str:
    """flashtick's own version (pyproject.toml's in a checkout, else the installed one's; "unknown" for a source
    tree without pyproject.toml that was never installed): `health`'s `version`."""
    return this_release().version


def release_fields() -> dict[str, Any]:
    """`health`'s `version` (str), `commit` (str, the checkout's full commit id; null for an installed wheel) and,
    with a commit, `dirty` (bool: the checkout's files differ from it)."""
    return this_release().record()


def version_line() -> str:
    """`flashtick --version`'s line: flashtick's release, then torch's and Python's versions, what a bug report needs
    (torch's read from its metadata, not imported: a second and more on a busy machine)."""
    import platform

    try:
        torch = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch = "not installed"
    release = this_release()
    commit = f"git {release.short_commit}, " if release.commit else ""
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


def _checkout_dirty(home: Path) -> bool | None:
    """Whether the checkout at ``home`` has uncommitted changes to tracked files, as `git describe --dirty` says
    (a file of the user's beside them, a config or answers.parquet the README's commands write, is no change of
    flashtick's: review442 #3); None where git cannot say (not installed, not a checkout it reads)."""
    import subprocess

    try:
        done = subprocess.run(["git", "-C", str(home), "status", "--porcelain", "--untracked-files=no"],
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bool(done.stdout.strip()) if done.returncode == 0 else None


def _is_commit(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)
