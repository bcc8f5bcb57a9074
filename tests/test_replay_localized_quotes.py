"""fix281 #2: a quote's bid and ask under Japanese (`買気配`/`売気配`, JPX's `最良買気配値`), Chinese (`买一价`/`卖一价`,
`买价`/`卖价`, CTP's `申买价一`/`申卖价一`), Korean (`매수호가`/`매도호가`), Spanish and Portuguese (`Precio Compra`/`Precio
Venta`, `Preço Compra`/`Preço Venda`, `Oferta Compra`) and Italian (`Prezzo Denaro`/`Prezzo Lettera`) headers were
refused, "no price (trades) nor bid and ask (quotes) among them", and Italian `Denaro`/`Lettera` (and German
`Geldkurs`/`Briefkurs`: review440 #6) read without their sizes. Detected now by connectors/field_names.py, with
their sizes where the language has a clear name for them: each file reads the same ticks as its copy under English
names. Real files in tmp_path, read by FileReplay (the reader backtest, feed replay and evaluate use)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.replay import FileReplay
from conftest import drain

QUOTES = [(f"2026-06-01 09:30:{i:02d}", 61.5 + 0.01 * (i % 3), 61.52 + 0.01 * (i % 3), 100 + i, 200 + 7 * (i % 4))
          for i in range(30)]
HEADERS = {"japanese": "時刻,買気配,売気配,買気配数量,売気配数量", "jpx": "時刻,最良買気配値,最良売気配値,最良買気配数量,最良売気配数量",
           "chinese": "时间,买一价,卖一价,买一量,卖一量", "chinese_short": "时间,买价,卖价,买量,卖量",
           "ctp": "时间,申买价一,申卖价一,申买量一,申卖量一", "traditional": "時間,買一價,賣一價,買一量,賣一量",
           "korean": "시간,매수호가,매도호가,매수호가잔량,매도호가잔량",
           "spanish": "Hora,Precio Compra,Precio Venta,Volumen Compra,Volumen Venta",
           "spanish_oferta": "Hora,Oferta Compra,Oferta Venta,Cantidad Compra,Cantidad Venta",
           "portuguese": "Hora,Preço Compra,Preço Venda,Quantidade Compra,Quantidade Venda",
           "italian": "Ora,Denaro,Lettera,Quantità Denaro,Quantità Lettera",
           "italian_prezzo": "Ora,Prezzo Denaro,Prezzo Lettera,Quantità Denaro,Quantità Lettera",
           # review440 #6: Eurex's quote sizes were left unread beside Geldkurs/Briefkurs
           "german": "Zeit,Geldkurs,Briefkurs,Geldvolumen,Briefvolumen",
           "german_menge": "Uhrzeit,Geld,Brief,Geld Menge,Brief Menge"}


def ticks_of(path: Path, header: str) -> list:
    path.write_text(header + "\n" + "".join(f"{t},{b:.2f},{a:.2f},{bs},{az}\n" for t, b, a, bs, az in QUOTES),
                    encoding="utf-8")
    replay = FileReplay(path, columns={"stream": "Q"})
    return drain(replay)


@pytest.mark.parametrize("language", list(HEADERS))
def test_a_localized_quote_header_reads_the_ticks_of_its_english_copy(tmp_path: Path, language: str) -> None:
    english = ticks_of(tmp_path / "english.csv", "time,bid,ask,bid_size,ask_size")
    assert len(english) == 30 and english[0].kind == "quote" and english[0].bid_size == 100
    assert ticks_of(tmp_path / f"{language}.csv", HEADERS[language]) == english
