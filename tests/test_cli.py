"""The `flashtick` subcommands that talk to a running service, run in-process (`main([...])`) against a
live server on 127.0.0.1 with ephemeral ports: control commands, subscribe, feed, and the CURVE key options."""

from __future__ import annotations

import argparse
import dataclasses
import contextlib
import json
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from conftest import serving, tiny_tick_checkpoint
from forked_cli import cli_popen
from connectors.feed import FeedClient
from connectors.synthetic import DEFAULT_STREAMS, StreamParams, SyntheticConfig, SyntheticMarket
from connectors.ticks import utc_text
from engine.service.auth import keygen
from engine.service.cli import main
from engine.service.cmd_status import ONLINE_BASELINES
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.config import ServiceConfig

DIR_QUERY = "queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice, trigger: batch}\n"
VOL_QUERY = ("queries:\n"
             "  - {name: vol, streams: ['SYN.*'], question: volatility_50, kind: choice, trigger: {ticks: 5}}\n")
LOCAL = {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"}

# the saturation note's reason, after the labels it names (connectors/saturation.py)
SATURATION_WHY = ("its buckets are fixed in bps over 50 ticks, too narrow for these streams' moves over that many rows "
                  "(bars: 50 one-minute or daily bars move more than its outer edges on most instruments; else one "
                  "step of the price is many bps: a tick large against the price, a price near zero, settlements a "
                  "day apart), so its answers say little there; ask direction_5/direction_20 of them, which read a "
                  "sign at any spacing (docs/model.md; bars: docs/replay.md, \"Bars and the built-in questions\")")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"))


def config(checkpoint, tmp_path, curve: dict | None = None) -> ServiceConfig:
    (tmp_path / "q.yaml").write_text(DIR_QUERY)
    # a pool that holds the synthetic market's 4 streams at a full window (1,040 cells each): a smaller one is warned
    # of on stderr (KV pool too small for the live streams), which tests of what a command prints would read
    return ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
        "endpoints": LOCAL, "limits": {"heartbeat_s": 0.2}, "queries": str(tmp_path / "q.yaml"),
        **({"curve": curve} if curve else {}),
    })


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def wait_for(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_every_line_of_a_query_file_with_several_problems_carries_the_error_prefix(checkpoint, tmp_path,
                                                                                    capsys) -> None:
    """The README says errors are one line: a file with two bad queries printed the second problem on a line of its
    own with no `flashtick COMMAND: error:`, which a log reader keying on it missed. Each line carries it now."""
    bad = tmp_path / "two.yaml"
    bad.write_text("queries:\n  - {name: a, question: direction_5, kind: choice}\n"
                   "  - {name: b, question: direction_5, kind: choice}\n")
    (tmp_path / "t.csv").write_text("timestamp,symbol,price,size\n1717200000000,XAU,100.5,1\n")
    expected = [f'{bad}:2: query "a": missing required key "streams"', f'{bad}:3: query "b": missing required key '
                                                                         f'"streams"']
    code, _, err = run(capsys, "backtest", str(tmp_path / "t.csv"), "--queries", str(bad), "--out",
                       str(tmp_path / "a.parquet"), "--model", str(checkpoint), "--quiet")
    assert code == 2 and err.splitlines()[-2:] == [f"flashtick backtest: error: {line}" for line in expected], err
    with serving(config(checkpoint, tmp_path)) as server:  # over the control socket: the service's reply, alike
        code, _, err = run(capsys, "register", str(bad), "--control", server.endpoints["control"])
    assert code == 2 and err.splitlines() == [f"flashtick register: error: {line}" for line in expected], err


def test_control_subcommands(checkpoint, tmp_path, capsys) -> None:
    (tmp_path / "vol.yaml").write_text(VOL_QUERY)
    (tmp_path / "two.yaml").write_text(VOL_QUERY + "  - {name: dir2, streams: [SYN.A], question: direction_5, "
                                                   "kind: choice}\n")
    (tmp_path / "my_queries.yaml").write_text("queries:\n  - {name: x, streams: [a], kind: choice,"
                                              " question: direction_20, trigerr: batch}\n")
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        code, out, _ = run(capsys, "health", *control)
        assert code == 0 and json.loads(out)["status"] == "serving"

        code, out, _ = run(capsys, "register", str(tmp_path / "vol.yaml"), *control)
        assert code == 0 and out == "registered vol (registry version 2)\n"
        code, out, err = run(capsys, "register", str(tmp_path / "my_queries.yaml"), *control)
        # the path as given, as serve and backtest name a queries file (the service itself sees only its name)
        assert code == 2 and err.startswith(f"flashtick register: error: {tmp_path / 'my_queries.yaml'}:2:") and \
            "trigerr" in err
        assert "control:register" not in err
        (tmp_path / "empty.yaml").write_text("queries: []\n")
        code, out, err = run(capsys, "register", str(tmp_path / "empty.yaml"), *control)
        assert code == 2 and err == f"flashtick register: error: {tmp_path / 'empty.yaml'}: lists no query (queries: " \
                                    f"[]): nothing registered (`unregister` removes a query)\n", err
        with ControlClient(server.endpoints["control"]) as raw:  # the name is a short, plain file name
            bad = (tmp_path / "my_queries.yaml").read_text()
            error = raw.request({"op": "register", "yaml": bad, "source": "/etc/../\x1b[31mq\u202e"
                                 + "x" * 99})["error"]
            assert error.startswith("31mq" + "x" * 60 + ":2:")
            assert raw.request({"op": "register", "yaml": bad, "source": 7})["error"] == \
                'op "register" takes "source" as str or nil (got int 7)'

        code, out, _ = run(capsys, "list", *control)
        lines = out.splitlines()
        assert code == 0 and [line.split()[0] for line in lines[:-1]] == ["dir", "vol"]
        assert lines[0].split()[1:4] == ["choice", "direction_20", "batch"]
        assert lines[-1] == "2 queries (registry version 2)"
        code, out, _ = run(capsys, "list", "--json", *control)
        assert {q["name"] for q in json.loads(out)["queries"]} == {"dir", "vol"}

        code, _, err = run(capsys, "get", "SYN.A", "dir", *control)  # no data yet: a misspelt name looks the same
        assert code == 1 and "no stream \"SYN.A\" has sent data (`flashtick streams` lists those that have)" in err
        code, _, err = run(capsys, "get", "SYN.A", "nope", *control)
        assert code == 2 and 'no query named "nope" (registered: dir, vol)' in err
        code, _, err = run(capsys, "get", "EUR/USD", "dir", *control)  # feeds replay it as EUR-USD
        assert code == 2 and '"EUR/USD" cannot be a stream' in err and "/" in err
        with FeedClient(server.endpoints["ingest"]) as feed:
            feed.send(SyntheticMarket(SyntheticConfig(seed=1)).next_batch(40))
        wait_for(lambda: main(["get", "SYN.A", "dir", *control]) == 0)
        capsys.readouterr()
        code, out, _ = run(capsys, "get", "SYN.A", "dir", *control)
        answer = json.loads(out)
        assert code == 0 and answer["topic"] == "dir/SYN.A/" and answer["seq"] >= 1
        code, out, _ = run(capsys, "list", "--json", *control)  # the queries' model, as published answers name it
        listed = json.loads(out)
        _, out, _ = run(capsys, "health", *control)
        assert code == 0 and len(listed["model_digest"]) == 64 and listed["model"] == answer["model"] and \
            listed["model_digest"] == json.loads(out)["model_digest"]
        with ControlClient(server.endpoints["control"]) as raw:
            assert raw.call("get", query="dir", stream="SYN.Z") == {"ok": True, "answer": None, "stream_known": False,
                                                                      "caveats": []}
            assert "stream_known" not in raw.call("get", query="dir", stream="SYN.A")

        code, _, err = run(capsys, "ask", "SYN.A", "dir", "--max-stale", "1000000", *control)
        assert code == 0 and "answered from the service's cached answer (seq " in err
        # a question of the model's own, with no query registered by its name, is asked as it is
        code, out, err = run(capsys, "ask", "SYN.A", "direction_5", *control)
        assert code == 0 and set(json.loads(out)["value"]["probs"]) == {"down", "flat", "up"}, err
        assert 'no query is registered as "direction_5": asked the model\'s question "direction_5" directly' in err
        code, _, err = run(capsys, "ask", "SYN.A", "no_such_thing", *control)
        assert code == 2 and 'no query named "no_such_thing"' in err and "direction_5" in err  # (its questions)
        code, _, err = run(capsys, "ask", "SYN.Q", "no_such_thing", *control)  # a typo is one, data or not
        assert code == 2 and "is not a question of this model's codec" in err and "sent no data" not in err, err
        code, _, err = run(capsys, "ask", "SYN.A", "direction_5", "--kind", "expectation", *control)
        assert code == 2 and "has no values to take an expectation over: ask it as kind \"choice\"" in err, err
        code, out, err = run(capsys, "ask", "SYN.A", "move_bps_50", "--kind", "expectation", *control)
        assert code == 0 and isinstance(json.loads(out)["value"]["expected"], float), err
        code, out, _ = run(capsys, "unregister", "vol", *control)
        assert code == 0 and out == "unregistered vol (registry version 3)\n"
        code, _, err = run(capsys, "unregister", "vol", *control)
        assert code == 2 and 'no query named "vol"' in err
        # a file's queries in one change (review397 #7): every name it has, one registry version
        code, out, _ = run(capsys, "register", str(tmp_path / "two.yaml"), *control)
        assert code == 0 and out.startswith("registered vol, dir2 (registry version 4)")
        code, out, _ = run(capsys, "unregister", "--file", str(tmp_path / "two.yaml"), *control)
        assert code == 0 and out == "unregistered vol, dir2 (registry version 5)\n"
        with pytest.raises(SystemExit) as exited:  # a usage error: nothing named
            main(["unregister", *control])
        assert exited.value.code == 2 and "name the queries to remove, or give --file FILE" in capsys.readouterr().err
        code, out, _ = run(capsys, "stats", *control)
        assert code == 0 and json.loads(out)["ticks_in"] == 40

        with FeedClient(server.endpoints["ingest"]) as feed:  # enough ticks for dir's answers to meet their future
            feed.send(SyntheticMarket(SyntheticConfig(seed=1)).next_batch(400)[40:])
        wait_for(lambda: main(["scores", "--json", *control]) == 0 and
                 json.loads(capsys.readouterr().out).get("dir", {}).get("scored", 0) > 0)
        code, out, _ = run(capsys, "scores", *control)
        header, dir_line = out.splitlines()[:2]
        assert code == 0 and header.split()[:7] == ["query", "scored", "pending", "accuracy", "majority", "brier",
                                                     "freq.brier"]
        assert dir_line.split()[0] == "dir" and int(dir_line.split()[1]) > 0
        # the columns a backtest's table names alike hold its hindsight baselines: this one says it prints online ones
        assert ONLINE_BASELINES in out.splitlines() and ONLINE_BASELINES.startswith("majority, freq.brier: online, ")


def test_streams_and_ask_print_the_context_a_computed_answer_attends(checkpoint, tmp_path, capsys) -> None:
    """The `streams` and `ask` replies carry `context_tokens` / `context_ticks`: the text lines say them too, last on
    a stream's line and on stderr for a computed ask (its stdout stays the answer's JSON); a cached answer, whose
    context is not known, says none."""
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        with FeedClient(server.endpoints["ingest"]) as feed:
            feed.send(SyntheticMarket(SyntheticConfig(seed=1, streams=DEFAULT_STREAMS[:1])).next_batch(10))
        wait_for(lambda: server.pipeline.ticks_in == 10)
        wait_for(lambda: main(["get", "SYN.A", "dir", *control]) == 0)
        capsys.readouterr()
        code, out, _ = run(capsys, "streams", "SYN.A", "--json", *control)
        listed = json.loads(out)["streams"]["SYN.A"]
        assert code == 0 and listed["context_ticks"] == 10 and listed["context_tokens"] > 0, listed
        context = f"context {listed['context_tokens']} tokens / 10 ticks"
        code, out, _ = run(capsys, "streams", "SYN.A", *control)
        # (review315 #9: the level the model reads, in the text too, every digit of it: review410 #2)
        price = f"last_price {listed['last_price']!r}"
        # (review375 #12: its UTC time beside the ns, in the same column)
        last = re.escape(f"{listed['last_ts']} ({utc_text(listed['last_ts'])})")
        assert code == 0 and re.fullmatch(rf"SYN\.A\tlast_ts {last}\tticks 10\tidle [0-9.]+s\t{context}"
                                          rf"\tkv resident\trebuilds 0\t{re.escape(price)}\n", out), out
        code, out, err = run(capsys, "ask", "SYN.A", "direction_5", *control)
        assert code == 0 and json.loads(out)["query"] == "direction_5", out  # stdout: the answer alone
        assert f"flashtick ask: computed now over the stream's {context}; data " in err, err
        code, out, err = run(capsys, "ask", "SYN.A", "dir", "--max-stale", "1000000", *control)
        assert code == 0 and "cached answer" in err and "context" not in err, err


def test_ask_says_how_old_its_answers_data_is_and_the_engines_lag_while_behind(checkpoint, tmp_path, capsys) -> None:
    """An answer "computed now" answers the last tick the engine has computed, seconds old while it is behind: the
    reply carries `data_age_ms` (the service's clock less the answered tick's ts), `lag_s` and `behind`; the
    stderr line says both beside "computed now" or "cached"."""
    cfg = config(checkpoint, tmp_path)
    cfg = dataclasses.replace(cfg, limits=dataclasses.replace(cfg.limits, max_backlog_tokens=8, drain_s=1.0),
                              scheduler=dataclasses.replace(cfg.scheduler, max_batch_tokens=64))
    market = SyntheticMarket(SyntheticConfig(seed=1, streams=DEFAULT_STREAMS[:1]))
    with serving(cfg) as server:
        control = ("--control", server.endpoints["control"])
        with FeedClient(server.endpoints["ingest"]) as feed:
            feed.send(market.next_batch(10))
        wait_for(lambda: main(["get", "SYN.A", "dir", *control]) == 0, timeout_s=60)
        with ControlClient(server.endpoints["control"]) as raw:
            before = time.time_ns()
            reply = raw.call("ask", stream="SYN.A", query="dir")
            after = time.time_ns()
        data_ts = reply["answer"]["data_ts"]
        assert (before - data_ts) / 1e6 - 0.001 <= reply["data_age_ms"] <= (after - data_ts) / 1e6 + 0.001, reply
        assert reply["behind"] is False and reply["lag_s"] < cfg.limits.max_lag_s, reply  # (every tick computed)
        capsys.readouterr()
        code, _, err = run(capsys, "ask", "SYN.A", "dir", *control)  # the synthetic market's time: a year ago
        assert code == 0 and re.search(r"computed now over the stream's context \d+ tokens / 10 ticks; data "
                                       r"\d+ days old \(the answered tick's ts\)\n", err), err
        with FeedClient(server.endpoints["ingest"]) as feed:  # a burst the engine takes many forwards over
            feed.send(market.next_batch(3000))
        said: list[str] = []

        def cached_ask_says_behind() -> bool:
            said.append(run(capsys, "ask", "SYN.A", "dir", "--max-stale", "1000000", *control)[2])
            return "the engine is behind: lag " in said[-1]

        wait_for(cached_ask_says_behind, timeout_s=60)
        assert re.search(r"answered from the service's cached answer \(seq \d+\), not computed now; data \d+ days "
                         r"old \(the answered tick's ts\); the engine is behind: lag [0-9.]+ (ms|s|min)\n",
                         said[-1]), said[-1]


def test_streams_says_which_streams_kv_is_resident_and_how_often_it_was_rebuilt(checkpoint, tmp_path, capsys) -> None:
    """A pool too small for every stream evicts the least recently active one: `streams` says per stream whether its
    KV is resident (an evicted one's next ask pays a rebuild) and how many rebuilds it has had."""
    cfg = config(checkpoint, tmp_path)
    cfg = dataclasses.replace(cfg, kv=dataclasses.replace(cfg.kv, cells=256))  # 16 blocks: two streams of 25 ticks
    market = SyntheticMarket(SyntheticConfig(seed=1, streams=DEFAULT_STREAMS[:3]))
    by_stream: dict[str, list] = {}
    for tick in market.next_batch(300):
        by_stream.setdefault(tick.stream, []).append(tick)
    first, *others = sorted(by_stream)
    with serving(cfg) as server:
        control = ("--control", server.endpoints["control"])
        with FeedClient(server.endpoints["ingest"]) as feed:
            feed.send(by_stream[first][:25])
            wait_for(lambda: server.pipeline.ticks_in == 25 and not server.pipeline.busy, timeout_s=60)
            feed.send([tick for name in others for tick in by_stream[name][:25]])
        wait_for(lambda: server.pipeline.ticks_in == 75 and not server.pipeline.busy, timeout_s=60)
        capsys.readouterr()
        code, out, _ = run(capsys, "streams", "--json", *control)
        listed = json.loads(out)["streams"]
        assert code == 0 and listed[first]["resident"] is False and listed[first]["rebuilds"] == 0, listed
        assert all(listed[name]["resident"] is True and listed[name]["rebuilds"] == 0 for name in others), listed
        code, out, _ = run(capsys, "streams", first, *control)
        assert code == 0 and "\tkv not resident\trebuilds 0\t" in out, out
        code, _, err = run(capsys, "ask", first, "dir", *control)  # computed: its KV recomputed first
        assert code == 0, err
        code, out, _ = run(capsys, "streams", first, "--json", *control)
        again = json.loads(out)["streams"][first]
        assert again["resident"] is True and again["rebuilds"] == 1, again
        stats = json.loads(run(capsys, "stats", *control)[1])
        assert stats["scheduler"]["rebuilt_streams"] >= 1 and stats["sessions_resident"] == 2, stats


def test_subscribe_prints_one_line_per_message_on_a_pipe(checkpoint, tmp_path, capsys) -> None:
    market = SyntheticMarket(SyntheticConfig(seed=2))
    with serving(config(checkpoint, tmp_path)) as server:
        done = threading.Event()
        codes: list[int] = []

        def subscribe() -> None:
            codes.append(main(["subscribe", "dir/", "--count", "6", "--endpoint", server.endpoints["answers"]]))
            done.set()

        thread = threading.Thread(target=subscribe, daemon=True)
        thread.start()
        with FeedClient(server.endpoints["ingest"]) as feed:
            deadline = time.monotonic() + 20
            while not done.wait(0.05) and time.monotonic() < deadline:
                feed.send(market.next_batch(2))
        thread.join(5)
        out = capsys.readouterr().out
        assert codes == [0]
        lines = out.splitlines()
        assert len(lines) == 6 and all(line.startswith("dir/SYN.") for line in lines), out
        assert all(line.split()[-1].startswith("(") for line in lines)  # the answer, e.g. "up (0.41)"

        # a topic's published answers after a seq, as JSON lines
        topic = lines[0].split()[0]
        code, out, _ = run(capsys, "answers", topic, "--after", "0", "--control", server.endpoints["control"])
        seqs = [json.loads(line)["seq"] for line in out.splitlines()]
        assert code == 0 and seqs == list(range(1, len(seqs) + 1)) and seqs
        code, out, err = run(capsys, "answers", topic, "--after", str(seqs[-1]), "--control",
                             server.endpoints["control"])  # (the feed goes on: a newer answer may be there)
        assert code == 0 and ((out and all(json.loads(line)["seq"] > seqs[-1] for line in out.splitlines())) or
                              (not out and f"nothing after seq {seqs[-1]} yet (the topic's last)" in err)), err
        # the topics published on, with their last seq
        code, out, _ = run(capsys, "topics", "dir/", "--json", "--control", server.endpoints["control"])
        listed = json.loads(out)
        assert code == 0 and topic in listed and listed[topic]["last_seq"] >= seqs[-1]
        assert all(t.startswith("dir/") for t in listed)
        code, out, err = run(capsys, "topics", "nothing/", "--control", server.endpoints["control"])
        assert code == 0 and out == "" and "no answer published yet on a topic starting \"nothing/\"" in err

        # the reserved topics (heartbeats): one key=value line each, not a table
        code, out, _ = run(capsys, "subscribe", "_", "--count", "2", "--endpoint", server.endpoints["answers"])
        assert code == 0 and len(out.splitlines()) == 2
        assert all(line.startswith("_heartbeat/") and "ticks_in=" in line for line in out.splitlines())


@contextlib.contextmanager
def answered(checkpoint, tmp_path, capsys):
    """A server with `dir` on every stream, `one` on SYN.A and `mine` on SYN.C publishing on its own topic
    (alerts/SYN.C/), fed 60 ticks and done computing them: the --control option and the last seq of a topic of
    each query."""
    (tmp_path / "more.yaml").write_text(
        "queries:\n  - {name: one, streams: [SYN.A], question: direction_5, kind: choice, trigger: batch}\n"
        "  - {name: mine, streams: [SYN.C], question: direction_5, kind: choice, trigger: batch,"
        " topic: 'alerts/{stream}/'}\n")
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        assert run(capsys, "register", str(tmp_path / "more.yaml"), *control)[0] == 0
        market = SyntheticMarket(SyntheticConfig(seed=3))
        with FeedClient(server.endpoints["ingest"]) as feed, ControlClient(server.endpoints["control"]) as raw:
            feed.send(market.next_batch(60))
            wait_for(lambda: (lambda stats: stats["ticks_in"] == 60 and stats["pending_tokens"] == 0)(
                raw.call("stats")["stats"]), timeout_s=60)
            last = {topic: raw.call("answers", topic=topic, after=0, limit=1)["last_seq"]
                    for topic in ("one/SYN.A/", "alerts/SYN.C/", "dir/SYN.B/")}
        assert all(last.values()), last
        yield control, last


def test_answers_takes_a_query_name_or_a_prefix_naming_one_topic(checkpoint, tmp_path, capsys) -> None:
    """`answers d5` (a query's name, no '/') got the service's "not an answer topic": a name or a prefix naming one
    published topic reads that topic (a query's own `topic` template too), one naming several says the forms that
    are valid from the topics there are."""
    with answered(checkpoint, tmp_path, capsys) as (control, last):
        for given, topic in [("one", "one/SYN.A/"), ("mine", "alerts/SYN.C/"), ("dir/SYN.B", "dir/SYN.B/")]:
            code, out, err = run(capsys, "answers", given, "--all", *control)
            said = f"flashtick answers: {json.dumps(given)} names the topic {json.dumps(topic)}\n"
            assert code == 0 and err == said, err
            assert [json.loads(line)["topic"] for line in out.splitlines()] == [topic] * last[topic], out
        code, out, err = run(capsys, "answers", "dir", *control)
        assert (code, out) == (1, "") and err == (
            'flashtick answers: "dir" names 4 topics (dir/SYN.A/, dir/SYN.B/, dir/SYN.C/, dir/SYN.D/): answers reads '
            "one whole topic, e.g. `flashtick answers dir/SYN.A/`; `flashtick topics dir/` lists them, `flashtick "
            "subscribe dir/` follows them all live\n"), err
        code, out, err = run(capsys, "answers", "nosuch", *control)
        assert (code, out) == (1, "") and err.startswith("flashtick answers: no answer published on a topic starting "
                                                         '"nosuch/" nor by a query "nosuch": '), err


def _subscribed_while_fed(server, capsys, *argv: str) -> tuple[int, str, str]:
    """`flashtick subscribe ARGV` run on a thread while synthetic ticks are fed, until it exits."""
    market, codes = SyntheticMarket(SyntheticConfig(seed=4)), []
    thread = threading.Thread(target=lambda: codes.append(main(["subscribe", *argv])), daemon=True)
    thread.start()
    with FeedClient(server.endpoints["ingest"]) as feed:
        deadline = time.monotonic() + 120
        while thread.is_alive() and time.monotonic() < deadline:
            feed.send(market.next_batch(4))
            thread.join(0.1)
    assert not thread.is_alive(), "subscribe got nothing in 120 s"
    out, err = capsys.readouterr()
    return codes[0], out, err


def test_a_querys_own_topic_with_a_slash_before_the_stream_is_not_called_a_stream_with_a_slash(
        checkpoint, tmp_path, capsys) -> None:
    """A query's own `topic: alerts/{query}/{stream}/`: `subscribe alerts/updown/SYN.A/` got its answers beside a
    note to subscribe to 'alerts/updown-SYN.A/' (read as QUERY/STREAM/, a stream 'updown/SYN.A'), which never
    publishes; `answers updown` and `topics updown/` pointed to `updown/`, which matches nothing. The note is said
    only when no registered query's topic can start so; the prefixes said are the query's own."""
    (tmp_path / "updown.yaml").write_text(
        "queries:\n  - {name: updown, streams: [SYN.A, SYN.B], question: direction_5, kind: choice, trigger: batch,"
        " topic: 'alerts/{query}/{stream}/'}\n")
    with serving(config(checkpoint, tmp_path)) as server:
        control, answers = ("--control", server.endpoints["control"]), ("--endpoint", server.endpoints["answers"])
        assert run(capsys, "register", str(tmp_path / "updown.yaml"), *control)[0] == 0
        code, out, err = _subscribed_while_fed(server, capsys, "alerts/updown/SYN.A/", "--json", "--count", "1",
                                               *answers, *control)
        assert code == 0 and json.loads(out)["topic"] == "alerts/updown/SYN.A/" and "note" not in err, err
        # with no control socket to ask, nothing is said while answers come (the note waits for a silence)
        code, out, err = _subscribed_while_fed(server, capsys, "alerts/updown/SYN.B/", "--count", "1", *answers)
        assert code == 0 and out.startswith("alerts/updown/SYN.B/") and "note" not in err, err
        code, _, err = run(capsys, "subscribe", "dir/EUR/USD/", "_heartbeat/", "--count", "1", *answers, *control)
        assert code == 0 and '"dir/EUR/USD/" names stream "EUR/USD"' in err and 'subscribe to "dir/EUR-USD/" (no ' \
            "registered query's topic starts so)" in err, err

        code, out, err = run(capsys, "answers", "updown", *control)
        assert (code, out) == (1, "") and "e.g. `flashtick answers alerts/updown/SYN.A/`; `flashtick topics " \
            "alerts/updown/` lists them, `flashtick subscribe alerts/updown/` follows them all live" in err, err
        code, out, err = run(capsys, "topics", "alerts/updown/", *control)
        assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["alerts/updown/SYN.A/",
                                                                                "alerts/updown/SYN.B/"], out
        code, out, err = run(capsys, "topics", "updown/", *control)
        assert (code, out) == (0, "") and err == "flashtick topics: no answer published yet on a topic starting " \
            "\"updown/\": query \"updown\" publishes on its own topic \"alerts/updown/{stream}/\" (`flashtick topics " \
            "alerts/updown/`)\n", err


def test_answers_after_the_last_seq_exits_0_for_a_polling_loop(checkpoint, tmp_path, capsys) -> None:
    """`answers --after LAST` exited 1 when nothing was newer, which ends a polling loop under `set -e`: with
    --after, nothing newer yet is exit 0, said on stderr; a topic with no answer at all is still 1."""
    with answered(checkpoint, tmp_path, capsys) as (control, last):
        seq = last["one/SYN.A/"]
        code, out, err = run(capsys, "answers", "one/SYN.A/", "--after", str(seq), *control)
        assert (code, out) == (0, "") and err == f"flashtick answers: nothing after seq {seq} yet (the topic's " \
                                                 f"last)\n", err
        code, out, err = run(capsys, "answers", "one/SYN.A/", "--after", str(seq - 1), *control)
        assert code == 0 and [json.loads(line)["seq"] for line in out.splitlines()] == [seq] and not err
        code, out, err = run(capsys, "answers", "dir/SYN.Z/", "--after", "0", *control)
        assert (code, out) == (1, "") and "no answer published on \"dir/SYN.Z/\"" in err, err


def test_answers_prints_a_bounded_page_and_topics_says_when_no_answer_is_cached(checkpoint, tmp_path, capsys) -> None:
    """`answers TOPIC` printed every kept answer (thousands flooded a terminal): at most --limit (default 100), the
    newest --last N, or --all. `topics` printed `answer_ts None` for a topic whose query was replaced since its last
    answer: said in words, and null in the JSON form."""
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        market = SyntheticMarket(SyntheticConfig(seed=3))
        with FeedClient(server.endpoints["ingest"]) as feed, ControlClient(server.endpoints["control"]) as raw:
            for sent in range(12, 12 * 9, 12):  # a message at a time, each computed before the next: an answer each
                feed.send(market.next_batch(12))
                wait_for(lambda: (lambda stats: stats["ticks_in"] == sent and stats["pending_tokens"] == 0)(
                    raw.call("stats")["stats"]))
        last = server.pipeline.cache.last_seq("dir/SYN.A/")
        assert last >= 5
        code, out, err = run(capsys, "answers", "dir/SYN.A/", "--limit", "3", *control)
        assert code == 0 and [json.loads(line)["seq"] for line in out.splitlines()] == [1, 2, 3], out
        assert f"printed 3 (--limit 3); the topic has more, up to seq {last}: --after 3 for the next ones" in err, err
        code, out, err = run(capsys, "answers", "dir/SYN.A/", "--last", "2", *control)
        assert code == 0 and [json.loads(line)["seq"] for line in out.splitlines()] == [last - 1, last] and not err
        code, out, err = run(capsys, "answers", "dir/SYN.A/", "--all", *control)
        assert code == 0 and len(out.splitlines()) == last and not err

        # nothing to print is said, exit 1 (as `get`): past the last seq, a prefix, a topic never published on
        code, out, err = run(capsys, "answers", "dir/SYN.A/", "--after", str(last + 5), *control)
        assert (code, out) == (1, "") and err.startswith(f"flashtick answers: nothing after seq {last + 5}: the "
                                                         f"topic's last is {last} (an --after past it: "), err
        code, out, err = run(capsys, "answers", "dir/", *control)
        assert (code, out) == (1, "") and err.startswith('flashtick answers: "dir/" names 4 topics (dir/SYN.A/, '
                                                         "dir/SYN.B/, "), err
        code, out, err = run(capsys, "answers", "nosuch/AAA/", *control)
        assert (code, out) == (1, "") and err == "flashtick answers: no answer published on \"nosuch/AAA/\" " \
                                                 "(flashtick topics lists the topics)\n", err

        replaced = tmp_path / "dir_again.yaml"
        replaced.write_text(DIR_QUERY.replace("trigger: batch", "trigger: {ticks: 50}"))
        assert run(capsys, "register", str(replaced), *control)[0] == 0  # its cached answers go with the old spec
        code, out, _ = run(capsys, "topics", "dir/SYN.A/", *control)
        assert code == 0 and out == f"dir/SYN.A/\tlast_seq {last}\tno cached answer (its stream was forgotten, or " \
                                    f"its query was replaced)\n", out
        code, out, _ = run(capsys, "topics", "dir/SYN.A/", "--json", *control)
        assert code == 0 and json.loads(out) == {"dir/SYN.A/": {"last_seq": last, "answer_ts": None}}
        assert run(capsys, "unregister", "dir", *control)[0] == 0  # (review397 #4: said as replaced, or forgotten)
        code, out, _ = run(capsys, "topics", "dir/SYN.A/", *control)
        assert code == 0 and out == f"dir/SYN.A/\tlast_seq {last}\tno cached answer (no registered query publishes " \
                                    f"on it now: its query was unregistered, or moved to another topic)\n", out


def test_answers_says_how_many_of_a_topics_answers_are_gone_when_none_is_kept(checkpoint, tmp_path, capsys) -> None:
    """Once log.answers_keep rolled past every answer of a topic, `answers TOPIC` said "answers of TOPIC before seq
    None are no longer kept" (review225 #2): it says that none of them is kept, how many and which seqs."""
    (tmp_path / "q.yaml").write_text(DIR_QUERY)
    with serving(ServiceConfig.from_dict({
            "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}, "endpoints": LOCAL,
            "queries": str(tmp_path / "q.yaml"), "log": {"answers_keep": 1}})) as server:
        control = ("--control", server.endpoints["control"])
        with FeedClient(server.endpoints["ingest"]) as feed, ControlClient(server.endpoints["control"]) as raw:
            for sent in (12, 24):  # two messages, each computed before the next: two answers a topic
                feed.send(SyntheticMarket(SyntheticConfig(seed=3)).next_batch(24)[sent - 12 : sent])
                wait_for(lambda: (lambda stats: stats["ticks_in"] == sent and stats["pending_tokens"] == 0)(
                    raw.call("stats")["stats"]), timeout_s=60)
            gone = [topic for topic in raw.call("topics")["topics"]
                    if raw.call("answers", topic=topic, after=0)["oldest_seq"] is None]
            last = raw.call("answers", topic=gone[0], after=0)["last_seq"]
        assert last >= 2
        keep = "is kept any more (the service keeps the newest log.answers_keep answers of all topics in memory, "
        code, out, err = run(capsys, "answers", gone[0], *control)
        assert (code, out) == (1, "") and err.startswith(
            f"flashtick answers: none of the {last} answers of {gone[0]} (seqs 1-{last}) {keep}"), err
        code, out, err = run(capsys, "answers", gone[0], "--after", str(last - 1), *control)
        assert (code, out) == (1, "") and err.startswith(
            f"flashtick answers: none of the 1 answer of {gone[0]} after seq {last - 1} (seq {last}) {keep}"), err
        # --last N starts after a seq the user never typed: what is said is of the whole topic (none of it kept)
        code, out, err = run(capsys, "answers", gone[0], "--last", "1", *control)
        assert (code, out) == (1, "") and err.startswith(
            f"flashtick answers: none of the {last} answers of {gone[0]} (seqs 1-{last}) {keep}"), err


def test_get_after_a_replace_says_the_query_was_replaced_not_no_answer_yet(checkpoint, tmp_path, capsys) -> None:
    """A replace drops the query's cached answers (they answer the old question); until the new spec fired, `get`
    said "no cached answer of dir on SYN.A yet" of a topic that had published (review225 #4). It says the query
    was replaced after which seq, and once the new spec answers, `get` prints that answer."""
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        market = SyntheticMarket(SyntheticConfig(seed=3))
        with FeedClient(server.endpoints["ingest"]) as feed, ControlClient(server.endpoints["control"]) as raw:
            def fed(sent: int) -> None:  # a message at a time, each computed before the next
                feed.send(market.next_batch(12))
                wait_for(lambda: (lambda stats: stats["ticks_in"] == sent and stats["pending_tokens"] == 0)(
                    raw.call("stats")["stats"]), timeout_s=60)

            fed(12), fed(24)
            last = server.pipeline.cache.last_seq("dir/SYN.A/")
            assert last >= 1 and run(capsys, "get", "SYN.A", "dir", *control)[0] == 0
            replaced = tmp_path / "dir_again.yaml"
            replaced.write_text(DIR_QUERY.replace("trigger: batch", "trigger: {ticks: 50}"))
            assert run(capsys, "register", str(replaced), *control)[0] == 0
            code, out, err = run(capsys, "get", "SYN.A", "dir", *control)
            assert (code, out) == (1, "") and err == (
                f"flashtick get: no answer of dir on SYN.A since dir was replaced after seq {last} of dir/SYN.A/: its "
                f"new spec has not answered yet (a replace drops the old spec's cached answers; `flashtick answers "
                f"dir/SYN.A/` lists those still kept)\n"), err
            reply = raw.call("get", query="dir", stream="SYN.A")
            assert reply["answer"] is None and reply["replaced"] == {"topic": "dir/SYN.A/", "seq": last}
            code, out, _ = run(capsys, "answers", "dir/SYN.A/", "--all", *control)
            assert code == 0 and len(out.splitlines()) == last
            for sent in range(36, 12 * 20, 12):  # until the new spec has answered SYN.A
                fed(sent)
                if server.pipeline.cache.get("dir", "SYN.A") is not None:
                    break
            assert "replaced" not in raw.call("get", query="dir", stream="SYN.A")
        code, out, err = run(capsys, "get", "SYN.A", "dir", *control)
        assert code == 0 and json.loads(out)["seq"] == last + 1 and not err, err


def test_clients_connect_to_the_endpoints_of_the_services_config_file(checkpoint, tmp_path, capsys) -> None:
    """`serve --config FILE` on other ports: every client command takes the same --config and finds them."""
    with serving(config(checkpoint, tmp_path)) as server:
        bound = {name: server.endpoints[name] for name in ("ingest", "answers", "control")}
        bound["ingest"] = bound["ingest"].replace("127.0.0.1", "*")  # bound on every interface: reached locally
        service_yaml = tmp_path / "engine.yaml"
        service_yaml.write_text(f"model: {{path: {checkpoint}}}\nendpoints: {json.dumps(bound)}\n")
        code, out, err = run(capsys, "feed", "synthetic", "--ticks", "30", "--rate", "3000", "--config",
                             str(service_yaml))
        assert code == 0, err
        wait_for(lambda: main(["stats", "--config", str(service_yaml)]) == 0 and
                 json.loads(capsys.readouterr().out)["ticks_in"] == 30)
        code, out, _ = run(capsys, "health", "--config", str(service_yaml))
        assert code == 0 and json.loads(out)["status"] == "serving"
        code, out, err = run(capsys, "scores", "--json", "--config", str(service_yaml))
        assert code == 0 and isinstance(json.loads(out), dict), err
        code, out, _ = run(capsys, "subscribe", "_", "--count", "1", "--config", str(service_yaml))
        assert code == 0 and out.startswith("_heartbeat/")
        code, _, err = run(capsys, "stats", "--config", str(tmp_path / "missing.yaml"))
        assert code == 2 and "missing.yaml" in err


def test_client_commands_start_without_importing_torch(checkpoint, tmp_path) -> None:
    """A client command (stats, get, ask, ... with or without --config) loads no model: torch's import (~2 s of
    CPU on this machine) is left out of its start, which scripts that poll the engine pay on every call."""
    import subprocess
    import sys
    from pathlib import Path

    service_yaml = tmp_path / "engine.yaml"
    service_yaml.write_text(f"model: {{path: {checkpoint}}}\nendpoints: {{control: 'tcp://127.0.0.1:9'}}\n")
    probe = ("import sys; from engine.service.cli import main\n"
             "for extra in ([], ['--config', sys.argv[1]]):\n"
             "    assert main(['stats', '--timeout', '0.1', *extra]) == 4\n"
             "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", probe, str(service_yaml)], capture_output=True, text=True,
                          cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    assert done.returncode == 0, done.stderr
    *failures, modules = done.stdout.strip().splitlines()  # stats' stdout is JSON, its failure's too: one a run
    assert modules == "[]" and [json.loads(line)["ok"] for line in failures] == [False, False], done.stdout
    assert "no connection to tcp://127.0.0.1:9" in done.stderr  # the --config file's endpoint was read


def test_a_second_synthetic_feed_goes_on_after_the_first_ran_ahead_of_the_clock(checkpoint, tmp_path, capsys) -> None:
    """`feed synthetic` at 5,000 ticks/s runs event time ~100x as fast as the clock (the market's own pace is ~30
    ticks/s): the next feed, started "now" (a year back), begins after the engine's last tick of its streams
    instead of being refused as ts_backwards until the clock catches up."""
    with serving(config(checkpoint, tmp_path)) as server:
        argv = ("feed", "synthetic", "--ticks", "400", "--rate", "5000", "--endpoint", server.endpoints["ingest"],
                "--answers", server.endpoints["answers"], "--control", server.endpoints["control"])
        code, _, err = run(capsys, *argv)
        assert code == 0 and "; 0 rejected" in err, err
        code, _, err = run(capsys, *argv)
        assert code == 0 and "; 0 rejected" in err, err
        assert "event time starts after the engine's last tick of these streams, " in err
        wait_for(lambda: main(["stats", "--control", server.endpoints["control"]]) == 0 and
                 json.loads(capsys.readouterr().out)["ticks_in"] == 800)


def test_feed_replay_that_the_engine_rejects_whole_exits_non_zero(checkpoint, tmp_path, capsys) -> None:
    """A file older than what the engine has: every tick is ts_backwards, none is accepted, and the command says
    so with exit code 2 instead of reporting a send."""
    import polars as pl

    ticks = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(80)
    pl.DataFrame([t.to_wire() for t in ticks[40:]]).write_parquet(tmp_path / "later.parquet")
    pl.DataFrame([t.to_wire() for t in ticks[:20]]).write_parquet(tmp_path / "earlier.parquet")
    assert {t.stream for t in ticks[:20]} <= {t.stream for t in ticks[40:]}
    with serving(config(checkpoint, tmp_path)) as server:
        argv = ["--endpoint", server.endpoints["ingest"], "--answers", server.endpoints["answers"]]
        code, _, err = run(capsys, "feed", "replay", str(tmp_path / "later.parquet"), *argv)
        assert code == 0, err
        code, _, err = run(capsys, "feed", "replay", str(tmp_path / "earlier.parquet"), *argv)
        assert code == 2 and "20 rejected (ts_backwards: 20)" in err, err
        assert "\n  first ts_backwards: stream SYN." in err, err  # why, in the engine's words
        assert "the engine rejected every tick sent (20; reasons above): none was accepted" in err


def test_feed_replay_of_a_time_range_sends_its_ticks_alone_and_counts_the_rest(checkpoint, tmp_path, capsys) -> None:
    import polars as pl

    from connectors.ticks import utc_text

    ticks = SyntheticMarket(SyntheticConfig(seed=4)).next_batch(200)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(tmp_path / "day.parquet")
    with serving(config(checkpoint, tmp_path)) as server:
        code, _, err = run(capsys, "feed", "replay", str(tmp_path / "day.parquet"), "--from", utc_text(ticks[50].ts),
                           "--to", utc_text(ticks[120].ts), "--endpoint", server.endpoints["ingest"],
                           "--answers", server.endpoints["answers"])
        assert code == 0 and "sent 70 ticks" in err, err
        assert f"flashtick feed replay: --from {utc_text(ticks[50].ts)} --to {utc_text(ticks[120].ts)}: 130 " \
               f"row(s) of the files outside it left out" in err, err


def test_wait_ready_means_nothing_published_after_it_is_missed(checkpoint, tmp_path) -> None:
    with serving(config(checkpoint, tmp_path)) as server, \
            AnswerSubscriber(server.endpoints["answers"], ["dir/"]) as answers:
        answers.wait_ready(timeout_s=5)
        with FeedClient(server.endpoints["ingest"]) as feed:
            feed.send(SyntheticMarket(SyntheticConfig(seed=3)).next_batch(8))
        message = answers.recv(timeout_s=10)
        assert message is not None and message[0].startswith("dir/") and message[1]["seq"] == 1
        while (message := answers.recv(timeout_s=0.3)) is not None:
            assert message[0].startswith("dir/")


@pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")
def test_key_options_against_a_curve_server(checkpoint, tmp_path, capsys, monkeypatch) -> None:
    keys = tmp_path / "keys"
    assert run(capsys, "keygen", "server", "--dir", str(keys))[0] == 0
    for name in ("alice", "mallory"):
        keygen(keys, name)
    (tmp_path / "allowed").mkdir()
    shutil.copy(keys / "alice.key", tmp_path / "allowed")
    curve = {"enabled": True, "server_secret_key_file": str(keys / "server.key_secret"),
             "clients_dir": str(tmp_path / "allowed"), "ingest": True}
    alice = ("--server-key", str(keys / "server.key"), "--client-key", str(keys / "alice.key_secret"))
    with serving(config(checkpoint, tmp_path, curve)) as server:
        control = ("--control", server.endpoints["control"])
        code, out, _ = run(capsys, "health", *control, *alice)
        assert code == 0 and json.loads(out)["status"] == "serving"

        started = time.monotonic()
        code, _, err = run(capsys, "stats", *control)
        assert code == 2 and "give --server-key" in err
        code, _, err = run(capsys, "register", str(tmp_path / "q.yaml"), *control, "--server-key",
                           str(keys / "server.key"), "--client-key", str(keys / "mallory.key_secret"))
        assert code == 2 and "refused this client's key" in err
        code, _, err = run(capsys, "health", *control, "--server-key", str(keys / "server.key_secret"),
                           "--client-key", str(keys / "alice.key_secret"))  # the server's secret, on a client
        assert code == 2 and "server.key_secret: holds a secret key: a client needs the server's public key" in err
        code, _, err = run(capsys, "subscribe", "--count", "1", "--endpoint", server.endpoints["answers"])
        assert code == 2 and "refused the subscription" in err
        assert time.monotonic() - started < 10  # refusals are reported, not waited out

        code, out, _ = run(capsys, "feed", "synthetic", "--ticks", "50", "--endpoint", server.endpoints["ingest"],
                           *alice)
        assert code == 0
        wait_for(lambda: main(["get", "SYN.A", "dir", *control, *alice]) == 0)
        capsys.readouterr()
        code, out, _ = run(capsys, "subscribe", "_heartbeat/", "--count", "1", "--json",
                           "--endpoint", server.endpoints["answers"], *alice)
        assert code == 0 and json.loads(out)["topic"] == "_heartbeat/"

        monkeypatch.setenv("FLASHTICK_SERVER_KEY", str(keys / "server.key"))
        monkeypatch.setenv("FLASHTICK_CLIENT_KEY", str(keys / "alice.key_secret"))
        code, out, _ = run(capsys, "list", *control)
        assert code == 0 and out.startswith("dir ")
        monkeypatch.delenv("FLASHTICK_SERVER_KEY")
        code, _, err = run(capsys, "ask", "SYN.A", "dir", *control)
        assert code == 2 and "--client-key needs --server-key" in err


def test_subscribe_says_where_a_topic_skipped_answers(capsys) -> None:
    """A plain SUB loses what PUB dropped or published while it was away, silently: `subscribe` says where a topic's
    seq jumped and how to fetch the rest; a heartbeat or a later seq going on is not a gap."""
    from engine.service.cmd_subscribe import _note_gap

    last: dict[str, int] = {}
    for topic, seq in [("dir20/A/", 1), ("dir20/A/", 2), ("_heartbeat/", 9), ("dir20/B/", 7), ("dir20/A/", 5)]:
        _note_gap(last, topic, {"seq": seq})
    err = capsys.readouterr().err
    assert err.count("note:") == 1
    assert "dir20/A/ went from seq 2 to 5: 2 answers not received here (`flashtick answers dir20/A/ --after 2`" in err


def test_subscribe_says_once_when_a_stream_prefix_gets_other_streams(capsys) -> None:
    """`subscribe dir5/ZNH6` (no closing '/') got the calendar spread ZNH6-ZNM6's answers too, unsaid: the first
    such topic says that the prefix is one and how to name the stream alone; the exact stream, a query's prefix
    and a closed prefix say nothing."""
    from engine.service.cmd_subscribe import _note_wider_prefix

    said: set[str] = set()
    prefixes = ["dir5/ZNH6", "dir20/", "vol50/ESH6/", "move", "alerts/up", "alerts/updown/ZN"]
    for topic in ["dir5/ZNH6/", "_heartbeat/", "dir20/ZNH6-ZNM6/", "vol50/ESH6/", "move50/ESH6/", "dir5/ZNH6-ZNM6/",
                  "dir5/ZNH6-ZNU6/", "alerts/updown/ZNH6/"]:
        _note_wider_prefix(prefixes, topic, said)
    err = capsys.readouterr().err
    assert err.count("note:") == 2 and said == {"dir5/ZNH6", "alerts/updown/ZN"}, err
    assert '"dir5/ZNH6" is a topic prefix: it gets "dir5/ZNH6-ZNM6/" too, and every stream whose name starts with ' \
           "\"ZNH6\"; \"dir5/ZNH6/\" is stream \"ZNH6\" alone" in err, err
    # a query's own topic (alerts/{query}/{stream}/): the stream is the prefix's last part; `alerts/up` is no stream's
    assert 'every stream whose name starts with "ZN"; "alerts/updown/ZN/" is stream "ZN" alone' in err, err


def test_register_says_which_queries_it_replaced(checkpoint, tmp_path, capsys) -> None:
    """`flashtick register` replaced a same-named query without a word (its topics' subscribers went quiet): it
    names the queries it replaced."""
    (tmp_path / "vol.yaml").write_text(VOL_QUERY)
    (tmp_path / "two.yaml").write_text(VOL_QUERY + DIR_QUERY.removeprefix("queries:\n"))
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        assert run(capsys, "register", str(tmp_path / "vol.yaml"), *control) == \
            (0, "registered vol (registry version 2)\n", "")
        # the same specs again: unchanged, their state kept and the version where it was (review381 #1)
        assert run(capsys, "register", str(tmp_path / "two.yaml"), *control) == \
            (0, "registered vol, dir (registry version 2); unchanged vol, dir (the same spec as registered: its "
                "answers, seqs, trigger state and adaptation go on)\n", "")
        (tmp_path / "two.yaml").write_text(VOL_QUERY.replace("{ticks: 5}", "{ticks: 6}")
                                           + DIR_QUERY.removeprefix("queries:\n").replace("batch", "{ticks: 2}"))
        assert run(capsys, "register", str(tmp_path / "two.yaml"), *control) == \
            (0, "registered vol, dir (registry version 3); replaced vol, dir (the earlier spec of each no longer "
                "answers)\n", "")


def test_subscribe_says_when_the_registered_queries_change(capsys) -> None:
    """A subscriber's topic goes quiet when its query is unregistered or replaced: heartbeats carry the registry
    version, and `subscribe` says when it moves (not at the first heartbeat, nor for an older server's)."""
    from engine.service.cmd_subscribe import _note_registry_change

    known = None
    for beat in [{"seq": 1}, {"seq": 2, "registry_version": 4}, {"seq": 3, "registry_version": 4},
                 {"seq": 4, "registry_version": 6}, {"seq": 5}]:
        known = _note_registry_change(known, beat)
    err = capsys.readouterr().err
    assert known == 6 and err == "flashtick subscribe: note: the registered queries changed (registry version 4 -> " \
        "6): a query registered, replaced or unregistered (`flashtick list` shows them)\n", err


def test_a_control_request_lost_with_its_connection_fails_at_once() -> None:
    """A request on a connection that drops before the reply (the service stopped) is gone with it: the client says
    so as soon as the connection drops, not after its whole timeout, as a ControlDropped: a ConnectionError, which a
    retry loop written from the docs catches (it was a plain ControlError with no reason)."""
    import msgpack

    from engine.service.client import ControlDropped

    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.linger = 0
    port = router.bind_to_random_port("tcp://127.0.0.1")
    with ControlClient(f"tcp://127.0.0.1:{port}", timeout_s=30) as control:
        control.send_raw(msgpack.packb({"op": "health"}))
        assert router.poll(5000) and router.recv_multipart()  # taken, never answered: the service goes down
        router.close(linger=0)
        started = time.monotonic()
        with pytest.raises(ControlDropped, match="dropped before the reply came") as raised:
            control.receive()
        assert time.monotonic() - started < 5
    assert isinstance(raised.value, ConnectionError)


@pytest.mark.parametrize("held", ["ingest", "answers"])
def test_serve_on_a_port_in_use_says_so_and_leaves_no_data_directory(checkpoint, tmp_path, capsys, held: str) -> None:
    """The ingest and answers sockets bind once the engine is up: a port taken failed only then, after a fresh
    --data-dir was made (logs, meta.json, the lock), which stayed behind. A taken port is said before anything is
    made on disk."""
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        endpoints = {**LOCAL, held: f"tcp://127.0.0.1:{port}"}
        (tmp_path / "engine.yaml").write_text(json.dumps({"model": {"path": str(checkpoint)}, "endpoints": endpoints}))
        fresh = tmp_path / "fresh"
        code, out, err = run(capsys, "serve", "--config", str(tmp_path / "engine.yaml"), "--data-dir",
                             str(fresh / "data"))
    assert code == 2 and err.endswith(f"flashtick serve: ERROR: cannot bind the {held} socket to tcp://127.0.0.1:"
                                      f"{port}: port {port} is in use (is another flashtick serve running? set "
                                      f"endpoints.{held} in the --config file)\n"), err
    assert not fresh.exists()


@pytest.mark.parametrize("endpoints, said", [
    ({"ingest": "tcp://localhost:59545", "answers": "tcp://127.0.0.1:59545"},
     "endpoints.answers and endpoints.ingest both use port 59545 on localhost and 127.0.0.1, the same address"),
    ({"control": "tcp://0.0.0.0:59547", "metrics_port": 59547},
     "endpoints.metrics_port and endpoints.control both use port 59547 on 0.0.0.0 and 127.0.0.1, which overlap"),
])
def test_serve_with_one_port_twice_in_its_config_names_the_two_keys(tmp_path, capsys, endpoints, said) -> None:
    """A copy-paste slip (ingest on localhost:P, answers on 127.0.0.1:P) was a bind error asking "is another
    flashtick serve running?": the clash is inside the file, refused before anything binds (nothing does here)."""
    path = tmp_path / "engine.yaml"
    path.write_text(json.dumps({"endpoints": {**LOCAL, **endpoints}, "log": {"enabled": False}}))
    code, out, err = run(capsys, "serve", "--config", str(path))
    started, *rest = err.splitlines()  # (the first line, said before anything is read: a start began)
    assert started.endswith(f" starting (pid {os.getpid()}, config {path})"), err
    assert code == 2 and rest == [f"flashtick serve: ERROR: {path}: {said}: give each socket its own port (or 0 for "
                                  f"any free one)"], err


def test_serve_with_a_ray_address_where_nothing_listens_fails_at_once(tmp_path, capsys) -> None:
    """Ray itself would retry for minutes, saying only that it cannot reach its GCS."""
    import socket

    pytest.importorskip("ray", reason="the ray extra is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    code, _, err = run(capsys, "serve", "--shards", "2", "--ray-address", f"127.0.0.1:{port}",
                       "--data-dir", str(tmp_path / "data"))
    assert code == 2 and f"shards.ray_address 127.0.0.1:{port}: nothing accepts connections there" in err
    assert time.monotonic() - started < 30


def test_feed_says_the_engines_rejections_as_they_come_and_what_it_sent_when_stopped_by_sigterm_or_sigint(
        checkpoint, tmp_path) -> None:
    """A feed whose every tick was refused (a full disk's log_unavailable) said nothing on stderr until its summary.
    It says the first rejection of each reason as it comes, with the engine's why, then the counts per reason at
    most every 10 s. The engine here holds one stream (scheduler.max_streams 1): the synthetic market's other
    three are refused, every tick, from the first.

    A supervisor stops a feed with SIGTERM: it ends after the current batch and prints its summary (it died
    silently, leaving the operator no account of what was sent), exit 143 (it was 0: a scheduler that stopped an
    overrunning feed saw it succeed, review337 #4). A Ctrl-C does the same but exits 130, as backtest does, so a
    script tells a feed cut short from a whole one. (One engine for both feeds: the second, stopped by SIGINT,
    is fed as the first after it.)"""
    import signal
    import subprocess

    limited = dataclasses.replace(config(checkpoint, tmp_path), scheduler=dataclasses.replace(
        config(checkpoint, tmp_path).scheduler, max_streams=1))
    with serving(limited) as server:
        # (10 ticks a second: past the 10 s of REJECTS_SAY_EVERY_S, ~75 of the 3 refused streams' ticks to count;
        # 40 a second were 4x the feed's and the engine's work for the same lines)
        feed = cli_popen(["feed", "synthetic", "--rate", "10", "--endpoint", server.endpoints["ingest"], "--answers",
                          server.endpoints["answers"], "--control", ""], stderr=subprocess.PIPE, text=True)
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(feed.stderr), daemon=True)  # (a line at a time)
        reader.start()
        try:
            wait_for(lambda: any("more ticks in the last" in line for line in lines), timeout_s=120)
            running = feed.poll() is None  # said while feeding, not at its end
            feed.send_signal(signal.SIGTERM)
            feed.wait(timeout=120)
            reader.join(60)
        finally:
            feed.kill()
        ticks_before = server.pipeline.ticks_in
        interrupted = cli_popen(["feed", "synthetic", "--rate", "200", "--endpoint", server.endpoints["ingest"]],
                                stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: server.pipeline.ticks_in > ticks_before + 20, timeout_s=60)
            interrupted.send_signal(signal.SIGINT)
            _, interrupted_err = interrupted.communicate(timeout=60)
        finally:
            interrupted.kill()
    err = "".join(lines)
    assert running and feed.returncode == 143, err  # stopped by the test's SIGTERM (docs/cli.md)
    first = [line for line in lines if "more rejections are counted" in line]
    assert len(first) == 1 and \
        first[0].startswith("flashtick feed synthetic: the engine refused 1 tick of stream ") and \
        "stream_refused: " in first[0] and "(scheduler.max_streams)" in first[0], err
    counts = [line for line in lines if "more ticks in the last" in line]
    assert re.search(r"^flashtick feed synthetic: the engine refused \d+ more ticks in the last \d+ s "
                     r"\(stream_refused: \d+\); \d+ in all$", counts[0].strip()), err
    assert lines.index(first[0]) < lines.index(counts[0]) < next(i for i, x in enumerate(lines) if "sent " in x), err
    for stop_by, status, said in (("SIGTERM", feed.returncode, err),
                                  ("SIGINT", interrupted.returncode, interrupted_err)):
        assert status == (143 if stop_by == "SIGTERM" else 130), said
        assert "stopped by a signal" in said and "sent " in said, said
        assert f"flashtick feed synthetic: interrupted by {stop_by}: " in said, said
        assert "with no control socket to ask what the engine holds, a re-run sends it all again" in said, said


