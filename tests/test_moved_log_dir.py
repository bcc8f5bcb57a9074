"""A data directory moved away while the service reads a message in (the tick log notices it at an append: the
directory's identity, ticklog._identity, is no longer the one it opened): the message's ticks logged before it
noticed were accepted and answered, so they are kept whole in the moved log (its end record says what happened);
the rest are refused, each told to the sender; a restart on the moved directory replays the kept ticks, as the live
run held them, and says what happened instead of "cut short by a stop"."""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

import engine.service.ticklog as ticklog
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.log_reading import read_unchanged
from engine.service.message_ends import MESSAGE_END
from engine.service.pipeline import TickPipeline
from test_durability import QUERIES, config, crash_copy, feed_in_steps, sessions


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from conftest import tiny_tick_checkpoint

    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"), max_position_embeddings=256)


def move_at(monkeypatch, ticks_dir: Path, moved: Path, appends: int) -> None:
    """The data directory (``ticks_dir``'s parent) is renamed to ``moved`` just before the tick log's identity check
    of its ``appends``-th append from now (every append checks: DELETED_CHECK_S 0): what `mv` does between two of a
    message's ticks, with the real check noticing it."""
    real = ticklog._identity
    calls = [0]

    def identity(directory: Path):
        if Path(directory) == ticks_dir:
            calls[0] += 1
            if calls[0] == appends:
                ticks_dir.parent.rename(moved)
        return real(directory)

    monkeypatch.setattr(ticklog, "DELETED_CHECK_S", 0.0)
    monkeypatch.setattr(ticklog, "_identity", identity)


def test_a_directory_moved_mid_message_keeps_the_accepted_ticks_and_says_so(checkpoint, tmp_path, monkeypatch,
                                                                           capsys) -> None:
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    data, moved = tmp_path / "data", tmp_path / "moved"
    market = [t for t in SyntheticMarket(SyntheticConfig(seed=4)).next_batch(200) if t.stream == "SYN.A"][:40]
    live = TickPipeline(config(checkpoint, data, queries))
    feed_in_steps(live, market[:28])
    move_at(monkeypatch, data / "ticks", moved, appends=4)  # the message's 4th tick finds the directory moved
    refused = live.ingest_message(encode(market[28:36]))
    # the reply (`_rejects/`) names exactly the ticks refused: the first 3 were accepted
    assert [(r["index"], r["reason"]) for r in refused] == [(i, "log_unavailable") for i in range(3, 8)]
    assert "3 ticks of this message before it were accepted" in refused[0]["error"], refused[0]
    live_answers = live.run_until_idle()
    assert {a.version for a in live_answers} == {31}  # the kept ticks were answered, one group
    held = sessions(live)
    assert held["SYN.A"][1] == 31
    # the moved log holds the message's 3 ticks and its end record, which says what happened
    records = [msgpack.unpackb(p, raw=False) for _, p in read_unchanged(moved / "ticks")]
    assert records[-1][MESSAGE_END] is True and records[-1]["latched"]["kept"] == 3, records[-1]
    assert records[-1]["latched"]["refused"] == 5
    capsys.readouterr()
    # a kill now, and a start on the moved directory (a copy: the live pipeline still holds its lock)
    monkeypatch.undo()
    recovered = TickPipeline(config(checkpoint, crash_copy(moved, tmp_path / "after"), queries))
    err = capsys.readouterr().err
    assert "cut short by a stop" not in err, err
    assert "recovered 31 ticks of 1 stream" in err, err
    assert ("the tick log's directory was moved or renamed while a message of 8 ticks was read in (its first at "
            "record") in err, err
    assert "3 ticks accepted before the tick log noticed are kept (replayed and answered as the live run did); " \
           "5 were refused (log_unavailable, told the sender on _rejects/)" in err, err
    assert sessions(recovered) == held
    assert recovered.stats()["log"]["ticks_dropped_unended_message"] == 0
    # every answer published live on the kept ticks is the restart's: logged, or owed and computed again alike
    owed = {(o.answer.topic, o.answer.seq): o.answer for o in recovered.recovered if o.answer is not None}
    for answer in live_answers:
        again = owed.get((answer.topic, answer.seq))
        if again is None:  # logged before the answer log noticed the move too: the restart holds it as it was
            cached = recovered.cache.get(answer.query, answer.stream)
            assert cached is not None and cached.seq == answer.seq and cached.version == answer.version
            continue
        assert again.version == answer.version and again.data_ts == answer.data_ts
        if "probs" in answer.value:
            assert again.value["probs"] == pytest.approx(answer.value["probs"], abs=1e-4)
    # and it goes on as the live run would have, had its directory stayed
    assert feed_in_steps(recovered, market[36:]) and sessions(recovered)["SYN.A"][1] == 35
