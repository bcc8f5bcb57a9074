"""The tick log's message ends (engine/service/message_ends.py): a message whose end record never came (a kill
while the service read it in) is told from a whole one by every reader of the log, at the byte level as a kill
leaves the file; a log written before end records reads as it always did."""

from __future__ import annotations

import os
from pathlib import Path

import msgpack
import pytest

from connectors.codec import BinnedCodec
from connectors.encoder import EncodedTick, StreamEncoders
from connectors.ticks import Tick, trade
from engine.service.config import LogSection
from engine.service.durability import DataDir
from engine.service.log_format import segments
from engine.service.log_reading import read_unchanged
from engine.service.log_stats import LogStats
from engine.service.log_replay import replay_log
from engine.service.message_ends import MESSAGE_START, whole_messages
from engine.service.recovery_report import say_recovered
from engine.service.tick_export import export_ticks
from engine.service.ticklog import TickLog
from queries.cache import AnswerCache

T0 = 1_700_000_000 * 10**9


def message(first: int, n: int, stream: str = "A") -> list[Tick]:
    return [trade(stream, T0 + first + i, 100.0 + i, 1.0) for i in range(n)]


def write(root: Path, messages: list[list[Tick]], **log: object) -> Path:
    """``messages`` logged as the service logs what it reads in (ItemLog.message, ItemLog.append); the log's
    directory."""
    data = DataDir(LogSection(dir=str(root), **log), AnswerCache(), {})
    try:
        for ticks in messages:
            with data.items.message(len(ticks)):
                for tick in ticks:
                    data.items.append(EncodedTick(tick.stream, tick.ts, [1], 1, None, tick))
    finally:
        data.close()
    return root / "ticks"


def read_back(directory: Path) -> list[tuple[int, bool]]:
    """(the tick's ts offset, unended) of every logged tick, in order, as a restart reads them (the file unchanged)."""
    records = ((n, msgpack.unpackb(p, raw=False)) for n, p in read_unchanged(directory, stats=LogStats()))
    return [(r["tick"]["ts"] - T0, unended) for _, r, unended, _ in whole_messages(records) if "tick" in r]


def cut(directory: Path, bytes_off: int) -> None:
    """The last segment cut short by ``bytes_off`` bytes, as a process killed mid-write leaves it."""
    path = segments(directory)[-1][1]
    os.truncate(path, path.stat().st_size - bytes_off)


def test_whole_messages_read_back_whole_and_export_unchanged(tmp_path) -> None:
    directory = write(tmp_path / "data", [message(0, 3), message(10, 2)])
    assert read_back(directory) == [(0, False), (1, False), (2, False), (10, False), (11, False)]
    summary = export_ticks(tmp_path / "data", tmp_path / "out.csv")
    assert summary.ticks == 5 and summary.unended == 0
    assert "whose end the log lacks" not in summary.line(tmp_path / "data", tmp_path / "out.csv")


@pytest.mark.parametrize("where", ["in its end record", "in its last tick's record"])
def test_a_message_cut_short_is_unended_for_the_replay_and_the_export(tmp_path, where) -> None:
    """A kill as the end record was written (its bytes cut short: a torn tail), or as the message's last tick was
    (its record cut short, no end record): the message's whole records are read back ``unended``."""
    directory = write(tmp_path / "data", [message(0, 3), message(10, 3)])
    end_record = 16  # header 12 + msgpack {e: true} 4
    cut(directory, 5 if where == "in its end record" else end_record + 7)
    kept = 3 if where == "in its end record" else 2
    assert read_back(directory) == [(0, False), (1, False), (2, False)] + [(10 + i, True) for i in range(kept)]
    summary = export_ticks(tmp_path / "data", tmp_path / "out.csv")
    assert (summary.ticks, summary.unended, summary.torn_tails) == (3, kept, 1)
    assert f"{kept} ticks of a message whose end the log lacks (cut short by a stop as it was read in" in \
        summary.line(tmp_path / "data", tmp_path / "out.csv")


