"""flashtick installed as a wheel, not run from its checkout: the built-in model inside site-packages is never
rewritten by the developer tools (nor, anywhere, by `flashtick train`), and another distribution that provides one
of our top-level package names (PyPI has `queries` and `connectors`) is named, with the fix, when our modules fail
to import."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from child_runs import ChildRuns
from engine.service.installation import OUR_PACKAGES, builtin_write_refusal, is_source_checkout
from forked_cli import cli_run

ROOT = Path(__file__).resolve().parents[1]
# the installed copy and its interpreter are built once, on one worker (`--dist loadgroup`)
pytestmark = pytest.mark.xdist_group("test_installation")


def installed_copy(tmp_path: Path) -> Path:
    """Our four packages laid out as pip installs the wheel: side by side in a site-packages folder."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    for package in OUR_PACKAGES:
        shutil.copytree(ROOT / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    return site


def run_python(args: list[str], cwd: Path, pythonpath: list[Path]) -> subprocess.CompletedProcess:
    # real processes (not tests/forked_cli.py's, nor the installed copy's shared interpreter: each shadows our
    # packages with its own folder): each imports our packages from where its PYTHONPATH says, which is what these
    # tests check
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, ChildRuns]:
    """One installed copy (site-packages) for the tests that only run commands from it and check that it is left
    as it was, and one interpreter whose PYTHONPATH is that copy alone, which runs them one after another: each run
    of a fresh interpreter paid Python's start and torch's import (~7 s of CPU on a loaded machine) only to be
    refused. What is checked is where our packages are imported from, the same in one interpreter as in four."""
    site = installed_copy(tmp_path_factory.mktemp("installed"))
    with ChildRuns([site]) as child:
        yield site, child


