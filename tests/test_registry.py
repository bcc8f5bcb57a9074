"""Registry: all-or-nothing registration, atomic replace, versions, stream matching and due() per trigger."""

from __future__ import annotations

import re
import threading

import pytest

from connectors.codec import BinnedCodec
from connectors.questions import DEFAULT_QUESTIONS
from queries.probe_answers import compile_query
from queries.registry import Registry, UnknownQueryError
from queries.spec import QuerySpec, QuerySpecError

S = 1_000_000_000  # ns per second
T0 = 1_700_000_000 * S


def q(name: str, trigger="batch", streams=("SYN.*",), kind="surprise", **kw) -> QuerySpec:
    return QuerySpec(name=name, streams=streams, kind=kind, trigger=trigger, **kw)


def fired(reg: Registry, stream: str, calls: list[tuple[int, int]]) -> list[list[str]]:
    """Names due after each (ticks, event_ts) call, in order."""
    return [[s.name for s in reg.due(stream, ticks, ts)] for ticks, ts in calls]


def test_register_yaml_list_get_and_versions():
    reg = Registry()
    assert reg.version == 0 and len(reg) == 0
    reg.register("queries:\n  - {name: a, streams: [x], kind: surprise}\n  - {name: b, streams: [y], kind: surprise}\n")
    assert reg.version == 1 and [s.name for s in reg.list()] == ["a", "b"]
    assert reg.get("a").streams == ("x",) and "b" in reg and "c" not in reg
    assert reg.query_version("a") == reg.query_version("b") == 1
    reg.register([q("c")])
    assert reg.version == 2 and reg.query_version("c") == 2 and reg.query_version("a") == 1


def test_invalid_document_changes_nothing():
    reg = Registry()
    reg.register([q("a")])
    before = (reg.version, reg.list())
    bad = "queries:\n  - {name: a, streams: [z], kind: surprise}\n  - {name: b, streams: [x], kind: oops}\n"
    with pytest.raises(QuerySpecError, match="<string>:3: query \"b\": kind must be"):
        reg.register(bad)
    with pytest.raises(QuerySpecError, match="query \"d\": duplicate query name"):
        reg.register([q("d"), q("d")])
    assert (reg.version, reg.list()) == before and reg.get("a").streams == ("SYN.*",)


def test_register_checks_codec_questions_when_given():
    reg = Registry(questions={s.name: s for s in DEFAULT_QUESTIONS})
    with pytest.raises(QuerySpecError, match=r"my.yaml:2: query \"a\": question \"direction_7\" is not one of"):
        reg.register("queries:\n  - {name: a, streams: [x], kind: choice, question: direction_7}\n", "my.yaml")
    with pytest.raises(QuerySpecError, match="\"sideways\" is not an answer"):
        reg.register([QuerySpec(name="a", streams=("x",), kind="choice", question="direction_5",
                                choices=("up", "sideways"))])
    assert len(reg) == 0 and reg.version == 0


def test_replace_is_atomic_keeps_place_and_resets_trigger_state():
    reg = Registry()
    reg.register([q("a", {"ticks": 10}), q("b")])
    assert fired(reg, "SYN.A", [(1, T0), (5, T0)]) == [["a", "b"], ["b"]]
    reg.register([q("a", {"ticks": 10}, streams=("SYN.A", "SYN.B"))])
    assert [s.name for s in reg.list()] == ["a", "b"] and reg.get("a").streams == ("SYN.A", "SYN.B")
    assert reg.query_version("a") == 2 and reg.query_version("b") == 1
    assert fired(reg, "SYN.A", [(6, T0)]) == [["a", "b"]]  # fresh state: fires on its first batch again


def test_unregister():
    reg = Registry()
    reg.register([q("a"), q("b")])
    assert reg.unregister("a").name == "a"
    assert reg.version == 2 and [s.name for s in reg.list()] == ["b"]
    with pytest.raises(UnknownQueryError, match=r'no query named "a" \(registered: b\)'):
        reg.unregister("a")
    with pytest.raises(UnknownQueryError, match='no query named "zz"'):
        reg.get("zz")
    assert reg.version == 2


