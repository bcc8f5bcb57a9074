"""An output option that names an input is refused before any work, naming both, the input left byte for byte:
`evaluate --points-out trades.csv` replaced a shared tick file with a points table, exit 0 (review 108)."""
from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import msgpack
import polars as pl
import pytest

from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.disk_full import said_if_disk_full
from engine.service.cli import main
from engine.service.output_paths import write_atomically
from engine.service.ticklog import TickLog


@pytest.fixture
def ticks_csv(tmp_path: Path) -> Path:
    path = tmp_path / "trades.csv"
    pl.DataFrame([t.to_wire() for t in SyntheticMarket(SyntheticConfig(seed=5)).next_batch(300)]).write_csv(path)
    return path


def refused(capsys, argv: list[str], kept: Path) -> str:
    """Run ``argv``: exit 2 and ``kept`` unchanged; the error line."""
    before = kept.read_bytes()
    capsys.readouterr()
    assert main(argv) == 2
    assert kept.read_bytes() == before
    return capsys.readouterr().err


def test_evaluate_refuses_points_out_or_plot_on_an_input(ticks_csv: Path, tmp_path: Path, capsys) -> None:
    err = refused(capsys, ["evaluate", "builtin", str(ticks_csv), "--points-out", str(ticks_csv)], ticks_csv)
    assert f"--points-out {ticks_csv} is the input {ticks_csv}: writing there would destroy that input" in err
    (tmp_path / "link.csv").symlink_to(ticks_csv)  # another name for it: the same file
    err = refused(capsys, ["evaluate", "builtin", str(tmp_path / "link.csv"), "--plot", str(ticks_csv)], ticks_csv)
    assert f"--plot {ticks_csv} is the input {tmp_path / 'link.csv'}" in err


def test_backtest_refuses_out_and_its_side_files_on_an_input(ticks_csv: Path, tmp_path: Path, capsys) -> None:
    err = refused(capsys, ["backtest", str(ticks_csv), "--out", str(ticks_csv), "--quiet"], ticks_csv)
    assert f"--out {ticks_csv} is the input {ticks_csv}" in err
    scores = tmp_path / "answers.scores.json"  # what --out answers.parquet writes beside it
    scores.write_text(ticks_csv.read_text())
    err = refused(capsys, ["backtest", str(scores), "--out", str(tmp_path / "answers.parquet"), "--quiet"], scores)
    assert f"--out (its scores beside it) {scores} is the input {scores}" in err
    listed = tmp_path / "days.yaml"  # a file named in a replay list is an input too
    listed.write_text(f"replay:\n  - path: {ticks_csv.name}\n")
    err = refused(capsys, ["backtest", str(listed), "--out", str(ticks_csv), "--quiet"], ticks_csv)
    assert f"--out {ticks_csv} is the input {ticks_csv}" in err
    queries = tmp_path / "queries.yaml"
    queries.write_text("queries: []\n")
    err = refused(capsys, ["backtest", str(ticks_csv), "--queries", str(queries), "--out", str(queries)], queries)
    assert f"--out {queries} is the input {queries}" in err


def test_train_refuses_an_out_directory_holding_an_input_and_points_out_on_one(ticks_csv: Path, tmp_path: Path,
                                                                              capsys) -> None:
    err = refused(capsys, ["train", str(ticks_csv), "--out", str(tmp_path), "--overwrite"], ticks_csv)
    assert f"--out {tmp_path} holds the input {ticks_csv}" in err
    hard_link = tmp_path / "same.csv"  # the same file by another name
    os.link(ticks_csv, hard_link)
    err = refused(capsys, ["train", str(ticks_csv), "--out", str(tmp_path / "ckpt"), "--points-out", str(hard_link)],
                  ticks_csv)
    assert f"--points-out {hard_link} is the input {ticks_csv}" in err
    assert not (tmp_path / "ckpt").exists()


