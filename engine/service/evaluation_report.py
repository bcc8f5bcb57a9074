"""The evaluation report: what `flashtick evaluate` and `flashtick train` print of an evaluation result (the dict
engine/service/evaluate.py `evaluate_streams` returns), and its calibration plot.

The per-question table with its notes (which answer points, where the split fell in event time, calibration and
answer heads), the verdict in words and the numbers' text. Nothing here computes a score: it renders one, so the
scoring in evaluate.py reads without the wording, and a changed line of the report is found here by its name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from connectors.ticks import shown_name
from engine.service.evaluate import MIN_POINTS, MIN_SECOND_ANSWER
from engine.service.split_closures import closure_text
from engine.service.text_columns import name_width, padded

BURST_SHARE = 0.3  # above this share of a test part's ticks in bursts, every-tick scores differ from a backtest's
MIN_BLOCKS = 5  # a test slice of fewer bootstrap blocks gets no verdict: its percentile interval is degenerate
PART_STREAMS_NAMED = 8  # streams whose parts are listed one by one when the overall line would look like a leak
CLEAR = 5e-4  # an interval bound nearer 0 than this prints as +0.000: not "clear of 0"
SHORT_COLUMNS = {"majority": "major", "logistic": "logit", "adapted": "adapt"}


def answer_points_line(points: dict[str, Any]) -> str:
    """Which ticks `evaluate` (and `train`'s table) scored, and when many ticks share a burst, that a backtest's
    batch-end answers score differently, and the option that scores those instead."""
    if points["batch_ms"] is not None:
        return (f"answer points: the last tick of each {points['batch_ms']:g} ms event-time batch of the test part, "
                f"where `backtest --batch-ms {points['batch_ms']:g}` answers a stream (trigger: batch)")
    line = "answer points: every labelled tick of the test part"
    if points["within_1ms_of_next"] > BURST_SHARE:
        line += (f"; note: {points['within_1ms_of_next']:.0%} of its ticks are within 1 ms of the next (bursts): "
                 f"a backtest answers only at the end of each event-time batch (--batch-ms, 100 ms by default), "
                 f"never mid-burst, and scores differently; --batch-ms 100 scores those points instead")
    return line


def uncalibrated_why(calibration: dict[str, Any]) -> str | None:
    """Why a question's answer calibration (its calibration.json entry) was left at T = 1, b = 0; None if fitted."""
    if calibration.get("nll_calibrated") is not None:
        return None
    if calibration.get("heldout_nll_raw") is not None:  # fitted, then refused out of sample
        return (f"{calibration['points']} validation points; fitted on either half, it did not beat no calibration "
                f"on the other, each half alone (held out, both halves together: {heldout_text(calibration)}): the "
                f"answers would only fit this part's noise")
    if calibration["points"] < MIN_POINTS:
        return f"{calibration['points']} validation points, fewer than {MIN_POINTS}"
    return (f"{calibration['points']} validation points, fewer than {MIN_SECOND_ANSWER} of them not the most common "
            f"answer: nothing to fit, and no answer head")


def heldout_text(calibration: dict[str, Any]) -> str:
    """A calibration's cross-fitted scores: each half of its points scored by the fit on the other half."""
    c = calibration
    return (f"NLL {c['heldout_nll_raw']} -> {c['heldout_nll_calibrated']} nats, Brier {c['heldout_brier_raw']} -> "
            f"{c['heldout_brier_calibrated']}")


def _times_text(times: dict[str, list[str] | None]) -> str:
    return "; ".join(f"{part} {span[0]} to {span[1]}" for part, span in times.items() if span)


def part_times_lines(result: dict[str, Any], by_stream: bool) -> list[str]:
    """Where the split fell in event time: the overall line, and each stream's with ``by_stream``. The split is per
    stream, so streams over different hours (consecutive contracts, H4 then M4) give overall parts that overlap
    (training ending after the test part starts) though no stream's do: then each stream's own line is printed
    instead (up to PART_STREAMS_NAMED of them; beyond, the overall line says what it is)."""
    overall = result["part_times"]
    own = {stream: part["times"] for stream, part in result.get("streams", {}).items()}
    spans = [[_in_order(end) for end in span] for span in overall.values() if span]
    looks_leaky = len(own) > 1 and any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))
    each = [f"  {shown_name(stream)}: {_times_text(times)}" for stream, times in own.items()]
    if looks_leaky and not by_stream and len(own) <= PART_STREAMS_NAMED:
        return ["parts (UTC event times), each stream's own (the split is per stream, in tick order)"
                f"{closure_text(result.get('split_closures', []))}:", *each]
    line = f"parts (UTC event times): {_times_text(overall)}{closure_text(result.get('split_closures', []))}"
    if looks_leaky and not by_stream:
        line += (f" (the earliest and latest over {len(own)} streams, each split on its own in tick order: "
                 f"--by-stream prints each stream's)")
    return [line, *(each if by_stream and len(own) > 1 else [])]


