"""The files a backtest is given, as an equities quant's per-day per-symbol folders give them: a file named twice
(overlapping globs) is read once, a day with no prints (an empty file) is skipped, a finished run is not replaced
by `--resume`, and a refused resume names what differs. Real files in tmp_path, the real CLI."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import polars as pl
import pytest

from conftest import engine_dir
from engine.quoting import quoted
from engine.service.cli import main


QUERIES = "queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, trigger: {ticks: 5}}\n"
DAYS = ("2026-03-10", "2026-03-11")


def day_csv(path: Path, symbol: str, rows: int, day: str = DAYS[0]) -> Path:
    """A day's prints of one symbol, times in New York's wall clock (read with --tz America/New_York)."""
    lines = ["timestamp,symbol,price,size"]
    lines += [f"{day} {9 + (1800 + i // 10) // 3600:02d}:{(1800 + i // 10) // 60 % 60:02d}:{i // 10 % 60:02d}."
              f"{i % 10}00,{symbol},{100 + (i * 7 % 5) * 0.01:.2f},{1 + i % 3}" for i in range(rows)]  # 10 a second
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


# the tests share the module's checkpoint and queries:
# `--dist loadgroup` keeps them on one worker, which builds it once
pytestmark = pytest.mark.xdist_group("test_backtest_files")


@pytest.fixture(scope="module")
def engine_files(tmp_path_factory) -> Path:
    return engine_dir(tmp_path_factory.mktemp("files"), QUERIES)


def backtest(engine_files: Path, files: list[Path | str], out: Path, *extra: str) -> int:
    zone = [] if "--tz" in extra else ["--tz", "America/New_York"]  # (--tz is taken once: a second one is refused)
    return main(["backtest", *map(str, files), "--queries", str(engine_files / "q.yaml"), "--out", str(out),
                 "--config", str(engine_files / "engine.yaml"), "--quiet", "--no-plot", *zone,
                 *extra])  # (none of these tests reads the calibration plot: none drawn, half a short run's time)


def test_a_file_named_twice_is_read_once_with_a_note(engine_files: Path, tmp_path: Path, capsys) -> None:
    """`day/*.csv day/AAPL.csv`: AAPL's ticks once, not twice (which changed every AAPL count, label and score)."""
    aapl, msft = (day_csv(tmp_path / DAYS[0] / f"{symbol}.csv", symbol, rows) for symbol, rows in (("AAPL", 40),
                                                                                                ("MSFT", 30)))
    (tmp_path / "latest").symlink_to(tmp_path / DAYS[0])
    again = tmp_path / "latest" / "AAPL.csv"  # another path to the same file
    assert backtest(engine_files, [aapl, msft, aapl, again], tmp_path / "a.parquet") == 0
    out, err = capsys.readouterr()
    assert "replayed 70 ticks" in out, out
    assert f"note: {aapl}: named twice; read once" in err
    assert f"note: {again}: the same file as {aapl}; read once" in err
    answers = pl.read_parquet(tmp_path / "a.parquet")
    assert answers.filter(pl.col("stream") == "AAPL")["ticks"].max() <= 40

    # a replay list naming a file twice with its own map: the same rule; with two different maps: refused
    columns = "{ts: timestamp, stream_col: symbol, price: price, size: size, ts_unit: datetime}"
    listed = tmp_path / "list.yaml"
    listed.write_text(f"replay:\n  - {{path: {DAYS[0]}/AAPL.csv, columns: {columns}}}\n"
                      f"  - {{path: {DAYS[0]}/MSFT.csv, columns: {columns}}}\n"
                      f"  - {{path: {DAYS[0]}/AAPL.csv, columns: {columns}}}\n")
    assert backtest(engine_files, [listed], tmp_path / "b.parquet") == 0
    out, err = capsys.readouterr()
    assert "replayed 70 ticks" in out and "AAPL.csv: named twice; read once" in err, err
    other = columns.replace(", ts_unit: datetime", "")
    listed.write_text(f"replay:\n  - {{path: {DAYS[0]}/AAPL.csv, columns: {columns}}}\n"
                      f"  - {{path: {DAYS[0]}/AAPL.csv, columns: {other}}}\n")
    assert backtest(engine_files, [listed], tmp_path / "c.parquet") == 2
    assert "AAPL.csv is named twice with different column maps" in capsys.readouterr().err


