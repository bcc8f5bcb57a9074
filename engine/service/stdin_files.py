"""Tick files that are streams (`-`, `/dev/stdin`, `/dev/fd/N`, named pipes: connectors/stream_copies.py), given
where a command reads tick files (backtest, feed replay, train, evaluate): each is copied whole to a temporary file
(removed when the command ends) before the command reads anything, as the FIFO refusal asked the user to do by hand
(review337 #9), its note on stderr.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import sys
import tempfile
from pathlib import Path

from connectors.stream_copies import STANDARD_INPUT, copied, is_stream


def spool_streams(args: argparse.Namespace) -> None:
    """``args.files`` with each stream among them replaced by a temporary file holding what it gave, said in a note
    each. Standard input can be read once: `-` given twice is a usage error."""
    files = getattr(args, "files", None)
    if not files or not any(is_stream(Path(f)) for f in files):
        return
    if sum(str(f) == STANDARD_INPUT for f in files) > 1:
        raise ValueError("- (standard input) given more than once: it can be read once")
    folder = Path(tempfile.mkdtemp(prefix="flashtick-stdin-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    args.files = [_spooled(Path(f), folder, i, args.command_name) if is_stream(Path(f)) else f
                  for i, f in enumerate(files)]


def _spooled(path: Path, folder: Path, index: int, who: str) -> Path:
    target, note = copied(path, folder, index)
    print(f"{who}: note: {note}", file=sys.stderr, flush=True)
    return target
