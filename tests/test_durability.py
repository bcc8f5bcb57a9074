"""Accepted ticks survive the process: the tick log in a data directory, and sessions, codec state and
queries rebuilt from it on start (in-process, and a real `flashtick serve` killed with SIGKILL)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, NamedTuple

import msgpack
import numpy as np
import pytest
import zmq

from conftest import assert_owed_as_uninterrupted, serving, tiny_tick_checkpoint
from forked_cli import cli_popen, start_lines
from test_health_probes import probe
from test_server import wait_for
from connectors.feed import FeedClient
from connectors.feed_pump import run_feed
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from connectors.service_topics import REJECTS_TOPIC
from engine.service.client import AnswerSubscriber, ControlClient, ControlError, GaplessSubscriber
from engine.service.config import ServiceConfig
from engine.service.log_format import segments
from engine.service.log_reading import read
from engine.service.pipeline import TickPipeline

ROOT = Path(__file__).resolve().parents[1]
QUERIES = """
queries:
  - {name: dir, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: nll, streams: ["*"], kind: surprise, trigger: batch}
"""
PROB_TOL = 1e-4


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"), max_position_embeddings=256)


def config(checkpoint, data_dir: Path | None, queries: Path | None = None) -> ServiceConfig:
    return ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
        "scheduler": {"max_batch_tokens": 64},  # small forwards: the live run and the replay group ticks differently
        "log": {"dir": str(data_dir) if data_dir else None},
        **({"queries": str(queries)} if queries else {}),
    })


def feed_in_steps(pipeline: TickPipeline, ticks, tokenized=()) -> list:
    answers = []
    for i in range(0, len(ticks), 7):
        assert pipeline.ingest_message(encode(ticks[i : i + 7])) == []
        answers += [o.answer for o in (pipeline.step() or type("R", (), {"outcomes": []})).outcomes if o.answer]
    if tokenized:
        assert pipeline.ingest_tokenized(msgpack.packb(list(tokenized))) == []
    return answers + pipeline.run_until_idle()


def sessions(pipeline: TickPipeline) -> dict:
    streams = pipeline.engine.scheduler.streams
    return {name: (list(s.session.tokens), s.ticks, s.event_ts) for name, s in streams.items()}


def crash_copy(data_dir: Path, to: Path) -> Path:
    """What the disk holds if the process died now: the data directory's files as they are (its lock is held
    by the live pipeline, which goes on running beside the recovered one)."""
    shutil.copytree(data_dir, to)
    return to


def assert_same_answers(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for stream in a:
        for label, p in a[stream].items():
            assert b[stream][label] == pytest.approx(p, abs=PROB_TOL)


@pytest.fixture(scope="module")
def checkpoint_v2(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick_v2"), max_position_embeddings=256, codec_version=2)


@pytest.mark.parametrize("codec_version", [1, 2])
def test_a_restart_rebuilds_sessions_codec_state_and_queries_from_the_log(checkpoint, checkpoint_v2, codec_version,
                                                                          tmp_path) -> None:
    # Version 2 carries running scales in its codec state: replaying the log must bring them back too.
    checkpoint = checkpoint if codec_version == 1 else checkpoint_v2
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=4)).next_batch(700)  # 4 streams, rolls past 256 positions
    tokenized = [{"stream": "TOK", "ts": 5, "tokens": [1, 2, 3, 4], "ticks": 1}]
    live = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    feed_in_steps(live, ticks[:600], tokenized)
    assert live.engine.scheduler.stats.rolls > 0
    # the process dies here: nothing closed, nothing flushed by us
    # no queries file: from the data dir
    recovered = TickPipeline(config(checkpoint, crash_copy(tmp_path / "data", tmp_path / "after")))
    assert sessions(recovered) == sessions(live)
    assert recovered.ticks_in == 601 and recovered.stats()["log"]["recovered_ticks"] == 601
    assert [s.name for s in recovered.registry.list()] == ["dir", "nll"]
    next_live = feed_in_steps(live, ticks[600:])
    next_recovered = feed_in_steps(recovered, ticks[600:])
    probs = lambda answers: {a.stream: a.value["probs"] for a in answers if a.query == "dir"}  # noqa: E731
    assert_same_answers(probs(next_live), probs(next_recovered))
    assert sessions(recovered) == sessions(live)


def test_a_damaged_record_stops_a_start_unless_the_config_says_skip_it(checkpoint, tmp_path, capsys) -> None:
    """`log.skip_corrupt: true` starts past a damaged record of the segment being written (it was refused when the
    log counted its records, before the replay that honours the option); without it the start stops, naming the
    file, the offset and the key that skips it. The damaged original kept beside the segment (retention never
    drops it) is said at every start and counted in stats until it is removed. review400 #4: the refused start let
    the directory's lock go unmarked, and the next start said it had stopped uncleanly (a crash, to a log pipeline):
    the kill before it is said once, by the refused start."""
    from engine.service.log_reading import CorruptLog

    ticks = SyntheticMarket(SyntheticConfig(seed=4)).next_batch(220)
    live = TickPipeline(config(checkpoint, tmp_path / "data"))
    feed_in_steps(live, ticks[:200])
    data = crash_copy(tmp_path / "data", tmp_path / "damaged")
    (segment,) = sorted((data / "ticks").glob("ticks-*.log"))
    damaged = bytearray(segment.read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    segment.write_bytes(bytes(damaged))
    capsys.readouterr()
    with pytest.raises(CorruptLog, match="damaged record at byte .*set log.skip_corrupt: true in the config"):
        TickPipeline(config(checkpoint, data))
    assert capsys.readouterr().err.count("WARNING: recovering after an unclean stop") == 1  # (the crash copy's)
    skipping = config(checkpoint, data)
    skipping = dataclasses.replace(skipping, log=dataclasses.replace(skipping.log, skip_corrupt=True))
    recovered = TickPipeline(skipping)
    assert recovered.stats()["log"]["corrupt_skipped"] == 1
    kept = segment.with_name(segment.name + ".damaged")
    note = (f"flashtick: note: 1 damaged log file ({len(damaged):,} bytes: originals log.skip_corrupt repaired, "
            f"torn tails' cut bytes) kept in {data} (ticks/{kept.name}): retention keeps them: remove them once looked "
            f"at")
    said = capsys.readouterr().err
    assert note in said and "previous run" not in said
    assert (recovered.stats()["log"]["damaged_files"], recovered.stats()["log"]["damaged_bytes"]) == (1, len(damaged))
    assert 190 <= recovered.ticks_in < 200  # the damaged record's ticks are gone, the rest replayed
    feed_in_steps(recovered, ticks[200:])
    recovered.close()
    again = TickPipeline(config(checkpoint, data))  # the skip left the log clean: no skip_corrupt needed now
    assert again.ticks_in == recovered.ticks_in and again.stats()["log"]["corrupt_skipped"] == 0
    assert note in capsys.readouterr().err and again.stats()["log"]["damaged_files"] == 1  # said until removed
    again.close()
    kept.unlink()
    clean = TickPipeline(config(checkpoint, data))
    assert "damaged log file" not in capsys.readouterr().err and clean.stats()["log"]["damaged_files"] == 0
    clean.close()


def test_a_zero_filled_tail_a_host_crash_leaves_is_cut_at_the_start(checkpoint, tmp_path) -> None:
    live = TickPipeline(config(checkpoint, tmp_path / "data"))
    feed_in_steps(live, SyntheticMarket(SyntheticConfig(seed=4)).next_batch(200))
    data = crash_copy(tmp_path / "data", tmp_path / "crashed")
    (segment,) = sorted((data / "ticks").glob("ticks-*.log"))
    with open(segment, "ab") as f:  # `head -c 4096 /dev/zero >> ticks-*.log`
        f.write(bytes(4096))
    recovered = TickPipeline(config(checkpoint, data))
    assert recovered.ticks_in == 200 and recovered.stats()["log"]["torn_tails"] == 1
    assert sessions(recovered) == sessions(live)
    assert recovered.stats()["log"]["damaged_files"] == 0  # pages never written: nothing to keep


def test_a_torn_tail_of_non_zero_bytes_is_kept_as_a_damaged_copy_when_it_is_cut(checkpoint, tmp_path, capsys) -> None:
    """Old blocks a host crash left after the last record of each log's newest segment are cut at the start, as
    zeros are, but kept first as `<segment>.damaged` holding exactly the bytes cut (what someone investigating the
    crash wants; before, only a skip_corrupt repair kept its bytes), named on the cut's stderr line; every tick
    and answer before them is recovered."""
    import random

    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    live = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    published = feed_in_steps(live, SyntheticMarket(SyntheticConfig(seed=4)).next_batch(200))
    data = crash_copy(tmp_path / "data", tmp_path / "crashed")
    garbage = {}
    for part in ("ticks", "answers"):
        (segment,) = sorted((data / part).glob(f"{part}-*.log"))
        garbage[segment] = random.Random(part).randbytes(4096)
        with open(segment, "ab") as f:
            f.write(garbage[segment])
    capsys.readouterr()
    recovered = TickPipeline(config(checkpoint, data))
    err = capsys.readouterr().err
    for segment, cut in garbage.items():
        kept = segment.with_name(segment.name + ".damaged")
        assert kept.read_bytes() == cut
        assert f"(torn tail: {len(cut)} bytes) is cut away; the cut bytes are kept as {kept}" in err, err
        assert not segment.read_bytes().endswith(cut)
    stats = recovered.stats()["log"]
    assert stats["torn_tails"] == 1 and stats["answers"]["torn_tails"] == 1
    assert (stats["damaged_files"], stats["damaged_bytes"]) == (2, 2 * 4096)
    assert recovered.ticks_in == 200 and sessions(recovered) == sessions(live)
    latest = {(a.query, a.stream): a for a in published}
    assert {key: (a.seq, a.version) for key, a in latest.items()} == {
        key: (recovered.cache.get(*key).seq, recovered.cache.get(*key).version) for key in latest}
    recovered.close()
    live.close()


def test_a_restart_owes_a_query_only_the_ticks_after_it_was_registered(checkpoint, tmp_path) -> None:
    """A query registered after a stream's ticks first answers on the stream's next batch; a restart in between
    must not publish answers for it that a run without the restart never would (and the registry versions do
    not go backwards). Ticks accepted after the registration but never answered before the stop are owed."""
    from queries.yaml_loader import load_queries

    ticks = SyntheticMarket(SyntheticConfig(seed=12)).next_batch(120)
    first = TickPipeline(config(checkpoint, tmp_path / "data"))
    feed_in_steps(first, ticks[:60])
    first.register_queries(load_queries(QUERIES, "q.yaml", first.registry.questions))
    first.register_queries(load_queries(QUERIES.replace("nll", "nll2"), "q.yaml", first.registry.questions))
    first.unregister_queries(["nll2"])
    versions = first.registry.version, first.registry.query_version("dir")
    first.close()

    second = TickPipeline(config(checkpoint, tmp_path / "data"))
    assert second.recovered == []  # registered after every tick: nothing owed
    assert (second.registry.version, second.registry.query_version("dir")) == versions
    streams = {t.stream for t in ticks[60:67]}
    answers = feed_in_steps(second, ticks[60:67])  # the next batch: now they answer
    assert {a.stream for a in answers if a.query == "dir"} == streams
    # accepted after the registration, then stopped before a forward: owed at the next start
    assert second.ingest_message(encode(ticks[67:80])) == []
    second.close()
    third = TickPipeline(config(checkpoint, tmp_path / "data"))
    owed = [o.answer for o in third.recovered]
    assert {a.stream for a in owed if a.query == "dir"} == {t.stream for t in ticks[67:80]}
    third.close()


def test_a_restart_says_which_live_registration_its_queries_file_replaced(checkpoint, tmp_path, capsys) -> None:
    """`serve --queries FILE` restarted silently put the FILE's spec back over a query re-registered live (its
    query_version bumped). The file is applied on top at every start, as documented; each query it replaced is
    now named on stderr with its old and new query_version; one the file left as kept is not."""
    from queries.yaml_loader import load_queries

    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    first = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    assert "restored" not in capsys.readouterr().err  # a first start has nothing to restore: no line
    feed_in_steps(first, SyntheticMarket(SyntheticConfig(seed=5)).next_batch(30))
    live = QUERIES.replace("question: direction_20, kind: choice, trigger: batch",
                           "question: direction_20, kind: choice, trigger: {ticks: 5}")
    first.register_queries([spec for spec in load_queries(live, "live.yaml", first.registry.questions)
                            if spec.name == "dir"])
    live_version = first.registry.query_version("dir")
    first.close()
    capsys.readouterr()

    second = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    err = capsys.readouterr().err
    assert f"flashtick: restored 2 queries (registry version {live_version}) from {tmp_path / 'data'}\n" in err, err
    now = second.registry.query_version("dir")
    assert now > live_version and second.registry.get("dir").trigger == \
        load_queries(QUERIES, "q.yaml", second.registry.questions)[0].trigger
    assert f"flashtick: query \"dir\": the spec in {queries} replaces the one kept in the data directory " \
           f"(query_version {live_version} -> {now}; registered live, or the file changed) and starts afresh" \
           in err, err
    assert "query 'nll'" not in err, err
    second.close()


def test_a_restart_names_kept_queries_by_where_they_came_from(checkpoint, tmp_path, capsys) -> None:
    """queries.state.json did not record where each query came from, so a start whose queries file no longer lists
    a kept query could only say "registered live, or listed by an earlier queries file": an operator could not tell
    the one dropped from the file (likely meant gone) from one registered live on purpose. The state records each
    query's origin now; the start names the kept ones a line per origin. A state from before origins were recorded
    keeps the hedged line (either guess could be the wrong story), and the next save records what is known."""
    from queries.yaml_loader import load_queries

    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    first = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    first.register_queries(load_queries("queries:\n  - {name: vol, streams: ['*'], question: direction_5, "
                                        "kind: choice, trigger: batch}\n", "live.yaml", first.registry.questions))
    first.close()
    state = json.loads((tmp_path / "data" / "queries.state.json").read_text())
    assert state["origins"] == {"dir": "file", "nll": "file", "vol": "live"}, state
    queries.write_text(QUERIES.replace('  - {name: nll, streams: ["*"], kind: surprise, trigger: batch}\n', ""))
    capsys.readouterr()
    TickPipeline(config(checkpoint, tmp_path / "data", queries)).close()
    kept = [line for line in capsys.readouterr().err.splitlines() if " kept in the data directory " in line]
    tail = "still served, as a start applies its queries file on top of what was kept (to stop one: flashtick " \
           "unregister NAME)"
    assert kept == [f"flashtick: 1 query kept in the data directory (queries.yaml: registered live (op register)) and "
                    f"not in {queries}: \"vol\": {tail}",
                    f"flashtick: 1 query kept in the data directory (queries.yaml: listed by an earlier queries file, "
                    f"taken out of it since) and not in {queries}: \"nll\": {tail}"], kept
    state = json.loads((tmp_path / "data" / "queries.state.json").read_text())
    del state["origins"]  # as a flashtick before this one wrote it
    (tmp_path / "data" / "queries.state.json").write_text(json.dumps(state))
    capsys.readouterr()
    TickPipeline(config(checkpoint, tmp_path / "data", queries)).close()
    kept = [line for line in capsys.readouterr().err.splitlines() if " kept in the data directory " in line]
    assert kept == [f"flashtick: 2 queries kept in the data directory (queries.yaml: registered live, or listed by "
                    f"an earlier queries file) and not in {queries}: \"nll\", \"vol\": {tail}"], kept
    assert json.loads((tmp_path / "data" / "queries.state.json").read_text())["origins"] == {"dir": "file"}


def test_a_restart_says_which_query_unregistered_live_its_queries_file_registers_again(checkpoint, tmp_path,
                                                                                        capsys) -> None:
    """A query unregistered live came back at the next start from `serve --queries FILE` without a word (only a
    replaced spec was said): a user who stopped a standing query found it publishing again. It is named."""
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    first = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    feed_in_steps(first, SyntheticMarket(SyntheticConfig(seed=5)).next_batch(30))
    first.unregister_queries(["nll"])
    first.close()
    capsys.readouterr()

    second = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    err = capsys.readouterr().err
    assert "nll" in second.registry
    assert f"flashtick: query \"nll\": in {queries} but not among the queries kept in the data directory " \
           f"(unregistered live, or new in the file): registered" in err, err
    assert "query 'dir'" not in err, err  # kept as the file has it: nothing to say
    second.close()
    third = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    assert "query 'nll'" not in capsys.readouterr().err  # kept this time
    third.close()


def test_a_register_killed_between_the_queries_file_and_its_state_gets_a_fresh_version(checkpoint, tmp_path,
                                                                                        capsys) -> None:
    """`register` writes queries.yaml, then queries.state.json: a kill between the two leaves the new queries
    beside the old versions. The restart must not publish the new spec under the old spec's `query_version`
    (nor a new query at version 1 while the registry is further on), nor owe the new spec answers on ticks the
    live run never answered with it; an `unregister` cut short the same way still moves the version on."""
    from queries.yaml_loader import load_queries

    ticks = SyntheticMarket(SyntheticConfig(seed=12)).next_batch(60)
    data = tmp_path / "data"
    first = TickPipeline(config(checkpoint, data))
    first.register_queries(load_queries(QUERIES, "q.yaml", first.registry.questions))
    feed_in_steps(first, ticks[:40])
    old_state = (data / "queries.state.json").read_text()
    first.register_queries(load_queries("""
