"""Databento DBN replay as a CME futures user meets it: dated symbol mappings (a continuous symbol rolling from one
contract to the next), trade records without a price, --price-offset for calendar spreads, a record stamped ahead
of its neighbours, and the `trades` schema. Every fixture is written here with databento-dbn's own encoder."""

from __future__ import annotations

import random
import shutil
import subprocess
from datetime import date, datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from connectors.replay import FileReplay
from engine.service.backtest import rejected_lines
from conftest import drain

dbn = pytest.importorskip("databento_dbn", reason="the dbn extra (pip install 'flashtick[dbn]') is not installed")
NS = 1_000_000_000
PX = 10**9 // 4  # a quarter point in DBN's 1e-9 fixed point
MAR5 = int(datetime(2026, 3, 5, 14, 30, tzinfo=timezone.utc).timestamp()) * NS  # both contracts trade this day
MAR6 = MAR5 + 86_400 * NS  # ES.c.0 rolled to ESM6 (1002) at the start of this day (UTC)
ESH6, ESM6 = 1001, 1002


def write_dbn(path: Path, schema: object, records: list, mappings: dict[str, list[tuple]] | None = None,
              span: tuple[int, int | None] | None = None) -> Path:
    """A DBN file; ``mappings``: symbol -> [(start date, end date, instrument id)], as Databento's metadata has;
    ``span``: the metadata's (start, end), by default its records' first time and just after its last, as a
    historical download's request range holds them (end None: not said, as a live capture's)."""
    symbology = [SimpleNamespace(raw_symbol=symbol, intervals=[
        SimpleNamespace(start_date=start, end_date=end, symbol=str(instrument)) for start, end, instrument in spans])
        for symbol, spans in (mappings or {}).items()]
    times = [r.ts_recv for r in records if hasattr(r, "ts_recv")]
    start, end = span or ((min(times), max(times) + 1) if times else (MAR5, None))
    metadata = dbn.Metadata(dataset="GLBX.MDP3", start=start, end=end, stype_in=dbn.SType.CONTINUOUS,
                            stype_out=dbn.SType.INSTRUMENT_ID, schema=schema, symbols=list(mappings or ()),
                            mappings=symbology)
    path.write_bytes(metadata.encode() + b"".join(bytes(r) for r in records))
    return path


def trade(instrument: int, ts: int, quarters: int, side: object = None, price: int | None = None) -> object:
    """An MBO trade record (action T)."""
    return dbn.MBOMsg(publisher_id=1, instrument_id=instrument, ts_event=ts, order_id=0,
                      price=quarters * PX if price is None else price, size=1, action=dbn.Action.TRADE,
                      side=side or dbn.Side.BID, ts_recv=ts, flags=dbn.F_LAST)


def test_a_continuous_symbol_names_the_contract_it_maps_on_each_record_s_date(tmp_path: Path) -> None:
    """ES.c.0 is ESH6 until 2026-03-06 and ESM6 from then on; both trade on both days. Each day's ES.c.0 is that
    day's contract alone; the other contract, outside every interval of its mappings, is its instrument id."""
    path = write_dbn(tmp_path / "es.dbn", dbn.Schema.MBO, [
        trade(ESH6, MAR5, 27200), trade(ESM6, MAR5 + NS, 27400),
        trade(ESH6, MAR6, 27204), trade(ESM6, MAR6 + NS, 27404),
    ], {"ES.c.0": [(date(2026, 3, 1), date(2026, 3, 6), ESH6), (date(2026, 3, 6), date(2026, 3, 9), ESM6)]})
    assert [(t.stream, t.price) for t in drain(FileReplay(path))] == [
        ("ES.c.0", 6800.0), ("1002", 6850.0), ("1001", 6801.0), ("ES.c.0", 6851.0)]

    # a live file's symbol mapping records: a later record for the symbol takes it from the id that had it
    def mapping(instrument: int, ts: int) -> object:
        return dbn.SymbolMappingMsg(publisher_id=1, instrument_id=instrument, ts_event=ts,
                                    stype_in=dbn.SType.CONTINUOUS, stype_in_symbol="ES.c.0",
                                    stype_out=dbn.SType.INSTRUMENT_ID, stype_out_symbol=str(instrument),
                                    start_ts=ts, end_ts=ts + 86_400 * NS)

    live = write_dbn(tmp_path / "live.dbn", dbn.Schema.MBO, [
        mapping(ESH6, MAR5), trade(ESH6, MAR5, 27200), trade(ESM6, MAR5 + NS, 27400),
        mapping(ESM6, MAR6), trade(ESH6, MAR6, 27204), trade(ESM6, MAR6 + NS, 27404),
    ])
    assert [t.stream for t in drain(FileReplay(live))] == ["ES.c.0", "1002", "1001", "ES.c.0"]