def test_an_empty_file_among_others_is_skipped_with_a_note(engine_files: Path, tmp_path: Path, capsys) -> None:
    """A day with no prints, as a header-only CSV, a zero-byte CSV or a Parquet file of no rows: each skipped by
    name, not the whole run refused (the header-only CSV's time unit was guessed as ns, which --tz refused)."""
    prints = day_csv(tmp_path / "AAPL.csv", "AAPL", 40)
    header_only = tmp_path / "hdr_only.csv"
    header_only.write_text("timestamp,symbol,price,size\n")
    zero_bytes = tmp_path / "zero.csv"
    zero_bytes.write_text("")
    no_rows = tmp_path / "none.parquet"
    pl.DataFrame(schema={"timestamp": pl.Int64, "symbol": pl.String, "price": pl.Float64,
                         "size": pl.Int64}).write_parquet(no_rows)
    assert backtest(engine_files, [header_only, prints, zero_bytes, no_rows], tmp_path / "a.parquet") == 0
    out, err = capsys.readouterr()
    assert "replayed 40 ticks" in out, err
    said = f"3 files of no data rows skipped (a header alone or zero bytes: days left out): {header_only}, " \
           f"{zero_bytes}, {no_rows}"
    assert f"warning: {said}" in err and f"warning (said above too): {said}" in out, (out, err)  # and at the end

    assert backtest(engine_files, [header_only, zero_bytes, no_rows], tmp_path / "b.parquet") == 6
    assert "the files hold no ticks (no data rows" in capsys.readouterr().err  # every file empty: no data yet (6)


@pytest.mark.parametrize("name, body", [
    ("AAPL_2.csv", b'{"code":-1121,"msg":"Invalid symbol."}'),  # an API's error body saved as the day
    ("AAPL_2.csv", b"Access denied\n"),  # a proxy's answer
    ("AAPL_2.csv.gz", b'<?xml version="1.0"?><Error><Code>AccessDenied</Code></Error>'),  # S3's, gzipped
    # fix278 #2: one JSON object that is an error body was refused as a layout no map names, not as a download
    ("AAPL_2.jsonl", b'{"error": "Access denied"}\n'),
    ("AAPL_2.jsonl", b'{"code": 403, "msg": "Forbidden"}\n'),
    # fix280 #1: Kraken's empty REST answer gave polars' "struct type with no child field", naming no file
    ("AAPL_2.jsonl", b'{"error": [], "result": {}}\n'),
    ("AAPL_2.json", b'{"error": [], "result": {}}'),
])
def test_a_failed_download_of_one_line_is_refused_not_skipped_as_an_empty_day(
        engine_files: Path, tmp_path: Path, capsys, name: str, body: bytes) -> None:
    """A one-line file whose line is no tick header: it was skipped as a day without prints (`no data rows`), a
    note among many, and the day dropped out of the scores; now refused by name, with what its line holds."""
    prints = day_csv(tmp_path / "AAPL_1.csv", "AAPL", 40)
    failed = tmp_path / name
    failed.write_bytes(gzip.compress(body, mtime=0) if name.endswith(".gz") else body)
    assert backtest(engine_files, [prints, failed], tmp_path / "a.parquet") == 2
    err = capsys.readouterr().err
    assert f"error: {failed}: not a tick file: its one line holds no time or price column (" in err, err
    assert quoted(body.decode().strip()) in err, err  # the line as JSON writes it
    assert "no data rows" not in err and not (tmp_path / "a.parquet").exists()


