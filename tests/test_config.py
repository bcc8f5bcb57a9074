"""The engine config YAML: the shipped example loads; mistakes are named."""

from __future__ import annotations

import dataclasses
from datetime import date
from pathlib import Path

import pytest

from engine.service.cli import main
from engine.service.config import ConfigError, ServiceConfig
from engine.service.kept_queries import configured_queries
from queries.registry import Registry

EXAMPLES = Path(__file__).resolve().parents[1] / "queries" / "examples"


def test_the_annotated_example_names_every_key() -> None:
    """queries/examples/engine.yaml is the config reference a user copies: every key of every section is in it
    (set to its default, or shown in a comment where setting it would change the default)."""
    import dataclasses
    import re

    text = (EXAMPLES / "engine.yaml").read_text()
    for section in dataclasses.fields(ServiceConfig):
        if dataclasses.is_dataclass(section.default_factory if callable(section.default_factory) else None):
            for key in dataclasses.fields(section.default_factory):
                assert re.search(rf"^\s*#?\s*{key.name}:", text, re.MULTILINE), f"{section.name}.{key.name}"
        else:
            assert re.search(rf"^#?\s*{section.name}:", text, re.MULTILINE), section.name


def test_shipped_examples_load() -> None:
    config = ServiceConfig.load(EXAMPLES / "engine.yaml")
    assert config == ServiceConfig(queries=str(EXAMPLES / "tick_model.yaml"))  # the example lists the defaults
    assert config.endpoints.ingest.startswith("tcp://127.0.0.1:")
    # read as serve reads its configured file (the tick model's questions are checked by the model, not here)
    assert {q.name for q in configured_queries(config.queries, Registry()).specs} == {"dir20", "vol50", "move50",
                                                                                       "surprise"}
    assert configured_queries(str(EXAMPLES / "text_model.yaml"), Registry()).specs


