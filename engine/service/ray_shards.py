"""Starting engine shards on Ray: the connection, one placement group for all of them, each actor's options.

Ray is an optional extra (``pip install 'flashtick[ray]'``): it is imported here,
when a sharded service starts, never at module import.
"""

from __future__ import annotations

import functools
import os
import socket
import subprocess
import sys
import threading
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from engine.service import ray_reaper
from engine.service.config import ConfigError, ServiceConfig, ShardsSection
from engine.service.shard import Shard


def ray_module() -> Any:
    """Ray, or a ConfigError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--shards needs Ray: pip install 'flashtick[ray]'") from None
    return ray


def set_ray_environment(shards: ShardsSection, environ: MutableMapping[str, str], stderr: TextIO) -> None:
    """Ray's settings read from the environment, each only where the user set none."""
    if shards.ray_address is None:  # a local instance: the shards at the front door's priority (Ray's
        environ.setdefault("RAY_worker_niceness", "0")  # default, nice 15, starves them on a busy host)
        # no metrics agent (no dashboard): without this every Ray process logs that it cannot reach one
        environ.setdefault("RAY_enable_metrics_collection", "0")
    environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # CPU shards leave CUDA_VISIBLE_DEVICES be
    # the shards' lines reach our stderr with ANSI colour codes around their "(pid=...)" prefix: raw escapes in a
    # service log kept in a file or a journal; colours only on a terminal, and never with NO_COLOR set
    if "NO_COLOR" in environ or not (hasattr(stderr, "isatty") and stderr.isatty()):
        environ.setdefault("RAY_COLOR_PREFIX", "0")


class RayConnection(NamedTuple):
    """What ``connect`` did: whether this process connected (and so disconnects when done), and the watcher that
    ends a local instance's processes with this one (ray_reaper.py; None: none started, or no /proc)."""

    owned: bool
    reaper: subprocess.Popen | None


def connect(shards: ShardsSection) -> RayConnection:
    """Join ``shards.ray_address`` (or start a local Ray instance, watched so that its processes end with this
    one) unless this process is connected already."""
    ray = ray_module()
    if ray.is_initialized():
        return RayConnection(False, None)
    set_ray_environment(shards, os.environ, sys.stderr)
    _check_reachable(shards)
    # (before Ray starts: a kill while it starts leaves nothing either)
    reaper = ray_reaper.start(os.path.dirname(ray.__file__) + os.sep) if shards.ray_address is None else None
    if shards.ray_address is None:  # (review349 #12: five `E` lines on every healthy start, unexplained)
        print("flashtick serve: note: starting a local Ray instance: Ray's processes each log an `E` line "
              "\"Failed to establish connection to the metrics exporter agent\" as it starts; expected (no Ray "
              "metrics agent runs, and flashtick uses none: docs/scale-out.md), no fault", file=sys.stderr, flush=True)
    try:
        if shards.ray_address is None:  # Ray's own sockets on loopback too, as every socket of ours
            start_local_ray(log_to_driver=True, _node_ip_address="127.0.0.1")
        else:
            ray.init(address=shards.ray_address, include_dashboard=False, log_to_driver=True)
    except BaseException:
        ray_reaper.stop(reaper)
        raise
    return RayConnection(True, reaper)


# the GCS address of each local Ray instance this process started (start_local_ray) -> the PYTHONPATH its processes
# inherited: its shards need no runtime_env to import flashtick from where this process does
_LOCAL_PATHS: dict[str, str] = {}


def shard_python_path() -> str:
    """The PYTHONPATH a shard's process needs: the directory this flashtick was imported from first (a checkout's
    shards import the checkout, else their own install), then this process's own."""
    root = str(Path(__file__).resolve().parents[2])
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    return os.pathsep.join([root, *rest])


def start_local_ray(**init: Any) -> None:
    """``ray.init`` of a local instance (no dashboard) whose raylet, and so every worker it starts, inherits
    shard_python_path(): start_shard then passes no runtime_env, so a shard takes one of the workers Ray starts
    with the instance (as many as it has CPUs), where a runtime_env'd actor had a new one started for it and the
    runtime-env agent set up (measured: ~5 s of CPU at each instance's first shards, the same afterwards)."""
    ray = ray_module()
    path, before = shard_python_path(), os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = path  # (the raylet starts within ray.init; this process's own is put back after)
    try:
        ray.init(include_dashboard=False, **init)
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before
    _LOCAL_PATHS[ray.get_runtime_context().gcs_address] = path