def test_resume_refuses_to_replace_a_finished_run(engine_files: Path, tmp_path: Path, capsys) -> None:
    """`--resume` over a finished 2-day run with one day's files: refused, the finished answers kept."""
    days = [day_csv(tmp_path / day / "AAPL.csv", "AAPL", 40, day) for day in DAYS]
    out = tmp_path / "full.parquet"
    assert backtest(engine_files, days, out) == 0
    finished = out.read_bytes()
    capsys.readouterr()
    assert backtest(engine_files, days[:1], out, "--resume") == 2
    err = capsys.readouterr().err
    assert f"{out} holds a finished backtest" in err and "complete" in err and "another --out" in err, err
    assert out.read_bytes() == finished and not (tmp_path / "full.parquet.parts").exists()

    fresh = tmp_path / "fresh.parquet"  # no output, no checkpoint: --resume starts from the beginning as before
    assert backtest(engine_files, days[:1], fresh, "--resume") == 0
    assert "starting from the beginning" in capsys.readouterr().err and fresh.is_file()


def test_a_refused_resume_names_what_differs(engine_files: Path, tmp_path: Path, capsys) -> None:
    """Files added, removed or reordered, one edited, or --tz changed: each refusal names the file or the option,
    not one catch-all line; a checkpoint written before it recorded how files are read is still refused."""
    from connectors.map_options import map_from_options
    from engine.service.backtest import BacktestInterrupted, run_backtest
    from engine.service.config import ServiceConfig

    days = [day_csv(tmp_path / day / "AAPL.csv", "AAPL", 40, day) for day in DAYS]
    msft = day_csv(tmp_path / DAYS[0] / "MSFT.csv", "MSFT", 30)
    out = tmp_path / "cut.parquet"
    polls = iter(range(10**9))
    with pytest.raises(BacktestInterrupted):  # as Ctrl-C stops it, at the 20th batch boundary
        run_backtest(ServiceConfig.load(engine_files / "engine.yaml"), days, engine_files / "q.yaml", out,
                     columns=map_from_options(detect=True, tz="America/New_York"), progress=False,
                     stop=lambda: next(polls) >= 20)

    def refusal(files: list[Path], *extra: str) -> str:
        assert backtest(engine_files, files, out, "--resume", *extra) == 2
        return capsys.readouterr().err

    first, second = (str(day.resolve()) for day in days)
    assert f"different files (removed: {second})" in refusal(days[:1])
    assert f"different files (added: {msft.resolve()})" in refusal([*days, msft])
    assert f"different file order (file 1 was {first}, now {second}" in refusal(days[::-1])
    err = refusal(days, "--tz", "Europe/London")
    assert f"different ways of reading {first}, {second} (--tz \"America/New_York\" then, \"Europe/London\" now)" in err
    assert "a column map, --preset" not in err  # not the catch-all
    kept_ns = days[0].stat().st_mtime_ns  # review407 #2: a file touched, its bytes the same, is said so
    os.utime(days[0], ns=(kept_ns, kept_ns + 10**9))
    assert (f"different file modification times (the same bytes by their SHA-256, touched or copied since: {first}; "
            f"`touch -d @{kept_ns / 1e9:.9f} {first}` gives it back the time the checkpoint recorded)") in refusal(days)
    os.utime(days[0], ns=(kept_ns, kept_ns))
    days[1].write_text(days[1].read_text() + f"{DAYS[1]} 09:31:00.000,AAPL,100.00,1\n")
    assert f"different file contents (size or modification time changed: {second});" in refusal(days)

    manifest_path = tmp_path / "cut.parquet.parts" / "progress.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["readings"]  # as a checkpoint written before how each file is read was recorded
    manifest_path.write_text(json.dumps(manifest))
    err = refusal(days, "--tz", "UTC")  # cannot tell --tz from another map: says both ways it may differ
    assert f"different file contents (size or modification time changed: {second}), files, or ways of reading " \
           f"them (a column map, --preset, --tz" in err, err