def test_unregister_all_is_one_change_all_or_nothing():
    reg = Registry()
    reg.register([q("a"), q("b"), q("c")])
    with pytest.raises(UnknownQueryError, match='no query named "zz"'):
        reg.unregister_all(["a", "zz"])
    assert reg.version == 1 and [s.name for s in reg.list()] == ["a", "b", "c"]
    assert [s.name for s in reg.unregister_all(["c", "a"])] == ["c", "a"]
    assert reg.version == 2 and [s.name for s in reg.list()] == ["b"]


def test_a_documents_error_lists_its_topic_clashes_with_its_other_errors():
    reg = Registry()
    reg.register("queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice}\n")
    with pytest.raises(QuerySpecError) as raised:  # (review397 #2: the clash came on the next try)
        reg.register("queries:\n  - {name: t3, streams: ['*'], question: direction_5, kind: choice, "
                     "topic: 'dir20/{stream}/'}\n  - {name: bad, streams: ['*'], kind: choice, question: "
                     "direction_5, trigger: {ticks: 0}}\n", "q.yaml")
    lines = str(raised.value).splitlines()
    assert lines[0].startswith('q.yaml:2: query "t3": its topic "dir20/{stream}/" starts where query "dir20" '
                               'publishes') and lines[1].startswith('q.yaml:3: query "bad": ')


def test_matching_cached_and_invalidated():
    reg = Registry()
    reg.register([q("all"), q("a_only", streams=("SYN.A",)), q("other", streams=("BTC-*",))])
    assert [s.name for s in reg.matching("SYN.A")] == ["all", "a_only"]
    assert [s.name for s in reg.matching("SYN.B")] == ["all"]
    assert reg.matching("ETH") == []
    reg.register([q("eth", streams=("ETH",))])
    assert [s.name for s in reg.matching("ETH")] == ["eth"]
    reg.unregister("all")
    assert [s.name for s in reg.matching("SYN.A")] == ["a_only"]


def test_due_batch_fires_every_call_and_on_demand_never():
    reg = Registry()
    reg.register([q("every"), q("ask", "on_demand", kind="choice", question_tokens=[1], choices=["a", "b"])])
    assert fired(reg, "SYN.A", [(1, T0), (1, T0), (9, T0 + 1)]) == [["every"]] * 3
    assert "ask" in reg and reg.matching("SYN.A")[1].name == "ask"


def test_due_ticks_grid_with_jumps():
    reg = Registry()
    reg.register([q("n10", {"ticks": 10})])
    calls = [(3, T0), (7, T0), (10, T0), (12, T0), (19, T0), (45, T0), (49, T0), (50, T0), (50, T0), (61, T0)]
    assert fired(reg, "SYN.A", calls) == [["n10"], [], ["n10"], [], [], ["n10"], [], ["n10"], [], ["n10"]]
    # per stream: SYN.B has its own state and fires on its first batch
    assert fired(reg, "SYN.B", [(55, T0), (59, T0), (60, T0)]) == [["n10"], [], ["n10"]]
    # a tick count going backwards means the stream was reset: fire and start over
    assert fired(reg, "SYN.A", [(2, T0), (5, T0), (10, T0)]) == [["n10"], [], ["n10"]]


def test_due_ticks_grid_does_not_drift_with_batch_size():
    reg = Registry()
    reg.register([q("n10", {"ticks": 10})])
    fires = sum(bool(reg.due("SYN.A", ticks, T0)) for ticks in range(7, 7 * 100 + 1, 7))  # batches of 7 ticks
    assert fires == 1 + 70  # the first batch, then one per 10 ticks over 700 ticks: not one per 14


def test_due_interval_in_event_time():
    reg = Registry()
    reg.register([q("sec", {"interval": "1s"}), q("half", {"interval": 500_000_000})])
    calls = [(1, T0 + 100_000_000), (2, T0 + 400_000_000), (3, T0 + 600_000_000), (4, T0 + 999_999_999),
             (5, T0 + S), (6, T0 + 7 * S + 1), (7, T0 + 7 * S + 2)]
    assert fired(reg, "SYN.A", calls) == [["sec", "half"], [], ["half"], [], ["sec", "half"], ["sec", "half"], []]


