"""Each stream's clock offset (receive_clock.py) kept across a clean restart, in DATA_DIR/clock_offsets.json: the
answers a restart owes are published after it, and without the offsets learnt before the stop they lacked
`clock_offset_ms` (review376 #11), exactly on the answers that wait longest. Written at a clean stop (a killed
process leaves the previous file, or none: its streams learn their offsets again from their next ticks), read at the
start for the streams the tick log holds, and then removed, so an offset never outlives the run that learnt it by
more than one restart."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Container
from pathlib import Path

from engine.service.private_dirs import private
from engine.service.receive_clock import ReceiveClock

FILE_NAME = "clock_offsets.json"


def save_offsets(root: Path, clock: ReceiveClock) -> None:
    """The offsets ``clock`` holds, written whole (a temporary file renamed over the old one)."""
    path, temporary = root / FILE_NAME, root / f".{FILE_NAME}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8", opener=private) as f:  # (the owner's alone, as the logs)
            f.write(json.dumps(clock.offsets(), sort_keys=True))
        os.replace(temporary, path)
    except OSError as e:  # (a full disk at the stop: the offsets are learnt again from the next ticks)
        print(f"flashtick: WARNING: could not keep the streams' clock offsets in {path}: {e}; answers owed after "
              f"the restart carry clock_offset_ms once their streams tick again", file=sys.stderr, flush=True)


def load_offsets(root: Path, clock: ReceiveClock, streams: Container[str] | None = None) -> int:
    """The offsets kept at the last clean stop, for the ``streams`` held (None: every one kept; a sharded front
    door's, whose shards replay later), into ``clock``; the file removed (the next clean stop writes it again).
    Returns how many were restored."""
    path = root / FILE_NAME
    try:
        kept = json.loads(path.read_text())
    except FileNotFoundError:
        return 0
    except (OSError, ValueError) as e:  # a damaged file costs the offsets, not the start
        print(f"flashtick: WARNING: {path} is unreadable ({e}): the streams' clock offsets are learnt again from "
              f"their next ticks", file=sys.stderr, flush=True)
        kept = {}
    if not isinstance(kept, dict):
        kept = {}
    restored = {stream: offset for stream, offset in kept.items()
                if (streams is None or stream in streams) and type(offset) is int}
    clock.restore(restored)
    path.unlink(missing_ok=True)
    return len(restored)
