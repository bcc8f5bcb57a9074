"""A directory output written whole or not at all: `flashtick train` writes its checkpoint into a new directory
beside --out and renames it into place once every file is written. A run that failed part way (a disk that filled
after the weights) left --out holding model.safetensors, config.json, codec.json and calibration.json without
evaluation.json or the model card, which `serve --model` and `evaluate` then loaded as a checkpoint; with
--overwrite, new weights beside the last run's other files.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

STAGING_SUFFIX = ".partial"  # `.OUT.XXXXXXXX.partial` beside OUT while a run writes it
REPLACED_SUFFIX = ".replaced"  # `.OUT.XXXXXXXX.replaced`: OUT's old directory between the swap and its removal
# `OUT.previous-XXXXXXXX`: such an old directory a later run found with no whole output in OUT (a kill between the
# swap's renames), renamed out of the hidden names a run looks for, so that it is named once, not by every run
PREVIOUS_INFIX = ".previous-"


class NotWritten(RuntimeError):
    """A staged output failed part way: what failed, and that the output was left as it was."""


@contextmanager
def staged_directory(out: Path, carried: tuple[str, ...] = (), owned: Collection[str] = (), marker: str = "",
                     note: Callable[[str], None] = lambda _: None,
                     caution: Callable[[str], None] = lambda _: None) -> Iterator[Path]:
    """A new directory beside ``out`` (on its file system, so one rename puts it in place) to write into. When the
    body returns, it takes ``out``'s place: of what ``out`` held, the entries named in ``owned`` (the output's own
    files, a checkpoint's) go, and every other one (a user's notes, a backtests/ folder) is moved into the new
    directory; the files ``carried`` (--out's lock) are hard-linked into it first, so they are the same files across
    the swap (a lock held stays held). When the body raises, the directory is removed and ``out`` is left as it
    was; an Exception after something was written is raised as NotWritten saying so (nothing written yet: the
    error as it came). An entry that cannot be moved (a mount point) is left in the old directory, named through
    ``caution``, which is then not removed. The caller holds ``out``'s lock (no other run writes beside it):
    staging directories of ``out`` found beside it are a killed run's and are removed first (said through
    ``note``). An old directory left by a run killed mid-swap is removed too when ``out`` holds ``marker`` (the
    output's last file: the swap had put the whole new output in place), once what it held besides the ``owned``
    files is moved into ``out`` (the swap finished); else it may hold the only copy of what ``out`` held: renamed to
    `OUT.previous-XXXXXXXX` beside it and named once (``caution``)."""
    place = out.resolve()  # a symlinked --out: the directory it names is the one replaced, beside its own parent
    _clear_stale(out, place, set(owned), marker, note, caution)
    staging = Path(tempfile.mkdtemp(prefix=f".{place.name}.", suffix=STAGING_SUFFIX, dir=place.parent))
    try:
        staging.chmod(stat.S_IMODE(place.stat().st_mode))  # mkdtemp's 0700: the mode --out has (made or given)
        yield staging
        for name in carried:
            if (place / name).exists():
                os.link(place / name, staging / name)
        _swap_in(staging, place, set(owned), caution)
    except Exception as e:
        wrote = any(p.name not in carried for p in staging.iterdir()) if staging.is_dir() else False
        shutil.rmtree(staging, ignore_errors=True)
        if not wrote:
            raise
        raise NotWritten(f"{e}; --out {out} was left as it was: the unfinished output written beside it "
                         f"({staging.name}) was removed") from e
    except BaseException:  # a Ctrl-C: no partial output left either, and the interrupt goes on as it came
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap_in(staging: Path, place: Path, owned: set[str], caution: Callable[[str], None]) -> None:
    """``staging`` renamed to ``place``, whose old directory is moved aside first (a rename does not replace a
    directory that holds files), then what it held that is not ``owned`` is moved into the new one, then it is
    removed. Between the two renames ``place`` is absent for an instant: a run that made it then makes the second
    rename fail, and the old directory is put back. The user's entries move after the swap, not into ``staging``
    before it: a run killed before the swap leaves them in ``place`` (a staging directory holds the run's own files
    only, so a later run may remove it), one killed after it in the old directory (_clear_replaced's)."""
    aside = staging.with_name(staging.name.removesuffix(STAGING_SUFFIX) + REPLACED_SUFFIX)
    os.rename(place, aside)
    try:
        os.rename(staging, place)
    except OSError:
        os.rename(aside, place)
        raise
    _move_back(aside, place, owned, caution)


def _move_back(aside: Path, place: Path, owned: set[str], caution: Callable[[str], None]) -> list[str]:
    """What the old directory ``aside`` holds that is not ``owned`` (nor in ``place`` already) moved into ``place``,
    then ``aside`` removed; the names moved. An entry that cannot be moved is named (``caution``) and ``aside``
    kept."""
    left, moved = [], []
    for entry in sorted(aside.iterdir()):
        if entry.name in owned or os.path.lexists(place / entry.name):  # the old output's, or carried (the lock)
            continue
        try:
            os.rename(entry, place / entry.name)
            moved.append(entry.name)
        except OSError as e:  # a mount point, say: the checkpoint is in place, the entry stays where it is
            left.append(f"{entry.name} ({e.strerror or e})")
    if left:
        caution(f"kept {', '.join(left)} in {aside} (beside --out), which could not be moved back into {place}: "
                f"move it yourself")
    else:
        shutil.rmtree(aside, ignore_errors=True)
    return moved


def _clear_stale(out: Path, place: Path, owned: set[str], marker: str, note: Callable[[str], None],
                 caution: Callable[[str], None]) -> None:
    """The staging directories of ``place`` a killed run (kill -9, a crash, a power cut) left beside it removed, and
    the old directories such a run left mid-swap dealt with (_clear_replaced). Only mkdtemp's names for ``place``:
    `.OUT.x.XXXXXXXX.partial` is the run on --out `OUT.x`'s, not one of `OUT`'s."""
    suffixes = "|".join(map(re.escape, (STAGING_SUFFIX, REPLACED_SUFFIX)))
    own = re.compile(rf"\.{re.escape(place.name)}\.[a-z0-9_]{{8}}({suffixes})")  # mkdtemp: 8 of [a-z0-9_]
    for entry in sorted(place.parent.iterdir()):
        if not ((m := own.fullmatch(entry.name)) and entry.is_dir() and not entry.is_symlink()):
            continue
        if m.group(1) == STAGING_SUFFIX:  # only ever the run's own files (the user's move in after the swap)
            shutil.rmtree(entry, ignore_errors=True)
            if not entry.exists():
                note(f"removed {entry.name} beside --out {out}: the unfinished checkpoint of a train on it that was "
                     f"killed before it finished")
            else:  # a file in it this user may not remove: said, as the space it takes is theirs to get back
                caution(f"{entry} beside --out {out} is the unfinished checkpoint of a train on it that was killed; "
                        f"it could not be removed: remove it")
        else:
            _clear_replaced(entry, out, place, owned, marker, note, caution)


def _clear_replaced(aside: Path, out: Path, place: Path, owned: set[str], marker: str, note: Callable[[str], None],
                    caution: Callable[[str], None]) -> None:
    """An old directory a run killed mid-swap left: with the whole new output in ``place`` (its ``marker`` there),
    the swap finished (the entries not ``owned`` moved in, the rest removed); else renamed out of the names looked
    for, and named once. It was named by every later run, and never removed."""
    if marker and (place / marker).is_file():
        moved = _move_back(aside, place, owned, caution)
        if not aside.exists():
            kept = f"; moved into it what it held besides a checkpoint: {', '.join(moved)}" if moved else ""
            note(f"removed {aside.name} beside --out {out}: the checkpoint --out held before a train on it that was "
                 f"killed while replacing it, replaced by the whole checkpoint now there{kept}")
        return
    previous = place.with_name(place.name + PREVIOUS_INFIX + aside.name.removesuffix(REPLACED_SUFFIX)[-8:])
    try:
        if os.path.lexists(previous):  # (a rename would replace an empty folder of that name without a word)
            raise FileExistsError(previous)
        os.rename(aside, previous)
    except OSError:  # named where it is, then: by every run, as before
        previous = aside
    caution(f"{previous} is what --out {out} held before a train on it was killed while replacing it, which left "
            f"--out without it{'' if previous == aside else f' (renamed from {aside.name}, said this once)'}: move "
            f"back what you want of it, then remove it")
