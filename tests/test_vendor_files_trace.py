"""FINRA TRACE corporate-bond files as a data engineer brought them (review248): cancels and corrections marked in
`TRC_ST` and referred back by `ORIG_MSG_SEQ_NB`, capped sizes (`1MM+`, `5MM+`), and Enhanced TRACE's own column
names. Every fixture is written here, from code, into tmp_path."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from connectors.replay import FileReplay
from conftest import drain

TRACE_HEADER = "CUSIP_ID,TRD_EXCTN_DT,TRD_EXCTN_TM,ENTRD_VOL_QT,RPTD_PR,YLD_PT,RPT_SIDE_CD,TRC_ST,MSG_SEQ_NB," \
               "ORIG_MSG_SEQ_NB\n"
TRACE_MAP = {"ts": "TRD_EXCTN_DT+TRD_EXCTN_TM", "price": "RPTD_PR", "size": "ENTRD_VOL_QT", "side": "RPT_SIDE_CD",
             "stream_col": "CUSIP_ID", "tz": "America/New_York"}


def trace_rows(sizes: tuple[str, ...] = ("5000", "25000", "100000")) -> str:
    """Twelve reports of two bonds; the 5th cancels the 2nd and the 9th corrects the 6th (by their MSG_SEQ_NB)."""
    rows = []
    for i in range(12):
        status, orig = {4: ("X", "1001"), 8: ("C", "1005")}.get(i, ("T", ""))
        rows.append(f"{('037833AK6', '594918BR4')[i % 2]},20240304,13:30:{i:02d},{sizes[i % len(sizes)]},"
                    f"{100.5 + i / 100:.3f},{4.9 - i / 1000:.4f},{'BS'[i % 2]},{status},{1000 + i},{orig}\n")
    return TRACE_HEADER + "".join(rows)


def test_trace_cancels_and_corrections_are_said_by_their_own_names(tmp_path: Path) -> None:
    """Review248 #2: TRC_ST's X (cancel) and C (correction), referring back by ORIG_MSG_SEQ_NB, replayed as new
    trades with no caution, in a detected run and a mapped one, though docs/replay.md promises one (it came when the
    column was renamed orig_trade_id). Both runs now say so, name the keep that leaves them out and count the
    reports they refer to by MSG_SEQ_NB."""
    path = tmp_path / "trace.csv"
    path.write_text(trace_rows())
    detected = tmp_path / "detected.csv"  # the same reports under names detection reads
    detected.write_text(path.read_text().replace("CUSIP_ID,TRD_EXCTN_DT,TRD_EXCTN_TM,ENTRD_VOL_QT,RPTD_PR",
                                                 "symbol,date,time,size,price"))
    for replay in (FileReplay(path, columns=TRACE_MAP), FileReplay(detected)):
        assert len(drain(replay)) == 12  # not applied: each row replays as a trade
        note = next(n for n in replay.cautions if "by reference are not applied" in n)
        assert 'column "TRC_ST" marks rows that amend an earlier trade (C correction, X cancel)' in note, note
        assert 'column "ORIG_MSG_SEQ_NB" refers rows to earlier trades (1001, 1005' in note
        assert "keep: {TRC_ST: [T]}" in note
        assert "the 2 trades they refer to (MSG_SEQ_NB 1001 at 100.51" in note
    kept = FileReplay(path, columns={**TRACE_MAP, "keep": {"TRC_ST": ["T"]}})
    assert len(drain(kept)) == 10 and dict(kept.rejected) == {"filtered_out": 2}
    # a status column's letters are TRACE's under its name only: an `action` of C and X is no cancel
    plain = tmp_path / "plain.csv"
    plain.write_text(detected.read_text().replace("TRC_ST", "action").replace(",MSG_SEQ_NB,ORIG_MSG_SEQ_NB", ",a,b"))
    assert not any("by reference" in n for n in FileReplay(plain).notes)


def test_a_keep_that_leaves_out_the_amending_rows_gets_no_keep_suggested(tmp_path: Path) -> None:
    """A map keeping `TRC_ST: [T]` already leaves out the cancels and corrections, and with them every row that
    refers back by ORIG_MSG_SEQ_NB; the caution still suggested `keep: {ORIG_MSG_SEQ_NB: [""]}` and said each such
    row replays as a new trade. A keep that lets a referring row through (`[T, C]`) is still told; a CSV and a
    Parquet copy (its reference column a number, null for none) alike."""
    path = tmp_path / "trace.csv"
    path.write_text(trace_rows())
    parquet = tmp_path / "trace.parquet"
    pl.read_csv(path, infer_schema_length=0).with_columns(
        pl.col("ORIG_MSG_SEQ_NB").cast(pl.Int64), pl.col("MSG_SEQ_NB").cast(pl.Int64)).write_parquet(parquet)
    for copy in (path, parquet):
        kept = FileReplay(copy, columns={**TRACE_MAP, "keep": {"TRC_ST": ["T"]}})
        assert not any("by reference" in n or "ORIG_MSG_SEQ_NB" in n for n in kept.cautions), kept.cautions
        assert len(drain(kept)) == 10
        corrections_kept = FileReplay(copy, columns={**TRACE_MAP, "keep": {"TRC_ST": ["T", "C"]}})
        note = next(n for n in corrections_kept.cautions if "by reference are not applied" in n)
        assert 'column "ORIG_MSG_SEQ_NB" refers rows to earlier trades (1001, 1005' in note, note
        assert 'keep: {ORIG_MSG_SEQ_NB: [""]}' in note


def test_trace_capped_sizes_read_as_their_cap_with_a_note(tmp_path: Path) -> None:
    """Review248 #4: TRACE's capped sizes (`1MM+`, `5MM+`: a million, five million or more) were refused as
    missing_field ('5MM+' is not a number), the largest prints of the file, with no next step. They now read as
    their cap, with a note that the size is a lower bound; in a CSV and in a Parquet file's text column."""
    path = tmp_path / "trace.csv"
    path.write_text(trace_rows(("5000", "1MM+", "5MM+", "250000")))
    replay = FileReplay(path, columns=TRACE_MAP)
    ticks = drain(replay)
    assert not replay.rejected and [t.size for t in ticks[:4]] == [5000, 1_000_000, 5_000_000, 250_000]
    note = next(n for n in replay.notes if "capped sizes" in n)
    assert 'column "ENTRD_VOL_QT" holds capped sizes on 6 rows' in note, note
    assert "read 1MM+ as 1,000,000, 5MM+ as 5,000,000, the least each can be" in note and "lower bound" in note
    parquet = tmp_path / "trace.parquet"
    pl.read_csv(path, infer_schema=False).write_parquet(parquet)
    again = FileReplay(parquet, columns=TRACE_MAP)
    assert [t.size for t in drain(again)][:4] == [5000, 1_000_000, 5_000_000, 250_000] and not again.rejected
    assert not any("capped sizes" in n for n in FileReplay(path, columns={**TRACE_MAP, "size": "MSG_SEQ_NB"}).notes)


