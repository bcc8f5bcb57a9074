"""A client that never saw our Python code, part 2: answers and control. Answer topics and payloads, seqs, gap
fills, late and returning subscribers, heartbeats, every control op and its reply, error replies, request ids,
metrics, back-pressure limits, and a real `flashtick serve` process restarted; pyzmq and msgpack alone on the
client side (wire_client.py). Part 1, ingest: test_wire_raw.py."""

from __future__ import annotations

import json
import os
import re
import threading
import tomllib
import time
import unicodedata
import urllib.request
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq

from conftest import serving, tiny_tick_checkpoint
from engine.service.config import ServiceConfig
from engine.service.control_requests import CONTROL_OPS, ControlError, asked_stream
from engine.service.control_streams import STREAM_ORDERS
from wire_client import (PROTOCOL, T0, Control, Sub, check_answer, fresh_stream, held_of, push_socket, quote,
                         resume_after, stats, trade, wait_stats, wait_until)
from wire_server import clients, private_server, server, shedding  # noqa: F401 (fixtures)

SEQUENCE_KEYS = ("last_seq", "duplicates", "duplicates_restamped", "seq_gaps", "seq_missing", "seq_late",
                 "seq_restarts", "repeats_taken")  # `streams`' per stream


# -- answers (PUB) -------------------------------------------------------------------------------------------------

def test_prefix_subscriptions_are_exact(clients) -> None:
    control, sub, push = clients
    feed = push()
    a, b = fresh_stream("PX"), fresh_stream("PX")  # PX7.X is no prefix of PX70.X's topic: topics end with '/'
    answers = sub(f"dir/{a}/")
    for i in range(3):
        feed.send(msgpack.packb([trade(b, T0 + i), trade(a, T0 + i)]))
    got = answers.until(lambda g: len(g) >= 3)
    answers.beats(2)
    assert {t for t, _ in answers.kept} == {f"dir/{a}/"} and len(got) == 3


def test_a_subscriber_that_leaves_and_comes_back_fills_its_gap_with_the_answers_op(clients) -> None:
    control, sub, push = clients
    s, ctl, feed = fresh_stream(), control(), push()
    topic = f"dir/{s}/"
    first = sub(topic)
    for i in range(5):
        feed.send(msgpack.packb(trade(s, T0 + i)))
    last_seq = first.until(lambda g: len(g) >= 5)[-1][1]["seq"]
    first.close()  # away: what is published now is lost to it
    for i in range(5, 12):
        feed.send(msgpack.packb(trade(s, T0 + i)))
    wait_stats(ctl, lambda st: st["pending_tokens"] == 0)
    again = sub(topic)  # 1. subscribe, live at the first heartbeat
    for i in range(12, 15):
        feed.send(msgpack.packb(trade(s, T0 + i)))
    fill = ctl.ok("answers", topic=topic, after=last_seq)  # 2. what was missed
    assert set(fill) == {"ok", "answers", "complete", "last_seq", "oldest_seq", "first_seq", "epoch"}
    assert fill["complete"] is True and fill["oldest_seq"] == 1 and type(fill["last_seq"]) is int
    seqs = [a["seq"] for a in fill["answers"]]
    assert seqs[0] == last_seq + 1 and seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    for answer in fill["answers"]:
        check_answer(answer["topic"], answer, published=False, filled=True)
    live = again.until(lambda g: g and g[-1][1]["seq"] == 15)
    merged = sorted({*seqs, *(p["seq"] for _, p in live)})  # 3. duplicates dropped by seq
    assert merged == list(range(last_seq + 1, 16))
    limited = ctl.ok("answers", topic=topic, after=0, limit=2)
    assert [a["seq"] for a in limited["answers"]] == [1, 2] and limited["last_seq"] == 15
    for past_the_end in (2**63 - 1, 2**63, 2**64 - 1):  # a legal msgpack int past the last seq: nothing after it
        reply = ctl.ok("answers", topic=topic, after=past_the_end)
        assert (reply["answers"], reply["complete"], reply["last_seq"]) == ([], True, 15)


def test_the_answers_op_on_a_topic_never_published(clients) -> None:
    ctl = clients[0]()
    reply = ctl.ok("answers", topic="dir/NOBODY.X/", after=0)
    assert reply["answers"] == [] and reply["complete"] is True
    assert reply["last_seq"] == 0 and reply["oldest_seq"] is None


def test_the_topics_op_lists_topics_with_their_last_seq_and_takes_nil_as_left_out(clients) -> None:
    control, sub, push = clients
    s, ctl, feed = fresh_stream(), control(), push()
    for i in range(3):
        feed.send(msgpack.packb(trade(s, T0 + i)))
    topic = f"dir/{s}/"
    deadline = time.monotonic() + 30  # (nothing pending can also mean not read yet: wait for its answers, all
    while ctl.ok("answers", topic=topic, after=0)["last_seq"] < 3:  # three: one a message, else one comes between)
        assert time.monotonic() < deadline, "no answer on the topic in time"
        time.sleep(0.02)
    reply = ctl.ok("topics", prefix=topic)
    assert set(reply) == {"ok", "topics", "truncated", "epoch"} and reply["truncated"] is False
    assert list(reply["topics"]) == [topic] and reply["topics"][topic]["last_seq"] == ctl.ok(
        "answers", topic=topic, after=0)["last_seq"] >= 1
    assert type(reply["topics"][topic]["answer_ts"]) is int
    assert ctl.ok("topics", prefix=None, after=None)["topics"] == ctl.ok("topics")["topics"]
    assert topic in ctl.ok("topics", prefix=None)["topics"]
    assert ctl.ok("topics", prefix=topic, after=topic)["topics"] == {}  # the page past it


def test_a_late_subscriber_snapshots_with_get_then_drops_what_it_already_has(clients) -> None:
    control, sub, push = clients
    s, ctl, feed = fresh_stream(), control(), push()
    for i in range(4):
        feed.send(msgpack.packb(trade(s, T0 + i)))
    wait_stats(ctl, lambda st: st["pending_tokens"] == 0)
    late = sub(f"dir/{s}/")
    snapshot = ctl.ok("get", query="dir", stream=s)["answer"]
    check_answer(snapshot["topic"], snapshot, published=False)
    assert snapshot["seq"] == 4
    feed.send(msgpack.packb(trade(s, T0 + 9)))
    got = late.until(lambda g: any(p["seq"] == 5 for _, p in g))
    assert [p["seq"] for _, p in got if p["seq"] > snapshot["seq"]] == [5]


def test_heartbeats_count_up_and_say_what_the_engine_holds(clients) -> None:
    control, sub, push = clients
    beats = sub()
    beats.beats(3)
    seqs = [h["seq"] for h in beats.heartbeats]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    for h in beats.heartbeats:
        assert all(type(h[k]) is int for k in ("seq", "ts", "ticks_in", "answers_out", "pending_tokens"))
        assert abs(h["ts"] - time.time_ns()) < 60 * 10**9  # wall clock, ns