def test_a_trade_record_with_databento_s_undefined_price_is_rejected_and_counted(tmp_path: Path) -> None:
    path = write_dbn(tmp_path / "es.dbn", dbn.Schema.MBO, [
        trade(ESH6, MAR5, 27200), trade(ESH6, MAR5 + NS, 0, price=dbn.UNDEF_PRICE), trade(ESH6, MAR5 + 2 * NS, 27201),
    ])
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [6800.0, 6800.25]
    assert replay.rejected == {"missing_field": 1}
    example = replay.rejected.examples["missing_field"]
    assert "es.dbn record 2: " in example and "Databento's undefined price" in example and "column" not in example


def spread_file(path: Path) -> Path:
    """A calendar spread's top of book and a trade, below zero (MBP-1)."""

    def mbp(i: int, action: object, quarters: int) -> object:
        level = dbn.BidAskPair(bid_px=-3 * PX, ask_px=-2 * PX, bid_sz=4, ask_sz=6)
        return dbn.MBP1Msg(publisher_id=1, instrument_id=ESH6, ts_event=MAR5 + i, price=quarters * PX, size=1,
                           action=action, side=dbn.Side.ASK, depth=0, ts_recv=MAR5 + i, flags=dbn.F_LAST, levels=level)

    return write_dbn(path, dbn.Schema.MBP_1, [mbp(1, dbn.Action.ADD, -3), mbp(2, dbn.Action.TRADE, -2)])


def test_price_offset_shifts_a_dbn_spread_s_prices_above_zero(tmp_path: Path) -> None:
    path = spread_file(tmp_path / "spread.dbn")
    unshifted = FileReplay(path)
    assert not drain(unshifted) and unshifted.rejected == {"nonpositive_price": 2}
    example = unshifted.rejected.examples["nonpositive_price"]
    assert example.startswith(f"{path} record 1: ") and "column" not in example  # a record has no columns
    expected = [("quote", 9.25, 9.5, None), ("trade", None, None, 9.5)]
    for columns in ({"price_offset": 10}, None):  # for every file, or the file's own replay entry
        files = path if columns else [{"path": str(path), "columns": {"price_offset": "10"}}]
        shifted = FileReplay(files, columns=columns)
        assert [(t.kind, t.bid, t.ask, t.price) for t in drain(shifted)] == expected and not shifted.rejected
    with pytest.raises(ValueError, match=r"spread.dbn: a DBN file has a fixed layout: of a column map it takes "
                                         r"price_offset, hours and zero_bid alone, got tz"):
        FileReplay([{"path": str(path), "columns": {"tz": "America/Chicago", "price_offset": 10}}])


def test_a_record_stamped_ahead_names_the_first_tick_that_goes_back_and_the_record_ahead(tmp_path: Path) -> None:
    """One record 129 s ahead of its neighbours: the stream's next ticks go back in time and are rejected (a DBN
    file is read in its own order, never sorted), the first of them named with the record that went ahead."""
    path = write_dbn(tmp_path / "es.dbn", dbn.Schema.MBO, [
        trade(ESH6, MAR5, 27200), trade(ESH6, MAR5 + 129 * NS, 27201), trade(ESH6, MAR5 + NS, 27202),
        trade(ESM6, MAR5 + 2 * NS, 27400), trade(ESH6, MAR5 + 2 * NS, 27203), trade(ESH6, MAR5 + 130 * NS, 27204),
    ])
    replay = FileReplay(path)
    assert [(t.stream, t.price) for t in drain(replay)] == [
        ("1001", 6800.0), ("1001", 6800.25), ("1002", 6850.0), ("1001", 6801.0)]  # another stream goes on
    assert replay.rejected == {"ts_backwards": 2}
    example = replay.rejected.examples["ts_backwards"]
    assert example.startswith(f"{path} record 3: ") and "record 2" in example and "128.0 s" in example
    assert f"(first: {path} record 3: " in rejected_lines(dict(replay.rejected), replay.rejected.examples, 4)[1]


def test_records_of_one_ts_recv_replay_in_the_file_s_order_not_by_their_venue_sequence(tmp_path: Path) -> None:
    """A DBN file is written in ts_recv order and, at one ts_recv, in the order Databento captured the records; their
    `sequence` is the venue's number per channel. ES (channel 0) and ZN (channel 1) print at one ts_recv, ZN's numbers
    far below ES's: ordered by them (as --sequence orders a column-mapped file's ties) ZN's trades would jump ahead of
    ES's event, which came first. The reader keeps the file's order, and --sequence for every file leaves it so."""
    from connectors.map_options import map_from_options

    zn, at = 2001, MAR5 + NS

    def record(instrument: int, channel: int, sequence: int, action: object, side: object, quarters: int,
               order_id: int = 0, last: bool = True) -> object:
        return dbn.MBOMsg(publisher_id=1, instrument_id=instrument, ts_event=at, order_id=order_id,
                          price=quarters * PX, size=1, action=action, side=side, ts_recv=at,
                          flags=dbn.F_LAST if last else 0, channel_id=channel, sequence=sequence)

    path = write_dbn(tmp_path / "glbx.mbo.dbn", dbn.Schema.MBO, [
        record(ESH6, 0, 70_000, dbn.Action.ADD, dbn.Side.BID, 27199, order_id=1, last=False),  # one event of ES:
        record(ESH6, 0, 70_000, dbn.Action.ADD, dbn.Side.ASK, 27201, order_id=2),  # its top of book at its end
        record(zn, 1, 15, dbn.Action.TRADE, dbn.Side.ASK, 450),
        record(ESH6, 0, 70_001, dbn.Action.TRADE, dbn.Side.BID, 27200),
        record(zn, 1, 16, dbn.Action.TRADE, dbn.Side.BID, 451),
    ])
    in_file_order = [("1001", "quote", None), ("2001", "trade", 112.5), ("1001", "trade", 6800.0),
                     ("2001", "trade", 112.75)]
    for columns in (None, map_from_options(sequence="sequence", detect=True)):  # --sequence sequence
        ticks = drain(FileReplay(path, columns=columns))
        assert {t.ts for t in ticks} == {at}
        assert [(t.stream, t.kind, t.price) for t in ticks] == in_file_order


