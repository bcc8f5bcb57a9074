"""Every trigger kind of queries/trigger.py's TRIGGER_TABLE, each through every place a trigger is written and
read: parse and its errors, the wire and YAML forms, `QuerySpec` round trips, `flashtick list` against a real
server, and a restart of its data directory (queries.yaml written, then read back). A kind added to the table that
one of those places cannot carry fails here (review 322, finding 1: `{daily: ...}` was saved as an int its parser
refused, and `list` and the restart failed)."""

from __future__ import annotations

import json
import threading

import msgpack
import pytest
import yaml
import zmq

from conftest import serving, tiny_tick_checkpoint
from engine.service.cli import main
from engine.service.client import ControlClient
from engine.service.config import ServiceConfig
from queries.spec import QuerySpec, dump_queries
from queries.trigger import TRIGGER_TABLE, Trigger
from queries.yaml_loader import load_queries


def written(kind: str) -> object:
    """The kind's trigger as a user writes it: the word, or `{kind: its example period}`."""
    row = TRIGGER_TABLE[kind]
    return kind if row.form is None else {kind: row.example}


def query_of(kind: str) -> dict:
    return {"name": f"q_{kind}", "streams": ["*"], "kind": "choice", "question": "direction_20",
            "trigger": written(kind)}


@pytest.mark.parametrize("kind", list(TRIGGER_TABLE))
def test_every_kind_reads_back_what_it_writes_in_every_form(kind: str) -> None:
    trigger = Trigger.parse(written(kind))
    assert trigger.kind == kind
    assert Trigger.parse(trigger.to_obj()) == trigger  # the wire form
    assert Trigger.parse(trigger.to_yaml()) == trigger  # the written form (queries.yaml)
    assert Trigger.parse(msgpack.unpackb(msgpack.packb(trigger.to_obj()))) == trigger
    assert Trigger.parse(yaml.safe_load(yaml.safe_dump(trigger.to_yaml()))) == trigger
    shown = trigger.text()  # `flashtick list`: the YAML form on one line
    assert shown == (kind if TRIGGER_TABLE[kind].form is None else f"{kind}:{TRIGGER_TABLE[kind].text(trigger.every)}")
    spec = QuerySpec(**query_of(kind))
    assert QuerySpec.from_dict(spec.to_dict()) == spec
    assert QuerySpec.from_dict(msgpack.unpackb(msgpack.packb(spec.to_dict()))) == spec
    assert load_queries(dump_queries([spec]), "dumped.yaml") == [spec]
    assert load_queries(spec.to_yaml(), "one.yaml") == [spec]


@pytest.mark.parametrize("kind", list(TRIGGER_TABLE))
def test_every_kind_is_named_in_the_errors_of_a_trigger_misspelt(kind: str) -> None:
    with pytest.raises(ValueError) as refused:
        Trigger.parse({"no_such_trigger": 1})
    assert kind in str(refused.value)
    if TRIGGER_TABLE[kind].form is not None:  # a periodic kind shows its form among the allowed
        with pytest.raises(ValueError) as refused:
            Trigger.parse("no_such_trigger")
        assert f"{{{kind}: {TRIGGER_TABLE[kind].form}}}" in str(refused.value)


def test_every_kind_is_listed_by_a_server_and_comes_back_after_a_restart_of_its_data_directory(tmp_path, capsys
                                                                                               ) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                      "control": "tcp://127.0.0.1:0", "metrics_port": 0},
        "log": {"dir": str(tmp_path / "data")},
    })
    text = yaml.safe_dump({"queries": [query_of(kind) for kind in TRIGGER_TABLE]}, sort_keys=False)
    specs = load_queries(text, "q.yaml")
    with serving(config) as server:
        with ControlClient(server.endpoints["control"]) as control:
            assert control.call("register", yaml=text)["registered"] == [spec.name for spec in specs]
        assert main(["list", "--control", server.endpoints["control"]]) == 0
        listed = capsys.readouterr().out
        for spec in specs:
            row = next(line for line in listed.splitlines() if line.startswith(spec.name + " "))
            assert f" {spec.trigger.text()} " in row, (spec.name, row)
    saved = yaml.safe_load((tmp_path / "data" / "queries.yaml").read_text())["queries"]
    assert [Trigger.parse(q["trigger"]) for q in saved] == [spec.trigger for spec in specs]
    with serving(config) as restarted:  # the same data directory, no queries file: they come back from it
        assert restarted.pipeline.registry.list() == specs


