"""The tick log on real files: records round-trip across segments, torn tails are cut, damage is found
where it is, a failed write leaves nothing behind, retention drops old segments."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.service.log_format import HEADER, segments
from engine.service.log_reading import CorruptLog, read
from engine.service.log_stats import LogStats
from engine.service.ticklog import LogWriteError, TickLog

ROOT = Path(__file__).resolve().parents[1]


def payloads(n: int) -> list[bytes]:
    return [f"tick {i} ".encode() * (1 + i % 7) for i in range(n)]


def one_segment_log(directory: Path, n: int) -> tuple[list[bytes], Path]:
    """A closed log of ``n`` records in one segment: what was written, and the segment's path."""
    items = payloads(n)
    with TickLog(directory, fsync="never") as log:
        for p in items:
            log.append(p)
    (_, path), = segments(directory)
    return items, path


def test_records_round_trip_across_segments_and_reopening_continues(tmp_path) -> None:
    items = payloads(300)
    with TickLog(tmp_path, segment_bytes=1024, fsync="never") as log:
        numbers = [log.append(p) for p in items[:200]]
    assert numbers == list(range(200)) and len(segments(tmp_path)) > 5
    with TickLog(tmp_path, segment_bytes=1024, fsync="never") as log:
        assert log.next_record == 200
        numbers += [log.append(p) for p in items[200:]]
    assert [p for _, p in read(tmp_path)] == items
    assert [n for n, _ in read(tmp_path, start=250)] == list(range(250, 300))


def test_a_torn_tail_is_cut_with_a_count_and_appending_goes_on(tmp_path, capsys) -> None:
    items, path = one_segment_log(tmp_path, 20)
    whole = path.stat().st_size
    with open(path, "ab") as f:  # a process killed mid-write: a header and half a payload
        f.write(HEADER.pack(b"FTk1", 100, 0) + b"x" * 40)
    stats = LogStats()
    assert [p for _, p in read(tmp_path, stats=stats)] == items
    assert stats.torn_tails == 1 and path.stat().st_size == whole
    assert "torn tail" in capsys.readouterr().err
    with TickLog(tmp_path) as log:
        assert log.next_record == 20
        log.append(b"after")
    assert [p for _, p in read(tmp_path)] == items + [b"after"]


def test_damage_in_the_middle_stops_with_file_and_offset_or_is_skipped_on_request(tmp_path) -> None:
    items, path = one_segment_log(tmp_path, 30)
    data = bytearray(path.read_bytes())
    offset = sum(HEADER.size + len(p) for p in items[:10])
    data[offset + HEADER.size + 2] ^= 0xFF  # one payload byte of record 10
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptLog, match=rf"{path.name}: damaged record at byte {offset} \(checksum mismatch\)"):
        list(read(tmp_path))
    stats = LogStats()
    assert [p for _, p in read(tmp_path, skip_corrupt=True, stats=stats)] == items[:10] + items[11:]
    assert stats.corrupt_skipped == 1


def test_a_damaged_length_is_not_mistaken_for_a_torn_tail(tmp_path) -> None:
    items, path = one_segment_log(tmp_path, 10)
    data = bytearray(path.read_bytes())
    offset = sum(HEADER.size + len(p) for p in items[:3])
    data[offset + 4 : offset + 8] = (10_000_000).to_bytes(4, "little")  # points past the end of the file
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptLog):
        list(read(tmp_path))
    assert path.stat().st_size == len(data)  # nothing valid after it was cut


@pytest.mark.parametrize("tail", [b"\0" * 4096, HEADER.pack(b"FTk1", 100, 7) + b"x" * 20 + b"\0" * 4000],
                         ids=["zeros", "a-record-ending-in-zeros"])
