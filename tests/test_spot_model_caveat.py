"""A model whose card lists spot training data only, serving a perpetual, a future or an option, says so: a
`spot_trained_model` caveat in ask, get and health replies about such a stream, none about a spot pair
(review310 #7). A real server with a real checkpoint whose card (TRAINING.md) is written here."""

from __future__ import annotations

from pathlib import Path

import msgpack
import polars as pl

from conftest import serving, tiny_tick_checkpoint
from connectors.cautions import Caution
from engine.models.loader import BUILTIN_MODEL_DIR
from engine.service.backtest import run_backtest
from engine.service.market_caveat import SPOT_TRAINED_MODEL, backtest_caveat, spot_only
from test_cli import config, wait_for
from wire_client import Control, push_socket, trade

SPOT_CARD = ("# trained\n\n- Data: `BTCUSDT-trades-2024-01-02.csv`, `EURUSD.csv`; rows rejected: none\n"
             "- Split per stream, in time: 80/10/10\n- Training: 10 steps\n")


def test_the_built_in_models_card_lists_spot_data_only_and_a_derivatives_card_does_not(tmp_path: Path) -> None:
    assert spot_only(BUILTIN_MODEL_DIR) and spot_only(None)  # (None: the built-in model)
    (tmp_path / "TRAINING.md").write_text(SPOT_CARD.replace("`EURUSD.csv`", "`BTCUSDT_PERP-trades.csv`"))
    assert not spot_only(tmp_path)
    assert not spot_only(tmp_path / "no_card_here")  # no card: nothing is assumed


def test_a_backtest_of_derivative_streams_warns_of_a_spot_trained_model(tmp_path: Path) -> None:
    """review431 #5: live answers on a perpetual or an option carry the caveat; the backtest, where a desk sizes up
    the model on its own history, said nothing of it. Now its notes warn, in the live caveat's words, and its
    summary says it again at the end; nothing for spot streams or a model trained on derivatives."""
    checkpoint = tiny_tick_checkpoint(tmp_path / "m")
    (checkpoint / "TRAINING.md").write_text(SPOT_CARD)
    t0 = 1_700_000_000 * 10**9
    ticks = pl.DataFrame([{"stream": stream, "ts": t0 + i * 10**6, "price": 100.0 + i % 3, "size": 1.0,
                           "side": "buy"} for i in range(8) for stream in ("BTC-PERPETUAL", "BTCUSDT")])
    said: list[str] = []
    report = run_backtest(config(checkpoint, tmp_path), [ticks], tmp_path / "q.yaml", tmp_path / "bt.parquet",
                          note=said.append, plot=False)
    warned = [line for line in said if line.startswith(f"{SPOT_TRAINED_MODEL}: by its name, BTC-PERPETUAL is a "
                                                        f"perpetual: this model was trained on spot markets only")]
    assert len(warned) == 1 and isinstance(warned[0], Caution), said
    assert f"warning (said above too): {warned[0]}" in report.summary()
    assert backtest_caveat(checkpoint, ["BTCUSDT", "EURUSD"]) is None
    (checkpoint / "TRAINING.md").write_text(SPOT_CARD.replace("`EURUSD.csv`", "`BTCUSDT_PERP-trades.csv`"))
    assert backtest_caveat(checkpoint, ["BTC-PERPETUAL"]) is None


def test_replies_about_a_derivatives_stream_carry_the_caveat(tmp_path: Path) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "m")
    (checkpoint / "TRAINING.md").write_text(SPOT_CARD)
    with serving(config(checkpoint, tmp_path)) as server:
        control, push = Control(server.endpoints["control"]), push_socket(server.endpoints["ingest"])
        try:
            t0 = 1_700_000_000 * 10**9
            push.send(msgpack.packb([trade(stream, t0 + i, 100.0 + i) for i in range(5)
                                     for stream in ("BTC-PERPETUAL", "BTCUSDT", "BTC-27DEC24-60000-C")]))
            wait_for(lambda: control.ok("stats")["stats"]["ticks_in"] == 15, timeout_s=60)
            kinds = lambda reply: [c["kind"] for c in reply["caveats"]]  # noqa: E731
            perp = control.ok("ask", stream="BTC-PERPETUAL", query="dir")
            assert kinds(perp) == [SPOT_TRAINED_MODEL]
            assert perp["caveats"][0]["text"].startswith("by its name, BTC-PERPETUAL is a perpetual: this model was "
                                                         "trained on spot markets only")
            assert kinds(control.ok("get", stream="BTC-27DEC24-60000-C", query="dir")) == [SPOT_TRAINED_MODEL]
            assert kinds(control.ok("ask", stream="BTCUSDT", query="dir")) == []
            health = control.ok("health")["caveats"]
            assert [c["kind"] for c in health] == [SPOT_TRAINED_MODEL]
            assert "BTC-PERPETUAL is a perpetual" in health[0]["text"] and "is an option" in health[0]["text"]
        finally:
            control.sock.close()
            push.close()


def test_healths_caveat_comes_and_goes_with_the_derivative_streams_held(tmp_path: Path) -> None:
    """fix326 #5: health named the derivative streams by walking every stream held; the stream table now keeps them
    as streams come and go. Forgotten, they leave the caveat; a new one brings it back; past three, counted."""
    checkpoint = tiny_tick_checkpoint(tmp_path / "m")
    (checkpoint / "TRAINING.md").write_text(SPOT_CARD)
    derivatives = ["BTC-PERPETUAL", "ETH-PERPETUAL", "BTC-27DEC24-60000-C", "BTCUSDT_PERP", "ETHUSDT_PERP"]
    with serving(config(checkpoint, tmp_path)) as server:
        control, push = Control(server.endpoints["control"]), push_socket(server.endpoints["ingest"])
        try:
            t0 = 1_700_000_000 * 10**9
            push.send(msgpack.packb([trade(stream, t0 + i, 100.0 + i) for i in range(3)
                                     for stream in (*derivatives, "BTCUSDT")]))
            wait_for(lambda: control.ok("stats")["stats"]["ticks_in"] == 18, timeout_s=60)
            (caveat,) = control.ok("health")["caveats"]
            assert caveat["kind"] == SPOT_TRAINED_MODEL and "; and 2 more:" in caveat["text"], caveat
            assert caveat["text"].startswith("by their names, BTC-PERPETUAL is a perpetual; ETH-PERPETUAL is a "
                                             "perpetual; BTC-27DEC24-60000-C is an option; and 2 more"), caveat
            for stream in derivatives:
                wait_for(lambda: control("forget", stream=stream)["ok"], timeout_s=60)  # (busy while computing)
            assert control.ok("health")["caveats"] == []  # only BTCUSDT, a spot pair, is held
            push.send(msgpack.packb(trade("SOL-PERP", t0 + 10, 20.0)))
            wait_for(lambda: control.ok("health")["caveats"] != [], timeout_s=60)
            (back,) = control.ok("health")["caveats"]
            assert back["text"].startswith("by its name, SOL-PERP is a perpetual: "), back
        finally:
            control.sock.close()
            push.close()