# -- control (ROUTER) ----------------------------------------------------------------------------------------------

YAML = """queries:
  - {name: vol, streams: ["CT*"], question: volatility_50, kind: choice, trigger: batch}
  - {name: move, streams: ["CT*"], question: move_bps_50, kind: expectation, trigger: {ticks: 2}}
  - {name: surp, streams: ["CT*"], kind: surprise, trigger: batch, topic: "surp/{stream}/"}
"""


def test_register_says_which_queries_it_replaced_and_heartbeats_carry_the_registry_version(clients) -> None:
    """`register` replaced a same-named query silently: its subscribers went quiet or got other answers, and nothing
    on either socket said so. The reply names the replaced queries, and every heartbeat carries the registry version,
    which moves with each register and unregister."""
    control, sub, push = clients
    ctl, beats = control(), sub()
    mine, other = fresh_stream("RQ").replace(".", "_"), fresh_stream("RQ").replace(".", "_")  # (fresh query names)
    spec = "  - {{name: {}, streams: ['{}'], question: direction_5, kind: choice, trigger: batch}}\n"
    first = ctl.ok("register", yaml="queries:\n" + spec.format(mine, "RQ.*"))
    assert first["registered"] == [mine] and first["replaced"] == []
    second = ctl.ok("register", yaml="queries:\n" + spec.format(other, "*") + spec.format(mine, "RQ.A"))
    assert second["registered"] == [other, mine] and second["replaced"] == [mine]
    assert second["version"] == first["version"] + 1

    def heartbeat_says(version: int) -> None:
        deadline = time.monotonic() + 60  # (a loaded machine's heartbeats come late)
        while beats.heartbeats[-1]["registry_version"] != version:
            assert time.monotonic() < deadline, (version, beats.heartbeats[-1])
            beats.beats(1)

    heartbeat_says(second["version"])
    assert ctl.ok("list")["version"] == second["version"]
    for name in (mine, other):
        gone = ctl.ok("unregister", name=name)
    heartbeat_says(gone["version"])
    assert gone["version"] == second["version"] + 2


