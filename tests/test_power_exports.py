"""Power markets' exports are detected as the column maps that read them (review283 #5): EPEX's continuous trades
(`ExecutionTime`, each delivery period its own stream: Product+DeliveryStart) and ENTSO-E's prices (`MTU
(CET/CEST)`, an interval read as its start on Brussels' clock; `Day-ahead Price [EUR/MWh]`; the bidding zone its
`BZN|DE-LU` header names as the stream)."""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path
from typing import Callable
from zoneinfo import ZoneInfo

import pytest

from conftest import drain
from connectors.replay import FileReplay
from connectors.zero_crossings import planned_refusal

EPEX_HEADER = "TradeId,Side,Product,DeliveryStart,DeliveryEnd,ExecutionTime,TradePhase,Price,Currency,Volume,VolumeUnit"


def epex_trades(path: Path) -> Path:
    """Two quarter-hours' continuous trades (one delivered at 13:00Z, one at 13:15Z), interleaved in time."""
    rows = [EPEX_HEADER]
    start = dt.datetime(2026, 11, 3, 8, 0, tzinfo=dt.timezone.utc)
    for i in range(60):
        delivery = "2026-11-03T13:00:00Z" if i % 2 else "2026-11-03T13:15:00Z"
        end = delivery.replace(":00:00Z", ":15:00Z") if i % 2 else delivery.replace(":15:00Z", ":30:00Z")
        when = (start + dt.timedelta(seconds=3 * i)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        rows.append(f"{i + 1},{'BUY' if i % 3 else 'SELL'},XBID_Quarter_Hour_Power,{delivery},{end},{when},CONT,"
                    f"{(40 if i % 2 else 52) + i % 4 * 0.1:.2f},EUR,{1 + i % 5}.0,MW")
    path.write_text("\n".join(rows) + "\n")
    return path


def entsoe_day_ahead(path: Path) -> Path:
    lines = ['"MTU (CET/CEST)","Day-ahead Price [EUR/MWh]","Currency","BZN|DE-LU"']
    start = dt.datetime(2026, 11, 1)
    for i in range(48):
        a, b = start + dt.timedelta(hours=i), start + dt.timedelta(hours=i + 1)
        lines.append(f'"{a:%d.%m.%Y %H:%M} - {b:%d.%m.%Y %H:%M}","{60 + i % 7:.2f}","EUR",""')
    path.write_text("\n".join(lines) + "\n")
    return path


def test_epex_continuous_trades_are_detected_as_the_map_that_reads_them(tmp_path: Path) -> None:
    replay = FileReplay(epex_trades(tmp_path / "epex_trades.csv"))
    cmap = replay.plans[0].columns
    # the review's working map:
    # --columns ts=ExecutionTime,price=Price,size=Volume,side=Side,stream=Product+DeliveryStart
    assert (cmap.ts, cmap.price, cmap.size, cmap.side, cmap.stream_col) == \
        ("ExecutionTime", "Price", "Volume", "Side", "Product+DeliveryStart")
    ticks = drain(replay)
    assert dict(replay.rejected) == {} and len(ticks) == 60
    assert {t.stream for t in ticks} == {"XBID_Quarter_Hour_Power 2026-11-03T13:00:00Z",
                                         "XBID_Quarter_Hour_Power 2026-11-03T13:15:00Z"}
    assert ticks[0].ts == int(dt.datetime(2026, 11, 3, 8, 0, tzinfo=dt.timezone.utc).timestamp()) * 10**9


def test_entsoe_day_ahead_prices_are_detected_on_brussels_clock(tmp_path: Path) -> None:
    replay = FileReplay(entsoe_day_ahead(tmp_path / "entsoe_da.csv"))
    cmap = replay.plans[0].columns
    assert (cmap.ts, cmap.price, cmap.stream, cmap.tz) == \
        ("MTU (CET/CEST)", "Day-ahead Price [EUR/MWh]", "DE-LU", "Europe/Brussels")
    ticks = drain(replay)
    assert dict(replay.rejected) == {} and len(ticks) == 48 and {t.stream for t in ticks} == {"DE-LU"}
    # 01.11.2026 00:00 - 01:00 CET is the hour from 2026-10-31 23:00 UTC
    assert ticks[0].ts == int(dt.datetime(2026, 10, 31, 23, tzinfo=dt.timezone.utc).timestamp()) * 10**9


BRUSSELS = ZoneInfo("Europe/Brussels")


def entsoe_day(path: Path, day: dt.date, minutes: int, mark: str) -> list[int]:
    """ENTSO-E's prices of one delivery day in local time (`MTU (CET/CEST)`), every interval of it: 25 hours (100
    quarter-hours) the day clocks go back, 23 (92) the day they go forward. The repeated hour's passes marked by
    `mark`: "zone" writes `(CEST)` / `(CET)` after each interval, "B" a `B` after the second pass's clocks, "" only
    repeats them. Returns each interval's start, int ns."""
    start = dt.datetime.combine(day, dt.time(), BRUSSELS).astimezone(dt.timezone.utc)
    end = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), BRUSSELS).astimezone(dt.timezone.utc)
    lines, starts, seen = ['"MTU (CET/CEST)","Day-ahead Price [EUR/MWh]","Currency","BZN|DE-LU"'], [], set()
    while start < end:
        local = start.astimezone(BRUSSELS)
        wall = local.replace(tzinfo=None)
        a, b = f"{wall:%d.%m.%Y %H:%M}", f"{wall + dt.timedelta(minutes=minutes):%d.%m.%Y %H:%M}"
        second = wall in seen
        seen.add(wall)
        text = f"{a} - {b}"
        if mark == "zone":
            text += " (CEST)" if local.utcoffset() == dt.timedelta(hours=2) else " (CET)"
        elif mark == "B" and second:
            text = f"{a}B - {b}B"
        lines.append(f'"{text}","{40 + len(starts) % 13:.2f}","EUR",""')
        starts.append(int(start.timestamp()) * 10**9)
        start += dt.timedelta(minutes=minutes)
    path.write_text("\n".join(lines) + "\n")
    return starts