def run_installed(installed: tuple[Path, ChildRuns], module: str, args: list[str], cwd: Path
                  ) -> subprocess.CompletedProcess:
    """``python -m module args`` in ``cwd``, in the installed copy's interpreter: the module run afresh, as
    ``-m`` runs it (not yet imported: an earlier run may have imported it)."""
    code = (f"import runpy, sys\nsys.argv = [{module!r}, *{args!r}]\nsys.modules.pop({module!r}, None)\n"
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n")
    return installed[1].run(code, cwd)


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("args", [["--calibrate-only"], ["--steps", "1"]], ids=["calibrate-only", "train"])
def test_the_training_module_refuses_to_rewrite_an_installed_builtin_model(tmp_path, installed, args) -> None:
    site = installed[0]
    builtin = site / "engine" / "models" / "builtin"
    before = digests(builtin)
    result = run_installed(installed, "engine.service.train_builtin", args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert f"--out {builtin} is the built-in model of the installed package (not a source checkout)" in last
    assert "--model DIR" in last
    assert ("cp -r" in last) == (args == ["--calibrate-only"])  # calibrating needs the weights in DIR first
    assert digests(builtin) == before


def test_flashtick_train_refuses_an_installed_builtin_model_as_out_even_with_overwrite(tmp_path, installed) -> None:
    site = installed[0]
    builtin = site / "engine" / "models" / "builtin"
    before = digests(builtin)
    result = run_installed(installed, "engine.service.cli", ["train", "ticks.csv", "--out", str(builtin),
                                                             "--overwrite"], cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.startswith(f"flashtick train: error: --out {builtin} is the built-in model's folder, which "
                                    f"flashtick train never rewrites"), result.stderr[-2000:]
    assert digests(builtin) == before


def test_flashtick_train_refuses_the_builtin_model_of_a_source_checkout_by_any_path(tmp_path, capsys) -> None:
    from engine.models import BUILTIN_MODEL_DIR
    from engine.service.cli import main

    assert is_source_checkout(BUILTIN_MODEL_DIR)  # this repository: where the developers' tool may rewrite it
    (tmp_path / "link").symlink_to(BUILTIN_MODEL_DIR)
    before = digests(BUILTIN_MODEL_DIR)
    for out in (str(BUILTIN_MODEL_DIR), f"{BUILTIN_MODEL_DIR}/", f"{BUILTIN_MODEL_DIR}/../builtin",
                str(tmp_path / "link")):
        for overwrite in ([], ["--overwrite"]):
            assert main(["train", str(tmp_path / "ticks.csv"), "--out", out, *overwrite]) == 2
            err = capsys.readouterr().err
            assert err.startswith(f"flashtick train: error: --out {Path(out)} is the built-in model's folder"), err
            assert "not even with --overwrite): give another --out" in err and "or --overwrite to" not in err
    assert digests(BUILTIN_MODEL_DIR) == before


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


def other_distribution(folder: Path, package: str, version: str) -> None:
    """A distribution named like one of our packages, installed where Python looks first, whose package fails to
    import as PyPI's `queries` does without its PostgreSQL driver."""
    (folder / package).mkdir(parents=True)
    (folder / package / "__init__.py").write_text("raise ImportError(\"No module named 'psycopg2'\")\n")
    info = folder / f"{package}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    (info / "top_level.txt").write_text(f"{package}\n")


def test_another_distributions_queries_package_is_named_with_the_fix(tmp_path) -> None:
    other_distribution(tmp_path / "first", "queries", "2.1.1")
    (tmp_path / "ticks.csv").write_text("ts,symbol,price,size\n1,A,1.0,1\n")
    result = run_python(["-m", "engine.service.cli", "backtest", "ticks.csv", "--out", "answers.parquet"],
                        cwd=tmp_path, pythonpath=[tmp_path / "first", ROOT])
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines[0] == "flashtick backtest: error: No module named 'psycopg2'"
    assert len(lines) == 2, lines
    assert lines[1].startswith("flashtick: 'queries' is also installed by queries 2.1.1 (another project")
    assert "virtualenv of its own" in lines[1]
    assert "pip uninstall queries and then pip install --force-reinstall flashtick" in lines[1]


def test_another_distributions_connectors_package_is_named_when_the_parser_fails(tmp_path) -> None:
    other_distribution(tmp_path / "first", "connectors", "0.9")
    result = run_python(["-m", "engine.service.cli", "health"], cwd=tmp_path, pythonpath=[tmp_path / "first", ROOT])
    assert result.returncode == 2, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    # (said by the command's own parser, as backtest's above: a command line builds only its command's parser)
    assert lines == ["flashtick health: error: No module named 'psycopg2'", lines[1]], lines  # no traceback
    assert lines[1].startswith("flashtick: 'connectors' is also installed by connectors 0.9")


def test_a_package_shadowed_without_a_distribution_is_named_by_its_folder(tmp_path) -> None:
    shadow = tmp_path / "first" / "queries"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not flashtick')\n")
    (tmp_path / "ticks.csv").write_text("ts,symbol,price,size\n1,A,1.0,1\n")
    result = run_python(["-m", "engine.service.cli", "backtest", "ticks.csv", "--out", "answers.parquet"],
                        cwd=tmp_path, pythonpath=[tmp_path / "first", ROOT])
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 2, lines
    assert lines[1].startswith(f"flashtick: 'queries' is imported from {shadow.resolve()}, not flashtick's "
                               f"{ROOT / 'queries'}"), lines
    assert "remove or rename that folder" in lines[1]


def test_a_missing_example_path_outside_the_clone_names_the_packaged_example(tmp_path, installed) -> None:
    site = installed[0]
    (tmp_path / "ticks.csv").write_text("ts,symbol,price,size\n1,A,1.0,1\n")
    result = run_installed(installed, "engine.service.cli", ["backtest", "ticks.csv", "--queries",
                                                             "queries/examples/tick_model.yaml", "--out",
                                                             "answers.parquet"], cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip() == (
        f"flashtick backtest: error: queries file not found: queries/examples/tick_model.yaml (in {tmp_path}); "
        f"flashtick ships an example of that name at {site / 'queries' / 'examples' / 'tick_model.yaml'}")


@pytest.mark.parametrize("argv", [["serve", "--config", "elsewhere/engine.yaml"],
                                  ["register", "elsewhere/text_model.yaml", "--control", "tcp://127.0.0.1:1"],
                                  ["demo", "--queries", "elsewhere/mine.yaml"]], ids=["config", "register", "other"])
def test_a_missing_config_or_queries_file_is_said_before_anything_loads(capsys, argv) -> None:
    from engine.service.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    name = argv[1] if argv[0] == "register" else argv[2]
    what = "config file" if "--config" in argv else "queries file"
    packaged = ROOT / "queries" / "examples" / Path(name).name
    shipped = f"; flashtick ships an example of that name at {packaged}" if packaged.is_file() else ""
    assert err == f"flashtick {argv[0]}: error: {what} not found: {name} (in {Path.cwd()}){shipped}"


def test_version_prints_flashtick_torch_and_python_in_one_line() -> None:
    """Review224 #8: `flashtick --version` (and -V) answered "the following arguments are required: COMMAND", exit 2:
    a release engineer's first check after an install. One line, exit 0, from the installed command's process."""
    import importlib.metadata
    import platform

    from engine.service.release import this_release

    release = this_release()  # (review321 #5: pyproject.toml's version, and the commit in a checkout)
    commit = f"git {release.short_commit}, " if release.commit else ""
    want = (f"flashtick {release.version} ({commit}torch {importlib.metadata.version('torch')}, "
            f"Python {platform.python_version()})\n")
    for flag in ("--version", "-V"):
        done = cli_run([flag], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                       timeout=300)
        assert (done.returncode, done.stdout, done.stderr) == (0, want, ""), done
