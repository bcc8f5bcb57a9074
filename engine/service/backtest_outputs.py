"""What a backtest writes, as output_paths.check_outputs_against checks it before any work: the CLI's `backtest
--out` and a Python caller's `run_backtest(out=...)` alike (review420 #1-#3: from Python, `out` given as one of the
input files replaced that file with the answers' Parquet, a `.csv` name was written as Parquet, and a folder failed
only after the whole run, leaving OUT.tmp and OUT.parts/ beside it)."""

from __future__ import annotations

from pathlib import Path

from engine.service.output_paths import PARQUET, Output


def backtest_outputs(out: Path, option: str = "--out") -> list[Output]:
    """What a backtest writing ``out`` writes: it, its scores and calibration plot beside it, its provenance record
    and its checkpoint folder; ``option`` names it in a refusal (`out` from Python)."""
    from engine.service.answer_parts import PARTS_SUFFIX

    return [Output(option, out, kind=PARQUET, example="answers.parquet", makes_parent=True),
            Output(f"{option} (its scores beside it)", out.with_suffix(".scores.json"), makes_parent=True),
            Output(f"{option} (its calibration plot beside it)", out.with_suffix(".calibration.png"),
                   makes_parent=True),
            Output(f"{option} (its provenance record beside it)", out.with_suffix(".manifest.json"),
                   makes_parent=True),
            Output(f"{option} (its checkpoint folder beside it)", out.with_name(out.name + PARTS_SUFFIX),
                   is_dir=True)]
