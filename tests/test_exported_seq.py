"""`flashtick ticklog export` keeps each tick's wire `seq` (a nullable `seq` column, the wire's last), and `feed
replay` of the export sends it again as the wire's `seq`: replayed into the serve that logged the ticks, every tick
is a duplicate the service drops by its number, counted, none refused and none taken twice (review: the export
dropped `seq`, so such a resend was taken as new ticks or refused as ts_backwards). A real server on 127.0.0.1's
ephemeral ports, the real CLI, files written here."""

from __future__ import annotations

import msgpack
import polars as pl

from conftest import serving, tiny_tick_checkpoint
from connectors.replay import FileReplay
from engine.service.cli import main
from engine.service.config import ServiceConfig
from test_wire_sequences import sequenced
from wire_client import T0, Control, held_of, push_socket, trade, wait_stats

BIG_SEQ = 2**64 - 5  # a uint64 past int64's range (ITCH's 64-bit numbers): kept to its last digit


def test_an_exports_seq_replays_into_the_serve_as_duplicates(tmp_path, capsys) -> None:
    config = ServiceConfig.from_dict({
        "model": {"path": str(tiny_tick_checkpoint(tmp_path / "tick"))}, "log": {"dir": str(tmp_path / "data")},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "limits": {"heartbeat_s": 0.1}})
    ticks = sequenced("SEQ.X", 10, first=BIG_SEQ - 9) + [trade("NOSEQ.X", T0 + k, 50.0 + k) for k in range(3)]
    with serving(config) as server:
        ctl, feed = Control(server.endpoints["control"]), push_socket(server.endpoints["ingest"])
        try:
            feed.send(msgpack.packb(ticks))
            wait_stats(ctl, lambda st: st["ticks_in"] == 13, timeout_s=120)
            every, sequenced_only = tmp_path / "every.parquet", tmp_path / "seq.csv"
            assert main(["ticklog", "export", str(tmp_path / "data"), "--out", str(every)]) == 0
            assert main(["ticklog", "export", str(tmp_path / "data"), "--out", str(sequenced_only),
                         "--streams", "SEQ.X"]) == 0
            exported = pl.read_parquet(every)
            assert exported.columns[-1] == "seq" and exported.schema["seq"] == pl.UInt64
            assert exported["seq"].to_list() == [BIG_SEQ - 9 + k for k in range(10)] + [None] * 3
            # read back (Parquet and CSV alike), each tick carries its wire seq; the unsequenced none
            read = FileReplay(every).next_batch(100)  # (in time order, each stream's in its own)
            assert [t.seq for t in read if t.stream == "SEQ.X"] == exported["seq"].to_list()[:10]
            assert [t.seq for t in read if t.stream == "NOSEQ.X"] == [None] * 3
            assert sequenced_only.read_text().splitlines()[0].endswith(",seq")

            before = wait_stats(ctl, lambda st: True)
            assert main(["feed", "replay", str(sequenced_only), "--endpoint", server.endpoints["ingest"],
                         "--control", ""]) == 0
            done = wait_stats(ctl, lambda st: st["duplicates"] - before["duplicates"] == 10, timeout_s=120)
            assert done["rejected"] == {} and done["ticks_in"] == 13, done
            held = held_of(ctl, "SEQ.X")
            assert (held["ticks"], held["last_seq"], held["duplicates"]) == (10, BIG_SEQ, 10), held
        finally:
            ctl.close()
            feed.close()
