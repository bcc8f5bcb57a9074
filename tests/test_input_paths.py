"""Folders and patterns given as replay inputs (connectors/input_paths.py): a pattern that matches nothing is
named as a shell takes it back (review344 #3), as every other path in an error is (engine/path_words.py)."""

from __future__ import annotations

import os
import shlex
import zipfile
from pathlib import Path

import pytest

from conftest import drain
from connectors.input_paths import expanded
from connectors.replay import FileReplay


def test_a_pattern_that_matches_nothing_is_named_shell_quoted(tmp_path: Path) -> None:
    folder = tmp_path / "Börse Frankfurt"
    folder.mkdir()
    (folder / "dax.csv").write_text("ts,price,size\n1,2.0,3\n")
    pattern = folder / "*.parquet"
    with pytest.raises(FileNotFoundError) as refused:
        expanded([pattern])
    message = str(refused.value)
    assert message.startswith(f"no file matches {shlex.quote(str(pattern))}: a pattern that names no file"), message
    named = message.removeprefix("no file matches ").split(": a pattern")[0]
    assert shlex.split(named) == [str(pattern)]  # pasted into a shell, it is one word, the pattern unexpanded


def test_a_relative_pattern_names_the_folder_it_was_looked_for_in_quoted_too(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    here = tmp_path / "run 1"
    here.mkdir()
    monkeypatch.chdir(here)
    with pytest.raises(FileNotFoundError, match=r"^no file matches '\*\.csv' \(in '.*/run 1'\): ") as refused:
        expanded([Path("*.csv")])
    assert os.path.basename(shlex.split(str(refused.value).split("(in ")[1].split(")")[0])[0]) == "run 1"


def test_a_databento_batch_job_reads_its_data_beside_the_files_every_job_ships(tmp_path: Path) -> None:
    """review390 #7: a Databento batch download, its data beside `metadata.json`, `symbology.json`, `condition.json`
    and `manifest.json`, given as its folder or its zip, was refused on `condition.json`'s columns with the advice
    to map them. Those four are skipped by name with one note; a lone `metadata.json` elsewhere is read as given."""
    job = tmp_path / "GLBX-20251114-ABCD"
    job.mkdir()
    (job / "glbx-mdp3-20251114.trades.csv").write_text(
        "ts_event,symbol,price,size\n1763130600000000000,ESZ5,5012.25,1\n1763130600100000000,ESZ5,5012.5,2\n")
    (job / "condition.json").write_text('[{"date": "2025-11-14", "condition": "available", '
                                        '"last_modified_date": "2025-11-15"}]\n')
    for name in ("metadata.json", "symbology.json", "manifest.json"):
        (job / name).write_text('{"version": 1}\n')
    with zipfile.ZipFile(tmp_path / "job.zip", "w") as archive:
        for file in job.iterdir():
            archive.write(file, file.name)
    said = ("skipped condition.json, manifest.json, metadata.json, symbology.json: a Databento batch job's files "
            "beside its data")
    for given in (job, tmp_path / "job.zip"):
        replay = FileReplay(given)
        assert [t.price for t in drain(replay)] == [5012.25, 5012.5], given
        assert any(said in note for note in replay.notes), replay.notes
    assert expanded([job]).items == [job / "glbx-mdp3-20251114.trades.csv"]
    (tmp_path / "lone").mkdir()
    (tmp_path / "lone" / "metadata.json").write_text("{}\n")
    (tmp_path / "lone" / "a.csv").write_text("ts,price,size\n1,2.0,3\n")
    assert len(expanded([tmp_path / "lone"]).items) == 2
