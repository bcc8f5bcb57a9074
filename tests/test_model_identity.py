"""Which model made an answer (review349 #1-#3): a full SHA-256 of every file of a checkpoint that moves an answer,
checked by a backtest's --resume, recorded in its answers file, compared by a serve restart on its data directory,
and published with every answer. Real checkpoints, real files, a real `flashtick serve` process (forked warm:
tests/forked_cli.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

from conftest import engine_dir, tiny_tick_checkpoint
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.models import BUILTIN_MODEL_DIR
from engine.service.run_record import without_file_times
from engine.service.backtest import BacktestInterrupted, run_backtest
from engine.service.cli import main
from engine.service.config import ServiceConfig
from engine.service.model_digest import model_digest

QUERIES = """
queries:
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: {ticks: 5}}
"""


def calibration(temperature: float) -> str:
    """A calibration.json for the tick codec's direction_20 (the built-in model's entry, its temperature set)."""
    builtin = json.loads((BUILTIN_MODEL_DIR / "calibration.json").read_text())
    entry = builtin["questions"]["direction_20"] | {"temperature": temperature}
    return json.dumps({"format": builtin["format"], "source": "test", "questions": {"direction_20": entry}})


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Path:
    root = engine_dir(tmp_path_factory.mktemp("identity"), QUERIES, cells=16384)
    (root / "model" / "calibration.json").write_text(calibration(1.0))
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(600)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "ticks.parquet")
    return root


def test_the_digest_covers_every_byte_of_every_answer_file_and_no_report(tmp_path: Path) -> None:
    """The sampled fingerprint read a weights file's first and last MiB only, and no calibration or answer head."""
    model = shutil.copytree(BUILTIN_MODEL_DIR, tmp_path / "m")
    first = model_digest(model)
    weights = (model / "model.safetensors").read_bytes()
    assert first.files["model.safetensors"] == hashlib.sha256(weights).hexdigest()  # what sha256sum prints
    assert set(first.files) == {"calibration.json", "codec.json", "config.json", "model.safetensors"}

    (model / "TRAINING.md").write_text("rewritten report")  # a report is no part of the model
    assert model_digest(model) == first
    middle = len(weights) // 2  # a byte 4 MiB from either end: a fine-tune of a middle layer
    (model / "model.safetensors").write_bytes(weights[:middle] + bytes([weights[middle] ^ 1]) + weights[middle + 1:])
    assert model_digest(model).digest != first.digest
    (model / "model.safetensors").write_bytes(weights)
    assert model_digest(model) == first
    # rewritten in place with its size and time given back (cp -p, touch -r), in this same process: not taken from
    # the digests kept for it
    stat = (model / "config.json").stat()
    text = (model / "config.json").read_bytes()
    (model / "config.json").write_bytes(text.replace(b"1", b"2", 1))
    os.utime(model / "config.json", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert model_digest(model).files["config.json"] != first.files["config.json"]
    (model / "config.json").write_bytes(text)
    (model / "answer_head.json").write_text("{}")
    assert "answer_head.json" in model_digest(model).files and model_digest(model).digest != first.digest


def test_resume_with_recalibrated_model_files_is_refused_naming_the_file(setup: Path, capsys) -> None:
    """review349 #1: a resume after calibration.json changed in place spliced two models' answers into one file
    whose record named one. Refused now, naming the file; with the files put back it resumes, and the answers
    file's own record says the model's digest and that it was resumed, from which tick."""
    out = setup / "spliced.parquet"
    polls = iter(range(10**9))
    with pytest.raises(BacktestInterrupted):
        run_backtest(ServiceConfig.load(setup / "engine.yaml"), [setup / "ticks.parquet"], setup / "q.yaml", out,
                     progress=False, stop=lambda: next(polls) >= 40)
    consumed = json.loads((setup / "spliced.parquet.parts" / "progress.json").read_text())["consumed"]
    assert consumed > 0
    command = ["backtest", str(setup / "ticks.parquet"), "--queries", str(setup / "q.yaml"), "--out", str(out),
               "--config", str(setup / "engine.yaml"), "--resume", "--quiet"]
    (setup / "model" / "calibration.json").write_text(calibration(3.0))
    capsys.readouterr()
    assert main(command) == 2
    err = capsys.readouterr().err
    assert "was written by a backtest with different model files (--model) (calibration.json changed);" in err, err
    assert "Resume with the model files it was made with, or start over" in err

    (setup / "model" / "calibration.json").write_text(calibration(1.0))
    assert main(command) == 0
    record = json.loads(pl.read_parquet_metadata(out)["flashtick"])
    assert record["model"]["digest"] == model_digest(setup / "model").digest
    assert record["model"]["files"]["calibration.json"] == hashlib.sha256(
        (setup / "model" / "calibration.json").read_bytes()).hexdigest()
    assert record["resumed"] == {"after_ticks": consumed}
    assert without_file_times(json.loads(out.with_suffix(".manifest.json").read_text())["run"]) == record
    # a --resume of the finished run is the same run: nothing to do, whatever the record says of the resume
    assert main(command) == 0 and "already complete" in capsys.readouterr().err


def test_a_serve_restart_on_recalibrated_model_files_says_so_and_starts_a_new_epoch(tmp_path: Path) -> None:
    """review349 #2: a serve restarted on its data directory after the checkpoint was recalibrated in place continued
    the same answer log and epoch without a word. The start now says which file changed and starts a new epoch."""
    from forked_cli import serve_started, serve_until_serving, stop_served

    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    (checkpoint / "calibration.json").write_text(calibration(1.0))
    config = tmp_path / "engine.yaml"
    config.write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\nlog: {{dir: data}}\n"
                      f"endpoints: {{ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', "
                      f"control: 'tcp://127.0.0.1:0'}}\n")

    def notes() -> list[str]:
        said = serve_until_serving(["--config", str(config)], cwd=tmp_path)
        return [line for line in said if "other model files" in line]  # (an INFO line)

    assert notes() == []
    epoch = (tmp_path / "data" / "epoch").read_text()
    assert notes() == [] and (tmp_path / "data" / "epoch").read_text() == epoch
    (checkpoint / "calibration.json").write_text(calibration(3.0))
    said = notes()
    new_epoch = (tmp_path / "data" / "epoch").read_text().strip()
    assert new_epoch != epoch.strip()
    assert len(said) == 1 and "its logged answers came from other model files (model files " in said[0], said
    assert f"calibration.json changed); the answers from here on are this model's, published under a new epoch " \
           f"{new_epoch}" in said[0], said
    assert notes() == [] and (tmp_path / "data" / "epoch").read_text().strip() == new_epoch

    # health says the model's identity, and, after a restart that changed it, what changed
    from engine.service.client import ControlClient

    (checkpoint / "calibration.json").write_text(calibration(1.0))
    process, lines = serve_started(["--config", str(config), "--data-dir", str(tmp_path / "data")], cwd=tmp_path)
    try:
        assert lines and lines[-1].startswith("flashtick serving"), lines
        endpoints = dict(part.split("=", 1) for part in lines[-1].split("flashtick serving ", 1)[1].split())
        with ControlClient(endpoints["control"], timeout_s=30) as control:
            health = control.call("health")
    finally:
        stop_served(process)
    assert health["model_digest"] == model_digest(checkpoint).digest
    assert health["epoch"] == (tmp_path / "data" / "epoch").read_text().strip() != new_epoch
    assert health["model_changed"].endswith(": calibration.json changed"), health