queries:
  - {name: dir, streams: ["*"], question: direction_20, kind: choice, trigger: {ticks: 5}}
  - {name: fresh, streams: ["*"], kind: surprise, trigger: batch}
""", "q.yaml", first.registry.questions))
    assert (first.registry.version, first.registry.query_version("dir")) == (2, 2)
    first.close()
    (data / "queries.state.json").write_text(old_state)  # as the kill left it: the queries file is the new one

    second = TickPipeline(config(checkpoint, data))
    registry = second.registry
    assert registry.get("dir").trigger.kind == "ticks"
    assert registry.version >= 2 and registry.query_version("nll") == 1
    assert registry.query_version("dir") == registry.query_version("fresh") == registry.version
    assert "disagree" in capsys.readouterr().err
    assert [o.answer.query for o in second.recovered if o.answer] == []  # registered after every logged tick
    answers = feed_in_steps(second, ticks[40:50])
    assert {a.query_version for a in answers if a.query == "dir"} == {registry.version}
    versions = {s.name: registry.query_version(s.name) for s in registry.list()}, registry.version
    state = (data / "queries.state.json").read_text()
    second.close()

    third = TickPipeline(config(checkpoint, data))  # the state now describes the file: nothing changes
    assert "disagree" not in capsys.readouterr().err
    assert ({s.name: third.registry.query_version(s.name) for s in third.registry.list()},
            third.registry.version) == versions
    third.unregister_queries(["fresh"])
    third.close()
    (data / "queries.state.json").write_text(state)  # the unregister's state write lost
    fourth = TickPipeline(config(checkpoint, data))
    assert "fresh" not in fourth.registry and fourth.registry.version > versions[1]
    assert fourth.registry.query_version("dir") == versions[0]["dir"]
    fourth.close()


@pytest.mark.parametrize("put_back", [("queries.state.json",), ("queries.state.json", "queries.yaml")])
def test_a_query_state_two_operations_old_never_takes_the_registry_version_back(checkpoint, tmp_path, capsys,
                                                                               put_back) -> None:
    """queries.state.json put back from a backup two registrations old (alone, or with queries.yaml): the restart
    restored the registry version it held, so versions already published for other specs were handed out again.
    Now the registry goes on past every query_version the answer log holds, a query whose logged answers are of a
    later registration registers afresh, and the start says the state was older than the log."""
    from queries.yaml_loader import load_queries

    ticks = SyntheticMarket(SyntheticConfig(seed=12)).next_batch(70)
    data = tmp_path / "data"
    first = TickPipeline(config(checkpoint, data))
    first.register_queries(load_queries(QUERIES, "q.yaml", first.registry.questions))
    feed_in_steps(first, ticks[:30])
    backup = {name: (data / name).read_text() for name in put_back}
    first.register_queries(load_queries("""
queries:
  - {name: dir, streams: ["*"], question: direction_20, kind: choice, trigger: {ticks: 5}}
""", "q.yaml", first.registry.questions))
    feed_in_steps(first, ticks[30:45])
    first.register_queries(load_queries("""
queries:
  - {name: fresh, streams: ["*"], kind: surprise, trigger: batch}
""", "q.yaml", first.registry.questions))
    published = feed_in_steps(first, ticks[45:55])
    assert (first.registry.version, first.registry.query_version("dir")) == (3, 2)
    assert {(a.query, a.query_version) for a in published} == {("dir", 2), ("nll", 1), ("fresh", 3)}
    first.close()
    for name, text in backup.items():
        (data / name).write_text(text)
    capsys.readouterr()

    second = TickPipeline(config(checkpoint, data))
    registry = second.registry
    assert registry.version > 3 and registry.query_version("nll") == 1  # nll's answers: of the state's registration
    err = capsys.readouterr().err
    assert "queries.state.json is older than the answer log" in err, err
    assert registry.query_version("dir") == registry.version  # its answers at version 2 were of another spec
    assert registry.get("dir").trigger.kind == ("ticks" if "queries.yaml" not in put_back else "batch")
    assert ("fresh" in registry) == ("queries.yaml" not in put_back)
    assert all(registry.query_version(name) in (1, registry.version) for name in ("dir", "nll", "fresh")
               if name in registry)
    assert [o.answer for o in second.recovered if o.answer] == []  # registered after every logged tick
    answers = feed_in_steps(second, ticks[55:65])
    assert {a.query_version for a in answers if a.query != "nll"} == {registry.version}
    restored = registry.version
    second.register_queries(load_queries("""
queries:
  - {name: later, streams: ["*"], kind: surprise, trigger: batch}
""", "q.yaml", second.registry.questions))
    assert registry.query_version("later") == restored + 1  # past every version answers were published under
    second.close()

    third = TickPipeline(config(checkpoint, data))  # the state saved since describes the log: nothing to say
    assert "older than the answer log" not in capsys.readouterr().err
    assert third.registry.version == registry.version
    third.close()


def test_a_register_of_the_same_spec_killed_before_its_state_is_saved_answers_nothing_again(checkpoint,
                                                                                           tmp_path) -> None:
    """Re-registering a query with its very spec is no change (review381 #1): nothing is written, so a kill
    anywhere leaves the directory as it was. A register of a changed spec whose answer log's forget event a kill
    cut off: answers older than their query's saved version are dropped at a restore (the event's work)."""
    from queries.yaml_loader import load_queries

    ticks = SyntheticMarket(SyntheticConfig(seed=12)).next_batch(60)
    data = tmp_path / "data"
    first = TickPipeline(config(checkpoint, data))
    first.register_queries(load_queries(QUERIES, "q.yaml", first.registry.questions))
    feed_in_steps(first, ticks[:40])
    streams = {t.stream for t in ticks[:40]}
    same = [spec for spec in load_queries(QUERIES, "q.yaml", first.registry.questions) if spec.name == "dir"]
    (data / "queries.state.json.tmp").mkdir()  # a state write would fail here: none is attempted
    assert first.register_queries(same) == []
    assert first.registry.query_version("dir") == 1 and all(first.cache.get("dir", s) for s in streams)
    killed = crash_copy(data, tmp_path / "killed")
    (killed / "queries.state.json.tmp").rmdir()  # (a kill leaves a file there at most, which a save overwrites)
    second = TickPipeline(config(checkpoint, killed))
    assert [o.answer for o in second.recovered if o.answer] == []
    assert second.registry.query_version("dir") == 1
    assert all(second.cache.get("dir", stream) is not None for stream in streams)  # as if never re-registered
    second.close()

    (data / "queries.state.json.tmp").rmdir()
    (segment,) = sorted((data / "answers").glob("answers-*.log"))
    before = segment.stat().st_size
    changed = [spec for spec in load_queries(QUERIES.replace("trigger: batch}", "trigger: {ticks: 2}}", 1), "q.yaml",
                                             first.registry.questions) if spec.name == "dir"]
    first.register_queries(changed)  # saved; the kill comes before the forget event reaches the log
    version = first.registry.query_version("dir")
    killed = crash_copy(data, tmp_path / "killed_later")
    os.truncate(killed / "answers" / segment.name, before)
    third = TickPipeline(config(checkpoint, killed))
    assert [o.answer for o in third.recovered if o.answer] == []
    assert third.registry.query_version("dir") == version > 1
    assert all(third.cache.get("dir", s) is None and third.cache.get("nll", s) is not None for s in streams)
    answers = feed_in_steps(third, ticks[40:50])
    assert {a.query_version for a in answers if a.query == "dir"} == {version}
    third.close()
    first.close()


@pytest.fixture(scope="module")
def headed_checkpoint(checkpoint, tmp_path_factory):
    """The checkpoint with answer heads (as `flashtick train` ships them): seeded random regressions."""
    from engine.service.features import FEATURES, LogisticBaseline, QuestionHead, write_head

    out = tmp_path_factory.mktemp("headed") / "model"
    shutil.copytree(checkpoint, out)
    rng = np.random.default_rng(0)
    n = len(FEATURES)
    head = QuestionHead(LogisticBaseline(rng.normal(size=n), rng.uniform(0.5, 2, size=n), rng.normal(size=(n, 3)),
                                        rng.normal(size=3)), 0.5, 1000, 300, 0.5, 0.45)
    write_head(out, {"direction_20": head}, "test")
    return out


def test_quotes_flushed_by_conflation_are_a_group_of_their_own_after_a_restart_too(checkpoint, tmp_path) -> None:
    """With when_behind: conflate, a stream's newest quote read while the engine is behind is held aside and
    submitted before the next forward (flush_held): live, a tick group of its own. It was logged outside any
    message, so a restart read it as part of the message before and answered the two as one group: owed `batch`
    answers at other versions, with other numbers, than the run that never stopped. It is now logged as a message
    of its own (start and end records), and the restart answers it as live did."""
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    conflate = lambda data: ServiceConfig.from_dict({  # noqa: E731 - config()'s, behind while any token waits
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
        "scheduler": {"max_batch_tokens": 64}, "log": {"dir": str(data)},
        "queries": str(queries), "limits": {"when_behind": "conflate", "max_backlog_tokens": 1}})
    ticks = SyntheticMarket(SyntheticConfig(seed=7)).next_batch(400)
    live = TickPipeline(conflate(tmp_path / "data"))
    feed_in_steps(live, ticks[:60])
    flushed = 0
    for i in range(60, len(ticks), 3):  # a burst ahead of the engine: accepted and logged, not computed
        assert live.ingest_message(encode(ticks[i : i + 3])) == []
        flushed += len(live.encoders.held)
        assert live.flush_held() == []  # what the server does before each forward
    assert flushed > 10 and live.encoders.conflated > 0
    recovered = TickPipeline(conflate(crash_copy(tmp_path / "data", tmp_path / "after")))
    owed = [o.answer for o in recovered.recovered if o.answer is not None]
    uninterrupted = live.run_until_idle()
    key = lambda a: (a.query, a.stream, a.version, a.seq, a.data_ts)  # noqa: E731
    assert sorted(map(key, owed)) == sorted(map(key, uninterrupted))
    by_key = {key(a): a for a in uninterrupted}
    for answer in owed:
        if answer.query == "dir":
            assert answer.value["probs"] == pytest.approx(by_key[key(answer)].value["probs"], abs=PROB_TOL)


class LiveBacklog(NamedTuple):
    """A live run that died with a burst of messages accepted and logged but not computed, and went on: its model,
    the data directory as the death left it, the burst's size, the answers the live run then computed for it and its
    sessions after them, each later message with the answers the live run computed for it (one at a time), and its
    sessions at the end."""
    checkpoint: Path
    at_death: Path
    burst: int
    uninterrupted: list
    sessions: dict
    after: list[tuple[bytes, list]]
    sessions_at_end: dict


@pytest.fixture(scope="module")
def live_backlog(checkpoint, headed_checkpoint, tmp_path_factory) -> Callable[[bool], LiveBacklog]:
    """The backlog tests' live run by model (``heads``: the checkpoint with answer heads), run once each: the
    restart in place and the deferred one compare with the same run that never stopped (each ran its own before)."""
    runs: dict[bool, LiveBacklog] = {}

    def run(heads: bool) -> LiveBacklog:
        if heads not in runs:
            runs[heads] = _run_live_backlog(headed_checkpoint if heads else checkpoint,
                                            tmp_path_factory.mktemp("backlog"))
        return runs[heads]

    return run


def _run_live_backlog(checkpoint: Path, tmp_path: Path) -> LiveBacklog:
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES + "  - {name: d10, streams: ['*'], question: direction_20, kind: choice, "
                                 "trigger: {ticks: 10}}\n")
    # 4 streams, rolls past 256 positions; 33 later messages after the burst (100 of them, 800 ticks in all, went
    # through the same paths: each restart case fed them one at a time after its tail, as the live run did)
    ticks = SyntheticMarket(SyntheticConfig(seed=7)).next_batch(600)
    messages = [ticks[i : i + 3] for i in range(0, 501, 3)]
    live = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    for message in messages[:30]:
        assert live.ingest_message(encode(message)) == []
        live.run_until_idle()
    for message in messages[30:]:  # the burst: accepted and logged, not yet computed
        assert live.ingest_message(encode(message)) == []
    at_death = crash_copy(tmp_path / "data", tmp_path / "at_death")
    uninterrupted = live.run_until_idle()
    held = sessions(live)
    after = []
    for message in [ticks[i : i + 3] for i in range(501, 600, 3)]:
        assert live.ingest_message(encode(message)) == []
        after.append((encode(message), live.run_until_idle()))
    at_end = sessions(live)
    assert live.engine.scheduler.stats.rolls > 0  # (the sessions the restarts rebuild rolled)
    live.close()
    return LiveBacklog(checkpoint, at_death, sum(map(len, messages[30:])), uninterrupted, held, after, at_end)


def answer_key(answer) -> tuple:
    """What tells one published answer from another: query, stream, version, seq and data time."""
    return answer.query, answer.stream, answer.version, answer.seq, answer.data_ts


@pytest.mark.parametrize("heads,deferred", [(False, False), (True, False), (False, True)],
                         ids=["model", "answer heads", "deferred"])
def test_a_restart_answers_a_backlog_group_by_group_as_the_live_run_would(live_backlog, heads, deferred, tmp_path,
                                                                          capsys) -> None:
    """Messages accepted but not yet computed when the process died (a burst ahead of the engine): the restart
    answers each of them as a run that never stopped does (a `batch` answer per message and stream, a
    `{ticks: 10}` answer per multiple of 10), with the same seqs, not one answer per query at the last tick.
    With answer heads: the features the replay rebuilds are the live run's. Deferred (the server's way: ingest
    bound first), the owed tail is queued at the start and its answers come out of the first forwards."""
    live = live_backlog(heads)
    phases: list[str] = []  # what `health` says while the service starts
    capsys.readouterr()
    recovered = TickPipeline(config(live.checkpoint, crash_copy(live.at_death, tmp_path / "after")),
                             progress=phases.append, defer_owed=deferred)
    burst = live.burst
    if deferred:
        assert recovered.recovered == [] and recovered.owed_ticks == burst  # queued, nothing computed yet
        owed = recovered.run_until_idle()
        assert recovered.owed_ticks == 0 and recovered.flash.owes is None
    else:
        owed = [o.answer for o in recovered.recovered if o.answer is not None]
    uninterrupted = live.uninterrupted
    assert_owed_as_uninterrupted(owed, uninterrupted, PROB_TOL)
    # the log says how many answers were owed, counted before they were computed: as many as came out
    lead = "owed: " if deferred else "computing what was owed: "
    assert f"flashtick: {lead}{len(uninterrupted)} answers due on {burst} ticks of 4 streams accepted but not yet " \
           f"answered when the service stopped" in capsys.readouterr().err
    # (how far each log is read is said as it goes, review380 #6: tests/test_restart_phases.py)
    read = [p for p in phases if p.startswith(("reading the answer log: ", "replaying the tick log: "))]
    assert read[0].startswith("reading the answer log: 0 of ") and read[-1].startswith("replaying the tick log: ")
    phases = [p for p in phases if p not in read]
    assert phases[0] == "replaying the tick log"
    assert deferred or phases[-1] == "computing the answers owed at each stream's latest tick"
    computing = phases[1:-1]  # one line per forward of the tail, the last at 100%
    assert deferred or (computing and all(p.startswith(f"computing what was owed: {burst} ticks, ") for p in computing)
                        and computing[-1].endswith("(100%)")), computing
    assert sessions(recovered) == live.sessions
    # and after: the answer adaptation learnt from the same answers, so the published (adapted) answers agree too
    # (one answer per query at the last tick had moved them by up to 0.015)
    for message, answers in live.after:
        assert recovered.ingest_message(message) == []
        got = {answer_key(a): a.value for a in recovered.run_until_idle() if a.query != "nll"}
        want = {answer_key(a): a.value for a in answers if a.query != "nll"}
        assert got.keys() == want.keys()
        for k, value in got.items():
            assert value["probs"] == pytest.approx(want[k]["probs"], abs=PROB_TOL)
    recovered.close()


def test_ticks_arriving_while_a_deferred_restart_computes_its_tail_queue_behind_it(live_backlog, tmp_path) -> None:
    """The server binds ingest before the owed tail is computed: ticks that arrive meanwhile are each stream's next
    ones, and every answer (the tail's owed ones and the new ticks') is what a run that never stopped published.
    (The backlog tests' live run: its burst owed, then its later messages, all arriving before the tail is
    computed, where the live run computed each as it came.)"""
    live = live_backlog(False)
    recovered = TickPipeline(config(live.checkpoint, crash_copy(live.at_death, tmp_path / "after")), defer_owed=True)
    assert recovered.owed_ticks == live.burst
    for message, _ in live.after:  # arriving before the loop has computed the tail
        assert recovered.ingest_message(message) == []
    after_restart = recovered.run_until_idle()
    assert recovered.owed_ticks == 0
    uninterrupted = live.uninterrupted + [answer for _, answers in live.after for answer in answers]
    assert_owed_as_uninterrupted(after_restart, uninterrupted, PROB_TOL)
    assert sessions(recovered) == live.sessions_at_end
    recovered.close()


@pytest.mark.parametrize("deferred", [False, True], ids=["in place", "deferred"])
def test_a_clean_stop_whose_last_ticks_fired_no_query_owes_nothing(checkpoint, tmp_path, capsys, deferred) -> None:
    """A reviewer's clean stop (everything answered) and restart said "owed: 3 ticks of 1 stream accepted but not
    yet answered": ticks after each stream's last answer that crossed no trigger's grid. They are computed again
    (the sessions hold them), and nothing is said owed, nor published."""
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  - {name: d10, streams: ['*'], question: direction_20, kind: choice, "
                       "trigger: {ticks: 10}}\n")
    ticks = SyntheticMarket(SyntheticConfig(seed=7)).next_batch(166)
    live = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    answers = feed_in_steps(live, ticks)
    counts = {stream: s[1] for stream, s in sessions(live).items()}
    assert answers and any(n % 10 for n in counts.values()), counts  # some stream's last ticks fired nothing
    recovered = TickPipeline(config(checkpoint, crash_copy(tmp_path / "data", tmp_path / "after")),
                             defer_owed=deferred)
    assert not deferred or recovered.owed_ticks > 0  # there is a tail to compute again
    assert recovered.recovered == [] and recovered.run_until_idle() == []
    assert sessions(recovered) == sessions(live)
    err = capsys.readouterr().err
    assert "owed" not in err, err


def test_a_served_restart_says_it_is_catching_up_not_that_it_is_behind(checkpoint, tmp_path, capsys) -> None:
    """While the serving loop computes a restart's tail, the heartbeat's warning said "behind: N tokens wait ...
    the oldest data for 5.1 s", alarming beside a normal restart: it says it is catching up after the restart,
    with the numbers, and once it is done, that it caught up."""
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=7)).next_batch(600)
    live = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    for i in range(0, len(ticks), 3):  # after the first answers, accepted and logged, never computed: the tail
        assert live.ingest_message(encode(ticks[i : i + 3])) == []
        if i == 90:
            live.run_until_idle()
    restarted = dataclasses.replace(
        config(checkpoint, crash_copy(tmp_path / "data", tmp_path / "after"), queries),
        endpoints=ephemeral(checkpoint, tmp_path).endpoints,
        limits=dataclasses.replace(ServiceConfig().limits, heartbeat_s=0.05, max_backlog_tokens=40))
    with serving(restarted) as server:
        wait_for(lambda: server.pipeline.owed_ticks == 0 and not server.pipeline.behind, timeout_s=120)
        wait_for(lambda: not server._catching_up, timeout_s=10)  # (the next heartbeat's finding)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "tokens wait for a forward" in line]
    assert lines and all(line.startswith("flashtick: catching up after the restart: ") for line in lines), err
    assert " logged ticks still to compute; " in lines[0] and "the oldest data for " in lines[0]
    assert "flashtick: caught up after the restart\n" in err


def test_a_restart_does_not_bring_back_streams_the_live_run_expired(checkpoint, tmp_path, capsys) -> None:
    """An idle stream the live run expired is forgotten at that point of the tick log too: a restart neither
    rebuilds it from its old ticks (holding KV for an hour more) nor publishes an owed answer for it, and a
    stream that came back after its expiry goes on from its kept context, at the restart too. The start's
    `recovered N ticks of M streams` counts the streams held and their ticks (it said 85 ticks of 1 stream, for a
    stream of 5), the expired sessions' ticks apart."""
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(120)
    live = TickPipeline(dataclasses.replace(config(checkpoint, tmp_path / "data", queries),
                                            scheduler=dataclasses.replace(config(checkpoint, None).scheduler,
                                                                          stream_idle_s=0.2)))
    feed_in_steps(live, ticks[:80])
    time.sleep(0.3)
    expired = live.expire_idle()
    assert len(expired) == 4
    capsys.readouterr()
    every_stream_expired = TickPipeline(config(checkpoint, crash_copy(tmp_path / "data", tmp_path / "expired")))
    assert every_stream_expired.engine.scheduler.streams == {} and every_stream_expired.recovered == []
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("flashtick: recovered ")]
    # not "of 0", nor "its next ticks start a new session": the contexts are kept (review380 #7)
    assert said and said[0].startswith("flashtick: recovered 80 ticks of 4 streams (no stream is held: each logged "
                                       "stream expired for idleness, their contexts and latest answers kept (the "
                                       "scheduler.expired_streams_kept most recently expired): a stream's next tick "
                                       "goes on from its context, its version counting on) from "), said
    assert "new session" not in said[0]
    back = [t for t in ticks[80:] if t.stream == expired[0]][:5]  # one stream comes back onto its kept context
    feed_in_steps(live, back)
    before = sum(t.stream == expired[0] for t in ticks[:80])
    assert sorted(live.engine.scheduler.streams) == [expired[0]] and sessions(live)[expired[0]][1] == before + 5
    capsys.readouterr()
    recovered = TickPipeline(config(checkpoint, crash_copy(tmp_path / "data", tmp_path / "after")))
    assert sessions(recovered) == sessions(live) and recovered.ticks_in == 85  # (every tick accepted, as live)
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("flashtick: recovered ")]
    assert said and said[0].startswith(
        "flashtick: recovered 5 ticks of 1 stream (and 80 ticks of 4 streams expired for idleness before the stop: "
        "replayed, not held; their contexts and latest answers kept (the scheduler.expired_streams_kept most "
        "recently expired): a stream's next tick goes on from its context, its version counting on) from "), said
    assert recovered.recovered == []  # nothing owed: every tick of the new session was answered
    assert recovered.encoders.accepted(expired)[expired[1]]["last_ts"] == max(t.ts for t in ticks[:80]
                                                                            if t.stream == expired[1])


