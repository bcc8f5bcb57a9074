"""The commands that work on local files without a service: `keygen` (a CURVE keypair) and `ticklog export` (a
data directory's tick log as a tick file).
"""

from __future__ import annotations

import argparse
import sys

from engine.service.cli_common import check_outputs
from engine.service.cli_reading import time_range_of
from engine.service.output_paths import TICK_TABLE, Output, said_if_disk_full


def cmd_ticklog_export(args: argparse.Namespace) -> None:
    from engine.service.tick_export import check_export_paths, export_ticks

    check_export_paths(args.data_dir, args.out)  # first: not a data directory, or --out inside one, says so
    check_outputs(args, [Output("--out", args.out, kind=TICK_TABLE, example="ticks.parquet")])
    time_range = time_range_of(args)
    with said_if_disk_full(args.out):  # its spill (OUT.chunks/, beside it) too: polars named neither
        summary = export_ticks(args.data_dir, args.out, streams=args.streams, time_range=time_range,
                               skip_corrupt=args.skip_corrupt)
    print(summary.line(args.data_dir, args.out), file=sys.stderr, flush=True)


def cmd_keygen(args: argparse.Namespace) -> None:
    from engine.service.auth import keygen

    try:
        public, secret = keygen(args.dir, args.name)
    except NotADirectoryError as e:  # (what make_private_dirs says of a --dir through a file, named as the option)
        raise NotADirectoryError(f"--dir {args.dir}: {e}") from None
    print(f"wrote {public} (public: give it out, or put it in a server's curve.clients_dir) "
          f"and {secret} (keep it private)")
