"""Upgrading from an earlier release and rolling back to it (review321): which release wrote a data directory, a
rollback's reader opening a directory this release started, and the note on answers an old tick log owes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import serving
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.config import ServiceConfig
from engine.service.data_dir_meta import META_KEYS, WRITTEN_WITH, read_record
from engine.service.pipeline import TickPipeline
from engine.service.release import BEFORE_RECORDS, recorded_release, this_release
from wire_client import Control, push_socket, wait_stats

REPO = Path(__file__).resolve().parents[1]
# a start of a release's own TickPipeline on a data directory, as `serve` opens one: prints the ticks it recovered
START = ("import sys; from engine.service.config import ServiceConfig; from engine.service.pipeline import "
         "TickPipeline; p = TickPipeline(ServiceConfig.from_dict({'log': {'dir': sys.argv[1]}, 'model': "
         "{'threads': 1}})); print(p.data.recovered_ticks); p.data.close()")


def _config(data: Path) -> ServiceConfig:
    return ServiceConfig.from_dict({"log": {"dir": str(data)}, "model": {"threads": 1}})


def _messages(ticks: int, per_message: int = 0) -> list[bytes]:
    """``ticks`` synthetic ticks as wire messages of ``per_message`` ticks (0: all in one)."""
    batch = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(ticks) if ticks else []
    size = per_message or max(len(batch), 1)
    return [encode(batch[first : first + size]) for first in range(0, len(batch), size)]


def _start(data: Path, ticks: int = 0, per_message: int = 0) -> int:
    """One start of this release on ``data`` (``ticks`` synthetic ticks taken, ``per_message`` to a wire message, or
    all in one); returns the ticks it recovered."""
    pipeline = TickPipeline(_config(data))
    recovered = pipeline.data.recovered_ticks
    for message in _messages(ticks, per_message):
        assert pipeline.ingest_message(message) == []
    pipeline.data.close()
    return recovered


def _serve(data: Path, ticks: int, per_message: int) -> dict[tuple[str, int], dict]:
    """`serve` of this release on ``data`` (a real Server, the example queries standing) fed ``ticks`` synthetic
    ticks (as ``_messages``) and stopped; returns each answer it published, by (topic, seq), as a gap fill gives it:
    with the fields it was published with (`data_age_ms`, ...), which its answer log keeps too."""
    endpoints = {name: "tcp://127.0.0.1:0" for name in ("ingest", "answers", "control")}
    config = ServiceConfig.from_dict({"log": {"dir": str(data)}, "model": {"threads": 1}, "endpoints": endpoints,
                                      "queries": str(REPO / "queries" / "examples" / "tick_model.yaml")})
    with serving(config) as server:
        control, push = Control(server.endpoints["control"]), push_socket(server.endpoints["ingest"])
        try:
            for message in _messages(ticks, per_message):
                push.send(message)
            wait_stats(control, lambda stats: stats["ticks_in"] == ticks and not stats["pending_tokens"]
                       and stats["answers_out"], timeout_s=120)
            return {(answer["topic"], answer["seq"]): answer for topic in control.ok("topics")["topics"]
                    for answer in control.ok("answers", topic=topic, after=0)["answers"]}
        finally:
            control.close()
            push.close()


def _kept_after_a_start(data: Path) -> dict[tuple[str, int], dict]:
    """The answers a start of this release on ``data`` holds for gap fills, by (topic, seq)."""
    pipeline = TickPipeline(_config(data))
    kept = {(answer["topic"], answer["seq"]): answer for topic in pipeline.cache.seqs()
            for answer in pipeline.history.after(topic, 0, 10**6)[0]}
    pipeline.data.close()
    return kept


def _release_tree(tmp_path: Path, commit: str) -> Path:
    """The code of release ``commit`` (git archive of this checkout's history; a second, offline), or a skip."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the earlier releases' code is not at hand")
    if subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{commit}^{{commit}}"],
                      capture_output=True).returncode:
        pytest.skip(f"this checkout does not hold release commit {commit} (a shallow clone?)")
    tree = tmp_path / f"release-{commit}"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "engine", "connectors", "queries",
                              "flashtick_kernels"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def _start_release(tree: Path, data: Path) -> subprocess.CompletedProcess:
    # a real process (not tests/forked_cli.py's): it imports the release's own code, from its tree
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "PYTHONDONTWRITEBYTECODE": "1",
           "XDG_STATE_HOME": str(data.parent / "state")}
    return subprocess.run([sys.executable, "-c", START, str(data)], capture_output=True, text=True, env=env,
                          cwd=data.parent, timeout=600)


