"""Rows of equal times ordered by a vendor's sequence numbers (a map's `sequence`, --sequence): an option's quotes
stamped to 50 ms by three venues, the file written venue by venue (a per-venue concatenation, as the review's
make_seq.py) or in time order with its ties reversed, in CSV and Parquet, whole or split across files of the one
stream; each replays in sequence order. A row without a sequence number is rejected by name; backtest, feed
replay, train and evaluate read the files so alike."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from engine.service.cli import build_parser, main
from engine.service.cli_reading import column_map_of
from engine.service.cmd_feed import _replay_source
from engine.service.stream_reading import read_streams
from conftest import drain

T0 = 1734359400_000_000_000
STREAM = "SPY 241220C00450000"
STAMP_NS = 50_000_000  # the vendor's clock: many quotes share a 50 ms stamp


def tape() -> pl.DataFrame:
    """30 quotes in exchange order (sequence 1001..1030), ten stamps of three each, a venue per quote in turn;
    the bid grows with the sequence, so the bids read back tell the order."""
    seq = list(range(1001, 1031))
    return pl.DataFrame({
        "ts": [T0 + (i // 3) * STAMP_NS for i in range(30)], "symbol": [STREAM] * 30,
        "bid": [1.0 + i / 100 for i in range(30)], "ask": [2.0 + i / 100 for i in range(30)],
        "exchange": [["A", "C", "B"][i % 3] for i in range(30)], "seq": seq})


IN_SEQUENCE = tape()["bid"].to_list()
BY_VENUE = tape().sort("exchange", "seq")  # a per-venue concatenation: neither in time nor in sequence order
TIES_REVERSED = tape().sort("ts", "seq", descending=[False, True])  # in time order, each time's rows backwards
SEQUENCE = map_from_options(sequence="seq", detect=True)  # --sequence seq


def written(frame: pl.DataFrame, path: Path) -> Path:
    frame.write_csv(path) if path.suffix == ".csv" else frame.write_parquet(path)
    return path


def bids(replay: FileReplay) -> list[float]:
    ticks = drain(replay)
    assert {t.stream for t in ticks} == {STREAM}
    return [t.bid for t in ticks]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_rows_of_equal_times_replay_in_sequence_order_whatever_order_the_file_holds(tmp_path: Path,
                                                                                    suffix: str) -> None:
    by_venue = written(BY_VENUE, tmp_path / f"v{suffix}")
    reversed_ties = written(TIES_REVERSED, tmp_path / f"r{suffix}")
    for path in (by_venue, reversed_ties):
        assert bids(FileReplay(path)) != IN_SEQUENCE  # without the map: ties in file order (what was wrong)
        replay = FileReplay(path, columns=SEQUENCE)
        assert bids(replay) == IN_SEQUENCE
        assert dict(replay.rejected) == {} and replay.sorted_files == [path]
    notes = " ".join(FileReplay(by_venue, columns=SEQUENCE).notes)
    assert "sequence=seq" in notes and 'rows of equal times in sequence order (column "seq")' in notes
    assert ("20 row(s) of a lower sequence number (column \"seq\") than their stream's row before them at the same "
            "time") in " ".join(FileReplay(reversed_ties, columns=SEQUENCE).notes)
    snapshot = FileReplay(by_venue, columns=SEQUENCE).snapshot()  # another order is another replay: not resumed
    with pytest.raises(ValueError, match="fingerprint"):
        FileReplay(by_venue).restore(snapshot)
    full = {"ts": "ts", "stream_col": "symbol", "bid": "bid", "ask": "ask", "sequence": "seq"}  # a whole map's key
    assert bids(FileReplay(by_venue, columns=full)) == IN_SEQUENCE
    in_order = written(tape(), tmp_path / f"s{suffix}")
    replay = FileReplay(in_order, columns=SEQUENCE)  # already in sequence order: read as it is, nothing said
    assert bids(replay) == IN_SEQUENCE and replay.sorted_files == []
    assert not any("sequence order" in note for note in replay.notes)


def test_several_files_of_one_stream_merge_their_ties_by_sequence(tmp_path: Path) -> None:
    files = [written(BY_VENUE.filter(pl.col("exchange") == venue), tmp_path / name)
             for venue, name in (("B", "b.csv"), ("A", "a.parquet"), ("C", "c.csv"))]
    assert bids(FileReplay(files)) != IN_SEQUENCE  # ties in the order the files were given
    for order in (files, files[::-1]):
        assert bids(FileReplay(order, columns=SEQUENCE, chunk_rows=4)) == IN_SEQUENCE
    # a day's files written out of order inside: sorted each, merged by sequence
    halves = [written(TIES_REVERSED.filter(pl.col("seq") % 2 == parity), tmp_path / f"h{parity}.csv")
              for parity in (0, 1)]
    assert bids(FileReplay(halves, columns=SEQUENCE)) == IN_SEQUENCE
    # a file of the stream read without sequence numbers: its ticks of a time come first, in file order
    plain = tmp_path / "plain.csv"
    pl.DataFrame({"ts": [T0 + STAMP_NS], "symbol": [STREAM], "bid": [0.5], "ask": [3.0]}).write_csv(plain)
    own = {"ts": "ts", "stream_col": "symbol", "bid": "bid", "ask": "ask"}  # its own map, no sequence
    read = bids(FileReplay([*files, (plain, own)], columns=SEQUENCE))
    assert read == IN_SEQUENCE[:3] + [0.5] + IN_SEQUENCE[3:]


def test_a_row_without_a_sequence_number_is_rejected_by_its_line(tmp_path: Path) -> None:
    frame = BY_VENUE.with_columns(pl.col("seq").cast(pl.String))
    frame = frame.with_columns(pl.when(pl.col("bid") == 1.04).then(pl.lit("")).when(pl.col("bid") == 1.10)
                               .then(pl.lit("x7")).otherwise(pl.col("seq")).alias("seq"))
    csv = written(frame, tmp_path / "gaps.csv")
    replay = FileReplay(csv, columns=SEQUENCE)
    assert bids(replay) == [b for b in IN_SEQUENCE if b not in (1.04, 1.10)]
    assert dict(replay.rejected) == {"missing_field": 2}
    line = frame["bid"].to_list().index(1.04) + 2  # after the header
    assert f'gaps.csv line {line}: missing_field: sequence (column "seq") is empty or not a whole number' in \
        replay.rejected.examples["missing_field"]
    floats = BY_VENUE.with_columns(pl.when(pl.col("bid") == 1.04).then(1003.5).otherwise(pl.col("seq")).alias("seq"))
    replay = FileReplay(written(floats, tmp_path / "floats.parquet"), columns=SEQUENCE)  # 1001.0: a whole number
    assert bids(replay) == [b for b in IN_SEQUENCE if b != 1.04] and dict(replay.rejected) == {"missing_field": 1}
    with pytest.raises(ValueError, match=r'the column map needs "sequence", which the file lacks'):
        FileReplay(csv, columns=map_from_options(sequence="sequence", detect=True))


def test_a_csv_s_sequence_numbers_written_as_floats_read_as_the_whole_numbers_they_hold(tmp_path: Path) -> None:
    # pandas writes an int column with a gap as `1001.0`: every row was rejected, where Parquet's floats read
    as_floats = BY_VENUE.with_columns(pl.col("seq").cast(pl.Float64))
    csv = written(as_floats, tmp_path / "floats.csv")
    assert "1001.0" in csv.read_text()
    replay = FileReplay(csv, columns=SEQUENCE)
    assert bids(replay) == IN_SEQUENCE and dict(replay.rejected) == {}
    spelled = BY_VENUE.with_columns(pl.format("{}.00", pl.col("seq")).alias("seq"))  # `1001.00`
    spelled = spelled.with_columns(pl.when(pl.col("bid") == 1.0).then(pl.lit(" 1.001e3 ")).when(pl.col("bid") == 1.04)
                                   .then(pl.lit("1005.5")).otherwise(pl.col("seq")).alias("seq"))
    replay = FileReplay(written(spelled, tmp_path / "spelled.csv"), columns=SEQUENCE)
    assert bids(replay) == [b for b in IN_SEQUENCE if b != 1.04]  # 1005.5 is no whole number: rejected alone
    assert dict(replay.rejected) == {"missing_field": 1}


def test_backtest_feed_replay_train_and_evaluate_read_ties_in_sequence_order(tmp_path: Path, capsys) -> None:
    scrambled, in_order = written(BY_VENUE, tmp_path / "venues.csv"), written(tape(), tmp_path / "ordered.csv")
    parser = build_parser()
    feed = parser.parse_args(["feed", "replay", str(scrambled), "--sequence", "seq"])
    assert bids(_replay_source(feed)) == IN_SEQUENCE
    for command in (["train", str(scrambled), "--out", str(tmp_path / "m")], ["evaluate", "builtin", str(scrambled)]):
        args = parser.parse_args([*command, "--sequence", "seq"])
        by_stream, rejected = read_streams([str(scrambled)], column_map_of(args))
        assert [t.bid for t in by_stream[STREAM]] == IN_SEQUENCE and rejected == {}
    inline = map_from_options(columns="ts=ts,stream=symbol,bid=bid,ask=ask,sequence=seq", detect=True)
    assert bids(FileReplay(scrambled, columns=inline)) == IN_SEQUENCE
    answers = {}
    for name, path, options in (("seq", scrambled, ["--sequence", "seq"]), ("ordered", in_order, []),
                                ("file order", scrambled, [])):
        out = tmp_path / f"{name}.parquet"
        assert main(["backtest", str(path), "--out", str(out), "--quiet", "--threads", "1", *options]) == 0
        assert "replayed 30 ticks" in capsys.readouterr().out
        answers[name] = pl.read_parquet(out).drop("file", "row")  # where each tick sits differs by design
    assert answers["seq"].height > 0 and answers["seq"].equals(answers["ordered"])
    assert not answers["file order"].equals(answers["ordered"])  # the answers the ties in file order gave


def test_a_checkpoint_records_the_sequence_column_it_was_trained_with_and_evaluate_reads_with_it(
        tmp_path: Path, capsys) -> None:
    """`train venues.csv --sequence seq` then `evaluate m venues.csv` read the ties in file order (venue by
    venue), not in the order the model learnt, and `backtest --model` said nothing: --sequence was not among the
    recorded reading options. It is now: evaluate reads with it, saying so (--no-sequence reads file order, said
    as a mismatch), and so does a backtest of the same file (one with --no-sequence is said as a mismatch)."""
    import json

    from test_stream_selection import TINY

    n = 810  # (1,500 before): above the 757 ticks of one stream that train's default split needs
    walk = [100 + 2 * math.sin(i / 40) + (i % 3) * 0.01 for i in range(n)]  # ties differ in price: order shows
    frame = pl.DataFrame({"ts": [T0 + (i // 3) * STAMP_NS for i in range(n)], "symbol": [STREAM] * n,
                          "price": walk, "size": [1.0 + i % 5 for i in range(n)],
                          "exchange": [["A", "C", "B"][i % 3] for i in range(n)], "seq": list(range(1, n + 1))})
    path = written(frame.sort("exchange", "seq"), tmp_path / "venues.csv")  # ties out of sequence order
    out = tmp_path / "m"
    assert main(["train", str(path), "--out", str(out), *TINY, "--steps", "1", "--batch", "1", "--max-points",
                 "64", "--resamples", "10", "--quiet", "--json", "--sequence", "seq"]) == 0
    assert json.loads(capsys.readouterr().out)["reading"] == {"sequence": "seq"}
    assert json.loads((out / "evaluation.json").read_text())["trained_on"]["reading"] == {"sequence": "seq"}
    evaluate = ["evaluate", str(out), str(path), "--max-points", "64", "--resamples", "10", "--threads", "1",
                "--json"]
    scores = {}
    for name, options in (("as trained", []), ("given", ["--sequence", "seq"]), ("file order", ["--no-sequence"])):
        assert main([*evaluate, *options]) == 0
        out_json, err = capsys.readouterr()
        scores[name] = {key: value for key, value in json.loads(out_json).items() if key not in ("seconds", "argv")}
        taken = "note: reading the files with --sequence seq, as this model was trained" in err
        mismatch = ("note: this model was trained on files read with --sequence seq; these files are read with no "
                    "--sequence: the order of ticks of equal times read otherwise") in err
        assert (taken, mismatch) == (name == "as trained", name == "file order"), err
    assert scores["as trained"] == scores["given"] and scores["file order"] != scores["given"]
    backtest = ["backtest", str(path), "--model", str(out), "--max-ticks", "20", "--quiet", "--threads", "1"]
    assert main([*backtest, "--out", str(tmp_path / "a.parquet"), "--no-sequence"]) == 0
    assert ("flashtick backtest: note: this model was trained on files read with --sequence seq; these files are "
            "read with no --sequence: the order of ticks of equal times") in capsys.readouterr().err
    assert main([*backtest, "--out", str(tmp_path / "b.parquet"), "--sequence", "seq"]) == 0
    assert "trained on files read with" not in capsys.readouterr().err
    assert main([*backtest, "--out", str(tmp_path / "c.parquet")]) == 0  # the training file: read as trained
    err = capsys.readouterr().err
    assert "reading the files with --sequence seq, as this model was trained" in err
    assert "trained on files read with" not in err


def test_no_sequence_drops_the_sequence_a_config_s_map_names(tmp_path: Path) -> None:
    """--no-sequence reads ties in file order even where replay.columns names a sequence column."""
    from engine.service.config import ServiceConfig

    config = ServiceConfig.from_dict({"replay": {"columns": {"ts": "ts", "price": "bid", "sequence": "seq"}}})
    backtest = ["backtest", str(tmp_path / "venues.csv"), "--out", str(tmp_path / "a.parquet")]
    parser = build_parser()
    assert column_map_of(parser.parse_args(backtest), config)["sequence"] == "seq"
    assert "sequence" not in column_map_of(parser.parse_args([*backtest, "--no-sequence"]), config)
    assert column_map_of(parser.parse_args([*backtest, "--no-sequence"])) is None  # no map at all: each file detected


def rpt_seq_tape() -> pl.DataFrame:
    """Two CME contracts' trades, three of each at every 50 ms stamp, interleaved, each contract numbered by its own
    RptSeq: ESH5's numbers are far below ESZ4's, so across the two they go down at every stamp."""
    rows = []
    for i in range(30):
        for symbol, first_seq, level in (("ESZ4", 90001, 5760.0), ("ESH5", 1001, 5818.0)):
            rows.append({"ts": T0 + (i // 3) * STAMP_NS, "symbol": symbol, "price": level + i * 0.25, "size": 1,
                         "seq": first_seq + i})
    return pl.DataFrame(rows)


def prices_by_stream(replay: FileReplay) -> dict[str, list[float]]:
    by_stream: dict[str, list[float]] = {}
    for tick in drain(replay):
        by_stream.setdefault(tick.stream, []).append(tick.price)
    return by_stream


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_sequence_numbers_are_compared_within_a_stream_only(tmp_path: Path, suffix: str) -> None:
    """Review 104 (finding 6): CME's RptSeq counts per instrument. A file in order (each contract's numbers rising)
    was called "rows out of order" because ESH5's numbers are below ESZ4's at the same stamp, and its rows of a time
    were reordered by those unrelated numbers. Numbers now order a stream's own rows: the file reads as it is."""
    tape = rpt_seq_tape()
    in_order = {s: tape.filter(pl.col("symbol") == s)["price"].to_list() for s in ("ESZ4", "ESH5")}
    path = written(tape, tmp_path / f"es{suffix}")
    replay = FileReplay(path, columns=SEQUENCE)
    assert prices_by_stream(replay) == in_order
    assert replay.sorted_files == [] and not any("sequence number" in note for note in replay.notes), replay.notes
    assert [t.stream for t in drain(FileReplay(path, columns=SEQUENCE))] == tape["symbol"].to_list()  # file order
    # one contract's rows of each stamp reversed: only those are counted and put back in order
    reversed_ties = tape.sort("ts", "symbol", "seq", descending=[False, False, True])
    reversed_path = written(reversed_ties, tmp_path / f"r{suffix}")
    replay = FileReplay(reversed_path, columns=SEQUENCE)
    assert prices_by_stream(replay) == in_order and replay.sorted_files == [reversed_path]
    assert ("40 row(s) of a lower sequence number (column \"seq\") than their stream's row before them at the same "
            "time; rows of equal times replayed by stream, each stream's in sequence order") in " ".join(replay.notes)


def test_files_of_two_contracts_merge_each_contract_s_ticks_by_its_own_numbers(tmp_path: Path) -> None:
    """Trades and quotes in two files, one RptSeq counter per contract shared by both files: each contract's ticks
    merge by its numbers (quote, trade, quote, ...), whatever the other contract's numbers are."""
    tape = rpt_seq_tape()
    trades = written(tape.filter(pl.col("seq") % 2 == 0), tmp_path / "trades.csv")
    quotes = tape.filter(pl.col("seq") % 2 == 1).select("ts", "symbol", bid="price", ask=pl.col("price") + 0.25,
                                                        seq="seq")
    quotes_path = written(quotes, tmp_path / "quotes.parquet")
    for files in ([trades, quotes_path], [quotes_path, trades]):
        replay = FileReplay(files, columns=SEQUENCE, chunk_rows=7)
        ticks = drain(replay)
        assert dict(replay.rejected) == {} and len(ticks) == tape.height
        for symbol in ("ESZ4", "ESH5"):
            own = [t.price if t.price is not None else t.bid for t in ticks if t.stream == symbol]
            assert own == tape.filter(pl.col("symbol") == symbol)["price"].to_list()
