"""Exports joined one after another (`cat a.csv b.csv`, review 108): the second file's header row repeated inside,
its byte-order mark at the start of a line inside, and a footer line whose number the delimiter splits. Each is a
line that holds no tick, said as such, never a reject nor a stream of its own. Every fixture is written here."""

from __future__ import annotations

from pathlib import Path

from connectors.replay import FileReplay
from conftest import drain

BOM = "\ufeff"
HEADER = "timestamp,symbol,price,size\r\n"


def trades(first: int, count: int) -> str:
    return "".join(f"2024-08-08 23:54:{first + i:02d}.342Z,BTCUSDT,\"61,837.{i + 10}\",0.0{i + 1}\r\n"
                   for i in range(count))


def test_a_repeated_header_and_a_split_footer_are_lines_without_ticks(tmp_path: Path) -> None:
    path = tmp_path / "joined.csv"
    path.write_text(BOM + HEADER + trades(0, 3) + HEADER + trades(3, 3) + "Total rows: 6,000\r\n\r\n",
                    encoding="utf-8", newline="")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [t.price for t in ticks] == [61837.1, 61837.11, 61837.12] * 2
    assert {t.stream for t in ticks} == {"BTCUSDT"}
    assert dict(replay.rejected) == {"filtered_out": 2}
    assert replay.rejected.streams_of() == {}  # no `symbol` nor `000` stream that lost every tick
    assert replay.rejected.examples["filtered_out"].startswith(
        f"{path} line 5: filtered_out: the line repeats the header row (files joined one after another")
    assert f"{path} line 5 repeats the header row: files joined one after another" in " ".join(replay.notes)
    assert {name for plan in replay.plans for name in plan.stream_names()} == {"BTCUSDT"}


def test_a_footer_of_a_semicolon_file_and_a_split_one_read_alike(tmp_path: Path) -> None:
    split = tmp_path / "split.csv"
    split.write_text(HEADER + trades(0, 2) + "Total rows: 2,000\r\n", newline="")
    replay = FileReplay(split)
    assert len(drain(replay)) == 2 and dict(replay.rejected) == {"filtered_out": 1}
    assert 'a footer line ("Total rows: 2,000"), no tick' in replay.rejected.examples["filtered_out"]
    # a last line of data whose time does not read is still a reject, not a footer
    split.write_text(HEADER + trades(0, 2) + "late,BTCUSDT,61837.5,1\r\n", newline="")
    replay = FileReplay(split)
    assert len(drain(replay)) == 2 and dict(replay.rejected) == {"missing_field": 1}


def test_a_byte_order_mark_inside_the_file_is_no_part_of_the_cell(tmp_path: Path) -> None:
    path = tmp_path / "appended.csv"
    path.write_text(BOM + HEADER + trades(0, 2) + BOM + trades(2, 2), encoding="utf-8", newline="")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert len(ticks) == 4 and dict(replay.rejected) == {}
    assert ticks[2].ts == 1723161242342000000  # 23:54:02.342Z


def test_a_byte_order_mark_before_an_epoch_number_is_named_in_its_reject(tmp_path: Path) -> None:
    """A first column read as whole numbers cannot drop the mark: the row is rejected, the reject naming it."""
    path = tmp_path / "appended_ms.csv"
    path.write_text(f"{BOM}time,symbol,price,size\n1723161255342,BTCUSDT,61837.5,1\n"
                    f"{BOM}1723161255617,BTCUSDT,61837.6,2\n1723161255700,BTCUSDT,61837.7,3\n", encoding="utf-8")
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [61837.5, 61837.7]
    assert dict(replay.rejected) == {"missing_field": 1}
    assert '"\\ufeff1723161255617" is not a time the map reads: it starts with a byte-order mark (U+FEFF)' in \
        replay.rejected.examples["missing_field"]
