"""`make demo`'s run: a feed the engine cannot keep up with is slowed, not left to queue for the whole run."""

from __future__ import annotations

from engine.service.cli import EXAMPLE_QUERIES
from engine.service.demo import run_demo


def test_a_demo_whose_engine_falls_behind_halves_its_rate_and_says_so(capsys) -> None:
    # 20,000 ticks/s of 4 streams: no CPU computes that with the built-in model, so the heartbeats say behind
    stats = run_demo(seconds=6, queries=EXAMPLE_QUERIES, rate=20_000.0, adapt=True)
    out, err = capsys.readouterr()
    assert stats["demo"]["lowered_from"] == [20_000.0] and stats["demo"]["rate"] == 10_000.0  # once: the backlog
    assert "the engine fell behind" in err and "feeding 10000 ticks/s from now on" in err  # never drained after it
    assert "fed at 10000 ticks/s after starting at 20000" in out and stats["ticks_in"] > 0