def test_dbn_trades_schema_replays_as_trade_ticks(tmp_path: Path) -> None:
    def record(i: int, quarters: int, size: int, side: object) -> object:
        return dbn.TradeMsg(publisher_id=1, instrument_id=ESH6, ts_event=MAR5 + i, price=quarters * PX, size=size,
                            action=dbn.Action.TRADE, side=side, depth=0, ts_recv=MAR5 + 10 * i, flags=dbn.F_LAST)

    path = write_dbn(tmp_path / "es.trades.dbn", dbn.Schema.TRADES, [
        record(1, 27200, 3, dbn.Side.BID), record(2, 27199, 1, dbn.Side.ASK), record(3, 27199, 2, dbn.Side.NONE),
    ], {"ESH6": [(date(2026, 3, 1), date(2026, 3, 9), ESH6)]})
    assert [(t.stream, t.ts, t.kind, t.price, t.size, t.side) for t in drain(FileReplay(path))] == [
        ("ESH6", MAR5 + 10, "trade", 6800.0, 3.0, "buy"), ("ESH6", MAR5 + 20, "trade", 6799.75, 1.0, "sell"),
        ("ESH6", MAR5 + 30, "trade", 6799.75, 2.0, None)]


def test_a_dbn_file_of_its_header_alone_is_skipped_with_a_note(tmp_path: Path) -> None:
    """A download of a day without data holds the metadata header alone: skipped and said, as an empty CSV is."""
    empty = write_dbn(tmp_path / "empty.dbn", dbn.Schema.MBO, [], {"ESH6": [(date(2026, 3, 1), date(2026, 4, 1),
                                                                            ESH6)]})
    full = write_dbn(tmp_path / "full.dbn", dbn.Schema.MBO, [trade(ESH6, MAR5, 24_000)],
                     {"ESH6": [(date(2026, 3, 1), date(2026, 4, 1), ESH6)]})
    replay = FileReplay([empty, full])
    assert [(t.stream, t.price) for t in drain(replay)] == [("ESH6", 6000.0)]
    assert f"{empty}: no data rows; skipped (a header alone or zero bytes: a day left out)" in replay.notes


def test_hours_keep_a_session_of_a_dbn_file_and_the_book_built_before_it(tmp_path: Path) -> None:
    """`--hours` was silently ignored for DBN files (a CME user's regular session kept the overnight ticks). The
    window applies to each tick (left out as filtered_out, said by its clock), after the book is rebuilt: an order
    resting from before the window is still the top of book inside it. A window without a zone takes --tz's."""
    open_ = int(datetime(2026, 3, 5, 14, 30, tzinfo=timezone.utc).timestamp()) * NS  # 08:30 in Chicago

    def order(ts: int, order_id: int, side: object, quarters: int, action: object = dbn.Action.ADD) -> object:
        return dbn.MBOMsg(publisher_id=1, instrument_id=ESH6, ts_event=ts, order_id=order_id, price=quarters * PX,
                          size=2, action=action, side=side, ts_recv=ts, flags=dbn.F_LAST)

    path = write_dbn(tmp_path / "es.dbn", dbn.Schema.MBO, [
        order(open_ - 60 * NS, 1, dbn.Side.BID, 27200),  # 08:29 Chicago: the bid rests from before the session
        order(open_ - 30 * NS, 2, dbn.Side.ASK, 27204),  # a quote outside the window: left out
        order(open_ + NS, 3, dbn.Side.ASK, 27202),  # inside: the top is the old bid and this ask
        trade(ESH6, open_ + 2 * NS, 27202),
    ], {"ESH6": [(date(2026, 3, 1), date(2026, 3, 9), ESH6)]})
    # a bare window is on the wall clock of the --tz given for every file (which DBN times, in UTC, do not take)
    for hours, tz in (("08:30-15:15 America/Chicago", None), ("14:30-21:15 UTC", None),
                      ("08:30-15:15", "America/Chicago")):
        replay = FileReplay(path, columns={"hours": hours, **({"tz": tz} if tz else {})})
        hours = f"{hours} {tz}" if tz else hours
        assert [(t.kind, t.bid, t.ask, t.price) for t in drain(replay)] == [
            ("quote", 6800.0, 6800.5, None), ("trade", None, None, 6800.5)]
        assert replay.rejected == {"filtered_out": 1}, hours  # the quote at 08:29:30 (a bid alone is no quote)
        clock = "08:29:30 America/Chicago" if "Chicago" in hours else "14:29:30 UTC"
        assert f"ts at {clock} is outside the hours kept ({hours})" in replay.rejected.examples["filtered_out"]
    with pytest.raises(ValueError, match="\"14:30-21:15\" are a wall clock's, and no zone is given for it"):
        FileReplay(path, columns={"hours": "14:30-21:15"})  # not silently UTC's
    with pytest.raises(ValueError, match="hours must be a time-of-day window"):
        FileReplay(path, columns={"hours": "8:30 to 15:15"})


