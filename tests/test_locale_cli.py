"""The `flashtick` command under a locale that is not UTF-8 (real subprocesses; the service is a real Server on
ephemeral 127.0.0.1 ports). The C locale with Python's UTF-8 mode and locale coercion turned off stands for every
such locale (Latin-1 images, some ssh set-ups): it exists on every host, and its ASCII lacks every name used here.
Beside them, the same kind of host's other surprises: stdout closed at the start, a HOME that cannot be written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest

from engine.service.client import ControlClient
from wire_client import push_socket, trade, wait_until
from wire_server import server  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[1]
# a locale whose encoding is ASCII, as Python sees it: no UTF-8 mode, no coercion to C.UTF-8
ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
NAMES = ("DAX€", "日経225")  # outside ASCII and Latin-1 both


def flashtick(*argv: str, cwd: Path = ROOT, **popen: object) -> subprocess.CompletedProcess:
    # a real process (not tests/forked_cli.py's): its locale, and what Python's start makes of it, is what is tested
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LANGUAGE")}
    env |= ASCII_LOCALE | {"PYTHONPATH": str(ROOT)}
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE} | popen
    return subprocess.run([sys.executable, "-m", "engine.service.cli", *argv], cwd=cwd, env=env, timeout=300,
                          **popen)


def fed(endpoints: dict[str, str]) -> None:
    """The service holds a stream of each of NAMES."""
    push = push_socket(endpoints["ingest"])
    start = time.time_ns() - 10**9 * 3600
    push.send(msgpack.packb([trade(name, start + i * 10**6, price=100.0 + 0.01 * (i % 7))
                             for i in range(20) for name in NAMES]))
    push.close(linger=5000)
    with ControlClient(endpoints["control"], timeout_s=30) as control:
        wait_until(lambda: all(control.call("streams", streams=list(NAMES))["streams"].get(n) for n in NAMES))


# The tests that need no service first: the module's server (wire_server's, its heartbeat every 0.1 s) starts at
# the first test that takes it and idles until the module ends, through each fresh interpreter's start here.


def test_config_column_map_and_the_paths_written_in_them_are_read_as_utf8_whatever_the_locale(tmp_path) -> None:
    """`--config` and `--columns FILE` read their YAML in the locale's encoding: a UTF-8 map's `size: Stück` was
    looked for as `StÃ¼ck` under Latin-1 (and refused: "the file lacks" it), and failed with a codec error under
    ASCII. Read under the ASCII locale in a process of its own, as the CLI reads them.

    A path in a UTF-8 config (`queries: données/q.yaml`) or replay list names the file whose name is its UTF-8
    bytes: read as UTF-8 (as above), Python then encoded `é` in the locale's encoding (under Latin-1 byte 0xe9, a
    file that does not exist; under ASCII not at all). (One process reads all four files: each interpreter's start
    under the locale is what is tested, and one start shows it.)"""
    config = tmp_path / "engine.yaml"
    config.write_text("# Société Générale's desk\nkv: {cells: 4096}\n", encoding="utf-8")
    columns = tmp_path / "map.yaml"
    columns.write_text("ts: Zeit\nstream_col: Symbol\nprice: Kurs\nsize: Stück\n", encoding="utf-8")
    folder = tmp_path / "données"
    folder.mkdir()
    (folder / "q.yaml").write_text("queries: []\n")
    (folder / "équités.csv").write_text("timestamp,symbol,price,size\n2024-06-03 09:30:00,A,1.0,1\n")
    (tmp_path / "paths.yaml").write_text("queries: données/q.yaml\n", encoding="utf-8")
    (tmp_path / "list.yaml").write_text("replay: [{path: données/équités.csv}]\n", encoding="utf-8")
    probe = ("import sys, os; from pathlib import Path; from engine.service.config import ServiceConfig; "
             "from connectors.map_options import load_map_file; from connectors.replay_entries import replay_list; "
             "print(ServiceConfig.load(sys.argv[1]).kv.cells, ascii(load_map_file(sys.argv[2])['size'])); "
             "print(os.path.isfile(ServiceConfig.load(sys.argv[3]).queries), "
             "os.path.isfile(replay_list(Path(sys.argv[4]))[0]['path']))")
    done = subprocess.run([sys.executable, "-c", probe, str(config), str(columns), str(tmp_path / "paths.yaml"),
                           str(tmp_path / "list.yaml")], capture_output=True, cwd=ROOT,
                          env=os.environ | ASCII_LOCALE | {"PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.returncode == 0, done.stderr
    config_line, paths_line = done.stdout.splitlines()
    assert config_line.decode().split() == ["4096", "'St\\xfcck'"]
    assert paths_line.split() == [b"True", b"True"]


def test_a_backtest_reads_and_writes_non_ascii_paths_under_a_non_utf8_locale(tmp_path) -> None:
    """polars encodes the str it is given as UTF-8, while Python decodes a file name in the locale's encoding: an
    input `équités.csv` failed with "Object does not have a .read() method" (Latin-1: "No such file"), an output
    `sortie_é.parquet` with a false "another process removed the folder", leaving its `.parts`. Names go to polars
    as their own bytes now (engine.rust_paths), and print as those bytes."""
    folder = tmp_path / "données"
    folder.mkdir()
    rows = "".join(f"2024-06-03 09:30:{i // 10:02d}.{i % 10}00000,AAPL,{190 + 0.01 * (i % 5):.2f},{1 + i % 9}\n"
                   for i in range(300))
    (folder / "équités.csv").write_text("timestamp,symbol,price,size\n" + rows, encoding="utf-8")
    queries = tmp_path / "q.yaml"
    queries.write_text("queries: [{name: d5, streams: ['*'], question: direction_5, kind: choice,"
                       " trigger: {ticks: 20}}]\n")
    done = flashtick("backtest", str(folder / "équités.csv"), "--queries", str(queries), "--out", "sortie_é.parquet",
                     "--max-ticks", "200", "--threads", "1", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "-> sortie_é.parquet" in done.stdout.decode("utf-8").splitlines()[0]
    written = {p.name for p in tmp_path.iterdir()}
    assert {"sortie_é.parquet", "sortie_é.scores.json", "sortie_é.manifest.json"} <= written
    assert "sortie_é.parquet.parts" not in written


def test_the_calibration_plot_under_an_unwritable_home_says_nothing_of_matplotlib(tmp_path) -> None:
    """With HOME unwritable (a container's read-only home) matplotlib made a temporary config folder and said so in
    a warning of several lines on a backtest's stderr, where every line is `flashtick COMMAND: ...`. It is pointed
    at a private folder of the temp dir instead, kept for the next run's font cache."""
    pytest.importorskip("matplotlib")
    home = tmp_path / "home"
    home.write_text("a file: nothing can be made under it\n")
    probe = ("import sys; from pathlib import Path; from engine.service.calibration_plot import plot_calibration; "
             "print(plot_calibration(Path(sys.argv[1]), {'q': [{'predicted': 0.2, 'observed': 0.3}]}, 't', 'who'))")
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "p.png")], capture_output=True, cwd=ROOT,
                          env=env | {"HOME": str(home), "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)},
                          timeout=300)
    assert done.returncode == 0 and done.stdout == b"True\n"
    assert done.stderr == b""
    assert (tmp_path / f"flashtick-matplotlib-{os.getuid()}").is_dir() and (tmp_path / "p.png").is_file()


