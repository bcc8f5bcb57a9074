"""The service's open-file limit: raised to the hard limit at start (as servers do), said when it stays low, and
watched while serving. Each client connection (a feed, a subscriber, a control client) takes a descriptor; past the
limit libzmq's accept fails with EMFILE and it retries silently, so the clients beyond it wait unanswered while the
service said nothing (review224 #5: 49 of 70 control clients answered under `ulimit -n 64`).

Why not the socket monitor's EVENT_ACCEPT_FAILED: libzmq retries the accept at once, in a loop, reporting each
failure (about 66,000 events a second for a few waiting clients, measured), and a monitor not drained as fast stalls
the socket's I/O thread: with the event watched and read once a heartbeat, 0 of 70 clients were answered, those
within the limit too. A free descriptor is instead probed once a heartbeat (os.dup: the same condition the accept
meets), and its absence counted and said.

The metrics endpoint must answer through it (review412 #5: /healthz unanswered, a liveness probe killed a healthy
engine): its thread takes a descriptor table of its own (own_descriptor_table), where ZeroMQ's connections take no
room.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import sys
import time
from collections.abc import MutableMapping

LOW_LIMIT = 4096  # below it a start says how many clients the limit leaves room for (systemd's soft default: 1024)
WARN_EVERY_S = 60.0  # while descriptors stay exhausted, a line at most this often (the count is in stats)
CLONE_FILES = 0x400  # <sched.h>: unshare(2)'s flag for the descriptor table
RAISE_HINT = ("raise it: `ulimit -n 65536` in the shell that starts serve, LimitNOFILE=65536 in a systemd unit, "
              "--ulimit nofile=65536 for docker run")


def raise_open_file_limit() -> int:
    """The soft RLIMIT_NOFILE raised to the hard one (an unprivileged process may), or as far as the kernel takes
    (an unlimited hard limit is capped by fs.nr_open); returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    for want in ((hard,) if hard != resource.RLIM_INFINITY else ()) + (1 << 20, 1 << 16):
        if soft != resource.RLIM_INFINITY and soft >= want:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            break
        except (ValueError, OSError):  # past fs.nr_open: try a smaller one
            continue
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def open_descriptors() -> int | None:
    """How many descriptors this process has open (Linux's /proc), None where it cannot be counted."""
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # (less the one listing it)
    except OSError:
        return None


def low_limit_warning() -> str | None:
    """The start's line when the open-file limit is low: about how many client connections it leaves room for."""
    limit, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if limit == resource.RLIM_INFINITY or limit >= LOW_LIMIT:
        return None
    used = open_descriptors()
    # (less what the service opens while serving: a new log segment, a /metrics scrape's connection)
    room = f"at most {max(0, limit - used)} client connections" if used is not None else "that many clients at most"
    # the hard limit named as it is: the soft one stays below it where raising it failed (an unlimited hard limit
    # over a small fs.nr_open), and "the hard limit too" sent a user to raise what was already high
    hard_name = "unlimited" if hard == resource.RLIM_INFINITY else hard
    hard_text = "the hard limit too" if hard == limit else f"the hard limit is {hard_name}: raising it there failed"
    return (f"warning: the open-file limit is {limit} ({hard_text}): {room} (feeds, subscribers and control "
            f"clients together, a descriptor each) before ZeroMQ stops accepting them, which clients see as no "
            f"reply; {RAISE_HINT}")


class DescriptorWatch:
    """Probed once a heartbeat: whether a descriptor is free. None free is counted (``descriptors_exhausted``:
    heartbeats that found none) and said on stderr, the first time and then at most every WARN_EVERY_S."""

    def __init__(self, counters: MutableMapping[str, int]) -> None:
        self.counters = counters
        counters["descriptors_exhausted"] = 0
        self._next_line = 0.0

    def poll(self) -> None:
        try:
            os.close(os.dup(2))
            return
        except OSError as e:
            if e.errno not in (errno.EMFILE, errno.ENFILE):
                return  # (no stderr to dup: nothing to learn here)
            which = "this process's open-file limit" if e.errno == errno.EMFILE else "the system's open-file table"
        self.counters["descriptors_exhausted"] += 1
        if time.monotonic() >= self._next_line:
            self._next_line = time.monotonic() + WARN_EVERY_S
            limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
            print(f"flashtick: warning: no file descriptor is free ({which} is reached: {limit}): ZeroMQ cannot "
                  f"accept new connections, so clients beyond it wait unanswered (stats descriptors_exhausted "
                  f"counts the heartbeats that found none); {RAISE_HINT}", file=sys.stderr, flush=True)


def own_descriptor_table(keep: tuple[int, ...]) -> str | None:
    """Give the calling thread, and the threads it starts, a descriptor table of its own (Linux unshare(2) with
    CLONE_FILES) that holds only the descriptors in ``keep``; None once done, else why not (no unshare, or a
    seccomp profile that denies it, as Docker's default does without CAP_SYS_ADMIN). The open-file limit bounds each
    table's descriptor numbers, so connections the other threads accept (ZeroMQ's) no longer take this one's room.
    The copies of the others' descriptors are closed at once: one held here would keep a file or a port open after
    its owner closed it. The thread then uses only descriptors it opens itself (a descriptor number means another
    file in the other table), and closes each itself, never leaving one to the garbage collector: collected on
    another thread, its close would take that thread's table's descriptor of the same number (socketserver closes
    each request's socket as the request ends). The other way holds too: another thread's file object that becomes
    cyclic garbage and is collected on this thread is closed in this table, its own descriptor left open (a leak)
    or this table's of that number closed; the engine's files and sockets are closed where they are used, not left
    to the collector, which this relies on."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_FILES) != 0:
            return os.strerror(ctypes.get_errno())
    except (OSError, AttributeError) as e:  # (no C library to load, no unshare in it)
        return str(e)
    try:
        held = {int(name) for name in os.listdir("/proc/thread-self/fd")}  # (this table's)
    except OSError:  # (no /proc: every number below the limit)
        held = set(range(resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
    for fd in held - set(keep):
        try:
            os.close(fd)
        except OSError:  # (the listing's own descriptor, closed already)
            pass
    return None