def _check_reachable(shards: ShardsSection) -> None:
    """A HOST:PORT with nothing listening: said at once (Ray itself retries for minutes, saying only that it
    cannot reach its GCS)."""
    address = shards.ray_address
    if address is None or address == "auto" or "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    if not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=min(5.0, shards.start_timeout_s)).close()
    except OSError as e:
        raise ConfigError(f"shards.ray_address {address}: nothing accepts connections there ({e.strerror or e}): "
                          f"start the cluster's head (`ray start --head`), or leave the address out for a local "
                          f"Ray instance") from None


def placement_group_for(config: ServiceConfig) -> Any:
    """Every shard's resources reserved at once (a bundle each, spread over the cluster's nodes), so the
    service starts with all its shards or says why not, rather than with some of them waiting forever."""
    ray, shards = ray_module(), config.shards  # first: without Ray, the line that says how to install it
    from ray.util.placement_group import placement_group, remove_placement_group

    bundle = {"CPU": shards.cpus, **({"GPU": 1} if config.model.device.startswith("cuda") else {})}
    have = ray.cluster_resources()
    if shards.ray_address is None and any(shards.count * v > have.get(k, 0) for k, v in bundle.items() if v):
        # a local instance does not grow: say so now rather than after start_timeout_s
        raise ConfigError(f"{shards.count} shards of {bundle} each do not fit this machine's local Ray instance "
                          f"({ {k: have.get(k, 0) for k in bundle} }): fewer shards, a smaller shards.cpus, or "
                          f"shards.ray_address of a cluster")
    group = placement_group([{k: v for k, v in bundle.items() if v}] * shards.count, strategy="SPREAD")
    ready, _ = ray.wait([group.ready()], timeout=shards.start_timeout_s)
    if not ready:
        remove_placement_group(group)
        raise ConfigError(f"Ray cannot place {shards.count} shards of {bundle} each within "
                          f"shards.start_timeout_s={shards.start_timeout_s:g}: the cluster has "
                          f"{ray.cluster_resources()} (fewer shards, shards.cpus, or more nodes)")
    return group


def release(group: Any, timeout_s: float = 5.0) -> None:
    """Remove a placement group, waiting at most ``timeout_s``: Ray's call blocks for as long as the cluster's
    control service does not answer (a Ctrl-C reaches a local instance's processes too), and a service that
    stops must not hang on it."""
    from ray.util.placement_group import remove_placement_group

    thread = threading.Thread(target=remove_placement_group, args=(group,), daemon=True)
    thread.start()
    thread.join(timeout_s)


@functools.cache
def shard_actor_class() -> Any:
    """``ray.remote(Shard)``, made once per process. Ray exports an actor class to the cluster the first time one of
    its actors starts in a job (again in a new job), but every ``ray.remote(Shard)`` is a new class exported anew,
    its collision identifier computed by disassembling all of Shard's code: ~0.3 s of the front door's CPU per
    shard at every start (cProfile of ShardedPipeline starts), for the same class each time."""
    return ray_module().remote(Shard)


def start_shard(config: ServiceConfig, group: Any, index: int) -> Any:
    """The actor of shard ``index`` in bundle ``index`` of ``group``; Ray restarts it when it dies."""
    shards = config.shards
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    # the shards import flashtick from where this process did (a checkout), else from their own install: a local
    # instance started here gave its workers that path (start_local_ray); elsewhere the actor's runtime_env does
    path = shard_python_path()
    inherited = _LOCAL_PATHS.get(ray_module().get_runtime_context().gcs_address) == path
    return shard_actor_class().options(
        max_restarts=shards.max_restarts, max_task_retries=0, num_cpus=shards.cpus,
        num_gpus=1 if config.model.device.startswith("cuda") else 0,
        scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index),
        **({} if inherited else {"runtime_env": {"env_vars": {"PYTHONPATH": path}}})).remote(config, f"shard-{index}")