def test_enhanced_trace_columns_are_detected_and_a_price_beside_a_yield_needs_no_conversion(tmp_path: Path) -> None:
    """Review248 #7: Enhanced TRACE's own names were not detected, and the refusal's one hint was to convert the
    yield (YLD_PT) to prices, though RPTD_PR is the price. They now read as ts=TRD_EXCTN_DT+TRD_EXCTN_TM (the
    execution's, not the report's), stream=CUSIP_ID, price=RPTD_PR, size=ENTRD_VOL_QT; a file refused for another
    reason (no time) names the yield only when no column is the price."""
    path = tmp_path / "trace.csv"
    path.write_text(TRACE_HEADER.replace("TRD_EXCTN_TM,", "TRD_EXCTN_TM,TRD_RPT_DT,TRD_RPT_TM,") + "".join(
        line.replace(f",13:30:{i:02d},", f",13:30:{i:02d},20240304,13:5{i % 10}:00,")  # reported later
        for i, line in enumerate(trace_rows().splitlines(keepends=True)[1:])))
    replay = FileReplay(path, columns={"tz": "America/New_York"})
    ticks = drain(replay)
    assert any("read as ts=TRD_EXCTN_DT+TRD_EXCTN_TM (datetime" in n and "stream=CUSIP_ID, price=RPTD_PR, "
               "size=ENTRD_VOL_QT" in n for n in replay.notes), replay.notes
    assert ticks[0].ts == 1709577000_000_000_000 and ticks[0].stream == "037833AK6"  # 13:30 New York: 18:30Z
    assert [t.price for t in ticks[:2]] == [100.5, 100.51] and ticks[1].size == 25000
    timeless = tmp_path / "timeless.csv"
    timeless.write_text("CUSIP_ID,RPTD_PR,YLD_PT,ENTRD_VOL_QT\n037833AK6,100.5,4.9,5000\n")
    with pytest.raises(ValueError) as refused:
        FileReplay(timeless)
    assert "no time column" in str(refused.value) and "yield" not in str(refused.value), refused.value
    yields_only = tmp_path / "yields.csv"
    yields_only.write_text("CUSIP_ID,YLD_PT,ENTRD_VOL_QT\n037833AK6,4.9,5000\n")
    with pytest.raises(ValueError, match='"YLD_PT" is named as a yield'):
        FileReplay(yields_only)


