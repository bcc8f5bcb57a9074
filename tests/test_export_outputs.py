"""Where `ticklog export` writes (review337 #9, #11): a full disk or a file size limit said naming the file and what
was left (nothing), as a backtest's is; a missing output folder made, as a backtest makes its own; `--out -` writes
the CSV to stdout. Real tick logs written by the test, the real CLI."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import msgpack
import polars as pl

from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.cli import main
from engine.service.ticklog import TickLog
from forked_cli import cli_run

ROOT = Path(__file__).resolve().parents[1]


def logged(data_dir: Path, n: int = 3000) -> list:
    """A data directory whose tick log holds ``n`` synthetic ticks, as a serve logs accepted ones."""
    ticks = SyntheticMarket(SyntheticConfig(seed=9)).next_batch(n)
    with TickLog(data_dir / "ticks", fsync="never") as log:
        for tick in ticks:
            log.append(msgpack.packb({"tick": tick.to_wire()}, use_bin_type=True))
    return ticks


def test_an_export_past_the_file_size_limit_names_the_file_and_leaves_nothing(tmp_path: Path) -> None:
    """The spill fits, the CSV does not: polars' sink_csv raised an OSError with no errno, "File too large (os
    error 27)" (a full disk: "No space left on device (os error 28)"), said alone, naming no file."""
    logged(tmp_path / "data")
    out = tmp_path / "exp 1" / "t.csv"
    limit = 100_000  # the 3,000 ticks' Parquet spill is ~50 KB, their CSV ~180 KB
    # a real process: the file size limit is set between its fork and its exec (preexec_fn)
    done = subprocess.run([sys.executable, "-m", "engine.service.cli", "ticklog", "export", str(tmp_path / "data"),
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                                                (limit, resource.RLIM_INFINITY)))
    assert done.returncode == 5, done.stderr  # output not written (docs/cli.md)
    assert done.stderr.strip() == (
        f"flashtick ticklog export: error: cannot write '{out}': the file is larger than this process may write (its "
        f"file size limit, ulimit -f, is {limit:,} bytes); nothing was written to '{out}' (an export is written whole "
        f"or not at all, and its spill files are removed): raise the limit, or export less (--streams, --from/--to) "
        f"or to Parquet (smaller)")
    assert list(out.parent.iterdir()) == []  # no partial file, no spill, no temporary


def test_an_export_makes_the_folders_of_its_out_as_backtest_does(tmp_path: Path, capsys) -> None:
    ticks = logged(tmp_path / "data", 300)
    out = tmp_path / "exp 1" / "données" / "ticks é.csv"
    assert main(["ticklog", "export", str(tmp_path / "data"), "--out", str(out)]) == 0, capsys.readouterr().err
    assert pl.read_csv(out)["ts"].to_list() == [t.ts for t in ticks]


def test_an_export_to_dash_writes_the_csv_to_stdout_and_its_line_to_stderr(tmp_path: Path) -> None:
    """`ticklog export DIR --out -` (review337 #9: "not a tick file name"): the CSV on stdout, for a pipe."""
    ticks = logged(tmp_path / "data", 300)
    done = cli_run(["ticklog", "export", str(tmp_path / "data"), "--out", "-"], cwd=tmp_path, capture_output=True,
                   timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert pl.read_csv(done.stdout)["ts"].to_list() == [t.ts for t in ticks]
    assert b"to standard output" in done.stderr and list(tmp_path.iterdir()) == [tmp_path / "data"]