def test_control_ops_and_their_reply_shapes(clients) -> None:
    control, sub, push = clients
    ctl, feed, s = control(), push(), fresh_stream("CT")
    reg = ctl.ok("register", yaml=YAML, source="mine.yaml")
    # (`notes` where a query's streams match none held now: this one's stream has sent nothing yet)
    assert set(reg) - {"notes"} == {"ok", "registered", "replaced", "unchanged", "version"}
    assert reg["registered"] == ["vol", "move", "surp"]
    assert type(reg["version"]) is int
    listed = ctl.ok("list")
    assert set(listed) == {"ok", "queries", "version", "model", "model_digest"} and listed["version"] == reg["version"]
    specs = {q["name"]: q for q in listed["queries"]}
    assert {"dir", "vol", "move", "surp"} <= set(specs) and specs["move"]["kind"] == "expectation"
    answers = sub("vol/", "move/", "surp/")
    feed.send(msgpack.packb([trade(s, T0), quote(s, T0 + 1)]))
    got = answers.until(lambda g: {t for t, _ in g} == {f"vol/{s}/", f"move/{s}/", f"surp/{s}/"})
    values = {p["query"]: p["value"] for _, p in got}
    # named tick questions are adapted online (answers.adapt): the model's own distribution rides beside
    assert set(values["vol"]) == {"answer", "probs", "model_probs"}
    assert set(values["move"]) == {"expected", "probs", "model_probs", "model_expected"}
    assert isinstance(values["move"]["expected"], float) and isinstance(values["move"]["model_expected"], float)
    assert set(values["surp"]) == {"nll"} and values["surp"]["nll"] >= 0
    for topic, payload in got:
        check_answer(topic, payload)
        assert payload["seq"] == 1

    got = ctl.ok("get", query="vol", stream=s)
    assert set(got) == {"ok", "answer", "data_age_ms", "caveats"} and got["answer"]["topic"] == f"vol/{s}/"
    assert got["caveats"] == []  # (a stable key: none for this model and query)
    nobody = ctl.ok("get", query="vol", stream="NOBODY.X")
    assert nobody == {"ok": True, "answer": None, "stream_known": False, "caveats": []}
    # an unknown query is an error (as for ask), not "no answer yet"
    assert ctl("get", query="no_such_query", stream=s)["error"].startswith("no query named \"no_such_query\"")

    fresh = ctl.ok("ask", stream=s, query="vol")  # computed now: seq 0, for this asker alone
    assert fresh["cached"] is False and fresh["answer"]["seq"] == 0 and fresh["answer"]["version"] == 2
    cached = ctl.ok("ask", stream=s, query="vol", max_stale_ticks=10)
    assert cached["cached"] is True and cached["answer"]["seq"] == 1
    # how old the answered tick is by the service's clock: this test's ticks are stamped T0, years ago
    assert cached["data_age_ms"] >= fresh["data_age_ms"] > (time.time_ns() - 60 * 10**9 - T0) / 1e6
    expect = ctl.ok("ask", stream=s, query="move")
    assert set(expect["answer"]["value"]) == {"expected", "probs", "model_probs", "model_expected"}
    # no query registered under a question of the model's own: that question, asked as it is, and said
    direct = ctl.ok("ask", stream=s, query="direction_5")
    assert set(direct) == {"ok", "answer", "cached", "note", "context_tokens", "context_ticks", "data_age_ms", "lag_s",
                           "behind", "caveats"}
    assert type(direct["lag_s"]) is float and direct["behind"] is False  # (in every ask reply: what still waits)
    assert direct["answer"]["query"] == "direction_5" and direct["context_ticks"] == 2  # computed: what it attended
    assert "context_ticks" not in cached  # (a cached answer's context is not known)
    assert direct["note"] == "no query is registered as \"direction_5\": asked the model's question \"direction_5\" " \
                             "directly (kind choice)"
    assert set(direct["answer"]["value"]["probs"]) == {"down", "flat", "up"}
    assert "expected" in ctl.ok("ask", stream=s, query="move_bps_50", kind="expectation")["answer"]["value"]
    # a kind is checked whichever way the ask goes, and said when it does not apply
    assert "takes kind \"choice\" or \"expectation\"" in ctl("ask", stream=s, query="move", kind="bogus")["error"]
    ignored = ctl.ok("ask", stream=s, query="move", kind="choice")
    assert "expected" in ignored["answer"]["value"] and ignored["note"].startswith('kind "choice" ignored: "move"')
    assert "note" not in ctl.ok("ask", stream=s, query="move", kind="expectation")
    surprise = ctl.ok("ask", stream=s, query="surp")
    assert surprise["cached"] is True and set(surprise["answer"]["value"]) == {"nll"}
    adhoc = ctl.ok("ask", stream=s, spec={"name": "adhoc", "question": "regime", "kind": "choice"})
    assert adhoc["answer"]["query"] == "adhoc" and adhoc["answer"]["seq"] == 0
    gen = ctl.ok("ask", stream=s, spec={"name": "gen", "kind": "generate", "question_tokens": [1, 2],
                                         "max_tokens": 3})
    value = gen["answer"]["value"]
    assert set(value) == {"text", "tokens", "first_prob"} and isinstance(value["text"], str)
    assert 1 <= len(value["tokens"]) <= 3 and all(type(t) is int for t in value["tokens"])

    unreg = ctl.ok("unregister", name="move")
    assert set(unreg) == {"ok", "version"} and unreg["version"] > reg["version"]
    # several names are one change (review397 #7): all or nothing, one registry version
    refused = ctl("unregister", names=["vol", "nope"])
    assert refused["reason"] == "unknown_query" and 'no query named "nope"' in refused["error"]
    assert {"vol", "surp"} <= {q["name"] for q in ctl.ok("list")["queries"]}
    assert ctl.ok("unregister", names=["vol", "surp"])["version"] == unreg["version"] + 1
    assert not {"vol", "surp", "move"} & {q["name"] for q in ctl.ok("list")["queries"]}

    st = stats(ctl)
    for key in ("ticks_in", "answers_published", "pending_tokens", "kv_cells_used", "kv_cells_capacity",
                "kv_cells_touched", "sessions_resident", "streams", "ingest_messages", "control_requests",
                "control_errors", "engine_errors", "heartbeats", "queries"):
        assert type(st[key]) is int, key
    assert isinstance(st["rejected"], dict) and all(type(n) is int for n in st["rejected"].values())
    assert set(st["freshness_ms"]) == set(st["data_age_ms"]) == {"p50", "p99"} and isinstance(st["behind"], bool)
    assert {"forwards", "tokens_advanced", "tokens_rebuilt"} <= set(st["runner"])
    assert {"evictions", "rolls", "refused_streams"} <= set(st["scheduler"])
    assert isinstance(st["uptime_s"], float) and isinstance(st["model"], str)
    accepted = ctl.ok("streams", streams=[s, "NOBODY.X"])  # where a feed resumes after a restart
    idle = accepted["streams"][s].pop("idle_s")  # seconds since its last tick came off the wire
    assert isinstance(idle, float) and 0 <= idle < 600 and 0 < accepted.pop("uptime_s") < 600
    # and the context an answer computed now attends: the ask's above (no tick since)
    context = {"context_tokens": direct["context_tokens"], "context_ticks": 2}
    # the price level of its last tick: the quote's mid (a feed tells by it a stream continued at another level)
    assert accepted["streams"][s].pop("last_price") == pytest.approx(101.25)
    # and whether its KV is in the pool (this server's is large: it is), and how often it was recomputed
    assert (accepted["streams"][s].pop("resident"), accepted["streams"][s].pop("rebuilds")) == (True, 0)
    # and what of it waits for a forward: nothing, its ticks computed (test_stream_backlog.py: a stream behind)
    waiting = {key: accepted["streams"][s].pop(key) for key in ("waiting_ticks", "waiting_tokens", "waiting_s")}
    assert waiting == {"waiting_ticks": 0, "waiting_tokens": 0, "waiting_s": 0.0}
    # and its sequence numbers: none sent, none dropped (test_wire_sequences.py: a feed that sends `seq`)
    sequence = {key: accepted["streams"][s].pop(key) for key in SEQUENCE_KEYS}
    assert sequence == {"last_seq": None, "duplicates": 0, "duplicates_restamped": 0, "seq_gaps": 0, "seq_missing": 0,
                        "seq_late": 0, "seq_restarts": 0, "repeats_taken": 0}
    assert accepted == {"ok": True, "streams": {s: {"ticks": 2, "last_ts": T0 + 1, "at_last_ts": 1, **context},
                                                       "NOBODY.X": None},
                        "truncated": False}
    every = ctl.ok("streams")
    assert set(every["streams"][s]) == {"ticks", "last_ts", "at_last_ts", "last_price", "idle_s",
                                                        "resident", "rebuilds", *context, *waiting, *SEQUENCE_KEYS}
    health = ctl.ok("health")
    dirty = {"dirty"} if health["commit"] else set()  # (review349 #4: with a commit, whether the checkout is modified)
    assert set(health) == {"ok", "status", "uptime_s", "streams", "model", "protocol", "version", "commit", "epoch",
                           "zero_bid", "caveats", "model_digest", *dirty,
                           # (review351 #6: how far behind, and how old the newest answer and tick are)
                           "behind", "lag_s", "answers_stale", "answer_age_s", "tick_age_s"}
    assert len(health["model_digest"]) == 64  # (review349 #3: the model's identity, model_digest.py)
    assert health["zero_bid"] == "no_bid"  # limits.zero_bid's default: how the service reads a quote's 0 bid
    assert health["status"] == "serving" and health["protocol"] == PROTOCOL
    assert type(health["streams"]) is int and isinstance(health["uptime_s"], float)
    assert health["version"] == tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())[
        "project"]["version"]
    from engine.service.release import this_release  # (review321 #5: the checkout's commit; null for a wheel)

    assert health["commit"] == this_release().commit
    fill, topics = ctl.ok("answers", topic=f"dir/{s}/", after=0), ctl.ok("topics", prefix=f"dir/{s}/")
    assert [a["seq"] for a in fill["answers"]] == [1] and topics["topics"][f"dir/{s}/"]["last_seq"] == 1
    dry, forgot = ctl.ok("forget", streams=[s], dry_run=True), ctl.ok("forget", stream=s)
    # docs/wire-protocol.md's *Ops at a glance*, what a client in another language codes its decoder from, names
    # every key these replies carry (review391 #3: it gave `topics` as a map str -> int, and no `epoch`)
    replied = {"register": [reg], "list": [listed], "get": [got, nobody],
               "ask": [fresh, cached, expect, direct, ignored, surprise, adhoc, gen], "unregister": [unreg],
               "stats": [ctl.ok("stats")], "streams": [every], "health": [health], "answers": [fill],
               "topics": [topics, *topics["topics"].values()], "forget": [dry, forgot]}
    glance = ops_at_a_glance()
    assert set(glance) == set(CONTROL_OPS) == set(replied)
    for op, (request_keys, reply_keys) in glance.items():
        sort_values = set(STREAM_ORDERS) if op == "streams" else set()  # (`sort`'s values, named in its cell)
        assert request_keys - sort_values == set(CONTROL_OPS[op].keys), op
        for reply in replied[op]:
            assert set(reply) - {"ok"} <= reply_keys, (op, set(reply) - {"ok"} - reply_keys)


def ops_at_a_glance() -> dict[str, tuple[set[str], set[str]]]:
    """docs/wire-protocol.md's *Ops at a glance*: each op's request keys and reply keys, as the table names them."""
    text = (Path(__file__).parents[1] / "docs" / "wire-protocol.md").read_text()
    table = text[text.index("| op | request keys (type) | reply keys on `ok: true` (type) |"):]
    rows = [row.strip().strip("|").split("|") for row in table[:table.index("\n\n")].splitlines()[2:]]
    return {op.strip(" `"): (set(re.findall(r"`(\w+)`", request)), set(re.findall(r"`(\w+)`", reply)))
            for op, request, reply in rows}


