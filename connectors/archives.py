"""Tick files that come zipped: a `.zip` of tick files (Binance's public data, a file a day; OKX's history;
many vendors' downloads) is unpacked into a private temporary folder and read like those files, given in
the archive's order.

Each unpacked copy keeps its member's own name under a folder named as the archive's folder, so a symbol in
either name still names the stream (connectors/layout.py `symbol_in_name`). The archive, not the copy, is
what a replay's fingerprint, a backtest's run key and rejected rows' locations name.
"""

from __future__ import annotations

import shutil
import tempfile
import zipfile
from pathlib import Path

ZIP_SUFFIX = ".zip"


def is_zip(path: Path) -> bool:
    return path.name.lower().endswith(ZIP_SUFFIX)


def tick_members(archive: zipfile.ZipFile) -> list[zipfile.ZipInfo]:
    """The files of an archive, less folders and the metadata some archivers add (`__MACOSX/`, `._*`)."""
    return [m for m in archive.infolist() if not m.is_dir() and not m.filename.startswith("__MACOSX/")
            and not Path(m.filename).name.startswith("._")]


class Unpacked:
    """One archive's files, unpacked; ``paths`` are readable until ``close`` (or garbage collection)."""

    def __init__(self, archive_path: Path) -> None:
        self.archive = archive_path
        self._dir: str | None = None
        try:
            archive = zipfile.ZipFile(archive_path)
        except zipfile.BadZipFile as e:
            raise ValueError(f"{archive_path}: not a readable zip archive ({e})") from None
        with archive:
            members = tick_members(archive)
            if not members:
                raise ValueError(f"{archive_path}: the zip archive holds no files")
            names = [Path(m.filename).name for m in members]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise ValueError(f"{archive_path}: the zip archive holds {twice[0]!r} in more than one folder; "
                                 f"unpack it and give the files")
            self._dir = tempfile.mkdtemp(prefix="flashtick-unzip-")
            folder = Path(self._dir) / (archive_path.resolve().parent.name or "archive")
            folder.mkdir()
            self.paths: list[Path] = []
            for member, name in zip(members, names):
                self.paths.append(folder / name)
                with archive.open(member) as src, open(self.paths[-1], "wb") as dst:
                    shutil.copyfileobj(src, dst, 1 << 20)
        self.members = [m.filename for m in members]

    def note(self, index: int) -> str:
        """What the replay says about the archive's ``index``-th file."""
        which = "its one file" if len(self.members) == 1 else f"file {index + 1} of {len(self.members)}"
        return f"{self.archive.name}: read {self.members[index]}, {which}"

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __del__(self) -> None:
        self.close()
