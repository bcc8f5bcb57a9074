"""Benchmarks say what else ran beside them (review353 #2) and compare against transformers used statefully
(review353 #3): the kept-cache side answers the same logits as the stateless one, in the same run."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from benchmarks.common import LOADED_SHARE, ForeignLoad, say_load


def test_foreign_load_counts_another_process_and_a_loaded_run_says_so(capsys) -> None:
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        with ForeignLoad() as foreign:
            deadline = time.monotonic() + 0.5  # (the spinner's half second of CPU is this test's own cost)
            while time.monotonic() < deadline:
                time.sleep(0.05)  # (we idle: the spinner's CPU is all foreign)
    finally:
        spinner.kill()
        spinner.wait()
    assert 0.25 / (os.cpu_count() or 1) <= foreign.share <= 1.0
    say_load(LOADED_SHARE / 2)
    assert capsys.readouterr().err == ""
    say_load(max(foreign.share, LOADED_SHARE + 0.01))
    assert "other processes used" in capsys.readouterr().err


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_query_latency_measures_a_kept_transformers_cache_with_the_stateless_logits(tmp_path) -> None:
    from benchmarks import query_latency

    result = query_latency.main(["--quick", "--contexts", "64", "--out-dir", str(tmp_path)])
    row = result["contexts"][0]
    assert row["kept_cache_max_abs_logit_diff"] < 1e-4 and row["max_abs_logit_diff"] < 1e-4
    assert row["kept_cache_p50_ms"] > 0 and row["ratio_kept_cache_over_probe_p50"] > 0
    assert 0.0 <= result["foreign_cpu_share"] <= 1.0
    assert (tmp_path / "query_latency_quick.json").is_file()
