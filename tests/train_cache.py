"""The tiny checkpoint that several training tests start from (`train` of tests/test_train_folders.py on its two days
of AAA's trades), trained once per test process (one per pytest-xdist worker) for each set of options and copied
into each test's --out: the tests that then write into --out (an overwrite, a failed run that must leave it as it
was) each get a checkpoint of their own, without paying a training each for the same bytes.

What a copy differs in from a checkpoint trained in the test's own folder: the paths its evaluation.json and
TRAINING.md record are those of the days written here, not the test's (the same ticks, byte for byte)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.test_train_folders import train, write_days

_TRAINED: dict[tuple[str, ...], tuple[Path, int, str, str]] = {}


def trained_copy(tmp_path_factory: pytest.TempPathFactory, out: Path, *options: str) -> tuple[int, str, str]:
    """``train(write_days(...), out, *options)`` as (exit status, stdout, stderr): the checkpoint trained once in
    this process with ``options``, copied to ``out`` (which must not exist yet)."""
    if options not in _TRAINED:
        root = tmp_path_factory.mktemp("trained_once")
        files = [str(f) for f in write_days(root / "days")]
        _TRAINED[options] = (root / "model", *train(files, root / "model", *options))
    model, rc, said, err = _TRAINED[options]
    if rc == 0:
        shutil.copytree(model, out)
    return rc, said, err
