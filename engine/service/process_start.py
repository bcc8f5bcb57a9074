"""When this process started, read from /proc: the `process_start_time_seconds` figure the heartbeat puts in
the stats snapshot (engine/service/heartbeat.py, once) and /metrics shows, as Prometheus client libraries do.
"""

from __future__ import annotations

import os


def process_start_time() -> float | None:
    """When this process started, in seconds since the Unix epoch, from /proc (Linux): the boot time plus the
    process's start in clock ticks since boot, as Prometheus client libraries read it; None where there is none."""
    try:
        with open("/proc/self/stat") as f:  # the command name in parentheses may hold spaces: fields after it
            since_boot = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + since_boot
    except (OSError, ValueError, IndexError, StopIteration):
        return None
