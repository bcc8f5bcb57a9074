"""review262 #2: a recovery feed's resend (the same stream, time and exchange sequence number again) replayed twice,
even with --sequence, and a gap in the numbers was said nowhere. With a sequence column the replay (one reader for
backtest and feed replay) leaves such repeats out, counted in a note that names the first, and says the gaps; without
one nothing is guessed. Real files in tmp_path, the real replay, the real CLI (feed replay into a PULL socket)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import zmq

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from connectors.ticks import decode
from engine.service.cli import main
from conftest import drain

SEQUENCE = map_from_options(sequence="seq", detect=True)  # --sequence seq


def resent(path: Path, gap: bool = False) -> Path:
    """ESM4 trades numbered 1..10 (4 and 5 lost with `gap`), then a recovery feed's resend of numbers 6..8."""
    numbers = [i for i in range(1, 11) if not (gap and i in (4, 5))]
    rows = [(f"2024-03-01T14:30:00.{i * 1000:09d}Z", "ESM4", 5000 + 0.25 * (i % 3), 1, "buy", i) for i in numbers]
    rows += [row for row in rows if 6 <= row[5] <= 8]
    path.write_text("timestamp,symbol,price,size,side,seq\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def test_a_resend_is_left_out_and_counted_with_a_sequence_column_and_kept_without(tmp_path: Path) -> None:
    path = resent(tmp_path / "dup.csv")
    with FileReplay(path, columns=SEQUENCE) as replay:
        ticks = drain(replay)
        assert [t.ts % 10**9 for t in ticks] == [i * 1000 for i in range(1, 11)]
        assert replay.found_notes == [
            '3 tick(s) of 1 stream(s) repeat a sequence number (column "seq") already read at the same time, a '
            "recovery feed's resend or one line captured twice: left out, the first read kept (the first repeat: "
            f"{path} line 12 (ESM4, number 6))"]
    with FileReplay(path) as replay:  # no sequence column: two equal rows may be two trades
        assert len(drain(replay)) == 13 and replay.found_notes == []


def test_gaps_in_a_stream_s_numbers_are_said_with_the_first_ones(tmp_path: Path) -> None:
    with FileReplay(resent(tmp_path / "gap.csv", gap=True), columns=SEQUENCE) as replay:
        assert len(drain(replay)) == 8
        assert replay.found_notes[1] == (
            '1 gap(s) in the sequence numbers (column "seq") of 1 stream(s), 2 number(s) missing (ESM4 3 -> 6 at '
            "2024-03-01T14:30:00.000006000Z): messages the feed lost, or numbers that count across instruments (TAQ's, "
            "an OPRA channel's), whose every stream has gaps")


def test_two_captures_of_one_line_replay_each_number_once(tmp_path: Path) -> None:
    a = resent(tmp_path / "lineA.csv")
    b = tmp_path / "lineB.csv"  # the other capture: the same rows, other bytes (a byte copy is read once: same_content)
    b.write_bytes(a.read_text().replace("\n", "\r\n").encode())
    with FileReplay([a, b], columns=SEQUENCE) as replay:
        assert len(drain(replay)) == 10
        assert replay.found_notes[0].startswith("16 tick(s) of 1 stream(s) repeat a sequence number")


def test_a_row_of_a_trade_and_its_quote_replays_as_both_and_its_resend_as_neither(tmp_path: Path) -> None:
    rows = [f"{1709303400000000000 + i * 1000},ES,{5000 + i},1,{4999 + i},{5001 + i},{i}" for i in range(1, 5)]
    (tmp_path / "both.csv").write_text("ts,symbol,price,size,bid,ask,seq\n" + "\n".join([*rows, rows[1]]) + "\n")
    with FileReplay(tmp_path / "both.csv", columns=SEQUENCE) as replay:
        assert [t.kind for t in drain(replay)] == ["quote", "trade"] * 4
        assert replay.found_notes[0].startswith("2 tick(s) of 1 stream(s) repeat a sequence number")


def test_backtest_and_feed_replay_leave_out_the_same_resends(tmp_path: Path, capsys) -> None:
    path = resent(tmp_path / "dup.csv")
    out = tmp_path / "bt" / "answers.parquet"
    assert main(["backtest", str(path), "--sequence", "seq", "--out", str(out), "--quiet", "--threads", "1"]) == 0
    said = capsys.readouterr().out
    # (review325 #2: the summary counts the resends left out, as the stats do)
    assert "replayed 10 ticks (0 rejected, 3 left out as resends of a sequence number)" in said, said
    assert "note: 3 tick(s) of 1 stream(s) repeat" in said, said
    sock = zmq.Context.instance().socket(zmq.PULL)
    sock.setsockopt(zmq.RCVTIMEO, 5000)
    sock.setsockopt(zmq.LINGER, 0)
    endpoint = f"tcp://127.0.0.1:{sock.bind_to_random_port('tcp://127.0.0.1')}"
    try:
        done = subprocess.run([sys.executable, "-m", "engine.service.cli", "feed", "replay", str(path), "--sequence",
                               "seq", "--endpoint", endpoint, "--control", "", "--answers", ""],
                              stderr=subprocess.PIPE, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
        ticks = []
        while len(ticks) < 10:
            ticks += decode(sock.recv()).ticks
        assert sock.poll(500) == 0  # nothing more
    finally:
        sock.close()
    assert [t.ts % 10**9 for t in ticks] == [i * 1000 for i in range(1, 11)]
    assert "flashtick feed replay: note: 3 tick(s) of 1 stream(s) repeat a sequence number" in done.stderr, \
        done.stderr
    # review431 #7: the ticks not sent count the resends, as backtest's summary does (they were left out of it)
    assert "3 ticks read from the files not sent (3 left out as resends of a sequence number)\n" in done.stderr, \
        done.stderr


def test_a_resend_restamped_later_is_left_out_and_a_new_session_s_numbers_are_not(tmp_path: Path, capsys) -> None:
    """fix294 #2: a resend the feed restamped with the time it sent it again (numbers 6..8, 2 s later) was read as
    new trades, and its low numbers then made a gap of the next one. A number repeated hours later with other values
    is a new session's, kept."""
    path = resent(tmp_path / "restamped.csv")
    lines = path.read_text().splitlines()
    later = [line.replace("14:30:00.", "14:30:02.") for line in lines[-3:]]
    session = [f"2024-03-02T14:30:00.{i * 1000:09d}Z,ESM4,5100.0,2,sell,{i}" for i in range(1, 4)]
    path.write_text("\n".join([*lines[:-3], *later, "2024-03-01T14:30:03.000011000Z,ESM4,5000.0,1,buy,11", *session])
                    + "\n")
    out = tmp_path / "bt" / "answers.parquet"
    assert main(["backtest", str(path), "--sequence", "seq", "--out", str(out), "--quiet", "--threads", "1"]) == 0
    said = capsys.readouterr().out
    assert "replayed 14 ticks (0 rejected, 3 left out as resends of a sequence number)" in said, said
    assert ('note: 3 tick(s) of 1 stream(s) repeat a sequence number (column "seq") already read at the same time '
            "or, 3 of them, earlier with the same values (restamped)") in said, said
    assert f"(the first repeat: {path} line 12 (ESM4, number 6))" in said and "gap" not in said, said
