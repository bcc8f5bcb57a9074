"""The answer history (gap fills) and the answer log (seqs, latest answers and trigger state across restarts),
on real files."""

from __future__ import annotations

import msgpack

from engine.service.answer_log import AnswerHistory, AnswerLog
from engine.service.log_format import framed
from engine.service.log_reading import read
from queries.cache import AnswerCache
from queries.registry import Registry

QUERIES = """
queries:
  - {name: every3, streams: ["*"], question: "q", kind: generate, trigger: {ticks: 3}}
  - {name: each, streams: ["*"], question: "q", kind: generate, trigger: batch}
"""


def packed(answer) -> bytes:
    return msgpack.packb(answer.to_wire(), use_bin_type=True)


def publish(cache: AnswerCache, history: AnswerHistory, log: AnswerLog | None, query: str, stream: str,
            version: int):
    """What the pipeline does with a standing answer: cache (seq), history, log."""
    answer = cache.put(query, stream, f"{query}/{stream}/", {"v": version}, version, 1000 + version, "m")
    history.add(answer.topic, answer.seq, packed(answer))
    if log is not None:
        log.record(answer, {})
        log.roll_if_full()
    return answer


def test_history_serves_a_topic_after_a_seq_and_says_when_older_ones_are_gone() -> None:
    cache, history = AnswerCache(), AnswerHistory(keep=8)
    for version in range(1, 7):
        publish(cache, history, None, "q", "A", version)
        publish(cache, history, None, "q", "B", version)
    # 12 published, 8 kept: A 3..6 and B 3..6
    answers, complete = history.after("q/A/", 4, limit=100)
    assert [a["seq"] for a in answers] == [5, 6] and complete
    answers, complete = history.after("q/A/", 0, limit=100)
    assert [a["seq"] for a in answers] == [3, 4, 5, 6] and not complete  # 1 and 2 are gone
    assert [a["seq"] for a in history.after("q/B/", 2, limit=2)[0]] == [3, 4]
    assert history.after("q/B/", 6, limit=5) == ([], True) and history.after("nope/", 0, 5) == ([], True)
    assert history.oldest_seq("q/A/") == 3 and len(history) == 8
    for past_the_end in (2**63 - 1, 2**63, 2**64 - 1):  # any msgpack int a client may send as its last seq
        assert history.after("q/A/", past_the_end, limit=1000) == ([], True)


def test_a_restart_continues_every_seq_even_after_retention_dropped_the_old_segments(tmp_path) -> None:
    registry = Registry()
    registry.register(QUERIES)
    cache, history = AnswerCache(), AnswerHistory(keep=10_000)
    log = AnswerLog(tmp_path, cache, fsync="never", group_ms=5, segment_bytes=2048, retention_bytes=4096)
    for version in range(1, 301):
        publish(cache, history, log, "each", f"S{version % 3}", version)
        if version % 3 == 0:
            publish(cache, history, log, "every3", "S0", version)
    publish(cache, history, log, "each", "LONE", 7)  # its only answer, long since dropped by retention
    for version in range(301, 400):
        publish(cache, history, log, "each", "S1", version)
    log.forget_stream("S2")  # expired: its answers must not come back (its seqs stay)
    cache.drop_stream("S2")
    log.close()
    assert log.log.stats.segments_dropped > 0

    restored_cache, restored_history = AnswerCache(), AnswerHistory(keep=10_000)
    again = AnswerLog(tmp_path, restored_cache, fsync="never", group_ms=5, segment_bytes=2048, retention_bytes=4096)
    again.restore(registry, restored_history, skip_corrupt=False)
    assert restored_cache.seqs() == cache.seqs()  # every topic's, the dropped ones' included
    assert {(a.query, a.stream, a.seq) for a in restored_cache.latest()} == \
        {(a.query, a.stream, a.seq) for a in cache.latest()}
    assert restored_cache.get("each", "S2") is None and restored_cache.last_seq("each/S2/") == 100
    kept = restored_history.after("each/S1/", 0, limit=1000)[0]
    assert kept and [a["seq"] for a in kept] == list(range(kept[0]["seq"], kept[-1]["seq"] + 1))
    # the next answer on a topic continues its seq, never reuses one
    assert restored_cache.put("each", "S1", "each/S1/", {}, 400, 0, "m").seq == cache.last_seq("each/S1/") + 1
    # and trigger state: every3 last fired on S0 at tick 300, so not again before 303
    assert registry.due("S0", 301, 0) == [registry.get("each")]
    assert registry.due("S0", 303, 0) == [registry.get("every3"), registry.get("each")]


