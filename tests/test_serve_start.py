"""What `flashtick serve` says as it starts, read from a real serve process's stderr: where its data lives, which
config it runs, and what of its setup an on-call engineer must know (sockets open to the network, a retention the
disk cannot hold)."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from conftest import tiny_text_checkpoint, tiny_tick_checkpoint
from forked_cli import cli_popen, serve_started, serve_until_serving

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """The tiny tick model every serve here runs (read only: each test has its own config and data directory)."""
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick") / "model")


def test_sockets_other_hosts_reach_without_curve_are_warned_of_at_the_start(tmp_path, checkpoint) -> None:
    """An SRE's review bound every socket to 0.0.0.0 with CURVE off: the service started without a word, while
    anyone reaching the host could register queries and feed ticks. Each such socket is named now, with the way to
    secure it; one on loopback is not."""
    config = tmp_path / "engine.yaml"
    config.write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\nlog: {{enabled: false}}\n"
                      f"endpoints: {{ingest: 'tcp://0.0.0.0:0', answers: 'tcp://127.0.0.1:0', "
                      f"control: 'tcp://0.0.0.0:0', metrics_port: 0, metrics_host: 0.0.0.0}}\n")
    lines = serve_until_serving(["--config", str(config)], cwd=tmp_path)
    open_ones = [line for line in lines if " is reachable from other hosts" in line]
    assert len(open_ones) == 3 and not any("answers socket" in line for line in open_ones), open_ones
    control, ingest = (next(line for line in open_ones if f"the {name} socket tcp://0.0.0.0:" in line)
                       for name in ("control", "ingest"))
    # review207: it named only register and unregister; a stranger could also forget any stream, durably, and read
    # every answer. Every op is said now, from the ops table the control socket dispatches by
    assert "with CURVE off: anyone who reaches it can register queries (replacing any of the same name), unregister " \
           "queries, forget streams (session, cached answers and ordering guard, written to the tick log: a restart " \
           "forgets them too), have questions computed on any stream, and read its queries, cached answers, answers " \
           "published, topics, streams' ticks held, counters and health; set curve.enabled with curve.clients_dir" \
           in control and control.endswith("or bind endpoints.control to 127.0.0.1"), control
    assert "set curve.ingest: true with curve.enabled and curve.clients_dir" in ingest, ingest
    assert any(line.startswith("flashtick: WARNING: the metrics endpoint http://0.0.0.0:") and "plain HTTP" in line
               for line in open_ones), open_ones


def test_the_ops_table_the_exposure_warning_reads_holds_every_op_the_control_socket_serves() -> None:
    """The warning of an exposed control socket says what each op of CONTROL_OPS lets a stranger do: an op served
    (a handler ``_op_NAME``) that the table missed would go unsaid there."""
    from engine.service.control_requests import CONTROL_OPS, what_control_clients_can_do
    from engine.service.server import Server

    assert {name.removeprefix("_op_") for name in dir(Server) if name.startswith("_op_")} == set(CONTROL_OPS)
    said = what_control_clients_can_do()
    assert all(op.does in said and op.effect in ("changes", "computes", "reads") for op in CONTROL_OPS.values())


def test_serve_names_its_config_and_data_directory_and_warns_of_a_retention_past_the_disk(tmp_path, checkpoint) -> None:
    """An SRE's review: the first line came only after the imports (13-23 s under load), the data directory was
    named as the config wrote it (relative to the config file, not to the working directory) and the config file
    never; a retention larger than the disk was taken silently; the window in effect was not said. Now each is
    said at the start."""
    site = tmp_path / "site"
    site.mkdir()
    config = site / "engine.yaml"
    config.write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\n"
                      f"scheduler: {{window: 256}}\n"
                      f"log: {{dir: data, retention_bytes: {10**15}}}\n"  # a petabyte: past any test machine's disk
                      f"endpoints: {{ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', "
                      f"control: 'tcp://127.0.0.1:0', metrics_port: 0}}\n")
    lines = serve_until_serving(["--config", "site/engine.yaml"], cwd=tmp_path)
    assert lines[0].startswith("flashtick ") and lines[0].endswith(f" starting ({lines[-1]}, config {config})"), lines
    data = site / "data"  # beside the config file, said in full, with the key it came from
    assert f"flashtick: INFO: logging accepted ticks and published answers in {data} (log.dir; --no-log to keep " \
           f"nothing)" in lines, lines
    assert any(line.startswith(f"flashtick: WARNING: log.retention_bytes 953,674,316.4 MiB + "
                               f"log.answers_retention_bytes 256.0 MiB exceed the size of the filesystem holding "
                               f"{data} (") for line in lines), lines
    pool = [line for line in lines if "KV pool" in line]
    assert len(pool) == 1 and "; each session's window: 256 tokens (scheduler.window); it holds " in pool[0], pool
    assert not any("reachable from other hosts" in line for line in lines), lines  # loopback: nothing to warn of


def test_a_data_directory_given_by_data_dir_is_named_as_the_option_in_its_errors(tmp_path, checkpoint) -> None:
    """`--data-dir` on a file (or a read-only filesystem) was reported as `log.dir ...`, a key the operator had not
    set."""
    config = tmp_path / "engine.yaml"
    config.write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\n"
                      f"endpoints: {{ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', "
                      f"control: 'tcp://127.0.0.1:0'}}\n")
    (tmp_path / "afile").write_text("not a directory\n")
    process, lines = serve_started(["--config", str(config), "--data-dir", str(tmp_path / "afile")], cwd=tmp_path)
    try:
        assert process.wait(timeout=60) == 2
    finally:
        process.kill()
        process.wait()
    assert lines[0].endswith(f" starting (pid {process.pid}, config {config})"), lines
    assert lines[-1].startswith(f"flashtick serve: ERROR: --data-dir {tmp_path / 'afile'}: "), lines


def test_a_data_directory_from_the_default_or_a_full_data_dir_is_named_as_it_came_in_its_errors() -> None:
    """review442 #8: a full --data-dir (exit 7) and a read-only default data directory said `log.dir ...`, a key
    neither config set; the default's error did not say the ways around it either."""
    import argparse

    from engine.service.cmd_serve import _data_dir_key, _data_dir_named, default_data_dir
    from engine.service.config import ConfigError, ServiceConfig
    from engine.service.data_dir_open import DataDirFull

    config = ServiceConfig()
    default = str(default_data_dir(config.model.model_id))
    config = dataclasses.replace(config, log=dataclasses.replace(config.log, dir=default))
    assert _data_dir_key(argparse.Namespace(data_dir=None), config) == "the default"
    full = _data_dir_named(DataDirFull("log.dir /full: a 4,096-byte write failed ...: free space there (or move "
                                       "log.dir, lower log.retention_bytes)"), "--data-dir")
    assert type(full) is DataDirFull and str(full) == ("--data-dir /full: a 4,096-byte write failed ...: free space "
                                                       "there (or move --data-dir, lower log.retention_bytes)")
    read_only = _data_dir_named(ConfigError(f"log.dir {default}: Read-only file system (a data directory must be a "
                                            f"writable directory)"), "the default")
    assert type(read_only) is ConfigError and str(read_only) == (
        f"the default data directory {default}: Read-only file system (a data directory must be a writable "
        f"directory); --data-dir DIR keeps it elsewhere, --no-log keeps nothing")
    config_set = ConfigError("log.dir /ro: Read-only file system")
    assert _data_dir_named(config_set, "log.dir") is config_set


