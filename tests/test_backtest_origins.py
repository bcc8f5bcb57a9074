"""A backtest's answers name the file and row of the tick each was made after (`file`, `row`): across files merged by
time, several streams in a file, rows rejected in between, ticks sharing a timestamp, a resumed run and the
one-forward-per-batch path alike."""

from __future__ import annotations

import functools
import itertools
import json
import zipfile
from pathlib import Path

import polars as pl
import pytest

from conftest import engine_dir
from connectors.event_time_batches import MAX_BATCH_TICKS
from connectors.replay import FileReplay
from engine.service.run_record import without_file_times
from engine.service.backtest import BacktestInterrupted, run_backtest as library_run_backtest
from engine.service.cli import main
from engine.service.config import ServiceConfig

# in-process runs without the calibration plot, about half of a short run's time, where a test does not read it
# (plot=True)
run_backtest = functools.partial(library_run_backtest, plot=False)

QUERIES = """
queries:
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: {ticks: 3}}
  - {name: nll, streams: ["*"], kind: surprise, trigger: batch}
"""
ROWS = 400  # per file
T0_MS = 1_704_153_600_000  # 2024-01-02 00:00:00 UTC
BAD = {7: "", 50: "-1", 51: "", 203: "abc"}  # data row -> the price written there: rows the replay rejects