def test_a_quoted_pattern_s_matches_are_inputs_too(ticks_csv: Path, tmp_path: Path, capsys) -> None:
    """`backtest 'g/*' --out g/answers.parquet` run twice: the second run's pattern matches the first's answers,
    which the reader reads as a tick file, but the refusal saw the pattern alone (a folder's files it did see), so
    the run went on to fail on the answers' layout. A pattern that names no file is expanded as the reader expands
    it, on the command line and in a replay list."""
    days = tmp_path / "days"
    days.mkdir()
    (days / "trades.csv").write_bytes(ticks_csv.read_bytes())
    out = days / "answers.parquet"
    argv = ["backtest", f"{days}/*", "--out", str(out), "--quiet", "--max-ticks", "50", "--threads", "1"]
    assert main(argv) == 0
    err = refused(capsys, argv, out)
    assert f"--out {out} is the input {out}: writing there would destroy that input" in err, err
    err = refused(capsys, ["evaluate", "builtin", f"{days}/*.csv", "--points-out", str(days / "trades.csv")],
                  days / "trades.csv")
    assert f"--points-out {days / 'trades.csv'} is the input {days / 'trades.csv'}" in err, err
    listed = tmp_path / "days.yaml"
    listed.write_text("replay:\n  - path: days/*.csv\n")
    err = refused(capsys, ["backtest", str(listed), "--out", str(days / "trades.csv"), "--quiet"], days / "trades.csv")
    assert f"--out {days / 'trades.csv'} is the input {days / 'trades.csv'}" in err, err


def test_ticklog_export_refuses_out_on_a_file_of_its_data_directory(tmp_path: Path, capsys) -> None:
    data = tmp_path / "data"
    with TickLog(data / "ticks", fsync="never") as log:
        for tick in SyntheticMarket(SyntheticConfig(seed=9)).next_batch(50):
            log.append(msgpack.packb({"tick": tick.to_wire()}, use_bin_type=True))
    segment = next(p for p in (data / "ticks").iterdir() if p.is_file())
    err = refused(capsys, ["ticklog", "export", str(data), "--out", str(segment)], segment)
    assert f"--out {segment} is inside the data directory {data}: the export writes nothing in a data directory" in err


def test_evaluate_refuses_a_plot_name_it_cannot_write_before_the_run(ticks_csv: Path, tmp_path: Path,
                                                                     capsys) -> None:
    """Refused by matplotlib after the whole evaluation ("Format 'csv' is not supported"): now before it, by name."""
    err = refused(capsys, ["evaluate", "builtin", str(ticks_csv), "--plot", str(tmp_path / "plot.csv")], ticks_csv)
    assert f"--plot {tmp_path / 'plot.csv'}: not an image name; give a file ending in .png, .svg, .pdf, .jpg or " \
           f".jpeg" in err.splitlines()[-1]
    assert "evaluate" in err and "test slice" not in err  # nothing was read or scored
    err = refused(capsys, ["evaluate", "builtin", str(ticks_csv), "--plot", str(tmp_path / "no" / "c.png")],
                  ticks_csv)
    assert f"--plot {tmp_path / 'no' / 'c.png'}: no directory {tmp_path / 'no'} to write it in" in err
    (tmp_path / "d.png").mkdir()
    err = refused(capsys, ["evaluate", "builtin", str(ticks_csv), "--plot", str(tmp_path / "d.png")], ticks_csv)
    assert f"--plot {tmp_path / 'd.png'} is a directory" in err


def test_a_parquet_output_named_as_another_format_is_refused_before_any_work(ticks_csv: Path, tmp_path: Path,
                                                                              capsys) -> None:
    """`--points-out points.csv` and `backtest --out answers.csv` wrote Parquet under a CSV name (a spreadsheet or
    a CSV reader then fails on it): refused before the run, naming the suffixes they write, by one check for every
    command's outputs."""
    points, answers = tmp_path / "points.csv", tmp_path / "answers.csv"
    for argv, option, path in (
            (["evaluate", "builtin", str(ticks_csv), "--points-out", str(points)], "--points-out", points),
            (["train", str(ticks_csv), "--out", str(tmp_path / "ckpt"), "--points-out", str(points)], "--points-out",
             points),
            (["backtest", str(ticks_csv), "--out", str(answers), "--quiet"], "--out", answers),
            (["backtest", str(ticks_csv), "--out", str(tmp_path / "answers"), "--quiet"], "--out",
             tmp_path / "answers")):
        err = refused(capsys, argv, ticks_csv)
        assert f"{option} {path}: not a Parquet file name (this option writes Parquet only, whatever the name " \
               f"says); give a file ending in .parquet (or .pq)" in err, err
        assert not path.exists() and not (tmp_path / "ckpt").exists()
        assert "test slice" not in err and "replayed" not in err  # nothing was read
    data = tmp_path / "data"
    with TickLog(data / "ticks", fsync="never") as log:
        log.append(msgpack.packb({"tick": SyntheticMarket(SyntheticConfig(seed=9)).next_batch(1)[0].to_wire()},
                                 use_bin_type=True))
    err = refused(capsys, ["ticklog", "export", str(data), "--out", str(tmp_path / "ticks.txt")], ticks_csv)
    assert f"--out {tmp_path / 'ticks.txt'}: not a tick file name; give a file ending in .parquet (or .pq) or " \
           f".csv" in err, err