def test_a_resume_over_another_time_range_is_refused_naming_it(engine_files: Path, tmp_path: Path, capsys) -> None:
    """An interrupted `--from X --to Y` run resumed with another --from or --to (or none): its answers so far come
    from other ticks than the rest would, so the resume is refused, naming the option and both values."""
    from connectors.map_options import map_from_options
    from connectors.time_range import TimeRange
    from engine.service.backtest import BacktestInterrupted, run_backtest
    from engine.service.config import ServiceConfig

    days = [day_csv(tmp_path / day / "AAPL.csv", "AAPL", 400, day) for day in DAYS]
    out = tmp_path / "cut.parquet"
    polls = iter(range(10**9))
    begun, until = f"{DAYS[0]}T14:30:05Z", f"{DAYS[1]}T14:30:30Z"  # (09:30 in New York)
    with pytest.raises(BacktestInterrupted):  # as Ctrl-C stops it, at the 20th batch boundary
        run_backtest(ServiceConfig.load(engine_files / "engine.yaml"), days, engine_files / "q.yaml", out,
                     columns=map_from_options(detect=True, tz="America/New_York"), progress=False,
                     time_range=TimeRange.of(begun, until), stop=lambda: next(polls) >= 20)

    def refusal(*extra: str) -> str:
        assert backtest(engine_files, days, out, "--resume", *extra) == 2
        return capsys.readouterr().err

    for other in (["--from", f"{DAYS[0]}T14:30:10Z", "--to", until], ["--from", begun, "--to", f"{DAYS[1]}T14:30:20Z"],
                  []):
        err = refusal(*other)
        assert "was written by a backtest with different ways of reading" in err and " then, " in err, err
        assert ("--from" if other[1:2] != [begun] else "--to") in err.split("different ways of reading")[1], err
    assert backtest(engine_files, days, out, "--resume", "--from", begun, "--to", until) == 0  # the same: taken


def test_notes_on_files_of_one_name_say_their_paths(engine_files: Path, tmp_path: Path, capsys) -> None:
    """Per-day folders: `AAPL.csv: detected ...` twice told no day from another; a unique name stays short."""
    days = [day_csv(tmp_path / day / "AAPL.csv", "AAPL", 40, day) for day in DAYS]
    day_csv(tmp_path / DAYS[0] / "MSFT.csv", "MSFT", 30)
    assert backtest(engine_files, [*days, tmp_path / DAYS[0] / "MSFT.csv"], tmp_path / "a.parquet") == 0
    err = capsys.readouterr().err
    # (the three files' like notes said once, naming each: review382 #5)
    said = next(line for line in err.splitlines() if "note: 3 files: detected, with the keys given (tz)" in line)
    assert said.endswith(f"({days[0]}, {days[1]}, MSFT.csv)"), said
    assert "note: AAPL.csv:" not in err


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_second_ctrl_c_says_what_was_kept(engine_files: Path, tmp_path: Path, signame: str) -> None:
    """The first Ctrl-C (or a supervisor's SIGTERM) waits for a batch boundary; the second aborts at once, and says
    what --resume will do. One batch of a day's event time (--batch-ms) holds the whole file, so no boundary comes
    between the two."""
    import os
    import signal
    import subprocess
    import time

    from forked_cli import cli_popen

    prints = day_csv(tmp_path / "AAPL.csv", "AAPL", 20_000)
    # a real process, forked from the warm zygote (its start is not what is tested: its signals are)
    child = cli_popen(["backtest", str(prints), "--queries", str(engine_files / "q.yaml"), "--out",
                       str(tmp_path / "a.parquet"), "--config", str(engine_files / "engine.yaml"), "--tz",
                       "America/New_York", "--batch-ms", "86400000"],
                      env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
                      stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "a.parquet.parts").is_dir() and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # the run has opened its parts folder: replaying, the handlers in place
    signum = getattr(signal, signame)
    child.send_signal(signum)
    said = [child.stderr.readline()]
    while "stopping at the next batch boundary" not in said[-1]:
        said.append(child.stderr.readline())
        assert said[-1], "".join(said)
    child.send_signal(signum)
    err = "".join(said) + child.stderr.read()
    assert child.wait(60) == 128 + signum, err
    assert "flashtick backtest: aborted; no checkpoint was written yet: nothing kept; --resume starts from the " \
           "beginning" in err, err