def test_a_req_socket_works_too(clients) -> None:
    ctl = clients[0](zmq.REQ)
    assert ctl.ok("health")["status"] == "serving"
    assert ctl.ok("list")["queries"]


def test_a_key_an_op_does_not_take_is_served_with_a_note_naming_the_nearest_key(clients) -> None:
    """review285 #3: an `ask` with `max_stale` (the CLI flag's name; the key is `max_stale_ticks`) was computed, not
    read from the cache, without a word. Every op's reply says which keys it ignored, and the key meant."""
    control, sub, push = clients
    ctl, feed, s = control(), push(), fresh_stream("UK")
    answers = sub(f"dir/{s}/")
    feed.send(msgpack.packb([trade(s, T0 + i) for i in range(3)]))
    answers.until(lambda g: len(g) >= 1)
    wait_stats(ctl, lambda st: st["pending_tokens"] == 0)
    misspelt = ctl.ok("ask", stream=s, query="dir", max_stale=100, id=7)
    assert misspelt["cached"] is False and misspelt["id"] == 7  # served as before: the key is not read
    assert misspelt["note"] == ('key "max_stale" ignored: op "ask" takes no such key (its keys: stream, query, spec, '
                                "kind, max_stale_ticks; and id); did you mean \"max_stale_ticks\"?")
    assert "note" not in ctl.ok("ask", stream=s, query="dir", max_stale_ticks=100)  # (the key meant: cached)
    # beside the ask's own note (a codec question asked by name), joined
    direct = ctl.ok("ask", stream=s, query="direction_5", Kind="choice")
    assert direct["note"].startswith("no query is registered as \"direction_5\"")
    assert direct["note"].endswith('; key "Kind" ignored: op "ask" takes no such key (its keys: stream, query, spec, '
                                   "kind, max_stale_ticks; and id); did you mean \"kind\"?")
    # every op, a key close to none named with what the op takes
    assert ctl.ok("health", unused_key=1)["note"] == ('key "unused_key" ignored: op "health" takes no such key (it '
                                                      "takes none but id)")
    held = ctl.ok("streams", stream=[s], after="")
    assert held["note"].endswith("(its keys: streams, after, drain, sort, limit; and id); did you mean \"streams\"?")
    many = ctl.ok("get", query="dir", stream=s, **{f"k{i}": i for i in range(6)})
    assert many["answer"]["stream"] == s and many["note"].startswith('keys "k0", "k1", "k2", "k3" and 2 more ignored')
    # an error reply keeps its documented shape (the error says what is missing)
    assert set(ctl("get", querry="dir", stream=s)) == {"ok", "reason", "error"}


CONTROL_ERRORS = [
    ({"op": "fly"}, 'unknown op "fly"'),
    ({"op": "answers", "topic": "dir/R.OK/", "after": True}, "needs \"after\" as int (got bool true)"),
    ({"op": 5}, "string \"op\""),
    ({"nop": "list"}, "string \"op\""),
    (["list"], "msgpack map"),
    ({"op": "register"}, "needs \"yaml\""),
    ({"op": "register", "yaml": "queries: [{name: x"}, "control:register"),
    ({"op": "register", "yaml": "queries:\n  - {name: x, streams: [a], kind: choice, question: direction_20,"
                                " trigerr: batch}\n", "source": "/etc/my.yaml"}, "my.yaml:2"),
    ({"op": "register", "yaml": "queries: []\n", "source": "q.yaml"}, "q.yaml: lists no query (queries: []): "
                                                                       "nothing registered"),  # (version bumped)
    ({"op": "unregister", "name": "no_such_query"}, 'no query named "no_such_query"'),
    ({"op": "unregister"}, 'needs "name"'),
    ({"op": "unregister", "names": []}, 'takes "names" as a non-empty array of query names (str), without "name"'),
    ({"op": "unregister", "names": ["dir"], "name": "dir"}, 'without "name", got array'),
    ({"op": "get", "query": "dir"}, "needs \"stream\""),
    # a name no stream can have is refused with its rule, `get` as `ask` (a `get` replied "no answer yet" for ever)
    ({"op": "get", "query": "dir", "stream": "BTC/USDT"}, '"BTC/USDT" cannot be a stream: bad_stream: stream '
                                                          '"BTC/USDT" contains "/", which answer topics use as a '
                                                          'delimiter (file replay names it "BTC-USDT"'),
    ({"op": "ask", "query": "dir", "stream": "BTC/USDT"}, '(file replay names it "BTC-USDT"'),
    ({"op": "get", "query": "dir", "stream": "_heartbeat"}, "\"_heartbeat\" cannot be a stream: bad_stream"),
    ({"op": "ask", "stream": "NOBODY.X", "query": "dir"}, "has sent no data"),
    ({"op": "ask", "stream": "R.OK", "query": "nope"}, 'no query named "nope" (registered: dir'),
    ({"op": "ask", "stream": "R.OK", "query": "nope"}, "\"nope\" is not a question of this model's codec either"),
    ({"op": "ask", "stream": "R.OK", "query": "direction_5", "kind": "surprise"}, 'kind "choice" or "expectation"'),
    ({"op": "ask", "stream": "R.OK"}, "needs \"query\""),
    ({"op": "ask", "stream": "R.OK", "query": "dir", "max_stale_ticks": -1}, "max_stale_ticks as an int >= 0"),
    ({"op": "ask", "stream": "R.OK", "spec": {"name": "x", "kind": "choice"}}, "question"),
    ({"op": "ask", "stream": "R.OK", "spec": "dir"}, 'takes "spec" as map or nil (got str "dir")'),
    ({"op": "ask", "stream": "R.OK", "query": "dir", "spec": {"name": "x"}}, "not both"),
    ({"op": "streams", "streams": "R.OK"}, 'op "streams" takes "streams" as array or nil (got str "R.OK")'),
    ({"op": "streams", "streams": [1]}, "array of at most 10000 stream names (str; or nil: every stream), got an "
                                        "array with int 1 at [0]"),
    ({"op": "streams", "streams": ["R.OK"], "after": "R"}, "\"streams\" (the names to look up) or \"after\" (a page of "
                                                           "every stream), not both: both were given"),
    ({"op": "streams", "drain": "yes"}, 'op "streams" takes "drain" as bool or nil (got str "yes")'),
    ({"op": "streams", "drain": 1}, 'takes "drain" as bool or nil (got int 1)'),
    # the docs' example (*Error codes*), its query not registered: the request is malformed whatever it names
    ({"op": "get", "stream": 7, "query": "dir20"}, 'op "get" needs "stream" as str (got int 7)'),
    ({"op": "get", "query": "nope", "stream": "BTC/USDT"}, '"BTC/USDT" cannot be a stream'),
    ({"op": "ask", "stream": "R.OK", "query": "nope", "max_stale_ticks": -1}, "max_stale_ticks as an int >= 0"),
    ({"op": "answers", "topic": "dir/R.OK", "after": 0}, "topics end with \"/\""),
    ({"op": "answers", "topic": "A" * 10_000, "after": 0}, "topics end with \"/\""),
    ({"op": "ask", "stream": "A" * 10_000, "query": "dir"}, "has sent no data"),
    ({"op": "get", "stream": "A", "query": "B" * 10_000, "id": 5}, "no query named"),  # the id echoed (below)
    ({"op": "answers", "topic": "dir/R.OK/"}, "needs \"after\""),
    ({"op": "answers", "topic": "dir/R.OK/", "after": 0, "limit": 0}, "limit from 1 to 1000"),
    ({"op": "answers", "topic": "dir/R.OK/", "after": -5}, "after >= 0"),
    ({"op": "answers", "topic": "dir/R.OK/", "after": 0, "limit": 5000}, "limit from 1 to 1000"),
]


