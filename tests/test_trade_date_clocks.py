"""A trade date beside a time that runs past 24:00 or a count after midnight (fix303 #5): a session that crosses
midnight (JPX's night session, CME Globex's evening) is written under its trade date, its night times counted on
past 24:00 (`25:30:00`, 91,800,000 ms) or restarting at 00:00; each row replays at its own instant."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain

TOKYO, CHICAGO = ZoneInfo("Asia/Tokyo"), ZoneInfo("America/Chicago")
TRADE_DATES = (date(2024, 6, 4), date(2024, 6, 5))  # a Tuesday and a Wednesday


def sessions(trade_date: date, evening: tuple[int, int], close: tuple[int, int], day: tuple[tuple[int, int], ...],
             zone: ZoneInfo) -> list[datetime]:
    """A trade date's rows every 15 min: its evening from `evening` on the day before until `close` (hours, minutes)
    on the trade date, then the day session's spans `day`."""
    before = datetime.combine(trade_date - timedelta(days=1), datetime.min.time(), zone)
    start, end = before.replace(hour=evening[0], minute=evening[1]), \
        datetime.combine(trade_date, datetime.min.time(), zone).replace(hour=close[0], minute=close[1])
    out = []
    while start <= end:
        out.append(start)
        start += timedelta(minutes=15)
    for (h0, m0), (h1, m1) in day:
        at = datetime.combine(trade_date, datetime.min.time(), zone).replace(hour=h0, minute=m0)
        while (at.hour, at.minute) <= (h1, m1):
            out.append(at)
            at += timedelta(minutes=15)
    return out


def since_midnight(at: datetime, trade_date: date, past_24: bool) -> timedelta:
    """A row's time of day as the file writes it: from its own day's midnight, or (past_24) from the midnight
    before its trade date for the rows before the trade date's own midnight and past it until the break."""
    day = trade_date - timedelta(days=1) if past_24 and at.date() == trade_date and at.hour < 8 else at.date()
    return at.replace(tzinfo=None) - datetime.combine(day, datetime.min.time())


def write(path: Path, rows: list[tuple[date, datetime]], past_24: bool, counted: bool) -> Path:
    lines = ["TradeDate,Time,Price,Volume"]
    for i, (trade_date, at) in enumerate(rows):
        clock = since_midnight(at, trade_date, past_24)
        if counted:
            written = str(int(clock.total_seconds() * 1000))
        else:
            seconds = int(clock.total_seconds())
            written = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        lines.append(f"{trade_date:%Y%m%d},{written},{38000 + i},1")
    path.write_text("\n".join(lines) + "\n")
    return path


JPX = {"evening": (17, 0), "close": (6, 0), "day": (((8, 45), (15, 45)),), "zone": TOKYO}
CME = {"evening": (17, 0), "close": (16, 0), "day": (), "zone": CHICAGO}


@pytest.mark.parametrize(("venue", "past_24", "counted"), [
    ("jpx", True, False),  # JPX's night session written on to `30:00:00`
    ("jpx", True, True),  # the same as ms after midnight, past 86,400,000
    ("jpx", False, True),  # ms after midnight restarting at 0 within the trade date
    ("cme", False, True),  # Globex's 17:00 CT evening through midnight, ms restarting at 0
])
def test_a_trade_date_with_a_clock_past_midnight_reads_each_row_at_its_instant(
        tmp_path: Path, venue: str, past_24: bool, counted: bool) -> None:
    shape = JPX if venue == "jpx" else CME
    rows = [(trade_date, at) for trade_date in TRADE_DATES for at in sessions(trade_date, **shape)]
    path = write(tmp_path / f"{venue}.csv", rows, past_24, counted)
    unit = ",ts_unit=ms_after_midnight" if counted else ""
    columns = f"ts=TradeDate+Time,price=Price,size=Volume,trade_date=TradeDate,tz={shape['zone'].key}{unit}"
    replay = FileReplay(path, columns=map_from_options(columns=columns))
    ticks = drain(replay)
    truth = sorted(int(at.timestamp()) * 10**9 for _, at in rows)
    assert [t.ts for t in ticks] == truth
    assert not replay.rejected
    assert [t.price for t in ticks] == [38000.0 + i for i in range(len(rows))]  # the file's order is time order
    evenings = sum(1 for _, at in rows if at.hour >= 17 or (past_24 and at.hour < 8))
    said = [n for n in replay.notes if f'its {evenings} row(s) at or after 17:00 in "Time"' in n]
    assert said and "are its evening session" in said[0], replay.notes
    before = "business day before" if venue == "jpx" else "calendar day before"  # (Tuesday and Wednesday alike)
    assert f"read on the {before} their trade date" in said[0]
    assert ("written past 24:00" in said[0]) == past_24