def test_a_zero_filled_tail_is_cut_like_a_torn_one(tmp_path, capsys, tail) -> None:
    """A host crash can leave the end of a segment zero-filled (the file grew, its pages were never written):
    cut away with a warning and counted, not a damaged record that stops the start."""
    items, path = one_segment_log(tmp_path, 20)
    whole = path.stat().st_size
    with open(path, "ab") as f:
        f.write(tail)
    with TickLog(tmp_path) as log:
        assert log.next_record == 20 and log.stats.torn_tails == 1
        log.append(b"after")
    assert "zero bytes to the end of the file" in capsys.readouterr().err
    assert path.stat().st_size == whole + HEADER.size + len(b"after")
    assert [p for _, p in read(tmp_path)] == items + [b"after"]


def flip_last_bytes(path: Path) -> None:
    """The last record's checksum wrong: its last page partly written when the host died."""
    data = bytearray(path.read_bytes())
    for i in range(1, 5):
        data[-i] ^= 0xFF
    path.write_bytes(bytes(data))


def append_garbage(path: Path) -> None:
    """Blocks allocated but never written, holding old data (ext4 data=writeback, no power-loss protection)."""
    with open(path, "ab") as f:
        f.write(random.Random(7).randbytes(4096))


@pytest.mark.parametrize("prefix", ["ticks", "answers"])
@pytest.mark.parametrize("damage", [flip_last_bytes, append_garbage], ids=["last-record-flipped", "garbage-appended"])
def test_damage_with_nothing_valid_after_it_at_the_end_is_cut_like_a_torn_tail(tmp_path, capsys, damage,
                                                                                prefix) -> None:
    """What a host crash leaves at the end of the newest segment, in either log, is cut away with a warning naming
    the file, the offset and the bytes, and counted: not a stop that a supervisor restarts into for ever."""
    items = payloads(20)
    with TickLog(tmp_path, fsync="never", prefix=prefix) as log:
        for p in items:
            log.append(p)
    (_, path), = segments(tmp_path, prefix)
    last_start = sum(HEADER.size + len(p) for p in items[:-1])
    damage(path)
    kept = items[:-1] if damage is flip_last_bytes else items
    cut_at = last_start if damage is flip_last_bytes else last_start + HEADER.size + len(items[-1])
    with TickLog(tmp_path, prefix=prefix) as log:
        assert log.next_record == len(kept) and log.stats.torn_tails == 1
        log.append(b"after")
    err = capsys.readouterr().err
    assert f"{path}: damaged bytes (" in err and f"; no valid record after them) at byte {cut_at} (torn tail: " in err
    assert [p for _, p in read(tmp_path, prefix=prefix)] == kept + [b"after"]


@pytest.mark.parametrize("tail", [HEADER.pack(b"FTk1", 100, 0) + b"x" * 40, random.Random(7).randbytes(4096),
                                  HEADER.pack(b"FTk1", 100, 7) + b"x" * 20 + b"\0" * 4000, b"\0" * 4096],
                         ids=["cut-short", "garbage", "a-record-ending-in-zeros", "zeros"])
def test_a_torn_tail_s_non_zero_bytes_are_kept_as_a_damaged_copy_before_the_cut(tmp_path, capsys, tail) -> None:
    """Bytes a torn tail's cut takes that are not all zero are kept as `<segment>.damaged` (`.damaged-2` at the next
    one, as skip_corrupt names them), exactly those bytes, and the cut's stderr line names the copy; zeros alone (pages
    never written) keep none. The records before them read back whole."""
    items, path = one_segment_log(tmp_path, 20)
    for time_ in (1, 2):
        with open(path, "ab") as f:
            f.write(tail)
        with TickLog(tmp_path) as log:
            assert log.next_record == 20 and log.stats.torn_tails == 1
        err = capsys.readouterr().err
        kept = path.with_name(path.name + (".damaged" if time_ == 1 else ".damaged-2"))
        if any(tail):
            assert kept.read_bytes() == tail
            assert f"(torn tail: {len(tail)} bytes) is cut away; the cut bytes are kept as {kept}\n" in err, err
        else:
            assert not list(tmp_path.glob("*.damaged*")) and "kept as" not in err
        assert [p for _, p in read(tmp_path)] == items