def order(instrument: int, ts: int, order_id: int, side: object, quarters: int, action: object = None) -> object:
    """An MBO record of a resting order: an add unless `action` says otherwise (a cancel, a fill)."""
    return dbn.MBOMsg(publisher_id=1, instrument_id=instrument, ts_event=ts, order_id=order_id, price=quarters * PX,
                      size=2, action=action or dbn.Action.ADD, side=side, ts_recv=ts, flags=dbn.F_LAST)


def test_a_per_stream_price_offset_shifts_the_spread_alone_and_names_a_stream_no_file_holds(tmp_path: Path) -> None:
    """One file of an outright (ESH6) and its calendar spread (ESH6-ESM6, below zero): {spread: 10} shifts the
    spread; the outright keeps its prices (and its moves' bps). A name the file never holds is said at the end."""
    spread = 1003
    path = write_dbn(tmp_path / "cme.dbn", dbn.Schema.MBO, [
        trade(ESH6, MAR5, 27200), trade(spread, MAR5 + NS, -3), trade(ESH6, MAR5 + 2 * NS, 27201)],
        {"ESH6": [(date(2026, 3, 1), date(2026, 3, 9), ESH6)],
         "ESH6-ESM6": [(date(2026, 3, 1), date(2026, 3, 9), spread)]})
    for columns in ({"price_offset": {"ESH6-ESM6": 10, "ESZ9": 1}}, {"price_offset": "ESH6-ESM6=10|ESZ9=1"}):
        replay = FileReplay(path, columns=columns)
        assert [(t.stream, t.price) for t in drain(replay)] == [
            ("ESH6", 6800.0), ("ESH6-ESM6", 9.25), ("ESH6", 6800.25)] and not replay.rejected
        assert replay.found_notes == ['price_offset names stream(s) "ESZ9", which the files never hold: not shifted '
                                      "(their streams: ESH6, ESH6-ESM6)"]
    with pytest.raises(ValueError, match=r"price_offset \(stream ESH6\) must be a number"):
        FileReplay(path, columns={"price_offset": {"ESH6": "ten"}})


def test_an_instrument_outside_its_mapping_s_dates_is_said_once_at_the_end(tmp_path: Path) -> None:
    """CME's Sunday evening session is before the mapping's first UTC date: those records keep the numeric id, a
    stream apart from the symbol's. Said once per instrument, with the dates its mapping holds."""
    sunday = MAR5 - 86_400 * NS  # 2026-03-04 14:30 UTC, the day before ESH6's mapping starts
    path = write_dbn(tmp_path / "es.dbn", dbn.Schema.MBO, [
        trade(ESH6, sunday, 27200), trade(ESH6, sunday + NS, 27201), trade(ESH6, MAR5, 27202)],
        {"ESH6": [(date(2026, 3, 5), date(2026, 3, 9), ESH6)]})
    replay = FileReplay(path)
    assert [t.stream for t in drain(replay)] == ["1001", "1001", "ESH6"]
    assert replay.found_notes == [
        f"{path}: instrument 1001 has 2 tick(s) outside its mapping's dates (the first at 2026-03-04T14:30:00Z; "
        f'it is ESH6 from 2026-03-05 to 2026-03-09 (excluded), UTC dates), read as stream "1001": a stream apart '
        f"from its symbol's"]
    # ticks that --hours leaves out are not counted: none of the Sunday's is read, so nothing is said
    kept = FileReplay(path, columns={"hours": "14:30:30-15:00 UTC"})
    assert [t.stream for t in drain(kept)] == [] and kept.found_notes == []
    monday = FileReplay(path, columns={"hours": "14:30-14:30:01 UTC"})
    assert [t.stream for t in drain(monday)] == ["1001", "ESH6"] and "has 1 tick(s)" in monday.found_notes[0]