def test_register_of_a_missing_file_says_so_before_connecting(tmp_path, capsys) -> None:
    code, _, err = run(capsys, "register", str(tmp_path / "nofile.yaml"), "--control", "tcp://127.0.0.1:1")
    assert code == 2 and f"queries file not found: {tmp_path / 'nofile.yaml'}" in err, err


def test_health_exits_non_zero_until_the_service_serves(capsys) -> None:
    """A readiness check: a reviewer's script waited for `flashtick health` to exit 0, then register failed with
    "the service is starting". A ROUTER standing in for a service that is still loading its model."""
    import threading

    import msgpack

    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.linger = 0
    port = router.bind_to_random_port("tcp://127.0.0.1")
    replies = iter([{"status": "starting", "uptime_s": 0.5, "model": "m", "phase": "loading the model"},
                    {"status": "serving", "uptime_s": 2.0, "streams": 0, "model": "m"}])

    def answer_twice() -> None:
        for reply in replies:
            *route, payload = router.recv_multipart()
            request = msgpack.unpackb(payload)
            router.send_multipart([*route, msgpack.packb({"ok": True, "id": request["id"], **reply})])

    thread = threading.Thread(target=answer_twice, daemon=True)
    thread.start()
    try:
        control = ("--control", f"tcp://127.0.0.1:{port}")
        code, out, _ = run(capsys, "health", *control)
        assert code == 1 and json.loads(out)["status"] == "starting"
        code, out, _ = run(capsys, "health", *control)
        assert code == 0 and json.loads(out)["status"] == "serving"
        thread.join(5)
    finally:
        router.close(linger=0)