def test_every_op_refuses_a_mistyped_field_as_bad_request_whatever_it_names(clients) -> None:
    """review391 #1: `get` of stream 7 was answered `unknown_query` where its query was not registered (the name was
    looked up first): each key of each op (CONTROL_OPS), sent with a value of another type beside names of nothing
    registered or held, is `bad_request` naming the key; and nil is a key left out (a required one: "needs")."""
    ctl = clients[0]()
    names = {"stream": "NOBODY.X", "query": "nope", "name": "nope", "topic": "nope/NOBODY.X/", "after": 0,
             "yaml": "queries: []\n"}
    for op, spec in CONTROL_OPS.items():
        for key, kind in spec.keys.items():
            wrong = 7 if kind is not int else "7"
            request = {"op": op, **{k: names[k] for k in spec.required}, key: wrong}
            reply = ctl.raw(msgpack.packb(request))
            need = "needs" if key in spec.required else "takes"
            assert reply["reason"] == "bad_request", (request, reply)
            assert f'op "{op}" {need} "{key}" as ' in reply["error"], (request, reply)
        for key in spec.required:
            reply = ctl.raw(msgpack.packb({"op": op, **{k: names[k] for k in spec.required}, key: None}))
            assert reply["reason"] == "bad_request" and f'needs "{key}" as ' in reply["error"], reply
    assert ctl.ok("topics", prefix=None, after=None)["truncated"] is False  # (nil: left out)


@pytest.mark.parametrize("request_, expected", CONTROL_ERRORS, ids=[str(r)[:40] for r, _ in CONTROL_ERRORS])
def test_control_errors_have_the_documented_shape(clients, request_, expected) -> None:
    ctl = clients[0]()
    reply = ctl.raw(msgpack.packb(request_))
    if "id" in request_:
        assert reply["id"] == 5
    assert reply["ok"] is False and expected in reply["error"], reply
    # a request to fix, not to send again as it is (a stream never seen has its own reason: a misspelt name)
    assert reply["reason"] == ("unknown_stream" if "has sent no data" in expected else
                               "unknown_query" if "no query named" in expected or "question of this model" in expected
                               else "bad_request")


def test_a_name_not_in_nfc_is_refused_by_get_ask_and_forget_naming_its_nfc_form(clients) -> None:
    """review260 #2: ingest refuses `パナソニック` sent in NFD (what macOS text input writes), naming the NFC form,
    but a `get` of it replied `answer: null, stream_known: false` (\"not yet\" for ever), an `ask` \"did you mean\" a
    name that prints the same and a `forget` \"not known\", while the stream was held under its NFC name."""
    control, _sub, push = clients
    ctl, feed = control(), push()
    nfc = f"パナソニック{fresh_stream('')}"
    nfd = unicodedata.normalize("NFD", nfc)
    assert nfd != nfc
    feed.send(msgpack.packb([trade(nfc, T0 + i) for i in range(5)]))
    wait_until(lambda: (held_of(ctl, nfc) or {}).get("ticks") == 5)
    for op in ("get", "ask", "forget"):
        reply = ctl.raw(msgpack.packb({"op": op, "stream": nfd, "query": "dir"}))
        assert reply["ok"] is False and reply["reason"] == "bad_request", (op, reply)
        assert "is not in Unicode NFC: send it as" in reply["error"], (op, reply)
        assert json.dumps(nfc, ensure_ascii=False) in reply["error"], (op, reply)
    assert held_of(ctl, nfc)["ticks"] == 5  # (nothing forgotten)


def test_a_held_name_from_before_the_nfc_rule_is_asked_as_it_is() -> None:
    """A tick log from before ingest refused non-NFC names may restore one: asked by its own name, not refused."""
    nfd = unicodedata.normalize("NFD", "ガス")
    with pytest.raises(ControlError, match="is not in Unicode NFC: send it as \"ガス\""):
        asked_stream({"op": "get", "stream": nfd})
    assert asked_stream({"op": "get", "stream": nfd}, {nfd}) == nfd


def pairs(*items: Any) -> bytes:
    """A msgpack map written by hand from its (key, value) items, each given as msgpack bytes or a value to pack:
    what a hand-rolled encoder in another language may send (keys repeated, not str, text not UTF-8)."""
    body = b"".join(item if isinstance(item, bytes) else msgpack.packb(item) for pair in items for item in pair)
    assert len(items) < 16
    return bytes([0x80 | len(items)]) + body


NOT_UTF8 = b"\xa2\xff\xfe"  # a msgpack str of two bytes that are not UTF-8


@pytest.mark.parametrize("payload, expected", [
    (pairs((1, "list"), ("op", "list"), ("id", 9)), "request keys must be msgpack str, got int 1"),
    (pairs((1.5, "x"), ("op", "list"), ("id", 9)), "request keys must be msgpack str, got float 1.5"),
    (pairs((None, "x"), ("op", "list"), ("id", 9)), "request keys must be msgpack str, got nil"),
    (pairs((b"\xc4\x02op", "list"), ("id", 9)),
     "request keys must be msgpack str, got bin 2 bytes 6f 70: pack text as str"),
    (pairs(("op", "get"), ("query", "dir"), ("stream", NOT_UTF8), ("id", 9)),
     'request field "stream" holds a str that is not valid UTF-8 (bin 2 bytes ff fe)'),
    (pairs(("op", "ask"), ("stream", "R.OK"), ("spec", pairs(("name", NOT_UTF8))), ("id", 9)), "field \"spec.name\""),
    (pairs(("op", "health"), ("op", "list"), ("id", 9)), "key \"op\" given more than once in the request: which "
                                                         "value was meant cannot be told"),
    (pairs(("op", "ask"), ("stream", "R.OK"), ("id", 9), ("spec", pairs(("name", "x"), ("kind", "choice"),
                                                                     ("kind", "surprise")))),
     "key \"kind\" given more than once in the request (in \"spec\")"),
], ids=["int key", "float key", "nil key", "bin key", "str not utf-8", "nested str not utf-8", "op twice",
        "nested key twice"])