def test_a_torn_tail_read_without_changes_keeps_no_copy(tmp_path) -> None:
    """An export (read_unchanged) leaves the tail in the file, so it copies nothing either."""
    from engine.service.log_reading import read_unchanged

    items, path = one_segment_log(tmp_path, 20)
    append_garbage(path)
    assert [p for _, p in read_unchanged(tmp_path)] == items
    assert not list(tmp_path.glob("*.damaged*"))


def test_damage_at_the_end_of_an_older_segment_or_before_valid_records_still_stops(tmp_path) -> None:
    """Cutting there would lose accepted records a reader can read: the start stops with the file and offset."""
    items, path = one_segment_log(tmp_path, 20)
    append_garbage(path)
    good = b"after the garbage"
    with open(path, "ab") as f:
        f.write(HEADER.pack(b"FTk1", len(good), zlib.crc32(good)) + good)
    whole = sum(HEADER.size + len(p) for p in items)
    with pytest.raises(CorruptLog, match=rf"{path.name}: damaged record at byte {whole} \(bad magic\)"):
        TickLog(tmp_path)
    path.write_bytes(path.read_bytes()[:whole])
    with TickLog(tmp_path, segment_bytes=whole) as log:  # the next append starts a new segment
        log.append(b"in the newest segment")
    flip_last_bytes(path)
    with pytest.raises(CorruptLog, match=rf"{path.name}: damaged record at byte \d+ \(checksum mismatch\)"):
        list(read(tmp_path))


def test_skipped_damage_is_rewritten_away_so_the_next_start_needs_no_skip(tmp_path, capsys) -> None:
    """Zeros with records after them (what a start with skip_corrupt used to leave after a zero-filled tail):
    skipping them once leaves the log clean, the original kept as `<name>.damaged`, each skip said on stderr."""
    items, path = one_segment_log(tmp_path, 20)
    with open(path, "ab") as f:
        f.write(b"\0" * 4096)
    later = payloads(25)[20:]
    with TickLog(tmp_path, skip_corrupt=True) as log:  # the segment being written: repaired as it opens
        assert log.next_record == 20 and log.stats.corrupt_skipped == 0 and log.stats.torn_tails == 1
    with open(path, "ab") as f:  # records after the zeros, as appended by a flashtick that did not cut them
        f.write(b"\0" * 4096 + b"".join(HEADER.pack(b"FTk1", len(p), zlib.crc32(p)) + p for p in later))
    damaged = path.read_bytes()
    with pytest.raises(CorruptLog, match="bad magic"):
        TickLog(tmp_path)
    with TickLog(tmp_path, skip_corrupt=True) as log:
        assert log.next_record == 25 and log.stats.corrupt_skipped == 1
        log.append(b"after")
    err = capsys.readouterr().err
    whole = sum(HEADER.size + len(p) for p in items)
    assert f"skipped 4096 damaged bytes at byte {whole} (bad magic; 0 records lost" in err
    assert f"the damaged original is kept as {path.name}.damaged" in err
    assert path.with_name(path.name + ".damaged").read_bytes() == damaged
    with TickLog(tmp_path) as log:  # clean now: no skip_corrupt needed
        assert log.next_record == 26
    assert [p for _, p in read(tmp_path)] == items + later + [b"after"]


def test_damage_in_an_earlier_segment_is_rewritten_away_when_read_with_skip(tmp_path, capsys) -> None:
    items = payloads(200)
    with TickLog(tmp_path, segment_bytes=1024, fsync="never") as log:
        for p in items:
            log.append(p)
    (first, path), *_ = segments(tmp_path)
    data = bytearray(path.read_bytes())
    data[HEADER.size + 1] ^= 0xFF  # record 0's payload
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptLog, match="checksum mismatch"):
        list(read(tmp_path))
    assert [p for _, p in read(tmp_path, skip_corrupt=True)] == items[1:]
    assert "1 record lost" in capsys.readouterr().err
    assert [p for _, p in read(tmp_path)] == items[1:]  # clean now
    assert path.with_name(path.name + ".damaged").read_bytes() == bytes(data)
    assert [n for n, _ in segments(tmp_path)][0] == first  # its name (first record number) unchanged


