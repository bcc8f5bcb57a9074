"""The zone of the market a file's names point at (connectors/market_zones.py): the hint on naive times read as UTC
names it, or none (review375 #7, review373 #9); a file read under a --tz whose offset is not its streams'
exchanges' gets a warning naming them (review375 #3). Every file is written here, into tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import drain
from connectors.cautions import Caution
from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from engine.service.cli import main

ROWS = "".join(f"2024-04-05 09:{15 + i:02d}:07.543,{{stream}},{100 + i}.05,10\n" for i in range(5))


def day_file(path: Path, stream: str, header: str = "time,symbol,price,size") -> Path:
    path.write_text(header + "\n" + ROWS.format(stream=stream))
    return path


@pytest.mark.parametrize("stream, hint", [
    ("RELIANCE.NS", "e.g. --tz Asia/Kolkata (the zone of RELIANCE.NS's exchange, NSE India)"),
    ("BHP.AX", "e.g. --tz Australia/Sydney (the zone of BHP.AX's exchange, ASX)"),
    ("D05.SI", "e.g. --tz Asia/Singapore (the zone of D05.SI's exchange, SGX)"),
    ("NK225M2406", "e.g. --tz Asia/Tokyo (the zone of NK225M2406's exchange, JPX (Osaka))"),
    # China's vendors' codes (Wind's and Tushare's .SH, JoinQuant's .XSHE): "nothing names its market" (review433 #13)
    ("600519.SH", "e.g. --tz Asia/Shanghai (the zone of 600519.SH's exchange)"),
    ("000001.XSHE", "e.g. --tz Asia/Shanghai (the zone of 000001.XSHE's exchange)"),
    ("sh.600000", "e.g. --tz Asia/Shanghai (the zone of sh.600000's exchange, the Shanghai exchange)")])  # BaoStock's
def test_the_naive_time_hint_names_the_zone_a_stream_points_at(tmp_path: Path, stream: str, hint: str) -> None:
    replay = FileReplay(day_file(tmp_path / "day_20240405.csv", stream))
    drain(replay)
    said = [n for n in replay.notes if "carry no UTC offset and are read as UTC" in n]
    assert len(said) == 1 and said[0].endswith(hint), replay.notes
    assert "America/New_York" not in said[0]


def test_a_german_header_gets_berlins_zone_and_a_file_naming_nothing_gets_none(tmp_path: Path) -> None:
    path = tmp_path / "xetra.csv"
    path.write_text("Datum;Uhrzeit;Wertpapier;Kurs;Stück\n" + "".join(
        f"28.03.2025;09:00:0{i},5;SIEMENS;212,{35 + i};100\n" for i in range(5)))
    replay = FileReplay(path)
    drain(replay)
    said = [n for n in replay.notes if "carry no UTC offset and are read as UTC" in n]
    assert len(said) == 1 and said[0].endswith("e.g. --tz Europe/Berlin (a guess from its German header, Datum)"), \
        replay.notes
    plain = FileReplay(day_file(tmp_path / "ticks.csv", "ACME"))
    drain(plain)
    said = [n for n in plain.notes if "carry no UTC offset and are read as UTC" in n]
    assert len(said) == 1 and said[0].endswith(
        "--tz ZONE (the IANA zone of their exchange: nothing in the file names its market)"), plain.notes


def test_streams_of_another_market_under_one_tz_get_a_warning_naming_them(tmp_path: Path) -> None:
    hk = day_file(tmp_path / "hkex_20240405.csv", "0005.HK")
    replay = FileReplay(hk, columns=map_from_options(detect=True, tz="Asia/Tokyo"))
    drain(replay)
    warned = [n for n in replay.notes if isinstance(n, Caution) and "exchanges on other clocks" in n]
    assert warned == [
        "hkex_20240405.csv: its times are read in Asia/Tokyo, but streams name exchanges on other clocks: 0005.HK "
        "(HKEX: Asia/Hong_Kong); if the file writes their local times, each is read hours off: give each market's "
        "files their own zone in a replay list (`replay: [{path: hkex_20240405.csv, columns: {tz: Asia/Hong_Kong}}]`, "
        "docs/replay.md), or read them in their own run"], replay.notes
    # the zone of their own exchange, or one of the same offset (Singapore's and Hong Kong's +08:00): no warning
    for stream, tz in (("0005.HK", "Asia/Hong_Kong"), ("D05.SI", "Asia/Hong_Kong"), ("7203.T", "Asia/Tokyo"),
                       ("ACME", "Asia/Tokyo")):
        replay = FileReplay(day_file(tmp_path / "x.csv", stream), columns=map_from_options(detect=True, tz=tz))
        drain(replay)
        assert not any("exchanges on other clocks" in n for n in replay.notes), (stream, replay.notes)


def test_a_mixed_markets_backtest_warns_of_each_misread_file(tmp_path: Path, capsys) -> None:
    tse = day_file(tmp_path / "tse_20240405.csv", "7203.T")
    nse = day_file(tmp_path / "nse_20240405.csv", "TCS.NS")
    (tmp_path / "q.yaml").write_text(
        "queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, trigger: batch}\n")
    assert main(["backtest", str(tse), str(nse), "--tz", "Asia/Tokyo", "--queries", str(tmp_path / "q.yaml"),
                 "--out", str(tmp_path / "a.parquet")]) == 0
    err = capsys.readouterr().err
    assert "warning: nse_20240405.csv: its times are read in Asia/Tokyo, but streams name exchanges on other " \
           "clocks: TCS.NS (NSE India: Asia/Kolkata)" in err, err
    assert "warning: tse_20240405.csv" not in err
    # review440 #7: both streams' trades come without a side: the backtest names each, as `health` would
    assert 'warning: streams "7203.T", "TCS.NS" sent a token this model never met in training' in err, err


def test_a_file_of_several_venues_local_times_names_each_and_its_advised_list_reads_them(tmp_path: Path) -> None:
    """review440 #8: LSEG's legacy `Date[L],Time[L]` (each RIC's exchange's clock) for VOD.L (London), SAPG.DE and
    FESXM4 (Xetra, Eurex: Berlin), no `GMT Offset`: read as UTC nothing warned; under --tz Europe/London FESXM4 was
    not named, and the advised replay-list entry (the whole file in Berlin time) could not be split by stream. Each
    clock's streams are named, and the list the warning gives reads each in its own zone."""
    path = tmp_path / "th_legacy.csv"
    path.write_text("#RIC,Date[L],Time[L],Price,Volume\n" + "".join(
        f"{ric},05-APR-2024,{hour}:{15 + i:02d}:07.543,{100 + i}.5,10\n"
        for ric, hour in (("VOD.L", "08"), ("SAPG.DE", "09"), ("FESXM4", "09")) for i in range(5)))
    for options in ({"detect": True}, {"detect": True, "tz": "Europe/London"}):
        replay = FileReplay(path, columns=map_from_options(**options))
        drain(replay)
        [warned] = [n for n in replay.notes if isinstance(n, Caution) and "exchanges on other clocks" in n]
        assert "SAPG.DE (Xetra: Europe/Berlin); FESXM4 (Eurex: Europe/Berlin)" in warned, warned
        # the hint on times read as UTC names the first stream's zone, but not as the file's one zone
        hint = [n for n in replay.notes if "carry no UTC offset and are read as UTC" in n]
        assert hint == [] if "tz" in options else hint[0].endswith(
            "e.g. --tz Europe/London (the zone of VOD.L's exchange, the London exchange; LSEG's [L] is each RIC's "
            "exchange's clock, not one zone for the file: a warning below names each stream's exchange's zone that "
            "is off UTC)"), replay.notes
    assert "(`replay: [{path: th_legacy.csv, columns: {tz: Europe/London, keep: {\"#RIC\": [\"VOD.L\"]}}}, {path: " \
           "th_legacy.csv, columns: {tz: Europe/Berlin, keep: {\"#RIC\": [\"SAPG.DE\", \"FESXM4\"]}}}]`" in warned
    (tmp_path / "venues.yaml").write_text(warned.split("`")[1] + "\n")
    replay = FileReplay(tmp_path / "venues.yaml")
    first = {}
    for tick in drain(replay):
        first.setdefault(tick.stream, tick.ts)
    assert not any("other clocks" in n or "fed by both" in n for n in replay.notes), replay.notes
    assert set(first.values()) == {1_712_301_307_543_000_000}, first  # 07:15:07.543Z: 08:15 BST, 09:15 CEST
    # the rows one entry leaves out that the other reads are no rows left out by a filter: each row counted once
    assert dict(replay.rejected) == {}, dict(replay.rejected)
    (tmp_path / "two.yaml").write_text("replay: [{path: th_legacy.csv, columns: {keep: {\"#RIC\": [VOD.L]}}}, "
                                       "{path: th_legacy.csv, columns: {keep: {\"#RIC\": [SAPG.DE]}}}]\n")
    replay = FileReplay(tmp_path / "two.yaml")
    assert len(drain(replay)) == 10 and dict(replay.rejected) == {"filtered_out": 5}, dict(replay.rejected)