def test_history_keeps_a_topics_one_answer_bare_and_serves_runs_across_eviction() -> None:
    """review353 #5: a deque a topic (~600 bytes) for churned names' one answer each. A topic of one answer holds it
    bare, a second makes a run, eviction back to one answer makes it bare again; `after` reads each form alike."""
    history = AnswerHistory(keep=3)
    pack = lambda topic, seq: msgpack.packb({"topic": topic, "seq": seq})  # noqa: E731
    history.add("a/", 1, pack("a/", 1))
    assert isinstance(history._by_topic["a/"][1], bytes)
    assert [x["seq"] for x in history.after("a/", 0, 10)[0]] == [1]
    history.add("a/", 2, pack("a/", 2))
    history.add("b/", 1, pack("b/", 1))
    assert [x["seq"] for x in history.after("a/", 0, 10)[0]] == [1, 2]
    history.add("b/", 2, pack("b/", 2))  # past keep: a/'s seq 1 goes, a/ is back to one answer, bare
    assert isinstance(history._by_topic["a/"][1], bytes) and history.oldest_seq("a/") == 2
    assert history.after("a/", 0, 10) == ([{"topic": "a/", "seq": 2}], False)  # seq 1 no longer kept
    history.add("c/", 1, pack("c/", 1))  # a/'s last goes: the topic is gone
    assert "a/" not in history._by_topic and history.after("a/", 0, 10) == ([], True)
    history.add("b/", 5, pack("b/", 5))  # seqs that do not continue start the topic afresh
    assert [x["seq"] for x in history.after("b/", 4, 10)[0]] == [5] and len(history) == 3


def test_a_segment_roll_never_checkpoints_an_answer_before_its_record(tmp_path) -> None:
    """review402 #4: a step's answers are all numbered (the cache) before their records are written; a roll at the
    first record's append checkpointed the cache, the later answers with it, so a kill before their records left a
    checkpoint claiming answers no record held: no restart owed them and their seqs were skipped for good. The log
    rolls only where the cache holds what it does (roll_if_full, after a step's records)."""
    cache = AnswerCache()
    log = AnswerLog(tmp_path, cache, fsync="never", group_ms=5, segment_bytes=512, retention_bytes=None)
    recorded: dict[str, int] = {}
    for version in range(1, 200):  # each step answers two topics, then records them, as the pipeline does
        step = [cache.put(q, "A", f"{q}/A/", {"v": version}, version, 1000 + version, "m") for q in ("each", "every3")]
        for answer in step:
            log.record(answer, {})
            recorded[answer.topic] = answer.seq
            if log.state_path.is_file():  # a kill here: the checkpoint must claim no answer without its record
                claimed = msgpack.unpackb(log.state_path.read_bytes(), raw=False)["seqs"]
                assert all(claimed[topic] <= recorded.get(topic, 0) for topic in claimed), (version, claimed)
        log.roll_if_full()
    log.close()
    assert log.log.stats.appended == 398 and len(list(tmp_path.glob("answers-*.log"))) > 5


# what every release before 0.2.0 makes its Answer of (`Answer(**record)`): an answer record holds these keys alone
ANSWER_KEYS_BEFORE_0_2_0 = {"query", "stream", "topic", "seq", "version", "data_ts", "answer_ts", "value", "model",
                            "query_version"}


def test_answer_records_hold_the_cached_form_and_the_published_fields_come_back_beside_them(tmp_path) -> None:
    """review400 #8: an answer record held the fields the answer was published with (`data_age_ms`, `caveats`), and
    a release before 0.2.0, which makes its Answer of every key of one, could not start on the directory (the
    documented rollback). They are a record of their own now, written before the answer's in the same write, which
    that release skips; a restart gives them back to the history as they were packed. A record between the two
    skipped as damaged (``skip_corrupt``) gives an answer none of another's."""
    cache = AnswerCache()
    log = AnswerLog(tmp_path, cache, fsync="never", group_ms=5, segment_bytes=1 << 20, retention_bytes=None)
    fields = {"tick_seq": 7, "data_age_ms": 12.5, "caveats": [{"kind": "k", "text": "t"}]}
    first = cache.put("q", "A", "q/A/", {"v": 1}, 1, 1001, "m")
    log.record(first, fields)
    bare = cache.put("q", "A", "q/A/", {"v": 2}, 2, 1002, "m")
    log.record(bare, {})  # (no server: nothing published beside it, no record)
    damaged = cache.put("q", "B", "q/B/", {"v": 3}, 3, 1003, "m")
    log.record(damaged, {"data_age_ms": 1.0})
    after = cache.put("q", "B", "q/B/", {"v": 4}, 4, 1004, "m")
    log.record(after, {})
    log.close()
    records = [payload for _, payload in read(tmp_path, prefix="answers")]
    assert [record[:1] for record in records] == [b"P", b"A", b"A", b"P", b"A", b"A"]
    answers = [msgpack.unpackb(record[1:]) for record in records if record[:1] == b"A"]
    assert all(set(answer) == ANSWER_KEYS_BEFORE_0_2_0 for answer in answers)

    segment = next(tmp_path.glob("answers-*.log"))
    data = bytearray(segment.read_bytes())
    data[-len(framed(records[-1])) - 3] ^= 0xFF  # the damaged answer's record, the one after its fields
    segment.write_bytes(bytes(data))
    restored = AnswerHistory(keep=100)
    AnswerLog(tmp_path, AnswerCache(), fsync="never", group_ms=5, segment_bytes=1 << 20, retention_bytes=None,
              skip_corrupt=True).read_back(restored, skip_corrupt=True)
    assert restored.after("q/A/", 0, 10)[0] == [first.to_wire() | fields, bare.to_wire()]
    assert restored.after("q/B/", 0, 10)[0] == [after.to_wire()]  # (the damaged one's fields not taken for it)
