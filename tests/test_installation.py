"""flashtick installed as a wheel, not run from its checkout: the built-in model inside site-packages is never
rewritten by the developer tools."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.service.installation import OUR_PACKAGES, builtin_write_refusal, is_source_checkout

ROOT = Path(__file__).resolve().parents[1]


def installed_copy(tmp_path: Path) -> Path:
    """Our four packages laid out as pip installs the wheel: side by side in a site-packages folder."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    for package in OUR_PACKAGES:
        shutil.copytree(ROOT / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    return site


def run_python(args: list[str], cwd: Path, pythonpath: list[Path]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("args", [["--calibrate-only"], ["--steps", "1"]], ids=["calibrate-only", "train"])
def test_the_training_module_refuses_to_rewrite_an_installed_builtin_model(tmp_path, args) -> None:
    site = installed_copy(tmp_path)
    builtin = site / "engine" / "models" / "builtin"
    before = digests(builtin)
    result = run_python(["-m", "engine.service.train", *args], cwd=tmp_path, pythonpath=[site])
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert f"--out {builtin} is the built-in model of the installed package (not a source checkout)" in last
    assert "--model DIR" in last
    assert ("cp -r" in last) == (args == ["--calibrate-only"])  # calibrating needs the weights in DIR first
    assert digests(builtin) == before


def test_flashtick_train_refuses_an_installed_builtin_model_as_out_even_with_overwrite(tmp_path) -> None:
    site = installed_copy(tmp_path)
    builtin = site / "engine" / "models" / "builtin"
    before = digests(builtin)
    result = run_python(["-m", "engine.service.cli", "train", "ticks.csv", "--out", str(builtin), "--overwrite"],
                        cwd=tmp_path, pythonpath=[site])
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.startswith(f"flashtick train: error: --out {builtin} is the built-in model of the installed "
                                    f"package"), result.stderr[-2000:]
    assert digests(builtin) == before


def test_only_a_git_work_tree_outside_site_packages_is_a_source_checkout(tmp_path) -> None:
    checkout = tmp_path / "checkout"
    builtin = checkout / "engine" / "models" / "builtin"
    builtin.mkdir(parents=True)
    assert not is_source_checkout(builtin)
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    assert is_source_checkout(builtin)
    assert builtin_write_refusal(builtin, builtin) is None
    venv_in_checkout = checkout / ".venv" / "lib" / "python3.11" / "site-packages" / "engine" / "models" / "builtin"
    venv_in_checkout.mkdir(parents=True)  # a project's own venv inside its git tree is still an install
    assert not is_source_checkout(venv_in_checkout)
    assert builtin_write_refusal(venv_in_checkout, venv_in_checkout) is not None
    assert builtin_write_refusal(tmp_path / "mine", venv_in_checkout) is None  # any other --out is the user's
