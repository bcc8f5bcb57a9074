"""`--streams`: the instruments of a many-instrument vendor file a command reads (a tick history of many symbols,
a DBN file of several futures). Other streams' ticks are counted as filtered_out, a pattern that matches no
stream is refused with the streams the files hold, and a backtest resume with another selection is refused by
name. Real files in tmp_path (DBN written with databento-dbn's own encoder), the real CLI."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from conftest import engine_dir
from connectors.replay import FileReplay
from connectors.stream_selection import NoStreamMatched
from engine.service.cli import main
from engine.service.config import ConfigError, ServiceConfig

QUERIES = "queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, trigger: {ticks: 5}}\n"
SYMBOLS = ("AAPL", "IBM", "MSFT")
TINY = ["--from-scratch", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
        "--intermediate", "64", "--window-ticks", "63", "--threads", "1"]


def tape_csv(path: Path, rows: int) -> Path:
    """One file of every symbol's prints, interleaved (as a TAQ or tick-history export is): 10 rows a second."""
    lines = ["timestamp,symbol,price,size"]
    lines += [f"2026-03-10 14:{30 + i // 600:02d}:{i // 10 % 60:02d}.{i % 10}00,{SYMBOLS[i % 3]},"
              f"{100 + 10 * (i % 3) + (i * 7 % 5) * 0.01:.2f},{1 + i % 3}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def engine_files(tmp_path_factory) -> Path:
    return engine_dir(tmp_path_factory.mktemp("selection"), QUERIES)


def backtest(engine_files: Path, files: list[Path], out: Path, *extra: str) -> int:
    return main(["backtest", *map(str, files), "--queries", str(engine_files / "q.yaml"), "--out", str(out),
                 "--config", str(engine_files / "engine.yaml"), "--quiet", *extra])


def test_backtest_answers_the_selected_streams_alone_and_counts_the_others(engine_files: Path, tmp_path: Path,
                                                                         capsys) -> None:
    tape = tape_csv(tmp_path / "tape.csv", 90)
    assert backtest(engine_files, [tape], tmp_path / "a.parquet", "--streams", "AAPL", "I*") == 0
    out, err = capsys.readouterr()
    assert "replayed 60 ticks (0 rejected, 30 left out by a filter)" in out, out
    assert "left out filtered_out: 30 (MSFT 30; first: " in out and 'stream "MSFT" is not among the streams selected ' \
           "[\"AAPL\", \"I*\"]" in out and "warning" not in out  # counted, not a misread column
    assert "note: streams selected [\"AAPL\", \"I*\"]: AAPL, IBM, 2 of the 3 the files hold" in err
    assert set(pl.read_parquet(tmp_path / "a.parquet")["stream"]) == {"AAPL", "IBM"}

    # the config's replay section selects alike; --streams replaces it
    config = tmp_path / "engine.yaml"
    config.write_text((engine_files / "engine.yaml").read_text() + "replay: {streams: [MSFT]}\n")
    argv = ["backtest", str(tape), "--queries", str(engine_files / "q.yaml"), "--config", str(config), "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "b.parquet")]) == 0
    assert set(pl.read_parquet(tmp_path / "b.parquet")["stream"]) == {"MSFT"}
    assert main([*argv, "--out", str(tmp_path / "c.parquet"), "--streams", "IBM"]) == 0
    assert set(pl.read_parquet(tmp_path / "c.parquet")["stream"]) == {"IBM"}


def test_names_with_spaces_are_quoted_in_the_selection_note_and_the_rejects(tmp_path: Path) -> None:
    """`ICE:BRN F7 EPEX:DE H13` read as four names; quoted, as the no-match error quotes them, they read as two."""
    rows = ["timestamp,symbol,price,size"] + [f"2026-11-02T0{i}:00:00Z,{s},{70 + i},1" for i, s in enumerate(
        ("ICE:BRN F7", "EPEX:DE H13", "CBOT:ZC H7"))]
    (tmp_path / "energy.csv").write_text("\n".join(rows) + "\n")
    replay = FileReplay(tmp_path / "energy.csv", streams=["ICE:BRN F7", "EPEX:DE H13"])
    assert [t.stream for t in drain_all(replay)] == ["ICE:BRN F7", "EPEX:DE H13"]
    assert replay.notes[-1].startswith("streams selected [\"ICE:BRN F7\", \"EPEX:DE H13\"]: EPEX:DE H13, ICE:BRN F7, 2 "
                                       "of the 3 the files hold")
    assert "stream \"CBOT:ZC H7\" is not among the streams selected [\"ICE:BRN F7\", \"EPEX:DE H13\"]" in \
        replay.rejected.examples["filtered_out"]


def drain_all(replay: FileReplay) -> list:
    ticks = []
    while not replay.done:
        ticks += replay.next_batch(1000)
    return ticks


def test_a_pattern_that_matches_no_stream_exits_2_naming_the_streams_there_are(engine_files: Path, tmp_path: Path,
                                                                              capsys) -> None:
    tape = tape_csv(tmp_path / "tape.csv", 30)
    assert backtest(engine_files, [tape], tmp_path / "a.parquet", "--streams", "AAPL", "NQ*") == 2
    err = capsys.readouterr().err
    assert "error: streams [\"NQ*\"] match none of the streams the files hold (AAPL, IBM, MSFT)" in err, err
    assert not (tmp_path / "a.parquet").exists() and not (tmp_path / "a.parquet.parts").exists()
    # feed replay refuses before it connects to any engine; a bad glob or a name with '/' is refused as queries are
    for patterns, said in ((["ZZ"], "match none of the streams"), (["A[A"], "not a valid glob: unclosed \"[\""),
                           (["EUR/USD"], 'select "EUR-USD"')):
        assert main(["feed", "replay", str(tape), "--streams", *patterns, "--endpoint", "tcp://127.0.0.1:9"]) == 2
        assert said in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r'replay: streams: "A\[A" is not a valid glob'):
        ServiceConfig.from_dict({"replay": {"streams": ["A[A"]}})


def test_a_resume_with_another_selection_is_refused_naming_it(engine_files: Path, tmp_path: Path, capsys) -> None:
    from engine.service.backtest import BacktestInterrupted, run_backtest

    tape = tape_csv(tmp_path / "tape.csv", 300)
    out = tmp_path / "cut.parquet"
    polls = iter(range(10**9))
    with pytest.raises(BacktestInterrupted):
        run_backtest(ServiceConfig.load(engine_files / "engine.yaml"), [tape], engine_files / "q.yaml", out,
                     progress=False, stop=lambda: next(polls) >= 5, streams=["I*", "AAPL"])
    assert backtest(engine_files, [tape], out, "--resume", "--streams", "MSFT") == 2
    assert f"different ways of reading {tape.resolve()} (--streams [\"AAPL\", \"I*\"] then, [\"MSFT\"] now)" in \
        capsys.readouterr().err
    assert backtest(engine_files, [tape], out, "--resume") == 2  # every stream is another selection too
    assert "(--streams [\"AAPL\", \"I*\"] then, not given now)" in capsys.readouterr().err
    # the same selection in another order is the same selection: it resumes
    assert backtest(engine_files, [tape], out, "--resume", "--streams", "AAPL", "I*") == 0
    assert set(pl.read_parquet(out)["stream"]) == {"AAPL", "IBM"}


def test_train_and_evaluate_read_the_selected_streams_alone(tmp_path: Path, capsys) -> None:
    from connectors.synthetic import SyntheticConfig, SyntheticMarket

    ticks = tmp_path / "ticks.parquet"
    pl.DataFrame([t.to_wire() for t in SyntheticMarket(SyntheticConfig(seed=3)).generate(6000).ticks]
                 ).write_parquet(ticks)
    out = tmp_path / "model"
    assert main(["train", str(ticks), "--out", str(out), *TINY, "--steps", "1", "--batch", "1", "--max-points",
                 "64", "--resamples", "10", "--quiet", "--json", "--streams", "SYN.A", "SYN.C"]) == 0, \
        capsys.readouterr().err
    record = json.loads(capsys.readouterr().out)
    assert set(record["evaluation"]["streams"]) == {"SYN.A", "SYN.C"}
    assert record["selected_streams"] == ["SYN.A", "SYN.C"] and record["rejected"]["filtered_out"] > 0
    assert main(["evaluate", str(out), str(ticks), "--max-points", "64", "--resamples", "10", "--threads", "1",
                 "--json", "--streams", "SYN.B"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["streams"]) == {"SYN.B"} and result["rejected"]["filtered_out"] > 0
    assert main(["evaluate", str(out), str(ticks), "--streams", "SYN.Z"]) == 2
    assert "streams [\"SYN.Z\"] match none of the streams the files hold (SYN.A, SYN.B, SYN.C, SYN.D)" in \
        capsys.readouterr().err


def test_a_dbn_file_of_several_futures_reads_the_selected_ones(tmp_path: Path, capsys) -> None:
    dbn = pytest.importorskip("databento_dbn", reason="the dbn extra is not installed")
    from test_replay_dbn import MAR5, NS, drain, trade, write_dbn

    nq, zn, euro = 2001, 2002, 2003
    path = write_dbn(tmp_path / "glbx.dbn", dbn.Schema.MBO, [
        trade(nq, MAR5, 100_000), trade(zn, MAR5 + NS, 440), trade(euro, MAR5 + 2 * NS, 4),
        trade(nq, MAR5 + 3 * NS, 100_004), trade(zn, MAR5 + 4 * NS, 441),
    ], {symbol: [(date(2026, 3, 1), date(2026, 4, 1), i)] for symbol, i in (("NQM6", nq), ("ZNM6", zn),
                                                                              ("6EM6", euro))})
    replay = FileReplay(path, streams=["NQ*"], columns={"zero_bid": "price"})  # a key DBN takes: read as before
    assert [(t.stream, t.price) for t in drain(replay)] == [("NQM6", 25000.0), ("NQM6", 25001.0)]
    assert replay.rejected == {"filtered_out": 3}
    assert replay.rejected.examples["filtered_out"].startswith(f"{path} record 2: filtered_out: stream \"ZNM6\"")
    assert replay.notes[-1] == ("streams selected [\"NQ*\"]: NQM6, 1 of the 3 the files hold; the others' ticks are "
                                "left out and counted as filtered_out")  # each instrument counted once
    with pytest.raises(NoStreamMatched, match=r"streams \[\x22ES\*\x22\] match none of the streams the files hold "
                                              r"\(6EM6, NQM6, ZNM6\)$"):
        FileReplay(path, streams=["ES*"])
    # an instrument id names no stream (its records are named by its symbol): refused, pointed to the symbol
    with pytest.raises(NoStreamMatched, match=r"streams \[.2002.\] match none .*; 2002 is the instrument id of "
                                              r"ZNM6 \(a DBN file's streams are named by symbol: select that\)"):
        FileReplay(path, streams=["2002"])
    # on the command line, as for any file
    assert main(["feed", "replay", str(path), "--streams", "ES*", "--endpoint", "tcp://127.0.0.1:9"]) == 2
    assert "match none of the streams the files hold" in capsys.readouterr().err


def option_chain_csv(path: Path) -> Path:
    """Quotes of SPY and three option series named in padded OCC symbology (`SPY   241220C00450000`)."""
    series = ("SPY   241220C00450000", "SPY   241220C00455000", "SPY   241220P00450000")
    lines = ["timestamp,symbol,bid,ask,bid_size,ask_size"]
    for i in range(120):
        symbol = ("SPY", *series)[i % 4]
        mid = 450 + i * 0.01 if symbol == "SPY" else 5 + (i % 7) * 0.05
        lines.append(f"2024-12-16 14:{30 + i // 60:02d}:{i % 60:02d}.000,{symbol},{mid - 0.01:.2f},{mid + 0.01:.2f},"
                     f"{1 + i % 3},{2 + i % 5}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_an_unpadded_occ_symbol_is_refused_with_the_padded_stream_it_names(engine_files: Path, tmp_path: Path,
                                                                           capsys) -> None:
    """`SPY241220C00450000`, the compact OSI form vendors write, matches no stream; the refusal says which one it
    means (spaces and case folded, then difflib), wherever streams are selected."""
    chain = option_chain_csv(tmp_path / "chain.csv")
    meant = "did you mean \"SPY   241220C00450000\"?"
    assert backtest(engine_files, [chain], tmp_path / "a.parquet", "--streams", "SPY241220C00450000") == 2
    err = capsys.readouterr().err
    assert "error: streams [\"SPY241220C00450000\"] match none of the streams the files hold (SPY, SPY   241220C0045" \
           f"0000, SPY   241220C00455000, SPY   241220P00450000); {meant}" in err, err
    with pytest.raises(NoStreamMatched, match=r'did you mean "SPY   241220C00450000" for "spy 241220c00450000", '
                                              r'"SPY   241220P00450000" or .* for "SPY241220P0045000"\?$'):
        # a name in lower case, and one a digit short (its closest match named first)
        FileReplay(chain, streams=["SPY", "spy 241220c00450000", "SPY241220P0045000"])
    with pytest.raises(NoStreamMatched, match=r"\)$"):  # nothing close: no guess
        FileReplay(chain, streams=["QQQ   250117C00500000"])
    assert main(["feed", "replay", str(chain), "--streams", "SPY241220C00450000", "--endpoint",
                 "tcp://127.0.0.1:9"]) == 2
    assert meant in capsys.readouterr().err
    for command in (["train", str(chain), "--out", str(tmp_path / "m"), *TINY], ["evaluate", "builtin", str(chain)]):
        assert main([*command, "--streams", "SPY241220C00450000"]) == 2
        assert meant in capsys.readouterr().err
    # a query's streams: the backtest's note on a query that published nothing says the close match too
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES + "  - {name: call, streams: [SPY241220C00450000], kind: surprise, trigger: batch}\n")
    assert main(["backtest", str(chain), "--queries", str(queries), "--out", str(tmp_path / "b.parquet"),
                 "--config", str(engine_files / "engine.yaml"), "--quiet"]) == 0
    assert "note: query \"call\" published no answer: its streams [\"SPY241220C00450000\"] match none of the streams " \
           f"replayed (SPY, SPY   241220C00450000, SPY   241220C00455000, SPY   241220P00450000); {meant}" in \
           capsys.readouterr().err