@pytest.mark.parametrize("minutes", [60, 15])
@pytest.mark.parametrize("mark", ["zone", "B", ""])
def test_entsoe_the_day_clocks_go_back_reads_each_interval_at_its_own_instant(tmp_path: Path, minutes: int,
                                                                               mark: str) -> None:
    # fix303 #6: `(CET)`/`(CEST)` refused every row, `B` rejected the marked ones, an hour written twice with no
    # mark replayed twice at the first pass
    starts = entsoe_day(tmp_path / "entsoe.csv", dt.date(2026, 10, 25), minutes, mark)
    assert len(starts) == (25 if minutes == 60 else 100)
    replay = FileReplay(tmp_path / "entsoe.csv")
    ticks = drain(replay)
    assert dict(replay.rejected) == {}
    assert [t.ts for t in ticks] == starts  # two distinct instants for the hour's two passes, in order
    assert [t.price for t in ticks] == [40 + i % 13 for i in range(len(starts))]
    assert not [n for n in replay.notes if "no step back of the wall clock" in n], replay.notes


@pytest.mark.parametrize("minutes", [60, 15])
def test_entsoe_the_day_clocks_go_forward_has_its_23_hours(tmp_path: Path, minutes: int) -> None:
    starts = entsoe_day(tmp_path / "entsoe.csv", dt.date(2026, 3, 29), minutes, "")
    assert len(starts) == (23 if minutes == 60 else 92)
    replay = FileReplay(tmp_path / "entsoe.csv")
    assert [t.ts for t in drain(replay)] == starts and dict(replay.rejected) == {}


def local_delivery_trades(path: Path, header: str, contracts: list[tuple[str, str, str, float]]) -> Path:
    """Continuous trades of ``contracts`` (area or product, delivery start and end as local clock text, price
    level), 20 each, interleaved in time; the trade time in UTC."""
    rows = [header]
    start = dt.datetime(2024, 10, 26, 18, 0)
    for i in range(20 * len(contracts)):
        root, begin, end, level = contracts[i % len(contracts)]
        rows.append(f"{start + dt.timedelta(seconds=7 * i):%Y-%m-%d %H:%M:%S},{root},{begin},{end},"
                    f"{level + i // len(contracts) % 4 * 0.05:.2f},1.0")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_delivery_hour_the_clock_repeats_is_cautioned(tmp_path: Path) -> None:
    """The hour delivered in the first pass of 02:00 (3A) and the one in its second (3B) are two contracts that local
    delivery text writes alike: they were read as one stream, silently (review441 #3)."""
    epex = local_delivery_trades(tmp_path / "epex.csv", "ExecutionTime,Product,DeliveryStart,DeliveryEnd,Price,Volume",
                                 [("XBID_Hour_Power", "2024-10-27 02:00", "2024-10-27 03:00", 50.0),
                                  ("XBID_Hour_Power", "2024-10-27 02:00", "2024-10-27 03:00", 20.0),
                                  ("XBID_Hour_Power", "2024-10-27 04:00", "2024-10-27 05:00", 40.0)])
    plan = FileReplay(epex).plans[0]
    assert plan.columns.stream_col == "Product+DeliveryStart"
    said = [n for n in plan.notes if "repeats when summer time ends" in n]
    assert len(said) == 1 and said[0].startswith(
        'epex.csv: column "DeliveryStart" names the streams by local clock times without a UTC offset, and '
        '2024-10-27 02:00 falls in the hour the clock repeats when summer time ends in Europe/Berlin (if that is '
        'their clock: the column names no zone)'), plan.notes
    # verify55 R6: said of the merged streams alone, so a run whose --streams leaves them out (its advice) does not
    assert said[0].streams == {"XBID_Hour_Power 2024-10-27 02:00"}
    followed = FileReplay(epex, streams=["XBID_Hour_Power 2024-10-27 04:00"])
    assert not [n for n in followed.notes if "repeats when summer time ends" in n], followed.notes