def test_a_start_its_replay_refuses_lets_the_directory_go_as_a_stop_does(checkpoint, tmp_path, capsys) -> None:
    """review400 #4: a damaged record of an older tick log segment (which the replay finds, after the logs opened)
    stopped the start with the directory's lock left as its run's, unmarked, so the next start said the previous run
    had stopped uncleanly (a crash, to a log pipeline counting them) after a clean stop and a refusal."""
    from engine.service.log_reading import CorruptLog

    base = config(checkpoint, tmp_path / "data")
    small = dataclasses.replace(base, log=dataclasses.replace(base.log, segment_bytes=4096))
    live = TickPipeline(small)
    feed_in_steps(live, SyntheticMarket(SyntheticConfig(seed=4)).next_batch(120))
    live.close()
    first, *later = segments(tmp_path / "data" / "ticks")
    assert later  # (the damage is in a segment before the one a start counts as it opens the log)
    damaged = bytearray(first[1].read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    first[1].write_bytes(bytes(damaged))
    capsys.readouterr()
    with pytest.raises(CorruptLog, match="damaged record at byte"):
        TickPipeline(small)
    TickPipeline(dataclasses.replace(small, log=dataclasses.replace(small.log, skip_corrupt=True))).close()
    assert "previous run" not in capsys.readouterr().err


def test_sessions_survive_retention_dropping_the_first_segments(checkpoint, tmp_path, capsys) -> None:
    """A restart after retention dropped the oldest tick log segments: each stream's tick count (an answer's
    `version`), ordering guard, codec state and session (its window's tokens and where it rolls next) go on from
    where the live run had them (each segment starts with them), so the model's next answers are the live run's.
    (Before, the codec's running scales restarted at the first kept tick and the sessions rolled elsewhere:
    answers after a restart differed by up to 0.2.) The start's `recovered N ticks` line says how many older ticks
    retention dropped (it said only the kept ones, while the streams counted far more)."""
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    small = dict(segment_bytes=16384, retention_bytes=3 * 16384)  # (a start with every session fits)
    live_config = config(checkpoint, tmp_path / "data", queries)
    live = TickPipeline(dataclasses.replace(live_config, log=dataclasses.replace(live_config.log, **small)))
    ticks = SyntheticMarket(SyntheticConfig(seed=6)).next_batch(600)
    feed_in_steps(live, ticks[:500])
    assert live.data.log.stats.segments_dropped > 0
    counts = {name: s.ticks for name, s in live.engine.scheduler.streams.items()}
    after = crash_copy(tmp_path / "data", tmp_path / "after")
    capsys.readouterr()
    recovered = TickPipeline(dataclasses.replace(config(checkpoint, after), log=dataclasses.replace(
        config(checkpoint, after).log, **small)))
    assert recovered.ticks_in < 500  # the dropped segments' ticks are gone...
    assert {name: s.ticks for name, s in recovered.engine.scheduler.streams.items()} == counts  # ...not counted
    dropped = 500 - recovered.ticks_in
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("flashtick: recovered ")]
    assert said and said[0].startswith(f"flashtick: recovered {recovered.ticks_in} ticks of ") and \
        said[0].endswith(f" ({dropped} older ticks dropped by retention)"), said
    assert recovered.data.stats()["ticks_dropped_by_retention"] == dropped
    assert sessions(recovered) == sessions(live)
    got = {(a.query, a.stream, a.version): a.value for a in feed_in_steps(recovered, ticks[500:])}
    want = {(a.query, a.stream, a.version): a.value for a in feed_in_steps(live, ticks[500:])}
    assert got.keys() == want.keys()
    for key, value in got.items():
        if key[0] == "dir":
            # (the published mix, answers.adapt, learns again from the ticks and answers the log still holds)
            assert value["model_probs"] == pytest.approx(want[key]["model_probs"], abs=PROB_TOL)
        else:
            assert value["nll"] == pytest.approx(want[key]["nll"], abs=PROB_TOL)
    old = next(t for t in ticks[:500] if t.stream == ticks[0].stream)  # before every kept tick of its stream
    assert recovered.ingest_message(encode([old]))[0]["reason"] == "ts_backwards"


def test_a_stream_whose_every_tick_retention_dropped_counts_on_after_a_restart(checkpoint, tmp_path) -> None:
    """A quiet stream whose ticks all lie in dropped segments: after a restart it is neither expired at once nor
    renumbered, and its next answers (and those of the streams in the same forward) come at the next versions."""
    from connectors.ticks import trade

    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    small = dict(segment_bytes=16384, retention_bytes=3 * 16384)  # (a start with every session fits)
    base = config(checkpoint, tmp_path / "data", queries)
    live = TickPipeline(dataclasses.replace(base, log=dataclasses.replace(base.log, **small)))
    t0 = 1_700_000_000_000_000_000
    feed_in_steps(live, [trade("QUIET", t0 + min(i, 27), 100.0 + i % 3, 1.0, "buy") for i in range(30)])  # 3 at 27
    feed_in_steps(live, [trade(f"R{i % 2}", t0 + 100 + i, 50.0 + i % 5, 1.0, "sell") for i in range(600)])
    after = crash_copy(tmp_path / "data", tmp_path / "after")
    recovered = TickPipeline(dataclasses.replace(config(checkpoint, after), log=dataclasses.replace(
        config(checkpoint, after).log, **small)))
    assert sessions(recovered)["QUIET"] == sessions(live)["QUIET"]  # every tick of it dropped, its session kept
    # so are its ordering guard and how many of its ticks share it (a feed resending the run goes on inside it)
    # (its last price level is not kept in the log's start record: not known, so a feed compares nothing)
    assert recovered.encoders.accepted(["QUIET"]) == {"QUIET": {"ticks": 30, "last_ts": t0 + 27, "at_last_ts": 3,
                                                                "last_price": None, "last_seq": None,
                                                                "duplicates": 0, "duplicates_restamped": 0,
                                                                "seq_gaps": 0, "seq_missing": 0, "seq_late": 0,
                                                                "seq_restarts": 0, "repeats_taken": 0}}
    assert recovered.expire_idle() == []  # restored now, not idle since 1970
    message = [trade("R0", t0 + 10_000, 51.0, 1.0, "buy"), trade("QUIET", t0 + 10_001, 101.0, 1.0, "buy"),
               trade("R1", t0 + 10_002, 52.0, 1.0, "buy")]
    for pipeline in (live, recovered):
        assert pipeline.ingest_message(encode(message)) == []
    want = {(a.query, a.stream): (a.version, a.seq) for a in live.run_until_idle()}
    got = {(a.query, a.stream): (a.version, a.seq) for a in recovered.run_until_idle()}
    assert got == want and want[("dir", "QUIET")][0] == 31


def test_ticks_dropped_by_retention_count_a_stream_that_expired_before_the_first_kept_segment(checkpoint, tmp_path,
                                                                                               capsys) -> None:
    """The `recovered` line's `(N older ticks dropped by retention)` summed the tick counts of the streams the
    first kept segment started with: a stream expired for idleness before it counts 0 there, so its ticks went
    uncounted (600 said of 640 dropped). Each segment start now says how many ticks the log held before it, so
    the count is every tick retention dropped, at this restart and (counting on) at the next."""
    from connectors.ticks import trade

    small = dict(segment_bytes=16384, retention_bytes=3 * 16384)
    base = config(checkpoint, tmp_path / "data")
    with_small = lambda cfg: dataclasses.replace(cfg, log=dataclasses.replace(cfg.log, **small))  # noqa: E731
    live = TickPipeline(dataclasses.replace(with_small(base), scheduler=dataclasses.replace(base.scheduler,
                                                                                            stream_idle_s=0.2)))
    t0 = 1_700_000_000_000_000_000
    feed_in_steps(live, [trade("GONE", t0 + i, 100.0 + i % 3, 1.0, "buy") for i in range(40)])
    expired: list[str] = []
    wait_for(lambda: expired.extend(live.expire_idle()) or expired == ["GONE"], timeout_s=60)
    feed_in_steps(live, [trade(f"R{i % 2}", t0 + 100 + i, 50.0 + i % 5, 1.0, "sell") for i in range(600)])
    (first_kept, _), *_ = segments(tmp_path / "data" / "ticks")
    assert first_kept > 41  # GONE's 40 ticks and its expiry were all in dropped segments
    capsys.readouterr()
    recovered = TickPipeline(with_small(config(checkpoint, crash_copy(tmp_path / "data", tmp_path / "after"))))
    dropped = 640 - recovered.ticks_in
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("flashtick: recovered ")]
    assert said and said[0].endswith(f" ({dropped} older ticks dropped by retention)"), said
    assert recovered.data.stats()["ticks_dropped_by_retention"] == dropped
    feed_in_steps(recovered, [trade(f"R{i % 2}", t0 + 1000 + i, 50.0 + i % 5, 1.0, "sell") for i in range(300)])
    assert recovered.data.log.stats.segments_dropped > 0  # segments it started, dropped in turn
    recovered.close()
    again = TickPipeline(with_small(config(checkpoint, tmp_path / "after")))  # the count goes on from the restart's
    assert again.data.stats()["ticks_dropped_by_retention"] == 940 - again.ticks_in
    again.close()
    live.close()