def test_threads_sets_the_forwards_torch_threads(engine_files: Path, tmp_path: Path, capsys) -> None:
    """--threads replaces the config's model.threads (1): a user with idle cores can use them. The run's record says
    the threads its forwards ran with, and the caller's torch threads are as they were after it (a backtest run
    in-process, from Python, leaves the process as it found it)."""
    import torch

    prints = day_csv(tmp_path / "AAPL.csv", "AAPL", 30)
    before = torch.get_num_threads()
    assert backtest(engine_files, [prints], tmp_path / "a.parquet", "--threads", "2") == 0
    assert json.loads((tmp_path / "a.manifest.json").read_text())["run"]["threads"] == 2
    assert torch.get_num_threads() == before
    assert backtest(engine_files, [prints], tmp_path / "b.parquet", "--threads", "0") == 2
    assert "--threads must be >= 1, got 0" in capsys.readouterr().err


def test_a_folder_or_a_quoted_pattern_reads_the_files_it_stands_for(engine_files: Path, tmp_path: Path,
                                                                    capsys) -> None:
    """Review 163 (finding 6): a folder was told to "write what it holds to a file", and a pattern no shell expanded
    (`'data/*/AAPL.csv'`, quoted, or written in a config or a Makefile) got "replay file not found". A folder reads
    as its tick files, in folders inside it too, in the order of their paths; a pattern as the files it matches,
    sorted; each said in a note. A folder without tick files and a pattern that matches nothing say so."""
    data = tmp_path / "data"
    for symbol, rows, day in (("AAPL", 40, DAYS[0]), ("MSFT", 30, DAYS[0]), ("AAPL", 20, DAYS[1])):
        day_csv(data / day / f"{symbol}.csv", symbol, rows, day)
    (data / "README.md").write_text("one day of prints a file\n")
    (data / "SOURCE.txt").write_text("Prints of two stocks, a file a day.\nFrom the exchange's feed.\n")
    (data / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    assert backtest(engine_files, [data], tmp_path / "folder.parquet") == 0
    out, err = capsys.readouterr()
    assert "replayed 90 ticks" in out, out + err
    assert (f"note: {data}: a folder, read as its 4 files in the order of their paths (2026-03-10/AAPL.csv, "
            f"2026-03-10/MSFT.csv, 2026-03-11/AAPL.csv, SOURCE.txt); skipped README.md: not tick files") in err, err
    assert f"note: {data / 'SOURCE.txt'}: skipped: a text file whose columns hold no tick layout (a readme?)" in err
    files = [data / DAYS[0] / "AAPL.csv", data / DAYS[0] / "MSFT.csv", data / DAYS[1] / "AAPL.csv"]
    assert backtest(engine_files, files, tmp_path / "files.parquet") == 0  # as the shell's glob gives them
    capsys.readouterr()
    same = ["query", "stream", "seq", "data_ts", "ticks", "answer"]
    assert pl.read_parquet(tmp_path / "folder.parquet").select(same).equals(
        pl.read_parquet(tmp_path / "files.parquet").select(same))

    assert backtest(engine_files, [f"{data}/*/AAPL.csv"], tmp_path / "pattern.parquet") == 0
    out, err = capsys.readouterr()
    assert "replayed 60 ticks" in out, out + err
    assert (f"note: {data}/*/AAPL.csv: a pattern, read as the 2 files it matches, sorted (2026-03-10/AAPL.csv, "
            f"2026-03-11/AAPL.csv)") in err, err
    assert backtest(engine_files, [f"{data}/*/TSLA.csv"], tmp_path / "none.parquet") == 6  # no data yet
    assert f"error: no file matches '{data}/*/TSLA.csv': no data yet (a pattern that names no file is expanded " \
        f"here as a shell would" in capsys.readouterr().err
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.pdf").write_bytes(b"%PDF-1.4")
    assert backtest(engine_files, [tmp_path / "docs"], tmp_path / "docs.parquet") == 2
    assert f"error: {tmp_path / 'docs'} is a folder holding no tick file (only notes.pdf); replay reads .parquet" \
        in capsys.readouterr().err
