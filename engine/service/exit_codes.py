"""The `flashtick` exit statuses: one table, owned here, for every command, so that a scheduler can alert on a typo
and retry a service that is not up yet (review337 #5: status 2 said both). docs/cli.md lists them in words;
every command's --help ends with a pointer to it (EXIT_STATUS_EPILOG). `status_of_error` maps the error a command
ended with to its status; a command that finished returns OK or PARTIAL itself; a signal is 128 + its number
(cli_common.exit_status).
"""

from __future__ import annotations

import errno
import re

OK = 0
PARTIAL = 1  # done, but not all of it: no answer yet (`get`), a stream refused (`streams`), more rows rejected than
# --max-rejected-share allows, a service starting or degraded (`health`)
USAGE = 2  # a usage error (argparse's own status), bad input or config, or state on disk that needs another command
SERVICE_BUSY = 3  # connected, but no reply in time, or the service asked to be asked again (starting, busy)
SERVICE_UNREACHABLE = 4  # nothing accepted the connection, or it dropped: no service there (yet); retry later
IO_FAILED = 5  # an output could not be written: the disk or a quota full, an I/O error (free space, then resume)
NO_DATA = 6  # no data yet: a pattern that matches no file, an empty folder, files of a header alone or zero bytes
# (no_data.py): not USAGE, so that a job run every hour before its data lands can be skipped or retried, and a typo
# still alerts; not OK, so that a scheduler that knows nothing of it never takes a run of no output for a success
# `serve` found its data directory's filesystem full before replaying its log: restarting cannot help (review351 #4)
DATA_DIR_FULL = 7  # (6 is NO_DATA, fix347; both came in session 43)
# `serve` stopped by a failure of its own (a bug): the traceback is in its log, its data directory marked an unclean
# stop; a supervisor restarts it (2 said "a person must fix the config", which a unit does not restart: review435 #0)
SERVICE_FAILED = 70  # (EX_SOFTWARE)
INTERRUPTED_SIGINT = 130  # 128 + SIGINT: a Ctrl-C; what the command kept is said on stderr
INTERRUPTED_SIGTERM = 143  # 128 + SIGTERM: a scheduler's or supervisor's stop

EXIT_STATUS_EPILOG = ("exit status: 0 done; 1 partial (done, but not all of it); 2 usage or bad input; 3 service "
                      "busy; 4 service unreachable; 5 output not written (disk full, I/O error); 6 no data yet (no "
                      "file matches, files of no rows); 7 serve's data directory full at its start; 70 serve failed "
                      "(a bug: restart it, report the log's traceback); 130/143 interrupted by SIGINT/SIGTERM (what "
                      "was kept is said): the table is in docs/cli.md")

# a service reply's reasons that mean "ask again later", not a bad request (control_client.ControlError.reason)
_RETRY_REASONS = frozenset({"starting", "busy", "shard_lost", "stopping"})
_WRITE_FAILED = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})
# polars' form of an OS error: `No space left on device (os error 28)`
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def status_of_error(error: BaseException) -> int:
    """The exit status of a command that ended with ``error`` (said on stderr by the CLI)."""
    if isinstance(error, ImportError):  # another project's package in place of ours: the imports below may fail too
        return USAGE
    from engine.disk_full import DiskFull
    from engine.service.control_client import ControlBusy, ControlError, ControlUnreachable
    from engine.service.no_data import NoData
    from engine.service.data_dir_open import DataDirFull

    if isinstance(error, DataDirFull):
        return DATA_DIR_FULL
    from engine.service.server_failure import ServiceFailed

    if isinstance(error, ServiceFailed):
        return SERVICE_FAILED

    if isinstance(error, ControlBusy) or (isinstance(error, ControlError) and error.reason in _RETRY_REASONS):
        return SERVICE_BUSY
    # no connection, one that dropped (ControlDropped; a feed's engine lost), or no reply over one never live (a
    # ControlTimeout not ControlBusy): a refused key or request is a plain ControlError, which a retry will not change
    if isinstance(error, (ControlUnreachable, ConnectionError, TimeoutError)):
        return SERVICE_UNREACHABLE
    if isinstance(error, DiskFull) or (isinstance(error, OSError) and error.errno in _WRITE_FAILED):
        return IO_FAILED
    if (found := _RUST_OS_ERROR.search(str(error))) is not None and int(found.group(1)) in _WRITE_FAILED:
        return IO_FAILED
    return NO_DATA if isinstance(error, NoData) else USAGE
