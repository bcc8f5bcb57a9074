"""The encoding a file that is not UTF-8 is said to be in, and the `iconv -f` that converts it: Windows-1251
(MOEX, QUIK, Finam), KOI8-R, cp949/EUC-KR (KRX), GBK (CTP), Shift_JIS (JPX) and Windows-1252 told apart on a
header and a few rows each, by how plausible each reading's words are (review 231, finding 3: cp1251 was called GBK
or Windows-1252, cp949 GBK, and the `iconv` advised garbled the text); two readings the text cannot tell apart are
both named. Every fixture is written here into tmp_path and read by the real replay."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from connectors.archives import not_utf8
from connectors.replay import FileReplay
from conftest import drain

CYRILLIC = "Дата;Время;Инструмент;Наименование;Цена;Объём\n" + "".join(
    f"2024-01-03;10:00:{i:02d};SBER;Сбербанк ао;271,{45 + i};{10 + i}\n" for i in range(5))
MOEX = "TRADENO;TRADEDATE;TRADETIME;SECID;SHORTNAME;PRICE;QUANTITY;BUYSELL\r\n" + "".join(
    f"{9000 + i};2024-01-03;10:00:{i:02d};{s};{n};{p};{i + 1};B\r\n"
    for i, (s, n, p) in enumerate([("SBER", "Сбербанк", "271,45"), ("GAZP", "ГАЗПРОМ ао", "163,20"),
                                   ("LKOH", "ЛУКОЙЛ", "6890,5"), ("SBER", "Сбербанк", "271,46")]))
KOREAN = "일자,시간,종목코드,종목명,체결가,체결량\r\n" + "".join(
    f"2024-01-02,09:00:{i:02d},005930,삼성전자,\"78,{400 + i * 100}\",{i + 5}\r\n" for i in range(4))
CHINESE = "交易日,合约代码,合约名称,最后修改时间,最新价,数量\n" + "".join(
    f"20261130,cu2601,沪铜2601,09:00:{i:02d},{78250 + i * 10},5\n" for i in range(4))
JAPANESE = "時刻,銘柄コード,銘柄名,約定値,出来高\n" + "".join(
    f"2026-03-10T09:00:{i:02d},7203,トヨタ自動車,{3450 + i},100\n" for i in range(4))
WESTERN = "Datum;Zeit;Wertpapier;Kurs;Stück\n" + "".join(
    f"03.01.2024;09:00:{i:02d};Société Générale;24,{10 + i};{i + 1}\n" for i in range(4))


@pytest.mark.parametrize("text, codec, said, iconv", [
    (CYRILLIC, "cp1251", "Windows-1251 (Cyrillic)", "cp1251"),
    (MOEX, "cp1251", "Windows-1251 (Cyrillic)", "cp1251"),
    (CYRILLIC, "koi8_r", "KOI8-R (Cyrillic)", "koi8-r"),
    (KOREAN, "cp949", "EUC-KR (cp949)", "cp949"),
    (CHINESE, "gbk", "GBK (cp936)", "gbk"),
    (JAPANESE, "cp932", "Shift_JIS (cp932)", "cp932"),
    (WESTERN, "cp1252", "Windows-1252", "cp1252"),
])
def test_each_encoding_is_named_with_the_iconv_that_gives_its_text_back(
        tmp_path: Path, text: str, codec: str, said: str, iconv: str) -> None:
    path = tmp_path / "export.csv"
    path.write_bytes(text.encode(codec))
    why = not_utf8(path)
    assert f"it reads as {said}; convert it first, e.g. iconv -f {iconv} -t utf-8" in why, why
    named = re.search(r"iconv -f (\S+)", why)[1]
    assert path.read_bytes().decode({"koi8-r": "koi8_r"}.get(named, named)) == text  # what the advice gives


def test_the_moex_file_is_read_as_cp1251(tmp_path: Path) -> None:
    path = tmp_path / "moex_trades.csv"
    path.write_bytes(MOEX.encode("cp1251"))
    replay = FileReplay(path, columns={"ts": "TRADEDATE+TRADETIME", "price": "PRICE", "size": "QUANTITY",
                                       "stream_col": "SHORTNAME", "tz": "Europe/Moscow"})
    assert [t.stream for t in drain(replay)] == ["Сбербанк", "ГАЗПРОМ ао", "ЛУКОЙЛ", "Сбербанк"]
    assert any("its text is Windows-1251 (Cyrillic)" in n and "iconv -f cp1251" in n for n in replay.notes)
    assert not any("GBK" in n or "cp1252" in n for n in replay.notes) and replay.cautions == []


def test_a_text_that_cannot_tell_two_readings_apart_names_both(tmp_path: Path) -> None:
    path = tmp_path / "one_word.csv"  # one word in capitals: Windows-1251's capitals are KOI8-R's small letters
    path.write_bytes("SECID;SHORTNAME\nSBER;ВТБ\n".encode("cp1251"))
    why = not_utf8(path)
    assert "Windows-1251 (Cyrillic)" in why and "KOI8-R (Cyrillic)" in why and "cannot tell" in why, why


def test_a_symbol_alone_names_windows_1252_among_the_readings(tmp_path: Path) -> None:
    path = tmp_path / "eur.csv"  # one byte past ASCII: `€`, or Windows-1251's `Ђ`
    path.write_bytes("time,Preis (€),size\n2024-01-02T10:00:00Z,1.5,2\n".encode("cp1252"))
    why = not_utf8(path)
    assert "Windows-1252" in why and "cannot tell" in why and "iconv -f cp1252" in why, why
