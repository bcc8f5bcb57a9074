"""Live scores (engine/service/live_scores.py): a running service scores each published answer of a named tick
question once its future has arrived, beside the stream's own class frequencies so far. Checked against a
computation from the whole tick history with connectors/labels.py (what backtests use), on the built-in model."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

import msgpack
import numpy as np
import pytest

from connectors.labels import NO_LABEL, label_series, marks_of
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.config import ServiceConfig
from connectors.builtin import load_builtin_codec
from connectors.ticks import Tick
from engine.service.live_scores import LiveScores
from engine.service.stream_marks import PRUNE_EVERY
from queries.cache import Answer
from engine.service.metrics_text import render
from engine.service.pipeline import TickPipeline
from queries.yaml_loader import load_queries

QUERIES = """
queries:
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: vol50, streams: ["*"], question: volatility_50, kind: choice, trigger: {ticks: 7}}
  - {name: move50, streams: ["*"], question: move_bps_50, kind: expectation, trigger: batch}
  - {name: regime, streams: ["*"], question: regime, kind: choice, trigger: batch}
  - {name: nll, streams: ["*"], kind: surprise, trigger: batch}
"""


def serve(config: dict | None = None, ticks: int = 600, seed: int = 3, batch: int = 5,
          on_the_way: tuple[int, Callable[[TickPipeline, list], None]] | None = None):
    """The built-in model fed a synthetic market in messages of ``batch`` ticks, stepped after each; returns
    the pipeline, every published answer and every tick fed, by stream. ``on_the_way``: (n, check) calls
    check(pipeline, answers so far) once n ticks are fed and answered."""
    pipeline = TickPipeline(ServiceConfig.from_dict(config or {}))
    if not pipeline.registry.list():
        pipeline.register_queries(load_queries(QUERIES, questions=pipeline.codec.questions))
    market = SyntheticMarket(SyntheticConfig(seed=seed))
    answers, by_stream = [], defaultdict(list)
    for i in range(ticks // batch):
        group = market.next_batch(batch)
        assert pipeline.ingest_message(encode(group)) == []
        for tick in group:
            by_stream[tick.stream].append(tick)
        answers += [a for a in pipeline.run_until_idle()]
        if on_the_way and (i + 1) * batch == on_the_way[0]:
            on_the_way[1](pipeline, answers)
    return pipeline, answers, by_stream


def expected_scores(pipeline: TickPipeline, answers, by_stream) -> dict[str, dict]:
    """Each answer labelled from the stream's whole mark series; the prior is the (query, stream)'s labels realised
    by the answer's tick (those of its answers `horizon` ticks or more before it), add-one smoothed."""
    marks = {stream: marks_of(ticks) for stream, ticks in by_stream.items()}
    totals: dict[str, dict] = {}
    realised: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)  # (tick it was realised at, label)
    for answer in answers:
        spec = pipeline.registry.get(answer.query)
        if not spec.names_question or spec.question == "regime":
            continue
        question = pipeline.codec.questions[spec.question].spec
        total = totals.setdefault(answer.query, {"scored": 0, "correct": 0, "brier": 0.0, "prior_brier": 0.0,
                                                 "majority": 0, "pending": 0, "model_correct": 0, "model_brier": 0.0,
                                                 "streams": defaultdict(lambda: [0, 0.0, 0.0])})
        series = marks[answer.stream]
        if answer.version + question.horizon > len(series):
            total["pending"] += 1
            continue
        label = label_series(question, series[answer.version - 1 : answer.version + question.horizon])[0]
        assert label != NO_LABEL
        labels = list(answer.value["probs"])
        p = np.array([answer.value["probs"][name] for name in labels])
        y = labels.index(question.labels[label])
        earlier = realised[answer.query, answer.stream]
        seen = np.bincount([k for at, k in earlier if at <= answer.version], minlength=len(labels))
        prior = (seen + 1) / (seen.sum() + len(labels))  # add-one: uniform before the first label
        onehot = np.eye(len(labels))[y]
        total["scored"] += 1
        total["correct"] += int(p.argmax() == y)
        total["brier"] += float(np.square(p - onehot).sum())
        total["prior_brier"] += float(np.square(prior - onehot).sum())
        most = seen == seen.max()  # the labels seen most often: a guess among them (every label before the first)
        total["majority"] += most[y] / most.sum()
        own = np.array([answer.value["model_probs"][name] for name in labels])  # before adaptation
        total["model_correct"] += int(own.argmax() == y)
        total["model_brier"] += float(np.square(own - onehot).sum())
        on_stream = total["streams"][answer.stream]  # [scored, brier, prior_brier] on this stream
        on_stream[0] += 1
        on_stream[1] += float(np.square(p - onehot).sum())
        on_stream[2] += float(np.square(prior - onehot).sum())
        earlier.append((answer.version + question.horizon, y))
    return totals