def night_rows(trade_date: date, night_of: date, day_session: bool) -> list[datetime]:
    """JPX's rows of one trade date every 15 min: its night session from 17:00 on `night_of` to 06:00 the day after,
    then (day_session) 08:45 to 15:45 on the trade date."""
    at = datetime.combine(night_of, datetime.min.time(), TOKYO).replace(hour=17)
    end = at + timedelta(hours=13)
    out = []
    while at <= end:
        out.append(at)
        at += timedelta(minutes=15)
    if day_session:
        at = datetime.combine(trade_date, datetime.min.time(), TOKYO).replace(hour=8, minute=45)
        while (at.hour, at.minute) <= (15, 45):
            out.append(at)
            at += timedelta(minutes=15)
    return out


@pytest.mark.parametrize("day_session", [False, True])
def test_a_jpx_night_session_is_the_business_day_befores_evening(tmp_path: Path, day_session: bool) -> None:
    """review336 #5: the Friday night session carries Monday's trade date and runs Friday 17:00 to Saturday 06:00;
    a mid-week night (Wednesday's, Thursday's trade date) is the calendar day before's. Read two days late before."""
    sessions_by_date = [(date(2026, 11, 26), date(2026, 11, 25)), (date(2026, 11, 27), date(2026, 11, 26)),
                        (date(2026, 11, 30), date(2026, 11, 27)), (date(2026, 12, 1), date(2026, 11, 30))]
    rows = [(trade_date, at) for trade_date, night_of in sessions_by_date
            for at in night_rows(trade_date, night_of, day_session)]
    lines = ["Trade Date,Time,Symbol,Price,Volume"] + [
        f"{trade_date:%Y-%m-%d},{at:%H:%M:%S},NK225M,{38000 + i},1" for i, (trade_date, at) in enumerate(rows)]
    path = tmp_path / "nk225m.csv"
    path.write_text("\n".join(lines) + "\n")
    replay = FileReplay(path, columns=map_from_options(
        columns="ts=Trade Date+Time,price=Price,size=Volume,stream=Symbol,tz=Asia/Tokyo"))
    ticks = drain(replay)
    assert sorted(t.ts for t in ticks) == sorted(int(at.timestamp()) * 10**9 for _, at in rows)
    friday = [t for t in ticks if 38000 + rows.index((date(2026, 11, 30), night_rows(
        date(2026, 11, 30), date(2026, 11, 27), False)[0])) == t.price]
    assert datetime.fromtimestamp(friday[0].ts / 1e9, TOKYO) == datetime(2026, 11, 27, 17, tzinfo=TOKYO)
    assert not {datetime.fromtimestamp(t.ts / 1e9, TOKYO).weekday() for t in ticks} & {6}  # no Sunday
    assert any("a Monday's night session on the Friday before, its rows after midnight on the Saturday" in n
               for n in replay.notes), replay.notes


def test_a_monday_evening_elsewhere_is_the_sunday_and_the_note_names_the_jpx_reading(tmp_path: Path) -> None:
    """CME's week opens on Sunday evening, Monday's trade date: read so outside Asia/Tokyo, and said."""
    rows = [(date(2026, 11, 30), at) for at in sessions(date(2026, 11, 30), **CME)]
    path = write(tmp_path / "cme.csv", rows, past_24=False, counted=False)
    replay = FileReplay(path, columns=map_from_options(
        columns="ts=TradeDate+Time,price=Price,size=Volume,trade_date=TradeDate,tz=America/Chicago"))
    assert [t.ts for t in drain(replay)] == [int(at.timestamp()) * 10**9 for _, at in rows]
    assert any("carry a Monday's date and are read on the Sunday, as CME's week opens" in n and
               "--tz Asia/Tokyo" in n for n in replay.notes), replay.notes


