"""A feed whose stream names churn (option series, new listings: names that tick a few times and never again) holds
bounded state: expired streams' ordering guards past scheduler.expired_streams_kept are forgotten everywhere (the
encoders, the answer side, the tick log's segment starts, answers/state.msgpack), the tick log never rolls at every
tick, and a restart recovers every accepted tick as the live run held it (review351 #1, #3)."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections import deque
from pathlib import Path

import msgpack
import pytest

from conftest import tiny_tick_checkpoint
from connectors.ticks import encode, trade
from engine.service.log_format import segments
from engine.service.log_reading import segment_first_record
from engine.service.pipeline import TickPipeline
from engine.service.segment_starts import SEGMENT_START_SHARE
from engine.service.ticklog import SEGMENT_START
from test_durability import QUERIES, config, crash_copy, sessions

T0 = 1_700_000_000_000_000_000
KEPT = 40  # scheduler.expired_streams_kept here
SEGMENT_BYTES = 32768


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"), max_position_embeddings=256)


def churned(checkpoint, data_dir: Path, queries: Path, **log) -> TickPipeline:
    base = config(checkpoint, data_dir, queries)
    return TickPipeline(dataclasses.replace(
        base, scheduler=dataclasses.replace(base.scheduler, stream_idle_s=0.01, expired_streams_kept=KEPT),
        log=dataclasses.replace(base.log, segment_bytes=SEGMENT_BYTES, answers_segment_bytes=SEGMENT_BYTES,
                                **log)))


def churn(live: TickPipeline, rounds: int, per_round: int, first: int = 0) -> int:
    """``rounds`` of ``per_round`` new names with two ticks each, expired after each round; returns the ticks."""
    n = 0
    for r in range(rounds):
        batch = []
        for k in range(per_round):
            name = f"OPT{first + r * per_round + k:06d}"
            ts = T0 + (r * per_round + k) * 1000
            batch += [trade(name, ts, 100.0, 1.0, "buy"), trade(name, ts + 1, 100.5, 1.0, "sell")]
        assert live.ingest_message(encode(batch)) == []
        while live.step() is not None:
            pass
        time.sleep(0.02)  # (past stream_idle_s)
        assert len(live.expire_idle()) == per_round
        n += len(batch)
    return n


def start_records(ticks: Path) -> list[bytes]:
    """Each segment's start record (the first segment has none)."""
    firsts = [segment_first_record(path) for _, path in segments(ticks, "ticks")]
    return [record for record in firsts if record is not None and SEGMENT_START in msgpack.unpackb(record, raw=False)]


def test_churned_names_leave_bounded_state_in_every_container_and_a_restart_recovers_every_tick(checkpoint,
                                                                                                tmp_path) -> None:
    """2,000 names that tick twice and expire: the guards kept are the KEPT newest, the rest forgotten with their
    `seq`s, trigger state and topics' seqs; each segment's start record holds at most them, within its share of
    the segment; state.msgpack stays small. A restart recovers every tick and the same guards.

    review353 #5 (merged here from its own churn of 1,000 names, which computed the same paths): memory grew ~8 KB
    a name ever seen. The registry's cache of the queries each stream matches kept every name (a forgotten stream's
    topics were looked up through it after its expiry dropped it), and the answers kept for the `answers` op held a
    deque a topic. After the churn every container in the pipeline names at most the KEPT streams whose guards stay
    (log.answers_keep: at most that many answers)."""
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    live = churned(checkpoint, tmp_path / "data", queries, answers_keep=KEPT)
    ticks = churn(live, rounds=100, per_round=20)

    accepted = live.encoders.accepted()  # every name held or whose guard is kept: the KEPT most recent
    assert sorted(accepted) == [f"OPT{k:06d}" for k in range(2000 - KEPT, 2000)]
    assert live.encoders.expired_forgotten == 2000 - KEPT
    assert len(live.cache.seqs()) <= 2 * KEPT  # two per-stream topics a name (dir, nll), of the names kept
    assert all(len(per_stream) <= KEPT for per_stream in live.registry._fired.values())
    stats = live.stats()
    assert stats["expired_streams_held"] == KEPT and stats["expired_streams_forgotten"] == 2000 - KEPT
    counts = containers_naming(live, {f"OPT{k:06d}" for k in range(2000)})
    assert counts, "the walk found no per-stream container at all: it no longer reaches the pipeline's state"
    for walked in ("._expired_last_ts", "._all", "cache._seq", "sequences._run"):
        assert any(path.endswith(walked) for path in counts), (walked, counts)
    over = {path: n for path, n in counts.items() if n > KEPT}
    assert over == {}, f"holding more than scheduler.expired_streams_kept={KEPT} of 2,000 expired names: {over}"
    assert live.history.after(f"dir/OPT{1999:06d}/", 0, 10)[0], "the newest answers are still served"

    records = start_records(tmp_path / "data" / "ticks")
    assert len(records) >= 4  # (rolled: the starts written at each roll are what is checked)
    for record in records:
        assert len(record) <= SEGMENT_BYTES // SEGMENT_START_SHARE
        starts = msgpack.unpackb(record, raw=False)[SEGMENT_START]
        assert sum(start[0] == 0 for start in starts.values()) <= KEPT  # expired: only the guards kept
        assert len(starts) <= KEPT + 20  # (and the round's names held at the roll)
    logged = sum(path.stat().st_size for _, path in segments(tmp_path / "data" / "ticks", "ticks"))
    assert len(records) <= logged // SEGMENT_BYTES + 2  # not a segment every few ticks
    state = tmp_path / "data" / "answers" / "state.msgpack"
    assert state.is_file() and state.stat().st_size < 40_000  # (thousands of names' seqs: several times that)

    copy = crash_copy(tmp_path / "data", tmp_path / "after")
    recovered = TickPipeline(dataclasses.replace(live.config, log=dataclasses.replace(live.config.log, dir=str(copy))))
    assert recovered.ticks_in == ticks
    assert sessions(recovered) == sessions(live)
    assert recovered.encoders.accepted() == live.encoders.accepted()
    assert recovered.recovered == []  # nothing owed: every tick was answered live
    live.close()
    recovered.close()


