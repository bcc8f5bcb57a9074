"""Is the service live, and is it ready: the answers of `GET /healthz` and `GET /readyz` on the metrics port, and the
readiness figures of the `health` op (review351 #6, #8, #9).

A probe must not wait on the engine thread (a forward, a roll of the tick log: seconds, minutes when stalled), so
the HTTP thread decides from what the engine thread last left: the heartbeat's stats snapshot, and the time its
loop last turned. Liveness is only that the loop turns (limits.stall_s); readiness is that the service serves and
keeps up: not starting, its logs writable, not behind its limits, and no standing query's answers stale while its
own streams' ticks arrive (limits.max_answer_age_s, answer_freshness.py). docs/deployment.md says which probe to
wire to what.
"""

from __future__ import annotations

import time
from typing import Any

from engine.quoting import quoted
from engine.service.ages import age_said
from engine.service.metrics_text import lag_now


def not_ready_reasons(snapshot: dict[str, Any], loop_age_s: float | None, limits: Any,
                      now: float | None = None) -> list[dict[str, Any]]:
    """Why the service is not ready (empty: ready), each ``{"reason": code, "detail": words, ...figures}``, from
    a heartbeat's ``snapshot`` (or a starting one: ``starting`` holds the phase) and the seconds since the loop
    last turned (None while starting). The codes: starting, stalled, log_unavailable, shards_down, behind,
    answers_stale."""
    if snapshot.get("starting"):
        return [{"reason": "starting", "phase": snapshot["starting"],
                 "detail": f"the service is starting: {snapshot['starting']}"}]
    reasons: list[dict[str, Any]] = []
    if loop_age_s is not None and loop_age_s > limits.stall_s:
        reasons.append({"reason": "stalled", "loop_age_s": age_said(loop_age_s),
                        "detail": f"the engine loop has not turned for {loop_age_s:.1f} s (limits.stall_s="
                                  f"{limits.stall_s:g})"})
    if snapshot.get("log_problem"):
        reasons.append({"reason": "log_unavailable", "detail": f"disk full or not writable: {snapshot['log_problem']}"})
    down = [s for s in snapshot.get("shards") or () if s.get("state") != "serving"]
    if down:
        reasons.append({"reason": "shards_down", "detail": f"{len(down)} shard(s) not serving"})
    lag = lag_now(snapshot, now)
    if snapshot.get("behind"):
        reasons.append({"reason": "behind", "lag_s": lag, "pending_tokens": snapshot.get("pending_tokens", 0),
                        "detail": f"behind by {lag:.1f} s (limits.max_lag_s={limits.max_lag_s:g}, "
                                  f"{snapshot.get('pending_tokens', 0)} tokens wait for a forward)"})
    if snapshot.get("answers_stale"):
        age, names = snapshot.get("answer_age_s"), snapshot.get("stale_queries") or []
        reasons.append({"reason": "answers_stale", "answer_age_s": age, "stale_queries": names,
                        "detail": f"ticks of their own streams arrive but standing queries published no answer "
                                  f"within limits.max_answer_age_s={limits.max_answer_age_s:g} s: "
                                  f"{', '.join(quoted(name) for name in names)}; the newest answer of any query is "
                                  f"{'none yet' if age is None else f'{age:.1f} s old'}"})
    return reasons


def probe_reply(path: str, snapshot: dict[str, Any], loop_age_s: float | None,
                limits: Any) -> tuple[int, dict[str, Any]]:
    """The HTTP status and JSON body of ``path`` (`/healthz` or `/readyz`). `/healthz` is 200 while the process
    answers and its loop turns (a start in progress included: a start's own bound is the supervisor's start
    timeout), 503 once the loop has not turned for limits.stall_s; `/readyz` is 200 only when serving and not
    degraded, else 503 with every reason."""
    now = time.time()
    reasons = not_ready_reasons(snapshot, loop_age_s, limits, now)
    figures = {"lag_s": lag_now(snapshot, now), "answer_age_s": snapshot.get("answer_age_s"),
               "heartbeat_age_s": age_said(now - snapshot["stats_time"]) if "stats_time" in snapshot else None}
    if path == "/healthz":
        stalled = [r for r in reasons if r["reason"] == "stalled"]
        status = "starting" if snapshot.get("starting") else "stalled" if stalled else "live"
        return (503 if stalled else 200), {"live": not stalled, "status": status, "reasons": stalled,
                                           **({"phase": snapshot["starting"]} if snapshot.get("starting") else {})}
    status = reasons[0]["reason"] if reasons else "serving"
    return (503 if reasons else 200), {"ready": not reasons, "status": status, "reasons": reasons,
                                       **({} if snapshot.get("starting") else figures)}
