"""Shared benchmark plumbing: timing, percentiles, machine facts, JSON output, where the real data is."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

RESULTS_DIR = Path(__file__).parent / "results"  # the committed reference numbers that the docs cite
# Where a plain run writes (git-ignored): reproducing a documented number must not overwrite the reference.
LOCAL_RESULTS_DIR = RESULTS_DIR / "local"


# The make target that installs each optional extra a benchmark needs (pyproject.toml's extras; Makefile's targets).
EXTRA_MAKE_TARGETS = {"peers": "make bench-peers", "bench": "make setup", "ray": "make setup"}


# The live-server scripts' --help says where they listen: a user with a `flashtick serve` on 5555-5557, or only some
# ports allowed, can tell before running one that it does not collide (their endpoints are tcp://127.0.0.1:0)
LOCAL_PORTS_EPILOG = ("Binds only 127.0.0.1 ports the OS picks free at the start (endpoints tcp://127.0.0.1:0, no "
                      "metrics port), never the default 5555-5557: it runs beside a `flashtick serve` on the same "
                      "host without touching it.")


def require_extra(extra: str, *modules: str) -> None:
    """Exit 2 with one line naming the extra when one of its ``modules`` is not installed. Called first thing in a
    benchmark's ``main()``: a missing peer is said before the run, not as a traceback seconds or hours into it."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        print(f"{Path(sys.argv[0]).stem}: needs the {extra} extra ({', '.join(missing)} not installed): "
              f"pip install -e '.[{extra}]' (or {EXTRA_MAKE_TARGETS[extra]})", file=sys.stderr)
        raise SystemExit(2)


def keep_triton_out_without_cuda() -> None:
    """On a host without CUDA, mark Triton as not installed before anything imports it. Nothing here runs a Triton
    kernel there (our kernels need CUDA, or TRITON_INTERPRET=1, which keeps it), yet importing transformers imports
    torch._dynamo, which imports triton to see whether it is installed; at exit Triton's nanobind bindings then print
    ~30 lines of "leaked instance" warnings, which read as a memory leak of what was measured. Called by the scripts
    that import transformers, when run as scripts (not by tests importing them)."""
    if "triton" not in sys.modules and not os.environ.get("TRITON_INTERPRET") and not torch.cuda.is_available():
        sys.modules["triton"] = None  # import triton now raises ImportError: "not installed"


def add_data_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--data-dir``: the real market data, by default ../shared/data beside the repository (not shipped)."""
    default = Path(__file__).resolve().parents[2] / "shared" / "data"
    parser.add_argument("--data-dir", type=Path, default=default,
                        help=f"real market data (binance-btcusdt-spot/, dukascopy-eurusd/); default {default}")


def time_ms(fn: Callable[[], object], reps: int, warmup: int = 3) -> list[float]:
    """Wall time of each call in ms, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return samples


def percentiles(samples: list[float]) -> dict[str, float]:
    return {"p50": float(np.percentile(samples, 50)), "p99": float(np.percentile(samples, 99)), "n": len(samples)}


def copy_bandwidth_gbs(mbytes: int = 512, reps: int = 10) -> float:
    """Memory bandwidth from a large tensor copy, counting bytes read plus bytes written."""
    src = torch.ones(mbytes * 2**20 // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    best = min(time_ms(lambda: dst.copy_(src), reps, warmup=2))
    return 2 * src.numel() * 4 / (best / 1e3) / 1e9


SIMD_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16")  # what decides our GEMM and attention speed


def cpu_model() -> tuple[str | None, list[str]]:
    """The CPU's model name and its SIMD flags of interest, from /proc/cpuinfo (Linux; else None, []).
    Sessions here land on different hosts (an Intel with AMX, an AMD EPYC): numbers compare within a run."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None, []
    fields: dict[str, str] = {}
    for line in info.splitlines():
        if not line.strip():
            break  # the first processor's block is enough
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    flags = set(fields.get("flags", "").split())
    return fields.get("model name") or None, [f for f in SIMD_FLAGS if f in flags]


def machine() -> dict[str, object]:
    model, simd = cpu_model()
    return {
        "cpu": platform.processor() or platform.machine(),
        "cpu_model": model,
        "simd": simd,
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out-dir DIR`` or ``--save-reference``: where the JSON (and PNG) go; see ``output_dir``."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--out-dir", type=Path, default=LOCAL_RESULTS_DIR,
                       help="folder for the JSON (and PNG); default benchmarks/results/local/ (git-ignored)")
    where.add_argument("--save-reference", action="store_true",
                       help="write into benchmarks/results/ instead: replaces the committed reference the docs cite")


def output_dir(args: argparse.Namespace) -> Path:
    """The folder ``add_output_arguments``' options name, created."""
    folder = RESULTS_DIR if args.save_reference else args.out_dir
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_json(name: str, payload: dict, folder: Path) -> Path:
    """``folder/name.json``; the caller prints the path it returns so a run says where its numbers went."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def crop_to(cache, length: int) -> None:
    """Cut a transformers DynamicCache back to ``length`` positions (the API's own crop changed meaning
    across 5.x releases: by hand, per layer)."""
    for layer in cache.layers:
        layer.keys = layer.keys[:, :, :length]
        layer.values = layer.values[:, :, :length]



def cache_argument(hf) -> str:
    """The forward keyword a transformers model takes its KV cache by: `cache` from 5.2x on (`past_key_values` is
    deprecated there), `past_key_values` before (the GPU image's 5.17)."""
    import inspect

    return "cache" if "cache" in inspect.signature(hf.forward).parameters else "past_key_values"


class ForeignLoad:
    """Share of the machine's CPU time used by *other* processes while a side was measured (from
    /proc/stat and our own CPU time): the benchmark shares its cores, so the JSON says how much."""

    def __enter__(self) -> "ForeignLoad":
        self.start = (_machine_busy_s(), _own_cpu_s(), time.perf_counter())
        return self

    def __exit__(self, *exc) -> None:
        busy, own, wall = (b - a for a, b in zip(self.start, (_machine_busy_s(), _own_cpu_s(), time.perf_counter())))
        share = max(0.0, busy - own) / (wall * (os.cpu_count() or 1)) if wall > 0 else 0.0
        self.share = min(1.0, share)  # (/proc/stat's ticks and the wall clock differ by a tick: never over 100%)


def _machine_busy_s() -> float:
    try:
        fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    except OSError:  # not Linux: unknown, report 0
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


# above this share of the machine's CPU taken by other processes a run's absolute times are not comparable with the
# docs' (quiet) ones; same-run ratios still are, roughly
LOADED_SHARE = 0.10


def say_load(share: float) -> None:
    """One line on stderr when other processes took more than LOADED_SHARE of the CPU during the measurement."""
    if share > LOADED_SHARE:
        print(f"warning: other processes used {100 * share:.0f}% of this machine's CPU during the run: its times are "
              f"not comparable with a quiet machine's (same-run ratios roughly are); rerun on an idle machine",
              file=sys.stderr, flush=True)
