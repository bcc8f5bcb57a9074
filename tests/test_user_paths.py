"""Paths as a scheduler passes them (review337 #1, #6, #7, #10, #14): a `~` unexpanded by any shell is the home
folder in every path option and positional file of every command, never a literal `./~` folder; a config or replay
list reached through a link reads its relative paths from beside the file itself; a path in an error is quoted as a
shell takes it back, and a missing file is said in one wording by every command. Real files, the real CLI."""

from __future__ import annotations

import argparse
import io
import os
import shlex
import sys
import threading
from pathlib import Path

import polars as pl
import pytest

from conftest import drain, engine_dir
from engine.path_words import user_path
from engine.service.cli import main
from engine.service.cli_parser import build_parser, subcommands

QUERIES = "queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, trigger: {ticks: 5}}\n"


def trades_csv(path: Path, symbol: str = "AAA", rows: int = 60) -> Path:
    lines = ["ts,symbol,price,size"] + [f"{1_700_000_000_000 + i * 100},{symbol},{100 + (i * 7 % 5) * 0.01:.2f},"
                                        f"{1 + i % 3}" for i in range(rows)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


# the tests share the module's checkpoint and queries (engine_files), which they only read:
# `--dist loadgroup` keeps them on one worker, which builds it once
pytestmark = pytest.mark.xdist_group("test_user_paths")


@pytest.fixture(scope="module")
def engine_files(tmp_path_factory) -> Path:
    return engine_dir(tmp_path_factory.mktemp("cfg dir"), QUERIES)


@pytest.fixture
def home(tmp_path: Path, monkeypatch) -> Path:
    """A home folder of the test's own (`~`), and a job folder as the working directory."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "job").mkdir()
    monkeypatch.chdir(tmp_path / "job")
    return home


def test_every_path_argument_of_every_command_expands_a_tilde() -> None:
    """No path option or positional file is parsed as a plain Path, which keeps `~` literal: each goes through
    user_path, so a command added later with `type=Path` fails here."""
    def actions(parser: argparse.ArgumentParser):
        for action in parser._actions:  # noqa: SLF001 - argparse's own
            yield action
            for command in (action.choices or {}).values() if isinstance(action, argparse._SubParsersAction) else ():
                yield from actions(command)

    plain = [(action.dest, action.option_strings) for action in actions(build_parser()) if action.type is Path]
    assert plain == [], plain
    assert set(subcommands(build_parser())) >= {"backtest", "train", "evaluate", "serve", "feed", "ticklog"}


def test_backtest_with_every_path_under_a_tilde_writes_in_the_home_folder(engine_files: Path, home: Path,
                                                                           capsys) -> None:
    """`backtest '~/ticks/a.csv' --out '~/out/a.parquet' --config '~/cfg/engine.yaml' --queries '~/cfg/q.yaml'`,
    as a job runner passes it: read and written under the home folder; no `~` folder in the working directory (the
    review's run left `./~/r337out/a.parquet.parts/lock` and failed "vanished", also with --resume)."""
    trades_csv(home / "ticks" / "a.csv")
    (home / "cfg").mkdir()
    (home / "cfg" / "engine.yaml").write_text((engine_files / "engine.yaml").read_text())
    (home / "cfg" / "q.yaml").write_text(QUERIES)
    argv = ["backtest", "~/ticks/a.csv", "--out", "~/out/a.parquet", "--config", "~/cfg/engine.yaml",
            "--queries", "~/cfg/q.yaml", "--quiet"]
    assert main(argv) == 0, capsys.readouterr().err
    assert "replayed 60 ticks" in capsys.readouterr().out
    assert pl.read_parquet(home / "out" / "a.parquet").height > 0
    assert not Path("~").exists() and list(Path.cwd().iterdir()) == []
    main([*argv, "--resume"])  # (what a re-run exits with is another rule's: only where it looked matters here)
    assert not Path("~").exists()


def test_ticklog_export_and_train_take_a_tilde_too(home: Path, capsys) -> None:
    """`ticklog export '~/state' --out '~/x.csv'` and `train '~/ticks/a.csv'`: the home folder's paths, said
    expanded in their errors (no such data directory, no such file), and nothing made in the working directory."""
    (home / "state").mkdir()
    assert main(["ticklog", "export", "~/state", "--out", "~/x.csv"]) == 2
    err = capsys.readouterr().err
    assert str(home / "state") in err and "~" not in err, err
    assert main(["train", "~/ticks/none.csv", "--out", "~/model", "--steps", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"replay file not found: {home / 'ticks' / 'none.csv'}" in err, err
    assert not Path("~").exists() and not (home / "model").exists()


def test_an_input_that_cannot_be_read_is_said_in_one_wording_with_what_to_do(tmp_path: Path) -> None:
    """review442 #2, #5: a data or queries file this user may not read said `[Errno 13] Permission denied: 'x'` (a
    config `cannot read: permission denied`), and a queries file that is a folder was "not found" by `register`.
    Every input now says `PATH: cannot read: REASON (what to do)`. (The permission's refusal is built as the OS
    raises it: these tests may run as root, which reads any file.)"""
    import errno

    from engine.path_words import NotRead
    from engine.service.cmd_queries import _queries_text
    from engine.service.config_document import read_document
    from queries.yaml_loader import read_queries_file

    denied = PermissionError(errno.EACCES, "Permission denied", "my data/noread.csv")
    assert str(NotRead("my data/noread.csv", denied)) == (
        "'my data/noread.csv': cannot read: permission denied (this user may not read it; give a copy this user can "
        "read, or have its owner `chmod a+r` it)")
    folder = tmp_path / "dir.yaml"
    folder.mkdir()
    for read, what in ((_queries_text, ""), (read_document, ""), (read_queries_file, " query file")):
        with pytest.raises(Exception) as refused:
            read(folder)
        assert str(refused.value) == f"{folder}: cannot read{what}: is a directory (give a file)", read


def test_a_linked_config_reads_its_paths_from_beside_the_file_itself(engine_files: Path, tmp_path: Path,
                                                                     monkeypatch, capsys) -> None:
    """configs kept in one folder, linked into each job's: `queries: q/dir.yaml` is read from the config file's
    folder, not from the link's (review337 #6: "cannot read query file: [Errno 2] ... 'q/dir5.yaml'")."""
    kept = tmp_path / "cfg dir"
    (kept / "q").mkdir(parents=True)
    (kept / "q" / "dir.yaml").write_text(QUERIES)
    (kept / "engine.yaml").write_text((engine_files / "engine.yaml").read_text() + "queries: q/dir.yaml\n")
    data = trades_csv(tmp_path / "data 株" / "AAA.csv")
    job = tmp_path / "job"
    job.mkdir()
    (job / "link.yaml").symlink_to(kept / "engine.yaml")
    monkeypatch.chdir(job)
    assert main(["backtest", str(data), "--config", "link.yaml", "--out", "a.parquet", "--quiet"]) == 0, \
        capsys.readouterr().err
    assert set(pl.read_parquet(job / "a.parquet")["query"]) == {"dir20"}

    # a replay list linked the same way: its `data 株/*.csv` from the list's own folder
    (tmp_path / "list.yaml").write_text("replay:\n  - {path: 'data 株/*.csv'}\n")
    (job / "list-link.yaml").symlink_to(tmp_path / "list.yaml")
    assert main(["backtest", "list-link.yaml", "--config", "link.yaml", "--out", "b.parquet", "--quiet"]) == 0, \
        capsys.readouterr().err
    assert "replayed 60 ticks" in capsys.readouterr().out

    # the config's queries file gone: named in full, with the folder it was read from, in words
    (kept / "q" / "dir.yaml").unlink()
    assert main(["backtest", str(data), "--config", "link.yaml", "--out", "c.parquet", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"queries file not found: {shlex.quote(str(kept / 'q' / 'dir.yaml'))}" in err, err
    assert f"read from the config file's own folder {shlex.quote(str(kept))}" in err and "Errno" not in err, err


@pytest.mark.parametrize("argv, what", [
    (["backtest", "{missing}", "--out", "a.parquet"], "replay file"),
    (["feed", "replay", "{missing}", "--control", ""], "replay file"),
    (["train", "{missing}", "--out", "m"], "replay file"),
    (["evaluate", "builtin", "{missing}"], "replay file"),
    (["streams", "--config", "{missing}"], "config file"),
    (["backtest", "{here}", "--out", "a.parquet", "--queries", "{missing}"], "queries file"),
])
def test_a_missing_file_is_said_alike_by_every_command_quoted_as_a_shell_takes_it(argv: list[str], what: str,
                                                                                   tmp_path: Path, monkeypatch,
                                                                                   capsys) -> None:
    """One wording, `WHAT not found: PATH`, for a log rule to key on (review337 #14: three wordings), the path quoted
    shell-style so that a name with a space pastes back whole (#10)."""
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "Börse Frankfurt" / "nope 1.csv"
    here = trades_csv(tmp_path / "a.csv")
    argv = [a.format(missing=missing, here=here) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"error: {what} not found: '{missing}'" in err, err


def test_user_path_expands_a_users_home_and_leaves_an_unknown_user_as_written() -> None:
    assert user_path("~root/x") == Path("~root/x").expanduser()
    assert user_path("~no_such_user_343/x") == Path("~no_such_user_343/x")


def test_a_config_s_environment_references_are_expanded_and_an_unset_one_refused(engine_files: Path, tmp_path: Path,
                                                                                monkeypatch, capsys) -> None:
    """`queries: ${QDIR}/dir.yaml` (review337 #12: read as a folder named `${QDIR}`): the environment's QDIR; unset,
    refused naming the key and the variable; `$${` is a literal `${`."""
    (tmp_path / "q dir").mkdir()
    (tmp_path / "q dir" / "dir.yaml").write_text(QUERIES)
    config = tmp_path / "env.yaml"
    config.write_text((engine_files / "engine.yaml").read_text() + "queries: ${QDIR}/dir.yaml\n")
    data = trades_csv(tmp_path / "AAA.csv")
    argv = ["backtest", str(data), "--config", str(config), "--out", str(tmp_path / "a.parquet"), "--quiet"]
    monkeypatch.setenv("QDIR", str(tmp_path / "q dir"))
    assert main(argv) == 0, capsys.readouterr().err
    assert set(pl.read_parquet(tmp_path / "a.parquet")["query"]) == {"dir20"}
    capsys.readouterr()
    monkeypatch.delenv("QDIR")
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (f"flashtick backtest: error: {config}: queries: ${{QDIR}} is not set "
                                               f"in the environment (set it, or write $${{ for a literal ${{)")
    config.write_text((engine_files / "engine.yaml").read_text() + "queries: $${QDIR}/dir.yaml\n")
    assert main(argv) == 2
    assert f"queries file not found: {shlex.quote(str(tmp_path / '${QDIR}' / 'dir.yaml'))}" in capsys.readouterr().err


def test_standard_input_and_a_named_pipe_are_replayed_as_files(engine_files: Path, tmp_path: Path, monkeypatch,
                                                               capsys) -> None:
    """`backtest - < ticks.csv` and `backtest ETHUSDT.csv` where that is a FIFO (review337 #9: "replay file not
    found: -", "is a FIFO ... write what it holds to a file"): each copied whole to a temporary file and replayed;
    the FIFO's name still names its stream."""
    data = trades_csv(tmp_path / "a.csv", symbol="AAA")
    argv = ["--config", str(engine_files / "engine.yaml"), "--quiet"]
    with open(data, "rb") as given:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BufferedReader(given)))
        assert main(["backtest", "-", "--out", str(tmp_path / "a.parquet"), *argv]) == 0, capsys.readouterr().err
    out, err = capsys.readouterr()
    assert "replayed 60 ticks" in out and "note: standard input: a stream, read whole" in err, err
    assert set(pl.read_parquet(tmp_path / "a.parquet")["stream"]) == {"AAA"}

    fifo = tmp_path / "ETHUSDT.csv"
    os.mkfifo(fifo)
    lines = data.read_text().replace(",AAA,", ",,").replace("symbol", "venue")  # no symbol: the name names it
    writer = threading.Thread(target=fifo.write_text, args=(lines,))
    writer.start()
    try:
        assert main(["backtest", str(fifo), "--out", str(tmp_path / "b.parquet"), *argv]) == 0, \
            capsys.readouterr().err
    finally:
        if writer.is_alive():  # the command failed before it read the pipe: the writer let go
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        writer.join()
    assert set(pl.read_parquet(tmp_path / "b.parquet")["stream"]) == {"ETHUSDT"}
    assert main(["backtest", "-", "-", "--out", str(tmp_path / "c.parquet"), *argv]) == 2
    assert "- (standard input) given more than once" in capsys.readouterr().err


def test_an_output_path_in_an_error_is_quoted_as_a_shell_takes_it(tmp_path: Path, capsys) -> None:
    """`--out ../models/mon modèle` printed bare split at the space when pasted back (review337 #10)."""
    data = trades_csv(tmp_path / "a.csv")
    (tmp_path / "mon modèle").write_text("a file")
    assert main(["train", str(data), "--out", str(tmp_path / "mon modèle")]) == 2
    assert f"error: --out {shlex.quote(str(tmp_path / 'mon modèle'))} is a file" in capsys.readouterr().err
    (tmp_path / "exp 1").mkdir()
    assert main(["backtest", str(data), "--out", str(tmp_path / "exp 1")]) == 2
    assert f"error: --out '{tmp_path / 'exp 1'}' is a directory" in capsys.readouterr().err


def test_a_config_s_paths_may_start_with_a_tilde(engine_files: Path, home: Path, capsys) -> None:
    """`queries: ~/q/dir.yaml` in a config: the home folder's, as a `~` on the command line is."""
    (home / "q").mkdir()
    (home / "q" / "dir.yaml").write_text(QUERIES)
    (home / "engine.yaml").write_text((engine_files / "engine.yaml").read_text() + "queries: ~/q/dir.yaml\n")
    data = trades_csv(home / "a.csv")
    assert main(["backtest", str(data), "--config", "~/engine.yaml", "--out", "~/a.parquet", "--quiet"]) == 0, \
        capsys.readouterr().err
    assert set(pl.read_parquet(home / "a.parquet")["query"]) == {"dir20"}


def test_the_python_entry_points_expand_a_tilde_as_the_command_line_does(engine_files: Path, home: Path) -> None:
    """`run_backtest(config, "~/ticks/a.csv", "~/cfg/q.yaml", out="~/out/a.parquet")` with the config from
    `ServiceConfig.load("~/cfg/engine.yaml")` and a model given as `from_dict({"model": {"path": "~/..."}})`:
    every path is the home folder's (engine/path_words.py, the CLI's too), never a `./~` folder in the working
    directory; a (path, map) pair's path likewise."""
    from engine.service.backtest import run_backtest
    from engine.service.config import ServiceConfig

    trades_csv(home / "ticks" / "a.csv")
    trades_csv(home / "ticks" / "b.csv", symbol="BBB")
    (home / "cfg").mkdir()
    (home / "cfg" / "engine.yaml").write_text((engine_files / "engine.yaml").read_text())
    (home / "cfg" / "q.yaml").write_text(QUERIES)
    config = ServiceConfig.load("~/cfg/engine.yaml")
    model = Path(config.model.path)
    (home / "model").symlink_to(model, target_is_directory=True)
    assert ServiceConfig.from_dict({"model": {"path": "~/model"}}).model.path == str(home / "model")
    config = ServiceConfig.from_dict({"model": {"path": "~/model"}, "kv": {"cells": 8192, "block_size": 16}})
    report = run_backtest(config, ["~/ticks/a.csv", ("~/ticks/b.csv", None)], "~/cfg/q.yaml", "~/out/a.parquet",
                          progress=False)
    assert report.ticks == 120 and Path(report.out) == home / "out" / "a.parquet"
    assert pl.read_parquet(home / "out" / "a.parquet").height > 0
    assert not Path("~").exists() and list(Path.cwd().iterdir()) == []
    from connectors.replay import FileReplay

    assert {t.stream for t in drain(FileReplay(["~/ticks/b.csv"]))} == {"BBB"}  # a FileReplay of its own alike
    import zmq.auth

    from engine.service.auth import read_keypair, read_public_key

    public_file, _ = zmq.auth.create_certificates(str(home), "client")  # docs/python-clients.md's readers
    assert read_keypair("~/client.key_secret")[0] == read_public_key("~/client.key") == \
        zmq.auth.load_certificate(public_file)[0]


def test_backtest_queries_replace_the_config_s_queries(engine_files: Path, tmp_path: Path, capsys) -> None:
    """`--queries FILE` is asked in place of the config's `queries` (its help: "default: the config's queries"): a
    backtest given both answered both files' queries, and one given neither registered the config's twice."""
    (tmp_path / "config_q.yaml").write_text(QUERIES)
    (tmp_path / "flag_q.yaml").write_text(QUERIES.replace("name: dir20", "name: flagged"))
    config = tmp_path / "engine.yaml"
    config.write_text((engine_files / "engine.yaml").read_text() + f"queries: {tmp_path / 'config_q.yaml'}\n")
    data = trades_csv(tmp_path / "AAA.csv")
    for flags, asked in (([], {"dir20"}), (["--queries", str(tmp_path / "flag_q.yaml")], {"flagged"})):
        out = tmp_path / f"{len(flags)}.parquet"
        assert main(["backtest", str(data), "--config", str(config), "--out", str(out), "--quiet", *flags]) == 0, \
            capsys.readouterr().err
        assert set(pl.read_parquet(out)["query"]) == asked