def test_every_output_option_naming_a_directory_is_refused_before_any_work(ticks_csv: Path, tmp_path: Path,
                                                                            capsys) -> None:
    """`backtest --out DIR` ran the whole backtest, then failed on the rename with "[Errno 21] Is a directory",
    leaving DIR.tmp and DIR.parts/ (which a rerun then took for an unfinished run) (review 109)."""
    folder = tmp_path / "cfg"
    folder.mkdir()
    err = refused(capsys, ["backtest", str(ticks_csv), "--out", str(folder)], ticks_csv)
    assert err.splitlines()[-1] == f"flashtick backtest: error: --out {folder} is a directory: give a file name, " \
                                   f"such as {folder / 'answers.parquet'}"
    assert "column map" not in err  # refused before any file was read, and before the model loaded
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg", "trades.csv"]  # no cfg.tmp, no cfg.parts
    beside = tmp_path / "answers.scores.json"  # where --out answers.parquet writes its scores
    beside.mkdir()
    err = refused(capsys, ["backtest", str(ticks_csv), "--out", str(tmp_path / "answers.parquet")], ticks_csv)
    assert f"--out (its scores beside it) {beside} is a directory: give another --out" in err
    data = tmp_path / "data"
    with TickLog(data / "ticks", fsync="never") as log:
        log.append(msgpack.packb({"tick": SyntheticMarket().next_batch(1)[0].to_wire()}, use_bin_type=True))
    err = refused(capsys, ["ticklog", "export", str(data), "--out", str(folder)], ticks_csv)
    assert f"--out {folder} is a directory: give a file name, such as {folder / 'ticks.parquet'}" in err
    assert not (tmp_path / "cfg.chunks").exists()
    err = refused(capsys, ["evaluate", "builtin", str(ticks_csv), "--points-out", str(folder)], ticks_csv)
    assert f"--points-out {folder} is a directory: give a file name, such as {folder / 'points.parquet'}" in err
    err = refused(capsys, ["train", str(ticks_csv), "--out", str(tmp_path / "ckpt"), "--points-out", str(folder)],
                  ticks_csv)
    assert f"--points-out {folder} is a directory" in err
    assert not (tmp_path / "ckpt").exists()


def test_an_output_with_no_folder_to_be_written_in_is_refused_before_any_work(ticks_csv: Path, tmp_path: Path,
                                                                              capsys) -> None:
    data = tmp_path / "data"
    with TickLog(data / "ticks", fsync="never") as log:
        log.append(msgpack.packb({"tick": SyntheticMarket().next_batch(1)[0].to_wire()}, use_bin_type=True))
    missing = tmp_path / "missing" / "ticks.csv"  # made, as backtest makes its own (review337 #11)
    assert main(["ticklog", "export", str(data), "--out", str(missing)]) == 0 and missing.is_file()
    # but not through a file, by ticklog export as by backtest
    err = refused(capsys, ["ticklog", "export", str(data), "--out", str(ticks_csv / "t.csv")], ticks_csv)
    assert f"--out {ticks_csv / 't.csv'}: {ticks_csv} is a file, not a folder" in err
    under_a_file = ticks_csv / "runs" / "answers.parquet"
    err = refused(capsys, ["backtest", str(ticks_csv), "--out", str(under_a_file)], ticks_csv)
    assert f"--out {under_a_file}: {ticks_csv} is a file, not a folder, so {under_a_file} cannot be written under " \
           f"it" in err
    assert "column map" not in err