def test_cancels_of_orders_the_book_never_saw_say_the_file_starts_mid_session(tmp_path: Path) -> None:
    """A file cut mid-session cancels and fills orders added before it: the book cannot apply them, so its top may
    miss resting orders. Counted, and said once at the end."""
    path = write_dbn(tmp_path / "es.mbo.dbn", dbn.Schema.MBO, [
        order(ESH6, MAR5, 7, dbn.Side.BID, 27200, dbn.Action.CANCEL),  # added before the file starts
        order(ESH6, MAR5 + 1, 8, dbn.Side.ASK, 27204, dbn.Action.FILL),
        order(ESH6, MAR5 + 2, 1, dbn.Side.BID, 27201), order(ESH6, MAR5 + 3, 2, dbn.Side.ASK, 27203),
        order(ESH6, MAR5 + 4, 1, dbn.Side.BID, 27201, dbn.Action.CANCEL)],  # seen: no count
        {"ESH6": [(date(2026, 3, 1), date(2026, 3, 9), ESH6)]})
    replay = FileReplay(path)
    assert [(t.bid, t.ask) for t in drain(replay)] == [(6800.25, 6800.75)]
    said = (": 2 cancel or fill record(s) of an order the book never saw added (the first: ESH6, order 7): the file "
            "seems to start mid-session, so the top of book may miss orders resting from before it until they trade "
            "or cancel")
    assert replay.found_notes == [f"{path}{said}"]
    assert replay.found_notes == [f"{path}{said}"]  # asked again: the same, not counted twice
    whole = write_dbn(tmp_path / "whole.mbo.dbn", dbn.Schema.MBO, [
        order(ESH6, MAR5, 1, dbn.Side.BID, 27201), order(ESH6, MAR5 + 1, 1, dbn.Side.BID, 27201, dbn.Action.CANCEL)])
    quiet = FileReplay(whole)
    drain(quiet)
    assert quiet.found_notes == []


def test_an_instrument_id_outside_its_mapping_s_dates_is_a_stream_streams_selects(tmp_path: Path) -> None:
    """The Sunday session's records are named by their id: --streams 1001 picks them, as any stream a file makes;
    an id whose mappings cover the whole file makes no stream of its own and is still pointed to its symbol."""
    sunday = MAR5 - 86_400 * NS
    path = write_dbn(tmp_path / "es.dbn", dbn.Schema.MBO, [
        trade(ESH6, sunday, 27200), trade(ESH6, sunday + NS, 27201), trade(ESH6, MAR5, 27202)],
        {"ESH6": [(date(2026, 3, 5), date(2026, 3, 9), ESH6)]})
    replay = FileReplay(path, streams=["1001"])
    assert [(t.stream, t.price) for t in drain(replay)] == [("1001", 6800.0), ("1001", 6800.25)]
    assert replay.rejected == {"filtered_out": 1}
    assert replay.notes[-1].startswith("streams selected [\"1001\"]: 1001, 1 of the 2 the files hold")
    covered = write_dbn(tmp_path / "mon.dbn", dbn.Schema.MBO, [trade(ESH6, MAR5, 27202)],
                        {"ESH6": [(date(2026, 3, 5), date(2026, 3, 9), ESH6)]})
    with pytest.raises(ValueError, match="1001 is the instrument id of ESH6"):
        FileReplay(covered, streams=["1001"])
    # a live capture's metadata says no end: any mapped id may trade outside its mappings, so each is selectable
    live = write_dbn(tmp_path / "live.dbn", dbn.Schema.MBO, [trade(ESH6, MAR5, 27202)],
                     {"ESH6": [(date(2026, 3, 5), date(2026, 3, 9), ESH6)]}, span=(MAR5, None))
    assert drain(FileReplay(live, streams=["1001"])) == []


def test_two_dbn_files_of_one_instrument_over_the_same_times_get_the_overlap_caution(tmp_path: Path) -> None:
    """Two downloads of ESH6 over the same hour (an mbp-1 file and its trades file, or one day fetched twice)
    hold the same trades: their ticks would interleave as one source's. The metadata's start and end say so
    before a record is read; files that follow each other (a day each) get no caution."""
    esh6 = {"ESH6": [(date(2026, 3, 1), date(2026, 3, 9), ESH6)]}
    one = write_dbn(tmp_path / "a.dbn", dbn.Schema.MBO, [trade(ESH6, MAR5, 27200), trade(ESH6, MAR5 + 60 * NS, 27201)],
                    esh6)
    two = write_dbn(tmp_path / "b.dbn", dbn.Schema.TRADES, [dbn.TradeMsg(
        publisher_id=1, instrument_id=ESH6, ts_event=ts, price=27200 * PX, size=1, action=dbn.Action.TRADE,
        side=dbn.Side.BID, flags=dbn.F_LAST, depth=0, ts_recv=ts) for ts in (MAR5 + 30 * NS, MAR5 + 45 * NS)], esh6)
    (caution,) = FileReplay([one, two]).cautions
    assert caution.startswith(f"stream ESH6 fed by both {one} and {two}, whose times overlap (2026-03-05T14:30:30Z "
                              f"to 2026-03-05T14:30:45Z): their ticks interleave"), caution
    next_day = write_dbn(tmp_path / "c.dbn", dbn.Schema.MBO, [trade(ESH6, MAR6, 27300)], esh6)
    assert FileReplay([one, next_day]).cautions == []


