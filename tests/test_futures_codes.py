"""Futures by their exchange codes, one rule (connectors/futures_codes.py) for `serve`'s start line, `health`'s and
every reply's `spot_trained_model` caveat: the start line promised the caveat for "a future", yet Eurex's `FDXM5`
and `FGBLM5`, JPX's `NK225M2406` and CME's `ESM4` got none, only crypto-style expiries did (review373 #8, review375
#10). And a model trained on the user's own futures is not called spot-trained: `serve` says what it was trained
on, and its card records the --price-offset its prices were read with (review374 #10). A real server, real
sockets, a real checkpoint trained here."""

from __future__ import annotations

import re
from pathlib import Path

import msgpack
import pytest

from conftest import serving, tiny_tick_checkpoint
from connectors.futures_codes import derivative_kind, futures_name
from engine.service.market_caveat import SPOT_TRAINED_MODEL, spot_only, start_note
from test_cli import config, wait_for
from test_served_price_offset import power_model
from test_spot_model_caveat import SPOT_CARD
from wire_client import Control, push_socket, trade

EXCHANGE_FUTURES = ["FDXM5", "FGBLM5", "NK225M2406", "ESM4", "CLZ24"]
# spot names of every market the reviews fed, an ISIN, a token whose name ends in a digit: none is a derivative
SPOT = ["BTCUSDT", "EURUSD", "AAPL", "7203.T", "0700.HK", "SIEGn.DE", "DE0007236101", "US0378331005", "LUNA2",
        "トヨタ自動車", "SPY"]


def test_exchange_futures_codes_are_dated_futures_and_spot_names_are_none() -> None:
    for name in EXCHANGE_FUTURES:
        assert derivative_kind(name) == "a dated future", name
    assert derivative_kind("CLZ4-CLF5") == "a futures calendar spread"
    for name in SPOT:
        assert derivative_kind(name) is None, name
    # India's contract symbols, monthly and weekly (review433 #3: none was a derivative)
    assert [derivative_kind(n) for n in ("NIFTY24DECFUT", "M&M24DECFUT", "NIFTY24DEC24000CE", "NIFTY24D0524300PE",
                                          "BANKNIFTY24DEC52000PE", "RELIANCE")] == \
        ["a dated future", "a dated future", "an option", "an option", "an option", None]
    # the crypto shapes as before
    assert [derivative_kind(n) for n in ("BTC-29MAR24", "XBTZ25", "BTCUSDT_PERP", "BTC-USD-SWAP",
                                          "BTC-27DEC24-60000-C")] == \
        ["a dated future", "a dated future", "a perpetual", "a swap", "an option"]
    # review440 #5: LSEG's continuation RICs and a product with its contract month (as replay joins Produkt;Verfall)
    # are futures to the caveat too; a continuous series of letters and one digit is too loose a shape (LUNA2)
    assert [derivative_kind(n) for n in ("FDXc1", "LCOc1", "STXEc2", "CL=F", "ES1!", "ES.c.0")] == \
        ["a continuous futures series"] * 6
    assert [derivative_kind(n) for n in ("FESX 12.2024", "FDAX 03/2025", "FESX DEC24", "FESX 2024-12")] == \
        ["a dated future"] * 4
    assert [derivative_kind(n) for n in ("CL1", "VOD.L", "ASML.AS", "SAP 2024")] == [None] * 4
    # a price step's roll reading takes a continuous series too, a shape too loose for the caveat (LUNA2)
    assert all(futures_name(n) for n in ("CL1", "ES1!", "CL=F", "CLc1", "@ES", *EXCHANGE_FUTURES))
    assert not any(futures_name(n) for n in ("AAPL", "7203.T", "DE0007236101"))


# real contract codes (CME, CBOT, ICE, Eurex, JPX), bare and named by venue as a `bad_stream` refusal advises
REAL_CODES = ["ESM4", "ESZ24", "ESZ2024", "SR3Z4", "FDXH5", "NK225M2503", "CLK0", "6EH5", "ZNH5", "BZF5", "FGBLM5"]
# real equities, indices and a scanner's internal IDs of letters and digits (review380 #11: 360 of EQ00000..EQ02999
# were called dated futures), index CFDs whose digits are no year
NOT_FUTURES = ["EQ00103", "EQ00005", "AAPL", "BRK.B", "7203.T", "F", "ES", "HK50", "EU50", "CN50", "US30", "UK100",
               "JP225", "SPX500", "0700.HK"]


def test_real_codes_are_futures_bare_or_by_venue_and_ids_are_not() -> None:
    for name in REAL_CODES:
        for named in (name, f"{name}.cme", f"{name}.ice-eu"):
            assert derivative_kind(named) == "a dated future", named
    assert derivative_kind("CLZ4-CLF5.nymex") == "a futures calendar spread"
    assert derivative_kind("BTC-27DEC24-60000-C.deribit") == "an option"
    for name in NOT_FUTURES:
        assert derivative_kind(name) is None, name
    ids = [f"EQ{i:05d}" for i in range(3000)]
    assert [name for name in ids if derivative_kind(name) is not None] == []
    # the letters-then-digits shape stays a future where a root ends in a month code and the year follows
    assert derivative_kind("EQZ4") == "a dated future" and derivative_kind("EQ00Z24") == "a dated future"
    assert derivative_kind("CLZ99") == "a dated future"  # (a 1990s contract: 90..99 are years too)


