"""`make demo`'s run: a feed the engine cannot keep up with is slowed, not left to queue for the whole run."""

from __future__ import annotations

from engine.service.cli import EXAMPLE_QUERIES
from engine.service.demo import run_demo


def test_a_demo_whose_engine_falls_behind_halves_its_rate_and_says_so(capsys) -> None:
    # 5,000 ticks/s of 4 streams: no CPU core computes that with the built-in model, so the heartbeats say behind
    stats = run_demo(seconds=4, queries=EXAMPLE_QUERIES, rate=5_000.0, adapt=True)
    out, err = capsys.readouterr()
    assert stats["demo"]["lowered_from"][0] == 5_000.0 and stats["demo"]["rate"] < 5_000.0
    assert "the engine fell behind" in err and "feeding 2500 ticks/s from now on" in err
    assert "ticks/s after starting at 5000" in out and stats["ticks_in"] > 0