def test_every_control_command_takes_a_timeout(capsys) -> None:
    """A probe against an engine that takes the request and never replies (stuck): `health --timeout 0.5` gives up
    after half a second, not the default 30 (register, stats, ... had no --timeout at all)."""
    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.linger = 0
    port = router.bind_to_random_port("tcp://127.0.0.1")
    try:
        for command in (["health"], ["stats"], ["streams"]):
            started = time.monotonic()
            code, _, err = run(capsys, *command, "--control", f"tcp://127.0.0.1:{port}", "--timeout", "0.5")
            assert code != 0 and "0.5" in err and time.monotonic() - started < 10, err
        with pytest.raises(SystemExit) as exited:  # a usage error (cli_types._timeout)
            main(["list", "--control", f"tcp://127.0.0.1:{port}", "--timeout", "0"])
        err = capsys.readouterr().err
        assert exited.value.code == 2 and "argument --timeout: must be a finite number of seconds > 0, got \"0\"" in err
        code, _, err = run(capsys, "stats", "--control", "tcp://127.0.0.1:1", "--timeout", "0.5")  # none listening
        assert code == 4 and "it was refused (nothing listens there)" in err, err  # (at once: review224 #10)
    finally:
        router.close(linger=0)


def test_every_control_commands_timeout_refuses_inf_and_nan_naming_the_option(capsys) -> None:
    """Review 174, finding 4: `health`, `stats`, `ask` ... --timeout inf passed the CLI's `> 0` check and was refused
    in the client as "timeout_s is a number of seconds > 0, got inf": a key the user never typed, and inf is > 0.
    Every control command's --timeout (one argparse type) now refuses a non-finite value when the line is parsed."""
    from engine.service.cli_parser import build_parser, subcommands

    commands = [name for name, sub in subcommands(build_parser()).items()
                if any("--timeout" in action.option_strings for action in sub._actions)]  # noqa: SLF001
    assert {"health", "stats", "ask", "list", "register"} <= set(commands), commands
    for command in commands:
        for value in ("inf", "nan", "-inf"):
            with pytest.raises(SystemExit) as exited:
                main([command, "--control", "tcp://127.0.0.1:1", f"--timeout={value}"])
            err = capsys.readouterr().err
            assert exited.value.code == 2, (command, value, err)
            assert err.strip().splitlines()[0] == (f"flashtick {command}: error: argument --timeout: must be a finite "
                                                    f"number of seconds > 0, got \"{value}\""), (command, err)