def test_live_scores_list_waiting_queries_equal_a_history_labelling_stay_bounded_and_count_unscorable_ticks() -> None:
    """One service of 2,000 ticks in messages of 20, checked as a user meets it (three tests that each served
    their own: 600, 2,000 and 100 ticks). After ~25 ticks a stream (no 50-tick horizon has
    come yet): a reviewer's newly registered queries were missing from `scores` until one answer was scored: listed
    now, with their pending answers. At the end: the live scores equal a labelling of the whole tick history; the
    memory a stream holds is bounded by what its answers still need (500 ticks a stream, past PRUNE_EVERY's 256);
    then tokenized ticks on a stream make its waiting answers (and those after them) unscorable, counted."""
    def nothing_scored_yet(pipeline: TickPipeline, answers: list) -> None:
        scores = pipeline.stats()["scores"]
        assert {"vol50", "move50"} <= {a.query for a in answers}
        for query in ("vol50", "move50"):
            assert scores[query]["scored"] == 0 and scores[query]["pending"] > 0 and scores[query]["brier"] is None
        assert "flashtick_live_brier{query=\"vol50\"}" not in render(pipeline.stats())  # nothing scored: no sample

    pipeline, answers, by_stream = serve(ticks=2000, batch=20, on_the_way=(100, nothing_scored_yet))
    live = pipeline.stats()["scores"]
    expected = expected_scores(pipeline, answers, by_stream)
    assert set(live) == {"dir20", "vol50", "move50"}  # regime has no ground truth in ticks; surprise no label
    for query, want in expected.items():
        got = live[query]
        assert want["scored"] > 50
        assert got["scored"] == want["scored"] and got["pending"] == want["pending"] and got["unscorable"] == 0
        n = want["scored"]
        assert got["accuracy"] == pytest.approx(want["correct"] / n, abs=1e-6)
        assert got["brier"] == pytest.approx(want["brier"] / n, abs=1e-6)
        assert got["prior_brier"] == pytest.approx(want["prior_brier"] / n, abs=1e-6)
        assert got["majority_accuracy"] == pytest.approx(want["majority"] / n, abs=1e-6)
        assert got["model_accuracy"] == pytest.approx(want["model_correct"] / n, abs=1e-6)
        assert got["model_brier"] == pytest.approx(want["model_brier"] / n, abs=1e-6)
        worse = sorted(((b - pb) / k, stream) for stream, (k, b, pb) in want["streams"].items()
                       if k >= 100 and b > pb)
        assert [w["stream"] for w in got["worse_than_prior"]] == [stream for _, stream in reversed(worse)][:5]
        for w in got["worse_than_prior"]:
            k, b, pb = want["streams"][w["stream"]]
            assert w["scored"] == k and w["brier"] == pytest.approx(b / k, abs=1e-6) > w["prior_brier"]
        thin = [(k, b, pb) for k, b, pb in want["streams"].values() if k < 100]  # pooled: too few to name one
        assert got["thin_streams"]["streams"] == len(thin) and got["thin_streams"]["scored"] == sum(t[0] for t in thin)
        if thin:
            k = sum(t[0] for t in thin)
            assert got["thin_streams"]["brier"] == pytest.approx(sum(t[1] for t in thin) / k, abs=1e-6)
            assert got["thin_streams"]["prior_brier"] == pytest.approx(sum(t[2] for t in thin) / k, abs=1e-6)
    msgpack.packb(pipeline.stats())  # the control op's reply carries it
    metrics = render(pipeline.stats())  # and /metrics, one sample per query
    assert f'flashtick_live_scored_total{{query="dir20"}} {live["dir20"]["scored"]}\n' in metrics
    assert f'flashtick_live_brier{{query="vol50"}} {live["vol50"]["brier"]}\n' in metrics
    longest = max(q.spec.horizon for q in pipeline.codec.questions.values())
    for stream, state in pipeline.scores.streams.items():
        assert state.ticks == len(by_stream[stream]) == pipeline.engine.scheduler.streams[stream].ticks
        assert len(state.marks) <= PRUNE_EVERY + longest + 20

    stream = next(iter(pipeline.scores.streams))
    waiting = sum(len(w) for w in pipeline.scores.streams[stream].waiting.values())
    item = {"stream": stream, "ts": time.time_ns(), "tokens": [1, 2, 3, 4], "ticks": 1}  # after its synthetic ticks
    assert pipeline.ingest_tokenized(msgpack.packb([item])) == []
    later = pipeline.run_until_idle()
    scores = pipeline.stats()["scores"]
    on_stream = sum(1 for a in later if a.stream == stream and a.query in scores)
    assert sum(s["unscorable"] for s in scores.values()) == waiting + on_stream > 0