def test_ticks_dropped_by_retention_counts_the_segments_retention_drops_while_serving(checkpoint, tmp_path) -> None:
    """An SRE's soak (review189 #3): `stats.log.segments_dropped` went 0 -> 5 while retention dropped segments live,
    but `ticks_dropped_by_retention` stayed 0 (the figure of the last start) until a restart. It now counts every
    tick retention dropped since the log began, live drops included: the ticks the kept segments do not hold."""
    config_path = tmp_path / "engine.yaml"
    config_path.write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\n"
                           f"log: {{segment_bytes: 16384, retention_bytes: 49152}}\n"
                           f"endpoints: {{ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', "
                           f"control: 'tcp://127.0.0.1:0'}}\n"
                           f"limits: {{heartbeat_s: 0.2}}\n")  # (the drop waits for heartbeats: 0.2 s apart)
    process, endpoints = serve(config_path, tmp_path / "data")
    try:
        # (800 ticks, ~87 KiB of log: five segments of 16 KiB, past the 48 KiB kept; 1,500 computed twice as many)
        feed_and_wait(endpoints, SyntheticMarket(SyntheticConfig(seed=21)).next_batch(800), 800)
        with ControlClient(endpoints["control"], timeout_s=30) as control:
            # a roll keeps the segments of ticks not computed yet (review293): a heartbeat once they are drops them
            wait_computed(control)
            beats = control.call("stats")["stats"]["heartbeats"]
            wait_for(lambda: control.call("stats")["stats"]["heartbeats"] >= beats + 2, timeout_s=60)
            live = control.call("stats")["stats"]["log"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        process.kill()
    kept = sum("tick" in msgpack.unpackb(payload, raw=False) for _, payload in read(tmp_path / "data" / "ticks"))
    assert live["segments_dropped"] > 0 and live["recovered_ticks"] == 0
    assert live["ticks_dropped_by_retention"] == 800 - kept > 0, (live, kept)


def test_a_data_directory_refuses_other_weights_under_the_same_model_id(tmp_path) -> None:
    """A checkpoint retrained into the same directory keeps its name (the model id) but not its weights: the
    logged sessions and answers are the old weights', so the directory refuses it, naming the weights."""
    from engine.service.config import ConfigError

    old = tiny_tick_checkpoint(tmp_path / "a" / "acme-model", seed=1, max_position_embeddings=256)
    new = tiny_tick_checkpoint(tmp_path / "b" / "acme-model", seed=2, max_position_embeddings=256)
    TickPipeline(config(old, tmp_path / "data")).close()
    TickPipeline(config(old, tmp_path / "data")).close()  # the same weights again: fine
    with pytest.raises(ConfigError, match=r"written by another model, weights or codec \(weights: ") as refused:
        TickPipeline(config(new, tmp_path / "data"))
    # a model roll-out carries the ticks over rather than only moving the directory away
    assert f"`flashtick ticklog export {tmp_path / 'data'} --out ticks.parquet`, then `flashtick feed replay " \
           f"ticks.parquet` into this service on another --data-dir" in str(refused.value), refused.value


def test_only_accepted_ticks_are_logged(checkpoint, tmp_path) -> None:
    pipeline = TickPipeline(ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
        "scheduler": {"max_streams": 2}, "log": {"dir": str(tmp_path / "data")}}))
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(60)
    rejected = pipeline.ingest_message(encode(ticks)) + pipeline.ingest_message(encode(ticks[:5]))  # replayed
    assert {r["reason"] for r in rejected} == {"stream_refused", "ts_backwards"}
    accepted = pipeline.ticks_in
    pipeline.run_until_idle()
    again = TickPipeline(ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
        "scheduler": {"max_streams": 2}, "log": {"dir": str(crash_copy(tmp_path / "data", tmp_path / "after"))}}))
    assert again.ticks_in == accepted and again.stats()["log"]["replay_refused"] == 0
    assert sessions(again) == sessions(pipeline)


def serve(config_path: Path, data_dir: Path, max_file_bytes: int | None = None, extra: tuple[str, ...] = ()
          ) -> tuple[subprocess.Popen, dict[str, str]]:
    """A real `flashtick serve` on its own process (``extra``: more of its options); ``max_file_bytes``: no file it
    writes may grow past that (RLIMIT_FSIZE: a write past it fails with EFBIG, as on a full disk; Python ignores
    SIGXFSZ). The stderr lines read up to its "serving" line are kept as the process's ``lines_read``. Forked from
    the worker's warm zygote (tests/forked_cli.py): what these tests watch (a SIGKILL, a file size limit, its exit
    status and stderr) is a real process's, and each start no longer imports torch again (~2 s of CPU idle)."""
    process = cli_popen(["serve", "--config", str(config_path), "--data-dir", str(data_dir), *extra],
                        stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                        rlimits={resource.RLIMIT_FSIZE: max_file_bytes} if max_file_bytes else None)
    process.lines_read = start_lines(process)
    assert process.lines_read and "flashtick serving" in process.lines_read[-1], \
        ["serve exited", *process.lines_read]
    endpoints = dict(part.split("=", 1) for part in process.lines_read[-1].split("flashtick serving ", 1)[1].split())
    return process, endpoints


@contextlib.contextmanager
def serving_a_disk_that_fills(config_path: Path, data_dir: Path) -> Iterator[tuple[subprocess.Popen, dict[str, str],
                                                                                   list]]:
    """`serve` (above) under a 32 KiB file-size limit, which its tick log passes within the 1,000 synthetic ticks
    yielded with it: a disk that fills while a feed sends them (send_by_fifty). Killed on the way out."""
    process, endpoints = serve(config_path, data_dir, max_file_bytes=32 << 10)
    try:
        yield process, endpoints, SyntheticMarket(SyntheticConfig(seed=10)).next_batch(1000)
    finally:
        process.kill()


def send_by_fifty(endpoints: dict[str, str], ticks: list) -> None:
    """``ticks`` to the service's ingest socket, 50 a message."""
    with FeedClient(endpoints["ingest"]) as feed:
        for i in range(0, len(ticks), 50):
            feed.send(ticks[i : i + 50])


def feed_and_wait(endpoints: dict[str, str], ticks, total: int) -> None:
    send_by_fifty(endpoints, ticks)
    with ControlClient(endpoints["control"], timeout_s=10) as control:
        deadline = time.monotonic() + 60
        while control.call("stats")["stats"]["ticks_in"] < total and time.monotonic() < deadline:
            time.sleep(0.05)
        assert control.call("stats")["stats"]["ticks_in"] == total  # accepted, not necessarily computed


def wait_computed(control: ControlClient) -> None:
    deadline = time.monotonic() + 60
    while control.call("stats")["stats"]["pending_tokens"] and time.monotonic() < deadline:
        time.sleep(0.05)


def receive_until_quiet(answers: GaplessSubscriber, got: dict[str, list[int]], quiet_s: float = 1.5) -> None:
    while (message := answers.recv(timeout_s=quiet_s)) is not None:
        got.setdefault(message[0], []).append(message[1]["seq"])


def receive_until_each_has(answers: GaplessSubscriber, got: dict[str, list[int]], topics: Iterable[str], count: int,
                           timeout_s: float = 60.0) -> None:
    """Receives until every topic has `count` answers (a loaded machine may take seconds to deliver the first after
    a restart: a quiet period alone ended too early), then until quiet, so that a duplicate would still show."""
    deadline = time.monotonic() + timeout_s
    while any(len(got.get(t, [])) < count for t in topics) and time.monotonic() < deadline:
        if (message := answers.recv(timeout_s=0.5)) is not None:
            got.setdefault(message[0], []).append(message[1]["seq"])
    receive_until_quiet(answers, got, quiet_s=0.5)


def serve_config(tmp_path: Path, checkpoint: Path, metrics: bool = False, scheduler: str = "",
                 **limits: float) -> Path:
    """A `serve` config file on ephemeral ports, heartbeats every 0.2 s (a restarted subscriber waits for one),
    ``scheduler``: a scheduler section in YAML flow style, ``limits``: more of the limits section (heartbeat_s
    included)."""
    limits = {"heartbeat_s": 0.2, **limits}
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    config_path = tmp_path / "engine.yaml"
    config_path.write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\n"
                           + (f"scheduler: {scheduler}\n" if scheduler else "") +
                           f"endpoints: {{ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', "
                           f"control: 'tcp://127.0.0.1:0'{', metrics_port: 0' if metrics else ''}}}\n"
                           f"limits: {{{', '.join(f'{key}: {value}' for key, value in limits.items())}}}\n"
                           f"queries: {queries}\n")
    return config_path


def test_a_disk_that_refuses_writes_refuses_ingest_stays_degraded_and_loses_nothing_accepted(checkpoint,
                                                                                           tmp_path) -> None:
    """The tick log cannot grow (a full disk, a file size limit): ticks are refused as log_unavailable, told
    to the sender and counted; the service keeps serving; every tick it did accept is recovered on restart.
    And `health` stays degraded (/readyz 503) until a write succeeds: it went back to serving 10 s after the last
    refused tick while the disk was still full, so with a quiet feed the service read healthy while every tick
    that came was lost. (One run checks both: each paid a `serve` process filling its disk.)"""
    config_path = serve_config(tmp_path, checkpoint, metrics=True)
    with serving_a_disk_that_fills(config_path, tmp_path / "data") as (process, endpoints, ticks):
        with ControlClient(endpoints["control"], timeout_s=10) as control, \
                AnswerSubscriber(endpoints["answers"], [REJECTS_TOPIC]) as rejects:
            rejects.wait_ready()
            send_by_fifty(endpoints, ticks)
            deadline = time.monotonic() + 60
            while sum(control.call("stats")["stats"]["rejected"].values()) + control.call("stats")["stats"][
                    "ticks_in"] < 1000 and time.monotonic() < deadline:
                time.sleep(0.05)
            stats = control.call("stats")["stats"]
            refused = stats["rejected"].get("log_unavailable", 0)
            assert 0 < refused < 1000 and stats["ticks_in"] + refused == 1000
            assert stats["log"]["append_errors"] >= refused
            scraped = scrape(endpoints["metrics"])  # what a scraper alerts on (refreshed by the stats op)
            assert scraped["flashtick_log_append_errors_total"] >= stats["log"]["append_errors"]
            assert scraped["flashtick_serving"] == 0 and scraped["flashtick_log_problem"] == 1, scraped
            reason = rejects.recv(timeout_s=5)[1]
            assert reason["reason"] == "log_unavailable"
            assert "tick log" in reason["error"] and "not accepted" in reason["error"]
            health = control.call("health")  # it answers: degraded while it refuses ticks, saying why
            assert health["status"] == "degraded" and "log_unavailable" in health["log_problem"], health
            accepted = stats["ticks_in"]
            # the feed is quiet since: degraded still, and said to last until a write succeeds (item_log.problem
            # holds no clock; the old "refused recently" window ended it 10 s after the last refusal, which this
            # test once waited out: 11 s of its 12)
            health = control.call("health")
            assert health["status"] == "degraded" and "until a write succeeds" in health["log_problem"], health
            status, ready = probe(endpoints["metrics"], "/readyz")
        assert status == 503 and ready["reasons"][0]["reason"] == "log_unavailable", ready
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
    process, endpoints = serve(config_path, tmp_path / "data")  # the disk has room again
    try:
        with ControlClient(endpoints["control"], timeout_s=30) as control:
            assert control.call("stats")["stats"]["log"]["recovered_ticks"] == accepted
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def test_kill_9_loses_no_accepted_tick_and_the_next_answers_match_and_log_timestamps_stamp_each_line(checkpoint,
                                                                                                    tmp_path) -> None:
    """A real `flashtick serve` killed with SIGKILL mid-feed and started again on its data directory: every
    accepted tick is in the recovered sessions, the answers after the restart equal an uninterrupted run's,
    and a subscriber that lived through it sees every topic's seqs 1, 2, 3, ... once each, no gap, no reuse.
    The restart runs with `--log-timestamps`: a service log kept in a file (nohup, a redirect) could not place its
    "behind" or restart lines in time; every stderr line starts with its UTC time, from the first line to the stop
    line, which exits 0. (One run checks both: each paid a `serve` process of its own.)"""
    config_path = serve_config(tmp_path, checkpoint)
    queries = tmp_path / "q.yaml"
    ticks = SyntheticMarket(SyntheticConfig(seed=8)).next_batch(500)
    seqs: dict[str, list[int]] = {}
    process, endpoints = serve(config_path, tmp_path / "data")
    try:
        with ControlClient(endpoints["control"], timeout_s=10) as control, \
                GaplessSubscriber(endpoints["answers"], control) as answers:
            answers.wait_ready()
            feed_and_wait(endpoints, ticks[:400], 400)
            receive_until_quiet(answers, seqs, quiet_s=0.3)  # some of the answers, maybe not all
            last_seqs = dict(answers.last_seq)
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    finally:
        process.kill()
    before = datetime.now(timezone.utc).replace(microsecond=0)
    process, endpoints = serve(config_path, tmp_path / "data", extra=("--log-timestamps",))
    try:
        with ControlClient(endpoints["control"], timeout_s=30) as control, \
                GaplessSubscriber(endpoints["answers"], control, last_seqs=last_seqs) as answers:
            stats = control.call("stats")["stats"]
            assert stats["ticks_in"] == 400 and stats["log"]["recovered_ticks"] == 400
            answers.wait_ready(30)  # and caught up on what it missed, the restart's owed answers included
            feed_and_wait(endpoints, ticks[400:], 500)
            wait_computed(control)
            # the model's own distribution: the published mix also depends on which answers the live feed's
            # grouping published (answers.adapt), which one big message to the reference does not repeat
            recovered = {s: control.call("ask", stream=s, query="dir")["answer"]["value"]["model_probs"]
                         for s in ("SYN.A", "SYN.B", "SYN.C", "SYN.D")}
            receive_until_quiet(answers, seqs)
            assert answers.unrecoverable == 0
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    rest = process.stderr.read()
    assert process.returncode == 0, rest
    # the stop line tells this run's ticks from the log's (ticks_in counts both after a restart)
    assert "flashtick stopped: 500 ticks in (100 this run, 400 from the tick log), " in rest
    lines = [*process.lines_read, *rest.splitlines()]
    assert any("flashtick serving " in line for line in lines) and any("flashtick stopped: " in line for line in lines)
    # which model it serves, at the start (a wrong model.path showed only in the answers' `model`)
    assert any(line.endswith(f"({Path(checkpoint).resolve()})") and " flashtick: INFO: model " in line
               for line in lines)
    for line in lines:
        stamp, _, text = line.partition(" ")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp) and text, line
        assert before <= datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc) \
            <= datetime.now(timezone.utc), line
    assert len(seqs) == 8  # 2 queries x 4 streams
    for topic, got in seqs.items():
        assert got == list(range(1, len(got) + 1)), topic  # continuous across the kill: no gap, no reuse
    reference = TickPipeline(config(checkpoint, None, queries))  # the same ticks, never interrupted
    assert reference.ingest_message(encode(ticks)) == []
    reference.run_until_idle()
    expected = {}
    for stream in recovered:
        reference.engine.ask(reference.flash.job_for(reference.registry.get("dir"), stream, ticket=stream))
    for outcome in reference.engine.run_until_idle():
        expected[outcome.job.ticket] = outcome.answer.value["model_probs"]
    assert_same_answers(expected, recovered)


def ephemeral(checkpoint, tmp_path: Path) -> ServiceConfig:
    """A service config with the two test queries on ephemeral ports, no data directory."""
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    return ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}, "queries": str(queries),
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"}})