def test_a_stop_signal_while_the_tick_log_replays_exits_0_and_leaves_the_log_as_it_was(tmp_path, checkpoint) -> None:
    """An SRE's review (review189 #4): SIGTERM while serving exits 0, but SIGTERM while `serve` replayed its tick log
    re-raised the signal (rc 143, `Terminated`), which a supervisor checking for 0 flags. A stop signal during the
    start is now a clean exit, 0, with a line that says so and which signal; the log is left as it was, and the
    next start recovers every tick."""
    from connectors.synthetic import SyntheticConfig, SyntheticMarket
    from connectors.ticks import encode
    from engine.service.client import ControlClient
    from engine.service.config import ServiceConfig
    from engine.service.pipeline import TickPipeline
    from test_durability import free_port

    control = f"tcp://127.0.0.1:{free_port()}"  # fixed: `health` is asked while it starts, before any line names it
    config = tmp_path / "engine.yaml"
    config.write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\nlog: {{dir: data}}\n"
                      f"endpoints: {{ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', "
                      f"control: '{control}'}}\n")
    # a log long enough that its replay takes a while (8,000 ticks: ~0.3 s of CPU, over a dozen of the 20 ms
    # between two `health` asks, seconds on a loaded machine; logging them here costs three times that: 20,000 were
    # ~2.4 s of it)
    logging = TickPipeline(ServiceConfig.load(config))
    ticks = SyntheticMarket(SyntheticConfig(seed=13)).next_batch(8_000)
    for i in range(0, len(ticks), 500):
        assert logging.ingest_message(encode(ticks[i : i + 500])) == []
    logging.close()
    logged = {path.name: path.read_bytes() for path in (tmp_path / "data" / "ticks").iterdir()}
    process = cli_popen(["serve", "--config", str(config)], stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        # (its imports may take longer than the default 10 s for a connection on a loaded machine)
        with ControlClient(control, timeout_s=120, connect_timeout_s=120) as client:
            while not client.call("health").get("phase", "").startswith("replaying the tick log"):
                assert process.poll() is None
                time.sleep(0.02)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        lines = process.stderr.read().splitlines()
    finally:
        process.kill()
        process.wait()
    assert lines[-1] == ("flashtick: INFO: stopped while starting (SIGTERM); nothing accepted is lost: the tick log "
                         "holds it, and the next start replays it and computes what is owed"), lines
    assert not any("Traceback" in line for line in lines), lines
    assert {path.name: path.read_bytes() for path in (tmp_path / "data" / "ticks").iterdir()} == logged
    recovered = [line for line in serve_until_serving(["--config", str(config)], cwd=tmp_path)
                 if line.startswith("flashtick: INFO: recovered ")]
    assert recovered and recovered[0].startswith("flashtick: INFO: recovered 8,000 ticks of "), recovered


def test_a_start_failing_after_its_stop_signal_was_swallowed_exits_as_the_stop(monkeypatch, capsys) -> None:
    """review442 #7: a Ctrl-C or SIGTERM in serve's first second raised StoppedWhileStarting inside numpy's import,
    which swallowed it and left numpy half-imported; the next use of numpy failed (`module 'numpy' has no attribute
    'logical_or'`) and serve exited 2 with that error, as for a broken install. Any failure of the start once a stop
    signal came is now the stop: exit 0, `stopped while starting`. The start here is a stand-in for that import (a
    real one cannot be stopped at that bytecode on purpose)."""
    import argparse

    from engine.service import cmd_serve

    def start_in_an_import_that_swallows_the_stop(_args: argparse.Namespace, _stopping: object) -> None:
        try:
            signal.raise_signal(signal.SIGTERM)
        except BaseException:  # as numpy's import did with the handler's raise
            pass
        raise AttributeError("module 'numpy' has no attribute 'logical_or'")

    monkeypatch.setattr(cmd_serve, "_start", start_in_an_import_that_swallows_the_stop)
    handlers = {signum: signal.getsignal(signum) for signum in cmd_serve.STOP_SIGNALS}
    try:
        assert cmd_serve._started(argparse.Namespace()) is None
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert capsys.readouterr().err.startswith("flashtick: stopped while starting (SIGTERM); nothing was accepted")


def test_a_query_taken_out_of_the_queries_file_and_still_served_is_named_at_the_start(tmp_path, checkpoint) -> None:
    """An SRE's review (review189 #4): a query taken out of the config's `queries:` file was still served after a
    restart (the data directory keeps every registration; the file is applied on top, as documented), and the start
    said only `restored 2 queries`. It now names each query it serves that the file does not list, and how to stop
    it."""
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n"
                       "  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, trigger: batch}\n"
                       "  - {name: dir5, streams: ['*'], question: direction_5, kind: choice, trigger: batch}\n")
    config = tmp_path / "engine.yaml"
    config.write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\nlog: {{dir: data}}\n"
                      f"queries: {queries}\nendpoints: {{ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', "
                      f"control: 'tcp://127.0.0.1:0'}}\n")
    first = serve_until_serving(["--config", str(config)], cwd=tmp_path)
    assert not any(" kept in the data directory " in line for line in first), first
    queries.write_text("queries:\n"
                       "  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, trigger: batch}\n")
    again = serve_until_serving(["--config", str(config)], cwd=tmp_path)
    kept = [line for line in again if " kept in the data directory " in line]
    assert kept == [f"flashtick: INFO: 1 query kept in the data directory (queries.yaml: listed by an earlier queries "
                    f"file, taken out of it since) and not in {queries}: \"dir5\": still served, as a start applies "
                    f"its queries file on top of what was kept (to stop one: flashtick unregister NAME)"], again