def test_a_map_request_with_a_wrong_key_or_text_is_refused_saying_why_with_its_id(clients, payload, expected) -> None:
    ctl = clients[0]()
    reply = ctl.raw(payload)
    assert reply["ok"] is False and expected in reply["error"] and reply["id"] == 9, reply
    assert "not valid msgpack" not in reply["error"]


def test_a_request_whose_id_cannot_be_echoed_is_answered_without_one(clients) -> None:
    ctl = clients[0]()
    twice = ctl.raw(pairs(("op", "health"), ("id", 1), ("id", 2)))  # which id the client waits for cannot be told
    assert "key \"id\" given more than once" in twice["error"] and "id" not in twice
    not_text = ctl.raw(pairs(("op", "health"), ("id", NOT_UTF8)))  # an id that cannot be sent back as it came
    assert "field \"id\" holds a str that is not valid UTF-8" in not_text["error"] and "id" not in not_text
    assert ctl.ok("health", id=[1, "two"])["id"] == [1, "two"]  # any other msgpack value comes back


def test_control_garbage_is_answered_and_counted(clients) -> None:
    ctl = clients[0]()
    errors = stats(ctl)["control_errors"]
    for payload in (b"\xc1", b"", b"\x91" * 100_000, msgpack.packb({1: "list"}),
                    msgpack.packb({"op": msgpack.ExtType(1, b"x")})):
        reply = ctl.raw(payload)
        assert reply["ok"] is False
    assert stats(ctl)["control_errors"] - errors == 5
    assert ctl.ok("health")["status"] == "serving"


def test_metrics_are_prometheus_text(server, clients) -> None:
    control, sub, push = clients
    s, answers = fresh_stream("MET"), sub("dir/")
    push().send(msgpack.packb(trade(s, T0)))
    answers.until(lambda g: any(t == f"dir/{s}/" for t, _ in g))  # freshness has a sample once answers exist
    figures = stats(control())  # the snapshot the metrics endpoint renders is refreshed
    body = urllib.request.urlopen(server["metrics"] + "?scrape=1", timeout=10).read().decode()  # parameters ignored
    assert figures["kv_bytes_capacity"] == figures["kv_cells_capacity"] * figures["kv_cell_bytes"] > 0
    assert f"\nflashtick_kv_cell_bytes {figures['kv_cell_bytes']}\n" in body
    assert f"\nflashtick_kv_bytes_capacity {figures['kv_bytes_capacity']}\n" in body
    assert 'reason="none"' not in body
    # every reason a service counts has a series from the start (review392 #4: an alert's increase() missed the first)
    assert '\nflashtick_rejected_total{reason="log_unavailable"} 0\n' in body and 'reason="filtered_out"' not in body
    for name in ("flashtick_ticks_in_total", "flashtick_rejected_total", "flashtick_answers_published_total",
                 "flashtick_answer_freshness_ms", "flashtick_kv_cells_used", "flashtick_kv_cells_capacity",
                 "flashtick_kv_cell_bytes", "flashtick_kv_bytes_capacity",
                 "flashtick_evictions_total", "flashtick_rebuilt_streams_total", "flashtick_rolls_total",
                 "flashtick_tokens_rebuilt_total", "flashtick_forwards_total"):
        assert f"\n# TYPE {name} " in body, name  # every family is declared, samples or not
    assert "\nflashtick_ticks_in_total " in body and '\nflashtick_answer_freshness_ms{quantile="0.99"} ' in body
    assert '\nflashtick_answer_data_age_ms{quantile="0.5"} ' in body  # from the tick's own ts (stats.data_age_ms)


def test_pipelined_requests_are_told_apart_by_their_id(clients) -> None:
    """An ask computed in a forward replies after requests sent behind it: the echoed `id` matches them up."""
    control, sub, push = clients
    s, ctl, feed = fresh_stream(), control(), push()
    feed.send(msgpack.packb(trade(s, T0)))
    wait_stats(ctl, lambda st: st["pending_tokens"] == 0 and ctl.ok("get", query="dir", stream=s)["answer"])
    requests = [{"op": "ask", "stream": s, "query": "dir", "id": 1}, {"op": "health", "id": "two"},
                {"op": "fly", "id": [3]}, {"op": "list"}]
    for request in requests:
        ctl.sock.send_multipart([b"", msgpack.packb(request)])
    replies = []
    for _ in requests:
        assert ctl.sock.poll(10_000)
        replies.append(msgpack.unpackb(ctl.sock.recv_multipart()[-1], raw=False))
    by_id = {str(r.get("id")): r for r in replies}
    assert by_id["1"]["answer"]["seq"] == 0 and by_id["two"]["status"] == "serving"
    assert by_id["[3]"]["ok"] is False and "unknown op" in by_id["[3]"]["error"]
    assert by_id["None"]["queries"] and "id" not in by_id["None"]


def test_a_client_flooding_control_requests_does_not_stall_ingest(private_server) -> None:
    # its own server: the flood's backlog (thousands of ~50 ms refusals) goes with it, not on into later tests
    s, feed, hostile = fresh_stream(), push_socket(private_server["ingest"]), Control(private_server["control"])
    answers = Sub(private_server["answers"], [f"dir/{s}/"])
    hostile.sock.sndhwm = 0  # queue without bound on the client side: the server reads as fast as it can
    request = msgpack.packb({"op": "register", "yaml": "queries:\n" + "  - {name: x, streams: [a], kind: choice,"
                             " question: direction_20}\n" * 300})  # refused (x registered twice), after some work
    stop = threading.Event()

    def flood() -> None:
        while not stop.is_set():
            for _ in range(100):
                hostile.sock.send_multipart([b"", request])

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    try:
        time.sleep(0.5)  # the flood is on
        for i in range(3):
            feed.send(msgpack.packb(trade(s, T0 + i)))
            answers.until(lambda g, n=i: len(g) > n, timeout_s=15)  # answered while the requests pour in
    finally:
        stop.set()
        thread.join(5)
        hostile.sock.close(linger=0)  # what it queued goes with it
    health = Control(private_server["control"])
    try:
        assert health.ok("health")["status"] == "serving"
    finally:
        for sock in (health, answers):
            sock.close()
        feed.close(linger=0)


def test_a_control_request_past_max_control_bytes_gets_no_reply_and_the_socket_recovers(clients) -> None:
    ctl = clients[0]()
    ctl.sock.send_multipart([b"", msgpack.packb({"op": "register", "yaml": "#" * (1 << 20)})])  # > 1 MiB
    assert not ctl.sock.poll(500)  # ZeroMQ dropped the connection unread: no reply comes, ever
    deadline = time.monotonic() + 15
    while True:  # the DEALER reconnects by itself; a request sent meanwhile may be lost with the old connection
        assert time.monotonic() < deadline
        ctl.sock.send_multipart([b"", msgpack.packb({"op": "health", "id": 7})])
        if ctl.sock.poll(300):
            break
    reply = msgpack.unpackb(ctl.sock.recv_multipart()[-1], raw=False)
    assert reply["status"] == "serving" and reply["id"] == 7