def test_a_forgotten_stream_comes_back_as_a_new_one_and_its_topic_seqs_go_on(checkpoint, tmp_path) -> None:
    """A kept guard still refuses a tick older than the stream's last (ts_backwards); a stream forgotten past
    expired_streams_kept takes one, as a new stream; its topics' seqs go on above every seq forgotten, never
    handing one out twice."""
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    live = churned(checkpoint, tmp_path / "data", queries)
    churn(live, rounds=3, per_round=KEPT)
    assert "OPT000000" not in live.encoders.accepted()  # forgotten
    kept = f"OPT{3 * KEPT - 1:06d}"
    assert live.encoders.accepted([kept])[kept] is not None
    old_ts = T0 - 10  # before either stream's ticks
    refused = live.ingest_message(encode([trade(kept, old_ts, 100.0, 1.0, "buy")]))
    assert refused and "ts_backwards" in str(refused)
    assert live.ingest_message(encode([trade("OPT000000", old_ts, 100.0, 1.0, "buy")])) == []
    while live.step() is not None:
        pass
    assert live.encoders.accepted(["OPT000000"])["OPT000000"]["ticks"] == 1
    assert live.cache.last_seq("dir/OPT000000/") > live.cache.seq_floor >= 1
    live.close()


def test_idle_streams_expire_while_the_ingest_queue_holds_unread_messages(checkpoint, tmp_path) -> None:
    """review351 #2: expiry waited for an ingest queue read empty, so on a busy feed (a service a few seconds
    behind) nothing ever expired: 5,120 streams held where ~800 were live. Now a stream expires once silent for
    stream_idle_s plus how long the unread messages have waited (what the server tells the pipeline as
    ``ingest_unread_s``): any tick of it among them came that recently, so it was silent that long on its feed's
    side too; a stream read more recently than that waits."""
    base = config(checkpoint, tmp_path / "data")
    live = TickPipeline(dataclasses.replace(base, scheduler=dataclasses.replace(base.scheduler, stream_idle_s=0.05)))
    assert live.ingest_message(encode([trade("QUIET", T0, 50.0, 1.0, "sell")])) == []
    time.sleep(1.2)  # QUIET: silent past stream_idle_s + the 1 s the queue's messages have waited
    assert live.ingest_message(encode([trade("RECENT", T0, 50.0, 1.0, "sell")])) == []
    while live.step() is not None:
        pass
    live.ingest_unread_s = 1.0  # (as the server says it: messages have waited unread for 1 s)
    assert live.expire_idle() == ["QUIET"]  # RECENT's next tick may be among them: it waits
    assert live.encoders.expired("QUIET") and "RECENT" in live.encoders
    live.close()


def containers_naming(root: object, names: set[str]) -> dict[str, int]:
    """Every dict, set, list or deque reachable from ``root`` through our objects' attributes that holds any of
    ``names`` (as a key or item, alone, in a tuple or inside a topic string), with how many of them: found by
    walking, so a container added later is checked too. Library objects (torch, ZeroMQ) are not entered."""
    def named(container) -> set[str]:
        found = set()
        for key in container:
            for part in key if isinstance(key, tuple) else (key,):
                if isinstance(part, str):
                    found.update(name for name in (part, *part.split("/")) if name in names)
        return found

    seen, counts, stack = set(), {}, [(root, "pipeline")]
    while stack:
        obj, path = stack.pop()
        if id(obj) in seen or isinstance(obj, (str, bytes, int, float, type)) or \
                type(obj).__module__.split(".")[0] in ("torch", "zmq", "threading", "msgpack"):
            continue
        seen.add(id(obj))
        if isinstance(obj, (dict, set, frozenset, list, deque)):
            if found := named(obj):
                counts[path] = len(found)
            values = obj.items() if isinstance(obj, dict) else enumerate(obj)
            stack += [(value, f"{path}[{key!r:.24}]") for key, value in itertools.islice(values, 64)]
        elif isinstance(obj, tuple):
            stack += [(value, f"{path}[{i}]") for i, value in enumerate(obj)]
        else:
            slots = [slot for cls in type(obj).__mro__ for slot in getattr(cls, "__slots__", ())]
            attributes = {**getattr(obj, "__dict__", {}), **{slot: getattr(obj, slot, None) for slot in slots}}
            stack += [(value, f"{path}.{name}") for name, value in attributes.items()]
    return counts
