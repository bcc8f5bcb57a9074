"""A zip of many small tick files plans each member from its rows parsed once (connectors/small_csv_scans.py): the
answers are those of the same files given one by one, members of different layouts each read as their own, and a
file written again is read again."""

from __future__ import annotations

import zipfile
from pathlib import Path

from connectors.replay import FileReplay

DAY_MS = 1_717_200_000_000  # 2024-06-01 UTC


def small_trades(path: Path, symbol: str, start_ms: int, rows: int = 20, price: float = 100.0) -> Path:
    """A day's few trades: epoch-ms times, a symbol column, prices moving a cent at a time."""
    lines = ["timestamp,symbol,price,size,side"]
    for i in range(rows):
        price += (-0.01, 0.01, 0.02)[i * 7 % 3]
        lines.append(f"{start_ms + 1_000 * i + i * 37 % 500},{symbol},{price:.2f},{1 + i % 9},{('buy', 'sell')[i % 2]}")
    path.write_text("\n".join(lines) + "\n")
    return path


def zipped(archive: Path, *members: Path) -> Path:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for member in members:
            z.write(member, member.name)
    return archive


def all_ticks(replay: FileReplay) -> list:
    with replay:
        ticks = []
        while batch := replay.next_batch(10_000):
            ticks += batch
        return ticks


def test_a_zip_of_small_members_reads_as_the_same_files_given_apart(tmp_path: Path) -> None:
    """16 members (40 before: each member's planning is the cost): a member's 8 ways of reading it, 128 frames
    in all, still overflow the HELD_FRAMES (64) held, so frames are let go and read again as planning goes on."""
    (tmp_path / "files").mkdir()
    members = 16
    files = [small_trades(tmp_path / "files" / f"S{i:02d}.csv", f"S{i:02d}", DAY_MS + i * 777, price=50.0 + i)
             for i in range(members)]
    archive = zipped(tmp_path / "days.zip", *files)
    packed, apart = FileReplay(archive), FileReplay(files)
    packed_ticks, apart_ticks = all_ticks(packed), all_ticks(apart)
    assert len(packed_ticks) == members * 20 and packed_ticks == apart_ticks
    assert {t.stream for t in packed_ticks} == {f"S{i:02d}" for i in range(members)}
    assert packed.rejected == apart.rejected == {}


def test_members_of_different_layouts_each_read_their_own(tmp_path: Path) -> None:
    """Members alike in name and size but not in layout: epoch ms, the same header over epoch seconds, ISO text
    times under other names, a `;` file with decimal commas. Each reads as it does alone."""
    (tmp_path / "m").mkdir()
    ms = small_trades(tmp_path / "m" / "a_ms.csv", "AAA", DAY_MS)
    seconds = tmp_path / "m" / "b_s.csv"
    seconds.write_text("timestamp,symbol,price,size,side\n" + "".join(
        f"{DAY_MS // 1000 + 60 * i},BBB,{200 + i / 4:.2f},{i + 1},buy\n" for i in range(20)))
    iso = tmp_path / "m" / "c_iso.csv"
    iso.write_text("time,ticker,px,qty\n" + "".join(
        f"2024-06-01T00:{i:02d}:30.250Z,CCC,{300 + i / 8:.3f},{i + 2}\n" for i in range(20)))
    semicolon = tmp_path / "m" / "d_semicolon.csv"
    semicolon.write_text("timestamp;symbol;price;size\n" + "".join(
        f"{DAY_MS + 500 * i};DDD;{400 + i:d},{25 * (i % 4):02d};{i + 1}\n" for i in range(20)))
    members = [ms, seconds, iso, semicolon]
    archive = zipped(tmp_path / "mixed.zip", *members)
    by_stream: dict[str, list] = {}
    for tick in all_ticks(FileReplay(archive)):
        by_stream.setdefault(tick.stream, []).append(tick)
    for member, stream in zip(members, ["AAA", "BBB", "CCC", "DDD"]):
        assert by_stream[stream] == all_ticks(FileReplay(member)), member.name
    ns = 1_000_000
    assert by_stream["AAA"][0].ts == DAY_MS * ns
    assert by_stream["BBB"][1].ts == (DAY_MS // 1000 + 60) * 10**9
    assert by_stream["CCC"][0].ts == DAY_MS * ns + 30_250 * ns
    assert by_stream["DDD"][1].price == 401.25 and by_stream["DDD"][1].ts == (DAY_MS + 500) * ns


def test_a_small_file_written_again_is_read_again(tmp_path: Path) -> None:
    """Its rows held in memory are keyed on its size and mtime too: a file rewritten in place reads its new rows."""
    path = small_trades(tmp_path / "day.csv", "AAA", DAY_MS, price=100.0)
    first = all_ticks(FileReplay(path))
    small_trades(path, "AAA", DAY_MS + 5_000, rows=21, price=250.0)
    again = all_ticks(FileReplay(path))
    assert len(first) == 20 and len(again) == 21
    assert first[0].price < 101 and again[0].price > 249 and again[0].ts == (DAY_MS + 5_000) * 1_000_000