def test_when_behind_shed_refuses_ticks_as_overloaded_and_max_streams_as_stream_refused(shedding) -> None:
    rejects, feed, ctl = Sub(shedding["answers"], ["_rejects/"]), push_socket(shedding["ingest"]), \
        Control(shedding["control"])
    try:
        feed.send(msgpack.packb([trade("SHED", T0 + i) for i in range(5)]))  # the first tick puts it behind
        got = [p for _, p in rejects.until(lambda g: len(g) >= 4)]
        assert [(p["index"], p["reason"], p["stream"]) for p in got] == [(i, "overloaded", "SHED") for i in (1, 2, 3,
                                                                                                             4)]
        st = wait_stats(ctl, lambda st: st["pending_tokens"] == 0)
        assert st["ticks_in"] == 1 and st["rejected"] == {"overloaded": 4}
        feed.send(msgpack.packb(trade("SHED", T0 + 9)))  # caught up: accepted again
        wait_stats(ctl, lambda st: st["ticks_in"] == 2 and st["pending_tokens"] == 0)
        feed.send(msgpack.packb(trade("SHED2", T0)))  # a second stream fits scheduler.max_streams: 2 ...
        wait_stats(ctl, lambda st: st["ticks_in"] == 3 and st["pending_tokens"] == 0)
        feed.send(msgpack.packb(trade("SHED3", T0)))  # ... a third is refused
        reject = rejects.until(lambda g: len(g) >= 5)[4][1]
        assert (reject["index"], reject["reason"], reject["stream"]) == (0, "stream_refused", "SHED3")
        assert reject["error"].startswith("stream_refused: ")
    finally:
        for c in (rejects, ctl):
            c.close()
        feed.close(linger=0)


# -- a real `flashtick serve` process, restarted -----------------------------------------------------------------

