"""review380 #8: a stream expired for idleness (scheduler.stream_idle_s) keeps its latest answers with its context, so a
scanner's quiet name still has a standing answer between prints: `get` returns it, said idle (`expired`,
`idle_since_ts`, the `stream_expired` caveat), and its next tick goes on from it; a restart on the data directory
keeps the same. Past scheduler.expired_streams_kept the answers go with the context."""

from __future__ import annotations

import msgpack

from connectors.ticks import utc_text
from engine.service.cli import main
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.pipeline import TickPipeline
from test_server import checkpoint  # noqa: F401  (the model fixture)
from test_kept_contexts import QUERY, _published
from test_kept_contexts import _prints as kept_prints
from test_service_limits import live_server, pipeline_config, wait_for

T0 = 1_709_908_200_000_000_000  # 2024-03-08T14:30:00Z


def _prints(stream: str, start: int, n: int, seed: int) -> list[dict]:
    return kept_prints(stream, start, n, seed, first=101.5)


def _get(server, stream: str) -> dict:
    with ControlClient(server.endpoints["control"], timeout_s=60) as control:
        return control.call("get", stream=stream, query="dir")


def _sections(tmp_path, idle_s: float, **more) -> dict:
    (tmp_path / "q.yaml").write_text(QUERY)
    return {"queries": str(tmp_path / "q.yaml"), "log": {"dir": str(tmp_path / "data")},
            "limits": {"heartbeat_s": 0.1}, "scheduler": {"stream_idle_s": idle_s}, **more}


def _idle(reply: dict, last: dict, tick: dict) -> None:
    """``reply`` (a get's) is ``last`` (the stream's last published answer) said idle since ``tick``."""
    answer = reply["answer"]
    assert answer is not None, reply
    assert (answer["seq"], answer["version"], answer["value"]) == (last["seq"], last["version"], last["value"])
    assert reply["expired"] is True and reply["idle_since_ts"] == tick["ts"]
    caveat = [c for c in reply["caveats"] if c["kind"] == "stream_expired"]
    assert len(caveat) == 1 and f"no tick since {utc_text(tick['ts'])}" in caveat[0]["text"], reply["caveats"]


def _live(reply: dict) -> None:
    assert "expired" not in reply and "idle_since_ts" not in reply
    assert all(c["kind"] != "stream_expired" for c in reply["caveats"])


def test_an_expired_streams_latest_answer_stands_through_get_tick_and_restart(checkpoint, tmp_path, capsys) -> None:
    """Two quiet names print, then go silent past stream_idle_s: `get` (the op and the CLI) still returns each one's
    last published answer, said idle since its last tick. A tick on one goes on from its context (version + 1)
    and its answer is live again; the other, after a restart on the same data directory, is still said idle with
    the same answer, and its tick after the restart goes on from its context too."""
    quiet, back = _prints("QN A", T0, 6, seed=1), _prints("QN B", T0 + 1, 6, seed=2)
    with live_server(checkpoint, **_sections(tmp_path, 0.3)) as (server, push):
        with AnswerSubscriber(server.endpoints["answers"], ["dir/"]) as sub:
            sub.wait_ready(timeout_s=60)
            answers = _published(server, push, sub, quiet + back)
            last = {a["stream"]: a for a in answers}  # (in seq order: the last of each stream)
            wait_for(lambda: server.pipeline.encoders.expired("QN A") and server.pipeline.encoders.expired("QN B"))
            assert not server.pipeline.engine.scheduler.streams  # (their KV freed)
            _idle(_get(server, "QN A"), last["QN A"], quiet[-1])
            _idle(_get(server, "QN B"), last["QN B"], back[-1])
            code = main(["get", "QN A", "dir", "--control", server.endpoints["control"]])
            out, err = capsys.readouterr()
            assert code == 0 and f'"seq": {last["QN A"]["seq"]}' in out, (out, err)
            assert "flashtick get: caveat: QN A is idle: no tick since " in err and "new one" not in err, err

            after = _published(server, push, sub, _prints("QN B", T0 + 100 * 10**9, 1, seed=3))
            assert [a["version"] for a in after] == [7]  # (its context goes on: 6 ticks before the expiry)
            reply = _get(server, "QN B")
            assert reply["answer"]["seq"] == after[0]["seq"] and reply["answer"]["version"] == 7
            _live(reply)
    kept = last["QN A"]
    with live_server(checkpoint, **_sections(tmp_path, 3600.0)) as (server, push):
        assert server.pipeline.encoders.expired("QN A")
        _idle(_get(server, "QN A"), kept, quiet[-1])
        _live(_get(server, "QN B"))
        with AnswerSubscriber(server.endpoints["answers"], ["dir/"]) as sub:
            sub.wait_ready(timeout_s=60)
            after = _published(server, push, sub, _prints("QN A", T0 + 200 * 10**9, 1, seed=4))
        assert [(a["version"], a["seq"]) for a in after] == [(7, kept["seq"] + 1)]
        _live(_get(server, "QN A"))


