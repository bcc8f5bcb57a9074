"""AnswerCache: per-topic sequence numbers, staleness, drops, and the wire form."""

from __future__ import annotations

import itertools
import threading

import msgpack
import pytest

from queries.cache import Answer, AnswerCache


def counting_clock(start: int = 1_000):
    counter = itertools.count(start)
    return lambda: next(counter)


def put(cache: AnswerCache, query: str, stream: str, version: int, topic: str | None = None) -> Answer:
    return cache.put(query, stream, topic or f"{query}/{stream}/", {"probs": {"up": 0.5, "down": 0.5}},
                     version, data_ts=10 * version, model="tick-v1")


def test_seq_starts_at_one_and_increases_per_topic():
    cache = AnswerCache(clock=counting_clock())
    a1 = put(cache, "dir", "A", 1)
    b1 = put(cache, "dir", "B", 1)
    a2 = put(cache, "dir", "A", 2)
    assert (a1.seq, b1.seq, a2.seq) == (1, 1, 2)
    assert (a1.answer_ts, b1.answer_ts, a2.answer_ts) == (1000, 1001, 1002)
    # two queries sharing a topic share its sequence
    s1 = put(cache, "x", "A", 3, topic="shared/")
    s2 = put(cache, "y", "A", 3, topic="shared/")
    assert (s1.seq, s2.seq) == (1, 2) and cache.last_seq("shared/") == 2 and cache.last_seq("none/") == 0


def test_topics_list_last_seqs_by_name_with_the_latest_answer_time():
    cache = AnswerCache(clock=counting_clock())
    put(cache, "dir", "B", 1)  # ts 1000
    put(cache, "dir", "A", 1)  # 1001
    put(cache, "dir", "A", 2)  # 1002
    put(cache, "y", "A", 3, topic="shared/")  # 1003: two queries on one topic, the later answer dates it
    put(cache, "x", "A", 3, topic="shared/")  # 1004
    put(cache, "vol", "A", 1)  # 1005
    assert cache.topics() == {"dir/A/": {"last_seq": 2, "answer_ts": 1002}, "dir/B/": {"last_seq": 1,
                                                                                       "answer_ts": 1000},
                              "shared/": {"last_seq": 2, "answer_ts": 1004}, "vol/A/": {"last_seq": 1,
                                                                                        "answer_ts": 1005}}
    assert list(cache.topics("dir/")) == ["dir/A/", "dir/B/"]
    assert list(cache.topics(after="dir/B/", limit=1)) == ["shared/"]  # a page: past `after`, at most `limit`
    cache.drop_stream("B")  # its seq stays (never reused), its answer is gone: nothing to date it by
    assert cache.topics("dir/B/") == {"dir/B/": {"last_seq": 1, "answer_ts": None}}


def test_get_is_the_latest_answer():
    cache = AnswerCache()
    assert cache.get("dir", "A") is None
    put(cache, "dir", "A", 1)
    latest = put(cache, "dir", "A", 5)
    assert cache.get("dir", "A") is latest and latest.version == 5 and latest.data_ts == 50
    assert cache.get("dir", "B") is None and len(cache) == 1


def test_get_fresh_respects_staleness():
    cache = AnswerCache()
    put(cache, "dir", "A", 10)
    assert cache.get_fresh("dir", "A", current_version=10).version == 10
    assert cache.get_fresh("dir", "A", current_version=11) is None
    assert cache.get_fresh("dir", "A", current_version=13, max_stale_ticks=3).version == 10
    assert cache.get_fresh("dir", "A", current_version=14, max_stale_ticks=3) is None
    assert cache.get_fresh("dir", "B", current_version=0, max_stale_ticks=100) is None
    assert cache.get("dir", "A").stale_ticks(14) == 4
    with pytest.raises(ValueError, match="max_stale_ticks must be >= 0"):
        cache.get_fresh("dir", "A", 10, max_stale_ticks=-1)


def test_drop_query_keeps_topic_seq_increasing():
    cache = AnswerCache()
    put(cache, "dir", "A", 1)
    put(cache, "dir", "B", 1)
    put(cache, "vol", "A", 1)
    assert len(cache) == 3
    assert cache.drop_query("dir") == 2 and cache.drop_query("dir") == 0
    assert cache.get("dir", "A") is None and cache.get("vol", "A") is not None and len(cache) == 1
    assert put(cache, "dir", "A", 2).seq == 2  # a replaced query's topic never goes back to seq 1


def test_drop_stream():
    cache = AnswerCache()
    put(cache, "dir", "A", 1)
    put(cache, "vol", "A", 1)
    put(cache, "vol", "B", 1)
    assert cache.drop_stream("A") == 2 and len(cache) == 1 and cache.get("vol", "B") is not None


def test_wire_form_is_msgpack_primitives():
    cache = AnswerCache(clock=lambda: 42)
    answer = cache.put("move", "A", "move/A/", {"expected": 1.25, "probs": {"+5": 0.25, "0": 0.75}}, 7, 99, "tick-v1",
                       query_version=3)
    wire = answer.to_wire()
    assert wire == {"query": "move", "stream": "A", "topic": "move/A/", "seq": 1, "version": 7, "data_ts": 99,
                    "answer_ts": 42, "value": {"expected": 1.25, "probs": {"+5": 0.25, "0": 0.75}},
                    "model": "tick-v1", "query_version": 3}
    assert msgpack.unpackb(msgpack.packb(wire)) == wire


def test_answer_checks_its_invariants():
    with pytest.raises(ValueError, match="seq is >= 0"):
        Answer("q", "s", "q/s/", -1, 1, 0, 0, {}, "m")
    with pytest.raises(ValueError, match="tick count"):
        Answer("q", "s", "q/s/", 1, -1, 0, 0, {}, "m")


def test_concurrent_puts_give_unique_gapless_seqs_and_reads_never_fail():
    cache = AnswerCache()
    seqs: list[int] = []
    lock = threading.Lock()

    def writer(stream: str) -> None:
        for v in range(500):
            a = put(cache, "dir", stream, v, topic="all/")
            with lock:
                seqs.append(a.seq)

    threads = [threading.Thread(target=writer, args=(s,)) for s in "ABCD"]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        for s in "ABCD":
            got = cache.get("dir", s)
            assert got is None or got.stream == s
    for t in threads:
        t.join()
    assert sorted(seqs) == list(range(1, 2001)) and len(cache) == 4
