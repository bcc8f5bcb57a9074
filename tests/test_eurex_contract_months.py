"""fix374 (review373 #2): a German Eurex export during the roll (`Datum;Zeit;Produkt;Verfall;Kurs;Menge`, both
contract months trading) replayed as one stream named after the file, its price jumping 160 points between the two
contracts at every switch; under English names the streams were `FDAX 3.2025`, the contract month's leading zero
lost to a number's shortest form. The German (French, Italian, Spanish) product and expiry names now read as the
stream and its contract month, and a month written `MM.YYYY` is kept as written whichever column holds it. Real
files in tmp_path, read by FileReplay (the reader the CLI uses)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.replay import FileReplay
from conftest import drain


def _export(header: str, months: tuple[str, str] = ("03.2025", "06.2025")) -> str:
    """A German export of 60 trades, the two contract months alternating at levels 160 points apart."""
    rows = []
    for i in range(60):
        month, level = (months[0], 22800.0) if i % 2 else (months[1], 22962.0)
        price = f"{level + 0.5 * (i % 3):,.1f}".replace(",", "X").replace(".", ",").replace("X", ".")
        rows.append(f"13.03.2025;08:00:{i:02d},{100 + i};FDAX;{month};{price};{1 + i % 5}\n")
    return header + "\n" + "".join(rows)


def _streams(path: Path, columns: dict | None = None) -> tuple[dict[str, int], list[str]]:
    replay = FileReplay(path, columns={"decimal": "comma", **(columns or {})})
    ticks = drain(replay)
    counts: dict[str, int] = {}
    for tick in ticks:
        counts[tick.stream] = counts.get(tick.stream, 0) + 1
    return counts, replay.notes


@pytest.mark.parametrize("header", [
    "Datum;Zeit;Produkt;Verfall;Kurs;Menge", "Datum;Zeit;Produkt;Fälligkeit;Kurs;Menge",
    "Datum;Zeit;Produkt;Liefermonat;Kurs;Menge", "Date;Heure;Produit;Échéance;Cours;Quantité",
    "Data;Ora;Prodotto;Scadenza;Prezzo;Quantità", "Datum;Zeit;Product;Expiry;Kurs;Menge"])
def test_each_contract_month_of_a_european_export_is_a_stream_with_its_leading_zero(tmp_path: Path,
                                                                                     header: str) -> None:
    path = tmp_path / "eurex_fdax_de.csv"
    path.write_text(_export(header), encoding="utf-8")
    counts, notes = _streams(path)
    assert counts == {"FDAX 03.2025": 30, "FDAX 06.2025": 30}, notes
    product, month = header.split(";")[2:4]
    assert any(f"stream={product}+{month}" in note for note in notes), notes


def test_a_month_and_year_keeps_its_digits_in_a_stream_the_user_names(tmp_path: Path) -> None:
    path = tmp_path / "fdax.csv"
    path.write_text(_export("Datum;Zeit;Wurzel;Lauf;Kurs;Menge", months=("10.2030", "03.2031")), encoding="utf-8")
    counts, _ = _streams(path, {"stream_col": "Wurzel+Lauf"})
    assert counts == {"FDAX 10.2030": 30, "FDAX 03.2031": 30}


def test_a_strike_is_still_read_in_its_shortest_form(tmp_path: Path) -> None:
    """A strike written `10.2030` is a number (10.203), not a month: only a strike column keeps that reading."""
    path = tmp_path / "opts.csv"
    path.write_text("ts,underlying,expiry,strike,right,price,size\n" + "".join(
        f"2026-06-01T09:30:{i:02d}Z,SPY,2026-06-19,{('10.2030', '0470.00')[i % 2]},C,{1.5 + 0.01 * i:.2f},1\n"
        for i in range(10)), encoding="utf-8")
    ticks = drain(FileReplay(path))
    assert {t.stream for t in ticks} == {"SPY 2026-06-19 10.203 C", "SPY 2026-06-19 470 C"}
