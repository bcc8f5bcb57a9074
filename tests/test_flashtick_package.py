"""`import flashtick`: the public Python API (review354 #4). Every name it exports imports and is the engine's own
object; importing it, and using the clients through it, imports no torch (a notebook's first cell, a client
process); a user's module named like one of the engine's packages (a `queries.py` beside a notebook) is refused
up front, naming the file, instead of failing deep inside an engine import. Real processes, real files."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import flashtick

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "polars", "numpy", "engine.engine", "engine.service.pipeline")


def run_python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -c code`` in ``cwd`` with this checkout importable: sys.path[0] is ``cwd``, as a notebook's folder."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("name", flashtick.__all__)
def test_every_public_name_imports_and_is_the_engines_own(name: str) -> None:
    value = getattr(flashtick, name)
    if name == "__version__":
        assert value == tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
        return
    module = importlib.import_module(flashtick._WHERE[name])
    assert value is getattr(module, name)
    assert name in dir(flashtick)


def test_all_names_every_exported_name_once() -> None:
    assert sorted(flashtick.__all__) == sorted(["__version__", *flashtick._WHERE])


def test_help_of_every_public_name_says_what_it_is() -> None:
    """review384 #4: `help()` in a notebook showed ServiceConfig's and QueryScore's generated signatures alone and
    nothing for ServiceConfig.load/from_dict and ControlFeedResume: each has its own docstring, and QueryScore's
    names every field it holds (what brier, frequency_brier, model_brier, baseline... are)."""
    from dataclasses import fields

    for name in flashtick._WHERE:
        doc = getattr(flashtick, name).__doc__ or ""
        assert doc.strip() and not doc.startswith(f"{name}("), name  # (a dataclass's generated one is its signature)
    assert flashtick.ServiceConfig.load.__doc__ and flashtick.ServiceConfig.from_dict.__doc__
    assert all(f"``{field.name}``" in flashtick.QueryScore.__doc__ for field in fields(flashtick.QueryScore))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'run_backtests'"):
        flashtick.run_backtests  # noqa: B018


def test_importing_flashtick_and_using_its_clients_imports_no_torch(tmp_path) -> None:
    code = ("import json, sys\n"
            "import flashtick\n"
            "first = [m for m in sys.modules if m.split('.')[0] in ('engine', 'connectors', 'queries', 'torch')]\n"
            "client = flashtick.ControlClient('tcp://127.0.0.1:1', connect_timeout_s=1.0)\n"
            "client.close()\n"
            "flashtick.FeedClient, flashtick.AnswerSubscriber, flashtick.GaplessSubscriber, flashtick.trade\n"
            "flashtick.ControlError, flashtick.FeedTimeout, flashtick.__version__\n"
            f"print(json.dumps([first, [m for m in {HEAVY!r} if m in sys.modules]]))\n")
    done = run_python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    first, heavy = json.loads(done.stdout)
    assert first == []  # `import flashtick` alone imports none of the engine
    assert heavy == []


@pytest.mark.parametrize("shadow", ["queries.py", "engine/__init__.py"])
def test_a_users_module_named_like_an_engine_package_is_refused_naming_it(tmp_path, shadow: str) -> None:
    (tmp_path / shadow).parent.mkdir(exist_ok=True)
    (tmp_path / shadow).write_text('SQL = "select 1"\n')
    done = run_python("import flashtick\nflashtick.ServiceConfig\n", tmp_path)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    package = shadow.split("/")[0].removesuffix(".py")
    assert last.startswith(f"ImportError: flashtick: {(tmp_path / package).resolve()}")
    assert f"stands in for flashtick's package '{package}' ({ROOT / package})" in last
    assert "Rename that file or folder" in last


def test_a_folder_of_the_users_without_init_does_not_shadow(tmp_path) -> None:
    """A notebook's `queries/` folder of SQL files is a namespace portion, which a real package later on sys.path
    wins over: no refusal."""
    (tmp_path / "queries").mkdir()
    (tmp_path / "queries" / "daily.sql").write_text("select 1\n")
    done = run_python("import flashtick\nprint(flashtick.QuerySpecError.__module__)\n", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "queries.spec_errors"
