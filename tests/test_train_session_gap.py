"""`train --session-gap`: a label horizon across a longer pause in event time (a weekend) leaves its point
unlabelled in training as in backtest and evaluate (it was trained on the Friday-to-Sunday move); the checkpoint
records it beside its other reading options, and evaluate or backtest of it with another says so."""

from __future__ import annotations

import json
import random
from pathlib import Path

import polars as pl
import pytest

from connectors.builtin import load_builtin_codec
from connectors.ticks import quote
from engine.service.cli import main
from test_session_gap import FRIDAY_21H, WEEKEND
from test_stream_selection import TINY

# one worker takes the file under `--dist loadgroup`: its module fixture (two trainings) is built once
pytestmark = pytest.mark.xdist_group("test_train_session_gap")

SESSION = 470  # quotes a session, 15 s apart; three sessions, a weekend between each
RUN = ["--split", "50/10/40", "--steps", "1", "--batch", "1", "--resamples", "10"]  # a pause in train and in test


def fx_weeks(sessions: int = 3, seed: int = 6) -> list:
    rng = random.Random(seed)
    out, mid = [], 1.0940
    for i in range(sessions * SESSION):
        ts = FRIDAY_21H + i * 15_000_000_000 + (i // SESSION) * WEEKEND
        mid += rng.choice((-1, 1)) * 0.00002
        out.append(quote("EURUSD", ts, round(mid - 0.00005, 6), round(mid + 0.00005, 6), 1.0, 1.0))
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict:
    """The same file trained on without and with --session-gap 1h: its two weekends' pauses lie in the train and
    the test parts."""
    root = tmp_path_factory.mktemp("train_session_gap")
    ticks = root / "weeks.parquet"
    pl.DataFrame([t.to_wire() for t in fx_weeks()]).write_parquet(ticks)
    said = {}
    for name, options in (("plain", []), ("gapped", ["--session-gap", "1h"])):
        capture = root / f"{name}.err"
        with capture.open("w") as err, pytest.MonkeyPatch.context() as patch:
            patch.setattr("sys.stderr", err)
            assert main(["train", str(ticks), "--out", str(root / name), *TINY, *RUN, *options]) == 0
        said[name] = capture.read_text()
    return {"root": root, "ticks": ticks, "said": said}


def evaluation(trained: dict, name: str) -> dict:
    return json.loads((trained["root"] / name / "evaluation.json").read_text())


def test_training_labels_end_at_the_session_gap_and_the_checkpoint_records_it(trained) -> None:
    plain, gapped = evaluation(trained, "plain"), evaluation(trained, "gapped")
    assert gapped["trained_on"]["reading"] == {"split": "50/10/40", "session_gap": "1h"}
    assert plain["trained_on"]["reading"] == {"split": "50/10/40"}
    # one weekend in each stream's train part: each question loses the `horizon` points whose label spans it
    horizons = {name: q.spec.horizon for name, q in load_builtin_codec().questions.items()}
    for question, scored in gapped["questions"].items():
        assert plain["questions"][question]["train_points"] - scored["train_points"] == horizons[question], question
    assert gapped["answer_points"]["across_pauses"] == 0 < plain["answer_points"]["across_pauses"]
    assert ("scored answer points are labelled across a pause of an hour or more in their stream's event times: an "
            "answer before a close is scored against the reopen; --session-gap 1h leaves such points out of "
            "training and scoring") in trained["said"]["plain"]
    assert "labelled across a pause" not in trained["said"]["gapped"]
    assert "none across a pause in event time of 1h or more (--session-gap 1h)" in \
        (trained["root"] / "gapped" / "TRAINING.md").read_text()


def test_evaluate_and_backtest_with_another_session_gap_say_so(trained, capsys, tmp_path: Path) -> None:
    root, ticks = trained["root"], str(trained["ticks"])
    capsys.readouterr()
    scoring = ["--max-points", "200", "--resamples", "10", "--threads", "1", "--json"]
    assert main(["evaluate", str(root / "gapped"), ticks, *scoring]) == 0
    assert "note: this model was trained with --session-gap 1h; this run takes no --session-gap" in \
        capsys.readouterr().err
    assert main(["evaluate", str(root / "gapped"), ticks, *scoring, "--session-gap", "60m"]) == 0
    assert "this model was trained with" not in capsys.readouterr().err  # 60m is 1h
    assert main(["evaluate", str(root / "plain"), ticks, *scoring, "--session-gap", "1h"]) == 0
    assert "note: this model was trained with no --session-gap; this run takes --session-gap 1h" in \
        capsys.readouterr().err
    backtest = ["backtest", ticks, "--model", str(root / "gapped"), "--max-ticks", "200", "--quiet", "--threads", "1"]
    assert main([*backtest, "--out", str(tmp_path / "a.parquet")]) == 0
    err = capsys.readouterr().err
    assert "flashtick backtest: note: this model was trained with --session-gap 1h; this run takes no " \
           "--session-gap" in err
    assert main([*backtest, "--out", str(tmp_path / "b.parquet"), "--session-gap", "1h"]) == 0
    assert "this model was trained with" not in capsys.readouterr().err


def test_train_parses_the_session_gap_as_backtest_does(tmp_path: Path, capsys) -> None:
    for command in (["train", "x.parquet", "--out", str(tmp_path / "m")], ["backtest", "x.parquet", "--out", "a.pq"]):
        capsys.readouterr()
        with pytest.raises(SystemExit) as stopped:
            main([*command, "--session-gap", "soon"])
        assert stopped.value.code == 2
        assert '--session-gap: must be a duration such as 1h, 30m or 90s, got "soon"' in capsys.readouterr().err


def test_serve_of_a_checkpoint_says_when_its_session_gap_differs_from_the_configs(trained, tmp_path: Path) -> None:
    """`serve --model` said nothing of a checkpoint's --session-gap (evaluate and backtest do): its live scores and
    adaptation then label answers across pauses otherwise than training did. One start line names both values and
    the config key; none when they agree (1h given as 3600 s)."""
    from forked_cli import serve_until_serving  # (forked warm: a process of its own each)

    root = trained["root"]

    def start(model: str, gap: str | None) -> list[str]:
        config = tmp_path / f"{model}_{gap}.yaml"
        config.write_text("kv: {cells: 8192, block_size: 16}\nlog: {enabled: false}\n"
                          + (f"answers: {{session_gap_s: {gap}}}\n" if gap is not None else "")
                          + "endpoints: {ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', "
                            "control: 'tcp://127.0.0.1:0'}\n")
        return [line for line in serve_until_serving(["--config", str(config), "--model", str(root / model)],
                                                     cwd=tmp_path) if "--session-gap" in line]

    assert start("gapped", None) == [
        "flashtick: INFO: this model was trained with --session-gap 1h; this service's answers.session_gap_s is "
        "null (off): its live scores and adaptation label answers otherwise than training did (set "
        "answers.session_gap_s: 3600 in the config)"]
    assert start("plain", "1800") == [
        "flashtick: INFO: this model was trained with no --session-gap; this service's answers.session_gap_s is 1800 "
        "(30m): its live scores and adaptation label answers otherwise than training did (set "
        "answers.session_gap_s: null in the config)"]
    assert start("gapped", "3600") == []