@pytest.mark.parametrize("option, name", [("--points-out", "p.parquet"), ("--plot", "p.png")])
def test_an_output_under_a_file_is_said_alike_whether_its_folders_are_made_or_not(ticks_csv: Path, tmp_path: Path,
                                                                                  capsys, option: str,
                                                                                  name: str) -> None:
    """review250: `evaluate --points-out afile/p.parquet` (and --plot) said "no directory afile to write it in" of a
    folder that is a file, where train's --out says "afile is a file, not a folder": one check (parent_problem)
    words both, as an output whose folders are made and one whose are not."""
    afile = tmp_path / "afile"
    afile.write_text("not a folder\n")
    for under in (afile / name, afile / "sub" / name):
        err = refused(capsys, ["evaluate", "builtin", str(ticks_csv), option, str(under)], afile)
        assert f"{option} {under}: {afile} is a file, not a folder, so {under} cannot be written under it" in err
        assert "no directory" not in err
    err = refused(capsys, ["train", str(ticks_csv), "--out", str(afile / "m"), "--steps", "1"], afile)
    assert f"--out {afile / 'm'}: {afile} is a file, not a folder, so {afile / 'm'} cannot be written under it" in err
    missing = tmp_path / "missing" / name  # a folder that is not there at all: still "no directory"
    err = refused(capsys, ["evaluate", "builtin", str(ticks_csv), option, str(missing)], ticks_csv)
    assert f"{option} {missing}: no directory {missing.parent} to write it in" in err


def test_an_output_that_is_a_fifo_a_socket_or_a_device_is_refused_before_any_work(ticks_csv: Path, tmp_path: Path,
                                                                                   capsys) -> None:
    """`backtest --out f.parquet` and `ticklog export --out f.csv` on a FIFO replaced the FIFO with a regular file
    (written under a temporary name, then renamed), exit 0, while a reader waited on the FIFO for ever (review 115)."""
    import socket
    import stat

    fifo = tmp_path / "f.parquet"
    os.mkfifo(fifo)
    err = refused(capsys, ["backtest", str(ticks_csv), "--out", str(fifo), "--quiet"], ticks_csv)
    assert f"--out {fifo} is a FIFO (named pipe), not a regular file: the output is written whole under a " \
           f"temporary name, then renamed onto the path, so it cannot be streamed into a pipe" in err
    assert "column map" not in err  # before any file was read
    scores = tmp_path / "answers.scores.json"  # what --out answers.parquet writes beside it
    os.mkfifo(scores)
    err = refused(capsys, ["backtest", str(ticks_csv), "--out", str(tmp_path / "answers.parquet")], ticks_csv)
    assert f"--out (its scores beside it) {scores} is a FIFO (named pipe), not a regular file" in err
    data = tmp_path / "data"
    with TickLog(data / "ticks", fsync="never") as log:
        log.append(msgpack.packb({"tick": SyntheticMarket().next_batch(1)[0].to_wire()}, use_bin_type=True))
    exported = tmp_path / "ticks.csv"
    os.mkfifo(exported)
    err = refused(capsys, ["ticklog", "export", str(data), "--out", str(exported)], ticks_csv)
    assert f"--out {exported} is a FIFO (named pipe), not a regular file" in err
    (tmp_path / "link.csv").symlink_to(exported)  # a link to one is refused as what it leads to
    err = refused(capsys, ["ticklog", "export", str(data), "--out", str(tmp_path / "link.csv")], ticks_csv)
    assert f"--out {tmp_path / 'link.csv'} is a FIFO (named pipe)" in err
    with socket.socket(socket.AF_UNIX) as listening:
        unix = tmp_path / "p.parquet"
        listening.bind(str(unix))
        err = refused(capsys, ["evaluate", "builtin", str(ticks_csv), "--points-out", str(unix)], ticks_csv)
        assert f"--points-out {unix} is a socket, not a regular file" in err
    err = refused(capsys, ["evaluate", "builtin", str(ticks_csv), "--plot", "/dev/null"], ticks_csv)
    assert "--plot /dev/null is a character device, not a regular file" in err
    err = refused(capsys, ["train", str(ticks_csv), "--out", str(tmp_path / "ckpt"), "--points-out", str(fifo)],
                  ticks_csv)
    assert f"--points-out {fifo} is a FIFO (named pipe)" in err
    err = refused(capsys, ["train", str(ticks_csv), "--out", str(fifo)], ticks_csv)
    assert f"--out {fifo} is a FIFO (named pipe): give a directory" in err
    assert not (tmp_path / "ckpt").exists()
    assert all(stat.S_ISFIFO(path.stat().st_mode) for path in (fifo, scores, exported))  # each left as it was


