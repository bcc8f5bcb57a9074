"""A backtest resumed under the other `scheduler.roll_inside_forward` (a checkpoint written before rolls inside a
forward existed rolled as `false` does; a user may also switch it between the two halves of a run).

Sessions roll at the same points either way (context_rolls.ROLL_RULE is unchanged by it), only the packing of a
forward differs, so the resume is not refused: it is told, and its answers match an uninterrupted run under either
value row for row, the floats to the kernels' rounding of another packing (docs/configuration.md: ~1e-6)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from conftest import engine_dir
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.backtest import BacktestInterrupted, run_backtest
from engine.service.config import ServiceConfig

QUERIES = """
queries:
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: {ticks: 5}}
  - {name: move50, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {interval: 2s}}
  - {name: nll, streams: ["*"], kind: surprise, trigger: batch}
"""
# a window far below what a 10 s batch brings a stream: streams pass several roll points per forward
WINDOW = 256
BATCH_MS = 10_000.0
FLOAT_COLUMNS = ("expected", "nll", "brier", "log_loss", "model_brier")
HALF_WAY = 6  # of the 12 times the run polls `stop`: a checkpoint mid-file
TOLERANCE = 1e-5  # the doc's ~1e-6 per logit; a surprise sums a tick's tokens (measured 1.9e-6)


# the tests share the module's checkpoint and its two uninterrupted backtests, which they only read:
# `--dist loadgroup` keeps them on one worker, which builds it once
pytestmark = pytest.mark.xdist_group("test_resume_roll_inside_forward")


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Path:
    root = engine_dir(tmp_path_factory.mktemp("rolls_resume"), QUERIES, cells=16384)
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(2500)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "ticks.parquet")
    for inside in (False, True):
        (root / f"inside_{inside}.yaml").write_text(
            (root / "engine.yaml").read_text()
            + f"scheduler: {{window: {WINDOW}, roll_inside_forward: {str(inside).lower()}}}\n")
    return root


def backtest(setup: Path, inside: bool, out: str, **options) -> None:
    config = ServiceConfig.load(setup / f"inside_{inside}.yaml")
    run_backtest(config, [setup / "ticks.parquet"], setup / "q.yaml", setup / out, progress=False,
                 batch_ms=BATCH_MS, **options)


@pytest.fixture(scope="module")
def uninterrupted(setup: Path) -> dict[bool, pl.DataFrame]:
    for inside in (False, True):
        backtest(setup, inside, f"whole_{inside}.parquet")
    return {inside: pl.read_parquet(setup / f"whole_{inside}.parquet") for inside in (False, True)}


def assert_within_rounding(got: pl.DataFrame, want: pl.DataFrame) -> None:
    """Every key, label and answer equal row for row; probabilities and values to TOLERANCE."""
    assert got.columns == want.columns and got.height == want.height
    exact = [c for c in want.columns if c not in (*FLOAT_COLUMNS, "probs", "model_probs")]
    assert got.select(exact).equals(want.select(exact))
    for column in FLOAT_COLUMNS:
        diff = (got[column] - want[column]).abs().max()
        assert diff is None or diff <= TOLERANCE, (column, diff)
    for g, w in [*zip(got["probs"], want["probs"]), *zip(got["model_probs"], want["model_probs"])]:
        assert (g is None) == (w is None)
        if g is not None:
            gp, wp = json.loads(g), json.loads(w)
            assert gp.keys() == wp.keys() and all(abs(gp[k] - wp[k]) <= TOLERANCE for k in gp)


def test_the_setting_moves_only_the_rounding(uninterrupted: dict[bool, pl.DataFrame]) -> None:
    """The runs this file resumes across do differ (rolls inside a forward happened), within the rounding."""
    assert not uninterrupted[True].equals(uninterrupted[False])
    assert_within_rounding(uninterrupted[True], uninterrupted[False])


@pytest.mark.parametrize("first", [False, True])
def test_a_resume_under_the_other_value_is_told_and_matches_an_uninterrupted_run(
        setup: Path, uninterrupted: dict[bool, pl.DataFrame], first: bool) -> None:
    out = f"switched_from_{first}.parquet"
    polls = iter(range(10**9))
    with pytest.raises(BacktestInterrupted):
        backtest(setup, first, out, stop=lambda: next(polls) >= HALF_WAY)
    manifest = json.loads((setup / f"{out}.parts" / "progress.json").read_text())
    assert manifest["consumed"] > 0 and manifest["roll_inside_forward"] is first
    notes: list[str] = []
    backtest(setup, not first, out, resume=True, note=notes.append)
    told = [line for line in notes if "scheduler.roll_inside_forward" in line]
    assert told == [f"resuming with scheduler.roll_inside_forward {str(not first).lower()} a run checkpointed with "
                    f"{str(first).lower()}: the answers after the resume point ({manifest['consumed']} ticks) come "
                    f"from forwards packed otherwise (the same rolls, the same ticks) and may differ from an "
                    f"uninterrupted run's by that packing's rounding (~1e-6)"]
    resumed = pl.read_parquet(setup / out)
    assert_within_rounding(resumed, uninterrupted[not first])
    assert_within_rounding(resumed, uninterrupted[first])


def test_a_resume_under_the_same_value_says_nothing(
        setup: Path, uninterrupted: dict[bool, pl.DataFrame]) -> None:
    polls = iter(range(10**9))
    with pytest.raises(BacktestInterrupted):
        backtest(setup, True, "same.parquet", stop=lambda: next(polls) >= HALF_WAY)
    notes: list[str] = []
    backtest(setup, True, "same.parquet", resume=True, note=notes.append)
    assert not [line for line in notes if "roll_inside_forward" in line]
    # (not byte for byte: the resume's rebuild packs the sessions' first forwards otherwise, as any resume does)
    assert_within_rounding(pl.read_parquet(setup / "same.parquet"), uninterrupted[True])
