"""fix274 #1: German, French, Italian and Spanish exchanges' headers (Xetra's `Datum;Zeit;Wertpapier;Kurs;Stück`,
Euronext's `Heure;Symbole;Cours;Quantité;Sens`, Geld/Brief for a quote's bid and ask) were refused, "no time column
among them", and `Stück`, `Quantité` lost their accented letter to connectors/field_names.py's normal_name. Detected
now without a map and read equal to the same ticks under an English header; their side words (Kauf/Verkauf,
Achat/Vente) read as buy/sell. Real files in tmp_path, read by FileReplay (the reader the CLI uses)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.field_names import normal_name, wire_field_of
from connectors.replay import FileReplay
from conftest import drain

ROWS = [(f"09:30:{i:02d}", 61.5 + 0.01 * (i % 3), 100 + 7 * (i % 4), ("buy", "sell")[i % 2]) for i in range(30)]
ENGLISH = "timestamp,symbol,price,size,side\n" + "".join(f"2026-06-01 {t},SAP,{p:.2f},{s},{d}\n" for t, p, s, d in ROWS)
GERMAN = "Datum;Zeit;Wertpapier;Kurs;Stück;Richtung\n" + "".join(  # a decimal comma, as German exports write it
    f"01.06.2026;{t};SAP;{f'{p:.2f}'.replace('.', ',')};{s};{ {'buy': 'Kauf', 'sell': 'Verkauf'}[d]}\n"
    for t, p, s, d in ROWS)
FRENCH = "Date;Heure;Symbole;Cours;Quantité;Sens\n" + "".join(
    f"2026-06-01;{t};SAP;{p:.2f};{s};{ {'buy': 'Achat', 'sell': 'Vente'}[d]}\n" for t, p, s, d in ROWS)


def read(path: Path, text: str) -> tuple[list, list[str]]:
    path.write_text(text, encoding="utf-8")
    replay = FileReplay(path)
    return drain(replay), replay.notes


@pytest.mark.parametrize("text, read_as", [
    (GERMAN, "ts=Datum+Zeit (datetime, %d.%m.%Y %H:%M:%S%.f), stream=Wertpapier, price=Kurs, size=Stück, "
             "side=Richtung"),
    (FRENCH, "ts=Date+Heure (datetime), stream=Symbole, price=Cours, size=Quantité, side=Sens")],
    ids=["german", "french"])
def test_european_headers_are_detected_and_read_as_the_english_file(tmp_path: Path, text: str, read_as: str) -> None:
    english, _ = read(tmp_path / "en.csv", ENGLISH)
    ticks, notes = read(tmp_path / "eu.csv", text)
    assert len(ticks) == 30 and ticks == english
    assert {t.side for t in ticks} == {"buy", "sell"}
    assert any(f"read as {read_as}" in note for note in notes), notes


def test_geld_and_brief_are_a_quotes_bid_and_ask(tmp_path: Path) -> None:
    ticks, notes = read(tmp_path / "q.csv", "Zeit;Wertpapier;Geld;Brief\n" + "".join(
        f"2026-06-01 09:30:{i:02d};SAP;{61.5 + 0.01 * (i % 3):.2f};{61.52 + 0.01 * (i % 3):.2f}\n" for i in range(30)))
    assert len(ticks) == 30 and (ticks[0].bid, ticks[0].ask, ticks[0].kind) == (61.5, 61.52, "quote")
    assert any("read as ts=Zeit (datetime), stream=Wertpapier, bid=Geld, ask=Brief" in n for n in notes), notes


def test_accented_names_keep_their_letters_and_ascii_names_read_as_before() -> None:
    assert normal_name("Stück") == "stück" and normal_name("Quantité (EUR)") == "quantité_eur"
    assert normal_name("Bid Price") == "bid_price" and normal_name("<BID>") == "bid"
    assert wire_field_of("Quantità") == "size" and wire_field_of("Kurs") == "price" and wire_field_of("Lado") == "side"
