"""A failure of the service's own loop (a bug, not the data or the config): said with its traceback in the log, the
data directory's lock left as a running service's (so the next start says it recovers after an unclean stop, the
line a log pipeline counts crashes by), and ended with exit status 70, which a supervisor restarts (review435 #0: an
error escaping the loop was one line, `ERROR: 'MY.005'`, exit 2 (which the documented unit does not restart), and
the lock said a clean stop)."""

from __future__ import annotations

import sys
import traceback


class ServiceFailed(RuntimeError):
    """The serving loop stopped on an error of its own; its traceback is already in the log."""


def said_failure(error: BaseException) -> ServiceFailed:
    """``error`` (escaping the serving loop) said on stderr with its traceback, each line the log's own; returns the
    ServiceFailed the command ends with."""
    lines = "".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip().splitlines()
    print("flashtick: ERROR: the service failed (a bug; the traceback follows: please report it):", file=sys.stderr)
    for line in lines:
        print(f"flashtick: ERROR:   {line}", file=sys.stderr)
    sys.stderr.flush()
    return ServiceFailed(f"the service failed: {type(error).__name__}: {error} (a bug: its traceback is above; the "
                         f"data directory keeps every accepted tick, and a restart recovers from it)")