@pytest.mark.parametrize("raw, message", [
    ({"modle": {}}, "unknown key \"modle\" in top level"),
    ({"kv": {"cels": 10}}, "unknown key \"cels\" in section \"kv\""),
    ({"scheduler": {"when_full": "panic"}}, "engine.yaml: scheduler.when_full must be \"evict\" or \"refuse\""),
    ({"scheduler": {"keep_fraction": 2}}, "engine.yaml: scheduler.keep_fraction must be in"),
    ({"answers": {"adapt": "x"}}, r"engine.yaml: answers.adapt must be one of"),
    ({"kv": {"block_size": 0}}, "engine.yaml: kv.block_size must be > 0, got 0"),
    ({"kv": {"cells": 0}}, "engine.yaml: kv.cells must be > 0, got 0"),  # (0 passed, to fail later unnamed)
    ({"kv": {"cells": -1}}, "engine.yaml: kv.cells must be > 0, got -1"),
    ({"scheduler": {"max_batch_tokens": 0}}, "max_batch_tokens must be > 0"),
    ({"model": {"dtype": "float64"}}, "model.dtype must be one of"),
    ({"model": {"weights": "int8"}}, "model.weights must be one of"),
    ({"endpoints": {"ingest": "127.0.0.1:5555"}}, "endpoints.ingest must be a ZeroMQ endpoint"),
    # ZeroMQ itself binds these to the port modulo 65536 without a word
    ({"endpoints": {"ingest": "tcp://127.0.0.1:99999"}}, r"endpoints.ingest \"tcp://127.0.0.1:99999\": a tcp port is 1 "
                                                         r"to 65535 \(0 or \*: any free one\)"),
    ({"endpoints": {"answers": "tcp://127.0.0.1:-5"}}, "endpoints.answers \"tcp://127.0.0.1:-5\": a tcp port is 1"),
    ({"endpoints": {"feeds": ["not-an-endpoint"]}}, "an endpoints.feeds entry must look like .tcp://host:port., got"),
    ({"endpoints": {"feeds": ["tcp://127.0.0.1:7000", "tcp://127.0.0.1:7000"]}}, "endpoints.feeds lists "
                                                                              "tcp://127.0.0.1:7000 more than once"),
    # one feed under two names of its address: two SUBs on one publisher, every tick twice (review391 #4)
    ({"endpoints": {"feeds": ["tcp://127.0.0.1:7000", "tcp://localhost:7000"]}}, "endpoints.feeds lists "
     r"tcp://127.0.0.1:7000 and tcp://localhost:7000, one address \(tcp://127.0.0.1:7000\): every tick published "
     "there would be taken once per entry"),
    ({"endpoints": {"feeds": ["tcp://LOCALHOST:7000", "tcp://10.0.0.5;127.0.0.1:7000"]}}, "one address"),
    # one file's own clash was a bind error asking "is another flashtick serve running?"
    ({"endpoints": {"answers": "tcp://127.0.0.1:5555"}}, "endpoints.answers and endpoints.ingest both use port 5555 "
                                                         "on 127.0.0.1: give each socket its own port"),
    ({"endpoints": {"control": "tcp://*:6000", "answers": "tcp://127.0.0.1:6000"}}, "endpoints.control and endpoints"
                                                                                     ".answers both use port 6000"),
    ({"endpoints": {"metrics_port": 5557}}, "endpoints.metrics_port and endpoints.control both use port 5557"),
    ({"limits": {"heartbeat_s": 0}}, "limits.heartbeat_s must be a finite number > 0"),
    ({"limits": {"heartbeat_s": float("nan")}}, "limits.heartbeat_s must be a finite number > 0, got NaN"),
    ({"limits": {"drain_s": float("inf")}}, "limits.drain_s must be a finite number > 0, got Infinity"),
    ({"limits": {"max_ts_ahead_s": float("inf")}}, "limits.max_ts_ahead_s must be a finite number > 0, got Infinity"),
    ({"limits": {"max_ts_ahead_s": float("nan")}}, "limits.max_ts_ahead_s must be a finite number > 0, got NaN"),
    ({"limits": {"max_ts_ahead_s": -1}}, "limits.max_ts_ahead_s must be a finite number > 0, got -1"),
    ({"limits": {"max_message_bytes": 10**23}}, r"limits.max_message_bytes must be below 1e\+15"),
    ({"scheduler": {"stream_idle_s": float("inf")}}, r"scheduler.stream_idle_s must be a number of seconds > 0 "
                                                     r"\(or null for never\), got Infinity"),
    ({"scheduler": {"window": 0}}, "scheduler.window must be > 0"),
    ({"replay": {"hours": "09:30-16:00 UTC"}}, r"\"hours\" is a column map's key: give it under replay.columns"),
    # a typo of `streams` was sent under replay.columns, which refuses a list: the nearest key of the level first
    ({"replay": {"stream": ["X*"]}}, r"unknown key \"stream\" in section \"replay\" \(allowed: .*\); did you mean "
                                     r"\"streams\"\? \(as a column map's key, \"stream\" goes under replay.columns"),
    ({"kv": {"block_sise": 16}}, r"unknown key \"block_sise\" in section \"kv\" \(allowed: .*\); did you mean "
                                 r"\"block_size\"\?$"),
    # it named neither the file nor the section and printed Python lists, once a file was read
    ({"replay": {"columns": {"tss": "time", "price": "price"}}}, r"^engine.yaml: unknown key \"tss\" in replay.columns "
                                                                 r"\(allowed: ask, ask_size, bar_length, bar_stamp, "
                                                                 r"base_token, bid, .*\); did you mean "
                                                                 r"\"ts\"\?$"),
    # where that hint could lead: a list there was "stream must be a non-empty column name", once a file was read
    ({"replay": {"columns": {"stream": ["X*"]}}}, r"^engine.yaml: replay.columns.stream is one fixed stream name .*"
                                                  r'got a list \["X\*"\]: the streams to read, as --streams, are '
                                                  r"replay.streams"),
    ({"replay": {"columns": {"stream_name": "X", "ts": "t"}}}, r"unknown key \"stream_name\" in replay.columns .*"
                                                               r"\(stream_name is the inline --columns spelling"),
    ({"log": {"group_ms": float("nan")}}, "log.group_ms must be a finite number > 0, got NaN"),  # fsync threads spun
    ({"log": {"group_ms": float("inf")}}, "log.group_ms must be a finite number > 0, got Infinity"),  # ... or died
    ({"kv": {"cells": 10**23}}, r"kv.cells must be below 1e\+15"),  # torch's overflow, 45 lines of C++ frames
    ({"limits": {"heartbeat_s": "1e9"}}, "YAML reads 1e9 as text: write 1000000000"),
    ({"curve": {"enabled": True}}, "curve.enabled needs"),
    ({"kv": "big"}, "section \"kv\" must be a mapping, got a string"),
    ({"kv": None}, "section \"kv\" must be a mapping, got null"),
    (["kv"], "engine.yaml: the config must be a mapping, got a list"),
    ({"queries": ["q.yaml"]}, r"engine.yaml: queries must be the path of a queries file, got a list"),
    ({"kv": {"cells": 1000, "bytes": 10**8}}, "kv: give cells or bytes, not both"),
    # wrong types are named before the service starts (they were TypeErrors after binding)
    ({"limits": {"heartbeat_s": "fast"}}, r"engine.yaml: limits.heartbeat_s must be a number, got \"fast\"$"),
    ({"kv": {"cells": "4096"}}, r"kv.cells must be an integer or null, got \"4096\" \(quoted in the YAML: drop"),
    # ... every numeric key alike: a section's own range check spoke first, without the hint (review442 #1)
    ({"model": {"threads": "1"}}, r"model.threads must be an integer or null, got \"1\" \(quoted in the YAML: drop"),
    ({"replay": {"batch_ms": "100"}}, r"replay.batch_ms must be a number, got \"100\" \(quoted in the YAML: drop"),
    # a quoted number the section's checks refuse unquoted too: their range said, not "drop the quotes" alone
    ({"model": {"threads": "0"}}, r"model.threads must be an integer >= 1 \(or null: torch's default\), got 0 "
                                  r"\(and quoted in the YAML: a number is written without quotes\)"),
    ({"endpoints": {"metrics_port": True}}, "endpoints.metrics_port must be an integer or null, got true$"),
    ({"scheduler": {"header": [1, "a"]}}, r"scheduler.header must be a list of integers, got \[1, \"a\"\]"),
    ({"replay": {"ts_unit": "fortnights"}}, r"engine.yaml: replay.ts_unit must be one of"),
    ({"replay": {"tz": "Nowhere/City"}}, r"engine.yaml: replay: unknown time zone"),
    ({"log": {"retention_bytes": "1GB"}}, r"log.retention_bytes must be a number of bytes \(e.g. 1073741824, not"),
    ({"log": {"retention_s": 0}}, r"log.retention_s must be a finite number > 0, got 0"),
    # each unit its own example: a duration's was a size's ("e.g. 1073741824, not '1GB'" for a retention_s of 7d)
    ({"log": {"retention_s": "7d"}}, r"log.retention_s must be a number of seconds \(e.g. 604800, not \"7d\"\), "
                                     r"got \"7d\""),
    ({"log": {"group_ms": "5ms"}}, r"log.group_ms must be a number of milliseconds \(e.g. 5, not \"5ms\"\)"),
    ({"log": {"answers_keep": "100k"}}, r"log.answers_keep must be a number of answers \(e.g. 100000, not \"100k\"\)"),
    ({"log": {"segment_bytes": "64MB"}}, r'log.segment_bytes must be a number of bytes \(e.g. 67108864, not "64MB"\)'),
])
def test_config_mistakes_are_named(raw: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ServiceConfig.from_dict(raw, "engine.yaml")


def test_ports_zero_and_other_hosts_never_clash() -> None:
    config = ServiceConfig.from_dict({"endpoints": {"ingest": "tcp://127.0.0.1:5555", "answers": "tcp://127.0.0.1:0",
                                                    "control": "tcp://10.0.0.5:5555", "metrics_port": 0,
                                                    "feeds": ["tcp://127.0.0.1:7000", "tcp://[::1]:7000",
                                                              "tcp://127.0.0.1:7001", "tcp://10.0.0.5:7000"]}})
    # (the engine binds 127.0.0.1:0 twice to two free ports; feeds on other addresses or ports are other feeds)
    assert config.endpoints.answers.endswith(":0") and len(config.endpoints.feeds) == 4


def test_right_types_pass() -> None:
    config = ServiceConfig.from_dict({"limits": {"heartbeat_s": 2}, "model": {"threads": None},
                                      "endpoints": {"feeds": ["tcp://127.0.0.1:7000"]}, "shards": {"cpus": 1},
                                      "replay": {"columns": {"ts": "t", "price": "p", "size": "q"},
                                                 "ts_unit": "seconds_after_midnight", "date": date(2024, 3, 1)}})
    assert config.limits.heartbeat_s == 2 and config.replay.date == "2024-03-01"


def test_a_yaml_boolean_where_a_number_or_a_word_belongs_is_said_in_yaml_words(tmp_path) -> None:
    """YAML 1.1 reads `yes`, `on`, `no` and `true` as booleans: the errors said `got True` / `got False`, Python's words
    for what the user wrote in YAML (spec errors already said true/false)."""
    path = tmp_path / "engine.yaml"
    for section, said in (("kv: {cells: yes}", "kv.cells must be an integer or null, got true$"),
                          ("codec: {kind: on}", "codec.kind must be auto, binned or text, got true$"),
                          ("log: {fsync: true}", "log.fsync must be always, group or never, got true$"),
                          ("model: {threads: no}", r"model.threads must be an integer >= 1 \(or null: torch's "
                                                   r"default\), got false$")):
        path.write_text(section + "\n")
        with pytest.raises(ConfigError, match=said):
            ServiceConfig.load(path)


def test_yaml_is_safe_loaded(tmp_path) -> None:
    path = tmp_path / "engine.yaml"
    path.write_text("model: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        ServiceConfig.load(path)


def test_a_tab_in_a_config_is_named_as_a_tab_as_in_a_query_file(tmp_path) -> None:
    """review442 #5: PyYAML's "found character '\\t' that cannot start any token" said no tab and nothing to do."""
    path = tmp_path / "engine.yaml"
    path.write_text("model:\n\tthreads: 1\n")
    with pytest.raises(ConfigError) as refused:
        ServiceConfig.load(path)
    assert str(refused.value) == (f"{path}: not valid YAML: a tab: YAML indents with spaces only; replace the tabs "
                                  f"with spaces (line 2, column 1)")


def test_aliases_that_expand_past_a_budget_or_into_themselves_are_refused_with_their_line(tmp_path) -> None:
    """review406 #1, #2: a "billion laughs" config hung every command given it at 100% CPU (the ${VAR} walk
    expanded its aliases, 3.4e9 nodes), and a recursive alias ended in Python's bare RecursionError text."""
    from engine.yaml_files import safe_load_unique

    laughs = "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}' if i else 'x'] * 9)}]\n" for i in range(10))
    path = tmp_path / "lol.yaml"
    path.write_text(laughs + "model: {threads: 1}\n")
    with pytest.raises(ConfigError, match=r"lol.yaml: not valid YAML: the document expands past the limit of "
                                          r"1000000 nodes, an alias counting every node it repeats \(line 7, "):
        ServiceConfig.load(path)
    path.write_text("model: &m {threads: 1, x: *m}\n")
    with pytest.raises(ConfigError, match=r"alias \*m refers to a node that contains it \(a recursive alias\) "
                                          r"\(line 1, column 27\)"):
        ServiceConfig.load(path)
    shared = "base: &b {price: p, size: q}\nmaps: [*b, *b]\n"  # aliases within the budget read as ever
    assert safe_load_unique(shared, text_words=True) == {"base": {"price": "p", "size": "q"},
                                                         "maps": [{"price": "p", "size": "q"}] * 2}


def test_a_section_or_key_given_twice_is_refused_not_merged(tmp_path) -> None:
    """A section appended at the end of a config (a second `kv:`) dropped the first one's settings silently."""
    from connectors.map_options import load_map_file

    path = tmp_path / "engine.yaml"
    path.write_text("kv:\n  cells: 4096\nendpoints:\n  ingest: tcp://127.0.0.1:5555\nkv:\n  block_size: 16\n")
    with pytest.raises(ConfigError, match=r'not valid YAML: found duplicate key "kv" \(first at line 1\).*\(line 5'):
        ServiceConfig.load(path)
    path.write_text("limits: {heartbeat_s: 1, heartbeat_s: 2}\n")  # on one line too
    with pytest.raises(ConfigError, match='duplicate key "heartbeat_s" \\(first at line 1\\)'):
        ServiceConfig.load(path)
    path.write_text("limits:\n  heartbeat_s: 1\n  heartbeat_s: 2\n")
    with pytest.raises(ConfigError, match='duplicate key "heartbeat_s" \\(first at line 2\\)'):
        ServiceConfig.load(path)
    columns = tmp_path / "map.yaml"
    columns.write_text("ts: time\nprice: px\nprice: last\n")
    with pytest.raises(ValueError, match=r'duplicate key "price" \(first at line 2\).*\(line 3, column 1\)$') as e:
        load_map_file(columns)
    assert "\n" not in str(e.value)  # one line, not PyYAML's quoting of the source
    # merge keys still work, and a key after one overrides what it merged (YAML's rule, not a duplicate)
    path.write_text("defaults: &d {heartbeat_s: 3, max_lag_s: 2}\nlimits:\n  <<: *d\n  max_lag_s: 1\n")
    with pytest.raises(ConfigError, match="unknown"):  # (`defaults` is no section: the merge itself was read)
        ServiceConfig.load(path)
    path.write_text("limits: {<<: {heartbeat_s: 3, max_lag_s: 2}, max_lag_s: 1}\n")
    assert (ServiceConfig.load(path).limits.heartbeat_s, ServiceConfig.load(path).limits.max_lag_s) == (3, 1)


def test_a_data_directory_that_cannot_be_one_is_named(tmp_path) -> None:
    from engine.service.durability import DataDir
    from queries.cache import AnswerCache

    (tmp_path / "afile").write_text("not a directory")
    config = ServiceConfig.from_dict({"log": {"dir": str(tmp_path / "afile" / "sub")}})
    with pytest.raises(ConfigError, match=r"log.dir .*afile/sub: .*afile is a file, not a folder, so .*afile/sub "
                                          r"cannot be made under it \(a data directory must be"):
        DataDir(config.log, AnswerCache(), {})
    config = ServiceConfig.from_dict({"log": {"dir": str(tmp_path / "afile")}})
    with pytest.raises(ConfigError, match=r"log.dir .*afile: .*afile is a file, not a folder \(a data directory"):
        DataDir(config.log, AnswerCache(), {})


def test_adapt_off_reads_as_the_docs_write_it(tmp_path) -> None:
    """`answers: {adapt: off}` as the docs write it: YAML 1.1 reads a bare off as false; that is `off`."""
    for text, mode in (("off", "off"), ('"off"', "off"), ("on", "online"), ("online", "online")):
        path = tmp_path / "engine.yaml"
        path.write_text(f"answers: {{adapt: {text}}}\n")
        assert ServiceConfig.load(path).answers.adapt == mode, text
    path.write_text("answers: {adapt: sometimes}\n")
    with pytest.raises(ConfigError, match="answers.adapt must be one of"):
        ServiceConfig.load(path)


def test_ray_colours_its_shards_lines_only_on_a_terminal() -> None:
    """Ray wrapped each shard's "(pid=...)" prefix in ANSI colour codes whatever stderr was: raw escapes in a
    service log kept in a file or a journal. Its RAY_COLOR_PREFIX is set to 0 unless stderr is a terminal and
    NO_COLOR is unset; a value the user set is kept."""
    import io
    import os
    import pty

    from engine.service.config import ShardsSection
    from engine.service.ray_shards import set_ray_environment

    shards = ShardsSection()
    piped: dict[str, str] = {}
    set_ray_environment(shards, piped, io.StringIO())
    assert piped["RAY_COLOR_PREFIX"] == "0" and piped["RAY_worker_niceness"] == "0"
    leader, follower = pty.openpty()
    try:
        with open(follower, "w", closefd=False) as terminal:
            on_terminal: dict[str, str] = {}
            set_ray_environment(shards, on_terminal, terminal)
            assert "RAY_COLOR_PREFIX" not in on_terminal
            no_color = {"NO_COLOR": "1"}
            set_ray_environment(shards, no_color, terminal)
            assert no_color["RAY_COLOR_PREFIX"] == "0"
    finally:
        os.close(leader)
        os.close(follower)
    chosen = {"RAY_COLOR_PREFIX": "1"}
    set_ray_environment(shards, chosen, io.StringIO())
    assert chosen["RAY_COLOR_PREFIX"] == "1"


def test_backtest_names_the_config_file_and_key_of_a_bad_column_map_key(tmp_path: Path, capsys) -> None:
    """`replay: {columns: {tss: ...}}` was refused once the first file was read, as `unknown column-map key(s)
    ['tss']; allowed keys: [...]`: no file, no section, Python lists. Now at the config's load, as every other key."""
    (tmp_path / "t.csv").write_text("timestamp,symbol,price,size\n1717200000000,XAU,100.5,1\n")
    config = tmp_path / "bad.yaml"
    config.write_text("replay:\n  columns: {tss: time, price: price}\n")
    code = main(["backtest", str(tmp_path / "t.csv"), "--config", str(config), "--out", str(tmp_path / "a.parquet"),
                 "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"flashtick backtest: error: {config}: unknown key \"tss\" in replay.columns "
                                        f"(allowed: ask, ask_size, bar_length, bar_stamp, base_token, bid,"), err
    assert err.endswith("; did you mean \"ts\"?\n") and err.count("\n") == 1, err


def test_replay_columns_read_yes_and_no_as_text_the_rest_of_the_config_as_booleans(tmp_path: Path) -> None:
    """fix237 made a column map FILE read `keep: {regular: [yes]}` as the text `yes`; the service config's
    replay.columns (the same map, inline) still read it as True, and kept no row of a cell `yes`."""
    config = tmp_path / "engine.yaml"
    config.write_text("log: {enabled: no}\nreplay: {columns: {keep: {regular: [yes, on]}, stream: off}}\n")
    loaded = ServiceConfig.load(config)
    assert loaded.replay.columns == {"keep": {"regular": ["yes", "on"]}, "stream": "off"}
    assert loaded.log.enabled is False


def test_every_section_of_service_config_is_read_as_one() -> None:
    """fix294 #3: the sections read from YAML were a second list beside ServiceConfig's fields; they are now read
    off its fields, so each section field, and only those, is read as a section (an empty mapping builds its
    defaults, an unknown key is named in the section's words)."""
    sections = [f.name for f in dataclasses.fields(ServiceConfig) if f.name != "queries"]
    assert len(sections) == 12  # (ingest: review323)
    for name in sections:
        assert getattr(ServiceConfig.from_dict({name: {}}), name) == getattr(ServiceConfig(), name)
        with pytest.raises(ConfigError, match=f"unknown key \"nope\" in section \"{name}\""):
            ServiceConfig.from_dict({name: {"nope": 1}})
    with pytest.raises(ConfigError, match="queries must be the path of a queries file"):
        ServiceConfig.from_dict({"queries": {}})
