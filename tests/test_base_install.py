"""With the base install alone (no extras), every module of the package imports and a backtest runs
end to end: the extras' packages are made unimportable in a child interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl

from conftest import tiny_tick_checkpoint
from connectors.synthetic import SyntheticConfig, SyntheticMarket

ROOT = Path(__file__).resolve().parents[1]
# pyproject's optional extras
EXTRAS_ONLY = ["matplotlib", "gguf", "llama_cpp", "ray", "pytest", "hypothesis", "databento_dbn"]
# None in sys.modules: `import X` raises ModuleNotFoundError and importlib.util.find_spec(X) says absent,
# exactly as when the package is not installed
BLOCK_EXTRAS = f"""
import sys
sys.modules.update(dict.fromkeys({EXTRAS_ONLY!r}))
"""


def run_without_extras(code: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_EXTRAS + code], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_every_module_imports_without_the_extras() -> None:
    result = run_without_extras("""
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


def test_cli_backtest_without_matplotlib_writes_answers_and_scores(tmp_path) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    (tmp_path / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\n")
    (tmp_path / "q.yaml").write_text("queries:\n  - {name: dir20, streams: ['*'], question: direction_20, "
                                     "kind: choice, trigger: {ticks: 5}}\n")
    ticks = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(300)
    pl.DataFrame([t.to_wire() for t in ticks]).write_csv(tmp_path / "ticks.csv")
    result = run_without_extras(f"""
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


def test_a_dbn_file_without_the_dbn_extra_is_one_clear_line(tmp_path) -> None:
    (tmp_path / "es.dbn").write_bytes(b"DBN")  # never decoded: the package is missing before that
    result = run_without_extras("""
from engine.service.cli import main
raise SystemExit(main(["feed", "replay", "es.dbn", "--endpoint", "tcp://127.0.0.1:5"]))
""", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip() == ("flashtick feed replay: error: reading DBN files needs the databento-dbn package: "
                                     "pip install 'flashtick[dbn]'")


def test_serve_with_shards_without_the_ray_extra_is_one_clear_line(tmp_path) -> None:
    result = run_without_extras("""
from engine.service.cli import main
raise SystemExit(main(["serve", "--shards", "2", "--no-log"]))
""", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == \
        "flashtick serve: ERROR: --shards needs Ray: pip install 'flashtick[ray]'"