def test_a_cut_message_stays_unended_once_a_restart_logged_after_it(tmp_path) -> None:
    """The cut message's records stay in the file (a restart cuts only the torn record): the next run's records
    follow them, and every later restart reads the cut one as unended still, the resent one whole."""
    directory = write(tmp_path / "data", [message(0, 2), message(10, 3)])
    cut(directory, 16 + 7)
    write(tmp_path / "data", [message(10, 3), message(20, 1)])
    assert read_back(directory) == [(0, False), (1, False), (10, True), (11, True), (10, False), (11, False),
                                    (12, False), (20, False)]


def test_a_message_across_a_segment_roll(tmp_path) -> None:
    """A segment rolled while a message was read in: the new segment's start record is inside the message."""
    directory = write(tmp_path / "data", [message(0, 40), message(100, 40)], segment_bytes=2048)
    assert len(segments(directory)) > 1
    assert read_back(directory) == [(i, False) for i in range(40)] + [(100 + i, False) for i in range(40)]
    cut(directory, 16)  # the end record gone whole
    assert read_back(directory) == [(i, False) for i in range(40)] + [(100 + i, True) for i in range(40)]


def test_a_message_of_one_tick_is_whole_without_an_end_record(tmp_path) -> None:
    """A feed of a tick per message writes no end records (its log costs what it did); a message of several cut
    short after it is still told apart."""
    directory = write(tmp_path / "data", [message(0, 1), message(10, 1), message(20, 2)])
    records = [msgpack.unpackb(p, raw=False) for _, p in read_unchanged(directory)]
    assert [r.get(MESSAGE_START) for r in records] == [3, 3, 2, None, None]  # WHOLE, WHOLE, ENDS_LOGGED, -, end
    cut(directory, 16)
    assert read_back(directory) == [(0, False), (10, False), (20, True), (21, True)]


def test_a_log_written_before_end_records_reads_as_before(tmp_path) -> None:
    """Message starts of ``True`` and no end records (a flashtick before 2026-12-05): nothing is held back or
    dropped, a last message cut short included (that version booked it)."""
    directory = tmp_path / "data" / "ticks"
    log = TickLog(directory, fsync="never")
    for ticks in (message(0, 2), message(10, 2)):
        for i, tick in enumerate(ticks):
            log.append(msgpack.packb({"tick": tick.to_wire(), **({MESSAGE_START: True} if i == 0 else {})}))
    log.close()
    expected = [(0, False), (1, False), (10, False), (11, False)]
    assert read_back(directory) == expected
    summary = export_ticks(tmp_path / "data", tmp_path / "out.csv")
    assert (summary.ticks, summary.unended) == (4, 0)


def test_a_start_says_only_what_the_stop_before_it_cut_and_the_export_counts_the_messages(tmp_path, capsys) -> None:
    """review402 #3: every start said every message earlier kills had cut (their records stay in the log), summed, as
    "a message cut short by a stop", so an operator could not tell whether the stop just before it cut anything, and
    `ticklog export` counted their ticks as of "messages", however many. A start says the last logged message only,
    when cut (what that stop cut), and the export counts the messages."""
    directory = write(tmp_path / "data", [message(0, 2), message(10, 3)])
    cut(directory, 16 + 7)  # a kill as the second message's last tick was logged: 2 of its 3 ticks in the log

    def start_line() -> str:
        stats = LogStats()
        replayed = replay_log(directory, StreamEncoders(BinnedCodec()), [].append, skip_corrupt=False, stats=stats)
        capsys.readouterr()
        say_recovered(directory, 1, replayed.ticks, 0, 0, stats, 0.1)
        return capsys.readouterr().err

    assert "; left out 2 ticks of the last logged message, cut short by a stop as it was read in" in start_line()
    write(tmp_path / "data", [message(10, 3), message(20, 1)])  # the next run: the feed's resend, and on
    assert "left out" not in start_line()  # (the cut message's ticks are still left out: said at the start above)
    write(tmp_path / "data", [message(30, 4)])
    cut(directory, 16 + 7)  # a second kill, inside a message of 4
    assert "; left out 3 ticks of the last logged message," in start_line()
    summary = export_ticks(tmp_path / "data", tmp_path / "out.csv")
    assert (summary.unended, summary.unended_messages) == (5, 2)
    assert "5 ticks of 2 messages whose end the log lacks (each cut short by a stop as it was read in" in \
        summary.line(tmp_path / "data", tmp_path / "out.csv")