def test_a_subscriber_that_missed_answers_fills_its_gap_from_the_answers_op(checkpoint, tmp_path) -> None:
    """Answers a subscriber never got (PUB drops past a high-water mark, a reconnect): the next answer's seq
    shows the gap and the control op `answers` fills it, so the gapless client gets every answer once, in order."""
    from engine.service.server import HEARTBEAT_TOPIC

    cfg = ephemeral(checkpoint, tmp_path)
    ticks = SyntheticMarket(SyntheticConfig(seed=9)).next_batch(600)
    got: dict[str, list[int]] = {}
    with serving(cfg) as server, ControlClient(server.endpoints["control"]) as control, \
            GaplessSubscriber(server.endpoints["answers"], control) as answers, \
            FeedClient(server.endpoints["ingest"]) as feed:
        # message k answered and published: each message ends a group of every stream (8 topics); the engine is
        # not busy already while its last forward runs, and the server publishes after it
        computed = lambda k: (server.counters["answers_published"] == 8 * k  # noqa: E731
                              and set(server.pipeline.cache.seqs().values()) == {k})
        answers.wait_ready()
        feed.send(ticks[:200])
        wait_for(lambda: computed(1), timeout_s=60)
        receive_until_quiet(answers, got, quiet_s=0.5)
        sock = answers.subscriber._sock  # the client's SUB socket: away from the answers for a while, as a dropped
        # subscriber is; not from the heartbeats, whose last_seqs show the gap: a heartbeat missed too (the away
        # time spanning one, as under load it did) refetches every topic to its end, seq 3 too (counted in filled,
        # and not in missed once PUB delivers it), which is another path than this test's
        sock.setsockopt(zmq.SUBSCRIBE, HEARTBEAT_TOPIC.encode())
        sock.setsockopt(zmq.UNSUBSCRIBE, b"")
        time.sleep(0.2)
        feed.send(ticks[200:400])
        wait_for(lambda: computed(2), timeout_s=60)
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        sock.setsockopt(zmq.UNSUBSCRIBE, HEARTBEAT_TOPIC.encode())  # (still under b"": subscriptions are counted)
        time.sleep(0.2)
        feed.send(ticks[400:])
        wait_for(lambda: computed(3), timeout_s=60)
        receive_until_quiet(answers, got, quiet_s=1.0)
        published = {t: server.pipeline.cache.last_seq(t) for t in got}
    assert answers.filled > 0 and answers.unrecoverable == 0 and sum(answers.missed.values()) == answers.filled
    assert len(got) == 8 and got == {t: list(range(1, n + 1)) for t, n in published.items()}