def test_due_interval_ignores_wall_clock_and_late_timestamps():
    reg = Registry()
    reg.register([q("sec", {"interval": "1s"})])
    calls = [(1, T0 + 2 * S), (2, T0 + S), (3, T0 + 2 * S + 5), (4, T0 + 3 * S)]  # ts goes back once
    assert fired(reg, "SYN.A", calls) == [["sec"], [], [], ["sec"]]


def test_due_only_matching_queries_and_unregister_drops_state():
    reg = Registry()
    reg.register([q("a", {"ticks": 100}, streams=("SYN.A",)), q("b", {"ticks": 100}, streams=("SYN.B",))])
    assert fired(reg, "SYN.A", [(1, T0)]) == [["a"]]
    assert fired(reg, "SYN.C", [(1, T0)]) == [[]]
    reg.unregister("a")
    reg.register([q("a", {"ticks": 100}, streams=("SYN.A",))])
    assert fired(reg, "SYN.A", [(2, T0)]) == [["a"]]
    reg.drop_stream("SYN.A")
    assert fired(reg, "SYN.A", [(3, T0)]) == [["a"]]


def test_register_from_another_thread_while_due_runs():
    reg = Registry()
    reg.register([q("base")])
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            for i in range(300):
                reg.register([q(f"t{i % 5}", {"ticks": 3})])
                if i % 3 == 0:
                    reg.unregister(f"t{i % 5}")
        except BaseException as e:  # surfaced below: a thread's exception is otherwise lost
            errors.append(e)

    thread = threading.Thread(target=churn)
    thread.start()
    ticks = 0
    while thread.is_alive() or ticks < 300:
        ticks += 1
        names = [s.name for s in reg.due("SYN.A", ticks, T0 + ticks)]
        assert names[0] == "base" and len(set(names)) == len(names)
    thread.join()
    assert not errors


def test_register_file(tmp_path):
    path = tmp_path / "q.yaml"
    path.write_text("queries:\n  - {name: a, streams: [x], kind: surprise, trigger: {ticks: 5}}\n")
    reg = Registry()
    assert [s.name for s in reg.register_file(path)] == ["a"]
    path.write_text("queries:\n  - {name: a, streams: [x], kind: surprise, trigger: {ticks: 0}}\n")
    with pytest.raises(QuerySpecError, match=rf"{path}:2: query \"a\": ticks trigger"):
        reg.register_file(path)
    assert reg.get("a").trigger.every == 5


def test_a_query_the_model_cannot_answer_is_refused_when_registered():
    """Once registered, such a query failed every engine step it was due in (no answers for any query)."""
    codec = BinnedCodec()
    reg = Registry(codec.questions, answerable=lambda spec: compile_query(spec, codec))
    reg.register("queries:\n  - {name: dir, streams: [x], question: direction_20, kind: choice}\n")
    with pytest.raises(QuerySpecError, match="query \"text\": question \"Up or down.\" is free text, and a tick model "
                                             "cannot read free text"):
        reg.register("queries:\n  - {name: ok, streams: [x], kind: surprise}\n"
                     "  - {name: text, streams: [x], question: 'Up or down?', kind: choice, choices: [up, down]}\n")
    with pytest.raises(QuerySpecError, match=r"question_tokens\[1\] = 999 is not below the vocabulary size"):
        reg.register([QuerySpec(name="toks", streams=("x",), kind="generate", question_tokens=(1, 999))])
    assert [s.name for s in reg.list()] == ["dir"] and reg.version == 1


