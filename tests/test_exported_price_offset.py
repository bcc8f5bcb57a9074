"""`ticklog export` of a service whose model was trained with a per-stream --price-offset writes the prices as the
venue printed them: the service adds the offset at ingest and logs the shifted ticks, so an export of them as logged
was shifted a second time when fed back into the same model (fix319). The offset the service applied is recorded in
the data directory's meta.json and taken off; `feed replay` of the export answers as the live ticks did."""

from __future__ import annotations

import dataclasses
import json

import msgpack
import polars as pl
import pytest

from conftest import serving
from engine.service.cli import main
from test_cli import config, wait_for
import test_served_price_offset
from test_served_price_offset import OFFSET, STREAM, TICKS
from wire_client import Control, push_socket

trained = test_served_price_offset.trained  # its module's fixture: the checkpoint trained with a per-stream offset


def _served(server, send) -> tuple[dict, tuple]:
    """Send through ``send``, wait for every tick, and return the stream's stats and the `dir` answer."""
    control = Control(server.endpoints["control"])
    try:
        send(server.endpoints)
        wait_for(lambda: control.ok("stats")["stats"]["ticks_in"] == TICKS, timeout_s=120)
        stats = control.ok("stats")["stats"]
        answer = control.ok("ask", stream=STREAM, query="dir", max_stale_ticks=0)["answer"]
        return stats, (answer["version"], answer["value"]["model_probs"])
    finally:
        control.sock.close()


def test_export_writes_the_prices_sent_and_replays_into_the_same_answers(trained, tmp_path, capsys) -> None:
    root, csv = trained
    rows = pl.read_csv(csv).with_columns(pl.col("timestamp").str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_zone="UTC")
                                         .dt.epoch("ns").alias("ts"))
    raw = [{"stream": STREAM, "ts": ts, "price": price, "size": size}
           for ts, price, size in zip(rows["ts"], rows["price"], rows["size"])]
    assert min(t["price"] for t in raw) < 0  # (refused unless the engine shifts it: the offset is applied)
    base = config(root / "m", tmp_path)
    data_dir = tmp_path / "data"

    def push_raw(endpoints: dict) -> None:
        push = push_socket(endpoints["ingest"])
        for i in range(0, len(raw), 100):
            push.send(msgpack.packb(raw[i : i + 100]))
        push.close()

    with serving(dataclasses.replace(base, log=dataclasses.replace(base.log, dir=str(data_dir)))) as server:
        live_stats, live = _served(server, push_raw)
    assert json.loads((data_dir / "meta.json").read_text())["ingest_price_offset"] == f"{STREAM}={OFFSET}"

    for suffix in (".parquet", ".csv"):
        out = tmp_path / f"ticks{suffix}"
        assert main(["ticklog", "export", str(data_dir), "--out", str(out)]) == 0
        err = capsys.readouterr().err
        assert f"the service's ingest offset {STREAM}={OFFSET} (its model's training --price-offset) taken off" in err
        exported = pl.read_parquet(out) if suffix == ".parquet" else pl.read_csv(out)
        assert exported["ts"].to_list() == [t["ts"] for t in raw]
        assert exported["price"].to_list() == [t["price"] for t in raw]  # as sent, not 21 higher
    meta = pl.read_parquet_metadata(tmp_path / "ticks.parquet")
    assert meta["ingest_price_offset"] == f"{STREAM}={OFFSET}"

    def replay_export(endpoints: dict) -> None:
        assert main(["feed", "replay", str(tmp_path / "ticks.parquet"), "--endpoint", endpoints["ingest"],
                     "--answers", endpoints["answers"], "--control", endpoints["control"]]) == 0
        err = capsys.readouterr().err
        assert "0 rejected" in err and "nonpositive_price" not in err, err

    with serving(dataclasses.replace(base, log=dataclasses.replace(base.log, dir=None))) as server:
        replayed_stats, replayed = _served(server, replay_export)
    assert replayed_stats["rejected"] == live_stats["rejected"] == {}
    assert replayed[0] == live[0] == TICKS
    assert replayed[1] == pytest.approx(live[1], abs=1e-6)


def test_a_directory_of_another_offset_is_refused_in_words(tmp_path) -> None:
    """A restart whose model adds another offset (or none) than the one the logged ticks were shifted by is refused,
    saying why: its sessions and exports would read the logged prices at other levels."""
    from engine.service.config import ConfigError
    from engine.service.data_dir_meta import check_meta

    meta = tmp_path / "meta.json"
    check_meta(meta, {"model": "m", "ingest_price_offset": "A=21"})
    check_meta(meta, {"model": "m", "ingest_price_offset": "A=21"})  # (the same: opened)
    with pytest.raises(ConfigError, match='ingest_price_offset: "A=21" -> null.*shifted at ingest'):
        check_meta(meta, {"model": "m"})