def test_nord_pool_s_and_entsoe_s_delivery_and_area_columns_name_the_streams(tmp_path: Path) -> None:
    """Nord Pool's `Delivery Start (CET)` was not read as the delivery start nor its area as the stream (review441
    #7), nor ENTSO-E's `Area` (#9): several contracts or zones went to one stream."""
    nord_pool = local_delivery_trades(
        tmp_path / "np.csv", "Trade Time (UTC),Delivery Area,Delivery Start (CET),Delivery End (CET),Price (EUR),"
        "Volume (MW)", [("DE", "2024-10-27 05:00", "2024-10-27 06:00", 50.0),
                        ("DE", "2024-10-27 05:00", "2024-10-27 05:15", 70.0), ("FR", "2024-10-27 05:00",
                                                                                "2024-10-27 06:00", 30.0)])
    replay = FileReplay(nord_pool)
    assert replay.plans[0].columns.stream_col == "Delivery Area+Delivery Start (CET)+Delivery End (CET)"
    assert {t.stream for t in drain(replay)} == {"DE 2024-10-27 05:00 2024-10-27 06:00",
                                                 "DE 2024-10-27 05:00 2024-10-27 05:15",
                                                 "FR 2024-10-27 05:00 2024-10-27 06:00"}
    # named by its start alone, the hour and its first quarter-hour interleave: said, as for a detected stream
    plan = FileReplay(nord_pool, columns={"stream_col": "Delivery Area+Delivery Start (CET)"}).plans[0]
    assert [n for n in plan.notes if n.startswith('np.csv: column "Delivery End (CET)" (2024-10-27 06:00, '
                                                  '2024-10-27 05:15, ...) is not read')], plan.notes
    replay = FileReplay(entsoe_areas(tmp_path / "entsoe.csv", lambda h: 60 + h))
    assert {t.stream for t in drain(replay)} == {"DE-LU", "FR"}


def entsoe_areas(path: Path, de_lu: Callable[[int], float]) -> Path:
    """ENTSO-E's newer layout: 12 hours' prices of two zones, named in an `Area` column (`BZN|DE-LU`)."""
    path.write_text('"MTU (CET/CEST)","Area","Sequence","Day-ahead Price (EUR/MWh)"\n' + "".join(
        f'"25.10.2024 {h:02d}:00 - 25.10.2024 {h + 1:02d}:00 (CEST)","BZN|{zone}","Without Sequence","{price}"\n'
        for h in range(12) for zone, price in (("DE-LU", de_lu(h)), ("FR", 51 + h * 0.6))))
    return path


def test_an_area_s_zone_crossing_zero_gets_an_offset_that_pasted_reads_it(tmp_path: Path) -> None:
    """verify55 R1: a zone of the `Area` column was the stream `BZN|DE-LU`, and its zero-crossing refusal advised
    `--price-offset 'BZN|DE-LU=17'`, which the option refuses (its `|` joins several offsets). The zone is the
    stream `DE-LU`, as the older layout's `BZN|DE-LU` header names it; its advice, pasted, reads every row."""
    walk = [40, 30, 20, 10, 3, -5, -16.85, -4, 6, 15, 25, 35]  # a windy noon's hours below zero
    entsoe = entsoe_areas(tmp_path / "entsoe.csv", walk.__getitem__)
    refusal = planned_refusal(FileReplay(entsoe).plans, None, "backtest")
    assert refusal is not None and "--price-offset 'DE-LU=17'" in refusal, refusal
    pasted = shlex.split(refusal.split("--price-offset ")[1].split(" ")[0])[0]  # as a shell hands it to the option
    lifted = FileReplay(entsoe, columns={"price_offset": pasted})
    assert len(drain(lifted)) == 24 and not lifted.rejected