def test_health_exits_3_for_a_service_that_is_connected_but_does_not_reply_in_time(capsys) -> None:
    """A service busy catching up after a restart took the probe's request and answered after --timeout: `health`
    exited 2, as for a service that is down, and a liveness probe restarted it (its catch-up then began again).
    Connected but late is exit 3; nothing there is 4 (it was 2), and a refused connection (a stopped service's port)
    is 4 at once: it waited out the 10 s connect wait first (13.7 s on a loaded host), past a probe's own
    time-out."""
    import msgpack

    router = zmq.Context.instance().socket(zmq.ROUTER)  # accepts the connection and the request, never replies
    router.linger = 0
    port = router.bind_to_random_port("tcp://127.0.0.1")
    try:
        # (a time-out long enough for the loopback handshake on a loaded machine: it must be seen to have happened)
        code, out, err = run(capsys, "health", "--control", f"tcp://127.0.0.1:{port}", "--timeout", "5")
        assert router.poll(0) and msgpack.unpackb(router.recv_multipart()[-1])["op"] == "health"  # it was taken
        assert code == 3, err
        assert err.startswith(f"flashtick health: error: no reply from tcp://127.0.0.1:{port} within the time-out (5 s)"
                              f": connected, but the service did not answer in time (busy?) (exit 3: "), err
        said = json.loads(out)  # stdout is JSON, a failure's too (tests/test_json_failures.py)
        assert said == {"ok": False, "command": "flashtick health", "exit_status": 3,
                        "error": err.strip().removeprefix("flashtick health: error: ")}, out
    finally:
        router.close(linger=0)
    with socket.socket() as nobody:  # a port bound, never listening: connections to it are refused
        nobody.bind(("127.0.0.1", 0))
        endpoint = f"tcp://127.0.0.1:{nobody.getsockname()[1]}"
        code, _, err = run(capsys, "health", "--control", endpoint, "--timeout", "1")
        # down is 4 (2 before review337, when a typo's status was the same)
        assert code == 4 and f"no connection to {endpoint}: it was refused (nothing listens there)" in err, err
        # refused is known at once: the 10 s connect wait (--timeout 30, the default) is not waited out
        code, _, err = run(capsys, "health", "--control", endpoint)
        assert code == 4 and "it was refused (nothing listens there)" in err, err


