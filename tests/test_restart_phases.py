"""review380 #6: a restart says which log it reads and how far (`health`'s and `/readyz`'s `phase`), where it said
"loading the model" for the ~50 s it read a 67 MB answer log; and a log whose every stream expired replays without a
pass over every stream's owed answers (or the whole tail) per expiry."""

from __future__ import annotations

import re

import msgpack

from engine.service.log_read_progress import LogReadProgress
from engine.service.log_reading import read
from engine.service.pipeline import TickPipeline
from test_server import checkpoint  # noqa: F401  (the model fixture)
from test_service_limits import pipeline_config, wait_for

QUERY = "queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice, trigger: batch}\n"
T0 = 1_709_908_200_000_000_000


def _logged(checkpoint, tmp_path, streams: int, idle_s: float | None = None) -> dict:
    """A data directory holding ``streams`` streams' ticks and answers (expired, with ``idle_s``); the sections."""
    (tmp_path / "q.yaml").write_text(QUERY)
    sections = {"queries": str(tmp_path / "q.yaml"), "log": {"dir": str(tmp_path / "data")},
                "scheduler": {"stream_idle_s": idle_s}}
    live = TickPipeline(pipeline_config(checkpoint, **sections))
    for k in range(4):
        live.ingest_message(msgpack.packb([{"stream": f"N{i:03d}", "ts": T0 + k * 10**9 + i, "price": 100.0 + k,
                                            "size": 1.0, "side": "buy"} for i in range(streams)]))
        live.run_until_idle()
    if idle_s is not None:
        wait_for(lambda: live.expire_idle() and not live.engine.scheduler.streams)
    live.close()
    return sections


def test_a_log_read_counts_every_byte_of_its_segments(checkpoint, tmp_path) -> None:
    """The bytes a read counts (each record's header and payload) are its segments' sizes: it ends at N of N."""
    _logged(checkpoint, tmp_path, 6)
    for prefix, directory in (("answers", tmp_path / "data" / "answers"), ("ticks", tmp_path / "data" / "ticks")):
        said: list[str] = []
        progress = LogReadProgress("reading", directory, prefix, said.append)
        assert progress.total == sum(p.stat().st_size for p in directory.glob(f"{prefix}-*.log")) > 0
        for _, payload in read(directory, prefix=prefix):
            progress.read(len(payload))
        assert progress.done == progress.total, prefix
        assert said[0] == f"reading: 0 of {progress.total:,} bytes"


def test_a_restart_says_which_log_it_reads_and_how_far(checkpoint, tmp_path) -> None:
    """The phases a restart tells (what `health` and `/readyz` say while it starts): the answer log read, from 0 to
    all of its bytes, then the tick log replayed, from 0 to all of its bytes; nothing said "loading the model"
    while a log was read."""
    sections = _logged(checkpoint, tmp_path, 6)
    answers = sum(p.stat().st_size for p in (tmp_path / "data" / "answers").glob("answers-*.log"))
    ticks = sum(p.stat().st_size for p in (tmp_path / "data" / "ticks").glob("ticks-*.log"))
    phases: list[str] = []
    restarted = TickPipeline(pipeline_config(checkpoint, **sections), progress=phases.append)
    restarted.close()
    reading = [p for p in phases if p.startswith("reading the answer log: ")]
    replaying = [p for p in phases if p.startswith("replaying the tick log: ")]
    assert reading[0] == f"reading the answer log: 0 of {answers:,} bytes"
    assert reading[-1] == f"reading the answer log: {answers:,} of {answers:,} bytes"
    assert replaying[0] == f"replaying the tick log: 0 of {ticks:,} bytes"
    assert replaying[-1] == f"replaying the tick log: {ticks:,} of {ticks:,} bytes"
    assert phases.index(reading[-1]) < phases.index(replaying[0])  # (the answer log first, then the ticks)
    for phase in reading + replaying:
        done, total = (int(n.replace(",", "")) for n in re.findall(r"([\d,]+) of ([\d,]+) bytes", phase)[0])
        assert done <= total


def test_a_restart_where_every_stream_expired_keeps_their_answers_and_owes_none(checkpoint, tmp_path) -> None:
    """200 streams, each expired after its ticks (every expiry a record of the tick log): the restart holds none,
    keeps each one's latest answer (kept with its context) and owes no answer: what the live run published stands."""
    sections = _logged(checkpoint, tmp_path, 200, idle_s=1e-3)
    restarted = TickPipeline(pipeline_config(checkpoint, **sections), defer_owed=True)
    try:
        assert restarted.engine.scheduler.streams == {} and len(restarted.engine.scheduler.kept) == 200
        assert len(restarted.cache) == 200 and {a.version for a in restarted.cache.latest()} == {4}
        assert restarted.run_until_idle() == [] and restarted.restart.owed_ticks == 0
    finally:
        restarted.close()
