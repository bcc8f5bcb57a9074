"""`train` and `evaluate` read `--from`/`--to` as backtest does (the ticks inside the range alone, before the
split), and `evaluate --test-from` takes an event time (each stream scored whole from then on: "train on the first
days, evaluate on the last" is two commands over one folder) or a fraction (review382 #4, #9). A real tiny model
trained through the CLI on three days of one instrument's trades, a CSV a day, written here."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from engine.service.cli import main
from engine.service.cli_parser import UsageError
from tests.test_train_folders import QUICK, TINY

pytestmark = pytest.mark.xdist_group("train_time_range")

DAY_ROWS = 450
DAY_NS = 86_400 * 10**9
OPEN_NS = 1_793_021_400 * 10**9  # 2026-10-26T13:30:00Z
DAYS = ("2026-10-26", "2026-10-27", "2026-10-28")


def write_days(folder: Path) -> None:
    """Three days of AAA's trades, a CSV each, 40 s apart from 13:30 UTC (5 hours a day)."""
    folder.mkdir()
    rng = np.random.default_rng(5)
    prices = 60 + np.cumsum(rng.choice([-0.01, 0.0, 0.01], 3 * DAY_ROWS))
    for day, name in enumerate(DAYS):
        rows = range(day * DAY_ROWS, (day + 1) * DAY_ROWS)
        (folder / f"{name}.csv").write_text("ts_ns,symbol,price,size,side\n" + "".join(
            f"{OPEN_NS + day * DAY_NS + (i - day * DAY_ROWS) * 40 * 10**9},AAA,{prices[i]:.2f},{1 + i % 5},"
            f"{'buy' if i % 3 else 'sell'}\n" for i in rows))


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(argv))
        except UsageError:  # (what the command line's parser refuses: exit 2)
            rc = 2
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path, str]:
    """(the folder of three days, a model trained on its first two by `--to` the third, that train's stderr)."""
    root = tmp_path_factory.mktemp("train_time_range")
    write_days(root / "days")
    rc, _, err = run("train", str(root / "days"), "--to", DAYS[2], "--out", str(root / "model"), *TINY, *QUICK)
    assert rc == 0, err
    return root / "days", root / "model", err


def test_train_reads_only_the_ticks_inside_from_to(trained) -> None:
    _, model, err = trained
    assert f"--to {DAYS[2]}T00:00:00Z: {DAY_ROWS} row(s) of the files outside it left out" in err, err
    record = json.loads((model / "evaluation.json").read_text())
    assert record["streams"]["AAA"]["ticks"] == 2 * DAY_ROWS  # split among the first two days alone
    assert record["streams"]["AAA"]["times"]["test"][1] < f"{DAYS[2]}T"
    assert record["trained_on"]["time_range"] == f"--to {DAYS[2]}T00:00:00Z"


def test_evaluate_scores_every_tick_from_test_from_and_says_the_span(trained) -> None:
    days, model, _ = trained
    rc, said, err = run("evaluate", str(model), str(days), "--test-from", DAYS[2], *QUICK, "--max-points", "1000")
    assert rc == 0, err
    assert f"on the test part from {DAYS[2]}T00:00:00Z on (--test-from" in said, said
    assert "not out of sample" not in err, err  # the model saw the first two days alone
    rc, out, err = run("evaluate", str(model), str(days), "--test-from", DAYS[2], *QUICK, "--json")
    result = json.loads(out)
    assert result["test_from"] == result["run"]["options"]["test_from"] == f"{DAYS[2]}T00:00:00Z"
    parts = result["streams"]["AAA"]
    assert parts["test"] == [2 * DAY_ROWS, 3 * DAY_ROWS]  # the third day whole: no tick of it left out as a gap
    assert parts["times"]["test"][0] == f"{DAYS[2]}T13:30:00Z"
    assert parts["train"][0] == 0 and parts["train"][1] <= 2 * DAY_ROWS - 50  # the gap taken before the cut
    assert parts["validation"][0] == parts["validation"][1]


def test_evaluate_of_the_training_files_reads_them_over_training_s_range(trained) -> None:
    """review443 #6: `evaluate` of the training files without --from/--to split the whole files, so its test slice
    was not the one `train`'s table scored, without a word. It reads them over the range training recorded (as it
    takes the split), saying so; a --from/--to or --test-from given says what to read and score itself."""
    from engine.service.checkpoint_notes import read_as_trained
    from engine.service.cli_parser import build_parser, parse_command_line

    days, model, _ = trained
    said: list[str] = []
    args = parse_command_line(build_parser(), ["evaluate", str(model), str(days)])
    read_as_trained(args, model, said.append, splits=True)
    assert (args.time_from, args.time_to) == (None, f"{DAYS[2]}T00:00:00Z")
    assert said == [f"reading the files with --to {DAYS[2]}T00:00:00Z, as this model was trained (its "
                    f"evaluation.json; give --from or --to to read another range, or --test-from to score a part of "
                    f"your choosing)"]
    for given in (["--from", DAYS[1]], ["--test-from", DAYS[2]]):
        args = parse_command_line(build_parser(), ["evaluate", str(model), str(days), *given])
        read_as_trained(args, model, said.append, splits=True)
        assert args.time_to is None and len(said) == 1, said


def test_evaluate_test_from_inside_training_is_said_not_out_of_sample(trained) -> None:
    days, model, _ = trained
    rc, _, err = run("evaluate", str(model), str(days), "--test-from", f"{DAYS[1]}T15:00:00Z", *QUICK)
    assert rc == 0, err
    assert "those scores are not out of sample (give a --test-from after" in err, err


def test_evaluate_test_from_needs_ticks_before_it(trained) -> None:
    days, model, _ = trained
    rc, _, err = run("evaluate", str(model), str(days), "--from", DAYS[2], "--test-from", DAYS[2], *QUICK)
    assert rc == 2, err
    assert "give files from before it too (the model's training files serve; they are not scored)" in err, err


def test_evaluate_test_from_a_fraction_sets_the_split(trained) -> None:
    days, model, _ = trained
    rc, out, err = run("evaluate", str(model), str(days), "--test-from", "0.8", *QUICK, "--json")
    assert rc == 0, err
    result = json.loads(out)
    assert result["split"] == "65.8824/14.1176/20"  # 70:15 of the first 80%
    rc, _, err = run("evaluate", str(model), str(days), "--test-from", "1.5", *QUICK)
    assert rc == 2 and "--test-from must be a fraction in (0, 1)" in err, err
    rc, _, err = run("evaluate", str(model), str(days), "--test-from", "2026-13-45", *QUICK)
    assert rc == 2 and "is not a time" in err, err


def test_train_and_evaluate_help_offer_from_to() -> None:
    for command in ("train", "evaluate"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
            main([command, "--help"])
        assert "--from TIME" in out.getvalue() and "--to TIME" in out.getvalue(), command