def test_the_builtin_model_has_one_name_in_evaluate_serve_and_backtest() -> None:
    """review349 #3: `evaluate --json` called the built-in model `builtin` (its folder's name), serve and backtest
    `flashtick-tick`."""
    from engine.service.run_record import evaluated_model_id

    assert evaluated_model_id(BUILTIN_MODEL_DIR) == ServiceConfig().model.model_id == "flashtick-tick"
    assert evaluated_model_id(Path("/some/where/m1")) == "m1"


def test_a_checkout_with_uncommitted_changes_is_recorded_dirty(tmp_path: Path) -> None:
    """review349 #4: a run from a checkout with one edited constant recorded the same commit as the clean one."""
    import subprocess

    from engine.service.release import Release, _checkout_dirty, recorded_release

    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "adapt.py").write_text("HALF_LIFE = 500\n")
    subprocess.run([*git, "add", "adapt.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    (tmp_path / "dir5.yaml").write_text("queries: []\n")  # a user's file beside them (review442 #3): not a change
    assert _checkout_dirty(tmp_path) is False
    (tmp_path / "adapt.py").write_text("HALF_LIFE = 50\n")
    assert _checkout_dirty(tmp_path) is True
    assert _checkout_dirty(tmp_path / "nowhere") is None
    dirty = Release("0.2.0", "ab" * 20, True)
    assert str(dirty) == "0.2.0 (git abababab-dirty)" and dirty.record()["dirty"] is True
    assert recorded_release(dirty.record()) == "0.2.0 (git abababab-dirty)"


def test_the_record_keeps_the_command_line_the_environment_and_whole_file_digests_and_other_model_files_digests(
        setup: Path, capsys) -> None:
    """review349 #8: no argv, no torch/Python/platform, and 64-bit truncated input digests of sampled blocks.

    review349 #2: four runs of four different models recorded one `weights`. The record's digest is the model's:
    the finished CLI run above and a fresh one (run_backtest) of other model files record other digests.

    review396 #6: a backtest of another model to the same --out replaced the finished one, a note said; refused now
    (exit 2, --out as it was) as `train` refuses an --out holding a checkpoint, and replaced with --overwrite."""
    import platform

    import torch

    from engine.service.release import this_release

    command = ["backtest", str(setup / "ticks.parquet"), "--queries", str(setup / "q.yaml"), "--out",
               str(setup / "argv.parquet"), "--config", str(setup / "engine.yaml"), "--quiet", "--max-ticks", "200",
               "--no-plot"]
    assert main(command) == 0
    record = json.loads(pl.read_parquet_metadata(setup / "argv.parquet")["flashtick"])
    # the command line beside the record (in it, two runs to two --out files would differ in their answers' bytes)
    assert json.loads((setup / "argv.manifest.json").read_text())["argv"] == ["flashtick", *command]
    assert record["environment"]["torch"] == torch.__version__
    assert record["environment"]["python"] == platform.python_version()
    assert record["files"][0]["digest"] == hashlib.sha256((setup / "ticks.parquet").read_bytes()).hexdigest()
    assert record["commit"] == this_release().commit and record.get("dirty") == this_release().dirty

    config = ServiceConfig.load(setup / "engine.yaml")
    (setup / "model" / "calibration.json").write_text(calibration(2.0))
    try:
        run_backtest(config, [setup / "ticks.parquet"], setup / "q.yaml", setup / "b.parquet", progress=False,
                     max_ticks=200, plot=False)
    finally:
        (setup / "model" / "calibration.json").write_text(calibration(1.0))
    a, b = (json.loads(pl.read_parquet_metadata(setup / f"{n}.parquet")["flashtick"]) for n in ("argv", "b"))
    assert a["model"]["digest"] != b["model"]["digest"] and "weights" not in a["model"]
    assert {k for k in a["model"]["files"] if a["model"]["files"][k] != b["model"]["files"][k]} == {"calibration.json"}
    assert "resumed" not in a

    reused = [*command[:command.index("--out") + 1], str(setup / "b.parquet"), *command[command.index("--out") + 2:]]
    capsys.readouterr()
    assert main(reused) == 2
    err = capsys.readouterr().err
    assert f"{setup / 'b.parquet'} holds a finished backtest of another model (its model differs" in err, err
    assert "give another --out to keep both, or --overwrite to replace it" in err
    assert json.loads(pl.read_parquet_metadata(setup / "b.parquet")["flashtick"]) == b  # as it was
    assert main([*reused, "--overwrite"]) == 0
    assert "replacing" in capsys.readouterr().err
    assert json.loads(pl.read_parquet_metadata(setup / "b.parquet")["flashtick"])["model"] == a["model"]


def test_the_builtin_model_scored_on_a_set_it_trained_on_says_so(tmp_path: Path, capsys) -> None:
    """review349 #5: a backtest of the built-in model on the shared BTCUSDT trades, the data it trained on, said
    nothing of it, where a trained checkpoint's backtest of its own files says its scores are not out of sample.
    Real files in a folder named as the shared set's; a file elsewhere gets no note, nor --test-from 0.8. From Python
    the same note (review420 #6: run_backtest said none), through `note` and on the report."""
    from engine.service.builtin_in_sample import SEEN_END, builtin_in_sample_note
    from engine.service.datasets import HELDOUT_FRACTION

    assert SEEN_END == 1 - HELDOUT_FRACTION
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(300)
    shared = tmp_path / "binance-btcusdt-spot"
    shared.mkdir()
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(shared / "trades.parquet")
    shutil.copy(shared / "trades.parquet", tmp_path / "other.parquet")
    (tmp_path / "q.yaml").write_text(QUERIES)

    def note(path: Path, *extra: str) -> list[str]:
        capsys.readouterr()
        assert main(["backtest", str(path), "--queries", str(tmp_path / "q.yaml"), "--out",
                     str(tmp_path / f"{path.stem}{len(extra)}.parquet"), "--quiet", "--no-plot", *extra]) == 0
        return [line for line in capsys.readouterr().err.splitlines() if "built-in model was trained" in line]

    said = note(shared / "trades.parquet")
    assert len(said) == 1 and (f"the built-in model was trained and calibrated on the first 80% of the ticks of the "
                               f"shared BTCUSDT set ({shared / 'trades.parquet'} among them), and every answer was "
                               f"scored: the scores below are not out of sample (give --test-from 0.8 or later; "
                               f"a file of part of a set") in said[0], said
    notes: list[str] = []
    report = run_backtest(ServiceConfig(), shared / "trades.parquet", tmp_path / "q.yaml", tmp_path / "py.parquet",
                          progress=False, plot=False, note=notes.append)
    assert report.in_sample == [said[0].removeprefix("flashtick backtest: note: ")] == notes[-1:], notes
    assert builtin_in_sample_note([tmp_path / "other.parquet"], None, "give --test-from 0.8") is None  # not the set
    assert note(shared / "trades.parquet", "--test-from", "0.8") == []


def test_the_builtin_model_scored_inside_its_training_span_says_so_whatever_the_file_is_named(
        tmp_path: Path, capsys) -> None:
    """review400 #5: `evaluate builtin` / `backtest` of the first rows of the shared EURUSD set, copied under another
    name, printed in-sample scores with no word (model.md called the run zero-shot). A stream named as a set the
    model trained on, scored inside that set's training span, gets a caution naming the span; another instrument at
    those times, or the same after the span, none."""
    from engine.service.builtin_in_sample import TRAINED_SPANS, builtin_span_caution

    start, end = TRAINED_SPANS["EURUSD"]
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(200)
    wire = pl.DataFrame([t.to_wire() for t in ticks]).sort("ts")
    copy = tmp_path / "eurusd.parquet"  # stream EURUSD from its name, as the reviewer's copy of the shared set
    wire.drop("stream").with_columns(pl.col("ts") - wire["ts"][0] + start).write_parquet(copy)
    (tmp_path / "q.yaml").write_text(QUERIES)
    assert main(["backtest", str(copy), "--queries", str(tmp_path / "q.yaml"), "--out", str(tmp_path / "a.parquet"),
                 "--quiet", "--no-plot"]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "scored on ticks it trained on" in line]
    assert len(said) == 1 and said[0].startswith("flashtick backtest: warning: the built-in model was scored on "
                                                 "ticks it trained on: stream EURUSD, scored from "), said
    assert "within the EURUSD ticks it trained and was calibrated on, 2019-02-04T00:00:00.994000000Z to " \
           "2019-02-05T14:29:24.196000000Z" in said[0] and "in-sample, not zero-shot" in said[0]
    assert builtin_span_caution({"EUR/USD": (end - 10, end + 10**9)}) is not None  # overlapping its end
    assert builtin_span_caution({"GBPUSD": (start, end)}) is None  # another instrument at those times
    assert builtin_span_caution({"EURUSD": (end + 1, end + 10**9)}) is None  # after the span: out of sample
    # review443 #1: a fine-tune of a fine-tune of it is told too, its lineage named
    from engine.models import BUILTIN_MODEL_DIR
    from engine.service.base_lineage import base_record, lineage_caution

    grandchild = {"base": {"model": "/models/child", "streams": None, "base": base_record(BUILTIN_MODEL_DIR)}}
    said = lineage_caution(grandchild, {"EUR/USD": (end - 10, end + 10**9)}, "the test slice", "later ticks")
    assert said is not None and said.startswith(
        "this model's weights descend from the built-in model (its base's base), which trained and was validated on "
        "stream EUR/USD's ticks from 2019-02-04T00:00:00.994000000Z to 2019-02-05T14:29:24.196000000Z (UTC event "
        "times, the shared set's first 80%), and the test slice of EUR/USD runs from "), said
    assert lineage_caution(grandchild, {"EURUSD": (end + 1, end + 10**9)}, "the test slice", "later ticks") is None


def test_the_config_is_recorded_as_its_effective_values_and_a_finished_backtest_replaced_by_other_options_is_said(
        setup: Path) -> None:
    """review349 #6: the same backtest under a config that set only the endpoints recorded another config digest (of
    a Python repr nobody outside could recompute) and not the config itself.

    review349 #13: a finished run's answers, scores and manifest were replaced by a run with another --batch-ms
    without a word. Replaced as documented, but said, naming what differs; the same run again says nothing. (The
    plain config's run is the first of these, at the default --batch-ms 100.)"""
    endpoints = setup / "with_endpoints.yaml"
    endpoints.write_text((setup / "engine.yaml").read_text() + "endpoints: {ingest: 'tcp://127.0.0.1:50300', "
                         "answers: 'tcp://127.0.0.1:50301', control: 'tcp://127.0.0.1:50302'}\n")
    config = ServiceConfig.load(setup / "engine.yaml")

    def notes(batch_ms: float) -> list[str]:
        said: list[str] = []
        run_backtest(config, [setup / "ticks.parquet"], setup / "q.yaml", setup / "replaced.parquet", progress=False,
                     max_ticks=100, batch_ms=batch_ms, note=said.append)
        return [line for line in said if line.startswith("replacing")]

    assert notes(100) == []
    plain = json.loads(pl.read_parquet_metadata(setup / "replaced.parquet")["flashtick"])
    run_backtest(ServiceConfig.load(endpoints), [setup / "ticks.parquet"], setup / "q.yaml",
                 setup / "endpoints.parquet", progress=False, max_ticks=100)
    with_endpoints = json.loads(pl.read_parquet_metadata(setup / "endpoints.parquet")["flashtick"])
    assert plain["config_digest"] == with_endpoints["config_digest"] and plain["config"] == with_endpoints["config"]
    assert plain["config_digest"] == hashlib.sha256(json.dumps(plain["config"], sort_keys=True,
                                                               separators=(",", ":")).encode()).hexdigest()
    assert plain["config"]["answers.adapt"] == "online" and not any(k.startswith("endpoints.") for k in plain["config"])

    assert notes(50) == [f"replacing {setup / 'replaced.parquet'}, a finished backtest of another run (its batch_ms "
                         f"100 then, 50 now differs): its answers, scores, plot and manifest are overwritten by this "
                         f"run's (keep them with another --out)"]
    assert notes(50) == []


def test_a_checkpoint_that_recorded_no_model_digest_is_refused_saying_so(setup: Path, capsys) -> None:
    """A half-done backtest begun before the model digest cannot show its model files are the ones it ran with."""
    out = setup / "undigested.parquet"
    polls = iter(range(10**9))
    with pytest.raises(BacktestInterrupted):
        run_backtest(ServiceConfig.load(setup / "engine.yaml"), [setup / "ticks.parquet"], setup / "q.yaml", out,
                     progress=False, stop=lambda: next(polls) >= 40)
    progress = setup / "undigested.parquet.parts" / "progress.json"
    manifest = json.loads(progress.read_text())
    del manifest["key"]["model"]
    progress.write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["backtest", str(setup / "ticks.parquet"), "--queries", str(setup / "q.yaml"), "--out", str(out),
                 "--config", str(setup / "engine.yaml"), "--resume", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "different model files (--model) (the checkpoint records no digest of them:" in err, err
