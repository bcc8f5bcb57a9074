"""review355 #7: a stream silent past scheduler.stream_idle_s gives its KV back and keeps its context, so a name that
prints twice a day answers live as a backtest of the same ticks does (where nothing expires); where its context is
given up (`forget`, past scheduler.expired_streams_kept) its answers say so (`context_reset`)."""

from __future__ import annotations

import json
import random

import msgpack
import polars as pl
import pytest

from engine.service.backtest import run_backtest
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.pipeline import TickPipeline
from test_server import checkpoint  # noqa: F401  (the model fixture)
from test_service_limits import live_server, pipeline_config, wait_for

QUERY = "queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice, trigger: batch}\n"
MORNING = 1_709_908_200_000_000_000  # 2024-03-08T14:30:00Z, New York's open
AFTERNOON = MORNING + 5 * 3600 * 10**9  # five hours later: well past the default hour of stream_idle_s
# a window the morning's ticks roll past (the kept context keeps the roll's phase too)
SCHEDULER = {"window": 160, "probe_reserve": 32}


def _prints(stream: str, start: int, n: int, seed: int, first: float = 216.84) -> list[dict]:
    """``n`` trades of ``stream`` a second apart from ``start``, on a seeded walk from ``first``."""
    rng = random.Random(seed)
    price, out = first, []
    for k in range(n):
        price = round(price + rng.choice((-0.02, -0.01, 0.01, 0.02)), 2)
        out.append({"stream": stream, "ts": start + k * 10**9, "price": price, "size": float(rng.randint(1, 300)),
                    "side": rng.choice(("buy", "sell"))})
    return out


def _published(server, push, sub, ticks: list[dict]) -> list[dict]:
    """``ticks`` sent one a message; the answers published for them, once all are computed."""
    before = server.pipeline.ticks_in
    for tick in ticks:
        push.send(msgpack.packb(tick))
    wait_for(lambda: server.pipeline.ticks_in == before + len(ticks) and not server.pipeline.busy)
    answers = []
    while len(answers) < len(ticks) and (got := sub.recv(timeout_s=30.0)) is not None:
        answers.append(got[1])
    return answers


def test_a_stream_silent_past_stream_idle_s_answers_as_the_backtest_of_the_same_ticks(checkpoint, tmp_path) -> None:
    """HEI A prints 40 times in the morning and 8 times five hours later. Live, it expires in between (a 0.3 s
    stream_idle_s stands for the hour); its afternoon answers equal those of `backtest` over the same file, tick
    count (`version`) and probabilities, not those of a one-tick context as before; no caveat is carried."""
    morning, afternoon = _prints("HEI A", MORNING, 40, seed=5), _prints("HEI A", AFTERNOON, 8, seed=6)
    tape = tmp_path / "hei.csv"
    pl.DataFrame(morning + afternoon).write_csv(tape)
    (tmp_path / "q.yaml").write_text(QUERY)
    run_backtest(pipeline_config(checkpoint, scheduler=SCHEDULER), [tape], tmp_path / "q.yaml",
                 tmp_path / "bt.parquet", batch_ms=1, progress=False)
    backtest = {r["data_ts"]: r for r in pl.read_parquet(tmp_path / "bt.parquet").to_dicts()}
    assert len(backtest) == 48  # (a batch of 1 ms: an answer at every print)
    with live_server(checkpoint, queries=str(tmp_path / "q.yaml"), limits={"heartbeat_s": 0.1},
                     scheduler={**SCHEDULER, "stream_idle_s": 0.3}) as (server, push):
        with AnswerSubscriber(server.endpoints["answers"], ["dir/"]) as sub:
            sub.wait_ready(timeout_s=60)
            answers = _published(server, push, sub, morning)
            wait_for(lambda: server.pipeline.encoders.expired("HEI A"))
            scheduler = server.pipeline.engine.scheduler
            assert "HEI A" not in scheduler.streams and "HEI A" in scheduler.kept
            assert scheduler.stats.rolls >= 1  # (its morning rolled: the phase kept is the backtest's)
            answers += _published(server, push, sub, afternoon)
            with ControlClient(server.endpoints["control"], timeout_s=60) as control:
                stats = control.call("stats")["stats"]
    assert [a["version"] for a in answers] == list(range(1, 49))
    for answer in answers:
        expected = backtest[answer["data_ts"]]
        assert answer["version"] == expected["ticks"]
        assert answer["value"]["probs"] == pytest.approx(json.loads(expected["probs"]), abs=1e-5), answer["version"]
        assert "caveats" not in answer
    assert stats["streams_expired"] >= 1 and stats["contexts_resumed"] >= 1  # (it may have expired again since)