def test_a_query_name_is_escaped_as_a_prometheus_label() -> None:
    scores = {'a"b\\c': {"scored": 2, "accuracy": 0.5, "brier": None}}
    assert 'flashtick_live_scored_total{query="a\\"b\\\\c"} 2\n' in render({"scores": scores})
    assert "flashtick_live_brier{" not in render({"scores": scores})  # nothing scored yet: no sample


def test_a_restart_scores_answers_on_the_replayed_ticks(tmp_path) -> None:
    config = {"log": {"dir": str(tmp_path / "data")}}
    first, _, by_stream = serve(config, ticks=200)  # 50 ticks a stream: past dir20's horizon of 20
    first.close()
    again = TickPipeline(ServiceConfig.from_dict(config))  # the tick log replays through the live scores
    for stream, ticks in by_stream.items():
        assert again.scores.streams[stream].ticks == len(ticks)
    market = SyntheticMarket(SyntheticConfig(seed=3))
    market.next_batch(200)  # continue the same market after what the first run fed
    for _ in range(30):
        assert again.ingest_message(encode(market.next_batch(5))) == []
        again.run_until_idle()
    scores = again.stats()["scores"]
    assert scores["dir20"]["scored"] > 0 and scores["dir20"]["unscorable"] == 0
    again.close()


def test_streams_where_answers_do_worse_than_their_class_frequencies_are_named() -> None:
    # two streams trending up; the query's answers say "down" on one (wrong) and "up" on the other (right)
    codec = load_builtin_codec()
    spec = load_queries("queries:\n  - {name: d5, streams: ['*'], question: direction_5, kind: choice}\n",
                        questions=codec.questions)[0]
    scores = LiveScores(codec.questions, committed=lambda stream: 0)
    says = {"WRONG": {"down": 0.8, "flat": 0.1, "up": 0.1}, "RIGHT": {"down": 0.0, "flat": 0.0, "up": 1.0}}
    for i in range(1, 301):
        for stream, probs in says.items():
            scores.observe(Tick(stream, 10**9 + i, "trade", price=100.0 + 0.01 * i, size=1.0, side="buy"))
            value = {"answer": max(probs, key=probs.get), "probs": probs}
            scores.expect(Answer("d5", stream, f"d5/{stream}/", i, i, 10**9 + i, 0, value, "m"), spec)
    summary = scores.summary()["d5"]
    assert summary["scored"] == 2 * (300 - 5) and summary["pending"] == 2 * 5
    assert [w["stream"] for w in summary["worse_than_prior"]] == ["WRONG"]
    worst = summary["worse_than_prior"][0]
    assert worst["scored"] == 295 and worst["brier"] == pytest.approx(0.8**2 + 0.1**2 + 0.9**2)
    assert worst["prior_brier"] < 0.05  # after the first answers, "up" every time is what the stream does


def test_the_class_frequencies_start_add_one_smoothed_and_thin_streams_are_pooled() -> None:
    """A reviewer's option chain, a few answers a series: the raw frequencies were a point mass after one label
    (Brier 2 when the next differs), prior_brier 0.92-0.97 for a 3-class question, worse than a uniform guess's
    0.667, so a weak model looked better than the class frequencies; and no series reached the 100 answers that
    `worse_than_prior` names one at. By hand: two series, each up over its first 5 ticks then down."""
    codec = load_builtin_codec()
    spec = load_queries("queries:\n  - {name: d5, streams: ['*'], question: direction_5, kind: choice}\n",
                        questions=codec.questions)[0]
    scores = LiveScores(codec.questions, committed=lambda stream: 0)
    prices = [100.0] * 5 + [101.0] * 5 + [99.0]  # point 1: 100 -> 101 (up); point 6, once it is known: 101 -> 99 (down)
    says = {"down": 0.05, "flat": 0.9, "up": 0.05}  # "flat", sure of it, both times wrong
    for stream in ("SPY   241216C00450000", "SPY   241216P00450000"):
        for i, price in enumerate(prices, start=1):
            scores.observe(Tick(stream, 10**9 + i, "trade", price=price, size=1.0, side="buy"))
            if i in (1, 6):
                value = {"answer": "flat", "probs": says}
                scores.expect(Answer("d5", stream, f"d5/{stream}/", i, i, 10**9 + i, 0, value, "m"), spec)
    summary = scores.summary()["d5"]
    assert summary["scored"] == 4 and summary["pending"] == 0
    # (down, flat, up): the first answer against (1, 1, 1) / 3; the second, after one "up", against (1, 1, 2) / 4
    first = 2 / 3  # (1/3)^2 + (1/3)^2 + (2/3)^2, up realised
    second = 0.75**2 + 0.25**2 + 0.5**2  # down realised: 0.875 (the raw frequencies, all on "up": 2.0)
    model = 0.05**2 + 0.9**2 + 0.95**2  # 1.715 either time
    assert summary["prior_brier"] == pytest.approx((first + second) / 2, abs=1e-6)  # 0.7708, not 1.3333
    assert summary["brier"] == pytest.approx(model, abs=1e-6)
    assert summary["worse_than_prior"] == []  # two answers a series: too few to name one
    assert summary["thin_streams"] == {"streams": 2, "scored": 4, "brier": pytest.approx(model, abs=1e-6),
                                       "prior_brier": pytest.approx((first + second) / 2, abs=1e-6)}