def test_a_futures_code_with_a_dot_after_its_root_is_a_dated_future_and_a_venue_still_is_not() -> None:
    """review444 #3: `ES.H25`, the wire page's running example of a future, got no spot_trained_model caveat where
    `ESH25` did: its `.H25` was read past as a venue's suffix, leaving `ES`. A month and a year after the dot stay."""
    for name in ("ES.H25", "ES.H5", "ES.H2025", "CL.Z4", "FDX.M5", "ES.H25.cme"):
        assert derivative_kind(name) == "a dated future", name
    assert derivative_kind("CL.Z4-CL.F5") == "a futures calendar spread"
    for name in ("BRK.B", "VOD.L", "AAPL.N", "7203.T", "SIEGn.DE", "ES.cme"):  # (a venue, a share class)
        assert derivative_kind(name) is None, name


def test_every_name_serves_start_line_gives_is_one_the_rule_caveats() -> None:
    line = start_note(None)  # the built-in model: spot data only
    assert line is not None and "ESM4, FDXM5, NK225M2406" in line
    named = re.search(r"\(([^()]*)\) is out of its training's distribution", line)[1]
    examples = re.findall(r"\b[A-Z][A-Za-z0-9_-]*\d[A-Za-z0-9_-]*|\b[A-Z]+-[A-Z]+(?:-[A-Z]+)?\b|\b[A-Z]+_PERP\b",
                          named)
    assert len(examples) >= 8, examples
    for name in examples:
        assert derivative_kind(name) is not None, name


def test_replies_about_exchange_futures_carry_the_caveat(tmp_path: Path) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "m")
    (checkpoint / "TRAINING.md").write_text(SPOT_CARD)
    streams = ["FDXM5", "NK225M2406", "ESM4", "7203.T", "SR3Z4.cme", "EQ00103"]
    with serving(config(checkpoint, tmp_path)) as server:
        control, push = Control(server.endpoints["control"]), push_socket(server.endpoints["ingest"])
        try:
            t0 = 1_700_000_000 * 10**9
            push.send(msgpack.packb([trade(stream, t0 + i, 100.0 + i) for i in range(5) for stream in streams]))
            wait_for(lambda: control.ok("stats")["stats"]["ticks_in"] == 30, timeout_s=60)
            nk = control.ok("ask", stream="NK225M2406", query="dir")["caveats"]
            assert [c["kind"] for c in nk] == [SPOT_TRAINED_MODEL]
            assert nk[0]["text"].startswith("by its name, NK225M2406 is a dated future: this model was trained on "
                                            "spot markets only"), nk
            assert [c["kind"] for c in control.ok("get", stream="ESM4", query="dir")["caveats"]] == \
                [SPOT_TRAINED_MODEL]
            assert control.ok("ask", stream="7203.T", query="dir")["caveats"] == []
            # named by venue, as a refusal advises (review379 #8); a scanner's ID is no future (review380 #11)
            assert [c["kind"] for c in control.ok("ask", stream="SR3Z4.cme", query="dir")["caveats"]] == \
                [SPOT_TRAINED_MODEL]
            assert control.ok("get", stream="EQ00103", query="dir")["caveats"] == []
            (held,) = control.ok("health")["caveats"]
            assert held["text"].startswith("by their names, FDXM5 is a dated future; NK225M2406 is a dated future; "
                                           "ESM4 is a dated future; and 1 more: "), held
        finally:
            control.sock.close()
            push.close()


@pytest.fixture(scope="module")
def futures_model(tmp_path_factory) -> Path:
    """A tiny model trained on a crude future's own ticks, read with --price-offset (CL below zero)."""
    root, _ = power_model(tmp_path_factory.mktemp("futures_model"), "CLK0", "CLK0=21", seed=9)
    return root / "m"


def test_a_model_trained_on_futures_says_what_it_was_trained_on(futures_model: Path) -> None:
    assert not spot_only(futures_model)
    line = start_note(futures_model)
    assert line is not None and "lists training data of CLK0 (a dated future): not spot markets only" in line, line
    assert "spot markets only:" not in line


def test_its_card_records_the_offset_and_what_it_does_to_the_bps_questions(futures_model: Path) -> None:
    card = (futures_model / "TRAINING.md").read_text()
    assert "\n- Read with: --price-offset CLK0=21 (evaluation.json's trained_on.reading;" in card, card[:800]
    assert "`volatility_*` and `move_bps_*` count bps of the shifted level, so they measure the offset" in card
    assert card.index("- Read with:") < card.index("- Data:")  # (outside the data lines the caveat reads)