def test_a_query_may_not_publish_on_another_querys_default_topics():
    """`dir20/{stream}/` are query dir20's topics: another query publishing there would interleave its answers
    with dir20's (the reverse too: a new query named after a shared topic); a topic shared on purpose is fine."""
    registry = Registry()
    registry.register("queries:\n  - {name: dir20, streams: [\"*\"], kind: surprise}\n"
                      "  - {name: a, streams: [A], kind: surprise, topic: shared/}\n"
                      "  - {name: b, streams: [B], kind: surprise, topic: shared/}\n")
    # located in the document like its other problems (file:line: query 'name': reason), the name said once
    with pytest.raises(QuerySpecError, match=r'^mine.yaml:3: query "dirx": its topic "dir20/\{stream\}/" starts where '
                                             r"query \"dir20\" publishes on its default topics.*give it a topic of its "
                                             r"own$"):
        registry.register("queries:\n  - {name: ok1, streams: [\"*\"], kind: surprise}\n"
                          "  - {name: dirx, streams: [\"*\"], kind: surprise, topic: 'dir20/{stream}/'}\n", "mine.yaml")
    with pytest.raises(QuerySpecError, match=r'^<string>:2: query "shared": query "a" publishes on "shared/", inside '
                                             r"this query's default topics.*another name"):
        registry.register("queries:\n  - {name: shared, streams: [\"*\"], kind: surprise}\n")
    assert [s.name for s in registry.list()] == ["dir20", "a", "b"] and registry.version == 1
    registry.register("queries:\n  - {name: c, streams: [\"*\"], kind: surprise, topic: 'shared/{stream}/'}\n")


def test_a_topic_clash_in_a_file_reads_file_line_query_reason_wherever_the_file_is_registered(tmp_path):
    """A backtest's --queries (register_file) and serve's `queries:` file on top of the restored queries
    (register_changed) say a clash as `file:line: query 'name': reason`, as docs/queries.md promises of every
    registration error (the reviewer's coll1.yaml, then coll2.yaml)."""
    from engine.service.kept_queries import register_changed

    (tmp_path / "coll1.yaml").write_text("queries: [{name: b.d5, streams: ['*'], kind: surprise}]\n")
    (tmp_path / "coll2.yaml").write_text("queries:\n  - {name: ok, streams: ['*'], kind: surprise}\n"
                                        "  - {name: b.d5x, streams: [A], kind: surprise, topic: 'b.d5/{stream}/x/'}\n")
    clash = (re.escape(f"{tmp_path / 'coll2.yaml'}:3: query \"b.d5x\": its topic \"b.d5/{{stream}}/x/\" starts where "
                       f"query \"b.d5\" publishes on its default topics"))
    for register in (Registry.register_file, lambda registry, path: register_changed(str(path), registry, print)):
        registry = Registry()
        registry.register_file(tmp_path / "coll1.yaml")
        with pytest.raises(QuerySpecError, match="^" + clash):
            register(registry, tmp_path / "coll2.yaml")
        assert [s.name for s in registry.list()] == ["b.d5"]


def test_the_registry_says_whether_any_query_fires_on_price_moves_and_watch_moves_skips_without_one():
    """Each accepted tick goes to `watch_moves`; a registry with no `move_bps` query says so in its snapshot, so
    the tick costs no lookup (not even the scheduler's tick count: none is given here) and moves no reference."""
    from engine.service.move_marks import watch_moves

    reg = Registry()
    assert not reg.has_move_queries
    reg.register([q("a"), q("b", trigger={"ticks": 5})])
    assert not reg.has_move_queries
    assert watch_moves(reg, None, "SYN.A", T0, 100.0) is None  # type: ignore[arg-type]
    assert reg.moved("SYN.A", 1, T0, 100.0) == [] and reg.would_move("SYN.A", [(1, T0, 100.0)]) == []
    reg.register("queries:\n  - {name: mv, streams: ['SYN.*'], kind: surprise, trigger: {move_bps: 10}}\n")
    assert reg.has_move_queries
    assert reg.moved("SYN.A", 1, T0, 100.0) == ["mv"]  # the stream's first mark fires and sets the reference
    assert reg.moved("SYN.A", 2, T0 + S, 100.05) == [] and reg.moved("SYN.A", 3, T0 + 2 * S, 100.1) == ["mv"]
    reg.restore_versions(reg.version, {"mv": 1})
    assert reg.has_move_queries
    reg.register([q("mv")])  # replaced by a batch query: no move query is left
    assert not reg.has_move_queries and reg.moved("SYN.A", 4, T0 + 3 * S, 200.0) == []
    reg.register("queries:\n  - {name: mv2, streams: ['SYN.*'], kind: surprise, trigger: {move_bps: 5}}\n")
    assert reg.has_move_queries
    reg.unregister("mv2")
    assert not reg.has_move_queries