def start_serve(config: str, data_dir: str) -> tuple[Any, dict[str, str]]:
    """`python -m engine.service.cli serve` (the `flashtick serve` command) on ephemeral ports, built-in model;
    the endpoints are read from its 'flashtick serving ingest=... answers=... control=...' line on stderr. A real
    process, forked from the worker's warm zygote (tests/forked_cli.py): its start does not import torch again."""
    import select
    import subprocess

    from forked_cli import cli_popen

    proc = cli_popen(["serve", "--config", config, "--data-dir", data_dir], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    text = b""
    while time.monotonic() < deadline and proc.poll() is None:
        if select.select([proc.stderr], [], [], 1.0)[0]:
            text += os.read(proc.stderr.fileno(), 65536)  # unbuffered: select() sees what is left to read
            for line in text.decode(errors="replace").splitlines():
                if line.startswith("flashtick serving "):
                    return proc, dict(word.split("=", 1) for word in line.split()[2:])
    proc.kill()
    raise AssertionError(f"serve did not start: {text.decode(errors='replace')}")


def stop_serve(proc: Any) -> None:
    import signal

    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(30) == 0  # SIGTERM stops it cleanly
    finally:
        proc.kill()
        proc.stderr.close()


def test_a_serve_process_keeps_seqs_across_a_restart(tmp_path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text('endpoints: {ingest: "tcp://127.0.0.1:0", answers: "tcp://127.0.0.1:0",'
                      ' control: "tcp://127.0.0.1:0"}\nlimits: {heartbeat_s: 0.1}\n'
                      "queries: {path}\n".replace("{path}", str(tmp_path / "q.yaml")))
    (tmp_path / "q.yaml").write_text("queries:\n  - {name: d, streams: ['*'], question: direction_5, kind: choice,"
                                     " trigger: batch}\n")
    seqs, beats, last_beats = [], [], []
    for start in range(2):
        proc, endpoints = start_serve(str(config), str(tmp_path / "data"))
        sub, feed, ctl = Sub(endpoints["answers"], ["d/RS/"]), push_socket(endpoints["ingest"]), \
            Control(endpoints["control"])
        try:
            beats.append(sub.heartbeats[0]["seq"])
            for i in range(3):
                feed.send(msgpack.packb(trade("RS", T0 + 10 * start + i)))
            seqs += [p["seq"] for _, p in sub.until(lambda g: len(g) >= 3, timeout_s=30)]
            history = ctl.ok("answers", topic="d/RS/", after=0)
            assert [a["seq"] for a in history["answers"]] == seqs and history["last_seq"] == len(seqs)
            assert ctl.ok("get", query="d", stream="RS")["answer"]["version"] == 3 * (start + 1)
            if start == 0:  # run long enough that a restart counting on would start past anything run 2 sees first
                sub.beats(30)
            last_beats.append(sub.heartbeats[-1]["seq"])
        finally:
            for c in (sub, ctl):
                c.close()
            feed.close(linger=0)
            stop_serve(proc)
    assert seqs == [1, 2, 3, 4, 5, 6]  # seq continues over the restart, never reused
    # heartbeat seq counts from 1 at each start: the restarted one's first seen is not past the first run's last
    # (>= 30); the first seen need not be 1: a subscriber on a loaded machine joins a few heartbeats late
    assert beats[1] <= last_beats[0]


def test_the_documented_resume_takes_no_tick_twice_for_a_stream_that_expired_idle(tmp_path) -> None:
    """A halted symbol expires idle (its ordering guard kept, and its `ticks` with its context: they went back to 0
    before review355 #7); the service restarts; the raw feed resumes by the documented recipe. Every tick is taken
    once: the same-ns sweep the feed was cut off in is completed, not doubled (resending past the count, 0, sent all
    13 again: the sweep's prints at `last_ts` were accepted a second time)."""
    stream = fresh_stream("HALT")
    sweep_ts = T0 + 8 * 10**9
    ticks = [trade(stream, T0 + i * 10**9, price=20.0 + i * 0.01) for i in range(8)]
    ticks += [trade(stream, sweep_ts, price=20.2, size=size) for size in (100.0, 37.0, 63.0)]  # 3 prints, one ns
    ticks += [trade(stream, sweep_ts + (1 + i) * 10**9, price=20.3) for i in range(2)]
    config = ServiceConfig.from_dict({
        "model": {"path": str(tiny_tick_checkpoint(tmp_path / "tick"))}, "log": {"dir": str(tmp_path / "data")},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "scheduler": {"stream_idle_s": 0.3}, "limits": {"heartbeat_s": 0.1}})
    with serving(config) as first_run:
        control, feed = Control(first_run.endpoints["control"]), push_socket(first_run.endpoints["ingest"])
        try:
            feed.send(msgpack.packb(ticks[:10]))  # cut off inside the sweep: 2 of its 3 prints sent
            wait_until(lambda: (held_of(control, stream) or {}).get("ticks") == 10)
            wait_until(lambda: stats(control)["streams_expired"] >= 1)  # expired idle
        finally:
            control.close()
            feed.close()
    with serving(config) as second_run:
        control, feed = Control(second_run.endpoints["control"]), push_socket(second_run.endpoints["ingest"])
        try:
            held = held_of(control, stream)
            assert (held["ticks"], held["last_ts"], held["at_last_ts"]) == (10, sweep_ts, 2)
            resend = resume_after(ticks, held)
            assert resend == ticks[10:]  # the sweep's third print, then what came after
            feed.send(msgpack.packb(resend))
            wait_until(lambda: held_of(control, stream)["last_ts"] == ticks[-1]["ts"])
            held = held_of(control, stream)
            assert (held["ticks"], held["at_last_ts"]) == (13, 1)
            after = stats(control)
            assert after["ticks_in"] == len(ticks) and after["rejected"] == {}  # 10 logged + 3: each tick once
        finally:
            control.close()
            feed.close()


def test_the_answers_op_says_when_the_history_no_longer_holds_a_gap(shedding) -> None:
    feed, ctl = push_socket(shedding["ingest"]), Control(shedding["control"])
    try:
        ctl.ok("register", yaml="queries: [{name: k, streams: ['*'], question: direction_5, kind: choice,"
                                " trigger: batch}]")
        for i in range(6):  # one at a time: this server sheds ticks sent while one waits
            feed.send(msgpack.packb(trade("KEEP", T0 + i)))
            wait_stats(ctl, lambda st, n=i + 1: st["ticks_in"] == n and st["pending_tokens"] == 0)
        reply = ctl.ok("answers", topic="k/KEEP/", after=1)
        assert [a["seq"] for a in reply["answers"]] == [4, 5, 6]  # log.answers_keep: 3
        assert (reply["complete"], reply["oldest_seq"], reply["last_seq"]) == (False, 4, 6)
        assert ctl.ok("answers", topic="k/KEEP/", after=3)["complete"] is True
        for i in range(3):  # another stream's answers push every one of KEEP's out of the history
            feed.send(msgpack.packb(trade("OTHER", T0 + i)))
            wait_stats(ctl, lambda st, n=i + 7: st["ticks_in"] == n and st["pending_tokens"] == 0)
        gone = ctl.ok("answers", topic="k/KEEP/", after=1)
        assert (gone["answers"], gone["complete"], gone["oldest_seq"], gone["last_seq"]) == ([], False, None, 6)
        assert ctl.ok("answers", topic="k/KEEP/", after=6)["complete"] is True  # nothing published since
    finally:
        ctl.close()
        feed.close(linger=0)


def test_asks_past_max_waiting_asks_are_refused_at_once(shedding) -> None:
    feed, ctl = push_socket(shedding["ingest"]), Control(shedding["control"])
    try:
        feed.send(msgpack.packb(trade("ASK", T0)))
        wait_stats(ctl, lambda st: st["ticks_in"] == 1 and st["pending_tokens"] == 0)
        spec = {"name": "g", "kind": "generate", "question_tokens": [1], "max_tokens": 16, "lookup": False}
        for i in range(5):  # sent together: 16 tokens each take 16 forwards, so the first two still wait
            ctl.sock.send_multipart([b"", msgpack.packb({"op": "ask", "stream": "ASK", "spec": spec, "id": i})])
        replies = {}
        for _ in range(5):
            assert ctl.sock.poll(30_000)
            reply = msgpack.unpackb(ctl.sock.recv_multipart()[-1], raw=False)
            replies[reply["id"]] = reply
        assert [replies[i]["ok"] for i in range(5)] == [True, True, False, False, False]
        assert "limits.max_waiting_asks: 2" in replies[4]["error"]
        assert {replies[i]["reason"] for i in (2, 3, 4)} == {"busy"}  # the same request served later: send it again
        assert ctl.ok("ask", stream="ASK", spec=spec)["answer"]["seq"] == 0  # room again
    finally:
        ctl.close()
        feed.close(linger=0)


def _quoted_after(text: str, marker: str) -> Any:
    """The value quoted right after ``marker`` in an error, read back as JSON (a client in any language can)."""
    start = text.index(marker) + len(marker)
    value, _ = json.JSONDecoder().raw_decode(text[start:])
    return value


def test_every_error_on_the_wire_quotes_names_as_json(clients) -> None:
    """fix326 #1: did-you-mean suggestions, registration errors (queries/limits.excerpt) and literal key names quoted
    Python's way (`'SYN.A'`, `'query'`, `['sideways']`); each is JSON now, read back by a JSON parser."""
    control, sub, push = clients
    ctl, feed, s = control(), push(), fresh_stream("JQ")
    rejects = sub("_rejects/")
    feed.send(msgpack.packb(trade(s, T0)))
    wait_until(lambda: (held_of(ctl, s) or {}).get("ticks", 0) >= 1)
    misspelt = ctl("ask", stream=s.lower(), query="dir")  # a did-you-mean suggestion
    assert misspelt["reason"] == "unknown_stream" and _quoted_after(misspelt["error"], "did you mean ") == s
    no_query = ctl("ask", stream=s)  # literal key names
    assert _quoted_after(no_query["error"], "op ") == "ask" and _quoted_after(no_query["error"], "needs ") == "query"
    twice = ctl("register", yaml="queries:\n  - {name: t2, streams: ['*'], question: direction_5, kind: choice, "
                                 "choices: [up, up]}\n")  # a registration error's excerpt of the value
    assert _quoted_after(twice["error"], "query ") == "t2" and _quoted_after(twice["error"], "choice ") == "up", twice
    unknown_key = ctl("register", yaml="queries:\n  - {name: k, streams: ['*'], kind: surprise, trigerr: 1}\n")
    assert _quoted_after(unknown_key["error"], "unknown key ") == "trigerr", unknown_key
    spec = {"name": "odd", "question": "direction_5", "kind": "choice", "choices": ["sideways", "up"]}
    not_an_answer = ctl("ask", stream=s, spec=spec)  # the model's compile error: names and answers
    assert not_an_answer["reason"] == "bad_request", not_an_answer
    assert _quoted_after(not_an_answer["error"], "query ") == "odd", not_an_answer
    assert _quoted_after(not_an_answer["error"], ": ") == "sideways", not_an_answer
    assert _quoted_after(not_an_answer["error"], "is not an answer of ") == "direction_5", not_an_answer
    feed.send(msgpack.packb({"stream": s, "ts": T0 + 1, "price": 1.0}))  # a tick's missing field, on _rejects/
    _, rejection = rejects.until(lambda got: len(got) >= 1)[0]
    assert _quoted_after(rejection["error"], "field ") == "size", rejection
    for reply in (misspelt, no_query, twice, unknown_key, not_an_answer):
        assert "'" not in reply["error"].replace("query's", "").replace("model's", ""), reply