def test_every_control_command_says_a_refused_connection_as_health_does(tmp_path: Path, capsys) -> None:
    """Review224 #10: on a port where nothing listens, `health` said "it was refused (nothing listens there)" at
    once, while `list`, `stats`, `streams`, `topics` waited out the 10 s connect wait and said "nothing accepted it
    within 10 s". Every command's client (cli_common.control_client) now takes the refusal as health does."""
    queries = tmp_path / "q.yaml"
    queries.write_text("queries: [{name: q, streams: [A], question: direction_5, kind: choice, "
                       "trigger: {ticks: 10}}]\n")
    commands = (["health"], ["list"], ["stats"], ["streams"], ["topics"], ["scores"], ["get", "A", "q"],
                ["ask", "A", "q"], ["answers", "q"], ["register", str(queries)], ["unregister", "q"], ["forget", "A"])
    with socket.socket() as nobody:  # a port bound, never listening: connections to it are refused
        nobody.bind(("127.0.0.1", 0))
        endpoint = f"tcp://127.0.0.1:{nobody.getsockname()[1]}"
        for command in commands:
            code, out, err = run(capsys, *command, "--control", endpoint)
            json_out = command[0] in ("health", "stats")  # their stdout is JSON, a failure's too
            assert code == 4 and (json.loads(out)["ok"] is False if json_out else out == ""), (command, out, err)
            assert err == (f"flashtick {command[0]}: error: no connection to {endpoint}: it was refused (nothing "
                           f"listens there); is the service running there, and past its first seconds?\n"), err


def test_health_refuses_a_timeout_under_the_minimum_before_asking(checkpoint, tmp_path, capsys) -> None:
    """`health --timeout 0.05` against a serving engine exited 0 when it was idle and 2 ("down": a liveness probe
    restarts on it) while it computed: a reply takes about 0.1 s on a loaded host. Now refused every time, before
    asking, naming the minimum; 0.1 s itself is taken."""
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        requests = server.counters["control_requests"]
        code, out, err = run(capsys, "health", *control, "--timeout", "0.05")
        assert code == 2 and json.loads(out)["exit_status"] == 2 and err.startswith(
            "flashtick health: error: --timeout must be at least 0.1 s, got 0.05: "), err
        assert server.counters["control_requests"] == requests  # nothing was asked
        code, out, err = run(capsys, "health", *control, "--timeout", "0.1")
        # asked (its exit is the service's: a loaded host may take longer than 0.1 s to connect or reply)
        assert "--timeout must be" not in err and (code != 0 or json.loads(out)["status"] == "serving"), err


def test_a_usage_error_says_the_error_first_then_where_the_help_is(capsys) -> None:
    """A usage error printed the command's whole usage first (11 lines for `feed replay` at 100 columns, every
    option) and the error last, under options the user had not asked about. Every command, the bare `flashtick` and
    the families (`feed`, `ticklog`) included, says the error, then where its help is; exit status 2 as before."""
    from engine.service.cli_parser import build_parser, subcommands

    def commands(parser: argparse.ArgumentParser, path: list[str]) -> Iterator[list[str]]:
        yield path
        for name, command in subcommands(parser).items():
            yield from commands(command, [*path, name])

    for path in commands(build_parser(), []):
        with pytest.raises(SystemExit) as exited:
            main([*path, "--bogus-option"])
        lines = capsys.readouterr().err.splitlines()
        prog = " ".join(["flashtick", *path])
        assert exited.value.code == 2 and len(lines) == 2, (path, lines)
        assert lines[0].startswith(f"{prog}: error: ") and lines[1] == f"see {prog} --help", (path, lines)


def test_an_unknown_option_shows_the_usage_of_its_subcommand(capsys) -> None:
    """`subscribe --bogus` printed `usage: flashtick [-h] COMMAND ...`, hiding the options subscribe has: the error
    is the subcommand's, and so is the help it points to."""
    for argv, prog in ((["subscribe", "--bogus", "x"], "flashtick subscribe"),
                       (["feed", "replay", "x.csv", "--bogus"], "flashtick feed replay")):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        err = capsys.readouterr().err
        assert exited.value.code == 2 and err == f"{prog}: error: unrecognized arguments: --bogus\nsee {prog} --help\n"
    # subscribe's answers endpoint is --answers too, as `feed` names it; a count of nothing is no run to do (`feed
    # replay --ticks 0` said "the files hold no ticks")
    for argv, option in ((["subscribe", "--answers", "tcp://127.0.0.1:9", "--count", "0"], "--count"),
                         (["feed", "replay", "x.csv", "--ticks", "0"], "--ticks"),
                         (["feed", "synthetic", "--ticks", "-2"], "--ticks"),
                         (["backtest", "x.csv", "--max-ticks", "0"], "--max-ticks")):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        err = capsys.readouterr().err
        assert exited.value.code == 2 and f"error: argument {option}: must be a whole number >= 1, got" in err, err


def test_queries_given_twice_is_a_usage_error_not_the_last_file_kept(capsys) -> None:
    """`backtest --queries qa.yaml --queries qb.yaml` ran qb.yaml's queries alone, without a word (review225 #3):
    every command that takes --queries takes one file, as the config's `queries` and `register` do, and says so
    when given two, before anything is read; one --queries (or none, demo's default) parses as before."""
    from engine.service.cli_parser import build_parser

    for command in (["backtest", "x.csv", "--out", "a.parquet"], ["serve"], ["demo"]):
        with pytest.raises(SystemExit) as exited:
            main([*command, "--queries", "qa.yaml", "--queries", "qb.yaml"])
        prog = f"flashtick {command[0]}"
        assert exited.value.code == 2 and capsys.readouterr().err == (
            f"{prog}: error: argument --queries: given twice (qa.yaml, then qb.yaml): a command takes one queries "
            f"file, as the config's `queries` and `register` do: list the queries of both in one file\n"
            f"see {prog} --help\n")
        assert str(build_parser().parse_args([*command, "--queries", "qa.yaml"]).queries) == "qa.yaml"
    assert build_parser().parse_args(["demo"]).queries.name == "tick_model.yaml"


def test_serve_log_timestamps_stamp_the_usage_error_too(capsys) -> None:
    """`serve --log-timestamps --bogus` wrote argparse's usage error unstamped (the parse ran before the stamping
    began), the one run's lines a log kept in a file could not place in time. Abbreviated as argparse takes it too;
    a serve without the option, and an option after `--`, stay plain. Given before the command (`flashtick
    --log-timestamps serve --bogus`) it was refused, unstamped: it is every command's option there."""
    stamped = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (.*)")
    for argv in (["serve", "--log-timestamps", "--bogus-option"], ["serve", "--bogus-option", "--log-t"],
                 ["serve", "--log-timestamps", "--config"], ["--log-timestamps", "serve", "--bogus-option"],
                 ["--log", "serve", "--bogus-option"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        lines = capsys.readouterr().err.splitlines()
        assert exited.value.code == 2 and all(stamped.fullmatch(line) for line in lines), lines
        assert stamped.fullmatch(lines[0]).group(1).startswith("flashtick serve: error: "), lines
        assert stamped.fullmatch(lines[-1]).group(1) == "see flashtick serve --help", lines
    for argv in (["serve", "--bogus-option"], ["serve", "--bogus-option", "--", "--log-timestamps"]):
        with pytest.raises(SystemExit):
            main(argv)
        lines = capsys.readouterr().err.splitlines()
        assert lines[0].startswith("flashtick serve: error: ") and not any(stamped.fullmatch(line) for line in lines)
    code, _, err = run(capsys, "--log-timestamps", "health", "--control", "tcp://127.0.0.1:1", "--timeout", "0.5")
    assert code == 4 and stamped.fullmatch(err.rstrip("\n")).group(1).startswith("flashtick health: error: "), err


def test_log_timestamps_after_any_command_stamps_it_and_an_option_before_the_command_is_said_to_be(capsys) -> None:
    """`flashtick stats --log-timestamps` was refused, unstamped ("unrecognized arguments"): it is an option of every
    command, after it as before it. `flashtick --log-timestamps --bogus serve` blamed --bogus on serve."""
    stamped = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (.*)")
    code, _, err = run(capsys, "stats", "--log-timestamps", "--control", "tcp://127.0.0.1:1", "--timeout", "0.5")
    assert code == 4 and stamped.fullmatch(err.rstrip("\n")).group(1).startswith("flashtick stats: error: no conn"), err
    for argv, said in ((["feed", "replay", "x.csv", "--log-timestamps", "--bogus"], "flashtick feed replay: error: "),
                       (["stats", "--log-t", "--bogus"], "flashtick stats: error: unrecognized arguments: --bogus"),
                       (["--log-timestamps", "--bogus", "serve"],
                        "flashtick: error: unrecognized arguments: --bogus (given before the command serve: a "
                        "command's own options go after it)")):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        lines = capsys.readouterr().err.splitlines()
        assert exited.value.code == 2 and all(stamped.fullmatch(line) for line in lines), lines
        assert stamped.fullmatch(lines[0]).group(1).startswith(said), lines
    with pytest.raises(SystemExit):
        main(["--bogus", "stats"])
    assert capsys.readouterr().err.splitlines()[0] == ("flashtick: error: unrecognized arguments: --bogus (given "
                                                       "before the command stats: a command's own options go after "
                                                       "it)")


def test_ask_without_a_query_is_a_usage_error_said_as_the_line_is_parsed(capsys) -> None:
    """`flashtick ask SYN.A` said `flashtick ask: error: give a query name ...` with no `see flashtick ask --help`
    line, unlike every other usage error; so did ask's other mismatched options (--choices without --question). They
    are the parser's usage errors now: nothing connects to the control endpoint (a listener there accepts nothing)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        control = ["--control", f"tcp://127.0.0.1:{listener.getsockname()[1]}"]
        for argv, said in ((["SYN.A"], "give a query name (a registered query, or a question of the model's own) "
                                       "or --question TEXT with --choices A B ... or --generate N"),
                           (["SYN.A", "--choices", "up", "down"],
                            "--choices goes with --question TEXT (a free-text question of a text model)")):
            with pytest.raises(SystemExit) as exited:
                main(["ask", *argv, *control])
            out, err = capsys.readouterr()
            assert exited.value.code == 2 and out == "", (argv, out)
            assert err.splitlines() == [f"flashtick ask: error: {said}", "see flashtick ask --help"], (argv, err)
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):  # no connection was made, not even one closed since
            listener.accept()


def test_a_nested_commands_errors_carry_its_full_name_as_its_usage_errors_do(tmp_path, capsys) -> None:
    """`flashtick ticklog export` of a folder without a log said `flashtick ticklog: error: ...`, its usage errors
    `flashtick ticklog export: error: ...`; `feed replay` and `feed synthetic` said `flashtick feed: error:` beside
    usage errors of their full name. One prefix: the subcommand's full name, for every nested command."""
    from engine.service.cli_parser import build_parser, subcommands

    nested = [f"{name} {sub}" for name, command in subcommands(build_parser()).items() for sub in subcommands(command)]
    assert sorted(nested) == ["feed replay", "feed synthetic", "ticklog export"]  # each one below
    for argv, said in ((["ticklog", "export", str(tmp_path), "--out", str(tmp_path / "day.parquet")],
                        f"{tmp_path} holds no tick log"),
                       (["feed", "replay", str(tmp_path / "none.csv"), "--control", ""], "replay file not found"),
                       (["feed", "synthetic", "--config", str(tmp_path / "none.yaml")], "config file")):
        name = f"flashtick {argv[0]} {argv[1]}"
        code, out, err = run(capsys, *argv)
        assert code == 2 and err.startswith(f"{name}: error: {said}"), err
        with pytest.raises(SystemExit):
            main([*argv, "--bogus"])
        assert capsys.readouterr().err.startswith(f"{name}: error: unrecognized arguments: --bogus")


@contextlib.contextmanager
def socket_free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def test_subscribe_says_when_no_service_is_there_when_it_comes_goes_away_and_comes_back(checkpoint,
                                                                                      tmp_path) -> None:
    """A wrong endpoint (or a service not up yet) printed nothing at all, for ever. After the service was up, its
    heartbeats stopping (a stop, a restart) was silence too. One subscriber meets the three in turn: started before
    the service, it says that no heartbeat came; the service up, then stopped, and up again, it says each."""
    import subprocess
    from pathlib import Path

    with socket_free_port() as port:
        pass
    cfg = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16},
                                   "endpoints": {**LOCAL, "answers": f"tcp://127.0.0.1:{port}"},
                                   "limits": {"heartbeat_s": 0.2}})
    root = Path(__file__).resolve().parents[1]
    heartbeats = tmp_path / "heartbeats.jsonl"  # the child shows the heartbeats it gets: then it is up and subscribed
    with heartbeats.open("w") as shown:
        child = cli_popen(["subscribe", "dir/", "_heartbeat/", "--endpoint", f"tcp://127.0.0.1:{port}"],
                          stdout=shown, stderr=subprocess.PIPE, text=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)})

    def next_line_but_quiet_notes() -> str:
        # the quiet-topic note ('nothing published on "dir/" in 10 s') comes on its own clock and, on a loaded
        # machine, before or after either line this test waits for
        line = child.stderr.readline()
        while "nothing published" in line:
            line = child.stderr.readline()
        return line

    try:
        line = child.stderr.readline()  # within SUBSCRIBE_QUIET_S (5 s) of its start: nothing serves there yet
        assert f"flashtick subscribe: note: no heartbeat from tcp://127.0.0.1:{port} within 5 s" in line, line
        assert "waiting on (Ctrl-C stops)" in line and child.poll() is None
        with serving(cfg):
            wait_for(lambda: heartbeats.stat().st_size > 0, timeout_s=60)  # (no fixed sleep: a loaded box is late)
        line = next_line_but_quiet_notes()  # the service stopped: said within 2 x SUBSCRIBE_QUIET_S
        assert f"no heartbeat from tcp://127.0.0.1:{port} for 10 s: the service stopped or is restarting" in line, line
        with serving(cfg):
            line = next_line_but_quiet_notes()
            assert "heartbeats are back" in line, line
    finally:
        child.kill()
        child.wait(10)


