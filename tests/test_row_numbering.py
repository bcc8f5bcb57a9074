"""The `row` a backtest's answer (and an evaluate point) names is the data row a user sees in the file, 0-based after
the header (docs/replay.md: a CSV's line is `row` + 2): in CSVs with blank lines in the middle and at the end, CRLF
line ends and a byte order mark; and in Databento's order-book exports (CSV and Parquet), whose records make one tick
or none, a quote naming the record that ended its event. Real files written here, read by the real FileReplay, whose
`origins` are what tick_origins.py keeps."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from connectors.replay import FileReplay

T0 = 1_717_421_400_000_000_000  # 2024-06-03 13:30 UTC
UNDEF = (1 << 63) - 1  # Databento's empty book side in its fixed-point exports
QUARTER = 10**9 // 4
F_LAST = 128


def drained(path: Path) -> list[tuple[object, int, int]]:
    """(tick, file, row) of every tick the replay of ``path`` gives, with the origins each batch gave."""
    out = []
    with FileReplay(path) as replay:
        while not replay.done:
            ticks = replay.next_batch(2)  # (small batches: a row's number must not depend on where a batch cut)
            assert len(replay.origins) == len(ticks)
            out += [(tick, file, row) for tick, (file, row) in zip(ticks, replay.origins)]
    return out


@pytest.mark.parametrize("bom", [False, True])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_csv_row_is_its_line_less_two_across_blank_lines_crlf_and_a_bom(tmp_path: Path, newline: str,
                                                                         bom: bool) -> None:
    data = [f"{T0 + i * 10**6},{'AB'[i % 2]},{100 + i / 100:.2f},{1 + i}" for i in range(12)]
    data[6] = f"{T0 + 6 * 10**6},A,not-a-price,7"  # a rejected row, counted
    # blank lines in the middle (one, then two in a row) and at the end (two)
    lines = ["ts,stream,price,size", *data[:3], "", *data[3:7], "", "", *data[7:], "", ""]
    path = tmp_path / "ticks.csv"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + newline.join(lines).encode() + newline.encode())
    got = drained(path)
    assert len(got) == 11  # every data row but the rejected one; no blank line makes a tick
    shown = path.read_bytes().decode("utf-8-sig").split(newline)  # the file's lines, as an editor numbers them
    for tick, file, row in got:
        ts, stream, price, size = shown[row + 1].split(",")  # (line row + 2, 1-based)
        assert (file, int(ts), stream, float(price), float(size)) == (0, tick.ts, tick.stream, tick.price,
                                                                      tick.size)
    # each blank line is a row as the file holds it: the rows after them are their lines less two
    assert [row for *_, row in got] == [0, 1, 2, 4, 5, 6, 10, 11, 12, 13, 14]  # (7: the rejected one)
    with FileReplay(path) as replay:  # and the rejected row is said by its line, row 7's: 9
        while not replay.done:
            replay.next_batch(100)
        assert [f"line {7 + 2}: " in said for said in replay.rejected.examples.values()] == [True]


MBO_HEADER = ["ts_recv", "ts_event", "rtype", "publisher_id", "instrument_id", "action", "side", "price", "size",
              "channel_id", "order_id", "flags", "ts_in_delta", "sequence", "symbol"]
# (action, side, quarter points or None, size, order id, last record of its event): records that make no tick (a
# clear, an add inside an event, an add behind the top, a fill, a cancel that leaves the top) among those that do
MBO_RECORDS = [("R", "N", None, 0, 0, True), ("A", "B", 21200, 5, 1, False), ("A", "A", 21201, 3, 2, True),
               ("A", "B", 21199, 9, 3, True), ("T", "A", 21200, 2, 0, True), ("F", "B", 21200, 2, 1, True),
               ("C", "B", 21200, 2, 1, True), ("A", "A", 21205, 1, 4, True), ("C", "B", 21200, 3, 1, False),
               ("M", "A", 21202, 4, 2, True), ("C", "A", 21205, 1, 4, True)]
# what they reduce to, with the row each names: (row, kind, price or bid, ask)
MBO_TICKS = [(2, "quote", 5300.0, 5300.25), (4, "trade", 5300.0, None), (6, "quote", 5300.0, 5300.25),
             (9, "quote", 5299.75, 5300.5)]


def _mbo_rows() -> list[dict]:
    return [dict(zip(MBO_HEADER, (T0 + 10 * (i + 1), T0 + i, 160, 1, 7, action, side,
                                  UNDEF if q is None else q * QUARTER, size, 0, order, F_LAST if last else 0, 0, i,
                                  "ESM4")))
            for i, (action, side, q, size, order, last) in enumerate(MBO_RECORDS)]


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_an_order_book_exports_ticks_name_the_record_that_made_them(tmp_path: Path, suffix: str) -> None:
    """Databento MBO exported as CSV and as Parquet: a trade names its T record; a quote the record that ended the
    event it reports (F_LAST), not the event's first; the records that make no tick are counted all the same."""
    rows = _mbo_rows()
    path = tmp_path / f"es.mbo.{suffix}"
    table = pl.DataFrame(rows)
    table.write_csv(path) if suffix == "csv" else table.write_parquet(path)
    got = drained(path)
    assert [(row, t.kind, t.price or t.bid, t.ask) for t, _, row in got] == MBO_TICKS
    for tick, file, row in got:  # the row named holds the tick: its stamp (ts_recv) and its kind of record
        assert file == 0 and rows[row]["ts_recv"] == tick.ts
        assert rows[row]["action"] == "T" if tick.kind == "trade" else rows[row]["flags"] & F_LAST
    # the event of records 1 and 2 (the bid's add without F_LAST) is reported at record 2, where it ended
    assert rows[1]["flags"] == 0 and got[0][2] == 2