def _in_order(utc: str) -> str:
    """utc_text of a whole second padded to the width of one with ns, so that text order is time order."""
    return utc if "." in utc else f"{utc[:-1]}.000000000Z"


def format_table(result: dict[str, Any], by_stream: bool = False) -> str:
    """The per-question table `evaluate` and `train` print; a calibrated checkpoint also gets its `raw`
    (uncalibrated) accuracy and Brier beside the calibrated `model` ones; ``by_stream``: under each question,
    a row per stream (of several) from the same answers (no intervals: the verdict is the pooled one's)."""
    questions = result["questions"].values()
    raw = [c for c in ("raw", "alone", "adapted") if any(c in r["scores"] for r in questions)]
    acc_cols, brier_cols = [*raw, "prior", "majority", "logistic"], [*raw, "prior", "logistic"]
    head = lambda cols: "".join(f"{SHORT_COLUMNS.get(c, c):>7}" for c in cols)  # noqa: E731
    # the name column as wide as its longest name in terminal cells (a CJK stream name takes two a character)
    width = name_width([*result["questions"], *(f"  {shown_name(stream)}" for r in questions
                                                for stream in (r.get("by_stream", {}) if by_stream else {}))], 15)
    lines = [f"{padded('question', width)}{'n':>7}  {'accuracy: model':>15}{head(acc_cols)}  {'Brier: model':>12}"
             f"{head(brier_cols)}  model-logit acc [95% CI]   Brier [95% CI]"]
    few = [name for name, r in result["questions"].items() if r.get("blocks", MIN_BLOCKS) < MIN_BLOCKS]
    lines += _question_rows(result, acc_cols, brier_cols, few, by_stream, width)
    if "answer_points" in result:
        lines.append(answer_points_line(result["answer_points"]))
    if "part_times" in result:
        lines += part_times_lines(result, by_stream)
    lines += _legend_lines(result, raw, few, by_stream)
    lines += _calibration_lines(result, raw)
    return "\n".join([*lines, *verdict_lines(result)])


def _question_rows(result: dict[str, Any], acc_cols: list[str], brier_cols: list[str], few: list[str],
                   by_stream: bool, width: int = 15) -> list[str]:
    """A row per question (its scores, model minus logistic with intervals, * where too ``few`` blocks to call),
    each followed, with ``by_stream``, by its streams' rows."""
    lines = []
    for name, r in result["questions"].items():
        s, d = r["scores"], r["model_minus"]["logistic"]
        mark = "*" if name in few else ""
        ci = lambda x: f"{signed(x['diff'])} [{signed(x['lo'])},{signed(x['hi'])}]{mark}"  # noqa: E731
        lines.append(f"{padded(name, width)}{r['n']:>7}  {scores_row(s, acc_cols, brier_cols)}  "
                     f"{ci(d['accuracy']):<26} {ci(d['brier'])}")
        lines += [f"{padded('  ' + shown_name(stream), width)}{part['n']:>7}  "
                  f"{scores_row(part['scores'], acc_cols, brier_cols)}"
                  for stream, part in (r.get("by_stream", {}) if by_stream else {}).items()]
    return lines


def _legend_lines(result: dict[str, Any], raw: list[str], few: list[str], by_stream: bool) -> list[str]:
    """What the indented rows, the * and the adapt column mean, where the table has them."""
    lines = []
    if by_stream and any("by_stream" in r for r in result["questions"].values()):
        lines.append("indented: each stream's own rows of the same answers (prior, majority: its train part's "
                     "frequencies; logistic: the one regression, pooled over streams); weighted by n they add up to "
                     "the question's row")
    if few:
        block = result.get("options", {}).get("block")
        lines.append(f"*: fewer than {MIN_BLOCKS} blocks of {block} test points: the interval is no interval "
                     f"(more ticks, or a smaller --block)")
    if "adapted" in raw:
        lines.append("adapt: the model's answers mixed online with each stream's realised labels (answers.adapt: "
                     "online), what serving publishes")
    return lines