def test_a_file_that_continues_a_stream_inside_its_last_millisecond_is_sent_whole(checkpoint, tmp_path,
                                                                                   capsys) -> None:
    """An export split by row count inside a millisecond: part 2's first 6 trades share the time of part 1's last
    6, which the engine holds. They were left out as held ("6 ticks not sent"), lost with exit 0; part 2 holds no
    tick before that time, so it continues what the engine holds: every tick is sent, none twice."""
    import polars as pl

    t0 = 1_723_161_283_000_000_000
    stamps = [t0 + i * 1_000_000 for i in range(44)] + [t0 + 44_000_000] * 12 + \
        [t0 + (i - 11) * 1_000_000 for i in range(56, 100)]  # rows 44..55 share one millisecond
    trades = pl.DataFrame({"ts": stamps, "stream": "BTCUSD", "price": [60_000.0 + i % 7 for i in range(100)],
                           "size": 0.01})
    trades.slice(0, 50).write_parquet(tmp_path / "part1.parquet")
    trades.slice(50).write_parquet(tmp_path / "part2.parquet")
    with serving(config(checkpoint, tmp_path)) as server:
        ends = ["--endpoint", server.endpoints["ingest"], "--answers", server.endpoints["answers"], "--control",
                server.endpoints["control"]]
        code, _, err = run(capsys, "feed", "replay", str(tmp_path / "part1.parquet"), *ends)
        assert code == 0 and "sent 50 ticks" in err, err
        wait_for(lambda: server.pipeline.ticks_in == 50, 120.0)
        code, _, err = run(capsys, "feed", "replay", str(tmp_path / "part2.parquet"), *ends)
        assert code == 0 and "sent 50 ticks" in err and "not sent" not in err, err
        assert ("flashtick feed replay: 6 ticks sent stamped as the engine's last tick of their stream (BTCUSD: 6 (the "
                "engine holds 50, 6 stamped as its last)): the files begin at that time with no earlier tick") in err
        wait_for(lambda: server.pipeline.ticks_in == 100, 120.0)
        # both parts fed again: each tick held, none sent, and the count names what the engine holds
        code, _, err = run(capsys, "feed", "replay", str(tmp_path / "part1.parquet"), str(tmp_path / "part2.parquet"),
                           *ends)
        assert code == 0 and "sent 0 ticks" in err, err
        assert "100 ticks not sent: stamped at or before the engine's last tick of their stream (BTCUSD: 100 (the " \
               "engine holds 100, 1 stamped as its last))" in err, err
        assert server.pipeline.ticks_in == 100 and sum(server.pipeline.rejected.values()) == 0


def test_a_file_all_in_the_engines_last_millisecond_fed_again_sends_nothing_twice(checkpoint, tmp_path,
                                                                                   capsys) -> None:
    """A file whose rows of a stream are all stamped with one millisecond, fed after earlier ticks: fed again, it
    was taken as continuing what the engine holds (no tick before that time, and the engine holds more) and each
    of its ticks was sent twice. Its ticks stamped then are placed by at_last_ts as a re-feed is: those past it
    are sent (a longer export of that millisecond), and a file going on past that time still continues it."""
    import polars as pl

    t0, t1 = 1_723_161_283_000_000_000, 1_723_161_283_100_000_000  # t1: the burst's millisecond

    def trades(stamps: list[int], name: str) -> str:
        path = tmp_path / name
        pl.DataFrame({"ts": stamps, "stream": "BTCUSD", "price": [60_000.0 + i % 7 for i in range(len(stamps))],
                      "size": 0.01}).write_parquet(path)
        return str(path)

    earlier = trades([t0 + i * 1_000_000 for i in range(50)], "earlier.parquet")
    burst = trades([t1] * 8, "burst.parquet")
    longer = trades([t1] * 12, "burst_longer.parquet")  # the same millisecond exported again, 4 rows more
    goes_on = trades([t1] * 3 + [t1 + (i + 1) * 1_000_000 for i in range(5)], "next_part.parquet")
    with serving(config(checkpoint, tmp_path)) as server:
        ends = ["--endpoint", server.endpoints["ingest"], "--answers", server.endpoints["answers"], "--control",
                server.endpoints["control"]]
        for path, held in ((earlier, 50), (burst, 58)):
            code, _, err = run(capsys, "feed", "replay", path, *ends)
            assert code == 0 and "not sent" not in err, err
            wait_for(lambda: server.pipeline.ticks_in == held, 120.0)
        code, _, err = run(capsys, "feed", "replay", burst, *ends)
        assert code == 0 and "sent 0 ticks" in err, err
        assert "8 ticks not sent: stamped at or before the engine's last tick of their stream (BTCUSD: 8 (the " \
               "engine holds 58, 8 stamped as its last))" in err, err
        assert "nothing new to send" in err and "ticks sent stamped as the engine's last" not in err, err
        # review163 (finding 7): the way out that keeps every other stream, named with this one's name
        assert "`flashtick forget BTCUSD` drops that one stream at the engine (its answers too), or restart " \
               "`flashtick serve` with another --data-dir" in err, err
        code, _, err = run(capsys, "feed", "replay", longer, *ends)
        assert code == 0 and "sent 4 ticks" in err and "8 ticks not sent" in err, err
        wait_for(lambda: server.pipeline.ticks_in == 62, 120.0)
        code, _, err = run(capsys, "feed", "replay", goes_on, *ends)
        assert code == 0 and "sent 8 ticks" in err and "not sent" not in err, err
        assert "3 ticks sent stamped as the engine's last tick of their stream (BTCUSD: 3 (the engine holds 62, " \
               "12 stamped as its last))" in err, err
        wait_for(lambda: server.pipeline.ticks_in == 70, 120.0)
        assert sum(server.pipeline.rejected.values()) == 0


def test_a_file_fed_again_goes_on_from_where_the_engine_is(checkpoint, tmp_path, capsys) -> None:
    """`feed replay` of a file the engine already holds part of (a restart mid-feed, or the same command run
    again): the held ticks are not sent (they were refused as ts_backwards, and the ticks at each stream's last
    `ts` were taken twice); the rest goes in."""
    import polars as pl

    ticks = SyntheticMarket(SyntheticConfig(seed=4)).next_batch(120)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(tmp_path / "day.parquet")
    with serving(config(checkpoint, tmp_path)) as server:
        # (--packed: --ticks 50 sends 50, where event-time batches hold back the batch the 50th falls in)
        argv = ["feed", "replay", str(tmp_path / "day.parquet"), "--endpoint", server.endpoints["ingest"],
                "--answers", server.endpoints["answers"], "--control", server.endpoints["control"], "--packed"]
        code, _, err = run(capsys, *argv, "--ticks", "50")
        assert code == 0 and "; 0 rejected" in err, err
        wait_for(lambda: server.pipeline.ticks_in == 50)
        code, _, err = run(capsys, *argv)
        assert code == 0 and "sent 70 ticks" in err and "; 0 rejected" in err, err
        assert "flashtick feed replay: 50 ticks not sent: stamped at or before the engine's last tick of their " \
               "stream" in err
        wait_for(lambda: server.pipeline.ticks_in == 120)
        code, _, err = run(capsys, *argv)  # all of it held: nothing to send, and no error
        assert code == 0 and "sent 0 ticks" in err and "120 ticks not sent" in err, err
        assert "nothing new to send: every tick of the files is stamped at or before the engine's last" in err, err
        assert sum(server.pipeline.rejected.values()) == 0
        # with --streams: the others' rows are the user's own filter, not rejects; still nothing to send, no error
        code, _, err = run(capsys, *argv, "--streams", "SYN.A")
        a_ticks = sum(t.stream == "SYN.A" for t in ticks)
        assert code == 0 and "sent 0 ticks" in err and f"{a_ticks} ticks not sent" in err, err
        assert "nothing new to send: every tick of the files of the streams selected is stamped" in err, err
        assert "`flashtick forget SYN.A` drops that one stream" in err, err
        left = 120 - a_ticks
        assert f"{left} ticks read from the files not sent ({left} of them left out by a filter)" in err
        assert "every row" not in err
        # an earlier day's file after this one: its ticks are older than the engine's, not held by it
        shift = ticks[-1].ts - ticks[0].ts + 10**9
        earlier = [dataclasses.replace(t, ts=t.ts - shift) for t in ticks + ticks[:30]]
        pl.DataFrame([t.to_wire() for t in earlier]).write_parquet(tmp_path / "day0.parquet")
        code, _, err = run(capsys, *[str(tmp_path / "day0.parquet") if a.endswith("day.parquet") else a for a in argv])
        assert code == 2 and "sent 0 ticks" in err and "150 ticks not sent" in err, err
        assert "not all of them are ticks the engine holds (SYN." in err and "an earlier file fed after a later" in err
        assert "nothing was sent: the files' ticks are older than the engine's last tick of their stream" in err, err
        # how to feed them anyway (a stream fed unshifted, then again with --price-offset): start the stream over
        assert "`flashtick forget STREAM` drops that one stream at the engine (its answers too), or restart " \
               "`flashtick serve` with another --data-dir or with --no-log" in err, err
        assert "give the stream another name (a file of one stream: --columns ...,stream_name=NAME)" in err
        assert "nothing new to send" not in err
        assert sum(server.pipeline.rejected.values()) == 0 and server.pipeline.ticks_in == 120


def test_a_feed_at_another_price_level_than_the_engine_holds_is_warned_once_per_stream(checkpoint, tmp_path,
                                                                                      capsys) -> None:
    """Review 104 (finding 3): CLK0 fed unshifted (its negative prints refused), then the next file fed with
    --price-offset CLK0=40, as the first feed's reject said: the engine continued its ticks down at 0.5 with ones
    at 40.5 as one stream, silently. The feed now compares its first price of each stream the engine holds with the
    engine's last (the control op `streams` says it): far from it, a warning names both and the ways out. It named
    no `flashtick forget` (other feed messages do), the way out when the engine's ticks are the misread ones: now
    it does, to run once the feed stopped, then the files fed again; followed here, CLK0 is held at one level."""
    def day(path, hour: int, clk0: list[float]) -> str:
        rows = ["time,symbol,price,size"] + [
            f"2020-04-20T{hour}:00:{i:02d}Z,{stream},{price:.2f},1"
            for i, price in enumerate(clk0) for stream, price in (("CLK0", price), ("CLM0", 20.0 + i * 0.01))]
        path.write_text("\n".join(rows) + "\n")
        return str(path)

    falling = [17.7 - i * 0.43 for i in range(40)]  # 17.70 down to 0.93
    with serving(config(checkpoint, tmp_path)) as server:
        endpoints = ["--endpoint", server.endpoints["ingest"], "--answers", server.endpoints["answers"],
                     "--control", server.endpoints["control"]]
        code, _, err = run(capsys, "feed", "replay", day(tmp_path / "a.csv", 14, falling), *endpoints)
        assert code == 0 and "sent 80 ticks" in err and "warning" not in err, err
        wait_for(lambda: (server.pipeline.encoders.accepted(["CLK0"])["CLK0"] or {}).get("ticks") == 40)
        assert server.pipeline.encoders.accepted(["CLK0"])["CLK0"]["last_price"] == pytest.approx(0.93)
        later = day(tmp_path / "b.csv", 15, [0.5 + i * 0.01 for i in range(40)])
        code, _, err = run(capsys, "feed", "replay", later, *endpoints, "--price-offset", "CLK0=40")
        assert code == 0 and "sent 80 ticks" in err, err
        warning = ("flashtick feed replay: warning: stream \"CLK0\": its first price here, 40.5 (read with "
                   "--price-offset 40), is far from the engine's last price of it, 0.93: the engine holds earlier "
                   "ticks of \"CLK0\", read another way or of another instrument, and would continue them with these "
                   "as one stream; if the "
                   "engine's are the ones read wrongly (fed before without an offset given now, say), stop this "
                   "feed, run `flashtick forget CLK0` (it drops that one stream at the engine, its answers and the "
                   "ticks this feed sent too) and feed its files again from their start; else, to feed it apart "
                   "from what the engine holds, give the stream another name (a file of one stream: --columns "
                   "...,stream_name=NAME), or restart `flashtick serve` with another --data-dir or with --no-log (it "
                   "then holds no stream)")
        assert err.count(warning) == 1 and "'CLM0'" not in err, err  # CLM0 goes on at its level: nothing said
        wait_for(lambda: server.pipeline.encoders.accepted(["CLK0"])["CLK0"]["ticks"] == 80)
        # the way out, followed (the unshifted ticks were the misread ones): the feed done, forget CLK0, the file
        # fed again with the offset: CLK0 is its 40 ticks at one level, no warning (CLM0's ticks: held, not sent)
        assert main(["forget", "CLK0", "--control", server.endpoints["control"]]) in (0, None)
        capsys.readouterr()
        code, _, err = run(capsys, "feed", "replay", later, *endpoints, "--price-offset", "CLK0=40")
        assert code == 0 and "sent 40 ticks" in err and "warning" not in err, err
        wait_for(lambda: (server.pipeline.encoders.accepted(["CLK0"])["CLK0"] or {}).get("ticks") == 40)
        assert server.pipeline.encoders.accepted(["CLK0"])["CLK0"]["last_price"] == pytest.approx(40.89)
        code, _, err = run(capsys, "feed", "replay", day(tmp_path / "c.csv", 16, [0.9 + i * 0.01 for i in range(40)]),
                           *endpoints, "--price-offset", "CLK0=40")  # the same offset again: the same level
        assert code == 0 and "sent 80 ticks" in err and "warning" not in err, err


