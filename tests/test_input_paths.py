"""Folders and patterns given as replay inputs (connectors/input_paths.py): a pattern that matches nothing is
named as a shell takes it back (review344 #3), as every other path in an error is (engine/path_words.py)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from connectors.input_paths import expanded


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
