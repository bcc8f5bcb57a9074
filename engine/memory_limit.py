"""The memory limit a cgroup puts on this process (systemd's MemoryMax, Docker's --memory, a Kubernetes pod's limit).

Past it the kernel kills the process (SIGKILL) without a word on its stderr. The KV pool is allocated whole at the
start, so a pool that cannot fit beside what the process already holds is refused before it is allocated, with the
figures to budget, instead of a start that is killed in a loop with an empty log (docs/configuration.md, "Memory").
"""

from __future__ import annotations

import os
from pathlib import Path

PROC_SELF = Path("/proc/self")
CGROUP_ROOT = Path("/sys/fs/cgroup")
# cgroup v1 says "no limit" with a huge number (9223372036854771712, its page counter's largest); v2 says "max"
NO_LIMIT_FROM = 1 << 60
# beside the pool and what the process holds when it allocates it (the libraries, the model): the streams' state
# (token logs, encoders, answers kept for the `answers` op) and the forwards' working memory. Measured: about
# 0.35 GB at 2,054 streams of the built-in model (docs/configuration.md, "Memory"); a start needs this much at least
HEADROOM_BYTES = 256 << 20
GIB = 1 << 30


def resident_bytes() -> int | None:
    """This process's resident memory (RSS) from /proc (Linux); None where there is none."""
    try:
        with open(PROC_SELF / "statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def cgroup_memory_limit(proc_self: Path = PROC_SELF, cgroup_root: Path = CGROUP_ROOT) -> int | None:
    """The smallest memory limit in bytes on this process's cgroup or one of its ancestors (a parent's limit holds
    its children too): cgroup v2 ``memory.max`` under ``cgroup_root``, v1 ``memory.limit_in_bytes`` under
    ``cgroup_root``/memory, the cgroup named by ``proc_self``/cgroup. None where there is none, or none readable."""
    try:
        lines = (proc_self / "cgroup").read_text().splitlines()
    except OSError:
        return None
    limits: list[int] = []
    for line in lines:
        fields = line.split(":", 2)  # hierarchy id : controllers : path
        if len(fields) != 3:
            continue
        hierarchy, controllers, path = fields
        if hierarchy == "0" and controllers == "":  # v2 (on a hybrid host the v2 tree has no memory files: none)
            limits += _limits_up(cgroup_root, path, "memory.max")
        elif "memory" in controllers.split(","):
            limits += _limits_up(cgroup_root / "memory", path, "memory.limit_in_bytes")
    return min(limits, default=None)


def _limits_up(mount: Path, path: str, name: str) -> list[int]:
    """The limits in the file ``name`` of the cgroup at ``path`` under ``mount`` and of each ancestor up to the
    mount. In a container that sees only its own cgroup, mounted as the root, ``path`` (the host's) is not there:
    the mount's own file is then read."""
    parts = [part for part in path.split("/") if part and part not in (".", "..")]
    found = []
    for depth in range(len(parts), -1, -1):
        try:
            text = mount.joinpath(*parts[:depth], name).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < NO_LIMIT_FROM:  # ("max": none)
            found.append(int(text))
    return found


def usable_memory_bytes(proc_self: Path = PROC_SELF, cgroup_root: Path = CGROUP_ROOT) -> int | None:
    """The memory this process may use: its cgroup's limit where one is set, else the host's RAM; None where
    neither can be read."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError):
        ram = None
    known = [size for size in (cgroup_memory_limit(proc_self, cgroup_root), ram) if size]
    return min(known, default=None)


def pool_over_memory_limit(pool_bytes: int, cell_bytes: int, held_bytes: int | None = None,
                           proc_self: Path = PROC_SELF, cgroup_root: Path = CGROUP_ROOT) -> str | None:
    """Why a KV pool of ``pool_bytes`` would take this process past its cgroup's memory limit, beside
    ``held_bytes`` (default: its resident memory now) and HEADROOM_BYTES; None when it fits or there is no limit.
    Said as the end of a sentence that names the pool: "... does not fit under ..." with what to change."""
    limit = cgroup_memory_limit(proc_self, cgroup_root)
    if limit is None:
        return None
    held = resident_bytes() if held_bytes is None else held_bytes
    need = pool_bytes + (held or 0) + HEADROOM_BYTES
    if need <= limit:
        return None
    room = limit - (held or 0) - HEADROOM_BYTES
    lower = (f"lower kv.cells to {room // cell_bytes} or less (kv.bytes {room})" if room >= cell_bytes
             else "no pool fits beside them")
    return (f"does not fit under this process's memory limit of {limit / GIB:.2f} GiB (its cgroup's memory.max or "
            f"memory.limit_in_bytes: systemd MemoryMax, docker --memory, a Kubernetes limit) beside the "
            f"{(held or 0) / GIB:.2f} GiB it holds already (the libraries and the model) and "
            f"{HEADROOM_BYTES / GIB:.2f} GiB for its streams and forwards; past the limit the kernel kills it without "
            f"a word: {lower}, or raise the limit to {need / GIB:.2f} GiB or more (docs/configuration.md, \"Memory\")")
