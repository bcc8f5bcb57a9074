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
        assert notes == (["flashtick: INFO: query reg asks regime, the synthetic market's hidden regime: it has "
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


def test_a_regime_caveat_on_synthetic_streams_warns_of_no_real_one_and_a_question_is_named_as_such(tmp_path) -> None:
    """review315 #8: a query asking regime of SYN.* streams alone, asked of SYN.A, is not warned "on a real
    stream"; asking the codec's question `regime` directly names the question, not a query that does not exist;
    a query over every stream asked of a real one keeps the warning."""
    import dataclasses

    import msgpack

    from conftest import serving, tiny_tick_checkpoint
    from test_cli import config, wait_for
    from wire_client import Control, push_socket, trade

    base = config(tiny_tick_checkpoint(tmp_path / "m"), tmp_path)
    (tmp_path / "q.yaml").write_text("queries:\n  - {name: reg, streams: ['SYN.*'], question: regime, kind: choice, "
                                     "trigger: batch}\n  - {name: every, streams: ['*'], question: regime, "
                                     "kind: choice, trigger: batch}\n")
    with serving(dataclasses.replace(base, log=dataclasses.replace(base.log, dir=None))) as server:
        control, push = Control(server.endpoints["control"]), push_socket(server.endpoints["ingest"])
        try:
            push.send(msgpack.packb([trade(stream, 1_700_000_000 * 10**9 + i, 100.0 + i / 10) for i in range(20)
                                     for stream in ("SYN.A", "AAPL")]))
            wait_for(lambda: control.ok("stats")["stats"]["ticks_in"] == 40, timeout_s=60)
            texts = lambda reply: [c["text"] for c in reply["caveats"] if c["kind"] == "regime_question"]  # noqa
            synthetic = texts(control.ok("ask", stream="SYN.A", query="reg", max_stale_ticks=0))
            assert len(synthetic) == 1 and "query reg asks regime" in synthetic[0], synthetic
            assert "of synthetic streams (SYN.*) alone" in synthetic[0] and "on a real stream" not in synthetic[0]
            direct = texts(control.ok("ask", stream="SYN.A", query="regime", max_stale_ticks=0))
            assert len(direct) == 1 and direct[0].startswith("question regime asks regime"), direct
            real = texts(control.ok("ask", stream="AAPL", query="every", max_stale_ticks=0))
            assert len(real) == 1 and "query every asks regime" in real[0] and "on a real stream" in real[0], real
        finally:
            control.sock.close()
            push.close()