def test_expired_answers_go_with_contexts_given_up_past_expired_streams_kept(checkpoint, tmp_path) -> None:
    """The kept answers are bounded as the contexts are: past scheduler.expired_streams_kept (1 here) the oldest
    expired stream's answers go with its context (a restart drops them too), the newest stays readable."""
    sections = _sections(tmp_path, 1e-3)
    sections["scheduler"]["expired_streams_kept"] = 1
    pipeline = TickPipeline(pipeline_config(checkpoint, **sections))
    for tick in _prints("GONE", T0, 4, seed=1) + _prints("KEPT", T0 + 1, 4, seed=2):
        pipeline.ingest_message(msgpack.packb(tick))
    pipeline.run_until_idle()
    kept = pipeline.cache.get("dir", "KEPT")
    assert kept is not None and pipeline.cache.get("dir", "GONE") is not None
    wait_for(lambda: pipeline.expire_idle() and not pipeline.engine.scheduler.streams)
    assert pipeline.cache.get("dir", "GONE") is None and pipeline.cache.get("dir", "KEPT") == kept
    pipeline.close()
    restarted = TickPipeline(pipeline_config(checkpoint, **sections))
    try:
        assert restarted.cache.get("dir", "GONE") is None
        assert restarted.cache.get("dir", "KEPT").to_wire() == kept.to_wire()
    finally:
        restarted.close()


def test_an_idle_streams_answers_are_kept_packed_and_read_as_before() -> None:
    """AnswerCache.pack_stream: an expired stream's latest answers are kept packed (a quarter of their memory as
    objects); `get`, `latest`, `topics`, the drops and the count read them as before, and the stream's next answer
    brings them back as objects."""
    from queries.cache import AnswerCache

    cache = AnswerCache(clock=lambda: 7)
    value = {"answer": "up", "probs": {"up": 0.6, "down": 0.4}, "model_probs": {"up": 0.55, "down": 0.45}}
    a = cache.put("dir", "S", "dir/S/", value, 3, 100, "m", 1)
    b = cache.put("vol", "S", "vol/S/", {"expected": 12.5}, 3, 100, "m", 1)
    other = cache.put("dir", "T", "dir/T/", value, 1, 90, "m", 1)
    assert cache.pack_stream("S") == 2 and cache.pack_stream("S") == 0 and len(cache) == 3
    assert cache.get("dir", "S") == a and cache.get("vol", "S") == b and cache.get("dir", "T") == other
    assert sorted(cache.latest(), key=lambda x: x.topic) == [a, other, b]
    assert cache.topics()["dir/S/"]["answer_ts"] == 7 and cache.get_fresh("dir", "S", 3) == a
    assert cache.drop_answer("vol", "S") and cache.get("vol", "S") is None and len(cache) == 2
    again = cache.put("dir", "S", "dir/S/", value, 4, 110, "m", 1)  # answered again: an object again
    assert cache.get("dir", "S") == again and again.seq == a.seq + 1 and len(cache) == 2
    cache.pack_stream("S")
    assert cache.drop_query("dir") == 2 and cache.forgotten("dir", "S") == ("dir/S/", again.seq) and len(cache) == 0
    cache.put("vol", "S", "vol/S/", {"expected": 1.0}, 5, 120, "m", 1)
    cache.pack_stream("S")
    assert cache.drop_stream("S") == 1 and cache.get("vol", "S") is None and len(cache) == 0 and cache.latest() == []
