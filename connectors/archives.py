"""Tick files that come zipped: a `.zip` holding one tick file (Binance's public data, OKX's history, many
vendors' downloads) is unpacked into a private temporary folder and read like that file.

The unpacked copy keeps the member's own name under a folder named as the archive's folder, so a symbol in
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
    """One archive's single file, unpacked; ``path`` is readable until ``close`` (or garbage collection)."""

    def __init__(self, archive_path: Path) -> None:
        self.archive = archive_path
        self._dir: str | None = None
        try:
            archive = zipfile.ZipFile(archive_path)
        except zipfile.BadZipFile as e:
            raise ValueError(f"{archive_path}: not a readable zip archive ({e})") from None
        with archive:
            members = tick_members(archive)
            if len(members) != 1:
                listed = ", ".join(m.filename for m in members[:5]) + (" ..." if len(members) > 5 else "")
                raise ValueError(f"{archive_path}: a zip archive is read when it holds one tick file; it holds "
                                 f"{len(members)}{': ' + listed if members else ''} (unpack it and give the files)")
            member = members[0]
            self._dir = tempfile.mkdtemp(prefix="flashtick-unzip-")
            folder = Path(self._dir) / (archive_path.resolve().parent.name or "archive")
            folder.mkdir()
            self.path = folder / Path(member.filename).name
            with archive.open(member) as src, open(self.path, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        self.note = f"{archive_path.name}: read its one file, {member.filename}"

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __del__(self) -> None:
        self.close()
