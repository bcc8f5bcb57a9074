"""The commands that work on local files without a service: `keygen` (a CURVE keypair) and `ticklog export` (a
data directory's tick log as a tick file).
"""

from __future__ import annotations

import argparse
import errno
import shutil
import sys
import tempfile
from pathlib import Path

from engine.disk_full import DiskFull
from engine.path_words import shown_path
from engine.quoting import quoted
from engine.service.cli_common import check_outputs
from engine.service.cli_reading import time_range_of
from engine.service.output_paths import TICK_TABLE, Output, said_if_disk_full


def cmd_ticklog_export(args: argparse.Namespace) -> None:
    if str(args.out) in STANDARD_OUTPUT:  # the CSV to stdout: written whole to a temporary file, then copied
        with tempfile.TemporaryDirectory(prefix="flashtick-export-") as folder:
            args.out = Path(folder) / "ticks.csv"
            _export(args, shown="standard output")
            with open(args.out, "rb") as written:
                shutil.copyfileobj(written, sys.stdout.buffer, 1 << 20)
            sys.stdout.flush()
        return
    _export(args)


STANDARD_OUTPUT = ("-", "/dev/stdout")  # `--out -`: CSV on stdout, the summary line on stderr as ever


def _export(args: argparse.Namespace, shown: str | None = None) -> None:
    from connectors.time_zones import unknown_zone_hint
    from engine.service.tick_export import ExportError, check_export_paths, export_ticks

    check_export_paths(args.data_dir, args.out)  # first: not a data directory, or --out inside one, says so
    check_outputs(args, [Output("--out", args.out, kind=TICK_TABLE, example="ticks.parquet", makes_parent=True)])
    if args.tz is not None and (hint := unknown_zone_hint(args.tz)) is not None:  # (no files' map to refuse it)
        raise ExportError(f"unknown time zone --tz {quoted(args.tz)}{hint}")
    time_range = time_range_of(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)  # as backtest makes its --out's folders
    try:
        with said_if_disk_full(args.out):  # its spill (OUT.chunks/, beside it) too: polars named neither
            summary = export_ticks(args.data_dir, args.out, streams=args.streams, time_range=time_range,
                                   skip_corrupt=args.skip_corrupt)
    except DiskFull as e:  # what is left, and what to do: the export is written whole or not at all
        remedy = ("raise the limit, or export less (--streams, --from/--to) or to Parquet (smaller)"
                  if e.errno == errno.EFBIG else "free space and run the same command again")
        raise DiskFull(f"{e}; nothing was written to {shown_path(args.out)} (an export is written whole or not at "
                       f"all, and its spill files are removed): {remedy}") from None
    print(summary.line(args.data_dir, shown or args.out), file=sys.stderr, flush=True)


def cmd_keygen(args: argparse.Namespace) -> None:
    from engine.service.auth import keygen

    try:
        public, secret = keygen(args.dir, args.name)
    except NotADirectoryError as e:  # (what make_private_dirs says of a --dir through a file, named as the option)
        raise NotADirectoryError(f"--dir {args.dir}: {e}") from None
    print(f"wrote {public} (public: give it out, or put it in a server's curve.clients_dir) "
          f"and {secret} (keep it private)")
