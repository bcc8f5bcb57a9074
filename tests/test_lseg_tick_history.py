"""fix374 (review373 #4, #5, #6): LSEG Tick History as a European desk exports it. An index RIC's `Trade` rows
(`.GDAXI`: a `Price`, an empty `Volume`) were each rejected, a whole instrument lost with no option for a file;
`Qualifiers` (opening and closing auction prints) were ignored without a word; and a user's `keep` replaced the
detected `Type in Trade|Quote` filter, so `Market Condition` rows came back as rejects. Real files in tmp_path,
read by FileReplay (the reader the CLI uses)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain

HEADER = "#RIC,Domain,Date-Time,GMT Offset,Type,Price,Volume,Bid Price,Bid Size,Ask Price,Ask Size,Qualifiers\n"


def _index_and_stock(vod_gap: bool = False) -> str:
    rows = []
    for i in range(20):
        rows.append(f".GDAXI,Market Price,2025-03-28T09:00:{i:02d}.5,+1,Trade,{22462.02 + i:.2f},,,,,,\"\"\n")
        volume = "" if vod_gap and i == 7 else str(100 + i)
        rows.append(f"VOD.L,Market Price,2025-03-28T08:00:{i:02d}.7,+0,Trade,{72.5 + i / 100:.2f},{volume},,,,,\"\"\n")
    return HEADER + "".join(rows)


def test_an_index_rics_price_only_rows_read_as_a_price_series(tmp_path: Path) -> None:
    path = tmp_path / "trth_idx_vod.csv"
    path.write_text(_index_and_stock())
    replay = FileReplay(path)
    ticks = drain(replay)
    assert Counter(t.stream for t in ticks) == {".GDAXI": 20, "VOD.L": 20} and not dict(replay.rejected)
    assert {t.size for t in ticks if t.stream == ".GDAXI"} == {1.0}
    assert [t.size for t in ticks if t.stream == "VOD.L"][:3] == [100.0, 101.0, 102.0]
    assert any(".GDAXI: no trade row of this stream has a size" in note for note in replay.notes), replay.notes


def test_an_empty_size_among_a_streams_sized_trades_is_still_rejected(tmp_path: Path) -> None:
    path = tmp_path / "trth_gap.csv"
    path.write_text(_index_and_stock(vod_gap=True))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert dict(replay.rejected) == {"missing_field": 1}
    assert Counter(t.stream for t in ticks) == {".GDAXI": 20, "VOD.L": 19}
    said = replay.rejected.examples["missing_field"]  # advice for a file's row, not for a wire client's tick
    assert "its stream has sizes on other trade rows" in said and "is sent with size 1" not in said, said


def test_a_row_without_its_gmt_offset_is_rejected_naming_that_cell_and_a_decimal_comma_offset_reads(
        tmp_path: Path) -> None:
    """review440 #11: local `Date-Time`s beside `GMT Offset`; a row whose offset was left empty was rejected blaming
    its time (`"28.03.2024 09:10:02,191" is not a time the map reads`), and `1,0` (a German Excel save's) beside
    `+01:00` in the column was no offset either, a third of the file rejected so."""
    offsets = ["1,0", "+01:00", "1", "", "1,0"]
    path = tmp_path / "th_offsets.csv"
    path.write_text("#RIC;Domain;Date-Time;GMT Offset;Type;Price;Volume\n" + "".join(
        f"SAPG.DE;Market Price;28.03.2024 09:1{i}:02,191;{offset};Trade;18{i},50;100\n"
        for i, offset in enumerate(offsets)))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [t.ts for t in ticks] == [1_711_613_402_191_000_000 + i * 60 * 10**9 for i in (0, 1, 2, 4)]  # 08:1i Z
    assert replay.rejected.examples["missing_field"].endswith(
        'line 5: missing_field: field "ts" is required (column "GMT Offset": empty; the row\'s time "28.03.2024 '
        '09:13:02,191" is a wall-clock time read at its offset, so without one it is no instant: write the row\'s '
        'offset)'), replay.rejected.examples


def _auction_day() -> str:
    """A stock's day: an opening auction print, continuous trades and quotes, a Market Condition row, a closing
    auction print."""
    rows = ['SIEGn.DE,Market Price,2025-03-28T08:00:00.05Z,+1,Trade,212.30,5000,,,,,'
            '"AUC[GV3_FLAG];Opening auction[TR_TRD_FLAG];  [PRC_QL_CD]"',
            'SIEGn.DE,Market Price,2025-03-28T08:00:01.00Z,+1,Market Condition,,,,,,,"VOLA[INST_PHASE]"']
    for i in range(10):
        rows.append(f'SIEGn.DE,Market Price,2025-03-28T08:01:{i:02d}.10Z,+1,Quote,,,{212.2 + i / 100:.2f},300,'
                    f'{212.3 + i / 100:.2f},200,"[BID_TONE];   [ASK_TONE]"')
        rows.append(f'SIEGn.DE,Market Price,2025-03-28T08:01:{i:02d}.50Z,+1,Trade,{212.25 + i / 100:.2f},{100 + i},,,,,'
                    f'" [ACT_FLAG1];A[GV3_FLAG];   [PRC_QL_CD]"')
    rows.append('SIEGn.DE,Market Price,2025-03-28T16:35:00.00Z,+1,Trade,212.15,36100,,,,,'
                '"CLS[GV3_FLAG];Closing auction[TR_TRD_FLAG]"')
    return HEADER + "\n".join(rows) + "\n"


def test_auction_prints_in_qualifiers_are_said_with_the_filter_that_leaves_them_out(tmp_path: Path) -> None:
    path = tmp_path / "trth_long.csv"
    path.write_text(_auction_day())
    replay = FileReplay(path)
    ticks = drain(replay)
    assert Counter(t.kind for t in ticks) == {"trade": 12, "quote": 10}  # the auction prints replay, said
    note = next(n for n in replay.notes if "qualifiers are not read" in n)
    assert "2 trade row(s) are marked as auction prints (AUC[GV3_FLAG], CLS[GV3_FLAG]" in note, note
    assert 'keep: {Qualifiers: {not_contains: ["AUC[GV3_FLAG]", "CLS[GV3_FLAG]"]}}' in note, note


def test_a_keep_given_refines_the_detected_type_filter(tmp_path: Path) -> None:
    path, keep = tmp_path / "trth_long.csv", tmp_path / "keep_auc.yaml"
    path.write_text(_auction_day())
    keep.write_text('keep:\n  Qualifiers:\n    not_contains: ["AUC[GV3_FLAG]", "CLS[GV3_FLAG]"]\n')
    replay = FileReplay(path, columns=map_from_options(columns=str(keep), detect=True))
    ticks = drain(replay)
    assert Counter(t.kind for t in ticks) == {"trade": 10, "quote": 10}
    # the two auction prints left out by the keep given, the Market Condition row by the detected Type filter
    assert dict(replay.rejected) == {"filtered_out": 3}
    assert any("keep Type in Trade|Quote, keep Qualifiers not containing" in n for n in replay.notes), replay.notes
    assert not any("qualifiers are not read" in n for n in replay.notes)


def test_mifid_auction_trading_modes_are_said_with_the_keep_that_leaves_them_out(tmp_path: Path) -> None:
    """review440 #10: a Euronext trades file's `MMT Trading Mode` marks the opening (O) and closing (K) uncrosses
    among continuous (2) prints; they replayed as continuous trading without the note LSEG's Qualifiers get. The
    note counts them, and its keep leaves them out."""
    path, keep = tmp_path / "euronext_asml.csv", tmp_path / "keep_mmt.yaml"
    rows = [f"2024-10-25 09:{i:02d}:10.000,ASML,{650 + i / 10:.1f},{100 + i},EUR,2" for i in range(1, 11)]
    path.write_text("Time,Symbol,Price,Quantity,Currency,MMT Trading Mode\n"
                    "2024-10-25 09:00:00.000,ASML,650.0,45000,EUR,O\n" + "\n".join(rows) +
                    "\n2024-10-25 17:35:00.000,ASML,651.2,120000,EUR,K\n")
    replay = FileReplay(path, columns=map_from_options(detect=True, tz="Europe/Amsterdam"))
    assert len(drain(replay)) == 12
    note = next(n for n in replay.notes if "trading modes are not read" in n)
    assert '2 trade row(s) are marked as auction prints (K closing auction, O opening auction)' in note, note
    assert 'keep: {"MMT Trading Mode": {not: ["K", "O"]}}' in note, note
    keep.write_text('tz: Europe/Amsterdam\n' + note.split("keep: ")[1].split(" (docs")[0].join(("keep: ", "\n")))
    replay = FileReplay(path, columns=map_from_options(columns=str(keep), detect=True))
    assert len(drain(replay)) == 10 and dict(replay.rejected) == {"filtered_out": 2}
    assert not any("trading modes are not read" in n for n in replay.notes)


def test_a_one_stream_file_whose_size_column_is_empty_is_a_price_series_named_by_its_file(tmp_path: Path) -> None:
    path = tmp_path / "DAX.csv"
    path.write_text("time,price,volume\n" + "".join(f"2025-03-28T09:00:0{i}Z,{22462 + i},\n" for i in range(5)))
    replay = FileReplay(path)
    assert [(t.stream, t.size) for t in drain(replay)] == [("DAX", 1.0)] * 5
    assert any("DAX.csv: DAX: no trade row of this stream has a size" in note for note in replay.notes), replay.notes