def test_a_write_past_the_file_size_limit_fails_and_leaves_the_log_as_it_was(tmp_path) -> None:
    script = f"""
import resource, signal, sys
sys.path.insert(0, {str(ROOT)!r})
from engine.service.ticklog import LogWriteError, TickLog
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of being killed
log = TickLog({str(tmp_path)!r}, fsync="always")
for i in range(10):
    log.append(b"x" * 100)
resource.setrlimit(resource.RLIMIT_FSIZE, (log._size + 150, resource.RLIM_INFINITY))
log.append(b"y" * 100)  # fits
try:
    log.append(b"z" * 100)  # the limit cuts it in the middle
except LogWriteError as e:
    print("refused:", e)
print("next", log.next_record)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert "refused: tick log" in done.stdout and "next 11" in done.stdout, done.stdout + done.stderr
    assert [p for _, p in read(tmp_path)] == [b"x" * 100] * 10 + [b"y" * 100]  # no half record



def test_a_segment_that_cannot_be_made_leaves_no_stale_descriptor(tmp_path) -> None:
    """The data directory removed under a running log: the roll to a new segment fails, every append is refused,
    and no closed descriptor number is kept, to be written to or closed once the process reuses it for
    something else (a socket, another file)."""
    import shutil

    log = TickLog(tmp_path / "d", fsync="never", segment_bytes=64)
    for _ in range(4):  # the fourth fills its segment: the next append rolls to a new one
        log.append(b"x" * 40)
    shutil.rmtree(tmp_path / "d")
    with pytest.raises(LogWriteError, match="its directory was removed"):
        log.append(b"y" * 40)
    bystander = os.open(tmp_path / "bystander", os.O_WRONLY | os.O_CREAT)  # takes the lowest free number
    (tmp_path / "d").mkdir()  # made again, empty: a log started there would pass for the whole one at a restart
    for _ in range(3):
        with pytest.raises(LogWriteError, match="until the service restarts"):
            log.append(b"y" * 40)
    assert list((tmp_path / "d").iterdir()) == []
    assert os.write(bystander, b"still mine") == 10  # not closed, not written to by the log
    os.close(bystander)
    assert (tmp_path / "bystander").read_bytes() == b"still mine"
    log.close()


def test_a_deleted_segment_refuses_appends_rather_than_write_into_nothing(tmp_path, monkeypatch, capsys) -> None:
    import shutil

    import engine.service.ticklog as ticklog

    log = TickLog(tmp_path / "d", fsync="never")
    log.append(b"first")
    shutil.rmtree(tmp_path / "d")  # the segment stays open, unlinked: writes would vanish at the next start
    monkeypatch.setattr(ticklog, "DELETED_CHECK_S", 0.0)
    for _ in range(2):
        with pytest.raises(LogWriteError, match="was deleted"):
            log.append(b"second")
    assert "data directory removed" in capsys.readouterr().err
    log.close()


def test_an_idle_log_notices_its_deleted_file_at_a_check(tmp_path, capsys) -> None:
    """No appends arrive (a quiet feed): the heartbeat's check says it at once, and the next append is refused."""
    import shutil

    log = TickLog(tmp_path / "d", fsync="never")
    log.append(b"first")
    shutil.rmtree(tmp_path / "d")
    log.check()
    assert "its file was deleted" in capsys.readouterr().err
    with pytest.raises(LogWriteError, match="nothing more is accepted until the service restarts"):
        log.append(b"second")
    log.close()