def test_client_commands_show_names_their_locale_cannot_encode_instead_of_a_codec_error(server) -> None:  # noqa: F811
    """`streams`, `stats`, `list` exited 2 with "'ascii' codec can't encode characters" and printed nothing, not
    even the streams it could show; `--json` likewise. Text shows such a character as a backslash escape, JSON as a
    JSON escape, so it still parses to the name."""
    fed(server)
    text = flashtick("streams", "--control", server["control"])
    assert text.returncode == 0, text.stderr
    assert b"DAX\\u20ac" in text.stdout and b"\\u65e5\\u7d4c225" in text.stdout
    for command in (["streams", "--json"], ["stats"], ["list", "--json"]):
        done = flashtick(*command, "--control", server["control"])
        assert done.returncode == 0, (command, done.stderr)
        parsed = json.loads(done.stdout)  # ASCII bytes, and valid JSON
        if command[0] == "streams":
            assert set(NAMES) <= set(parsed["streams"])


def test_a_client_command_started_with_stdout_closed_fails_saying_so(server) -> None:  # noqa: F811
    """Started with fd 1 closed (`>&-`, a supervisor's or cron's set-up), `list`, `stats` and `get` exited 0 having
    printed nothing: Python sets sys.stdout to None then, and print() drops what it is given. Now the first write
    fails the command in one line, as coreutils' `cat >&-` does; a closed pipe (`| head -1`) still exits 0."""
    for command in (["list"], ["stats"]):
        done = flashtick(*command, "--control", server["control"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=lambda: os.close(1))
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.decode().splitlines() == [
            f"flashtick {command[0]}: error: cannot write to standard output: it was closed when flashtick started"]


def test_register_reads_a_query_file_as_utf8_whatever_the_locale(server, tmp_path) -> None:  # noqa: F811
    """`register` read the file in the locale's encoding: under Latin-1 `Société` was registered as `SociÃ©tÃ©`
    (exit 0, a query that never answers), under ASCII it failed naming no file. `serve --queries` read it as UTF-8
    already. A file that is not UTF-8 is refused naming it, its line and the conversion."""
    spec = tmp_path / "soc.yaml"
    spec.write_text('queries: [{name: socq, streams: ["Société", "日経*"], question: direction_5, kind: choice,'
                    " trigger: {ticks: 10}}]\n", encoding="utf-8")
    done = flashtick("register", str(spec), "--control", server["control"])
    assert done.returncode == 0, done.stderr
    with ControlClient(server["control"], timeout_s=30) as control:
        listed = {q["name"]: q["streams"] for q in control.call("list")["queries"]}
    assert listed["socq"] == ["Société", "日経*"]
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes("# name\nqueries: [{name: q2, streams: [\"Société\"], question: direction_5}]\n"
                       .encode("latin-1"))
    done = flashtick("register", str(latin1), "--control", server["control"])
    assert done.returncode == 2
    assert done.stderr.decode().startswith(f"flashtick register: error: {latin1}: its text is not UTF-8 (line 2: "
                                           "byte 0xe9), and flashtick reads it as UTF-8 whatever the locale; save "
                                           f"it as UTF-8, e.g. iconv -f cp1252 -t utf-8 {latin1} > ")
