"""The service client commands on its state: `stats` (its counters), `scores` (live scores per query) and
`health` (up, starting or degraded, or busy: its exit status says which).
"""

from __future__ import annotations

import argparse
import sys

from engine.service.cli_common import control_client, printable_json, say_failure_as_json
from engine.service.exit_codes import PARTIAL, SERVICE_BUSY


def cmd_stats(args: argparse.Namespace) -> None:
    with control_client(args) as control:
        print(printable_json(control.call("stats")["stats"], sort_keys=True, indent=2))


# the same names as a backtest's hindsight baselines (engine/service/backtest_report.py), other numbers: said
ONLINE_BASELINES = ("majority, freq.brier: online, each stream's most frequent label and class frequencies (add-one "
                    "smoothed) among the labels realised before each answer; a backtest's, in hindsight over its "
                    "files, differ on the same answers")


def cmd_scores(args: argparse.Namespace) -> None:
    from connectors.ticks import shown_name

    with control_client(args) as control:
        stats = control.call("stats")["stats"]
    scores = stats.get("scores", {})
    if args.json:
        print(printable_json(scores, sort_keys=True, indent=2))
        return
    if not scores:  # the line saying why, without a table header above no rows
        if stats.get("named_questions") == []:  # a text model: "yet" would have its user wait for nothing
            from connectors.labels import NO_LABEL_DEFINED

            print(f"(no answer scored: {NO_LABEL_DEFINED}; the model served, {stats.get('model')}, is a text model, "
                  f"so only its scored_as queries are scored, once their horizon has passed)")
        else:
            print("(no standing query on a named question with a realised answer has published yet)")
        return
    fmt = lambda x: f"{x:.3f}" if x is not None else "-"  # noqa: E731
    print(f"{'query':<16}{'scored':>8}{'pending':>8}{'accuracy':>10}{'majority':>10}{'brier':>8}{'freq.brier':>11}"
          f"{'model brier':>12}  worse than the class frequencies on")
    for query, s in scores.items():
        worse = ", ".join(f"{shown_name(w['stream'])} ({fmt(w['brier'])} vs {fmt(w['prior_brier'])})"
                          for w in s["worse_than_prior"])
        print(f"{query:<16}{s['scored']:>8}{s['pending']:>8}{fmt(s['accuracy']):>10}{fmt(s['majority_accuracy']):>10}"
              f"{fmt(s['brier']):>8}{fmt(s['prior_brier']):>11}{fmt(s.get('model_brier')):>12}  {worse or '-'}")
    print(ONLINE_BASELINES)
    for query, s in scores.items():  # answers of a query asking a subset of a question's answers (its choices)
        if s.get("unscored_why"):
            print(f"note: {query}: {s['unscored_why']}")
        if s.get("saturated_why"):
            print(f"note: {query}: {s['saturated_why']}")
        if s.get("one_class_why"):  # an inner bucket on nearly every label: accuracy there is no skill
            print(f"note: {query}: {s['one_class_why']}")
        if s.get("across_gap"):  # answers.session_gap_s at work: otherwise they would pass for pending or lost
            print(f"note: {query}: {s['across_gap']} answers not scored because their horizon crossed a pause of "
                  f"answers.session_gap_s or more (across_gap)")
        thin = s.get("thin_streams") or {}
        if thin.get("scored") and thin["brier"] > thin["prior_brier"]:  # too few answers a stream to be named
            print(f"note: {query}: worse than the class frequencies on the {thin['streams']} streams with too few "
                  f"answers scored to be named one by one ({thin['scored']} answers pooled): brier "
                  f"{fmt(thin['brier'])} vs {fmt(thin['prior_brier'])}")




def cmd_health(args: argparse.Namespace) -> int | None:
    from engine.service.control_client import TINY_REPLY_S, ControlBusy

    # a probe given less waited out even an idle service's reply on a loaded host and exited "down" (2, 4 since
    # review337), which a liveness probe restarts on: refused before asking, the same every time, so it shows when
    # the probe is set up
    if args.timeout < TINY_REPLY_S:
        raise ValueError(f"--timeout must be at least {TINY_REPLY_S:g} s, got {args.timeout:g}: a reply takes about "
                         f"that even from an idle service, so a shorter wait would call a live one down (exit 4)")
    try:
        with control_client(args) as control:
            reply = control.call("health")
    except ControlBusy as e:  # up but late: its own status, so a probe tells it from down (4)
        said = f"{e} (exit 3: up, but no reply in time; `flashtick health --help`)"
        print(f"flashtick health: error: {said}", file=sys.stderr)
        say_failure_as_json("flashtick health", said, SERVICE_BUSY)  # stdout is JSON, a failure's too
        return SERVICE_BUSY
    print(printable_json({k: v for k, v in reply.items() if k != "ok"}, sort_keys=True))
    if reply.get("status") != "serving":  # a readiness check: 0 once it serves, 1 while it starts or is degraded
        return PARTIAL