def _calibration_lines(result: dict[str, Any], raw: list[str]) -> list[str]:
    """How the model's answers were read: calibrated or not (and why not), and blended by answer heads."""
    lines = []
    source = result.get("calibration_source")
    # why a question the checkpoint's calibration was fitted on kept T = 1, b = 0 (its calibration.json entry)
    why = {name: uncalibrated_why(r["answer_calibration"]) for name, r in result["questions"].items()
           if r.get("answer_calibration", {}).get("points")}  # (none where no part was fitted on)
    said = "; ".join(f"{name} {reason}" for name, reason in why.items() if reason)
    if "raw" in raw:  # the others' rows show raw = model, which said nothing of why
        lines.append(f"model: calibrated on {source}; raw: the same logits uncalibrated"
                     + (f"; not calibrated (model = raw): {said}" if said else ""))
    elif source is not None and result["questions"]:  # (no question, no answers to say anything of)
        lines.append(f"model: answers not calibrated: {said} (calibration source: {source})" if said else
                     f"model: answers not calibrated ({source})" if source.startswith("none") else
                     f"model: answers not calibrated: the checkpoint's calibration (from {source}) covers none of "
                     f"these questions")
    if headed := {name: r["answer_head"]["model_weight"] for name, r in result["questions"].items()
                  if "answer_head" in r}:
        lines.append("model: then blended by the checkpoint's answer heads, w x model + (1 - w) x its logistic "
                     "regression on the stream's features (answer_head.json; alone: the calibrated model without "
                     "them): " + ", ".join(f"{name} w {w:g}" for name, w in headed.items()))
    return lines


def scores_row(scores: dict[str, dict[str, float]], acc_cols: list[str], brier_cols: list[str]) -> str:
    """The model's accuracy and the columns' beside it, then its Brier and theirs (a column a question lacks
    shows the model's)."""
    row = lambda cols, m: "".join(f"{scores.get(c, scores['model'])[m]:>7.3f}" for c in cols)  # noqa: E731
    return (f"{scores['model']['accuracy']:>15.3f}{row(acc_cols, 'accuracy')}  {scores['model']['brier']:>12.3f}"
            f"{row(brier_cols, 'brier')}")


def signed(x: float) -> str:
    """A difference to 3 decimals with its sign; one nearer 0 than CLEAR is +0.000 (never -0.000, which reads as
    clear of 0 below it)."""
    return f"{0.0 if abs(x) < CLEAR else x:+.3f}"


# each call of the logistic regression, in the order the verdict names them, and its words
CALLS = (("better", "beats the logistic regression (a 95% interval clear of 0 in its favour, none against)"),
         ("mixed", "better than the logistic regression on one of accuracy and Brier, worse on the other"),
         ("level", "level with the logistic regression (neither interval clear of 0)"),
         ("worse", "worse than the logistic regression"),
         ("few", f"too few test points to call (under {MIN_BLOCKS} bootstrap blocks)"),
         ("one", "nothing to call against the logistic regression: every test answer is one class (the "
                 "question's buckets do not split this instrument's test slice)"),
         ("regression", "not called against the logistic regression: the answers are a logistic regression too, "
                        "the answer head's (w 0, below), so a difference is one regression's against the other's"))


class _Calls(NamedTuple):
    """The questions of a result by what the verdict says of them."""

    kinds: dict[str, list[str]]  # by their call of the logistic regression (CALLS)
    naive: list[str]  # below a naive forecast, an interval clear of 0
    level_naive: list[str]  # below a naive forecast as measured, within the interval
    hindsight: list[str]  # beat the logistic regression, not the test part's own class frequencies


def _calls(result: dict[str, Any]) -> _Calls:
    """Each question's call against the logistic regression, the naive forecasts and hindsight."""
    calls = _Calls({kind: [] for kind, _ in CALLS}, [], [], [])
    for name, r in result["questions"].items():
        s, d = r["scores"], r["model_minus"]["logistic"]
        if s["majority"]["accuracy"] == 1.0:  # every test answer is one class: no skill to call, but a model that
            calls.kinds["one"].append(f"{name} ({_one_class_counts(r)})")  # misses it is still below the majority
            _naive_call(calls, name, r)
            continue
        if r.get("blocks", MIN_BLOCKS) < MIN_BLOCKS:
            calls.kinds["few"].append(name)
            continue
        if _regression_only(r):  # "beats the logistic regression" beside "the regression's alone" (review396 #2)
            calls.kinds["regression"].append(name)
            _naive_call(calls, name, r)
            continue
        acc, brier = d["accuracy"], d["brier"]
        # an interval clear of 0 in the model's favour, by as much as the table shows (+0.000 [+0.000,+0.000]
        # is a tie: a question whose answers barely move, where both forecasts say the same)
        better = acc["lo"] >= CLEAR or brier["hi"] <= -CLEAR
        worse = acc["hi"] <= -CLEAR or brier["lo"] >= CLEAR
        calls.kinds["mixed" if better and worse else "better" if better else "worse" if worse else "level"].append(
            name)
        if better and not worse and (known := r["model_minus"].get("hindsight")) and known["brier"]["hi"] > -CLEAR:
            calls.hindsight.append(name)
        _naive_call(calls, name, r)
    return calls