def test_a_moved_data_directory_refuses_appends_and_says_where_a_restart_reads(tmp_path, capsys) -> None:
    """`mv` of the data directory under a running service: the open segment kept taking writes (its file still
    linked, in the moved folder), which a restart reading the configured path never sees."""
    log = TickLog(tmp_path / "d" / "ticks", fsync="never")
    log.append(b"first")
    (tmp_path / "d").rename(tmp_path / "moved")
    log.check()  # the heartbeat's check, with no append arriving
    said = capsys.readouterr().err
    assert f"{tmp_path / 'd' / 'ticks'} is no longer the directory it writes into (was the data directory moved" in said
    with pytest.raises(LogWriteError, match="nothing more is accepted until the service restarts"):
        log.append(b"second")
    log.close()
    assert [p for _, p in read(tmp_path / "moved" / "ticks")] == [b"first"]


def test_retention_drops_the_oldest_segments(tmp_path) -> None:
    with TickLog(tmp_path, segment_bytes=512, retention_bytes=2048, fsync="never") as log:
        for p in payloads(200):
            log.append(p)
        assert log.stats.segments_dropped > 0
    total = sum(path.stat().st_size for _, path in segments(tmp_path))
    assert total <= 2048 + 512 + 200
    numbers = [n for n, _ in read(tmp_path)]
    assert numbers == list(range(numbers[0], 200))  # a contiguous suffix


def test_fsync_policies(tmp_path) -> None:
    for policy, expected in (("always", 50), ("never", 0)):
        with TickLog(tmp_path / policy, fsync=policy) as log:
            for p in payloads(50):
                log.append(p)
            assert log.stats.fsyncs == expected
    with TickLog(tmp_path / "group", fsync="group", group_ms=60_000) as log:
        for p in payloads(50):
            log.append(p)
        assert log.stats.fsyncs == 0  # the window has not passed: appends never wait for the disk
    assert log.stats.fsyncs == 1  # close syncs what is pending
    with TickLog(tmp_path / "group-fast", fsync="group", group_ms=1) as log:
        for p in payloads(50):
            log.append(p)
        deadline = time.monotonic() + 10
        while log.stats.fsyncs == 0 and time.monotonic() < deadline:  # the group-commit thread's work
            time.sleep(0.01)
        assert log.stats.fsyncs >= 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=6),
       cut=st.integers(0, 10**6))
def test_any_damage_is_found_never_crashes(tmp_path_factory, flips, cut) -> None:
    directory = tmp_path_factory.mktemp("fuzz")
    items, path = one_segment_log(directory, 40)
    data = bytearray(path.read_bytes())
    for position, xor in flips:
        data[position % len(data)] ^= xor
    path.write_bytes(bytes(data[: len(data) - cut % 64]))
    try:
        got = [p for _, p in read(directory)]
        assert got == items[: len(got)]  # read without complaint: exactly a prefix of what was written
    except CorruptLog as e:
        assert e.path == path and 0 <= e.offset < len(data)
    skipped = [p for _, p in read(directory, skip_corrupt=True)]
    assert all(p in items for p in skipped)


def test_retention_applies_when_the_log_opens(tmp_path) -> None:
    """A service down longer than retention_s (or restarted with a smaller retention_bytes) drops the segments
    it would have dropped live before anything replays them; the segment in use stays."""
    with TickLog(tmp_path, segment_bytes=512, fsync="never") as log:
        for p in payloads(100):
            log.append(p)
    existing = segments(tmp_path)
    assert len(existing) > 3
    old = time.time() - 3600
    for _, path in existing[:-1]:
        os.utime(path, (old, old))
    with TickLog(tmp_path, segment_bytes=512, retention_s=7200, fsync="never") as log:
        assert log.stats.segments_dropped == 0 and segments(tmp_path) == existing  # within retention: kept
    with TickLog(tmp_path, segment_bytes=512, retention_s=60, fsync="never") as log:
        assert log.stats.segments_dropped == len(existing) - 1
        assert log.next_record == 100
        log.append(b"next")
    assert segments(tmp_path) == existing[-1:]
    numbers = [n for n, _ in read(tmp_path)]
    assert numbers == list(range(existing[-1][0], 101))