def test_an_mbp1_exports_rows_after_records_that_make_none_keep_their_numbers(tmp_path: Path) -> None:
    """MBP-1 as exported (each record with its top level): a record whose top is unchanged makes no tick, one inside
    an event neither; an event that ends on a trade makes the trade and its quote; the ticks after them name their
    own rows, in the CSV and in its Parquet copy alike."""
    header = ["ts_recv", "ts_event", "rtype", "publisher_id", "instrument_id", "action", "side", "depth", "price",
              "size", "flags", "ts_in_delta", "sequence", "bid_px_00", "ask_px_00", "bid_sz_00", "ask_sz_00",
              "bid_ct_00", "ask_ct_00", "symbol"]
    # (action, side, quarters, size, bid, ask, last)
    records = [("A", "B", 80000, 4, 80000, None, True), ("A", "A", 80001, 6, 80000, 80001, True),
               ("A", "B", 79999, 2, 80000, 80001, True), ("C", "A", 80001, 6, 80000, 80002, False),
               ("T", "B", 80001, 1, 80000, 80002, True), ("A", "B", 80001, 6, 80001, 80002, True)]
    rows = [dict(zip(header, (T0 + 10 * (i + 1), T0 + i, 1, 1, 9, a, side, 0, q * QUARTER, size,
                              F_LAST if last else 0, 0, i, bid * QUARTER, UNDEF if ask is None else ask * QUARTER,
                              4, 6, 1, 1, "NQM4")))
            for i, (a, side, q, size, bid, ask, last) in enumerate(records)]
    pl.DataFrame(rows).write_csv(tmp_path / "nq.mbp-1.csv")
    pl.DataFrame(rows).write_parquet(tmp_path / "nq.mbp-1.parquet")
    for path in (tmp_path / "nq.mbp-1.csv", tmp_path / "nq.mbp-1.parquet"):
        got = drained(path)
        # row 0: one side empty; 2: the top unchanged; 3: inside an event: none of them a tick; 4 ends the event
        # that 3 began: its trade, then the event's quote (the ask 3's cancel moved), not held back to row 5's
        assert [(row, t.kind) for t, _, row in got] == [(1, "quote"), (4, "trade"), (4, "quote"), (5, "quote")], path
        assert [t.ask for t, _, row in got if t.kind == "quote"] == [80001 / 4, 80002 / 4, 80002 / 4], path
        assert all(rows[row]["ts_recv"] == t.ts for t, _, row in got)


def test_a_csv_record_whose_quoted_field_holds_line_breaks_is_one_row_and_named_by_its_own_line(
        tmp_path: Path) -> None:
    """A quoted field with line breaks (a free-text note) makes one record span lines: `row` stays the data-record
    index (0-based after the header), not its line less two, and a rejected row is named by the line it starts on."""
    path = tmp_path / "notes.csv"
    path.write_text('ts,stream,price,size,note\n'
                    f'{T0},A,100.0,1,"a note\non two lines"\n'  # record 0: lines 2-3
                    f'{T0 + 1},A,100.5,2,plain\n'  # record 1: line 4
                    f'{T0 + 2},A,101.0,3,"three\n""quoted"" lines\nhere"\n'  # record 2: lines 5-7, a doubled quote
                    f'{T0 + 3},A,-5,4,plain\n'  # record 3: line 8, rejected
                    f'{T0 + 4},A,101.5,5,plain\n')  # record 4: line 9
    got = drained(path)
    assert [(tick.price, row) for tick, _, row in got] == [(100.0, 0), (100.5, 1), (101.0, 2), (101.5, 4)]
    with FileReplay(path) as replay:
        while not replay.done:
            replay.next_batch(100)
        [said] = replay.rejected.examples.values()
    assert said.startswith(f"{path} line 8: nonpositive_price"), said
