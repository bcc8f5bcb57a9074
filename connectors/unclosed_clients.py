"""Clients dropped without being closed: a notebook cell re-run rebinds `answers = AnswerSubscriber(...)`, and the
old object's sockets, and the subscription the service holds for it, outlived it (review354 #11: 4 descriptors and
a live subscription a re-run). pyzmq's own socket finalizer closed the sockets in any order, the socket monitor's
last, and libzmq kept their descriptors: a client's close() disables its monitor first. So every client registers
the close it needs here, run when the client is garbage-collected unclosed, with a ResourceWarning as an unclosed
file gives."""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable


def close_when_collected(client: object, what: str, close: Callable[[], None]) -> weakref.finalize:
    """Run ``close`` once ``client`` is garbage-collected without its own close() having run, warning (a
    ResourceWarning) that ``what`` was not closed. ``close`` must hold no reference to ``client`` (it would never be
    collected): a function of the client's sockets. The client's close() calls the returned finalizer's
    ``detach()``. Not run at the interpreter's exit, when ZeroMQ's context may be gone before it."""

    def collected() -> None:
        warnings.warn(f"{what} was not closed: its sockets are closed now that it was garbage-collected; call its "
                      f"close(), or use it in a `with` block", ResourceWarning, stacklevel=1)
        close()

    finalizer = weakref.finalize(client, collected)
    finalizer.atexit = False
    return finalizer