def _starts(tmp_path: Path, checkpoint: Path) -> Callable[[str, str], list[str]]:
    """Starts of a service on one data directory, ``model_keys`` added to its model section and ``sections`` (YAML
    lines) to its config: the notes each start says."""
    config = tmp_path / "engine.yaml"

    def start(model_keys: str = "", sections: str = "") -> list[str]:
        config.write_text(f"model: {{path: {checkpoint}{model_keys}}}\nkv: {{cells: 8192, block_size: 16}}\n"
                          f"log: {{dir: data}}\nendpoints: {{ingest: 'tcp://127.0.0.1:0', "
                          f"answers: 'tcp://127.0.0.1:0', control: 'tcp://127.0.0.1:0'}}\n{sections}")
        return [line for line in serve_until_serving(["--config", str(config)], cwd=tmp_path)
                if "its logged answers were computed under" in line]

    return start


def test_restarts_under_another_window_weights_format_answer_setting_or_dtype_note_each_change_once(
        tmp_path, checkpoint) -> None:
    """One data directory restarted under each setting that changes the answers, in turn (each start's setting is
    the next one's "before"):

    meta.json recorded `scheduler.window` as written: a restart that wrote out the number null resolves to (the
    tiny model's 1,024 positions, which the pool holds) noted a change of "null" to 1024, though every answer is
    computed alike. The window is recorded as the engine resolves it: the same effective window notes nothing.

    A restart with another `model.weights` (the linears' format: bf16 GEMMs, plain nn.Linear) changed the answers'
    rounding without a word: meta.json recorded `model.dtype`, noted when it changed, but not the linears' format.
    It now records the format the linears compute in and notes its change the same way (null and its dtype's
    format are one and the same: no note between them).

    review206 #3: a restart on the same data directory under `answers.adapt: off` and `scheduler.keep_fraction:
    0.25` was taken without a word (meta.json recorded the model's precision, not these), so a subscriber's history
    mixed answers of two configurations under one epoch. meta.json now records every setting of
    answer_settings.ANSWER_SETTINGS, and a start under another value of one notes it, old -> new, as model.dtype's;
    the next start under the same says nothing.

    An SRE's review (review189 #4): a restart on the same data directory with `model.dtype: bfloat16`, its logs
    written in float32, was taken without a word (meta.json did not record the dtype), so answers after it came at
    another precision than the logged ones. The start now says so, and records the new dtype (the next start says
    nothing)."""
    from engine.models.linear import resolve_format
    from engine.service.data_dir_meta import read_record

    start = _starts(tmp_path, checkpoint)
    data = tmp_path / "data"

    # the window: null, then the number it resolves to, then null again, note nothing
    assert start() == []
    assert read_record(data / "meta.json")["settings"]["scheduler.window"] == 1024
    assert start(sections="scheduler: {window: 1024}\n") == []
    assert start(", weights: null") == []  # (the window null again; the weights' first format)

    # the weights: null, float32 and the format float32 computes as on this CPU are one; torch is noted once
    here = resolve_format("float32")  # float32-onednn or float32-mkl
    assert start(", weights: float32") == []  # (what null gives a float32 model)
    assert start(f", weights: {here}") == []  # (review218 #4: the same format named concretely was noted as a change)
    assert start(", weights: torch") == [
        f"flashtick: INFO: data directory {data}: its logged answers were computed under model.weights "
        f"{here}, this start computes under torch: answers after the restart (those it owes included) may differ "
        f"from the logged ones by the linears' rounding (their weight format, engine/models/linear.py)"]
    assert start(", weights: torch") == []

    # answers.adapt, scheduler.window and scheduler.keep_fraction changed at once: each is named
    changed = "answers: {adapt: 'off'}\nscheduler: {keep_fraction: 0.25, window: 256}\n"
    noted = start(", weights: torch", sections=changed)
    said = "answers after the restart (those it owes included) may differ from the logged ones by"
    rolls = ("where sessions roll and how much context an answer sees (the logged ticks rebuild them under the new "
             "value)")
    assert noted == [
        f"flashtick: INFO: data directory {data}: its logged answers were computed under answers.adapt online, "
        f"this start computes under off: {said} the adaptation: whether the published probs mix in each stream's "
        f"realised class frequencies",
        f"flashtick: INFO: data directory {data}: its logged answers were computed under scheduler.window 1024, this "
        f"start computes under 256: {said} {rolls}",
        f"flashtick: INFO: data directory {data}: its logged answers were computed under scheduler.keep_fraction 0.5, "
        f"this start computes under 0.25: {said} {rolls}"], noted
    # the same again, model.dtype float32 (the dtype it ran at) written out: nothing
    assert start(", weights: torch, dtype: float32", sections=changed) == []
    assert read_record(data / "meta.json")["settings"]["answers.adapt"] == "off"

    # the dtype: bfloat16 after float32 is noted once
    assert start(", weights: torch, dtype: bfloat16", sections=changed) == [
        f"flashtick: INFO: data directory {data}: its logged answers were computed under model.dtype "
        f"float32, this start computes under bfloat16: answers after the restart (those it owes included) may differ "
        f"from the logged ones by that precision's rounding"]
    assert start(", weights: torch, dtype: bfloat16", sections=changed) == []