def _naive_call(calls: _Calls, name: str, r: dict[str, Any]) -> None:
    """Whether question ``name`` (its result ``r``) is below a naive forecast: by an interval, or as measured. A
    test slice of fewer than MIN_BLOCKS blocks gets no such call: its interval is no interval, so "clear of 0" would
    be said of a point (review441 #8, review443 #5: a one-class slice of 80 points was called below the majority)."""
    if r.get("blocks", MIN_BLOCKS) < MIN_BLOCKS:
        return
    s = r["scores"]
    majority, prior = r["model_minus"].get("majority"), r["model_minus"].get("prior")
    if (majority and majority["accuracy"]["hi"] <= -CLEAR) or (prior and prior["brier"]["lo"] >= CLEAR):
        calls.naive.append(name)  # an interval clear of 0 against the model
    elif s["model"]["accuracy"] < s["majority"]["accuracy"] or s["model"]["brier"] > s["prior"]["brier"]:
        calls.level_naive.append(name)  # worse as measured, within the interval


def _one_class_counts(r: dict[str, Any]) -> str:
    """How many test answers of a one-class question the model got, beside the majority class's (all of them): a
    model 100% wrong and one 100% right are not alike."""
    accuracy = r["scores"]["model"]["accuracy"]
    if (n := r.get("n")) is None:
        return f"the model right on {accuracy:.1%}, the majority class on all"
    return f"the model right on {round(accuracy * n):,} of {n:,}, the majority class on all {n:,}"


def verdict_lines(result: dict[str, Any]) -> list[str]:
    """The table in words: per question, whether the model beats what a quant fits first (the logistic
    regression, by its 95% interval) and the naive forecasts (majority class, the class frequencies' Brier)."""
    calls = _calls(result)
    said = [f"{what}: {', '.join(calls.kinds[kind])}" for kind, what in CALLS if calls.kinds[kind]]
    streams = len(result.get("streams", {}))
    # one regression over every instrument (no per-instrument intercept), against naive forecasts that are each
    # stream's own: the regression can lose to them by far, and "beats the logistic regression" then means little
    pooled = f" (the logistic regression is one fit pooled over the {streams} streams)" if streams > 1 else ""
    if not said:  # no question to call: no blank verdict
        return []
    lines = [f"verdict: {'; '.join(said)}{pooled}"]
    if calls.naive:
        matters = (": this is the verdict that matters, whatever the pooled logistic regression did (the naive "
                   "forecasts are each stream's own)") if pooled else ""
        lines.append(f"verdict: below a naive forecast (the majority class's accuracy or the class frequencies' "
                     f"Brier, a 95% interval clear of 0) on {', '.join(calls.naive)}: no edge there{matters}")
    if calls.hindsight:
        lines.append(f"verdict: on {', '.join(calls.hindsight)}, no better Brier than the test part's own class "
                     f"frequencies (hindsight: each stream's classes as they turned out, which no forecast knows in "
                     f"advance; a 95% interval not clear of 0 in the model's favour): the edge over the baselines may "
                     f"be the test part's drift or class balance the model leaned into, not a call of each answer")
    if calls.level_naive:
        lines.append(f"verdict: level with a naive forecast (below it as measured, within the 95% interval) on "
                     f"{', '.join(calls.level_naive)}: no edge shown there")
    return lines + _regression_only_lines(result)


def _regression_only_lines(result: dict[str, Any]) -> list[str]:
    """An answer head that gives the model no weight answers with its logistic regression alone: "level" is then
    the same forecast twice, and what the model itself did is the `alone` column."""
    regression_only = [f"{name} (the model alone: accuracy {r['scores']['alone']['accuracy']:.3f}, Brier "
                       f"{r['scores']['alone']['brier']:.3f})" for name, r in result["questions"].items()
                       if _regression_only(r) and "alone" in r["scores"]]
    if not regression_only:
        return []
    return [f"verdict: the answers are the logistic regression's alone (answer head w 0: validation found "
            f"the model adds nothing to it) on {', '.join(regression_only)}"]


def _regression_only(r: dict[str, Any]) -> bool:
    """Whether a question's answers are its answer head's logistic regression alone (w 0: no weight on the model)."""
    return r.get("answer_head", {}).get("model_weight") == 0


def plot(result: dict[str, Any], path: Path, who: str) -> bool:
    from engine.service.calibration_plot import plot_calibration

    curves = {f"{name} (n={r['n']})": r["calibration"] for name, r in result["questions"].items()}
    return plot_calibration(path, curves, "model calibration on the test slice", who)