def test_an_output_whose_temporary_name_is_a_fifo_is_refused_without_waiting(ticks_csv: Path, tmp_path: Path) -> None:
    """`ticklog export --out OUT` writes OUT.tmp, then renames it onto OUT: a FIFO at OUT.tmp made the export wait
    for a reader for ever. It is refused before any work, as the command's other refusals (exit 2, one line), and
    left as it was; a command run in a child, so the old wait fails the test at the bound instead of hanging it."""
    import stat

    from forked_cli import cli_run

    data = tmp_path / "data"
    with TickLog(data / "ticks", fsync="never") as log:
        log.append(msgpack.packb({"tick": SyntheticMarket().next_batch(1)[0].to_wire()}, use_bin_type=True))
    out = tmp_path / "ticks.csv"
    os.mkfifo(tmp_path / "ticks.csv.tmp")
    child = cli_run(["ticklog", "export", str(data), "--out", str(out)],
                    env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}, capture_output=True,
                    text=True, timeout=120)
    assert child.returncode == 2, child.stderr
    assert child.stderr == (f"flashtick ticklog export: error: --out {out}: {out}.tmp is a FIFO (named pipe), not a "
                            f"regular file; the output is written under that temporary name and then renamed onto "
                            f"ticks.csv, so nothing is written while it is there: remove it (or give another path)\n")
    assert not out.exists() and stat.S_ISFIFO((tmp_path / "ticks.csv.tmp").stat().st_mode)


def test_a_link_at_an_outputs_temporary_name_is_refused_and_what_it_leads_to_is_left(ticks_csv: Path, tmp_path: Path,
                                                                                    capsys) -> None:
    """A link at OUT.tmp: `ticklog export --out OUT` wrote where it leads (here a tick file of the user's, replaced by
    the export) and the rename put the link in OUT's place, exit 0. Refused before any work; a regular file there (an
    interrupted write's) is written over, as before. write_atomically, every command's writer, refuses it too."""
    data = tmp_path / "data"
    with TickLog(data / "ticks", fsync="never") as log:
        log.append(msgpack.packb({"tick": SyntheticMarket().next_batch(1)[0].to_wire()}, use_bin_type=True))
    out = tmp_path / "ticks.parquet"
    (tmp_path / "ticks.parquet.tmp").symlink_to(ticks_csv)
    err = refused(capsys, ["ticklog", "export", str(data), "--out", str(out)], ticks_csv)
    assert f"--out {out}: {out}.tmp is a symbolic link, not a regular file" in err
    assert not out.exists()
    from engine.service.output_paths import OutputPathUnusable, write_atomically

    with pytest.raises(OutputPathUnusable, match="is a symbolic link"):
        write_atomically(out, lambda tmp: tmp.write_text("points"))
    assert not out.exists() and ticks_csv.read_text().startswith("stream,")
    (tmp_path / "ticks.parquet.tmp").unlink()
    (tmp_path / "ticks.parquet.tmp").write_text("left by a write that was cut short")
    assert main(["ticklog", "export", str(data), "--out", str(out)]) == 0
    assert pl.read_parquet(out).height == 1 and not (tmp_path / "ticks.parquet.tmp").exists()


