"""review260 #4: Japanese, Chinese and Korean vendors' headers (`約定日時,価格,数量`, `成交时间,证券代码,成交价,成交量`,
`체결시간,종목코드,체결가,체결량`) were never detected: the file was refused, "no time column among them", as
connectors/field_names.py's normal_name read every such character as "_". Detected now by their names, a stock
code kept as text. Real files in tmp_path, read by FileReplay (the reader the CLI uses)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from connectors.field_names import normal_name, wire_field_of
from connectors.replay import FileReplay
from conftest import drain

HEADERS = [("約定日時,価格,数量", "tse.csv", "tse", "Asia/Tokyo",
            "ts=約定日時 (datetime, Asia/Tokyo), stream_name=tse, price=価格, size=数量"),
           ("成交时间,证券代码,成交价,成交量", "sz.csv", "000001", "Asia/Shanghai",
            "ts=成交时间 (datetime, Asia/Shanghai), stream=证券代码, price=成交价, size=成交量"),
           ("체결시간,종목코드,체결가,체결량", "krx.csv", "005930", "Asia/Seoul",
            "ts=체결시간 (datetime, Asia/Seoul), stream=종목코드, price=체결가, size=체결량")]


@pytest.mark.parametrize("header, name, stream, zone, read_as", HEADERS, ids=["japanese", "chinese", "korean"])
def test_cjk_headers_are_detected_by_their_names(tmp_path: Path, header: str, name: str, stream: str, zone: str,
                                                 read_as: str) -> None:
    path = tmp_path / name
    code = {"sz.csv": "000001,", "krx.csv": "005930,"}.get(name, "")
    path.write_text(header + "\n" + "".join(f"2026-06-01 09:30:{i:02d},{code}{11.5 + 0.01 * (i % 3):.2f},100\n"
                                            for i in range(30)))
    replay = FileReplay(path, columns={"tz": zone})
    ticks = drain(replay)
    assert len(ticks) == 30 and ticks[0].stream == stream and ticks[0].price == 11.5 and ticks[0].size == 100
    assert ticks[0].ts == int(datetime.fromisoformat("2026-06-01T09:30:00").replace(tzinfo=ZoneInfo(zone))
                              .timestamp()) * 10**9
    assert any(f"read as {read_as}" in note for note in replay.notes), replay.notes


def test_cjk_names_keep_their_letters_and_ascii_names_read_as_before() -> None:
    assert normal_name("約定日時") == "約定日時" and normal_name("成交 时间") == "成交_时间"
    assert normal_name("Bid Price") == "bid_price" and normal_name("<BID>") == "bid" and normal_name("#RIC") == "ric"
    assert wire_field_of("価格") == "price" and wire_field_of("종목코드") == "stream"


@pytest.mark.parametrize("header", ["日付,時刻,価格,数量", "日期,时间,价格,成交量", "일자,시간,가격,거래량"])
def test_a_cjk_date_beside_a_time_of_day_is_read_as_one(tmp_path: Path, header: str) -> None:
    """Chinese terminals' exports (通达信's 日期,时间,...) write the day and the time of day apart: read as one, as
    `date,time` is (before, `时间` alone was refused as a time of day without a date)."""
    path = tmp_path / "ticks.csv"
    path.write_text(header + "\n" + "".join(f"2026-06-01,09:30:{i:02d},11.5,100\n" for i in range(30)))
    replay = FileReplay(path, columns={"tz": "Asia/Shanghai"})
    ticks = drain(replay)
    assert len(ticks) == 30 and ticks[1].ts - ticks[0].ts == 10**9
    assert ticks[0].ts == int(datetime.fromisoformat("2026-06-01T01:30:00+00:00").timestamp()) * 10**9
    date, time = header.split(",")[:2]
    assert any(f"read as ts={date}+{time} (datetime, Asia/Shanghai)" in note for note in replay.notes), replay.notes


def test_asian_vendors_code_and_side_columns_are_read(tmp_path: Path) -> None:
    """review433 #14 and #6: Tushare's ts_code, RiceQuant's order_book_id, Wind's windcode, SSE's SecurityID and
    TWSE's 證券代號 were unread (every stock one stream named after the file), and so were BSFlag, trade_side, 买卖方向
    and 매수매도 (then the model's caveat told the venue to send sides)."""
    layouts = [("ts_code", "bs_flag", "B", "S"), ("order_book_id", "BSFlag", "B", "S"), ("windcode", "trade_side",
               "buy", "sell"), ("SecurityID", "买卖方向", "买", "卖"), ("證券代號", "매수매도", "매수", "매도")]
    for code, side, buy, sell in layouts:
        path = tmp_path / f"{code}.csv"
        path.write_text(f"time,{code},price,qty,{side}\n" + "".join(
            f"2026-06-01 09:30:{i:02d},{('000001', '600519')[i % 2]},11.5,100,{(buy, sell)[i // 2 % 2]}\n"
            for i in range(8)))
        ticks = drain(FileReplay(path, columns={"tz": "Asia/Shanghai"}))
        assert [(t.stream, t.side) for t in ticks[:4]] == [("000001", "buy"), ("600519", "buy"), ("000001", "sell"),
                                                           ("600519", "sell")], code


def test_a_twse_minguo_date_is_refused_naming_its_year_and_what_reads_it(tmp_path: Path) -> None:
    """review433 #11: TWSE's `113/12/02` (Minguo year 113, 2024) was refused as no ISO 8601 with a strftime format to
    give, which read it as the year 113, every row rejected: no code adds 1911. Its 證券代號 names the stream."""
    path = tmp_path / "twse.csv"
    path.write_text("日期,時間,證券代號,成交價,成交量\n" + "".join(f"113/12/02,09:00:{i:02d},2330,1060.{i % 3},1500\n"
                                                          for i in range(5)))
    for keys in ({"tz": "Asia/Taipei"}, {"tz": "Asia/Taipei", "ts_format": "%Y/%m/%d %H:%M:%S"}):
        with pytest.raises(ValueError, match=r'column "日期\+時間" holds "113/12/02 09:00:00", a date of Taiwan\'s Minguo '
                                             r"\(ROC\) calendar \(year 113 is 2024\), which no strftime code reads"):
            FileReplay(path, columns=keys)