def _rows(file: int) -> list[dict]:
    """A file's rows: streams A and B interleaved, several rows to a millisecond (ties across streams, within a
    stream and across the two files), each row's price its own, so a price names its row."""
    rows = []
    for row in range(ROWS):
        ts = 1_700_000_000_000_000_000 + (row // 3) * 20_000_000 + file * 500_000 * (row % 2)
        price = str(BAD.get(row, f"{100 + file * 10 + row / 1000:.3f}")) if file == 0 else \
            f"{100 + file * 10 + row / 1000:.3f}"
        rows.append({"ts": ts, "stream": "AB"[row % 2] if row % 5 else "AB"[file], "price": price, "size": 1})
    return rows


# the tests share the module's checkpoint and files:
# `--dist loadgroup` keeps them on one worker, which builds it once
pytestmark = pytest.mark.xdist_group("test_backtest_origins")


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Path:
    root = engine_dir(tmp_path_factory.mktemp("origins"), QUERIES)
    pl.DataFrame(_rows(0)).write_csv(root / "day0.csv")  # rejected rows in it, as written
    two = pl.DataFrame(_rows(1)).with_columns(pl.col("price").cast(pl.Float64))
    two.write_parquet(root / "day1.parquet")
    return root


def _accepted(root: Path) -> dict[str, list[tuple[int, int, int, float]]]:
    """Each stream's accepted ticks in replay order, worked out here from the files: (file, row, ts, price), the
    rejected rows left out, ties of a time to the earlier file, then the earlier row."""
    frames = [pl.read_csv(root / "day0.csv", schema_overrides={"price": pl.String}),
              pl.read_parquet(root / "day1.parquet").with_columns(pl.col("price").cast(pl.String))]
    ticks = sorted((ts, file, row, stream, float(price)) for file, frame in enumerate(frames)
                   for row, (ts, stream, price) in enumerate(frame.select("ts", "stream", "price").iter_rows())
                   if price not in (None, "", "abc") and float(price) > 0)
    out: dict[str, list[tuple[int, int, int, float]]] = {}
    for ts, file, row, stream, price in ticks:
        out.setdefault(stream, []).append((file, row, ts, price))
    return out


def test_each_answer_names_the_file_and_row_of_its_tick(setup: Path, capsys) -> None:
    out = setup / "a.parquet"
    code = main(["backtest", "--no-plot", str(setup / "day0.csv"), str(setup / "day1.parquet"), "--queries",
                 str(setup / "q.yaml"), "--out", str(out), "--config", str(setup / "engine.yaml"), "--batch-ms", "10",
                 "--quiet"])
    assert code == 0, capsys.readouterr().err
    table = pl.read_parquet(out)
    assert table.columns[5:8] == ["data_ts", "file", "row"]
    assert table["file"].null_count() == table["row"].null_count() == 0
    # file: an index into the run's record (the Parquet metadata's and the manifest's `files`)
    files = [Path(f["path"]) for f in json.loads(pl.read_parquet_metadata(out)["flashtick"])["files"]]
    assert files == [(setup / "day0.csv").resolve(), (setup / "day1.parquet").resolve()]
    manifest = json.loads(out.with_suffix(".manifest.json").read_text())
    assert [Path(f["path"]) for f in manifest["run"]["files"]] == files
    sources = [pl.read_csv(files[0], schema_overrides={"price": pl.String}), pl.read_parquet(files[1])]
    accepted = _accepted(setup)
    assert {file for file, _ in table.select("file", "row").iter_rows()} == {0, 1}
    for stream, ticks, data_ts, file, row in table.select("stream", "ticks", "data_ts", "file", "row").iter_rows():
        source = sources[file].row(row, named=True)  # the row as a user reads it: a CSV's data row after the header
        want_file, want_row, ts, price = accepted[stream][ticks - 1]
        assert (file, row) == (want_file, want_row)
        assert source["ts"] == data_ts == ts and source["stream"] == stream and float(source["price"]) == price
    # data_ts alone is ambiguous (other rows of the stream share it, in either file): the row is not
    same_time = [sum(tick[2] == data_ts for tick in accepted[stream])
                 for stream, data_ts in table.select("stream", "data_ts").iter_rows()]
    assert max(same_time) > 1
    # the rejected rows are still counted in the row numbers: the CSV's rows after them are named as written
    assert table.filter(pl.col("file") == 0, pl.col("row") > max(BAD)).height > 0


def test_an_archives_members_are_named_so_that_a_row_joins_back(setup: Path, capsys) -> None:
    # a zip's members share its path in `files`: each entry's `member` says which one a `file` index reads
    archive = setup / "two.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("jan/day0.csv", (setup / "day0.csv").read_bytes())
        z.writestr("feb.csv", pl.DataFrame(_rows(1)).write_csv())
    out = setup / "zipped.parquet"
    code = main(["backtest", "--no-plot", str(archive), "--queries", str(setup / "q.yaml"), "--out", str(out),
                 "--config", str(setup / "engine.yaml"), "--batch-ms", "10", "--quiet"])
    assert code == 0, capsys.readouterr().err
    files = json.loads(pl.read_parquet_metadata(out)["flashtick"])["files"]
    assert [(Path(f["path"]), f["member"]) for f in files] == [(archive.resolve(), "jan/day0.csv"),
                                                               (archive.resolve(), "feb.csv")]
    manifest = json.loads(out.with_suffix(".manifest.json").read_text())["run"]
    assert without_file_times(manifest)["files"] == files  # (the manifest keeps each input's mtime too)
    with zipfile.ZipFile(files[0]["path"]) as z:  # the docs' recipe: the entry's path, then its member
        sources = [pl.read_csv(z.read(f["member"]), schema_overrides={"price": pl.String}) for f in files]
    table = pl.read_parquet(out)
    assert set(table["file"]) == {0, 1}
    for stream, data_ts, file, row in table.select("stream", "data_ts", "file", "row").iter_rows():
        source = sources[file].row(row, named=True)
        assert source["ts"] == data_ts and source["stream"] == stream
    plain = json.loads(pl.read_parquet_metadata(setup / "a.parquet")["flashtick"])["files"] \
        if (setup / "a.parquet").exists() else []
    assert all("member" not in f for f in plain)  # a file read as it is has no member


def test_resumed_and_unchunked_runs_name_the_same_rows(setup: Path) -> None:
    config = ServiceConfig.load(setup / "engine.yaml")
    files = [setup / "day0.csv", setup / "day1.parquet"]
    run_backtest(config, files, setup / "q.yaml", setup / "whole.parquet", batch_ms=10, progress=False)
    whole = pl.read_parquet(setup / "whole.parquet")
    polls = itertools.count()
    with pytest.raises(BacktestInterrupted):
        run_backtest(config, files, setup / "q.yaml", setup / "resumed.parquet", batch_ms=10, progress=False,
                     checkpoint_s=1e-6, stop=lambda: next(polls) >= 60)
    run_backtest(config, files, setup / "q.yaml", setup / "resumed.parquet", batch_ms=10, progress=False,
                 resume=True)
    keys = ["query", "stream", "seq", "ticks", "data_ts", "file", "row"]
    assert pl.read_parquet(setup / "resumed.parquet").select(keys).equals(whole.select(keys))
    run_backtest(config, files, setup / "q.yaml", setup / "unchunked.parquet", batch_ms=10, progress=False,
                 chunked=False)
    assert pl.read_parquet(setup / "unchunked.parquet").select(keys).equals(whole.select(keys))
    # (its numbers may differ at float rounding: its record says which path made them, review407 #7)
    records = [json.loads(pl.read_parquet_metadata(setup / f"{name}.parquet")["flashtick"])
               for name in ("unchunked", "whole")]
    assert records[0]["chunked"] is False and "chunked" not in records[1]


def _drained(replay: FileReplay) -> list[tuple[str, float, int, int]]:
    """(stream, price, file, row) of every tick, with the origins each batch gave."""
    out = []
    while not replay.done:
        ticks = replay.next_batch(3)
        assert len(replay.origins) == len(ticks)
        out += [(tick.stream, tick.price, file, row) for tick, (file, row) in zip(ticks, replay.origins)]
    return out


def test_a_json_lines_message_of_several_ticks_names_its_line(tmp_path: Path) -> None:
    """OKX trades: one message a line, several trades in its `data`: each tick names its message's line (0-based),
    not its place among the ticks; the lines of other messages (an ack, a malformed line) still count."""
    def okx(inst: str, *trades: tuple[int, float]) -> str:
        return json.dumps({"arg": {"channel": "trades", "instId": inst}, "data": [
            {"instId": inst, "tradeId": str(i), "px": str(px), "sz": "0.1", "side": "buy", "ts": str(T0_MS + i)}
            for i, px in trades]})

    lines = [json.dumps({"event": "subscribe", "arg": {"channel": "trades", "instId": "BTC-USDT"}}),
             okx("BTC-USDT", (0, 100.0), (1, 101.0)), "pong", okx("ETH-USDT", (2, 50.0)),
             okx("BTC-USDT", (3, 102.0), (4, 103.0), (5, 104.0))]
    path = tmp_path / "okx.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with FileReplay(path) as replay:
        got = _drained(replay)
    assert got == [("BTC-USDT", 100.0, 0, 1), ("BTC-USDT", 101.0, 0, 1), ("ETH-USDT", 50.0, 0, 3),
                   ("BTC-USDT", 102.0, 0, 4), ("BTC-USDT", 103.0, 0, 4), ("BTC-USDT", 104.0, 0, 4)]


def test_ticks_a_replay_leaves_out_keep_the_others_rows(setup: Path) -> None:
    """With leave_out (a feed's ticks the engine already holds), the ticks are taken one by one: each released
    one still names its own row."""
    with FileReplay([setup / "day0.csv", setup / "day1.parquet"]) as replay:
        every = _drained(replay)
    with FileReplay([setup / "day0.csv", setup / "day1.parquet"]) as replay:
        replay.leave_out = lambda tick: tick.stream == "A"
        some = _drained(replay)
    assert some == [tick for tick in every if tick[0] == "B"] and len(some) > 100


def test_a_burst_cut_into_groups_names_the_rows_of_each_group(setup: Path) -> None:
    """A batch of more than MAX_BATCH_TICKS ticks, two streams in one file, is answered at each group's cut: each
    answer there names its stream's last row before the cut."""
    t0 = 1_700_000_000_000_000_000
    rows = [{"ts": t0 + i * 1_000, "stream": "AB"[i % 3 == 0], "price": 100 + i / 10_000, "size": 1.0}
            for i in range(MAX_BATCH_TICKS + 300)]  # one 100 ms batch: 8.5 ms of event time
    rows += [{"ts": t0 + 10**9 + i * 10**8, "stream": "AB"[i % 2], "price": 101.0 + i / 100, "size": 1.0}
             for i in range(6)]
    pl.DataFrame(rows).write_parquet(setup / "burst.parquet")
    out = setup / "burst_answers.parquet"
    run_backtest(ServiceConfig.load(setup / "engine.yaml"), [setup / "burst.parquet"], setup / "q.yaml", out,
                 progress=False)
    table = pl.read_parquet(out)
    own = {stream: [row for row, r in enumerate(rows) if r["stream"] == stream] for stream in "AB"}
    for stream, ticks, data_ts, file, row in table.select("stream", "ticks", "data_ts", "file", "row").iter_rows():
        assert (file, row) == (0, own[stream][ticks - 1]) and rows[row]["ts"] == data_ts
    # answered inside the burst, at its first group's cut (its MAX_BATCH_TICKS-th tick), not only at its end
    cut = [r for r in table.filter(pl.col("query") == "nll").iter_rows(named=True) if r["row"] < MAX_BATCH_TICKS]
    assert {r["row"] for r in cut} >= {max(row for row in own[s] if row < MAX_BATCH_TICKS) for s in "AB"}


def test_a_checkpoint_of_an_earlier_flashtick_without_the_columns_is_refused_in_words(setup: Path) -> None:
    """A run stopped by a flashtick before `file` and `row` (its parts lack them) was resumed through the whole
    replay, then failed in polars' words joining the parts; it is refused at once, saying what to do."""
    config = ServiceConfig.load(setup / "engine.yaml")
    files, out = [setup / "day0.csv"], setup / "earlier.parquet"
    polls = itertools.count()
    with pytest.raises(BacktestInterrupted):
        run_backtest(config, files, setup / "q.yaml", out, batch_ms=10, progress=False, checkpoint_s=1e-6,
                     stop=lambda: next(polls) >= 20)
    for part in sorted((setup / "earlier.parquet.parts").glob("part-*.parquet")):  # as the earlier version wrote
        pl.read_parquet(part).drop("file", "row").write_parquet(part)
    with pytest.raises(ValueError, match=r"earlier\.parquet\.parts was checkpointed by an earlier flashtick, whose "
                                         r"answers have no file or row column, .* run the command again to start"):
        run_backtest(config, files, setup / "q.yaml", out, batch_ms=10, progress=False, resume=True)


def test_a_dbn_tick_names_the_record_that_ended_its_book_event(tmp_path: Path) -> None:
    """Databento MBO: a record without F_LAST is part of an event whose top of book is reported at its last one:
    the quote names that record (0-based, the metadata left out), a trade its own."""
    dbn = pytest.importorskip("databento_dbn", reason="the dbn extra (pip install 'flashtick[dbn]') is not installed")
    t0, px = 1_772_721_000 * 10**9, 10**9 // 4  # 2026-03-05 14:30 UTC; a quarter point in DBN's fixed point

    def mbo(order: int, action: object, side: object, quarters: int, second: int, flags: int = dbn.F_LAST) -> object:
        return dbn.MBOMsg(publisher_id=1, instrument_id=1001, ts_event=t0 + second * 10**9, order_id=order,
                          price=quarters * px, size=2, action=action, side=side, ts_recv=t0 + second * 10**9,
                          flags=flags)

    add, bid, ask = dbn.Action.ADD, dbn.Side.BID, dbn.Side.ASK
    records = [mbo(1, add, bid, 27200, 0), mbo(2, add, ask, 27204, 1, flags=0), mbo(3, add, ask, 27203, 1),
               mbo(0, dbn.Action.TRADE, bid, 27203, 2), mbo(4, add, bid, 27201, 3)]
    metadata = dbn.Metadata(dataset="GLBX.MDP3", start=t0, end=t0 + 4 * 10**9, stype_in=dbn.SType.RAW_SYMBOL,
                            stype_out=dbn.SType.INSTRUMENT_ID, schema=dbn.Schema.MBO, symbols=[], mappings=[])
    path = tmp_path / "es.dbn"
    path.write_bytes(metadata.encode() + b"".join(bytes(r) for r in records))
    with FileReplay(path) as replay:
        got = _drained(replay)
    assert got == [("1001", None, 0, 2), ("1001", 6800.75, 0, 3), ("1001", None, 0, 4)]
