"""A KV pool that cannot fit under the process's cgroup memory limit is refused before it is allocated: a reviewer's
`serve` under a 1.5 GiB limit with a 2 GiB pool was OOM-killed at start with nothing on stderr (rc 137)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.memory_limit import GIB, HEADROOM_BYTES, cgroup_memory_limit, pool_over_memory_limit

V1_NO_LIMIT = "9223372036854771712"  # what cgroup v1 says for "no limit"


def layout(tmp_path: Path, proc_cgroup: str, files: dict[str, str]) -> tuple[Path, Path]:
    """A /proc/self and a /sys/fs/cgroup in ``tmp_path``: the process's cgroup lines, and each file (a path under
    the cgroup root) with its text."""
    proc, root = tmp_path / "proc" / "self", tmp_path / "sys" / "fs" / "cgroup"
    proc.mkdir(parents=True)
    (proc / "cgroup").write_text(proc_cgroup)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text + "\n")
    return proc, root


def test_a_v2_limit_is_read_from_the_process_cgroup_and_its_ancestors(tmp_path) -> None:
    unit = "system.slice/flashtick.service"
    proc, root = layout(tmp_path, f"0::/{unit}\n", {f"{unit}/memory.max": str(3 * GIB),
                                                   "system.slice/memory.max": str(2 * GIB)})
    assert cgroup_memory_limit(proc, root) == 2 * GIB  # the parent's is lower: it holds the unit too
    (root / "system.slice/memory.max").write_text("max\n")
    assert cgroup_memory_limit(proc, root) == 3 * GIB
    (root / unit / "memory.max").write_text("max\n")
    assert cgroup_memory_limit(proc, root) is None


def test_a_v1_limit_is_read_and_its_huge_no_limit_value_is_none(tmp_path) -> None:
    lines = "9:name=systemd:/\n4:memory:/process_api/4f27e7\n3:cpuset:/\n0::/\n"  # a hybrid host, as this one
    path = "memory/process_api/4f27e7/memory.limit_in_bytes"
    proc, root = layout(tmp_path, lines, {path: V1_NO_LIMIT, "memory/memory.limit_in_bytes": V1_NO_LIMIT})
    assert cgroup_memory_limit(proc, root) is None
    (root / path).write_text(f"{1536 << 20}\n")
    assert cgroup_memory_limit(proc, root) == 1536 << 20


def test_a_container_that_sees_its_cgroup_as_the_root_reads_the_mounts_own_file(tmp_path) -> None:
    proc, root = layout(tmp_path, "0::/kubepods/pod1/abc\n", {"memory.max": str(GIB)})  # the host's path is not there
    assert cgroup_memory_limit(proc, root) == GIB


def test_no_cgroup_file_or_no_memory_controller_is_no_limit(tmp_path) -> None:
    proc, root = layout(tmp_path, "3:cpuset:/\n1:cpu:/\n", {"cpu/cpu.shares": "1024"})
    assert cgroup_memory_limit(proc, root) is None
    assert cgroup_memory_limit(tmp_path / "nowhere", root) is None


def test_a_pool_past_the_limit_is_refused_with_the_figures_to_budget(tmp_path) -> None:
    proc, root = layout(tmp_path, "0::/flashtick\n", {"flashtick/memory.max": str(1536 << 20)})
    held = 300 << 20
    said = pool_over_memory_limit(2 * GIB, 4096, held_bytes=held, proc_self=proc, cgroup_root=root)
    fits = (1536 << 20) - held - HEADROOM_BYTES
    assert said == (
        f"does not fit under this process's memory limit of 1.50 GiB (its cgroup's memory.max or "
        f"memory.limit_in_bytes: systemd MemoryMax, docker --memory, a Kubernetes limit) beside the 0.29 GiB it "
        f"holds already (the libraries and the model) and 0.25 GiB for its streams and forwards; past the limit the "
        f"kernel kills it without a word: lower kv.cells to {fits // 4096} or less (kv.bytes {fits}), or raise the "
        f"limit to 2.54 GiB or more (docs/configuration.md, \"Memory\")")
    assert pool_over_memory_limit(fits, 4096, held_bytes=held, proc_self=proc, cgroup_root=root) is None
    tiny = pool_over_memory_limit(GIB, 4096, held_bytes=1400 << 20, proc_self=proc, cgroup_root=root)
    assert "no pool fits beside them, or raise the limit" in tiny


def _own_v1_memory_cgroup() -> Path | None:
    """This process's cgroup v1 memory directory, where a child cgroup can be made (root, v1); None otherwise."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            own = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
            return own if (own / "memory.limit_in_bytes").is_file() and os.access(own, os.W_OK) else None
    return None


def test_serve_under_a_memory_limit_too_small_for_its_pool_says_so_and_exits_2(tmp_path) -> None:
    own = _own_v1_memory_cgroup()
    if own is None or os.geteuid() != 0:
        pytest.skip("needs root and a writable cgroup v1 memory hierarchy (/sys/fs/cgroup/memory) to set a limit")
    limited = own / f"flashtick-test-{os.getpid()}"
    limited.mkdir()
    try:
        (limited / "memory.limit_in_bytes").write_text(str(768 << 20))
        config = tmp_path / "engine.yaml"  # the built-in model: 4,096 bytes a cell, so a 1 GiB pool
        config.write_text("kv: {cells: 262144}\nendpoints: {ingest: 'tcp://127.0.0.1:0', answers: "
                          "'tcp://127.0.0.1:0', control: 'tcp://127.0.0.1:0'}\n")
        process = subprocess.run(
            [sys.executable, "-m", "engine.service.cli", "serve", "--config", str(config), "--no-log"],
            preexec_fn=lambda: (limited / "cgroup.procs").write_text(str(os.getpid())),  # the limit from its start
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        limited.rmdir()  # (empty again: the process has ended)
    assert process.returncode == 2, process.stderr  # not 137, killed with nothing said
    said = process.stderr
    assert ("flashtick serve: ERROR: kv.cells / kv.bytes: the KV pool of 262144 cells x 4096 bytes per cell (this "
            "model, torch.float32) = 1.0 GiB does not fit under this process's memory limit of 0.75 GiB") in said
