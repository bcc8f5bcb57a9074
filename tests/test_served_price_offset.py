"""A checkpoint trained on prices lifted by --price-offset (a power product that prints below zero) serves ticks
read the way it learnt them whichever way they come: `backtest --model` reads its files with the offset, and
`feed replay` into `serve --model` does too, learning it from the service's `health` (review283 #1: the feed sent
the prices unshifted, refused the negative ones and the model read the rest 21 lower than in training)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import serving
from connectors.builtin import load_codec
from engine.service.cli import main
from engine.service.untrained_tokens import never_trained
from test_cli import DIR_QUERY, config, wait_for
from test_stream_selection import TINY

STREAM = "DE-QH-2026-11-03-14:15"  # (a colon and dashes: the per-stream form NAME=X must still find it)
TICKS = 1400
OFFSET = 21


def power_model(root: Path, stream: str, price_offset: str, seed: int) -> tuple[Path, Path]:
    """A quarter-hour product around 40 that dips to -15 for a while, and a tiny model (root/m) trained on it with
    `--price-offset price_offset`; (root, the training CSV)."""
    rng = np.random.default_rng(seed)
    level = np.where((np.arange(TICKS) > 500) & (np.arange(TICKS) < 800), -15.0, 40.0)
    prices = np.round(level + np.cumsum(rng.choice([-0.05, 0.0, 0.05], TICKS)), 2)
    times = [f"2026-11-03 08:{i // 600:02d}:{i // 10 % 60:02d}.{i % 10}00" for i in range(TICKS)]
    csv = root / "power.csv"
    pl.DataFrame({"timestamp": times, "symbol": [stream] * TICKS, "price": prices,
                  "size": np.round(rng.uniform(0.1, 25, TICKS), 1)}).write_csv(csv)
    assert main(["train", str(csv), "--out", str(root / "m"), *TINY, "--steps", "1", "--batch", "1", "--max-points",
                 "64", "--resamples", "10", "--quiet", "--json", "--price-offset", price_offset]) == 0
    return root, csv


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path]:
    """The power product, its model trained lifted by 21 (the per-stream form)."""
    return power_model(tmp_path_factory.mktemp("offset"), STREAM, f"{STREAM}={OFFSET}", seed=3)


def test_feed_replay_into_serve_model_reads_the_files_as_trained_and_a_raw_client_gets_the_same_answers(
        trained, tmp_path, capsys) -> None:
    """`feed replay` into `serve --model` reads the files as the model was trained (a backtest of them answers
    alike), and an offset given otherwise is warned of.

    The served model's --price-offset is applied at the engine's ingest, once, to every tick whatever sent it:
    the file sent by `flashtick feed replay` (which now sends its prices as the file prints them) and the same rows
    sent raw by a plain zmq client, below zero included, give the same ticks and the same answers (before, the raw
    client's ticks were read 21 lower, and those below zero refused). (The feed replay's service is the one above,
    read before the second replay.)"""
    import msgpack

    from wire_client import Control, push_socket

    root, csv = trained
    # trained from scratch on trades without a side: its card names the sided and quote events as never trained,
    # not `event:trade` (review410 #1)
    codec = load_codec(root / "m")
    assert {codec.names[token] for token in never_trained(root / "m", codec)} == {
        "event:buy", "event:sell", "event:q_narrow", "event:q_same", "event:q_wide"}
    queries = tmp_path / "q.yaml"
    queries.write_text(DIR_QUERY)
    assert main(["backtest", str(csv), "--model", str(root / "m"), "--queries", str(queries), "--out",
                 str(tmp_path / "a.parquet"), "--quiet", "--no-plot", "--threads", "1"]) == 0
    assert f"replayed {TICKS} ticks (0 rejected)" in capsys.readouterr().out
    backtest = pl.read_parquet(tmp_path / "a.parquet").filter(pl.col("stream") == STREAM)
    last_file_price = float(pl.read_csv(csv)["price"][-1])
    rows = pl.read_csv(csv).with_columns(pl.col("timestamp").str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_zone="UTC")
                                         .dt.epoch("ns").alias("ts"))
    raw = [{"stream": STREAM, "ts": ts, "price": price, "size": size}
           for ts, price, size in zip(rows["ts"], rows["price"], rows["size"])]
    assert min(t["price"] for t in raw) < 0  # (the power product below zero: refused unless shifted)

    base = config(root / "m", tmp_path)
    unlogged = dataclasses.replace(base, log=dataclasses.replace(base.log, dir=None))
    got = []  # (rejected, ticks held, last price, answer's version, its model_probs) for each sender
    with serving(unlogged) as server:
        control = ["--control", server.endpoints["control"]]
        wire = Control(server.endpoints["control"])
        try:
            assert main(["health", *control]) == 0
            assert json.loads(capsys.readouterr().out)["reading"] == {"price_offset": f"{STREAM}={OFFSET}"}
            assert wire.ok("health")["ingest_price_offset"] == f"{STREAM}={OFFSET}"
            assert main(["feed", "replay", str(csv), "--endpoint", server.endpoints["ingest"], "--answers",
                         server.endpoints["answers"], *control]) == 0
            err = capsys.readouterr().err
            assert (f"flashtick feed replay: note: reading the files with --price-offset {STREAM}={OFFSET}, as the "
                    f"engine's model was trained") in err, err
            assert f"the engine adds +{OFFSET} to the ticks of stream {STREAM} alone" in err, err
            assert "nonpositive_price" not in err and "0 rejected" in err, err
            wait_for(lambda: main(["stats", *control]) == 0 and json.loads(capsys.readouterr().out)["ticks_in"] ==
                     TICKS, timeout_s=120)
            assert main(["streams", STREAM, "--json", *control]) == 0
            held = json.loads(capsys.readouterr().out)
            assert held["streams"][STREAM]["last_price"] == pytest.approx(last_file_price + OFFSET)
            assert main(["ask", STREAM, "dir", "--max-stale", "0", *control]) == 0
            live = json.loads(capsys.readouterr().out)
            # the same ticks at the same level: the model's answer over every tick is the backtest's last one (the
            # blended `probs` adapt to each run's own answer history; the model's own do not)
            last = backtest.row(-1, named=True)
            assert live["version"] == last["ticks"] == TICKS
            assert live["value"]["model_probs"] == pytest.approx(json.loads(last["model_probs"]), abs=1e-5)
            got.append(_served(wire))

            # an offset given otherwise is warned of (and read as given: the user's choice)
            code = main(["feed", "replay", str(csv), "--price-offset", f"{STREAM}=30", "--endpoint",
                         server.endpoints["ingest"], "--answers", server.endpoints["answers"], *control])
            err = capsys.readouterr().err
            assert code in (0, 2) and (f"flashtick feed replay: warning: the engine's model was trained on files "
                                       f"read with --price-offset {STREAM}={OFFSET}; these files are read with "
                                       f"--price-offset {STREAM}=30") in err, err
            # and the note says what goes out: the files' prices up by 30 - 21, not as printed (review410 #7)
            assert (f"these files are read with --price-offset {STREAM}=30, so the ticks go out shifted by the "
                    f"difference ({STREAM} +9), not as the files print them") in err, err
        finally:
            wire.sock.close()

    with serving(unlogged) as server:  # the same rows sent raw by a plain zmq client
        wire = Control(server.endpoints["control"])
        try:
            assert wire.ok("health")["ingest_price_offset"] == f"{STREAM}={OFFSET}"
            push = push_socket(server.endpoints["ingest"])
            for i in range(0, len(raw), 100):
                push.send(msgpack.packb(raw[i : i + 100]))
            push.close()
            wait_for(lambda: wire.ok("stats")["stats"]["ticks_in"] == TICKS, timeout_s=120)
            got.append(_served(wire))
        finally:
            wire.sock.close()
    (replayed, *replayed_rest), (sent_raw, *raw_rest) = got
    assert replayed == sent_raw == {}
    assert replayed_rest[:3] == raw_rest[:3] == [TICKS, pytest.approx(float(rows["price"][-1]) + OFFSET), TICKS]
    assert replayed_rest[3] == pytest.approx(raw_rest[3], abs=1e-6)


def _served(wire) -> tuple:
    """A served stream as the service holds it once every tick is in: (rejected, its ticks, its last price, the
    version and model_probs of an answer computed now)."""
    stats = wire.ok("stats")["stats"]
    held = wire.ok("streams", streams=[STREAM])["streams"][STREAM]
    answer = wire.ok("ask", stream=STREAM, query="dir", max_stale_ticks=0)["answer"]
    return stats["rejected"], held["ticks"], held["last_price"], answer["version"], answer["value"]["model_probs"]


def test_ask_get_and_health_replies_carry_the_caveats_a_client_never_reads_in_the_log(trained, tmp_path,
                                                                                     capsys) -> None:
    """Over real sockets: a model trained on files read with --price-offset, serving a query that asks regime and
    one that does not. Each `ask` and `get` reply carries the caveats of its answer once (the model's, and regime's
    for the query asking it), a cached answer's and one computed in a forward alike; `health` carries them all."""
    import dataclasses

    import msgpack

    from wire_client import Control, push_socket, trade

    root, _ = trained
    base = config(root / "m", tmp_path)
    (tmp_path / "q.yaml").write_text("queries:\n  - {name: reg, streams: ['*'], question: regime, kind: choice, "
                                     "trigger: batch}\n  - {name: dir, streams: ['*'], question: direction_20, "
                                     "kind: choice, trigger: batch}\n")
    with serving(dataclasses.replace(base, log=dataclasses.replace(base.log, dir=None))) as server:
        control, push = Control(server.endpoints["control"]), push_socket(server.endpoints["ingest"])
        try:
            push.send(msgpack.packb([trade(STREAM, 1_700_000_000 * 10**9 + i, 61.0 + i / 100) for i in range(20)]))
            wait_for(lambda: control.ok("stats")["stats"]["ticks_in"] == 20, timeout_s=60)
            kinds = lambda reply: [c["kind"] for c in reply["caveats"]]  # noqa: E731
            for op, fields in (("ask", {"max_stale_ticks": 0}), ("ask", {}), ("get", {})):
                regime = control.ok(op, stream=STREAM, query="reg", **fields)
                assert regime["answer"] is not None and kinds(regime) == ["ingest_price_offset", "regime_question"]
                assert f"--price-offset {STREAM}={OFFSET}" in regime["caveats"][0]["text"], regime["caveats"]
                assert "query reg asks regime" in regime["caveats"][1]["text"]
                assert kinds(control.ok(op, stream=STREAM, query="dir", **fields)) == ["ingest_price_offset"]
            health = control.ok("health")
            assert kinds(health) == ["ingest_price_offset", "regime_question"]
            # `flashtick ask` prints them on stderr (stdout stays the answer's JSON)
            assert main(["ask", STREAM, "reg", "--control", server.endpoints["control"]]) == 0
            out, err = capsys.readouterr()
            assert "caveat" not in out and "flashtick ask: caveat: query reg asks regime" in err, err
        finally:
            control.sock.close()
            push.close()
