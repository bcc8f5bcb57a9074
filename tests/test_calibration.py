"""Per-question answer calibration: softmax(z / T + b) over a named question's answer logits, shipped as
calibration.json beside codec.json, fitted on a validation slice and applied wherever an answer is read.
Real tiny models, real files, real backtests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import torch
from transformers import LlamaForCausalLM

from conftest import tiny_tick_checkpoint
from connectors.builtin import load_builtin_codec, load_codec
from connectors.calibration import CALIBRATION_FILE, AnswerCalibration, Calibration, write_calibration
from connectors.codec import BinnedCodec
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.models import BUILTIN_MODEL_DIR
from engine.service.backtest import run_backtest
from engine.service.calibrate import fit_answer_calibration, time_halves
from engine.service.evaluation_report import uncalibrated_why
from engine.service.cli import main
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from queries.probe_answers import answer_value, calibrated_probs, compile_query
from queries.spec import QuerySpec

QUERIES = """
queries:
  - {name: dir5, streams: ["*"], question: direction_5, kind: choice, trigger: {ticks: 7}}
  - {name: move, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {ticks: 11}}
"""
CAL = {"direction_5": {"temperature": 1.7, "bias": [0.5, -0.3, 0.1]},
       "move_bps_50": {"temperature": 0.6, "bias": [0.2, 0, 0, 0, -0.4, 0, 0, 0, 0.3]}}


def _query(codec: BinnedCodec, question: str, kind: str = "choice"):
    return compile_query(QuerySpec.from_dict({"name": "q", "streams": ["*"], "question": question, "kind": kind}),
                         codec)


def _calibrated_checkpoint(directory: Path) -> Path:
    tiny_tick_checkpoint(directory)
    (directory / CALIBRATION_FILE).write_text(json.dumps({"format": "flashtick.calibration/1", "source": "test",
                                                          "questions": CAL}))
    return directory


def test_default_calibration_changes_nothing_bit_for_bit() -> None:
    torch.manual_seed(0)
    codec = BinnedCodec()
    for codec_ in (codec, codec.with_calibration(Calibration()),
                   codec.with_calibration(Calibration({"direction_5": AnswerCalibration(1.0, (0.0, 0.0, 0.0))}))):
        for question, kind in (("direction_5", "choice"), ("move_bps_50", "expectation")):
            query = _query(codec_, question, kind)
            logits = torch.randn(3, codec.vocab_size) * 4
            before = torch.softmax(logits[-1].float()[list(query.answer_ids)], dim=0)  # the formula answers had
            value = answer_value(query, [logits])
            assert list(value["probs"].values()) == [float(p) for p in before]
    z = torch.randn(1000, 5) * 6
    assert torch.equal(calibrated_probs(z), torch.softmax(z, dim=-1))
    assert load_codec(BUILTIN_MODEL_DIR).questions["direction_5"].calibration == \
        load_builtin_codec().questions["direction_5"].calibration


def test_fit_recovers_the_temperature_of_an_overconfident_model() -> None:
    gen = torch.Generator().manual_seed(0)
    n, true_t, true_b = 20_000, 2.5, torch.tensor([0.4, -0.5, 0.1], dtype=torch.float64)
    honest = torch.randn(n, 3, generator=gen, dtype=torch.float64) * 1.5
    y = torch.multinomial(torch.softmax(honest + true_b, dim=-1), 1, generator=gen)[:, 0]
    overconfident = honest * true_t  # the model's logits: right ranking, far too sharp, and no class bias
    cal = fit_answer_calibration(overconfident, y)
    assert cal.temperature == pytest.approx(true_t, rel=0.05)
    np.testing.assert_allclose(cal.bias, (true_b - true_b.mean()).numpy(), atol=0.08)
    assert cal.points == n and cal.nll_calibrated < cal.nll_raw - 0.1
    # On held-out draws from the same model the fitted calibration lowers the NLL too.
    honest2 = torch.randn(n, 3, generator=gen, dtype=torch.float64) * 1.5
    y2 = torch.multinomial(torch.softmax(honest2 + true_b, dim=-1), 1, generator=gen)[:, 0]
    nll = lambda p: float(-torch.log(p[torch.arange(n), y2]).mean())  # noqa: E731
    assert nll(calibrated_probs(honest2 * true_t, cal.temperature, cal.bias)) < \
        nll(torch.softmax(honest2 * true_t, -1)) - 0.1
    few = fit_answer_calibration(overconfident[:50], y[:50])
    assert few.identity and few.points == 50  # too few points: left uncalibrated
    # answers nearly all one (a calm slice's volatility): nothing to fit, only a model made surer of that answer
    calm = torch.cat([torch.zeros(1000, dtype=torch.int64), torch.ones(19, dtype=torch.int64)])
    one = fit_answer_calibration(overconfident[:1019], calm)
    assert one.identity and one.points == 1019
    calm[:20] = 2  # 20 of a second answer: fitted
    assert not fit_answer_calibration(overconfident[:1019], calm).identity


def test_a_calibration_that_does_not_help_out_of_sample_is_not_kept() -> None:
    """review226 #2: logits that carry nothing (a random walk) were calibrated to T = 3e8 with biases that fit
    the validation part's drift, making test Brier worse than the raw answers. T and b are now bounded, and a fit
    is kept only when it beats no calibration on the half of the points it was not fitted to (both halves)."""
    gen = torch.Generator().manual_seed(1)
    n = 1200
    noise = torch.randn(n, 3, generator=gen, dtype=torch.float64) * 0.3  # no signal at all
    # overlapping horizons: the label drifts in runs of 50 points, so the classes' shares differ between halves
    y = torch.cat([torch.full((50,), int(k)) for k in torch.randint(0, 3, (n // 50,), generator=gen)])
    cal = fit_answer_calibration(noise, y)
    assert cal.identity and cal.nll_calibrated is None, cal
    why = uncalibrated_why(cal.to_dict())
    assert why.startswith(f"{n} validation points; fitted on either half, it did not beat no calibration on the "
                          f"other, each half alone (held out, both halves together: NLL {cal.heldout_nll_raw} -> "
                          f"{cal.heldout_nll_calibrated} nats"), why
    # the same noise with labels drawn from fixed frequencies: whatever is fitted stays within its bounds
    y = torch.multinomial(torch.tensor([0.3, 0.4, 0.3]), n, replacement=True, generator=gen)
    kept = fit_answer_calibration(noise, y)
    assert 0.25 <= kept.temperature <= 4 and all(abs(b) <= 3 for b in kept.bias), kept
    assert AnswerCalibration.from_dict(kept.to_dict()) == kept
    # three such walks fitted together (stream after stream): each half holds every stream's drift, still refused
    walks = torch.cat([torch.full((50,), int(k)) for k in torch.randint(0, 3, (3 * n // 50,), generator=gen)])
    noise = torch.randn(3 * n, 3, generator=gen, dtype=torch.float64) * 0.3
    assert fit_answer_calibration(noise, walks, stream=np.repeat([0, 1, 2], n)).identity


def test_the_held_out_halves_are_each_streams_own_halves_in_time() -> None:
    """Both halves hold every stream: the first half in time of each stream's points against its second half (the
    points come stream after stream, and were halved as they came: on a multi-stream fit, mostly other streams)."""
    stream = np.array([2] * 7 + [0] * 4 + [5] + [1] * 6)  # stream ids as validation_pairs gives them, any labels
    second = time_halves(stream)
    assert second.dtype == np.bool_ and second.shape == stream.shape  # one bool a point: no point in two halves
    for s in (2, 0, 1):
        own = second[stream == s]  # this stream's points, in time order
        assert 0 < own.sum() < len(own) and abs(2 * int(own.sum()) - len(own)) <= 1  # in both halves, evenly
        assert list(own) == sorted(own)  # the first half in time, then the second: contiguous, not interleaved
    assert second[stream == 5].all()  # one point: in one half only
    one = time_halves(np.zeros(9, dtype=np.int64))  # one stream: split where the points were halved before, at n // 2
    assert not one[:4].any() and one[4:].all()


def test_a_calibration_that_helps_every_stream_is_kept_though_one_streams_fit_hurts_the_other() -> None:
    """Two streams whose logits are over-confident by different amounts (T 4 and 1.8). Halved as the points came,
    the halves were the two streams: a fit on the first (T ~4) made the second's answers worse, so it was refused,
    though the fit on both helps each stream on fresh draws. Each half now holds both streams, and it is kept."""
    gen = torch.Generator().manual_seed(0)

    def draw(n: int, t: float) -> tuple[torch.Tensor, torch.Tensor]:
        honest = torch.randn(n, 3, generator=gen, dtype=torch.float64) * 1.5
        return honest * t, torch.multinomial(torch.softmax(honest, -1), 1, generator=gen)[:, 0]

    (za, ya), (zb, yb) = draw(2000, 4.0), draw(2000, 1.8)
    z, y = torch.cat([za, zb]), torch.cat([ya, yb])
    halved_as_they_came = fit_answer_calibration(z, y)  # what the single-stream default does with these points
    assert halved_as_they_came.identity and halved_as_they_came.heldout_nll_raw is not None
    cal = fit_answer_calibration(z, y, stream=np.repeat([0, 1], 2000))
    assert not cal.identity and cal.heldout_nll_calibrated < cal.heldout_nll_raw, cal
    for t in (4.0, 1.8):  # out of sample, on each stream alone: NLL and Brier both better than the raw answers
        zt, yt = draw(20_000, t)

        def scores(p: torch.Tensor) -> tuple[float, float]:
            onehot = torch.nn.functional.one_hot(yt, 3).double()
            return float(-p[torch.arange(len(yt)), yt].log().mean()), float((p - onehot).square().sum(-1).mean())

        calibrated, raw = scores(calibrated_probs(zt, cal.temperature, cal.bias)), scores(torch.softmax(zt, -1))
        assert calibrated[0] < raw[0] and calibrated[1] < raw[1], (t, calibrated, raw)


def test_calibrated_checkpoint_answers_through_a_real_backtest(tmp_path: Path) -> None:
    model_dir = _calibrated_checkpoint(tmp_path / "model")
    ticks = SyntheticMarket(SyntheticConfig(seed=4)).next_batch(400)  # ~100 ticks a stream: no window policy
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(tmp_path / "ticks.parquet")
    (tmp_path / "q.yaml").write_text(QUERIES)
    config = ServiceConfig.from_dict({"model": {"path": str(model_dir)}, "kv": {"cells": 8192, "block_size": 16}})
    run_backtest(config, [tmp_path / "ticks.parquet"], tmp_path / "q.yaml", tmp_path / "a.parquet", progress=False)
    table = pl.read_parquet(tmp_path / "a.parquet")
    codec, hf = load_codec(model_dir), LlamaForCausalLM.from_pretrained(model_dir).eval()
    by_stream: dict[str, list] = {}
    for t in ticks:
        by_stream.setdefault(t.stream, []).append(t)
    checked = 0
    for query, question in (("dir5", "direction_5"), ("move", "move_bps_50")):
        q = codec.questions[question]
        t_, b = CAL[question]["temperature"], torch.tensor(CAL[question]["bias"])
        # model_probs: the calibrated model answer (probs is that answer mixed online with the stream's outcomes)
        for stream, n, probs in table.filter(pl.col("query") == query).select("stream", "ticks",
                                                                               "model_probs").rows()[:6]:
            tokens = codec.encode_stream(by_stream[stream][:n]) + q.tokens
            with torch.no_grad():
                z = hf(torch.tensor([tokens])).logits[0, -1, list(q.answers.values())].float()
            expected = torch.softmax(z / t_ + b, dim=-1)
            got = torch.tensor([json.loads(probs)[label] for label in q.labels])
            torch.testing.assert_close(got, expected, atol=2e-5, rtol=0)
            assert (got - torch.softmax(z, -1)).abs().max() > 0.01  # the calibration made a difference
            checked += 1
    assert checked == 12


def _bad(tmp_path: Path, questions: dict, top: dict | None = None) -> str:
    model_dir = tmp_path / "bad"
    if not (model_dir / "codec.json").is_file():
        tiny_tick_checkpoint(model_dir)
    body = {"format": "flashtick.calibration/1", "questions": questions} | (top or {})
    (model_dir / CALIBRATION_FILE).write_text(json.dumps(body))
    with pytest.raises(ValueError) as e:
        load_codec(model_dir)
    return str(e.value)


@pytest.mark.parametrize("questions, top, named", [
    ({"direction_5": {"temperature": -1.0}}, None, "questions.direction_5: temperature must be a finite number > 0"),
    ({"direction_5": {"temperature": 0}}, None, "temperature must be a finite number > 0, got 0"),
    ({"direction_5": {"temperature": "hot"}}, None, "temperature must be a finite number > 0"),
    ({"direction_5": {"bias": [0.1, 0.2]}}, None, "questions.direction_5.bias: 3 answers need 3 biases, got 2"),
    ({"direction_5": {"bias": [0.1, float("inf"), 0]}}, None, "bias must be finite numbers"),
    ({"direction_5": {"temprature": 2.0}}, None, 'unknown keys "temprature" (known: bias, heldout_brier_calibrated, '),
    ({"direction_7": {"temperature": 2.0}}, None, "questions.direction_7: not a question of this codec"),
    ({}, {"scale": 2}, 'unknown keys "scale"'),
    ({}, {"format": "other"}, 'format must be "flashtick.calibration/1"'),
])
def test_bad_calibration_is_refused_naming_the_key(tmp_path: Path, questions, top, named) -> None:
    message = _bad(tmp_path, questions, top)
    assert named in message and CALIBRATION_FILE in message


def test_calibration_in_codec_json_is_refused_and_serve_names_the_file(tmp_path: Path, capsys) -> None:
    model_dir = tiny_tick_checkpoint(tmp_path / "m")
    spec = json.loads((model_dir / "codec.json").read_text())
    spec["spec"]["questions"][0]["temperature"] = 2.0  # calibration lives in calibration.json, not the codec spec
    (model_dir / "codec.json").write_text(json.dumps(spec))
    with pytest.raises(ValueError, match=r'unknown question spec keys "temperature" \(known: "description", "edges"'):
        load_codec(model_dir)
    tiny_tick_checkpoint(model_dir)
    (model_dir / CALIBRATION_FILE).write_text(json.dumps({"format": "flashtick.calibration/1",
                                                          "questions": {"regime": {"temperature": -2}}}))
    (tmp_path / "q.yaml").write_text(QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=4)).next_batch(50)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(tmp_path / "ticks.parquet")
    rc = main(["backtest", str(tmp_path / "ticks.parquet"), "--queries", str(tmp_path / "q.yaml"), "--model",
               str(model_dir), "--out", str(tmp_path / "a.parquet")])
    err = capsys.readouterr().err
    assert rc == 2 and "calibration.json" in err and "questions.regime: temperature" in err


def test_train_writes_the_calibration_and_serve_loads_it(tmp_path: Path, capsys) -> None:
    from test_train_evaluate import TINY, write_ticks

    ticks = write_ticks(tmp_path / "ticks.parquet", 6000)
    out = tmp_path / "model"
    # an earlier checkpoint there, with a calibration the new weights must not inherit
    write_calibration(out.mkdir() or out, Calibration({"regime": AnswerCalibration(3.0)}, "stale"))
    (out / "config.json").write_text("{}")
    argv = ["train", str(ticks), "--out", str(out), *TINY, "--steps", "2", "--batch", "2"]
    assert main(argv + ["--quiet"]) == 2 and "--overwrite to replace the checkpoint" in capsys.readouterr().err
    rc = main([*argv, "--overwrite", "--eval-every", "2", "--max-points", "400", "--resamples", "20", "--json"])
    assert rc == 0, capsys.readouterr().err
    record = json.loads(capsys.readouterr().out)
    assert "synthetic_ticks" not in record["config"] and record["config"]["steps"] == 2  # this run's, not the recipe's
    cal = Calibration.from_json((out / CALIBRATION_FILE).read_text())
    assert "validation part" in cal.source and "regime" not in cal.questions  # refitted, not the stale file
    assert set(cal.questions) == {"direction_5", "direction_20", "volatility_50", "move_bps_50"}
    # each fitted, then kept only where its cross-fitted halves beat no calibration (else T = 1, b = 0, said why)
    assert all(c.points > 200 and c.heldout_nll_raw is not None for c in cal.questions.values())
    assert all(c.nll_calibrated <= c.nll_raw and c.heldout_nll_calibrated < c.heldout_nll_raw
               if c.nll_calibrated is not None else c.identity for c in cal.questions.values())
    # 2 steps from scratch on 4 unlike streams, each half holding every stream's first or second half in time (as
    # the points came, the halves were the first two streams against the last two, and nothing was kept): the
    # directions' fits beat no calibration on both (and lower the test slice's Brier of the model alone: direction_20
    # 0.658 -> 0.538), volatility_50's and move_bps_50's do not (held-out NLL 2.21 -> 3.00 for move_bps_50)
    assert not cal.questions["direction_20"].identity and cal.questions["move_bps_50"].identity, cal
    assert record["calibration"]["questions"]["volatility_50"]["temperature"] == 1.0
    card = (out / "TRAINING.md").read_text()
    assert "Answer calibration" in card and ("`volatility_50`: not calibrated (temperature 1, no bias): "
                                             "500 validation points; fitted on either half, it did not beat no "
                                             "calibration on the other, each half alone (held out, both halves "
                                             "together: NLL ") in card, card
    evaluation = record["evaluation"]["questions"]
    assert {"model", "prior"} <= set(evaluation["volatility_50"]["scores"])
    assert "raw" not in evaluation["volatility_50"]["scores"] and "raw" in evaluation["direction_20"]["scores"]
    served = TickPipeline(ServiceConfig.from_dict({"model": {"path": str(out)}})).codec.questions
    assert served["direction_20"].calibration == cal.questions["direction_20"]
    assert not served["direction_20"].calibration.identity
    assert served["volatility_50"].calibration.identity
    # No validation part: say so (final table and model card) and ship T = 1, b = 0.
    rc = main([*argv, "--overwrite", "--split", "70/30", "--max-points", "200", "--resamples", "20", "--quiet"])
    assert rc == 0, capsys.readouterr().err
    cal = Calibration.from_json((out / CALIBRATION_FILE).read_text())
    assert cal.identity and "no validation part" in cal.source
    table = capsys.readouterr().out
    assert "answers not calibrated (none: the split has no validation part" in table and "  raw" not in table
    assert "no validation part" in (out / "TRAINING.md").read_text()