def test_train_refuses_a_fifo_at_its_weights_temporary_name_before_any_work(ticks_csv: Path, tmp_path: Path,
                                                                              capsys) -> None:
    """`train --out DIR --overwrite` writes DIR/model.safetensors through model.safetensors.tmp: a FIFO there was
    refused only when the run saved its weights, after the whole training. Now before any file is read (the 300
    ticks here are too few to split: that refusal would come first if the files were read), in the words of every
    other output's temporary name, and the FIFO is left as it was."""
    import stat

    out = tmp_path / "ckpt"
    out.mkdir()
    (out / "config.json").write_text("{}\n")  # a checkpoint --overwrite may replace
    fifo = out / "model.safetensors.tmp"
    os.mkfifo(fifo)
    for overwrite in (["--overwrite"], []):
        err = refused(capsys, ["train", str(ticks_csv), "--out", str(out), "--steps", "1", *overwrite], ticks_csv)
        assert f"--out {out / 'model.safetensors'}: {fifo} is a FIFO (named pipe), not a regular file; the output " \
               f"is written under that temporary name" in err
        assert "long enough to split" not in err
    assert stat.S_ISFIFO(fifo.stat().st_mode) and sorted(p.name for p in out.iterdir()) == [
        "config.json", "model.safetensors.tmp"]


@pytest.fixture
def read_only_folder(tmp_path: Path):
    """A folder on a read-only mount of its own (a bind mount remounted read-only: root only, else skipped)."""
    import subprocess

    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "--bind", str(folder), str(folder)],
                                           capture_output=True).returncode != 0:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    try:
        if subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("this kernel refused to remount the bind mount read-only")
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_an_output_on_a_read_only_file_system_is_said_as_such(ticks_csv: Path, tmp_path: Path, read_only_folder: Path,
                                                              capsys) -> None:
    """Review224 #7: a read-only mount was reported as "this user may not write in ." (to root): each output
    command now says the file system is read-only, before any work."""
    data = tmp_path / "data"
    with TickLog(data / "ticks", fsync="never") as log:
        log.append(msgpack.packb({"tick": SyntheticMarket().next_batch(1)[0].to_wire()}, use_bin_type=True))
    for argv, option, out in ((["backtest", str(ticks_csv)], "--out", read_only_folder / "a.parquet"),
                              (["train", str(ticks_csv)], "--out", read_only_folder / "model"),
                              (["ticklog", "export", str(data)], "--out", read_only_folder / "x.csv")):
        err = refused(capsys, [*argv, option, str(out)], ticks_csv)
        assert f"{option} {out}: {read_only_folder} is on a read-only file system; give a path on a writable " \
               f"one" in err, err


LIMITED_WRITE = """
import resource, signal, sys
from pathlib import Path
import polars as pl
from engine.service.output_paths import write_atomically, write_text_atomically
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (Python ignores it already; said: EFBIG, not a kill)
# 4,000: not a multiple of 4,096, so the limit falls inside a page header of the wide file (Invalid thrift)
resource.setrlimit(resource.RLIMIT_FSIZE, (4000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
out = Path(sys.argv[1])
for name, write in [
        ("wide.parquet", lambda tmp: pl.DataFrame({f"col_{i}": [float(j) for j in range(50)] for i in range(60)})
         .write_parquet(tmp)),
        ("long.parquet", lambda tmp: pl.DataFrame({"a": range(20_000)}).write_parquet(tmp)),
        ("big.md", None)]:
    try:
        write_text_atomically(out / name, "x" * 20_000) if write is None else write_atomically(out / name, write)
    except OSError as e:
        print(e)
"""