def test_a_calendar_date_with_a_time_past_24_is_on_the_next_day(tmp_path: Path) -> None:
    path = tmp_path / "night.csv"
    path.write_text("Date,Time,Price,Volume\n2024-06-03,23:45:00,1.5,1\n2024-06-03,25:30:00,1.6,1\n")
    replay = FileReplay(path, columns=map_from_options(columns="ts=Date+Time,price=Price,size=Volume,tz=Asia/Tokyo"))
    assert [t.ts for t in drain(replay)] == [int(datetime(2024, 6, 3, 23, 45, tzinfo=TOKYO).timestamp()) * 10**9,
                                            int(datetime(2024, 6, 4, 1, 30, tzinfo=TOKYO).timestamp()) * 10**9]


# (zone, symbol, the night's open and close, the day session; rows every 5 min: SGX's T to T+1 pause is 25 min)
NIGHT_VENUES = {
    "krx": ("Asia/Seoul", "KOSPI200F", (18, 0), (6, 0), ((8, 45), (15, 45)), "KRX's night session"),
    "sgx": ("Asia/Singapore", "SGXNK", (14, 55), (5, 15), ((7, 30), (14, 30)), "SGX's T+1 session")}


@pytest.mark.parametrize("venue", sorted(NIGHT_VENUES))
def test_krx_and_sgx_night_sessions_are_the_business_day_befores_evening(tmp_path: Path, venue: str) -> None:
    """review344 #7: KRX's night market (18:00-06:00 KST, from June 2025) is the next trading day's, and SGX's
    "T+1 session" is booked to the next business day: both stamp a night row with the next business day's trade
    date, a Friday night's with the Monday's, as JPX does. Read in their zones, a Friday night is the Friday's
    (not the Sunday's, as CME's week has it)."""
    zone_name, symbol, opens, closes, day, said = NIGHT_VENUES[venue]
    zone = ZoneInfo(zone_name)
    sessions_by_date = [(date(2026, 11, 26), date(2026, 11, 25)), (date(2026, 11, 27), date(2026, 11, 26)),
                        (date(2026, 11, 30), date(2026, 11, 27)), (date(2026, 12, 1), date(2026, 11, 30))]
    rows = []
    for trade_date, night_of in sessions_by_date:
        at = datetime.combine(night_of, datetime.min.time(), zone).replace(hour=opens[0], minute=opens[1])
        end = datetime.combine(night_of + timedelta(days=1), datetime.min.time(), zone).replace(
            hour=closes[0], minute=closes[1])
        while at <= end:
            rows.append((trade_date, at))
            at += timedelta(minutes=5)
        at = datetime.combine(trade_date, datetime.min.time(), zone).replace(hour=day[0][0], minute=day[0][1])
        while (at.hour, at.minute) <= day[1]:
            rows.append((trade_date, at))
            at += timedelta(minutes=5)
    path = tmp_path / f"{venue}.csv"
    path.write_text("Trade Date,Time,Symbol,Price,Volume\n" + "".join(
        f"{trade_date:%Y-%m-%d},{at:%H:%M:%S},{symbol},{100 + i % 50},1\n" for i, (trade_date, at) in enumerate(rows)))
    replay = FileReplay(path, columns=map_from_options(
        columns=f"ts=Trade Date+Time,price=Price,size=Volume,stream=Symbol,tz={zone_name}"))
    ticks = drain(replay)
    assert sorted(t.ts for t in ticks) == sorted(int(at.timestamp()) * 10**9 for _, at in rows)
    assert not {datetime.fromtimestamp(t.ts / 1e9, zone).weekday() for t in ticks} & {6}  # no Sunday
    note = [n for n in replay.notes if "read on the business day before their trade date" in n]
    assert note and f"({zone_name}: {said} belongs to the next business day" in note[0], replay.notes