def test_a_topic_first_met_past_its_first_answer_is_filled_from_when_the_subscriber_began(checkpoint,
                                                                                         tmp_path) -> None:
    """A new stream's first answers dropped before this client ever saw the topic (it had no last seq to show the
    gap): they were lost without a count. A subscriber that was there fills them; one started later takes only
    what came after it began (from now on, not the history); one resumed from saved seqs takes them all."""
    from engine.service.server import HEARTBEAT_TOPIC

    cfg = ephemeral(checkpoint, tmp_path)
    known = SyntheticMarket(SyntheticConfig(seed=9)).next_batch(100)
    new = [dataclasses.replace(t, stream="NEW") for t in SyntheticMarket(SyntheticConfig(seed=5)).next_batch(400)
           if t.stream == "SYN.A"][:40]
    got: dict[str, list[int]] = {}
    with serving(cfg) as server, ControlClient(server.endpoints["control"]) as control, \
            GaplessSubscriber(server.endpoints["answers"], control) as answers, \
            FeedClient(server.endpoints["ingest"]) as feed:
        published = lambda n: server.counters["answers_published"] == n  # noqa: E731
        answers.wait_ready()
        feed.send(known)
        wait_for(lambda: published(8), timeout_s=60)
        receive_until_quiet(answers, got, quiet_s=0.5)
        sock = answers.subscriber._sock  # away from the answers while the new stream's first answers go out, not
        # from the heartbeats: on a loaded machine the away time spans a heartbeat, and a heartbeat gap refetches
        # every topic (the NEW topics' 5th answer too, counted in filled), which is another path than this test's
        sock.setsockopt(zmq.SUBSCRIBE, HEARTBEAT_TOPIC.encode())
        sock.setsockopt(zmq.UNSUBSCRIBE, b"")
        time.sleep(0.2)
        for i in range(0, 20, 5):
            feed.send(new[i : i + 5])
            wait_for(lambda: published(8 + 2 * (i // 5 + 1)), timeout_s=60)
        sock.setsockopt(zmq.SUBSCRIBE, b"")
        sock.setsockopt(zmq.UNSUBSCRIBE, HEARTBEAT_TOPIC.encode())  # (still under b"": subscriptions are counted)
        time.sleep(0.2)
        with GaplessSubscriber(server.endpoints["answers"], control) as later, \
                GaplessSubscriber(server.endpoints["answers"], control, last_seqs={}) as resumed:
            later.wait_ready()
            resumed.wait_ready()
            feed.send(new[20:25])
            wait_for(lambda: published(8 + 10), timeout_s=60)
            receive_until_quiet(answers, got, quiet_s=1.0)
            got_later: dict[str, list[int]] = {}
            got_resumed: dict[str, list[int]] = {}
            receive_until_quiet(later, got_later, quiet_s=0.5)
            receive_until_quiet(resumed, got_resumed, quiet_s=0.5)
    assert got["dir/NEW/"] == got["nll/NEW/"] == [1, 2, 3, 4, 5]  # the first four filled, then PUB's fifth
    assert answers.filled == 8 and answers.unrecoverable == 0
    assert got_later == {"dir/NEW/": [5], "nll/NEW/": [5]} and later.filled == 0
    # the topics older than it were listed at its first heartbeat (op `topics`), known without a fetch each
    assert later.last_seq == {**{f"{q}/SYN.{s}/": 1 for q in ("dir", "nll") for s in "ABCD"},
                              "dir/NEW/": 5, "nll/NEW/": 5}
    # resumed with no saved seqs: every kept answer is owed, the older topics' too (found with the op `topics`)
    assert got_resumed == {"dir/NEW/": [1, 2, 3, 4, 5], "nll/NEW/": [1, 2, 3, 4, 5],
                           **{f"{q}/SYN.{s}/": [1] for q in ("dir", "nll") for s in "ABCD"}}


def test_a_resumed_subscriber_finds_topics_that_began_while_it_was_away(checkpoint, tmp_path, monkeypatch) -> None:
    """A topic that began while a client was away and published nothing since was never met: no answer on PUB
    showed its seq, so its answers were lost without a count. The op `topics` lists the topics published on with
    their last seq (a prefix narrows it, pages hold at most MAX_TOPICS_PER_REPLY); a resumed GaplessSubscriber
    fills those it has not met."""
    import engine.service.control_ops as control_ops_module

    monkeypatch.setattr(control_ops_module, "MAX_TOPICS_PER_REPLY", 3)  # pages of 3: the paging is exercised
    cfg = ephemeral(checkpoint, tmp_path)
    known = SyntheticMarket(SyntheticConfig(seed=9)).next_batch(100)
    new = [dataclasses.replace(t, stream="NEW") for t in SyntheticMarket(SyntheticConfig(seed=5)).next_batch(400)
           if t.stream == "SYN.A"][:20]
    got: dict[str, list[int]] = {}
    got_resumed: dict[str, list[int]] = {}
    with serving(cfg) as server, ControlClient(server.endpoints["control"]) as control, \
            FeedClient(server.endpoints["ingest"]) as feed:
        published = lambda n: server.counters["answers_published"] == n  # noqa: E731
        with GaplessSubscriber(server.endpoints["answers"], control) as first:
            first.wait_ready()
            feed.send(known)
            wait_for(lambda: published(8), timeout_s=60)
            receive_until_quiet(first, got, quiet_s=0.5)
            saved = dict(first.last_seq)
        for i in range(0, 20, 5):  # away: stream NEW begins, answers four times, and stops
            feed.send(new[i : i + 5])
            wait_for(lambda: published(8 + 2 * (i // 5 + 1)), timeout_s=60)
        with GaplessSubscriber(server.endpoints["answers"], control, last_seqs=saved) as resumed, \
                GaplessSubscriber(server.endpoints["answers"], control, ["dir/"], last_seqs={}) as dir_only:
            resumed.wait_ready()
            dir_only.wait_ready()
            receive_until_quiet(resumed, got_resumed, quiet_s=0.5)
            got_dir: dict[str, list[int]] = {}
            receive_until_quiet(dir_only, got_dir, quiet_s=0.1)
        listed = control.call("topics", prefix="dir/")
        pages, after = [], ""
        while not pages or pages[-1]["truncated"]:
            pages.append(control.call("topics", after=after))
            after = max(pages[-1]["topics"])
        with pytest.raises(ControlError, match='op "topics" takes "prefix" as str or nil'):
            control.call("topics", prefix=5)
    assert got == {f"{q}/SYN.{s}/": [1] for q in ("dir", "nll") for s in "ABCD"}
    assert got_resumed == {"dir/NEW/": [1, 2, 3, 4], "nll/NEW/": [1, 2, 3, 4]}
    assert resumed.filled == 8 and resumed.unrecoverable == 0
    assert set(got_dir) == {"dir/NEW/", *(f"dir/SYN.{s}/" for s in "ABCD")} and got_dir["dir/NEW/"] == [1, 2, 3, 4]
    assert listed["truncated"] and list(listed["topics"]) == ["dir/NEW/", "dir/SYN.A/", "dir/SYN.B/"]
    assert listed["topics"]["dir/NEW/"]["last_seq"] == 4 and listed["topics"]["dir/SYN.A/"]["last_seq"] == 1
    assert [len(p["topics"]) for p in pages] == [3, 3, 3, 1]
    every = {t: v for p in pages for t, v in p["topics"].items()}
    assert sorted(every) == sorted([*got, "dir/NEW/", "nll/NEW/"])
    assert all(type(v["answer_ts"]) is int for v in every.values())


def test_answers_fetched_ahead_of_pub_are_not_counted_missed(checkpoint, tmp_path) -> None:
    """A fetch can run ahead of answers PUB is still delivering (a client resuming from its saved seqs while they
    are in flight, a restart's heartbeat): those answers come once, and `missed` counts only what PUB never
    delivered (it counted every fetched answer, so an operator alerting on it saw drops after every restart)."""
    cfg = ephemeral(checkpoint, tmp_path)
    ticks = SyntheticMarket(SyntheticConfig(seed=9)).next_batch(200)
    topics = [f"{q}/SYN.{s}/" for q in ("dir", "nll") for s in "ABCD"]
    got: dict[str, list[int]] = {}
    with serving(cfg) as server, ControlClient(server.endpoints["control"]) as control, \
            GaplessSubscriber(server.endpoints["answers"], control, last_seqs=dict.fromkeys(topics, 0)) as answers, \
            FeedClient(server.endpoints["ingest"]) as feed:
        answers.subscriber.wait_ready()  # subscribed: PUB delivers everything published from here on
        for i in range(0, 200, 50):
            feed.send(ticks[i : i + 50])
        wait_for(lambda: server.counters["answers_published"] == 8 * 4, timeout_s=60)
        answers.wait_ready()  # fetches every topic after seq 0 first, while PUB's copies wait in the socket
        assert answers.filled == 8 * 4
        receive_until_quiet(answers, got, quiet_s=0.5)
    assert got == {t: [1, 2, 3, 4] for t in topics}
    assert not +answers.missed and answers.unrecoverable == 0, answers.missed


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports: each probe is held until all are taken (ports asked one after another, each
    released at once, came back the same twice under load, and the service refused two sockets on one port)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind(("127.0.0.1", 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()


def free_endpoints() -> dict[str, str]:
    """The three sockets' endpoints on distinct free ports (fixed: a restart binds the same ones)."""
    return {name: f"tcp://127.0.0.1:{port}" for name, port in zip(("ingest", "answers", "control"), free_ports(3))}


def restartable(checkpoint, tmp_path: Path, queries: bool = True, **sections: dict
                ) -> tuple[dict[str, str], ServiceConfig]:
    """A service config on fixed free ports (a restart binds the same ones, so clients reconnect by themselves),
    with a data directory, the two test queries (unless not ``queries``: a feed test that looks at what the engine
    takes and logs, not at answers, spares the probes and answers of 1,500-2,400 ticks) and 0.2 s heartbeats
    (``sections``: more config); and its endpoints."""
    (tmp_path / "q.yaml").write_text(QUERIES)
    endpoints = free_endpoints()
    return endpoints, ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
        **({"queries": str(tmp_path / "q.yaml")} if queries else {}),
        "log": {"dir": str(tmp_path / "data")}, "endpoints": endpoints, "limits": {"heartbeat_s": 0.2}, **sections})


def test_subscribers_that_stayed_connected_get_the_answers_owed_at_a_restart(checkpoint, tmp_path) -> None:
    """Ticks accepted but not answered when the service stopped are answered at its restart, right after it binds:
    a plain SUB that stayed connected gets them (they wait for subscribers to reconnect), and a GaplessSubscriber
    fetches whatever it missed as soon as a heartbeat shows the restart, without waiting for a topic's next answer
    (the streams here stay quiet after the restart)."""
    endpoints, cfg = restartable(checkpoint, tmp_path)
    ticks = SyntheticMarket(SyntheticConfig(seed=11)).next_batch(300)
    got: dict[str, list[int]] = {}
    plain: list[tuple[str, int]] = []
    with ControlClient(endpoints["control"], timeout_s=30) as control, \
            GaplessSubscriber(endpoints["answers"], control) as gapless, \
            AnswerSubscriber(endpoints["answers"], ["dir/"]) as sub:
        with serving(cfg) as server, FeedClient(endpoints["ingest"]) as feed:
            gapless.wait_ready()
            sub.wait_ready()
            feed.send(ticks[:100])
            wait_for(lambda: server.pipeline.ticks_in == 100 and not server.pipeline.engine.busy, timeout_s=60)
            receive_until_quiet(gapless, got, quiet_s=0.5)
            before = {t: server.pipeline.cache.last_seq(t) for t in got}
        while (message := sub.recv(timeout_s=0.2)) is not None:
            plain.append((message[0], message[1]["seq"]))
        backlog = TickPipeline(cfg)  # the stopped service had accepted these, and computed none of them
        for i in range(100, 300, 5):
            assert backlog.ingest_message(encode(ticks[i : i + 5])) == []
        backlog.close()
        with serving(cfg) as server:
            receive_until_quiet(gapless, got, quiet_s=2.0)
            while (message := sub.recv(timeout_s=0.5)) is not None:
                plain.append((message[0], message[1]["seq"]))
            published = {t: server.pipeline.cache.last_seq(t) for t in got}
    assert gapless.restarts_seen == 1 and gapless.unrecoverable == 0
    assert all(published[t] > before[t] for t in before)  # answers were owed on every topic
    assert got == {t: list(range(1, n + 1)) for t, n in published.items()}
    dir_topics = {t: n for t, n in published.items() if t.startswith("dir/")}
    assert sorted(plain) == sorted((t, seq) for t, n in dir_topics.items() for seq in range(1, n + 1))


class ListSource:
    """A finite Source of given ticks (connectors.source.Source's contract, without resuming)."""

    def __init__(self, ticks) -> None:
        self.ticks, self.at = ticks, 0

    def next_batch(self, max_ticks: int):
        batch = self.ticks[self.at : self.at + max_ticks]
        self.at += len(batch)
        return batch

    @property
    def done(self) -> bool:
        return self.at >= len(self.ticks)


def logged_ticks(data_dir: Path, held: bool = False) -> dict[str, list[int]]:
    """Each stream's logged tick times, in log order. ``held``: only those a restart replays, leaving out the items
    of a message whose end is not logged (message_ends.py: a copy of a live directory, like a kill, can cut one)."""
    from engine.service.log_reading import read
    from engine.service.message_ends import whole_messages

    records = [(number, msgpack.unpackb(payload, raw=False)) for number, payload in read(data_dir / "ticks")]
    out: dict[str, list[int]] = {}
    for _, record, unended, _ in whole_messages(records) if held else ((n, r, False, False) for n, r in records):
        if "tick" in record and not unended:
            out.setdefault(record["tick"]["stream"], []).append(record["tick"]["ts"])
    return out


# every server start_server started in this test: stopped at its end, should a failure come before its own stop
_started: list[tuple[Any, threading.Thread]] = []


@pytest.fixture(autouse=True)
def _no_server_outlives_its_test() -> Iterator[None]:
    """A wait_for that timed out on a loaded machine left its server serving for the rest of the run (three loops
    of earlier tests were found alive, idle in their poll, in a worker whose later test hung)."""
    yield
    while _started:
        server, thread = _started.pop()
        server.stop()
        thread.join(60)


def start_server(cfg: ServiceConfig):
    """A Server serving ``cfg`` in a thread, once ready; and the thread."""
    from engine.service.server import Server

    server = Server(cfg)
    server.bind()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _started.append((server, thread))
    server.ready.wait(30)
    return server, thread


def test_a_feed_waits_for_an_engine_that_restarts_before_its_first_heartbeat(checkpoint, tmp_path, capsys) -> None:
    """The engine goes down after the feed connected and before its first heartbeat came (the feed waits for one
    before it sends): the feed waits for it to come back, as for a restart mid-feed, and sends everything. (Before,
    it ended with "no heartbeat ...: is it the answers endpoint of a running `flashtick serve`?")"""
    from engine.service.feed_resume import ControlFeedResume

    endpoints, cfg = restartable(checkpoint, tmp_path, queries=False)
    ticks = SyntheticMarket(SyntheticConfig(seed=14)).next_batch(200)
    server, thread = start_server(cfg)
    resume = ControlFeedResume(lambda: ControlClient(endpoints["control"], timeout_s=5, connect_timeout_s=5))
    outcome: list = []

    def feed() -> None:
        try:
            outcome.append(run_feed(ListSource(ticks), client, batch=5, answers=endpoints["answers"], resume=resume,
                                    ready_timeout_s=1.0))
        except Exception as e:  # (said by the assertion below)
            outcome.append(e)

    with FeedClient(endpoints["ingest"], watch_connection=True) as client:
        time.sleep(0.5)  # connected (a drop is seen only on a connection that was made)
        server.stop()
        thread.join(30)
        feeder = threading.Thread(target=feed)
        feeder.start()
        time.sleep(2.0)  # past the feed's ready timeout, with no engine
        server, thread = start_server(cfg)
        feeder.join(120)
    resume.close()
    try:
        assert not feeder.is_alive() and outcome and not isinstance(outcome[0], Exception), outcome
        assert outcome[0].ticks == 200 and outcome[0].unconfirmed == 0 and resume.restarts == 1
        wait_for(lambda: server.pipeline.ticks_in >= 200, timeout_s=60)
    finally:
        server.stop()
        thread.join(30)
    assert "the engine's connection dropped (restart 1); it is back: sending 0 ticks again" in capsys.readouterr().err
    want: dict[str, list[int]] = {}
    for tick in ticks:
        want.setdefault(tick.stream, []).append(tick.ts)
    assert logged_ticks(tmp_path / "data") == want


def test_a_feed_stops_on_a_signal_while_its_engine_is_down(checkpoint, tmp_path, capsys) -> None:
    """A supervisor's SIGTERM to a feed whose engine is down (a reviewer's feed stayed alive, silent, until the
    engine came back): the wait for the engine says what it waits for, and a stop ends it within seconds."""
    from connectors.feed import EngineLost
    from engine.service.feed_resume import ControlFeedResume

    endpoints, cfg = restartable(checkpoint, tmp_path, queries=False)
    server, thread = start_server(cfg)
    stop = threading.Event()
    resume = ControlFeedResume(lambda: ControlClient(endpoints["control"], timeout_s=5, connect_timeout_s=1),
                               stop=stop)
    outcome: list = []

    def feed() -> None:
        try:
            outcome.append(run_feed(SyntheticMarket(SyntheticConfig(seed=15)), client, rate=200, batch=5,
                                    answers=endpoints["answers"], resume=resume, stop=stop))
        except Exception as e:  # (the one expected: EngineLost, said below)
            outcome.append(e)

    with FeedClient(endpoints["ingest"], watch_connection=True) as client:
        feeder = threading.Thread(target=feed)
        feeder.start()
        wait_for(lambda: server.pipeline.ticks_in >= 100, timeout_s=60)
        server.stop()
        thread.join(30)
        wait_for(lambda: "waiting up to 600 s for it to come back" in capsys.readouterr().err, timeout_s=30)
        stopped_at = time.monotonic()
        stop.set()
        feeder.join(30)
        waited = time.monotonic() - stopped_at
    resume.close()
    assert not feeder.is_alive() and waited < 10, waited
    assert isinstance(outcome[0], EngineLost) and "stopped by a signal while waiting" in str(outcome[0])


@pytest.mark.parametrize("when", ["mid-feed", "after-the-last-send", "after-the-last-send-with-refusals"])
def test_a_feed_resumes_with_no_tick_lost_or_repeated_when_the_engine_restarts(checkpoint, tmp_path, when) -> None:
    """The engine stops (as on SIGTERM) and starts again while a feed sends at 1,500 ticks/s, or once the feed has
    sent its last tick (unlimited rate: much of it still unread in the engine's queue): what was in flight never
    reached it, so the feed, told by its connection dropping, asks the engine that came back what it holds and sends
    each stream's missing ticks again; it ends only once the engine has taken every tick. The tick log then holds
    every tick once, in order. (Before, the feed sent on past a hole of what was in flight, or ended with it, and
    said it had sent everything.)"""
    from engine.service.feed_resume import ControlFeedResume

    endpoints, cfg = restartable(checkpoint, tmp_path, queries=False)
    # (1,500: the stop comes past 800 of them mid-feed, and 325 of SYN.A place the later tick; 3,000 computed the
    # same paths twice over, 4-6 s of CPU a case)
    ticks = SyntheticMarket(SyntheticConfig(seed=12)).next_batch(1500)
    start = functools.partial(start_server, cfg)
    server, thread = start()
    want: dict[str, list[int]] = {}
    refused = 0
    if when.endswith("refusals"):  # a later tick of SYN.A first: the file's older SYN.A ticks are refused, and counted
        from connectors.ticks import trade

        later = [t.ts for t in ticks if t.stream == "SYN.A"][300]
        with FeedClient(endpoints["ingest"]) as first:
            first.send(trade("SYN.A", later, 100.0, 1.0, "buy"))
        wait_for(lambda: server.pipeline.ticks_in == 1, timeout_s=30)
        want["SYN.A"] = [later]
        refused = sum(t.stream == "SYN.A" and t.ts < later for t in ticks)
    resume = ControlFeedResume(lambda: ControlClient(endpoints["control"], timeout_s=5, connect_timeout_s=5))
    stats: list = []
    with FeedClient(endpoints["ingest"], watch_connection=True) as client:
        feeder = threading.Thread(target=lambda: stats.append(run_feed(
            ListSource(ticks), client, rate=1500 if when == "mid-feed" else None, batch=5,
            answers=endpoints["answers"], resume=resume)))
        feeder.start()
        if when == "mid-feed":
            wait_for(lambda: server.pipeline.ticks_in >= 800, timeout_s=60)
        else:
            wait_for(lambda: client.ticks == len(ticks), timeout_s=60)
        server.stop()
        thread.join(30)
        server, thread = start()
        feeder.join(120)
    resume.close()
    try:
        assert not feeder.is_alive() and stats[0].ticks == len(ticks) and sum(stats[0].rejected.values()) == refused
        wait_for(lambda: server.pipeline.ticks_in >= len(ticks) + bool(refused) - refused, timeout_s=60)
    finally:
        server.stop()
        thread.join(30)
    # (how much is resent depends on timing: a clean stop reads what was queued at its ingest socket first, so
    # only messages sent while the service was down or not yet read when it closed come again)
    assert resume.restarts == 1 and stats[0].unconfirmed == 0
    for tick in ticks:
        if not (when.endswith("refusals") and tick.stream == "SYN.A" and tick.ts < want["SYN.A"][0]):
            want.setdefault(tick.stream, []).append(tick.ts)
    assert logged_ticks(tmp_path / "data") == want  # every tick once, in order: no hole, no repeat


def test_a_feed_resumes_with_no_tick_lost_or_repeated_after_its_streams_expired_for_idleness(checkpoint,
                                                                                                tmp_path) -> None:
    """The feed's streams go quiet past scheduler.stream_idle_s (a halted symbol) and the engine expires them (their
    counts go on with their kept contexts; a feed also reads a count begun afresh, a context given up). The feed
    goes on, the
    engine restarts mid-feed, and the feed still sends exactly what the engine lacks. (Before, the feed read the
    count as its own: it confirmed nothing after the expiry and, after the restart, sent again every tick since,
    a duplicate of each the engine held.)"""
    from engine.service.feed_resume import ControlFeedResume

    endpoints, cfg = restartable(checkpoint, tmp_path, queries=False, scheduler={"stream_idle_s": 0.5})
    # (1,600: 800 before the expiry and 800 after it, the restart 400 into them, past the first confirmation after
    # the expiry; 2,400 computed half as much again on the same paths)
    ticks = SyntheticMarket(SyntheticConfig(seed=13)).next_batch(1600)
    start = functools.partial(start_server, cfg)
    server, thread = start()
    resume = ControlFeedResume(lambda: ControlClient(endpoints["control"], timeout_s=5, connect_timeout_s=5))
    stats: list = []
    try:
        with FeedClient(endpoints["ingest"], watch_connection=True) as client, \
                ControlClient(endpoints["control"], timeout_s=5) as control:
            first = run_feed(ListSource(ticks[:800]), client, batch=5, answers=endpoints["answers"], resume=resume)
            assert first.unconfirmed == 0
            names = sorted({t.stream for t in ticks})
            # every stream expired (its count goes on with its kept context: review355 #7; it used to start afresh)
            wait_for(lambda: all(server.pipeline.encoders.expired(name) for name in names), timeout_s=90)
            assert all(held["ticks"] > 0 for held in control.call("streams", streams=names)["streams"].values())
            feeder = threading.Thread(target=lambda: stats.append(run_feed(
                ListSource(ticks[800:]), client, rate=1500, batch=5, answers=endpoints["answers"], resume=resume)))
            feeder.start()
            wait_for(lambda: server.pipeline.ticks_in >= 800 + 400, timeout_s=60)  # past a confirmation or two
            server.stop()
            thread.join(30)
            server, thread = start()
            feeder.join(120)
        assert not feeder.is_alive() and stats[0].ticks == 800 and stats[0].unconfirmed == 0
        assert resume.restarts == 1
    finally:
        resume.close()
        server.stop()
        thread.join(30)
    want: dict[str, list[int]] = {}
    for tick in ticks:
        want.setdefault(tick.stream, []).append(tick.ts)
    assert logged_ticks(tmp_path / "data") == want  # every tick once, in order: no hole, no repeat


def test_segments_too_small_for_every_session_start_with_counts_alone(checkpoint, tmp_path, capsys) -> None:
    """A segment start holding every stream's session could fill a small segment by itself (and roll the log at
    every tick): past a quarter of log.segment_bytes it keeps counts and codec states alone, and says so once."""
    base = config(checkpoint, tmp_path / "data", None)
    live = TickPipeline(dataclasses.replace(base, log=dataclasses.replace(base.log, segment_bytes=2048)))
    feed_in_steps(live, SyntheticMarket(SyntheticConfig(seed=6)).next_batch(600))
    stats = live.data.log.stats
    live.close()
    assert capsys.readouterr().err.count("too small to start with every stream's session") == 1
    logged = sum(f.stat().st_size for f in (tmp_path / "data" / "ticks").iterdir())
    assert len(list((tmp_path / "data" / "ticks").iterdir())) <= logged // 2048 + 2  # not a segment per tick
    assert stats.appended == 600 + 86  # each tick, and each message's end (86 of 7 ticks or 5: message_ends.py)


def test_health_and_metrics_say_starting_while_the_tick_log_replays(checkpoint, tmp_path) -> None:
    """The control socket and the metrics endpoint are bound before the model loads and the log replays (minutes
    for a long log): `health` answers "starting" meanwhile, other ops an error saying to try again, and a scrape
    finds the target up (serving 0, the phase), not down as after a crash; then "serving" and every family."""
    from engine.service.server import Server

    endpoints, cfg = restartable(checkpoint, tmp_path)
    metrics_port = free_port()
    # (not the default zero_bid: `health` says the config's reading, while starting too, not a constant. The stop
    # is not watched here: a 0.5 s drain_s, not the default 7 s of computing the owed tail of its ticks)
    cfg = dataclasses.replace(cfg, endpoints=dataclasses.replace(cfg.endpoints, metrics_port=metrics_port),
                              limits=dataclasses.replace(cfg.limits, zero_bid="price", drain_s=0.5))
    pipeline = TickPipeline(cfg)
    # a replay of 5,000 ticks lasts ~0.35 s on a CI core (as long as logging them): several polls of the loop
    # below (~50 ms apart) land in it, and one is all it needs (40,000, 20,000, then 10,000, were most of this
    # test's CPU)
    ticks = SyntheticMarket(SyntheticConfig(seed=13)).next_batch(5_000)
    for i in range(0, len(ticks), 500):
        assert pipeline.ingest_message(encode(ticks[i : i + 500])) == []
    pipeline.close()
    built: list[Server] = []
    abandon = threading.Event()

    def serve() -> None:
        built.append(Server(cfg))  # (its start, here, is what the test watches: start_server's comes ready)
        if abandon.is_set():  # the test ended while this start ran (the finally below found nothing to stop)
            built[0].stop()
        built[0].serve_forever()  # (binds ingest and answers itself: control was bound at the start)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    statuses, errors, phases, scrapes, raised = [], [], [], [], []
    try:
        with ControlClient(endpoints["control"], timeout_s=30) as control:
            while not statuses or statuses[-1] == "starting":
                health = control.call("health")
                statuses.append(health["status"])
                phases.append(health.get("phase"))
                assert health["protocol"] == 1 and isinstance(health["version"], str)  # starting or serving alike
                assert health["zero_bid"] == "price"  # a feed asking before the engine is up learns how 0 bids are read
                errors.append(control.request({"op": "stats"}))
                try:
                    control.call("streams", streams=[])
                except ControlError as e:  # what our own clients (`flashtick feed`) tell a start by
                    raised.append(e.reason)
                if health["status"] == "starting":  # (bound with control: up whenever health answers)
                    scrapes.append(scrape(f"http://127.0.0.1:{metrics_port}/metrics"))
                time.sleep(0.05)
        wait_for(lambda: built[0].ready.is_set(), timeout_s=30)
        served = scrape(f"http://127.0.0.1:{metrics_port}/metrics")
    finally:
        # on every path, as start_server's servers are: a failure above left this one serving (its ports and a
        # core) for the rest of the run. Setting `abandon` before looking at `built`, as serve() appends before
        # looking at `abandon`, means one of the two sees the other and stops it, whenever the start ends.
        abandon.set()
        if built:
            built[0].stop()
        thread.join(120)
    assert not thread.is_alive()
    assert statuses.count("starting") == len(statuses) - 1 and statuses[-1] == "serving"
    assert "the service is starting" in errors[0]["error"] and "try again" in errors[0]["error"]
    assert errors[0]["reason"] == "starting" and errors[-1]["ok"]  # (a client tells "send it again later" by it)
    assert raised and set(raised) == {"starting"}
    # and what it is doing (what a burst owes, forward by forward: test_a_restart_answers_a_backlog_...)
    # (the logs' reading says how far it is: "replaying the tick log: N of M bytes", review380 #6)
    phases = [p.split(": ", 1)[0] if p and p.startswith(("reading the answer log: ", "replaying the tick log: ")) else p
              for p in phases]
    assert "replaying the tick log" in phases and set(phases[:-1]) <= {
        "loading the model", "reading the answer log", "replaying the tick log",
        "computing the answers owed at each stream's latest tick"}
    # (the last scrape may come after the start ended: a scrape is either page, whole)
    starting = [s for s in scrapes if any(k.startswith("flashtick_starting{") for k in s)]
    assert starting and all(s["flashtick_serving"] == 0 and "flashtick_ticks_in_total" not in s for s in starting)
    assert 'flashtick_starting{phase="replaying the tick log"}' in {k for s in starting for k in s}
    assert served["flashtick_serving"] == 1 and not any(k.startswith("flashtick_starting") for k in served)
    assert served["flashtick_log_problem"] == 0
    # review412 #7: the counters count this process's live work from 0, the replay's apart (with retention the
    # replayed ticks were fewer than before the restart: a counter that went down, an increase of all of them)
    assert served["flashtick_ticks_in_total"] == 0 and served["flashtick_log_recovered_ticks"] == len(ticks)
    # (a log never answered is owed every message's answers, its tail computed once serving: what is left of it)
    assert 0 <= served["flashtick_owed_ticks"] <= len(ticks)
    assert abs(served["flashtick_process_start_time_seconds"] - scrapes[0]["flashtick_process_start_time_seconds"]
               ) < 1e-6 and served["flashtick_process_start_time_seconds"] < time.time()


def test_metrics_counters_leave_out_what_the_start_replayed() -> None:
    """Review412 #7: the rolls (and every scheduler and runner counter) a start's replay made were in the `_total`
    families too; they count from what the replay left, never below 0 (a shard restored mid-run counts again)."""
    from engine.service.metrics_text import render, replayed_counts

    replayed = replayed_counts({"ticks_in": 2371, "scheduler": {"rolls": 43}, "runner": {"forwards": 9}})
    text = render({"ticks_in": 2400, "scheduler": {"rolls": 45}, "runner": {"forwards": 5}, "replayed": replayed})
    assert "\nflashtick_ticks_in_total 29\n" in text and "\nflashtick_rolls_total 2\n" in text, text
    assert "\nflashtick_forwards_total 0\n" in text, text


def scrape(url: str) -> dict[str, float]:
    """A /metrics page's samples: series (name and labels, as written) -> value."""
    import urllib.request

    body = urllib.request.urlopen(url, timeout=10).read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in body.splitlines()
            if line and not line.startswith("#")}


def test_a_feed_launched_with_its_serve_waits_for_it_and_starts_after_the_ticks_it_holds(checkpoint, tmp_path,
                                                                                        capsys) -> None:
    """The README's `flashtick serve ... &` then `flashtick feed synthetic` at once, on a restart: the feed found no
    control socket yet, went ahead from "now", and a previous feed that ran ahead of the clock made 434 of its 600
    ticks ts_backwards. It now waits for the engine to serve, then starts after the ticks the engine holds."""
    from engine.service.cli import main

    endpoints, cfg = restartable(checkpoint, tmp_path, queries=False)
    service_yaml = tmp_path / "engine.yaml"
    service_yaml.write_text(f"endpoints: {json.dumps(endpoints)}\n")
    feed = ["feed", "synthetic", "--ticks", "200", "--rate", "20000", "--config", str(service_yaml)]
    server, thread = start_server(cfg)
    try:
        assert main(feed) == 0  # 200 ticks at 20,000/s: its event time runs far ahead of the clock
        wait_for(lambda: server.pipeline.ticks_in == 200, timeout_s=60)
    finally:
        server.stop()
        thread.join(30)
    capsys.readouterr()
    later: list = []
    starter = threading.Timer(3.0, lambda: later.append(start_server(cfg)))  # up after the feed's first try (2 s)
    starter.start()
    try:
        assert main(feed) == 0
        err = capsys.readouterr().err
        assert "flashtick feed synthetic: waiting for the engine before sending: no connection to" in err, err
        assert "rejected" not in err.split("sent 200 ticks", 1)[1].split("\n")[0].replace("; 0 rejected", ""), err
        starter.join(30)
        wait_for(lambda: later[0][0].pipeline.ticks_in == 400, timeout_s=60)
        assert sum(later[0][0].pipeline.rejected.values()) == 0
    finally:
        starter.join(30)
        for server, thread in later:
            server.stop()
            thread.join(30)


@contextlib.contextmanager
def file_size_limit(limit: int):
    """Every file of this process refuses writes past ``limit`` bytes (EFBIG), as a full disk refuses them: the
    real system limit (RLIMIT_FSIZE, its signal ignored so the write fails instead), lifted on exit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_answers_the_log_cannot_take_are_written_later_and_ticks_wait_meanwhile(checkpoint, tmp_path, capsys,
                                                                                monkeypatch) -> None:
    """An answer log that fails (its file at the disk's limit) while the tick log still takes ticks: new ticks are
    refused (log_unavailable) rather than accepted with answers that would go unlogged, the answers in flight are
    written once the log takes them again, and a restart then publishes nothing twice. (A reviewer's restart
    after a full disk published 2,229 answers again under seqs subscribers had seen.)"""
    import engine.service.answer_log as answer_log

    monkeypatch.setattr(answer_log, "RETRY_S", 0.0)
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    live = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    market = SyntheticMarket(SyntheticConfig(seed=9)).next_batch(90)
    feed_in_steps(live, market[:42])
    answers_file = max((tmp_path / "data" / "answers").glob("answers-*.log"))
    ticks_file = max((tmp_path / "data" / "ticks").glob("ticks-*.log"))
    assert answers_file.stat().st_size > ticks_file.stat().st_size + 1500  # (room for the next ticks)
    published = []
    with file_size_limit(answers_file.stat().st_size + 10):  # the answer log is full; the tick log is not
        assert live.ingest_message(encode(market[42:49])) == []  # accepted: its answers cannot be logged
        published += live.run_until_idle()
        assert published and live.data.answers.failing
        refused = live.ingest_message(encode(market[49:56]))
        assert {r["reason"] for r in refused} == {"log_unavailable"} and len(refused) == 7
        assert "cannot be written (is the disk full?); ticks are refused until it can" in refused[0]["error"]
        failed = live.data.answers.errors
        for _ in range(3):  # a retry that fails is a failed write too (RETRY_S: 0): counted, as stderr says it
            assert live.data.answers.failing
        assert live.data.answers.errors == failed + 3
    assert not live.data.answers.failing  # the log takes them again: the answers waiting are written, in order
    assert live.ingest_message(encode(market[49:56])) == []
    published += live.run_until_idle()
    err = capsys.readouterr().err
    assert "answers wait to be logged" in err and "answer log: writable again after" in err, err
    # and the ticks refused meanwhile, said once a tick is accepted again
    assert re.search(r"the answer log is writable again after \d+\.\d s; 7 ticks were refused meanwhile", err), err
    recovered = TickPipeline(config(checkpoint, crash_copy(tmp_path / "data", tmp_path / "after"), queries))
    assert recovered.recovered == []  # nothing owed: every answer published was logged
    assert recovered.cache.seqs() == live.cache.seqs()  # every topic goes on after the last seq published


def test_a_tick_log_writable_again_says_how_long_it_refused_and_how_many(checkpoint, tmp_path, capsys,
                                                                         monkeypatch) -> None:
    """After the "ticks refused (log_unavailable)" lines of a full disk, one line says when writing recovered, for
    how long and how many ticks were refused (a reviewer's log never said); every failed write is counted. A write
    that fits while the disk is still full (less than ROOM_BYTES free) does not end it (review412 #4)."""
    from engine.disk_full import free_bytes
    from engine.service import refusal_spell

    monkeypatch.setattr(refusal_spell, "ROOM_CHECK_S", 0.0)  # (the free space looked at each time, not each second)
    live = TickPipeline(config(checkpoint, tmp_path / "data"))
    market = SyntheticMarket(SyntheticConfig(seed=9)).next_batch(70)
    feed_in_steps(live, market[:49])
    ticks_file = max((tmp_path / "data" / "ticks").glob("ticks-*.log"))
    with file_size_limit(ticks_file.stat().st_size + 10):  # the disk is full: no tick fits
        for start in (49, 56):
            refused = live.ingest_message(encode(market[start : start + 7]))
            assert [r["reason"] for r in refused] == ["log_unavailable"] * 7
        assert live.stats()["log"]["append_errors"] == 14
        assert "writable again" not in capsys.readouterr().err
    with monkeypatch.context() as still_full:  # (the file system's free space now below the bound)
        still_full.setattr(refusal_spell, "ROOM_BYTES", free_bytes(tmp_path) + (1 << 40))
        assert live.ingest_message(encode(market[63:66])) == []
        assert "writable again" not in capsys.readouterr().err
    assert live.ingest_message(encode(market[66:70])) == []
    err = capsys.readouterr().err
    assert len(re.findall(r"flashtick: the tick log is writable again after \d+\.\d s; 14 ticks were refused "
                          r"meanwhile \(log_unavailable", err)) == 1, err
    assert live.ingest_message(encode(market[63:70])) != [] and "writable again" not in capsys.readouterr().err
    live.close()


def test_a_restart_after_a_stop_with_unlogged_answers_says_what_it_publishes_again(checkpoint, tmp_path, capsys,
                                                                                   monkeypatch) -> None:
    """A stop while answers waited to be logged (a file size limit): the restart publishes them again, under the
    same seqs. A stream whose first answers went unlogged is computed from its first tick, as the others from their
    last logged answer, and the restart's line counts it with them (it once said "owed: 1 answer due on 2 ticks of
    1 stream" and then sent two answers on two streams)."""
    import engine.service.answer_log as answer_log

    monkeypatch.setattr(answer_log, "RETRY_S", 1e9)  # the log never takes them again before the stop
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    live = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    market = SyntheticMarket(SyntheticConfig(seed=9)).next_batch(49)
    feed_in_steps(live, market[:42])
    answers_file = max((tmp_path / "data" / "answers").glob("answers-*.log"))
    with file_size_limit(answers_file.stat().st_size + 10):
        message = [dataclasses.replace(t, stream="NEW") if t.stream == "SYN.A" else t for t in market[42:49]]
        assert live.ingest_message(encode(message)) == []  # NEW's first answers, and SYN.D's next, go unlogged
        unlogged = live.run_until_idle()
        live.close()
    assert {a.stream for a in unlogged} == {"NEW", "SYN.D"}
    assert f"{len(unlogged)} published answers could not be logged" in capsys.readouterr().err
    recovered = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    again = [o.answer for o in recovered.recovered if o.answer is not None]
    assert [(a.topic, a.seq) for a in again] == [(a.topic, a.seq) for a in unlogged]  # the same seqs
    said = re.search(r"computing what was owed: (\d+) answers due on \d+ ticks of 2 streams accepted but not yet "
                     r"answered", capsys.readouterr().err)
    assert said and int(said[1]) == len(again)
    recovered.close()


def test_a_start_on_a_data_directory_whose_tick_log_was_removed_says_so(checkpoint, tmp_path, capsys) -> None:
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    live = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    feed_in_steps(live, SyntheticMarket(SyntheticConfig(seed=5)).next_batch(40))
    after = crash_copy(tmp_path / "data", tmp_path / "after")
    for segment in (after / "ticks").glob("ticks-*.log"):
        segment.unlink()
    capsys.readouterr()
    recovered = TickPipeline(config(checkpoint, after, queries))
    err = capsys.readouterr().err
    streams = sorted(live.engine.scheduler.streams)
    assert f"the answer log has answers of {len(streams)} streams the tick log holds nothing of (\"{streams[0]}\"" \
           in err and "were tick log segments" in err, err
    assert recovered.cache.get("dir", streams[0]) is not None and not recovered.engine.scheduler.streams


def test_a_subscriber_starts_over_when_the_services_seqs_do(checkpoint, tmp_path) -> None:
    """A service without a data directory numbers its answers from 1 at each start, under a new epoch. A reviewer's
    subscriber, live through such a restart, took the new seqs for duplicates of the old ones and dropped nearly
    every answer, saying none was missed; one resumed from seqs saved under the old epoch delivered none. The epoch
    (heartbeats, published answers, `health`) tells them apart: both start over and get every answer once."""
    cfg = ephemeral(checkpoint, tmp_path)
    market = SyntheticMarket(SyntheticConfig(seed=9)).next_batch(300)
    got: dict[str, list[int]] = {}
    with contextlib.ExitStack() as clients:
        with serving(cfg) as first:
            endpoints = dict(first.endpoints)
            control = clients.enter_context(ControlClient(endpoints["control"], timeout_s=10))
            live = clients.enter_context(GaplessSubscriber(endpoints["answers"], control))
            live.wait_ready()
            with FeedClient(endpoints["ingest"]) as feed:
                for i in range(3):  # three messages: every topic answers seqs 1, 2, 3
                    feed.send(market[i * 50 : (i + 1) * 50])
                    wait_for(lambda: set(first.pipeline.cache.seqs().values()) == {i + 1}, timeout_s=60)
            topics = set(first.pipeline.cache.seqs())
            receive_until_each_has(live, got, topics, 3)
            old_epoch, saved = live.epoch, dict(live.last_seq)
        assert old_epoch is not None and got and all(seqs == [1, 2, 3] for seqs in got.values())
        again = dataclasses.replace(cfg, endpoints=dataclasses.replace(
            cfg.endpoints, **{k: endpoints[k] for k in ("ingest", "answers", "control")}))
        with serving(again) as second:  # the same endpoints, no data directory: seqs from 1 again
            assert second.epoch != old_epoch
            with FeedClient(endpoints["ingest"]) as feed:
                for i in range(2):
                    feed.send(market[150 + i * 50 : 150 + (i + 1) * 50])
                    wait_for(lambda: set(second.pipeline.cache.seqs().values()) == {i + 1}, timeout_s=60)
            after: dict[str, list[int]] = {}
            receive_until_each_has(live, after, topics, 2)
            with GaplessSubscriber(endpoints["answers"], control, last_seqs=saved, epoch=old_epoch) as resumed:
                resumed.wait_ready()
                from_saved: dict[str, list[int]] = {}
                receive_until_each_has(resumed, from_saved, topics, 2)
    assert live.epoch == resumed.epoch == second.epoch and live.epochs_seen == resumed.epochs_seen == 1
    assert after == from_saved == {topic: [1, 2] for topic in got}


def test_a_removed_tick_log_stays_a_problem_until_a_restart(checkpoint, tmp_path) -> None:
    """`health` read the problem off the last refusal's time: 10 s after it, with no tick since, a service that
    would refuse every tick until restarted said serving again. A latched log stays the problem."""
    live = TickPipeline(config(checkpoint, tmp_path / "data"))
    feed_in_steps(live, SyntheticMarket(SyntheticConfig(seed=5)).next_batch(14))
    assert live.data.items.problem is None
    shutil.rmtree(tmp_path / "data")
    live.data.check()  # the heartbeat's check
    assert "until the service restarts" in live.data.items.problem
    live.data._refused = None  # (as if the last refusal were long ago)
    assert "no tick is accepted until the service restarts" in live.data.items.problem


def test_a_moved_data_directory_is_a_problem_and_no_tick_goes_where_a_restart_does_not_read(checkpoint,
                                                                                        tmp_path) -> None:
    """`mv data elsewhere` under a live service went unnoticed: the ticks went on into the moved folder, and a
    restart on the configured path started empty. Now health says it and ticks are refused, as for a removal."""
    live = TickPipeline(config(checkpoint, tmp_path / "data"))
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(15)
    feed_in_steps(live, ticks[:14])
    logged = live.data.log.next_record
    (tmp_path / "data").rename(tmp_path / "moved")
    live.data.check()  # the heartbeat's check
    assert "was the data directory moved or renamed?" in live.data.items.problem
    refused = live.ingest_message(encode(ticks[14:]))
    assert [r["reason"] for r in refused] == ["log_unavailable"] and "moved or renamed" in refused[0]["error"], refused
    assert live.data.log.next_record == logged
    live.close()


def test_the_folders_made_above_the_default_data_directory_are_the_owner_s_alone(checkpoint, tmp_path,
                                                                                  monkeypatch) -> None:
    """A first `serve` made ~/.local/state and ~/.local/state/flashtick 0755 around its 0700 data directory; the XDG
    base directory spec asks for 0700 on a state directory a program makes. Each folder it makes is 0700; one the
    user had is left as it was."""
    from engine.service.cmd_serve import default_data_dir

    (tmp_path / "home").mkdir(mode=0o755)
    (tmp_path / "home").chmod(0o755)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "home" / "state"))
    data = default_data_dir("flashtick-tick")
    TickPipeline(config(checkpoint, data)).close()
    made = [tmp_path / "home" / "state", tmp_path / "home" / "state" / "flashtick", data]
    assert [folder.stat().st_mode & 0o777 for folder in made] == [0o700] * 3
    assert (tmp_path / "home").stat().st_mode & 0o777 == 0o755


def test_the_data_directory_is_the_owner_s_alone(checkpoint, tmp_path, capsys) -> None:
    """The tick log was -rw-r--r-- in a drwxr-xr-x directory: on a shared host anyone read the desk's ticks. A data
    directory the service makes is 0700 and its tick log files 0600; one the user made wider is said, not changed."""
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    pipeline = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    feed_in_steps(pipeline, SyntheticMarket(SyntheticConfig(seed=2)).next_batch(20))
    pipeline.close()
    assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700
    segments = list((tmp_path / "data" / "ticks").iterdir())
    assert segments and all(p.stat().st_mode & 0o077 == 0 for p in segments if p.suffix == ".log"), segments
    # and every folder and small file beside them (the registered queries, their state, the answers' checkpoint)
    parts = {str(p.relative_to(tmp_path / "data")): p.stat().st_mode & 0o777 for p in (tmp_path / "data").rglob("*")}
    assert {"ticks", "answers", "queries.yaml", "queries.state.json", "meta.json", "epoch", "lock"} <= parts.keys()
    assert {name: mode for name, mode in parts.items() if mode & 0o077} == {}
    assert "is open to other users" not in capsys.readouterr().err
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    wide.chmod(0o755)
    TickPipeline(config(checkpoint, wide, queries)).close()
    assert wide.stat().st_mode & 0o777 == 0o755  # the user's folder: not changed
    assert f"flashtick: note: data directory {wide} can be listed by other users of this host (mode 755): they see " \
           f"its files' names, not what its files hold (each is the owner's alone)" in capsys.readouterr().err


@pytest.mark.parametrize("mode", [0o777, 0o1777])
def test_a_data_directory_every_user_can_write_to_is_refused_before_anything_is_written(checkpoint, tmp_path,
                                                                                      mode) -> None:
    """review207: `--data-dir D` of mode 777 got a note that its queries "can be read" (every file is 0600) and
    nothing of the real risk: another user renamed queries.yaml away, wrote their own, and the next start served
    the planted query. Such a folder is refused now, the sticky bit's too (it keeps the files there from being
    replaced, not the ones a start makes later, queries.yaml.tmp, from being planted), and nothing is written to
    it."""
    from engine.service.config import ConfigError

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    with pytest.raises(ConfigError, match=rf"^log.dir {shared}: every user of this host can ") as refused:
        TickPipeline(config(checkpoint, shared))
    planted = ("the sticky bit keeps them from replacing the files there, not from planting one a start writes and "
               "renames into place (queries.yaml.tmp), so a start can serve queries they planted" if mode & 0o1000 else
               "any of them can replace its queries.yaml, tick and answer logs or lock with their own, and a start "
               "serves the queries and replays the ticks they planted")
    assert f"{planted} (mode {mode:o}); `chmod 700 {shared}` keeps it to you" in str(refused.value), refused.value
    assert list(shared.iterdir()) == [] and shared.stat().st_mode & 0o7777 == mode  # nothing written, not changed


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder another user's group (chown) needs root")
def test_a_data_directory_a_group_can_write_to_is_warned_of_unless_the_group_is_the_owner_s_own(checkpoint, tmp_path,
                                                                                                capsys) -> None:
    """review207: modes 755, 775 and 777 got the same note. A group with other members that can write to the folder
    can plant queries as anyone could: warned of, naming the group; the owner's own group (root's here, as a umask of
    002 makes on Debian and Ubuntu) lets no one else in: only the listing is said, as for 755."""
    for name, gid, said in (("team", 54321, "warning: data directory {d} can be written by the members of group "
                                            "54321 (mode 775): any of them can replace its queries.yaml"),
                            ("own", os.getgid(), "note: data directory {d} can be listed by other users of this host "
                                                 "(mode 775)")):
        folder = tmp_path / name
        folder.mkdir()
        folder.chmod(0o775)
        os.chown(folder, -1, gid)
        TickPipeline(config(checkpoint, folder)).close()
        err = capsys.readouterr().err
        assert f"flashtick: {said.format(d=folder)}" in err and err.count(f"data directory {folder}") == 1, err
    (tmp_path / "own" / "meta.json").chmod(0o644)  # made readable by hand: named
    (tmp_path / "own").chmod(0o750)  # the owner's own group may list it: nothing to say
    TickPipeline(config(checkpoint, tmp_path / "own")).close()
    assert "data directory" not in capsys.readouterr().err
    (tmp_path / "own").chmod(0o755)
    TickPipeline(config(checkpoint, tmp_path / "own")).close()
    assert "they see its files' names, and can read meta.json; `chmod 700" in capsys.readouterr().err


def test_a_queries_file_a_start_refuses_leaves_no_data_directory_behind(checkpoint, tmp_path) -> None:
    """`serve --queries empty.yaml` (queries: []) was refused after the data directory was made: its epoch, lock,
    meta.json, ticks/ and answers/ stayed behind. The file is read and checked first now; so is one with a bad
    query."""
    from queries.spec import QuerySpecError

    for name, text in (("empty.yaml", "queries: []\n"),
                       ("bad.yaml", "queries: [{name: x, streams: ['*'], kind: choice, question: nosuch_5}]\n")):
        (tmp_path / name).write_text(text)
        with pytest.raises(QuerySpecError, match=rf"{tmp_path / name}"):
            TickPipeline(config(checkpoint, tmp_path / "data", tmp_path / name))
        assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("part", ["ticks", "answers", "meta.json"])
def test_a_data_directory_part_that_is_the_wrong_kind_is_named(checkpoint, tmp_path, part) -> None:
    """`mkdir d && touch d/ticks; serve --data-dir d` said only `[Errno 17] File exists: 'd/ticks'`."""
    from engine.service.config import ConfigError

    data = tmp_path / "d"
    data.mkdir()
    if part == "meta.json":
        (data / part).mkdir()
        what = "is a folder where the data directory keeps a file"
    else:
        (data / part).touch()
        what = "is a file where the data directory keeps a folder"
    with pytest.raises(ConfigError, match=rf"log.dir {data}: {data / part} {what} \(.*move what is in the way"):
        TickPipeline(config(checkpoint, data))
    (data / part).unlink() if part != "meta.json" else (data / part).rmdir()
    TickPipeline(config(checkpoint, data)).close()  # the lock was let go


def test_damaged_records_of_a_data_directory_are_named_with_the_way_on(checkpoint, tmp_path, capsys) -> None:
    """review392 #8: an empty meta.json (what a host crash leaves where data is not journalled) stopped the start with
    the JSON parser's "Expecting value: line 1 column 1 (char 0)", a garbled answers/state.msgpack with msgpack's
    "unpack(b) received extra data": no file named. Each is refused naming its file and the way on; with
    log.skip_corrupt the answer log's records are read alone under a new epoch; a damaged written_with.json (only
    notes) is said and written again."""
    from engine.service.config import ConfigError

    data = tmp_path / "d"
    TickPipeline(config(checkpoint, data)).close()
    epoch, meta = (data / "epoch").read_text(), (data / "meta.json").read_bytes()
    (data / "meta.json").write_bytes(b"")
    with pytest.raises(ConfigError, match=rf"data directory {data}: meta.json is damaged \(JSONDecodeError: .*, 0 "
                                          r"bytes; .*Restore it from a backup, or, when this start's model is"
                                          r".*write \{\} in it"):
        TickPipeline(config(checkpoint, data))
    (data / "meta.json").write_text("{}")  # the way on it names: this start records its own
    TickPipeline(config(checkpoint, data)).close()
    assert json.loads((data / "meta.json").read_bytes()) == json.loads(meta)
    (data / "answers" / "state.msgpack").write_bytes(msgpack.packb({"covers": 0}) + b"\x00garbage")
    with pytest.raises(ConfigError, match=r"answers/state.msgpack is damaged \(ExtraData: .*log.skip_corrupt: true"):
        TickPipeline(config(checkpoint, data))
    (data / "written_with.json").write_text('{"release": ')
    capsys.readouterr()
    skipping = config(checkpoint, data)
    TickPipeline(dataclasses.replace(skipping, log=dataclasses.replace(skipping.log, skip_corrupt=True))).close()
    said = capsys.readouterr().err
    assert "answers/state.msgpack is damaged (ExtraData" in said and "written_with.json is damaged" in said, said
    assert (data / "epoch").read_text() != epoch  # a subscriber holding seqs is told to start over
    assert (data / "answers" / "state.msgpack.damaged").is_file()  # moved aside: the next start reads the log alone
    TickPipeline(config(checkpoint, data)).close()
    assert json.loads((data / "written_with.json").read_text())["release"]  # written again


def test_a_folder_of_the_users_files_is_refused_as_a_data_directory_and_left_as_it_was(checkpoint, tmp_path) -> None:
    """`serve --data-dir .` in the folder of the desk's config, queries file and tick files was taken: the service
    made its lock, meta.json, epoch, ticks/ and answers/ among them and took the user's queries.yaml as its registry
    file, rewritten at the next register. A folder holding files and no meta.json is refused, naming some, with
    nothing written in it; an empty one, one a start began (its lock alone) and a data directory are taken."""
    from engine.service.config import ConfigError

    desk = tmp_path / "desk"
    desk.mkdir()
    (desk / "queries.yaml").write_text(QUERIES)
    (desk / "engine.yaml").write_text("log: {enabled: true}\n")
    (desk / "trades.csv").write_text("ts,price,size\n1,100.0,1\n")
    before = {p.name: p.read_bytes() for p in desk.iterdir()}
    with pytest.raises(ConfigError, match=rf"log.dir {desk}: an existing folder that is no flashtick data directory "
                                          rf"\(no meta.json\): it holds engine.yaml, queries.yaml, trades.csv; the "
                                          rf"service would write queries.yaml"):
        TickPipeline(config(checkpoint, desk, desk / "queries.yaml"))
    assert {p.name: p.read_bytes() for p in desk.iterdir()} == before
    for made in ("empty", "begun", "data"):
        (tmp_path / made).mkdir()
    (tmp_path / "begun" / "lock").touch()  # a start killed before it wrote meta.json
    TickPipeline(config(checkpoint, tmp_path / "data", desk / "queries.yaml")).close()
    for folder in ("empty", "begun", "data"):  # (data: again, a data directory now, its queries.yaml its own)
        TickPipeline(config(checkpoint, tmp_path / folder)).close()
        assert (tmp_path / folder / "meta.json").is_file()


@pytest.mark.parametrize("kept", ["nothing", "a truncated log"])
def test_a_feed_whose_engine_restarts_having_kept_less_says_what_was_lost(checkpoint, tmp_path, capsys,
                                                                          kept) -> None:
    """The engine restarts mid-feed without all the ticks it had taken and confirmed: a new data directory (it holds
    none), or its tick log as it was earlier in the feed (each stream's last tick went back: the feed places it by
    it, ControlFeedResume._rebased). The feed had let the confirmed ticks go, so it cannot send them again; it
    sends what the engine lacks of the rest, and its closing line adds up: the ticks sent are those the engine
    holds and those the restart lost, which it says. (The truncated log's loss went unsaid and uncounted.)"""
    from engine.service.feed_resume import ControlFeedResume

    endpoints, cfg = restartable(checkpoint, tmp_path, queries=False)
    # (the restart at 1,000: 500 sent after it; 2,000 with the restart at 1,200 computed a third more, same paths)
    ticks = SyntheticMarket(SyntheticConfig(seed=16)).next_batch(1500)
    server, thread = start_server(cfg)
    resume = ControlFeedResume(lambda: ControlClient(endpoints["control"], timeout_s=5, connect_timeout_s=5),
                               confirm_every_s=0.2)
    stats: list = []
    with FeedClient(endpoints["ingest"], watch_connection=True) as client:
        feeder = threading.Thread(target=lambda: stats.append(run_feed(
            ListSource(ticks), client, rate=1500, batch=5, answers=endpoints["answers"], resume=resume)))
        feeder.start()
        if kept == "a truncated log":
            wait_for(lambda: server.pipeline.ticks_in >= 300, timeout_s=60)
            shutil.copytree(tmp_path / "data", tmp_path / "new")  # (a torn tail is cut at the start)
        wait_for(lambda: server.pipeline.ticks_in >= 1000, timeout_s=60)  # past confirmations of later ticks
        server.stop()
        thread.join(30)
        server, thread = start_server(dataclasses.replace(cfg, log=dataclasses.replace(cfg.log,
                                                                                       dir=str(tmp_path / "new"))))
        feeder.join(120)
    resume.close()
    try:
        assert not feeder.is_alive() and stats and stats[0].ticks == len(ticks) and stats[0].unconfirmed == 0, stats
        assert resume.restarts == 1 and sum(stats[0].rejected.values()) == 0
    finally:
        server.stop()
        thread.join(30)
    lost = {name: int(n) for n, name in re.findall(r"the engine holds (\d+) fewer ticks of \"([^\"]+)\" than it had "
                                                   r"confirmed", capsys.readouterr().err)}
    # as the engine holds them: the copy may cut a message of 5 ticks, whose part it does not replay (nor count)
    held = logged_ticks(tmp_path / "new", held=True)
    for name in {t.stream for t in ticks}:
        sent = [t.ts for t in ticks if t.stream == name]
        assert len(held.get(name, [])) + lost.get(name, 0) == len(sent), (name, lost)
        assert held.get(name, []) == sorted(set(held.get(name, []))) and set(held.get(name, [])) <= set(sent)
    assert lost and stats[0].lost == sum(lost.values())
    assert f"; {stats[0].lost:,} ticks the engine had taken lost with a restart that did not keep them" in \
        stats[0].summary()


def test_a_failure_of_the_loop_itself_is_said_with_its_traceback_exits_70_and_counts_as_a_crash(
        checkpoint, tmp_path, capsys) -> None:
    """review435 #0: an error escaping the serving loop (not an engine step's, which is counted and served past) was
    one line, `ERROR: 'MY.005'`, exit 2 (which the documented systemd unit does not restart), and the lock said a
    clean stop, so the next start counted no crash. Now: the traceback in the log, ServiceFailed (status 70), the
    lock left as a running service's, and the next start recovers every accepted tick and says the unclean stop. (A
    heartbeat made to fail stands in for the bug: the loop's own code, around the real server.)"""
    from engine.service.exit_codes import SERVICE_FAILED, status_of_error
    from engine.service.server import Server
    from engine.service.server_failure import ServiceFailed

    class FailingHeartbeat(Server):
        def _heartbeat(self) -> None:
            if self.pipeline.ticks_in >= 40:
                raise KeyError("MY.005")
            super()._heartbeat()

    cfg = dataclasses.replace(ephemeral(checkpoint, tmp_path), log=config(checkpoint, tmp_path / "data").log,
                              limits=dataclasses.replace(ephemeral(checkpoint, tmp_path).limits, heartbeat_s=0.05))
    server = FailingHeartbeat(cfg)
    server.bind()
    failed: list[BaseException] = []
    thread = threading.Thread(target=lambda: _record_failure(server.serve_forever, failed), daemon=True)
    thread.start()
    assert server.ready.wait(60)
    with FeedClient(server.endpoints["ingest"]) as feed:
        feed.send(SyntheticMarket(SyntheticConfig(seed=3)).next_batch(40))
    thread.join(60)
    assert not thread.is_alive() and len(failed) == 1 and isinstance(failed[0], ServiceFailed), failed
    assert status_of_error(failed[0]) == SERVICE_FAILED == 70
    err = capsys.readouterr().err
    assert "flashtick: ERROR: the service failed (a bug; the traceback follows" in err
    assert "flashtick: ERROR:   Traceback (most recent call last):" in err and "KeyError: 'MY.005'" in err
    restarted = TickPipeline(config(checkpoint, tmp_path / "data"))
    try:
        assert restarted.ticks_in == 40  # every accepted tick, from the log
    finally:
        restarted.close()
    assert "WARNING: recovering after an unclean stop" in capsys.readouterr().err


def _record_failure(run: Callable[[], None], failed: list[BaseException]) -> None:
    try:
        run()
    except BaseException as e:  # (the test thread reads it)
        failed.append(e)