def test_a_write_past_the_file_size_limit_names_the_file_and_the_limit_whatever_polars_says(tmp_path: Path) -> None:
    """fix292 #4: under `ulimit -f` (RLIMIT_FSIZE) a Parquet write whose limit falls inside a page header failed
    with polars' bare "parquet: File out of specification: Invalid thrift: transport error" (no errno, no file),
    not named as the limit as "(os error 27)" was. Each write now says the file and the limit's value; no .tmp
    is left. In a subprocess: the limit holds for the whole process."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LIMITED_WRITE, str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    limit = "the file is larger than this process may write (its file size limit, ulimit -f, is 4,000 bytes)"
    assert done.stdout.splitlines() == [f"cannot write {tmp_path / name}: {limit}"
                                        for name in ("wide.parquet", "long.parquet", "big.md")], done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_disk_that_fills_inside_a_parquet_page_header_is_said_full_naming_the_file_and_the_space(
        tmp_path: Path) -> None:
    """fix302 #3: a disk that filled while polars wrote a page header said only polars' "parquet: File out of
    specification: Invalid thrift: transport error" (ENOSPC's errno lost, as EFBIG's is past `ulimit -f`). Each
    write now says the file, that the disk is full and how much space its file system has; no .tmp is left. The
    full disk is a real 16 KiB tmpfs (root only)."""
    from tests.test_train_full_disk import small_tmpfs

    wide = pl.DataFrame({f"col_{i}": [float(j) for j in range(50)] for i in range(60)})
    with small_tmpfs(tmp_path / "small", 16384) as small:
        with pytest.raises(pl.exceptions.ComputeError, match="Invalid thrift: transport error"):
            wide.write_parquet(small / "plain.parquet")  # what polars itself says of this disk
        (small / "plain.parquet").unlink()
        for name, write in (("wide.parquet", wide.write_parquet),
                            ("long.parquet", pl.DataFrame({"a": range(20_000)}).write_parquet)):
            with pytest.raises(OSError) as said:
                write_atomically(small / name, write)
            assert said.value.errno == errno.ENOSPC
            assert re.fullmatch(rf"cannot write {re.escape(str(small / name))}: no space left on the device "
                                rf"\(\d[\d,]* bytes free of 16,384 on the file system of {re.escape(str(small))}\)",
                                str(said.value)), str(said.value)
            assert list(small.iterdir()) == []
    roomy = tmp_path / "roomy.parquet"  # a write that fails so on a disk with room stays polars' own error
    with pytest.raises(pl.exceptions.ComputeError, match="Invalid thrift"), said_if_disk_full(roomy, roomy):
        raise pl.exceptions.ComputeError("parquet: File out of specification: Invalid thrift: transport error")


SPILL_AND_COPY = """
import json, os, resource, sys
from pathlib import Path
import msgpack
from connectors.replay import FileReplay
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.tick_export import export_ticks
from engine.service.ticklog import TickLog
root = Path(sys.argv[1])
with TickLog(root / "data" / "ticks", fsync="never") as log:
    for tick in SyntheticMarket(SyntheticConfig(seed=9)).next_batch(20_000):
        log.append(msgpack.packb({"tick": tick.to_wire()}, use_bin_type=True))
trades = root / "btcusdt.jsonl"
trades.write_text("".join(json.dumps({"e": "trade", "E": 1700000000000 + i, "s": "BTCUSDT", "t": i,
                                      "p": f"{40000 + i % 500 / 10:.2f}", "q": f"{0.001 * (1 + i % 13):.3f}",
                                      "T": 1700000000000 + i, "m": i % 3 == 0, "M": True}) + "\\n"
                          for i in range(20_000)))
resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
for read in (lambda: export_ticks(root / "data", root / "ticks.parquet"), lambda: FileReplay(trades)):
    try:
        read()
    except OSError as e:
        print(e)
"""


def test_a_tick_export_s_spill_and_a_json_lines_copy_past_the_file_size_limit_name_the_file(tmp_path: Path) -> None:
    """fix298 #4: `ticklog export`'s spill chunks and a JSON-lines file's Parquet copy were written by polars
    directly, outside said_if_disk_full: past `ulimit -f` a backtest of a .jsonl said only "parquet: File out of
    specification: underlying IO error: File too large (os error 27)", and left its temporary folder. Both now say
    the file and the limit; the copy's folder goes with it."""
    import subprocess
    import sys

    (tmp_path / "tmp").mkdir()
    done = subprocess.run([sys.executable, "-c", SPILL_AND_COPY, str(tmp_path)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
                               "TMPDIR": str(tmp_path / "tmp")}, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    limit = "the file is larger than this process may write (its file size limit, ulimit -f, is 50,000 bytes)"
    spill, copy = done.stdout.splitlines()
    assert spill == f"cannot write {tmp_path / 'ticks.parquet.chunks' / 'chunk-000000.parquet'}: {limit}", spill
    assert copy.startswith(f"cannot write {tmp_path / 'tmp'}/flashtick-jsonl-") and \
        copy.endswith(f"/btcusdt.jsonl.parquet: {limit}"), copy
    assert list((tmp_path / "tmp").iterdir()) == []