def test_the_class_frequencies_at_an_answer_know_only_the_labels_realised_by_its_tick() -> None:
    """The prior and majority counted every answer scored before this one, though an answer made at tick v cannot know
    the labels of the answers after v - horizon: up to `horizon` labels from its future, so vol50's "majority" scored
    0.998 where an online one scores 0.927, and four queries were named worse than the class frequencies (GAP) that
    beat them (review434 #2). By hand, direction_5 answers at points 1, 2 and 6: up, down, down; point 2 is made
    before point 1's label (tick 6), point 6 knows it but not point 2's (tick 7)."""
    codec = load_builtin_codec()
    spec = load_queries("queries:\n  - {name: d5, streams: ['*'], question: direction_5, kind: choice}\n",
                        questions=codec.questions)[0]
    scores = LiveScores(codec.questions, committed=lambda stream: 0)
    prices = [100.0] * 5 + [101.0] + [99.0] * 5  # 1: 100 -> 101 (up); 2: 100 -> 99 (down); 6: 101 -> 99 (down)
    value = {"answer": "flat", "probs": {"down": 0.1, "flat": 0.8, "up": 0.1}}
    for i, price in enumerate(prices, start=1):
        scores.observe(Tick("GAP", 10**9 + i, "trade", price=price, size=1.0, side="buy"))
        if i in (1, 2, 6):
            scores.expect(Answer("d5", "GAP", "d5/GAP/", i, i, 10**9 + i, 0, value, "m"), spec)
    summary = scores.summary()["d5"]
    assert summary["scored"] == 3
    uniform = 2 / 3  # (down, flat, up) = (1, 1, 1) / 3 at points 1 and 2 (was (1, 1, 2) / 4 at 2: 0.875)
    one_up = 0.75**2 + 0.25**2 + 0.5**2  # (1, 1, 2) / 4 at point 6, down realised (was (2, 1, 2) / 5: 0.56)
    assert summary["prior_brier"] == pytest.approx((uniform + uniform + one_up) / 3, abs=1e-6)
    assert summary["majority_accuracy"] == pytest.approx((1 / 3 + 1 / 3 + 0) / 3, abs=1e-6)  # (was 1/3, 0, 1/2)


def test_the_majority_guess_before_any_label_and_at_a_tie_is_a_uniform_guess_among_the_tied() -> None:
    """A stream's first scored answer (no label seen yet) took label index 0 as "the majority": a hit whenever the
    first label the query lists was realised, so the same answers scored differently under a query listing its
    labels in another order. Now the majority guess is a uniform pick among the labels seen most often (all of
    them before the first): its expected accuracy. By hand, one stream whose points realise down, up, down."""
    codec = load_builtin_codec()
    specs = load_queries("queries:\n  - {name: d5, streams: ['*'], question: direction_5, kind: choice}\n"
                         "  - {name: d5r, streams: ['*'], question: direction_5, kind: choice,"
                         " choices: [up, flat, down]}\n", questions=codec.questions)
    scores = LiveScores(codec.questions, committed=lambda stream: 0)
    # points 1, 6, 11, each made once the one before is realised: 100 -> 99 (down), 99 -> 101 (up), 101 -> 99 (down)
    prices = [100.0] * 5 + [99.0] * 5 + [101.0] * 5 + [99.0]
    says = {"down": 0.2, "flat": 0.6, "up": 0.2}
    for i, price in enumerate(prices, start=1):
        scores.observe(Tick("ES", 10**9 + i, "trade", price=price, size=1.0, side="buy"))
        for spec in specs if i in (1, 6, 11) else ():
            probs = {label: says[label] for label in spec.labels or ("down", "flat", "up")}
            value = {"answer": "flat", "probs": probs}
            scores.expect(Answer(spec.name, "ES", f"{spec.name}/ES/", i, i, 10**9 + i, 0, value, "m"), spec)
    # down with nothing seen: 1/3 (not 1 for d5, whose first label is down); up with down seen once: 0; down with
    # down and up seen once each: 1/2 (not 1 for d5, whose argmax of a tie was down)
    want = (1 / 3 + 0 + 1 / 2) / 3
    for name in ("d5", "d5r"):
        summary = scores.summary()[name]
        assert summary["scored"] == 3 and summary["accuracy"] == 0.0
        assert summary["majority_accuracy"] == pytest.approx(want, abs=1e-6)