def test_list_shows_a_trigger_this_client_does_not_know_as_the_server_sent_it(capsys) -> None:
    """A client one release behind the server: a kind it cannot parse is shown as sent, the other rows as ever."""
    queries = [{**query_of("batch"), "name": "new_kind", "trigger": {"daily": "20:55"}, "topic": "{query}/{stream}/"},
               {**query_of("ticks"), "trigger": {"ticks": 50}, "topic": "{query}/{stream}/"}]
    out = listed_by_a_newer_service(queries, capsys)
    assert any(line.startswith("new_kind ") and " daily:20:55 " in line for line in out.splitlines()), out
    assert any(line.startswith("q_ticks ") and " ticks:50 " in line for line in out.splitlines()), out


@pytest.mark.parametrize("kind", list(TRIGGER_TABLE))
def test_the_registry_asks_every_kind_how_it_behaves_not_its_name(kind: str) -> None:
    """`fires_by_itself` and `keeps_grid` of the kind's row decide what the registry does (review 322, finding 6:
    `drop_stream` kept a grid for `kind == "interval"` alone, and `on_demand` was tested by name in 7 modules)."""
    from queries.registry import Registry

    row = TRIGGER_TABLE[kind]
    registry = Registry()
    registry.register([QuerySpec(**query_of(kind))])
    ts = 1_700_000_000_000_000_000

    def first_tick() -> list[str]:  # a stream's first tick, priced 100 (what a kind on price moves is given)
        registry.due_at("S", 1, registry.moved("S", 1, ts, 100.0))
        return [spec.name for spec in registry.due("S", 1, ts)]

    assert first_tick() == ([f"q_{kind}"] if row.fires_by_itself else [])
    # a grid-less kind fires at every group; one on price moves where the prices say, which group ends do not
    assert bool(registry.would_fire("S", [(2, ts)])) == (row.fires_by_itself and row.cell is None and not row.on_moves)
    registry.drop_stream("S")  # an idle expiry: back with its tick count started over, at the same event time
    again = first_tick()
    assert again == ([f"q_{kind}"] if row.fires_by_itself and not row.keeps_grid else [])


@pytest.mark.parametrize(("raw", "said"), [
    ({"batch": True}, 'trigger "batch" takes no value: it is written as the word alone, trigger: batch'),
    ({"On-Demand": True}, 'trigger "On-Demand" takes no value: it is written as the word alone, trigger: on_demand'),
    ({"Ticks": 50}, "did you mean trigger: {ticks: 50}?"),
    ({"intervall": "1s"}, 'did you mean trigger: {interval: "1s"}?'),
    ("on-demand", "did you mean trigger: on_demand?"),
    ("Batch", "did you mean trigger: batch?"),
    ("ON_DEMAND", "did you mean trigger: on_demand?"),
    ("ticks", "ticks takes a period, written as a mapping: trigger: {ticks: 50}"),
    ("ticks:50", "a period is written as a mapping: trigger: {ticks: 50}"),  # `list`'s form, pasted
    ("interval:1.5m", 'a period is written as a mapping: trigger: {interval: "1.5m"}'),
    ({"ticks": "50"}, 'needs an integer N >= 1, got "50" (quoted in the YAML: drop the quotes, trigger: {ticks: 50})'),
])
def test_a_trigger_written_in_another_form_or_case_is_told_how_it_is_written(raw: object, said: str) -> None:
    """review336 #9: `{batch: true}` was refused as "unknown trigger 'batch' (allowed: batch, ...)", and `{Ticks:
    50}`, `on-demand`, `Batch` had no did-you-mean: each now names the form the trigger table writes it in."""
    with pytest.raises(ValueError) as refused:
        Trigger.parse(raw)
    assert said in str(refused.value), str(refused.value)
    assert "allowed: batch" not in str(refused.value)


@pytest.mark.parametrize("raw", ["no_such_trigger", {"no_such_trigger": 1}, {"interval": "5"}, {"ticks": "-3"}])
def test_a_trigger_with_nothing_close_gets_no_guess(raw: object) -> None:
    """No did-you-mean where no kind is close, and no "drop the quotes" where the number would be wrong unquoted
    (`{interval: "5"}` is 5 ns as an int, most likely meant as 5 s)."""
    with pytest.raises(ValueError) as refused:
        Trigger.parse(raw)
    assert "did you mean" not in str(refused.value) and "drop the quotes" not in str(refused.value)


def test_a_trigger_registered_over_the_wire_is_told_how_it_is_written(tmp_path, capsys) -> None:
    """The hint reaches the user who registers a file on a live service: `flashtick register` prints it."""
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                      "control": "tcp://127.0.0.1:0", "metrics_port": 0},
    })
    written_file = tmp_path / "tt.yaml"
    written_file.write_text("queries:\n  - {name: tt, streams: ['SYN.*'], question: direction_5, kind: choice,\n"
                            "     trigger: {batch: true}}\n")
    with serving(config) as server:
        assert main(["register", str(written_file), "--control", server.endpoints["control"]]) != 0
    err = capsys.readouterr().err
    assert f"{written_file}:3:" in err and "it is written as the word alone, trigger: batch" in err, err


