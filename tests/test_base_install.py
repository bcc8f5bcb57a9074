"""With the base install alone (no extras), every module of the package imports and a backtest runs
end to end: the extras' packages are made unimportable in a child interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from child_runs import ChildRuns
from conftest import tiny_tick_checkpoint
from connectors.synthetic import SyntheticConfig, SyntheticMarket

ROOT = Path(__file__).resolve().parents[1]
# pyproject's optional extras
EXTRAS_ONLY = ["matplotlib", "gguf", "llama_cpp", "ray", "pytest", "hypothesis", "databento_dbn"]
pytestmark = pytest.mark.xdist_group("test_base_install")  # (the module's child interpreter, started once)


@pytest.fixture(scope="module")
def without_extras():
    """One child interpreter where the extras' packages are unimportable (None in sys.modules: `import X` raises
    ModuleNotFoundError and importlib.util.find_spec(X) says absent, exactly as when the package is not installed),
    for every run of this file: each paid a fresh interpreter's start and torch's import before."""
    with ChildRuns([ROOT], timeout_s=300) as child:
        yield lambda code, cwd=ROOT: child.run(code, cwd, blocked=tuple(EXTRAS_ONLY))


def test_every_module_imports_without_the_extras(without_extras) -> None:
    result = without_extras("""
import importlib, pkgutil
names = []
for package in ("flashtick_kernels", "engine", "connectors", "queries"):
    root = importlib.import_module(package)
    names += [package] + [m.name for m in pkgutil.walk_packages(root.__path__, package + ".")]
for name in names:
    importlib.import_module(name)
print(f"imported {len(names)} modules")
import matplotlib  # noqa: the block must hold, or this test proves nothing
""")
    assert "ModuleNotFoundError: import of matplotlib halted" in result.stderr, result.stderr[-2000:]
    assert "imported" in result.stdout and int(result.stdout.split()[1]) > 40, result.stdout


def test_cli_backtest_without_matplotlib_writes_answers_and_scores(tmp_path, without_extras) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    (tmp_path / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\n")
    (tmp_path / "q.yaml").write_text("queries:\n  - {name: dir20, streams: ['*'], question: direction_20, "
                                     "kind: choice, trigger: {ticks: 5}}\n")
    ticks = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(300)
    pl.DataFrame([t.to_wire() for t in ticks]).write_csv(tmp_path / "ticks.csv")
    result = without_extras("""
from engine.service.cli import main
raise SystemExit(main(["backtest", "ticks.csv", "--queries", "q.yaml", "--out", "answers.parquet",
                       "--config", "engine.yaml"]))
""", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "skipping the calibration plot" in result.stderr
    assert "replayed 300 ticks" in result.stdout and "dir20" in result.stdout
    assert pl.read_parquet(tmp_path / "answers.parquet").height > 20
    assert json.loads((tmp_path / "answers.scores.json").read_text())[0]["query"] == "dir20"
    assert not (tmp_path / "answers.calibration.png").exists()


def test_a_dbn_file_without_the_dbn_extra_is_one_clear_line(tmp_path, without_extras) -> None:
    (tmp_path / "es.dbn").write_bytes(b"DBN")  # never decoded: the package is missing before that
    result = without_extras("""
from engine.service.cli import main
raise SystemExit(main(["feed", "replay", "es.dbn", "--endpoint", "tcp://127.0.0.1:5"]))
""", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip() == ("flashtick feed replay: error: reading DBN files needs the databento-dbn package: "
                                     "pip install 'flashtick[dbn]'")


def test_serve_with_shards_without_the_ray_extra_is_one_clear_line(tmp_path, without_extras) -> None:
    result = without_extras("""
from engine.service.cli import main
raise SystemExit(main(["serve", "--shards", "2", "--no-log"]))
""", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == \
        "flashtick serve: ERROR: --shards needs Ray: pip install 'flashtick[ray]'"