def test_trace_execution_times_are_read_on_new_yorks_clock_unless_tz_says_otherwise(tmp_path: Path) -> None:
    """TRACE's TRD_EXCTN_DT+TRD_EXCTN_TM are Eastern wall-clock times; detected, they were read as UTC (a note named
    --tz), 4 or 5 hours early. Read in America/New_York by the layout (EST on 2024-03-04: 13:30 = 18:30Z), with a
    note; --tz (UTC here) wins."""
    path = tmp_path / "trace.csv"
    path.write_text(trace_rows())
    replay = FileReplay(path)
    ticks = drain(replay)
    assert ticks[0].ts == 1709577000 * 10**9  # 2024-03-04T18:30:00Z
    assert "trace.csv: its times (TRD_EXCTN_DT+TRD_EXCTN_TM) read as New York wall-clock times (America/New_York, " \
           "summer time included), the zone FINRA TRACE writes them in (--tz ZONE says otherwise)" in replay.notes
    assert not any("read as UTC" in note for note in replay.notes)
    utc = FileReplay(path, columns={"tz": "UTC"})
    assert drain(utc)[0].ts == 1709559000 * 10**9  # 2024-03-04T13:30:00Z
    assert not any("FINRA TRACE writes" in note for note in utc.notes)
    # times that carry their own offset keep it: the zone is for naive times (before, such a file was refused,
    # "tz='America/New_York' is for naive times: drop it", though no --tz was given; TAQ's layout too)
    offset = tmp_path / "trace_offsets.csv"
    offset.write_text(re.sub(r",(13:30:\d\d),", r",\1+00:00,", path.read_text()))
    with_offsets = FileReplay(offset)
    assert [t.ts for t in drain(with_offsets)][:2] == [1709559000 * 10**9, 1709559001 * 10**9]
    assert not with_offsets.rejected and not any("FINRA TRACE writes" in note for note in with_offsets.notes)


def test_a_full_map_of_traces_own_time_columns_reads_them_on_new_yorks_clock(tmp_path: Path) -> None:
    """Review272 #3: a map naming TRD_EXCTN_DT+TRD_EXCTN_TM and no tz (the map with `keep: {TRC_ST: [T]}` the
    cancels caution leads to) read them as UTC, 5 h early in March (EST), where detection reads Eastern time. It
    now reads them as detection does, with its note; a tz in the map wins."""
    path = tmp_path / "trace.csv"
    path.write_text(trace_rows())
    untzed = {k: v for k, v in TRACE_MAP.items() if k != "tz"} | {"keep": {"TRC_ST": ["T"]}}
    mapped = FileReplay(path, columns=untzed)
    assert drain(mapped)[0].ts == 1709577000 * 10**9  # 2024-03-04T18:30:00Z, as detected
    assert "trace.csv: its times (TRD_EXCTN_DT+TRD_EXCTN_TM) read as New York wall-clock times (America/New_York, " \
           "summer time included), the zone FINRA TRACE writes them in (--tz ZONE says otherwise)" in mapped.notes
    assert not any("read as UTC" in note for note in mapped.notes)
    utc = FileReplay(path, columns=untzed | {"tz": "UTC"})
    assert drain(utc)[0].ts == 1709559000 * 10**9 and not any("FINRA TRACE writes" in n for n in utc.notes)