def quotes_csv(path, stream: str, good: int, zero_bids: int, hour: int = 14, zero_bids_first: bool = False) -> str:
    """``good`` two-sided quotes of ``stream``, and ``zero_bids`` with a 0 bid after them (or first), refused by the
    file's own checks as missing_field, so never sent; a second apart from ``hour`` on."""
    def zero_bid(i: int) -> bool:
        return i < zero_bids if zero_bids_first else i >= good

    rows = ["time,symbol,bid,ask"] + [f"2026-11-02T{hour}:{i // 60:02d}:{i % 60:02d}Z,{stream},"
                                      f"{0 if zero_bid(i) else 10 + i * 0.01:.2f},{10.05 + i * 0.01:.2f}"
                                      for i in range(good + zero_bids)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_a_file_fed_again_says_its_rejects_as_a_share_of_the_ticks_read(checkpoint, tmp_path, capsys) -> None:
    """A file fed again sends nothing (the engine holds its ticks) and rejects its bad rows again: their shares were
    of the rejected rows alone ("missing_field 3 (100%) of the 3 ticks read ... is a column read as the file means
    it?"); they are of every tick read, the held ones said as such, as the first feed's are."""
    quiet = quotes_csv(tmp_path / "quiet.csv", "QUIET", 100, 3)  # 3% bad: no alarm
    loud = quotes_csv(tmp_path / "loud.csv", "LOUD", 100, 10)  # 9% bad: the alarm, on each feed alike
    with serving(config(checkpoint, tmp_path)) as server:
        argv = ["--endpoint", server.endpoints["ingest"], "--answers", server.endpoints["answers"], "--control",
                server.endpoints["control"]]
        for fed in range(2):
            code, _, err = run(capsys, "feed", "replay", quiet, *argv)
            assert code == 0 and "3 ticks read from the files not sent:\n  rejected missing_field: 3 (" in err, err
            assert "warning" not in err and "is a column read" not in err, err
            wait_for(lambda: server.pipeline.ticks_in == (200 if fed else 100), timeout_s=60)
            code, _, err = run(capsys, "feed", "replay", loud, *argv)
            held = " (100 of them not sent: stamped at or before the engine's last tick of their stream)" if fed else ""
            assert code == 0 and "10 ticks read from the files not sent:\nwarning: missing_field 10 (9%) of the 110 " \
                f"ticks read{held} rejected, left out of every answer and score: is a column read" in err, err
            assert ("nothing new to send" in err) == bool(fed), err
            wait_for(lambda: server.pipeline.ticks_in == 200, timeout_s=60)


def test_a_file_fed_again_with_rows_the_engine_refused_is_not_called_older_than_the_engine(checkpoint, tmp_path,
                                                                                          capsys) -> None:
    """Rows the engine refused (0 bids read as prices by the feed, an engine whose limits.zero_bid says no bid) are
    left out too when the file is fed again, but its session never counted them: compared with its tick count, the
    ticks left out were more than it held, and the feed said the files were older than the engine's and ended with
    an error, exit 2. A file that holds a tick stamped the engine's last one of the stream is the one it was fed."""
    path = quotes_csv(tmp_path / "opt.csv", "OPT", 30, 5, zero_bids_first=True)
    with serving(config(checkpoint, tmp_path)) as server:
        argv = ["feed", "replay", path, "--zero-bid", "price", "--endpoint", server.endpoints["ingest"],
                "--answers", server.endpoints["answers"], "--control", server.endpoints["control"]]
        code, _, err = run(capsys, *argv)
        assert code == 0 and "sent 35 ticks" in err, err
        wait_for(lambda: server.pipeline.rejected.get("missing_field") == 5, timeout_s=60)
        wait_for(lambda: server.pipeline.encoders.accepted(["OPT"])["OPT"]["ticks"] == 30, timeout_s=60)
        code, _, err = run(capsys, *argv)
        assert code == 0 and "sent 0 ticks" in err and "35 ticks not sent" in err, err
        assert "nothing new to send" in err and "not all of them are ticks the engine holds" not in err, err
        # an earlier day of the same stream is still said as older, its ticks left out being more than it holds
        earlier = quotes_csv(tmp_path / "earlier.csv", "OPT", 40, 0, hour=13)
        code, _, err = run(capsys, *[earlier if a == path else a for a in argv])
        assert code == 2 and "not all of them are ticks the engine holds (OPT: 40 left out" in err, err


def test_a_feed_that_ends_in_an_error_lists_the_rows_it_did_not_send_first(checkpoint, tmp_path, capsys) -> None:
    """The rows the files' own checks refused are recorded nowhere but in the feed's list of rows not sent: a feed
    that ended with an error (older ticks than the engine's, the engine gone mid-feed) ended without it."""
    import subprocess

    later = quotes_csv(tmp_path / "later.csv", "OPT", 20, 0, hour=15)
    earlier = quotes_csv(tmp_path / "earlier.csv", "OPT", 30, 2, hour=14)  # more ticks than held: not a re-feed
    with serving(config(checkpoint, tmp_path)) as server:
        argv = ["--endpoint", server.endpoints["ingest"], "--answers", server.endpoints["answers"], "--control",
                server.endpoints["control"]]
        assert run(capsys, "feed", "replay", later, *argv)[0] == 0
        wait_for(lambda: server.pipeline.ticks_in == 20, timeout_s=60)
        code, _, err = run(capsys, "feed", "replay", earlier, *argv)
        assert code == 2 and "nothing was sent: the files' ticks are older" in err, err
        assert "  rejected missing_field: 2 (" in err, err
        assert err.index("2 ticks read from the files not sent:\n") < err.index("error: nothing was sent"), err
        # the engine stops mid-feed, and the feed (not told its control socket: no resume) ends with EngineLost
        paced_csv = quotes_csv(tmp_path / "paced.csv", "PACED", 300, 2, zero_bids_first=True)
        paced = cli_popen(["feed", "replay", paced_csv, "--speed", "1", "--endpoint", server.endpoints["ingest"],
                           "--answers", "", "--control", ""], stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: server.pipeline.ticks_in > 20, timeout_s=120)  # paced: a tick a second of 300
        except BaseException:
            paced.kill()
            raise
    try:
        _, err = paced.communicate(timeout=300)
    finally:
        paced.kill()
    assert paced.returncode == 4 and "flashtick feed replay: error: the connection to the engine at " in err, err
    assert "  rejected missing_field: 2 (" in err, err
    assert err.index("2 ticks read from the files not sent:\n") < err.index("flashtick feed replay: error: "), err


def test_a_file_fed_again_sends_the_ticks_sharing_the_engines_last_timestamp_that_it_does_not_hold(
        checkpoint, tmp_path, capsys) -> None:
    """Ticks stamped alike (a FX tick file's repeated milliseconds): a feed stopped inside such a run and started
    again sends the rest of the run, not none of it (the engine says how many it holds at its last `ts`)."""
    rows = ["time,symbol,bid,ask"] + [f"2026-11-02T00:00:00.{ms:03d}Z,CADUSD,0.7100{i},0.7101{i}"
                                      for i, ms in enumerate((100, 150, 200, 200, 200, 250))]
    (tmp_path / "cad.csv").write_text("\n".join(rows) + "\n")
    with serving(config(checkpoint, tmp_path)) as server:
        # (--packed: a stop inside the run; event-time batches would hold back the whole batch of .200 and .250)
        argv = ["feed", "replay", str(tmp_path / "cad.csv"), "--endpoint", server.endpoints["ingest"],
                "--answers", server.endpoints["answers"], "--control", server.endpoints["control"], "--packed"]
        code, _, err = run(capsys, *argv, "--ticks", "4")  # stops after the second of three at .200
        assert code == 0 and "sent 4 ticks" in err, err
        wait_for(lambda: server.pipeline.ticks_in == 4)
        code, _, err = run(capsys, *argv)
        assert code == 0 and "sent 2 ticks" in err and "4 ticks not sent" in err and "; 0 rejected" in err, err
        wait_for(lambda: server.pipeline.ticks_in == 6)
        assert server.pipeline.encoders.accepted(["CADUSD"])["CADUSD"]["at_last_ts"] == 1
        code, _, err = run(capsys, *argv)
        assert code == 0 and "sent 0 ticks" in err and "6 ticks not sent" in err, err
        assert sum(server.pipeline.rejected.values()) == 0 and server.pipeline.ticks_in == 6


def test_a_feed_splits_a_batch_over_the_engines_message_limit(checkpoint, tmp_path, capsys) -> None:
    """`--batch-ms 20000` against `limits.max_message_bytes: 4096`: every message was refused whole as oversize,
    stream-less, so the feed called its ticks maybe lost and exited 2 after 30 s. The feed learns the limit from a
    heartbeat and sends such a batch in messages that fit."""
    import polars as pl

    ticks = SyntheticMarket(SyntheticConfig(seed=6)).next_batch(300)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(tmp_path / "day.parquet")
    small = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16},
                                     "endpoints": LOCAL, "limits": {"heartbeat_s": 0.2, "max_message_bytes": 4096}})
    with serving(small) as server:
        code, _, err = run(capsys, "feed", "replay", str(tmp_path / "day.parquet"), "--batch-ms", "20000",
                           "--endpoint", server.endpoints["ingest"], "--answers", server.endpoints["answers"],
                           "--control", server.endpoints["control"])
        assert code == 0 and "sent 300 ticks" in err and "; 0 rejected" in err, err
        wait_for(lambda: server.pipeline.ticks_in == 300)
        assert "oversize" not in server.pipeline.rejected


def test_a_stream_asked_for_with_a_slash_is_pointed_to_the_name_replay_gave_it(checkpoint, tmp_path, capsys) -> None:
    """Replay renames EUR/USD to EUR-USD (topics use '/'): ask, get, streams and subscribe, given the file's own
    name, say so instead of only "has sent no data"."""
    rows = ["time,symbol,bid,ask"] + [f"2026-11-02T00:00:0{i}Z,EUR/USD,1.1600{i},1.1601{i}" for i in range(6)]
    (tmp_path / "eur.csv").write_text("\n".join(rows) + "\n")
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        code, _, err = run(capsys, "feed", "replay", str(tmp_path / "eur.csv"), "--endpoint",
                           server.endpoints["ingest"], "--answers", server.endpoints["answers"], *control)
        assert code == 0 and "sent 6 ticks" in err, err
        wait_for(lambda: server.pipeline.ticks_in == 6)
        said = "file replay names \"EUR/USD\" \"EUR-USD\"; it may be another venue's name too: name it by venue, " \
               "e.g. \"EUR-USD.kraken\")"
        for op in ("ask", "get"):  # the service's one check (control_requests.asked_stream)
            code, _, err = run(capsys, op, "EUR/USD", "dir", *control)
            assert code == 2 and f'flashtick {op}: error: "EUR/USD" cannot be a stream: bad_stream: stream ' \
                '"EUR/USD" contains "/"' in err and '(file replay names it "EUR-USD"; it may be another venue\'s ' \
                'name too: name it by venue, e.g. "EUR-USD.kraken")' in err, err
        code, out, err = run(capsys, "streams", "EUR/USD", "EUR-USD", *control)
        assert code == 0 and out.splitlines()[0] == "EUR/USD\tnever seen" and said in err, (out, err)
        assert out.splitlines()[1].startswith("EUR-USD\tlast_ts ")
        code, _, err = run(capsys, "subscribe", "dir/EUR/USD/", "_heartbeat/", "--count", "1", "--endpoint",
                           server.endpoints["answers"], *control)
        assert code == 0 and '"dir/EUR/USD/" names stream "EUR/USD"' in err and 'subscribe to "dir/EUR-USD/"' in err


def test_streams_of_a_name_never_seen_says_the_held_name_it_was_likely_meant_to_be(checkpoint, tmp_path,
                                                                                    capsys) -> None:
    """`flashtick streams NAME` for a name the service does not hold compares it with the streams it does (read
    through the op's pages): the padded OSI form of an option held in its compact form, a name in another case,
    are pointed to; a name like none held gets no hint."""
    option = "SPY241220C00450000"
    market = SyntheticMarket(SyntheticConfig(seed=2, streams=(StreamParams(option, 5.0, 0.01), *DEFAULT_STREAMS[:1])))
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        with FeedClient(server.endpoints["ingest"]) as feed:
            feed.send(market.next_batch(20))
        wait_for(lambda: server.pipeline.ticks_in == 20)
        code, out, err = run(capsys, "streams", "SPY   241220C00450000", "syn.a", "NOTHING.LIKE.IT", *control)
        assert code == 0 and out.splitlines() == ["SPY   241220C00450000\tnever seen", "syn.a\tnever seen",
                                                  "NOTHING.LIKE.IT\tnever seen"], out
        assert err.splitlines() == [f"flashtick streams: \"SPY   241220C00450000\" never seen; "
                                    f"did you mean \"{option}\"?",
                                    "flashtick streams: \"syn.a\" never seen; did you mean \"SYN.A\"?"], err
        code, out, err = run(capsys, "streams", "syn.a", "--json", *control)  # (JSON: as the reply says it)
        assert code == 0 and json.loads(out) == {"streams": {"syn.a": None}} and err == "", err


