"""The benchmark scripts as a user runs them: a plain run writes to a git-ignored folder and leaves the committed
reference results (the numbers docs/benchmarks.md cites) alone, and a script whose optional extra is missing says
which extra in one line, exit 2, before doing any work."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from child_runs import ChildRuns

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("test_benchmark_scripts")  # (the module's child interpreter, started once)
# Scripts that write no results: an export tool, and vLLM's side (run by vLLM's own interpreter, never ours).
WRITE_NOTHING = {"gguf_export", "vllm_peer"}
SCRIPTS = sorted(p.stem for p in (ROOT / "benchmarks").glob("*.py")
                 if "\ndef main(" in p.read_text() and p.stem not in WRITE_NOTHING)


# Forgets the benchmarks package a run imported: the next run imports it afresh from its own cwd (the child's
# sys.path[0]), as a fresh `python -m` would: ROOT's, or the copy's (test_a_plain_run_leaves_the_committed_...)
FORGET_BENCHMARKS = ("import sys\nfor name in [n for n in sys.modules if n.split('.')[0] == 'benchmarks']:\n"
                     "    del sys.modules[name]\n")


def script_code(module: str, args: list[str]) -> str:
    """``python -m module args`` as code for a child (``ChildRuns.run``). The module is run as a fresh `python -m`
    finds it: not yet imported (an earlier run may have imported it, as peers_latency imports gguf_export)."""
    return (f"{FORGET_BENCHMARKS}import runpy\nsys.argv = [{module!r}, *{args!r}]\n"
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n")


def help_code(script: str) -> str:
    """``benchmarks.SCRIPT.main(["--help"])`` as code for the child: the scripts' imports (torch, transformers)
    paid once there, where the runs below pay them anyway, not again in the test process."""
    return f"{FORGET_BENCHMARKS}from benchmarks.{script} import main\nmain(['--help'])\n"


@pytest.fixture(scope="module")
def child() -> ChildRuns:
    """One child interpreter (PYTHONPATH this checkout) for the runs that only read an exit status and output: each
    paid a fresh interpreter's start and torch's import before (and the --help checks imported every script, torch
    and transformers in the test process too)."""
    with ChildRuns([ROOT]) as runs:
        yield runs


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_results_writing_script_offers_the_output_options(script: str, child: ChildRuns) -> None:
    result = child.run(help_code(script), ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    help_text = result.stdout
    assert "--out-dir" in help_text and "--save-reference" in help_text, help_text


def test_the_default_output_folder_is_git_ignored(child: ChildRuns) -> None:
    said = child.run(f"{FORGET_BENCHMARKS}from benchmarks.common import LOCAL_RESULTS_DIR\nprint(LOCAL_RESULTS_DIR)\n",
                     ROOT)
    assert said.returncode == 0, said.stderr[-3000:]
    probe = Path(said.stdout.strip()) / "query_latency.json"
    ignored = subprocess.run(["git", "check-ignore", "-q", str(probe)], cwd=ROOT)
    assert ignored.returncode == 0, f"{probe} is not git-ignored"


def test_a_plain_run_leaves_the_committed_reference_alone(tmp_path: Path, child: ChildRuns) -> None:
    # a copy of benchmarks/ whose results/ holds only one reference file, so the runs never write into this checkout
    shutil.copytree(ROOT / "benchmarks", tmp_path / "benchmarks",
                    ignore=shutil.ignore_patterns("results", "__pycache__"))
    results = tmp_path / "benchmarks" / "results"
    results.mkdir()
    reference = results / "replay_json_lines.json"
    reference.write_text('{"committed": true}\n')
    small = ["--lines", "300", "--reps", "1"]
    # the three runs in the module's child, in the copy (benchmarks/ imported afresh from there, its cwd, by each
    # run), each one checked before the next starts
    def run_copy(args: list[str]) -> subprocess.CompletedProcess:
        return child.run(script_code("benchmarks.replay_json_lines", args), tmp_path)

    plain = run_copy(small)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert reference.read_text() == '{"committed": true}\n'
    local = results / "local" / "replay_json_lines.json"
    assert json.loads(local.read_text())["lines"] == 300
    assert str(local) in plain.stdout, plain.stdout  # the run says where its numbers went

    elsewhere = run_copy([*small, "--out-dir", str(tmp_path / "mine")])
    assert elsewhere.returncode == 0, elsewhere.stderr[-3000:]
    assert json.loads((tmp_path / "mine" / "replay_json_lines.json").read_text())["lines"] == 300
    assert reference.read_text() == '{"committed": true}\n'

    saved = run_copy([*small, "--save-reference"])
    assert saved.returncode == 0, saved.stderr[-3000:]
    assert json.loads(reference.read_text())["lines"] == 300
    assert str(reference) in saved.stdout, saved.stdout


OUT = "{out}"  # the test's own folder: nothing may be written there


@pytest.mark.parametrize("script, args, blocked, extra, make_target", [
    ("peers_latency", ["--quick", "--out-dir", OUT], ("llama_cpp",), "peers", "make bench-peers"),
    ("peers_streaming", ["--streams", "1", "--out-dir", OUT], ("gguf",), "peers", "make bench-peers"),
    ("gguf_export", [str(ROOT / "no-such-checkpoint"), OUT + "/tick.gguf"], ("gguf",), "peers", "make bench-peers"),
    ("flash", ["--streams", "8", "--out-dir", OUT], ("matplotlib",), "bench", "make setup"),
    ("shards", ["--ticks", "100", "--out-dir", OUT], ("ray",), "ray", "make setup"),
])
def test_a_missing_extra_is_one_line_and_exit_2(script: str, args: list[str], blocked: tuple[str, ...], extra: str,
                                                make_target: str, tmp_path: Path, child: ChildRuns) -> None:
    result = child.run(script_code(f"benchmarks.{script}", [a.format(out=tmp_path) for a in args]), ROOT, blocked)
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"needs the {extra} extra" in lines[0] and blocked[0] in lines[0], lines[0]
    assert f"pip install -e '.[{extra}]'" in lines[0] and make_target in lines[0], lines[0]
    assert not list(tmp_path.iterdir())  # nothing was run, nothing written


# Scripts run on CPU hosts that import transformers (the others: gpu_check needs CUDA, gguf_export runs no model)
TRANSFORMERS_SCRIPTS = ("flash", "forward_speed", "generate", "peers_latency", "peers_streaming", "query_latency")


@pytest.mark.parametrize("script", TRANSFORMERS_SCRIPTS)
def test_a_cpu_run_keeps_triton_out(script: str) -> None:
    """Importing transformers imports torch._dynamo, which imports triton to see whether it is installed; on a CPU
    host nothing runs Triton, and its nanobind bindings printed ~30 "leaked instance" lines after the results of
    `python -m benchmarks.flash`. Run as a script, each marks triton absent before anything imports it."""
    source = (ROOT / "benchmarks" / f"{script}.py").read_text()
    assert 'if __name__ == "__main__":\n    keep_triton_out_without_cuda()\n    main()' in source


def test_triton_is_not_imported_by_a_cpu_benchmark_run() -> None:
    # (a fresh interpreter: "was triton imported" is the question; it says whether CUDA is there, the test process
    # importing no torch of its own for that)
    if os.environ.get("TRITON_INTERPRET"):
        pytest.skip("Triton is wanted here (TRITON_INTERPRET=1)")
    code = ("import runpy, sys\nsys.argv = ['flash', '--help']\ntry:\n"
            "    runpy.run_module('benchmarks.flash', run_name='__main__', alter_sys=True)\n"
            "except SystemExit:\n    pass\n"
            "import transformers.generation.utils  # (imports torch._dynamo, which looks for triton)\n"
            "from torch.utils._triton import has_triton_package\n"
            "print('triton module', sys.modules.get('triton'), 'has_triton_package', has_triton_package())\n"
            "import torch\nprint('cuda', torch.cuda.is_available())\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    if "cuda True" in result.stdout:
        pytest.skip("Triton is wanted here (CUDA)")
    assert "triton module None has_triton_package False" in result.stdout, result.stdout
    assert "nanobind" not in result.stderr, result.stderr[-3000:]


@pytest.mark.parametrize("script", ("abuse", "durability", "soak", "when_behind"))
def test_the_live_server_scripts_say_where_they_listen(script: str, child: ChildRuns) -> None:
    """A user with a `flashtick serve` on the default ports, or only some ports allowed, could not tell whether
    these collide with it: each binds ports the OS picks free (endpoints tcp://127.0.0.1:0), and its --help says so."""
    result = child.run(help_code(script), ROOT)
    out = " ".join(result.stdout.split())
    assert result.returncode == 0 and "127.0.0.1 ports the OS picks free" in out, result.stderr[-3000:]
    assert "never the default 5555-5557" in out
    assert "tcp://127.0.0.1:0" in (ROOT / "benchmarks" / f"{script}.py").read_text()