@pytest.mark.parametrize("case", ["built-in model", "binned checkpoint", "text model, empty template"])
def test_a_codec_template_that_would_do_nothing_is_refused_by_its_name(tmp_path, checkpoint, case: str) -> None:
    """review261 #2: `codec.trade_template` / `quote_template` under the built-in model (binned codec) were taken
    and never read, so a user believed them in effect; and a text model's empty template (no newline) was swapped
    for the default without a word. Both are refused now, naming the key."""
    model, codec = "", "codec: {trade_template: 'T {price}'}"
    if case == "binned checkpoint":
        model = f"model: {{path: {checkpoint}}}\n"
        codec = "codec: {kind: binned, quote_template: 'Q {bid}', trade_template: 'T {price}\\n'}"
    elif case == "text model, empty template":
        model = f"model: {{path: {tiny_text_checkpoint(tmp_path / 'model')}}}\n"
        codec = "codec: {trade_template: ''}"
    config = tmp_path / "engine.yaml"
    config.write_text(f"{model}kv: {{cells: 8192, block_size: 16}}\nlog: {{enabled: false}}\n{codec}\n"
                      f"endpoints: {{ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', "
                      f"control: 'tcp://127.0.0.1:0'}}\n")
    process, lines = serve_started(["--config", str(config)], cwd=tmp_path)
    try:
        assert not lines[-1].startswith("flashtick serving"), lines
        assert process.wait(timeout=60) == 2
    finally:
        process.kill()
        process.wait()
    refused = {
        "built-in model": "codec.trade_template applies only to the text codec (a Hugging Face model's); this "
                          "model's codec is binned (codec.kind auto, for the built-in model or a checkpoint with "
                          "codec.json), which reads no template: remove it, or serve a text model (--model DIR)",
        "binned checkpoint": "codec.trade_template and codec.quote_template apply only to the text codec (a "
                             "Hugging Face model's); this model's codec is binned (codec.kind: binned), which reads "
                             "no template: remove it, or serve a text model (--model DIR)",
        "text model, empty template": "trade_template must end with a newline so lines stay separate, got \"\""}
    assert lines[-1] == f"flashtick serve: ERROR: {refused[case]}", lines