@pytest.mark.parametrize("commit, per_message", [("1df3e5d2", 0), ("6cc221dd", 1)])
def test_an_earlier_release_opens_a_directory_this_release_served(tmp_path, capsys, commit: str,
                                                                   per_message: int) -> None:
    """review321 #3: one start of the new release added dtype, linear_weights and settings to meta.json, and the
    release before it, which refuses any key it does not write itself, refused the directory as "written by another
    model" on a rollback. meta.json now keeps the keys every release compares; the rest is in written_with.json, so
    an earlier release (its own code, from this checkout's history) opens the directory and recovers its ticks, and
    this release opens it again after it. 6cc221dd cannot read the end record a message of several ticks leaves in
    the tick log (a KeyError; docs/upgrading.md): its rollback is tried on a feed of a tick per message.
    review400 #8: the directory had no answers (no query stood), and one where `serve` had published some stopped
    the earlier release (`Answer.__init__() got an unexpected keyword argument 'data_age_ms'`): the fields an answer
    is published with are logged beside its record now, where the earlier release skips them, and this release
    restores them after the rollback as they were published. review400 #4: the start after the earlier release
    said it had stopped uncleanly (a crash, to a log pipeline), since it marks no clean stop: said as not known."""
    data = tmp_path / "data"
    published = _serve(data, ticks=40, per_message=per_message)
    assert published and all("data_age_ms" in answer for answer in published.values())
    assert set(json.loads((data / "meta.json").read_text())) <= META_KEYS
    run = _start_release(_release_tree(tmp_path, commit), data)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-1] == "40", run.stdout
    capsys.readouterr()
    kept = _kept_after_a_start(data)
    assert {key: kept.get(key) for key in published} == published
    said = capsys.readouterr().err
    assert "names no release in the data directory's lock" in said and "unclean stop" not in said, said
    assert set(json.loads((data / "meta.json").read_text())) <= META_KEYS  # (1df3e5d2's keys moved out again)


def test_meta_json_keeps_the_keys_earlier_releases_compare(tmp_path, capsys) -> None:
    """The format contract behind the rollback, without the earlier releases' code: meta.json holds only the model,
    weights and codec (what 6cc221dd wrote); the precision, settings and this release are in written_with.json.
    A directory whose meta.json holds the moved keys (written by a 0.1.0 build of 2026-12-05) is split at the next
    start, keeping their values, and told the release that last opened it."""
    data = tmp_path / "data"
    _start(data)
    meta, beside = (json.loads((data / name).read_text()) for name in ("meta.json", WRITTEN_WITH))
    assert set(meta) == {"model", "codec", "weights"}
    assert {"dtype", "linear_weights", "settings"} <= set(beside)
    assert beside["release"] == this_release().record()
    assert read_record(data / "meta.json") == meta | beside

    (data / "meta.json").write_text(json.dumps(meta | {"dtype": beside["dtype"], "linear_weights": "torch",
                                                       "settings": beside["settings"]}))  # as 1df3e5d2 writes it
    capsys.readouterr()
    _start(data)
    said = capsys.readouterr().err
    assert json.loads((data / "meta.json").read_text()) == meta
    assert json.loads((data / WRITTEN_WITH).read_text())["linear_weights"] == beside["linear_weights"]
    assert "its logged answers were computed under model.weights torch" in said  # (1df3e5d2's value was the last)
    assert f"was last opened by {BEFORE_RECORDS}; this is flashtick {this_release()}" in said
    _start(data)
    assert "note" not in capsys.readouterr().err  # recorded: said once


def test_an_old_tick_log_without_the_linears_format_is_told_its_answers_may_differ_at_rounding(tmp_path,
                                                                                               capsys) -> None:
    """review321 #9: a tick log of 6cc221dd (its meta.json without `linear_weights`) restarted under this release
    owed answers that differed at float rounding from the ones that release published, and nothing said so, where
    durability.md promises a note on such a change. The start now says it, once."""
    data = tmp_path / "data"
    _start(data, ticks=20)
    meta = json.loads((data / "meta.json").read_text())
    (data / WRITTEN_WITH).unlink()  # what 6cc221dd leaves: meta.json alone, no dtype, linears' format or release
    capsys.readouterr()
    assert _start(data) == 20
    said = capsys.readouterr().err
    assert (f"note: data directory {data} was written by {BEFORE_RECORDS}, which did not record the format its "
            f"linears computed in: answers after the restart (those it owes included) may differ from the ones it "
            f"published at float rounding") in said
    assert json.loads((data / "meta.json").read_text()) == meta
    _start(data)
    assert "float rounding" not in capsys.readouterr().err


def test_the_release_names_its_version_and_commit(capsys) -> None:
    """review321 #5: three releases all said `flashtick 0.1.0`. The version is pyproject.toml's (an editable
    install's metadata keeps the one it was installed at) and, in a checkout, the commit follows it; `--version`
    says both, and a record names them as a refusal or a note does. (`--version` in this process: a forked CLI
    child ran this checkout's code too, and its zygote, started for this one line, cost ~2 s of CPU.)"""
    import tomllib

    from engine.service.cli import main

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert this_release().version == version != "0.1.0"
    if (REPO / ".git").exists() and shutil.which("git"):
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
        assert this_release().commit == head.stdout.strip()
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    line = capsys.readouterr().out
    commit = f"git {this_release().short_commit}, " if this_release().commit else ""
    assert line.startswith(f"flashtick {version} ({commit}torch ")
    assert recorded_release({"version": "0.2.0", "commit": "ab" * 20}) == "0.2.0 (git abababab)"
    assert recorded_release(None) == recorded_release("junk") == BEFORE_RECORDS