def test_a_paced_replay_s_summary_times_the_sending_not_the_wait_for_the_engine(checkpoint, tmp_path) -> None:
    """`feed replay --speed N` said "over S s" with S counting, after the last send, the wait for the engine to
    account for every tick (its control socket asked until then): a replay kept at its pace read slower. The
    sending is timed alone, and the waits on the engine said apart."""
    from connectors.feed_pump import run_feed
    from connectors.feed_stats import CONTROL_SAID_S
    from connectors.replay import FileReplay
    from engine.service.feed_resume import ControlFeedResume

    rows = ["ts,stream,price,size"] + [f"{1_700_000_000_000 + i * 100},ES,{100 + i},1" for i in range(11)]
    (tmp_path / "es.csv").write_text("\n".join(rows) + "\n")  # 1 s of the file's clock
    replay = FileReplay(tmp_path / "es.csv", columns={"ts_unit": "ms"}, speed=1.0)
    with serving(config(checkpoint, tmp_path)) as server:
        resume = ControlFeedResume(lambda: ControlClient(server.endpoints["control"], timeout_s=5))
        began = time.monotonic()
        with FeedClient(server.endpoints["ingest"], watch_connection=True) as client:
            stats = run_feed(replay, client, answers=server.endpoints["answers"], resume=resume)
            took = time.monotonic() - began
            _a_stop_cuts_the_wait_for_the_engine_short(stats, client, resume, replay)
        resume.close()
    assert stats.ticks == 11 and stats.unconfirmed == 0 and stats.seconds >= 0.99  # the file's second, paced
    assert stats.wait_s > 0 and stats.seconds + stats.wait_s <= took and 0 <= stats.control_s <= stats.seconds
    waited = stats.wait_s >= CONTROL_SAID_S
    then = f", then {stats.wait_s:.1f} s until the engine had taken every tick" if waited else ""
    assert stats.summary().startswith(f"sent 11 ticks in {stats.messages} messages over {stats.seconds:.1f} s"), \
        stats.summary()
    assert then in stats.summary() and stats.summary().endswith("; 0 rejected"), stats.summary()


def _a_stop_cuts_the_wait_for_the_engine_short(stats, client: FeedClient, resume, replay) -> None:
    """review442 #4: a Ctrl-C after the last send waited for the engine's backlog (53 s; under `when_behind: lag`
    as long as it lasts), then said "the same command sends the rest" when every tick was sent. The stop now ends
    the wait at once, what the engine has not taken yet counted, and the line says nothing is left to send. (Ticks
    the feed never gave the engine are never taken: without the stop, the wait would end after FINISH_STALL_S.)"""
    from connectors.feed_pump import _finish
    from connectors.ticks import trade
    from engine.service.cmd_feed import _rest_after_stop

    resume.sent([trade("NQ", 1_700_000_000_000_000_000 + i, 100.0, 1.0, "buy") for i in range(3)], {})
    stop = threading.Event()
    stop.set()
    stopped = _finish(stats, client, None, resume, stop)
    assert stopped.unconfirmed == 3, stopped
    assert ", then 20.5 s waiting for the engine to take them;" in stopped._replace(wait_s=20.5).summary()
    assert _rest_after_stop(argparse.Namespace(ticks=None), stopped, replay, resume) == (
        "every tick was sent; the stop came while the engine was still taking them, 3 not yet (queued at the engine: "
        "`flashtick streams` says what it holds, and the same command sends only what it lacks)")
    assert _rest_after_stop(argparse.Namespace(ticks=None), stats, replay, resume) == \
        "every tick was sent, nothing is left to send"
    assert _rest_after_stop(argparse.Namespace(ticks=None), stats._replace(held_back=2), replay, resume) == \
        "the same command sends the rest"


def test_client_commands_take_a_stream_name_in_nfc() -> None:
    """A name pasted from a macOS file name (NFD) names the stream that prints alike (the engine takes NFC)."""
    import unicodedata

    from engine.service.cli import build_parser

    nfd = unicodedata.normalize("NFD", "Société")
    assert nfd != "Société"
    parser = build_parser()
    assert parser.parse_args(["ask", nfd, "dir20"]).stream == "Société"
    assert parser.parse_args(["get", nfd, "dir20"]).stream == "Société"
    assert parser.parse_args(["streams", nfd]).names == ["Société"]
    assert parser.parse_args(["subscribe", f"dir20/{nfd}/"]).topics == ["dir20/Société/"]


def test_names_from_the_service_are_printed_with_non_printable_characters_escaped() -> None:
    """A topic or stream name that holds ESC or a newline (one registered before topics had to be printable, or a
    service of another version) must not reach the terminal raw: `topics`, `streams` and `list` print it escaped,
    in quotes."""
    from connectors.ticks import shown_name

    assert shown_name("x\x1b[2J\x1b[31mOWNED\x1b[0m\nSYN.A/") == "'x\\x1b[2J\\x1b[31mOWNED\\x1b[0m\\nSYN.A/'"
    assert shown_name("a\u202eb/") == "'a\\u202eb/'" and shown_name("dir20/Ünï/") == "dir20/Ünï/"


def test_a_stream_name_with_a_backslash_prints_apart_from_an_escape(checkpoint, tmp_path, capsys) -> None:
    r"""`C:\feed\ES` and `A\nB` (a backslash, then n) printed as they are, which read as escapes (a newline in
    `A\nB`, as the escaped form of a name that held one shows it). A name with a backslash or a quote prints in
    quotes, its backslashes doubled, by one rule wherever a name is printed; a plain name prints as it is."""
    names = ["C:\\feed\\ES", "A\\nB", "SYN.A"]
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        with FeedClient(server.endpoints["ingest"]) as feed:
            feed.send([{"stream": name, "ts": 1_000 + i, "price": 100.0, "size": 1.0} for i, name in enumerate(names)])
        wait_for(lambda: server.pipeline.ticks_in == 3)
        code, out, _ = run(capsys, "streams", *control)
        assert code == 0 and [line.split("\t")[0] for line in out.splitlines()] == \
            ["'A\\\\nB'", "'C:\\\\feed\\\\ES'", "SYN.A"], out
        wait_for(lambda: len(server.pipeline.cache.topics()) == 3)
        code, out, _ = run(capsys, "topics", *control)
        assert code == 0 and [line.split("\t")[0] for line in out.splitlines()] == \
            ["'dir/A\\\\nB/'", "'dir/C:\\\\feed\\\\ES/'", "dir/SYN.A/"], out


def test_register_says_where_in_its_file_a_topic_clashes_with_a_registered_query(checkpoint, tmp_path, capsys) -> None:
    """The clash is found only against what the service holds, after the file was parsed; it still reads
    `file:line: query 'name': reason` like the file's own problems (the reviewer's bad/topic_collide.yaml)."""
    (tmp_path / "surp.yaml").write_text("queries: [{name: surp, streams: ['*'], kind: surprise}]\n")
    (tmp_path / "topic_collide.yaml").write_text("queries:\n  - {name: a, streams: [SYN.A], question: direction_5, "
                                                 "kind: choice, topic: 'surp/{stream}/'}\n")
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        assert run(capsys, "register", str(tmp_path / "surp.yaml"), *control)[0] == 0
        code, _, err = run(capsys, "register", str(tmp_path / "topic_collide.yaml"), *control)
        said = f"{tmp_path / 'topic_collide.yaml'}:2: query \"a\": its topic \"surp/{{stream}}/\" starts where " \
            'query "surp"'
        assert code == 2 and err.startswith(f"flashtick register: error: {said} publishes"), err


def test_scores_before_any_answer_prints_the_line_saying_why_without_the_tables_header(checkpoint, tmp_path,
                                                                                       capsys) -> None:
    """Nothing published yet: `scores` printed the table's header above no rows, then the line saying why."""
    with serving(config(checkpoint, tmp_path)) as server:
        code, out, _ = run(capsys, "scores", "--control", server.endpoints["control"])
    assert code == 0 and out == "(no standing query on a named question with a realised answer has published yet)\n"


def test_scores_says_why_a_subset_querys_answers_went_unscored(checkpoint, tmp_path, capsys) -> None:
    """`choices: [up, down]` leaves the answers whose realised direction was flat unscored: `scores` says so,
    with the count, under its table (it said nothing)."""
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        (tmp_path / "ud.yaml").write_text("queries:\n  - {name: ud, streams: ['*'], question: direction_5, "
                                          "kind: choice, choices: [up, down], trigger: batch}\n")
        assert run(capsys, "register", str(tmp_path / "ud.yaml"), *control)[0] == 0
        ticks = SyntheticMarket(SyntheticConfig(seed=1)).next_batch(400)
        with FeedClient(server.endpoints["ingest"]) as feed:
            for i in range(0, len(ticks), 10):
                feed.send(ticks[i : i + 10])
        wait_for(lambda: main(["scores", "--json", *control]) == 0 and
                 json.loads(capsys.readouterr().out).get("ud", {}).get("outside_labels", 0) > 0)
        code, out, _ = run(capsys, "scores", *control)
    notes = [line for line in out.splitlines() if line.startswith("note: ud: realised")]  # (beside thin_streams')
    assert code == 0 and len(notes) == 1 and re.fullmatch(
        r"note: ud: realised label outside this query's choices \((\d+) of (\d+) answers realised\): such an answer "
        r"is not scored \(docs/queries.md\)", notes[0]), out


def test_scores_says_where_a_bps_question_is_saturated(checkpoint, tmp_path, capsys) -> None:
    """A reviewer's cheap option series: `move50` answers were published and scored with no caveat, though a cent
    there is ~2,000 bps and every move lands in an end bucket. `scores` names the stream under its table."""
    from test_backtest import cheap_option_and_underlying

    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        (tmp_path / "m.yaml").write_text("queries:\n  - {name: move50, streams: ['*'], question: move_bps_50, "
                                         "kind: expectation, trigger: {ticks: 5}}\n")
        assert run(capsys, "register", str(tmp_path / "m.yaml"), *control)[0] == 0
        ticks = cheap_option_and_underlying()
        with FeedClient(server.endpoints["ingest"]) as feed:
            for i in range(0, len(ticks), 10):  # (a message is one batch: the trigger fires once in each)
                feed.send(ticks[i : i + 10])
        # (the option's every move is an end bucket, so once both streams have labels the note no longer changes)
        wait_for(lambda: main(["scores", "--json", *control]) == 0 and " 1 of 2 streams " in
                 json.loads(capsys.readouterr().out).get("move50", {}).get("saturated_why", ""), timeout_s=120)
        code, out, _ = run(capsys, "scores", *control)
    notes = [line for line in out.splitlines() if line.startswith("note: move50: move_bps_50")]
    assert code == 0 and notes == [
        "note: move50: move_bps_50 is saturated on 1 of 2 streams (SPY   241220C00470000): most of their realised "
        "labels that show a move are -12 (-8 bps or less) or +12 (above 8 bps): " + SATURATION_WHY], out


def test_list_aligns_its_columns_and_json_prints_names_as_they_are(checkpoint, tmp_path, capsys) -> None:
    """A reviewer's `list`: a long trigger (`interval:1500ms`) or name shifted the columns after it, and streams
    joined by commas read `ES,NQ` as two; `get` printed `"Soci\\u00e9t\\u00e9.G\\u00e9n"`."""
    (tmp_path / "wide.yaml").write_text(
        "queries:\n  - {name: a_rather_long_query_name, streams: ['Société.Gén', 'ES,NQ'], question: direction_5,\n"
        "     kind: choice, trigger: {interval: 1500ms}}\n  - {name: s, streams: [SYN.A], kind: surprise}\n")
    with serving(config(checkpoint, tmp_path)) as server:
        control = ("--control", server.endpoints["control"])
        assert run(capsys, "register", str(tmp_path / "wide.yaml"), *control)[0] == 0
        code, out, _ = run(capsys, "list", *control)
        lines = out.splitlines()[:-1]
        starts = [[m.start() for m in re.finditer(r"(?<= )\S", line)] for line in lines]
        assert code == 0 and len(lines) == 3 and len(set(map(tuple, starts))) == 1, out  # one place for each column
        assert lines[1].split() == ["a_rather_long_query_name", "choice", "direction_5", "interval:1500ms",
                                    "Société.Gén,'ES,NQ'"], out
        with FeedClient(server.endpoints["ingest"]) as feed:
            feed.send([{"stream": "Société.Gén", "ts": 1_000, "price": 100.0, "size": 1.0}])
        wait_for(lambda: main(["get", "Société.Gén", "a_rather_long_query_name", *control]) == 0)
        out = capsys.readouterr().out
    assert '"stream": "Société.Gén"' in out and json.loads(out)["stream"] == "Société.Gén", out


def test_scores_says_how_many_answers_the_session_gap_left_unscored(checkpoint, tmp_path, capsys) -> None:
    """With answers.session_gap_s, an answer whose horizon crossed a longer pause is counted as `across_gap`, not
    scored: `scores --json` had it, the table said nothing of those answers. A line under the table says it."""
    from connectors.ticks import trade

    (tmp_path / "q.yaml").write_text("queries:\n  - {name: dir5, streams: ['*'], question: direction_5, kind: choice, "
                                     "trigger: batch}\n")
    gapped = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16}, "endpoints": LOCAL,
        "limits": {"heartbeat_s": 0.2}, "queries": str(tmp_path / "q.yaml"), "answers": {"session_gap_s": 3600}})
    start, pause = 1_700_000_000_000_000_000, 2 * 3_600_000_000_000  # a 2-hour pause after the 60th tick
    ticks = [trade("FX", start + i * 1_000_000_000 + (pause if i >= 60 else 0), 1.1 + 0.0001 * (i * 7 % 5), 1.0)
             for i in range(120)]
    with serving(gapped) as server:
        control = ("--control", server.endpoints["control"])
        with FeedClient(server.endpoints["ingest"]) as feed:
            for i in range(0, len(ticks), 2):  # (a message is one batch: an answer each)
                feed.send(ticks[i : i + 2])
        wait_for(lambda: main(["scores", "--json", *control]) == 0 and
                 json.loads(capsys.readouterr().out).get("dir5", {}).get("across_gap", 0) > 0, timeout_s=120)
        code, out, _ = run(capsys, "scores", *control)
    notes = [line for line in out.splitlines() if "not scored because" in line]  # (beside thin_streams')
    assert code == 0 and len(notes) == 1 and re.fullmatch(
        r"note: dir5: [1-9]\d* answers not scored because their horizon crossed a pause of "
        r"answers\.session_gap_s or more \(across_gap\)", notes[0]), out


def test_register_and_unregister_name_a_few_dozen_queries_then_count_the_rest() -> None:
    from engine.service.cmd_queries import MAX_NAMES_SAID, names_said

    names = [f"h{i:04d}" for i in range(900)]  # (review397 #7: a file of 900 was printed on one 8 kB line)
    assert names_said(names) == ", ".join(names[:MAX_NAMES_SAID]) + f" and {900 - MAX_NAMES_SAID} more"
    assert names_said(names[:2]) == "h0000, h0001"
