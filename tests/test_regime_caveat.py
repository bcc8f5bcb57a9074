"""`regime` has ground truth on the synthetic market only: on a real stream it answers "calm" at 0.99 through a
crash (review283 #3). `serve` names the standing queries that ask it in a note at its start, before the serving
line, so a live user reads their answers so; a service whose queries do not ask it says nothing."""

from __future__ import annotations

from pathlib import Path

from test_kv_pool_size import ENDPOINTS, serve_lines

REGIME = "queries:\n  - {name: reg, streams: ['*'], question: regime, kind: choice, trigger: {ticks: 50}}\n"
VOL = "  - {name: vol, streams: ['*'], question: volatility_50, kind: choice, trigger: {ticks: 50}}\n"


def test_serve_names_the_queries_that_ask_regime_at_its_start(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    for queries, said in ((REGIME + VOL, True), ("queries:\n" + VOL, False)):
        (tmp_path / "q.yaml").write_text(queries)
        config.write_text(f"queries: {tmp_path / 'q.yaml'}\nlog: {{enabled: false}}\n{ENDPOINTS}")
        lines, _ = serve_lines(config)
        notes = [line for line in lines if "asks regime" in line]
        assert notes == (["flashtick: note: query reg asks regime, the synthetic market's hidden regime: it has "
                          "ground truth, and was calibrated, on synthetic data only (SYN.*), so on a real stream its "
                          "answers and probabilities are no evidence of a regime; volatility_50 asks what the ticks "
                          "did (docs/queries.md#questions-without-real-data-calibration)\n"] if said else []), lines


def test_a_reply_says_no_caveat_when_there_is_none(tmp_path) -> None:
    """The key is always there (a stable field): an empty list for an untrained-reading model and no regime."""
    import msgpack

    from conftest import serving, tiny_tick_checkpoint
    from test_cli import config, wait_for
    from wire_client import Control, push_socket, trade

    with serving(config(tiny_tick_checkpoint(tmp_path / "m"), tmp_path)) as server:
        control, push = Control(server.endpoints["control"]), push_socket(server.endpoints["ingest"])
        try:
            push.send(msgpack.packb([trade("A", 1_700_000_000 * 10**9 + i, 100.0 + i) for i in range(5)]))
            wait_for(lambda: control.ok("stats")["stats"]["ticks_in"] == 5, timeout_s=60)
            assert control.ok("ask", stream="A", query="dir")["caveats"] == []
            assert control.ok("health")["caveats"] == []
        finally:
            control.sock.close()
            push.close()