WRITTEN_PERIODS = [{"interval": "1.5m"}, {"interval": "500 ms"}, {"interval": 1_000_000_000}, {"interval": "90s"},
                   {"ticks": 50}]


def test_list_the_wire_and_queries_yaml_show_a_period_as_it_was_written(tmp_path, capsys) -> None:
    """review336 #10: a query registered with `{interval: 1.5m}` was listed as `interval:90s`, and `list --json` gave
    `{"interval": 1000000000}` for one written `1s`. The period is kept as written beside the parsed one: `list`,
    `list --json`, the data directory's queries.yaml and a restart show what the user wrote (a duration's own spaces
    aside), and `1.5m` and `90s` are still the same trigger."""
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                      "control": "tcp://127.0.0.1:0", "metrics_port": 0},
        "log": {"dir": str(tmp_path / "data")},
    })
    text = yaml.safe_dump({"queries": [{**query_of("batch"), "name": f"w{i}", "trigger": trigger}
                                       for i, trigger in enumerate(WRITTEN_PERIODS)]}, sort_keys=False)
    shown = ["interval:1.5m", "interval:500ms", "interval:1000000000", "interval:90s", "ticks:50"]
    on_wire = [{"interval": "1.5m"}, {"interval": "500ms"}, {"interval": 1_000_000_000}, {"interval": "90s"},
               {"ticks": 50}]
    assert Trigger.parse({"interval": "1.5m"}) == Trigger.parse({"interval": "90s"})
    for start in ("first", "restarted"):
        with serving(config) as server:
            control = server.endpoints["control"]
            if start == "first":
                with ControlClient(control) as client:
                    client.call("register", yaml=text)
            assert main(["list", "--control", control]) == 0
            listed = capsys.readouterr().out.splitlines()
            for i, trigger in enumerate(shown):
                row = next(line for line in listed if line.startswith(f"w{i} "))
                assert f" {trigger} " in row, (start, row)
            assert main(["list", "--json", "--control", control]) == 0
            replied = json.loads(capsys.readouterr().out)["queries"]
            assert [q["trigger"] for q in replied] == on_wire, start
        saved = yaml.safe_load((tmp_path / "data" / "queries.yaml").read_text())["queries"]
        assert [q["trigger"] for q in saved] == on_wire, start


def test_list_shows_unknown_kinds_in_json_never_a_python_repr(capsys) -> None:
    """review336 #10: kinds from a newer service were shown as `price_move:{'bps': 25}`, `None`, `['a', 'b']`:
    Python reprs a user cannot write back. They are shown as JSON (a one-kind mapping as `kind:period`)."""
    sent = [{"on_fill": {"side": "buy"}}, None, 7, ["a", "b"], {"ticks": 50, "interval": 1_000_000_000},
            {"x\x1b[31m": True}]
    expected = ['on_fill:{"side": "buy"}', "null", "7", '["a", "b"]', '{"ticks": 50, "interval": 1000000000}',
                "x\\x1b[31m:true"]
    queries = [{**query_of("batch"), "name": f"n{i}", "trigger": trigger, "topic": "{query}/{stream}/"}
               for i, trigger in enumerate(sent)]
    out = listed_by_a_newer_service(queries, capsys)
    for i, shown in enumerate(expected):
        row = next(line for line in out.splitlines() if line.startswith(f"n{i} "))
        assert f" {shown} " in row, (shown, row)
    assert "'" not in out and "None" not in out and "True" not in out and "\x1b" not in out, out


def listed_by_a_newer_service(queries: list[dict], capsys) -> str:
    """What `flashtick list` prints for ``queries`` as a service of a later release sends them (a stand-in ROUTER
    that answers one `list`)."""
    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.linger = 0
    port = router.bind_to_random_port("tcp://127.0.0.1")

    def answer_once() -> None:
        *route, payload = router.recv_multipart()
        request = msgpack.unpackb(payload)
        router.send_multipart([*route, msgpack.packb({"ok": True, "id": request["id"], "queries": queries,
                                                      "version": 2})])

    thread = threading.Thread(target=answer_once, daemon=True)
    thread.start()
    try:
        assert main(["list", "--control", f"tcp://127.0.0.1:{port}"]) == 0
        thread.join(30)
    finally:
        router.close(linger=0)
    return capsys.readouterr().out