def many_trades(path: Path, n: int) -> Path:
    """A file of `n` MBO trades of seeded prices, sizes and order ids: zstd compresses it to several blocks."""
    rng = random.Random(7)
    return write_dbn(path, dbn.Schema.MBO, [dbn.MBOMsg(
        publisher_id=1, instrument_id=ESH6, ts_event=MAR5 + i, order_id=rng.randrange(1 << 60),
        price=(24_000 + rng.randrange(400)) * PX, size=rng.randrange(1, 100), action=dbn.Action.TRADE,
        side=dbn.Side.BID, ts_recv=MAR5 + 1000 * i, flags=dbn.F_LAST) for i in range(n)],
        {"ESH6": [(date(2026, 3, 1), date(2026, 4, 1), ESH6)]})


def replay_error(path: Path) -> str:
    with pytest.raises(ValueError) as e:
        drain(FileReplay(path))
    return str(e.value)


def test_a_dbn_file_cut_inside_a_record_is_named_truncated_not_replayed_as_far_as_it_goes(tmp_path: Path) -> None:
    """An interrupted download of a plain .dbn stops inside a record: it used to replay the records before the cut
    and say nothing, a backtest scoring two thirds of a day as if it were the day."""
    data = many_trades(tmp_path / "whole.dbn", 300).read_bytes()
    cut = tmp_path / "cut.dbn"
    cut.write_bytes(data[:len(data) * 2 // 3 + 7])  # +7: inside a record, whatever the header's length
    message = replay_error(cut)
    assert message.startswith(f"{cut}: it ends inside a record (its first "), message
    assert message.endswith("it looks truncated (an interrupted download?): download it again"), message
    header_only = tmp_path / "header.dbn"
    header_only.write_bytes(data[:40])
    assert replay_error(header_only) == (f"{header_only}: it ends inside its metadata header; it looks truncated "
                                         f"(an interrupted download?): download it again")


@pytest.mark.skipif(shutil.which("zstd") is None, reason="the zstd command is not installed")
def test_a_cut_or_corrupt_dbn_zst_is_named_truncated_or_damaged_with_download_it_again(tmp_path: Path) -> None:
    """A .dbn.zst cut at two thirds said "not a DBN file (no metadata header)" when the cut fell in its first zstd
    block, and replayed the records before the cut without a word when it fell later; one whose bytes changed gave
    the zstd reader's own words ("Data corruption detected", "Restored data doesn't match checksum"), no file."""
    def zst(plain: Path) -> bytes:
        subprocess.run(["zstd", "-q", "-f", str(plain), "-o", f"{plain}.zst"], check=True)
        return Path(f"{plain}.zst").read_bytes()

    for plain in (many_trades(tmp_path / "small.dbn", 300), many_trades(tmp_path / "large.dbn", 20_000)):
        data = zst(plain)
        cut = tmp_path / f"cut.{plain.name}.zst"
        cut.write_bytes(data[:len(data) * 2 // 3])
        message = replay_error(cut)
        assert message.startswith(f"{cut}: its compressed data ends early (it ends inside "), message
        assert message.endswith("it looks truncated (an interrupted download?): download it again"), message
        damaged = bytearray(data)
        middle = slice(len(data) // 2, len(data) // 2 + 40)
        damaged[middle] = bytes(b ^ 0x5A for b in damaged[middle])
        corrupt = tmp_path / f"corrupt.{plain.name}.zst"
        corrupt.write_bytes(damaged)
        message = replay_error(corrupt)
        assert message.startswith(f"{corrupt}: its compressed data is damaged ("), message
        assert message.endswith("download it again"), message


def raw_block_zst(plain: bytes, records_per_block: int) -> tuple[bytes, list[int]]:
    """A DBN file as one zstd frame (RFC 8878) of raw blocks, as a zstd writer stores data it cannot shrink: the
    metadata header in the first block, then `records_per_block` 56-byte MBO records a block, the content size in
    the frame's header; with the offset of every block's end. Byte for byte what any zstd decoder reads."""
    header = 8 + int.from_bytes(plain[4:8], "little")  # "DBN", the version, the metadata's length, the metadata
    step = 56 * records_per_block
    chunks = [plain[:header]] + [plain[at:at + step] for at in range(header, len(plain), step)]
    frame = bytearray((0xFD2FB528).to_bytes(4, "little") + bytes([0xC0, 0x50]) + len(plain).to_bytes(8, "little"))
    ends = []
    for i, chunk in enumerate(chunks):  # block header: last-block bit, type 0 (raw), size << 3
        frame += ((len(chunk) << 3) | (i == len(chunks) - 1)).to_bytes(3, "little") + chunk
        ends.append(len(frame))
    return bytes(frame), ends


def block_ends(data: bytes) -> list[int]:
    """The offset after each block of a one-frame zstd file (its header's fields by its descriptor's flags)."""
    flags = data[4]
    at = 5 + (0 if flags & 0x20 else 1) + (0, 1, 2, 4)[flags & 3] + ((0, 2, 4, 8)[flags >> 6] or (flags >> 5) & 1)
    ends = []
    while True:
        value = int.from_bytes(data[at:at + 3], "little")
        at += 3 + (1 if (value >> 1) & 3 == 1 else value >> 3)
        ends.append(at)
        if value & 1:
            return ends


def test_a_dbn_zst_cut_at_a_block_end_on_a_record_boundary_is_named_truncated(tmp_path: Path) -> None:
    """fix302 #2: a .dbn.zst cut where a zstd block ends and the data before it ends on a record's end decodes to
    whole records with nothing left over (about 1 in 56 cuts of an MBO file): it replayed as complete. The frame
    lacks its last block (or the checksum its header promises): said truncated as any other cut file."""
    plain = many_trades(tmp_path / "whole.dbn", 300).read_bytes()
    data, ends = raw_block_zst(plain, 40)
    whole = tmp_path / "whole.dbn.zst"
    whole.write_bytes(data)
    assert len(drain(FileReplay(whole))) == 300
    for k, end in enumerate(ends[1:-1], 1):  # after the metadata's block and each block of records but the last
        cut = tmp_path / f"cut-{k}.dbn.zst"
        cut.write_bytes(data[:end])
        message = replay_error(cut)
        assert message == (f"{cut}: its compressed data ends early (it ends after block {k + 1} of its zstd frame, "
                           f"before the block marked last (the frame's end)); it looks truncated (an interrupted "
                           f"download?): download it again"), message
    if shutil.which("zstd") is None:
        return
    many_trades(tmp_path / "large.dbn", 8_000)  # 448 KB: four blocks of at most 128 KB
    subprocess.run(["zstd", "-q", "-f", "--check", str(tmp_path / "large.dbn"), "-o", str(whole)], check=True)
    data = whole.read_bytes()
    assert len(block_ends(data)) > 3
    for end in block_ends(data)[:-1]:  # the real encoder's blocks: every cut at one's end, on a record's or not
        cut = tmp_path / "cut.dbn.zst"
        cut.write_bytes(data[:end])
        assert "it looks truncated (an interrupted download?)" in replay_error(cut)
    cut.write_bytes(data[:-2])  # the last block whole, half of its checksum
    assert "inside the 4-byte content checksum its header promises (2 of its bytes there)" in replay_error(cut)


def test_an_mbo_event_ending_on_a_trade_or_a_fill_quotes_its_top_of_book_when_it_ends(tmp_path: Path) -> None:
    """Databento MBO: an event whose last record (F_LAST) is a trade or a fill held the quote of the adds and cancels
    before it back until a later event ended. The event's quote now comes when it ends, whatever record ends it:
    after the trade, at the trade's record."""
    def mbo(ts: int, order_id: int, action: object, side: object, quarters: int, last: bool) -> object:
        return dbn.MBOMsg(publisher_id=1, instrument_id=ESH6, ts_event=ts, order_id=order_id, price=quarters * PX,
                          size=2, action=action, side=side, ts_recv=ts, flags=dbn.F_LAST if last else 0)

    add, trade_, fill = dbn.Action.ADD, dbn.Action.TRADE, dbn.Action.FILL
    bid, ask = dbn.Side.BID, dbn.Side.ASK
    records = [mbo(MAR5, 1, add, bid, 20000, True), mbo(MAR5 + 1, 2, add, ask, 20004, True),  # a quote
               mbo(MAR5 + 2, 3, add, ask, 20003, False), mbo(MAR5 + 2, 0, trade_, bid, 20004, True),  # ends on T
               mbo(MAR5 + 3, 4, add, bid, 20001, False), mbo(MAR5 + 3, 1, fill, bid, 20000, True),  # ends on F
               mbo(MAR5 + 4, 5, add, bid, 19990, True)]  # behind the top: no quote
    path = write_dbn(tmp_path / "es.mbo.dbn", dbn.Schema.MBO, records, {"ESH6": [(date(2026, 3, 1),
                                                                                 date(2026, 3, 31), ESH6)]})
    replay = FileReplay(path)
    got = []
    while not replay.done:
        ticks = replay.next_batch(100)
        got += [(t.kind, t.ts - MAR5, t.price, t.bid, t.ask, row) for t, (_, row) in zip(ticks, replay.origins)]
    assert got == [("quote", 1, None, 5000.0, 5001.0, 1),
                   ("trade", 2, 5001.0, None, None, 3), ("quote", 2, None, 5000.0, 5000.75, 3),
                   ("quote", 3, None, 5000.25, 5000.75, 5)], got


def zstd_bomb(plain_header: bytes, blocks: int, records: bytes = b"") -> bytes:
    """A .dbn.zst bomb (RFC 8878): a real metadata header in a raw block, ``records`` (real ones) in raw blocks,
    then `blocks` 4-byte RLE blocks of 0xA0 that each regenerate 128 KiB, 32,768:1 (0xA0 is the MBO record type
    and, as a length, a 640-byte record: the decoder takes them for MBO records)."""
    frame = bytearray((0xFD2FB528).to_bytes(4, "little") + bytes([0x00, 0x58]))  # no content size; an 8 MiB window
    frame += (len(plain_header) << 3).to_bytes(3, "little") + plain_header
    for at in range(0, len(records), 64 << 10):  # raw blocks (type 0) of at most 64 KiB
        raw = records[at: at + (64 << 10)]
        frame += (len(raw) << 3).to_bytes(3, "little") + raw
    for i in range(blocks):  # block header: last-block bit, type 1 (RLE) << 1, regenerated size << 3; its one byte
        frame += (((128 << 10) << 3) | (1 << 1) | (i == blocks - 1)).to_bytes(3, "little") + b"\xa0"
    return bytes(frame)


def test_a_dbn_zst_bomb_is_refused_by_name_as_a_gz_one_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fix327 #2: a .dbn.zst was decoded without bounds (databento's decoder decompresses all it is given); it is
    now bounded by FLASHTICK_MAX_UNPACKED_BYTES and FLASHTICK_MAX_UNPACK_RATIO, refused in the words a .gz bomb is."""
    from connectors.expansion import RATIO_VARIABLE, UNPACKED_VARIABLE, said_size

    plain = many_trades(tmp_path / "one.dbn", 1).read_bytes()
    header = plain[: 8 + int.from_bytes(plain[4:8], "little")]
    bomb = tmp_path / "ESH6.mbo.dbn.zst"
    bomb.write_bytes(zstd_bomb(header, 2_000))  # ~8 KiB that expand to 250 MiB
    monkeypatch.setenv(UNPACKED_VARIABLE, str(8 << 20))
    said = replay_error(bomb)
    assert said.startswith(f"{bomb}: {said_size(bomb.stat().st_size)} compressed expands past "), said
    assert said.endswith(f"over the limit of 8.0 MiB unpacked (a decompression bomb, or a file larger than any "
                         f"vendor's day); to read it anyway set {UNPACKED_VARIABLE} higher (bytes)"), said
    past = float(said.split("expands past ")[1].split(" MiB")[0])
    assert 8 < past <= 8 + 128 < 250  # refused within one step (4 KiB compressed: 128 MiB at most) past the limit
    monkeypatch.delenv(UNPACKED_VARIABLE)
    bomb.write_bytes(zstd_bomb(header, 700))  # ~3 KiB to 87.5 MiB: the default ratio (200, past 64 MiB) refuses it
    said = replay_error(bomb)
    assert said.startswith(f"{bomb}: {said_size(bomb.stat().st_size)} compressed expands past "), said
    assert "over 200 times its compressed size (a decompression bomb: tick data compresses 5-20:1); to read it " \
           f"anyway set {RATIO_VARIABLE} higher" in said, said
    bomb.write_bytes(zstd_bomb(header, 20))  # 2.5 MiB: within the bounds, its records read as the decoder takes them
    monkeypatch.setenv(RATIO_VARIABLE, "1e6")
    drain(FileReplay(bomb))  # read to its end: within the bounds, not refused (its records make no ticks)


def test_a_dbn_zst_bomb_inside_a_zip_is_named_as_the_archive_s_member(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """review344 #4: a .dbn.zst unpacked from a zip was named by its temporary copy's path
    (/tmp/flashtick-unzip-.../ESH6.mbo.dbn.zst), which the user never saw; it is the archive's member, named as
    other members are: `ARCHIVE (MEMBER inside)`."""
    import zipfile

    from connectors.archives import UNZIP_PREFIX
    from connectors.expansion import UNPACKED_VARIABLE

    plain = many_trades(tmp_path / "trades.dbn", 2_000).read_bytes()
    cut = 8 + int.from_bytes(plain[4:8], "little")
    archive = tmp_path / "GLBX-20260305.zip"
    with zipfile.ZipFile(archive, "w") as packed:  # stored: the member's own zstd is the bomb
        # 2,000 real trades (110 KiB, past what planning reads of it) before the bomb: refused as the replay reads
        packed.writestr("ESH6.mbo.dbn.zst", zstd_bomb(plain[:cut], 2_000, plain[cut:]))
    monkeypatch.setenv(UNPACKED_VARIABLE, str(8 << 20))
    said = replay_error(archive)
    assert said.startswith(f"{archive} (ESH6.mbo.dbn.zst inside): "), said
    assert "expands past" in said and "a decompression bomb" in said and UNPACKED_VARIABLE in said, said
    assert UNZIP_PREFIX not in said, said