def test_a_saturated_bps_question_is_counted_and_said() -> None:
    """The same note a backtest prints (tests/test_backtest.py), from live scores: `flashtick scores` prints
    `saturated_why` under its table. The cheap option's move_bps_50 and volatility_50 are saturated; its
    underlying's are not, and direction_5 is not bucketed in bps."""
    from test_backtest import cheap_option_and_underlying

    codec = load_builtin_codec()
    specs = load_queries("queries:\n  - {name: move50, streams: ['*'], question: move_bps_50, kind: expectation}\n"
                         "  - {name: vol50, streams: ['*'], question: volatility_50, kind: choice}\n"
                         "  - {name: d5, streams: ['*'], question: direction_5, kind: choice}\n",
                         questions=codec.questions)
    scores = LiveScores(codec.questions, committed=lambda stream: 0)
    for tick in cheap_option_and_underlying():
        scores.observe(tick)
        version = scores.streams[tick.stream].ticks
        for spec in specs:
            labels = spec.choices or tuple(spec.values or ()) or codec.questions[spec.question].labels
            value = {"answer": labels[0], "probs": dict.fromkeys(labels, 1 / len(labels))}
            topic = f"{spec.name}/{tick.stream}/"
            scores.expect(Answer(spec.name, tick.stream, topic, version, version, tick.ts, 0, value, "m"), spec)
    summary = scores.summary()
    for query, question, ends in (("move50", "move_bps_50", "-12 (-8 bps or less) or +12 (above 8 bps)"),
                                  ("vol50", "volatility_50", "vhigh (above 10 bps)")):
        assert summary[query]["saturated_streams"] == 1
        assert summary[query]["saturated_why"].startswith(
            f"{question} is saturated on 1 of 2 streams (SPY   241220C00470000): most of their realised labels that "
            f"show a move are {ends}: its buckets are fixed in bps"), summary[query]
    assert summary["d5"]["saturated_streams"] == 0 and "saturated_why" not in summary["d5"]


def test_answers_whose_realised_label_is_none_of_a_subset_querys_own_are_counted_and_said() -> None:
    """A reviewer's `choices: [vlow, low, vhigh]`: the answers whose realised label the query did not ask about
    were counted as `unscorable` (as a stream without prices is), and `flashtick scores` said nothing. They are
    `outside_labels` now, said with the count, in a choice's and an expectation's words."""
    codec = load_builtin_codec()
    specs = load_queries("queries:\n  - {name: calm, streams: [UP], question: direction_5, kind: choice, "
                         "choices: [down, flat]}\n  - {name: small, streams: [UP], question: move_bps_50, "
                         "kind: expectation, values: {'-0.3': -0.3, '+0.3': 0.3}}\n", questions=codec.questions)
    scores = LiveScores(codec.questions, committed=lambda stream: 0)
    for i in range(1, 201):  # a steady climb: every direction is "up", every 50-tick move large
        scores.observe(Tick("UP", 10**9 + i, "trade", price=100.0 * 1.001**i, size=1.0, side="buy"))
        for spec in specs:
            labels = spec.choices or tuple(spec.values)
            value = {"answer": labels[0], "probs": dict.fromkeys(labels, 0.5)}
            scores.expect(Answer(spec.name, "UP", f"{spec.name}/UP/", i, i, 10**9 + i, 0, value, "m"), spec)
    summary = scores.summary()
    for query, asked, horizon in (("calm", "choices", 5), ("small", "values", 50)):
        realised = 200 - horizon
        assert summary[query]["scored"] == 0 and summary[query]["unscorable"] == 0
        assert summary[query]["outside_labels"] == realised
        assert summary[query]["unscored_why"] == (f"realised label outside this query's {asked} ({realised} of "
                                                  f"{realised} answers realised): such an answer is not scored "
                                                  f"(docs/queries.md)")
