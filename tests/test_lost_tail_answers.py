"""Answers about ticks the tick log lost with its tail (a host crash under `log.fsync: group`, a damaged end cut
as a torn tail): a real restart over a data directory whose last tick record is cut short no longer serves them as
current, says how many there were, and a second restart does not bring them back."""

from __future__ import annotations

from pathlib import Path

from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.log_format import HEADER, segments
from engine.service.pipeline import TickPipeline
from test_durability import QUERIES, checkpoint, config, crash_copy, feed_in_steps  # noqa: F401 (a fixture)


def cut_last_record_short(data: Path) -> None:
    """The last tick record half-written: what a host crash leaves of ticks the group fsync had not reached."""
    _, path = segments(data / "ticks")[-1]
    content = path.read_bytes()
    offset = last = 0
    while offset < len(content):
        last = offset
        offset += HEADER.size + HEADER.unpack_from(content, offset)[1]
    path.write_bytes(content[: last + HEADER.size + 3])


def test_answers_about_ticks_lost_with_the_logs_tail_are_not_served_as_current(checkpoint, tmp_path,  # noqa: F811
                                                                               capsys) -> None:
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=4)).next_batch(230)
    live = TickPipeline(config(checkpoint, tmp_path / "data", queries))
    # the last tick a message of its own: its record cut short loses it alone (a message of several, whose end
    # record would be cut, is lost whole: message_ends.py)
    published = feed_in_steps(live, ticks[:199]) + feed_in_steps(live, ticks[199:200])
    lost_stream = ticks[199].stream
    lost_count = live.engine.progress(lost_stream).ticks
    stale = {a.query: a for a in published if a.stream == lost_stream and a.version == lost_count}
    assert set(stale) == {"dir", "nll"}  # both answered the tick the log is about to lose
    data = crash_copy(tmp_path / "data", tmp_path / "crashed")
    cut_last_record_short(data)

    capsys.readouterr()
    recovered = TickPipeline(config(checkpoint, data))
    err = capsys.readouterr().err
    kept = recovered.engine.progress(lost_stream).ticks
    assert kept == lost_count - 1 and recovered.stats()["log"]["torn_tails"] == 1
    assert f"2 answers refer to ticks lost with the log's tail (\"{lost_stream}\"" in err, err
    for query in ("dir", "nll"):  # the answer each query published last on a tick the stream still holds
        served = recovered.cache.get(query, lost_stream)
        before = [a for a in published if a.query == query and a.stream == lost_stream and a.version <= kept]
        assert served is not None and served.version <= kept
        assert (served.seq, served.version, served.data_ts) == (before[-1].seq, before[-1].version,
                                                                before[-1].data_ts)
        assert recovered.cache.last_seq(served.topic) == stale[query].seq  # seqs still go on past it

    new_ticks = [t for t in ticks[200:] if t.stream == lost_stream][:3]
    for tick in new_ticks:  # accepted, one message each, and the process dies before computing them
        assert recovered.ingest_message(encode([tick])) == []
    again = TickPipeline(config(checkpoint, crash_copy(data, tmp_path / "again")))
    owed = [o.answer for o in again.recovered if o.answer and o.answer.stream == lost_stream]
    # the answer log recorded the take-back: this restart starts the stream's tail after the answer kept, not after
    # the lost one (whose count the new ticks passed), and answers each new message as the live run would have
    assert_answered_after_the_take_back(owed, again.cache, lost_stream, kept, new_ticks, stale)
    again.close()
    recovered.close()
    live.close()


def assert_answered_after_the_take_back(owed: list, cache, stream: str, kept: int, new_ticks: list,
                                        stale: dict) -> None:
    """The new ticks after a take-back are answered as the live run would have, counted on from the ticks kept."""
    for query in ("dir", "nll"):
        answers = [a for a in owed if a.query == query]
        assert [a.version for a in answers] == [kept + 1, kept + 2, kept + 3]
        assert [a.data_ts for a in answers] == [t.ts for t in new_ticks]
        # the first takes the lost tick's count, its version repeats the lost answer's; its seq tells them apart
        assert answers[0].version == stale[query].version and answers[0].seq == stale[query].seq + 1
        assert cache.get(query, stream) == answers[-1]