def _answered(pipeline: TickPipeline, ticks: list[dict]) -> list:
    for tick in ticks:
        pipeline.ingest_message(msgpack.packb(tick))
    return pipeline.run_until_idle()


def test_a_context_given_up_is_said_on_its_answers_until_its_first_roll(checkpoint) -> None:
    """Past scheduler.expired_streams_kept (1 here) the oldest expired stream's context is given up: its next answers
    read the ticks since, and say so (`context_reset`) until its first roll; the stream kept goes on from its
    context, and a `forget` gives its context up too."""
    from engine.service.answer_caveats import CONTEXT_RESET, context_caveats

    pipeline = TickPipeline(pipeline_config(checkpoint, scheduler={**SCHEDULER, "stream_idle_s": 1e-3,
                                                                   "expired_streams_kept": 1}))
    pipeline.registry.register(QUERY)
    scheduler = pipeline.engine.scheduler
    _answered(pipeline, _prints("BF B", MORNING, 10, seed=1) + _prints("BRK A", MORNING + 1, 10, seed=2))
    wait_for(lambda: pipeline.expire_idle() and not scheduler.streams)
    given_up, kept = "BF B", "BRK A"  # (expired in the order they came: the first is past the bound of 1)
    assert kept in scheduler.kept and given_up not in scheduler.kept and len(scheduler.kept) == 1
    assert scheduler.stats.streams_expired == 2 and scheduler.kept.given_up == 1
    _answered(pipeline, _prints(given_up, AFTERNOON, 3, seed=3) + _prints(kept, AFTERNOON, 3, seed=4))
    assert scheduler.streams[kept].ticks == 13 and not context_caveats(scheduler, kept)
    # (its tick count goes on with the ingest side's, whose guard went with the context: a new stream there)
    caveats = context_caveats(scheduler, given_up)
    assert [c["kind"] for c in caveats] == [CONTEXT_RESET] and "reads the 3 ticks since" in caveats[0]["text"]
    rolls = scheduler.stats.rolls
    _answered(pipeline, _prints(given_up, AFTERNOON + 10**10, 40, seed=5))  # past its window: it rolls
    assert scheduler.stats.rolls > rolls and not context_caveats(scheduler, given_up)
    pipeline.forget_stream(kept)
    _answered(pipeline, _prints(kept, AFTERNOON + 10**11, 1, seed=6))
    assert scheduler.streams[kept].ticks == 1 and context_caveats(scheduler, kept)


def test_a_forgotten_streams_published_answers_carry_the_caveat(checkpoint, tmp_path) -> None:
    """Live: after `forget`, the stream's next published answer carries `context_reset`."""
    (tmp_path / "q.yaml").write_text(QUERY)
    with live_server(checkpoint, queries=str(tmp_path / "q.yaml"), scheduler=SCHEDULER) as (server, push):
        with AnswerSubscriber(server.endpoints["answers"], ["dir/"]) as sub:
            sub.wait_ready(timeout_s=60)
            first = _published(server, push, sub, _prints("HEI A", MORNING, 3, seed=1))
            with ControlClient(server.endpoints["control"], timeout_s=60) as control:
                control.call("forget", stream="HEI A")
            after = _published(server, push, sub, _prints("HEI A", AFTERNOON, 1, seed=2))
    assert all("caveats" not in a for a in first)
    assert [c["kind"] for c in after[0]["caveats"]] == ["context_reset"]
