"""Triton kernels checked on CPU under ``TRITON_INTERPRET=1``, in one worker subprocess per test file.

TRITON_INTERPRET=1 must be set before triton is imported: jit() picks "interpret" when a function is
decorated, triton's own tl.max/tl.sum included, so the variable cannot be switched on in-process once
anything imported triton, and setting it in the test process would leak into every later test module (and
turn the GPU tier into interpreter runs). So a test file names its checks in a dict, runs itself as a
script through `run_worker` (a module-scoped fixture), and reports each check as its own pytest test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import pytest

_RESULT_TAG = "INTERPRETED-RESULTS "
ROOT = Path(__file__).resolve().parent.parent


def run_worker(test_file: str) -> dict[str, str]:
    """Run `test_file` as the interpreter worker; each check's "ok" or its failure's traceback."""
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, test_file], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    tagged = [line for line in proc.stdout.splitlines() if line.startswith(_RESULT_TAG)]
    if proc.returncode != 0 or not tagged:
        pytest.fail(f"interpreter worker failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}", pytrace=False)
    return json.loads(tagged[-1][len(_RESULT_TAG):])


def worker_main(checks: dict[str, Callable[[], None]]) -> None:
    """The worker side (a test file's ``__main__``): run every check, print the results for `run_worker`."""
    assert os.environ.get("TRITON_INTERPRET") == "1"
    results = {}
    for name, check in checks.items():
        try:
            check()
            results[name] = "ok"
        except (Exception, pytest.fail.Exception):
            results[name] = traceback.format_exc()
    print(_RESULT_TAG + json.dumps(results))


def interpreted_tests(test_file: str, checks: dict[str, Callable[[], None]], have_triton: bool):
    """The module fixture that runs the worker once, and the test reporting each check: bind both in the test
    module (``interpreted, test_x_interpreted = interpreted_tests(__file__, CHECKS, HAVE_TRITON)``)."""

    @pytest.fixture(scope="module")
    def interpreted() -> dict[str, str]:
        if not have_triton:
            pytest.skip("triton is not importable on this platform")
        return run_worker(test_file)

    # one worker process takes all of a file's checks under `pytest -n` (`--dist loadgroup`), so its module
    # fixture starts the interpreter worker once, not once per test process
    @pytest.mark.xdist_group(Path(test_file).stem)
    @pytest.mark.parametrize("check", list(checks))
    def test_interpreted(interpreted: dict[str, str], check: str) -> None:
        if interpreted[check] != "ok":
            pytest.fail(interpreted[check], pytrace=False)

    return interpreted, test_interpreted
