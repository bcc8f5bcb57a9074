"""`run_backtest` as a library call from a notebook (review354): a service's config never opens its data directory,
a DataFrame in memory is backtested as its file would be, queries come as a path, YAML text or a parsed document,
a Ctrl-C stops at a batch boundary with BacktestInterrupted saying what was kept, the process's own settings
(torch threads, environment, matplotlib backend, threads) are as they were after the call, and a resume of a
finished run returns its report. Real files, real frames, the tiny tick model, real signals."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import polars as pl
import pytest
import torch

from conftest import engine_dir
from connectors.replay import FileReplay
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.backtest import BacktestInterrupted, NamedFrame, run_backtest as library_run_backtest
from engine.service.config import ServiceConfig
from engine.service.data_dir_open import take_lock
from engine.service.replay_progress import NoBar, progress_bar
from queries.spec_errors import QuerySpecError
from test_backtest_resume import assert_same_answers  # a resumed run's answers: equal to fp32 tolerance

# in-process runs without the calibration plot, about half of a short run's time, where a test does not read it
# (plot=True)
run_backtest = functools.partial(library_run_backtest, plot=False)

QUERIES = """
queries:
  - {name: dir5, streams: ["*"], question: direction_5, kind: choice, trigger: {ticks: 3}}
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
"""
PARSED = {"queries": [{"name": "dir5", "streams": ["*"], "question": "direction_5", "kind": "choice",
                       "trigger": {"ticks": 3}},
                      {"name": "dir20", "streams": ["*"], "question": "direction_20", "kind": "choice",
                       "trigger": "batch"}]}
ROOT = Path(__file__).resolve().parents[1]
# enough for dozens of batch boundaries (a Ctrl-C, a stop at the 20th) and answers scored on every stream
TICKS = 600

# the tests share the module's backtest (setup): `--dist loadgroup` keeps them on one worker, which runs it once
pytestmark = pytest.mark.xdist_group("test_backtest_python")


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Path:
    root = engine_dir(tmp_path_factory.mktemp("python_api"), QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=11)).next_batch(TICKS)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "ticks.parquet")
    report = run_backtest(ServiceConfig.load(root / "engine.yaml"), root / "ticks.parquet", root / "q.yaml",
                          root / "whole.parquet", progress=False)
    assert report.answers > 0
    return root


def _config(root: Path) -> ServiceConfig:
    return ServiceConfig.load(root / "engine.yaml")


def _answers(path: Path) -> pl.DataFrame:
    return pl.read_parquet(path)


def test_a_service_config_never_opens_its_data_directory(setup: Path, tmp_path: Path) -> None:
    """Review354 #1: a config whose log.dir a running `serve` holds runs as `flashtick backtest --config` does: the
    lock is not waited on, nothing is written there, and the same call again gives the same answers."""
    state = tmp_path / "state"
    state.mkdir()
    text = (setup / "engine.yaml").read_text() + f"log: {{dir: {state}, enabled: false}}\n"
    (tmp_path / "engine.yaml").write_text(text)
    config = ServiceConfig.load(tmp_path / "engine.yaml")
    assert config.log.dir == str(state) and config.in_process().log.dir is None
    held = take_lock(state / "lock")  # as the service holding that directory has it
    try:
        for run in ("a", "b"):
            report = run_backtest(config, setup / "ticks.parquet", setup / "q.yaml", tmp_path / f"{run}.parquet",
                                  progress=False)
            assert report.ticks == TICKS
    finally:
        held.handle.close()
    assert sorted(p.name for p in state.iterdir()) == ["lock"]
    whole = _answers(setup / "whole.parquet")
    assert _answers(tmp_path / "a.parquet").equals(whole) and _answers(tmp_path / "b.parquet").equals(whole)


def test_a_dataframe_is_backtested_as_its_file(setup: Path, tmp_path: Path) -> None:
    """Review354 #2: a polars DataFrame, a LazyFrame, a NamedFrame: read through a Parquet copy, detected and named
    as a file is; the same answers as the file's; anything else a TypeError naming what is accepted."""
    frame = pl.read_parquet(setup / "ticks.parquet")
    report = run_backtest(_config(setup), frame, setup / "q.yaml", tmp_path / "frame.parquet", progress=False)
    assert report.ticks == TICKS and _answers(tmp_path / "frame.parquet").equals(_answers(setup / "whole.parquet"))
    one = frame.filter(pl.col("stream") == frame["stream"][0]).drop("stream")
    lazy = run_backtest(_config(setup), one.lazy(), setup / "q.yaml", tmp_path / "lazy.parquet", progress=False)
    named = run_backtest(_config(setup), NamedFrame("ES", one), setup / "q.yaml", tmp_path / "n.parquet",
                         progress=False)
    assert set(lazy.stream_ticks) == {"frame"} and set(named.stream_ticks) == {"ES"}
    assert lazy.ticks == named.ticks == len(one)
    replay = FileReplay.from_frame(one, name="NQ")
    assert {t.stream for t in replay.next_batch(10)} == {"NQ"}
    replay.close()
    for wrong in (42, [frame, 3.5], b"ticks.parquet"):
        with pytest.raises(TypeError, match="a polars DataFrame or LazyFrame, a pandas DataFrame"):
            run_backtest(_config(setup), wrong, setup / "q.yaml", tmp_path / "x.parquet", progress=False)
    assert not (tmp_path / "x.parquet").exists()


# a notebook's pandas frame of the module's ticks, read without pyarrow (no dependency of flashtick's): indexed by
# its zoned time, its stream categorical, its sizes nullable; then a bad price at a trade's position, a frame whose
# time went with its index, a column of Periods. Prints what each gave, as JSON.
PANDAS_WITHOUT_PYARROW = """
import json, sys
sys.modules["pyarrow"] = None  # as where it is not installed: its import fails
import pandas as pd, polars as pl
from connectors.replay import FileReplay

def drain(replay):
    ticks = []
    while not replay.done:
        ticks += replay.next_batch(1000)
    return ticks

root = sys.argv[1]
table = pl.read_parquet(f"{root}/ticks.parquet")
frame = pd.DataFrame(table.to_dict(as_series=False))
frame["ts"] = pd.to_datetime(frame["ts"], unit="ns", utc=True).dt.tz_convert("America/New_York")
frame = frame.set_index("ts").astype({"stream": "category", "size": "Float64"})
said = {"same": drain(FileReplay(frame)) == drain(FileReplay(f"{root}/ticks.parquet"))}
bad = frame.copy()
said["position"] = int((bad["kind"] == "trade").to_numpy().nonzero()[0][3])
bad.iloc[said["position"], bad.columns.get_loc("price")] = -1.0
replay = FileReplay(bad)
drain(replay)
said["examples"] = replay.rejected.examples
replay.close()
for wrong in (frame.reset_index(drop=True), frame.assign(month=pd.period_range("2024-01", periods=len(frame)))):
    try:
        FileReplay(wrong)
    except (TypeError, ValueError) as e:
        said.setdefault("refused", []).append(f"{type(e).__name__}: {e}")
said["pyarrow"] = sys.modules["pyarrow"] is not None
print(json.dumps(said))
"""


def test_a_pandas_column_of_fixed_offset_times_is_read_as_its_instants() -> None:
    """pandas parses ISO text with offsets into a fixed-offset zone ("UTC+01:00") polars has no name for: it was
    refused (the pyarrow route read it); its instants are read, on UTC's clock."""
    pd = pytest.importorskip("pandas", reason="pandas is not installed (the test extra installs it)")
    from connectors.frame_files import _polars

    times = ["2024-01-02T09:30:00+01:00", "2024-01-02T09:31:00.500+01:00"]
    frame = pd.DataFrame({"ts": pd.to_datetime(times, format="ISO8601"),
                          "price": [1.0, 2.0]})
    assert _polars(frame)["ts"].dt.epoch("ns").to_list() == [pd.Timestamp("2024-01-02T08:30:00Z").value,
                                                            pd.Timestamp("2024-01-02T08:31:00.500Z").value]


def test_a_pandas_frame_without_pyarrow_is_read_as_its_file(setup: Path) -> None:
    """review384 #1, #2, #8: without pyarrow a pandas frame was refused, with fixes that failed too; indexed by its
    time, it lost that column (`pl.from_pandas` drops the index) and was refused naming the temporary Parquet copy
    and CLI flags; its rejects were named by that copy, deleted, and a row one past the frame's position. Now it is
    converted column by column (text, categorical, nullable and zoned columns), its named or datetime index kept as
    a column (the file's ticks, exactly); a refusal names the frame, its index and `columns=`; a column of no one
    type names itself and its fix; a reject names the frame and the 0-based position `df.iloc` takes."""
    code = PANDAS_WITHOUT_PYARROW
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, str(setup)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said["same"] and not said["pyarrow"]
    assert said["examples"]["nonpositive_price"].startswith(f'frame "frame" position {said["position"]}: ')
    no_time, periods = said["refused"]
    assert no_time.startswith('NoTickLayout: cannot detect the column layout of frame "frame": columns found '
                              '["stream", "kind", "bid", '), no_time
    assert 'columns={"ts": "time", ' in no_time and "its index (RangeIndex, unnamed, of int64) is not read" in no_time
    assert "df.reset_index()" in no_time and "flashtick-frames" not in no_time
    assert periods.startswith("TypeError: column 'month' (period[") and "holds values of type Period" in periods and \
        "df['month'] = df['month'].astype(str)" in periods, periods


def test_a_dataframe_run_resumes_with_the_same_frame(setup: Path, tmp_path: Path) -> None:
    """The frame's copy is named by its bytes: an interrupted run of a frame resumes with the same frame (given
    again, as a re-run cell gives it), and ends with the uninterrupted run's answers (to fp32 tolerance, as every
    resume)."""
    frame = pl.read_parquet(setup / "ticks.parquet")
    out, polls = tmp_path / "cut.parquet", iter(range(10**9))
    with pytest.raises(BacktestInterrupted):
        run_backtest(_config(setup), frame, setup / "q.yaml", out, progress=False, stop=lambda: next(polls) >= 20)
    report = run_backtest(_config(setup), frame.clone(), setup / "q.yaml", out, progress=False, resume=True)
    assert report.resumed_at > 0
    assert_same_answers(_answers(out), _answers(setup / "whole.parquet"))


# the ticks a run of each form of the queries reads: every query answered and scored on every stream; what the form
# changes is what is asked, which the first ticks show as well as all of them (and a short run enough to see what a
# run leaves of the caller's process state)
FORM_TICKS = 120


@pytest.fixture(scope="module")
def file_asked(setup: Path) -> Path:
    """The answers to q.yaml, given as its path, of the first FORM_TICKS ticks (read only)."""
    out = setup / "file_asked.parquet"
    run_backtest(_config(setup), setup / "ticks.parquet", setup / "q.yaml", out, progress=False,
                 max_ticks=FORM_TICKS)
    return out


@pytest.mark.parametrize("form", ["path", "str path", "text", "one line", "dict", "list"])
def test_queries_as_a_path_text_or_parsed_document(setup: Path, file_asked: Path, tmp_path: Path, form: str) -> None:
    """Review354 #8: each form asks the same queries, so the answers are the file's (a run of q.yaml)."""
    given = {"path": setup / "q.yaml", "str path": str(setup / "q.yaml"), "text": QUERIES,
             "one line": json.dumps(PARSED), "dict": PARSED, "list": PARSED["queries"]}[form]
    out = tmp_path / "a.parquet"
    run_backtest(_config(setup), setup / "ticks.parquet", given, out, progress=False, max_ticks=FORM_TICKS)
    answers = _answers(out)
    assert set(answers["query"]) == {"dir5", "dir20"} and answers["correct"].drop_nulls().len() > 0
    assert set(answers.filter(pl.col("correct").is_not_null())["stream"]) == set(_answers(file_asked)["stream"])
    assert answers.equals(_answers(file_asked))


def test_queries_are_checked_alike_in_every_form(setup: Path, tmp_path: Path) -> None:
    """A bad query is refused by the registry's own checks, located in what was given; a type that is no queries
    document is a TypeError naming the forms accepted."""
    bad = {"queries": [{"name": "d7", "streams": ["*"], "question": "direction_7", "kind": "choice"}]}
    for given, source in ((bad, "<queries dict>"), (json.dumps(bad) + "\n", "<queries text>")):
        with pytest.raises(QuerySpecError, match="direction_7") as refused:
            run_backtest(_config(setup), setup / "ticks.parquet", given, tmp_path / "a.parquet", progress=False)
        assert source in str(refused.value)
    for wrong in (None, 3, {1, 2}):
        with pytest.raises(TypeError, match="queries file's path .* its YAML text, or the document parsed"):
            run_backtest(_config(setup), setup / "ticks.parquet", wrong, tmp_path / "a.parquet", progress=False)


def test_ctrl_c_stops_at_a_batch_boundary_and_says_what_was_kept(setup: Path, tmp_path: Path) -> None:
    """Review354 #7: a real SIGINT once the replay began (sent as it begins) ends the call with BacktestInterrupted,
    its fields saying what was kept and how to go on; Python's handler is back; resume=True finishes the run with
    the uninterrupted run's answers."""
    out, notes = tmp_path / "a.parquet", []
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a plain script and a notebook have it
    try:
        with pytest.raises(BacktestInterrupted) as stopped:
            run_backtest(_config(setup), setup / "ticks.parquet", setup / "q.yaml", out, progress=False,
                         checkpoint_s=0.01, note=notes.append,
                         replaying=lambda: os.kill(os.getpid(), signal.SIGINT))
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)
    e = stopped.value
    assert e.ticks is not None and 0 < e.ticks < TICKS and e.answers is not None and not e.scores_owed
    assert e.kept == out.with_name(out.name + ".parts") and e.kept.is_dir() and "resume=True" in e.resume
    assert "resume=True" in str(e) and any("Ctrl-C: stopping at the next batch boundary" in n for n in notes)
    report = run_backtest(_config(setup), setup / "ticks.parquet", setup / "q.yaml", out, progress=False, resume=True)
    assert report.resumed_at == e.ticks
    assert_same_answers(_answers(out), _answers(setup / "whole.parquet"))


def test_a_second_ctrl_c_aborts_where_the_run_is(setup: Path, tmp_path: Path) -> None:
    """The second SIGINT (sent as the first is noted) is a KeyboardInterrupt, as at the terminal; the handler is
    Python's again afterwards."""
    def again(line: str) -> None:
        if line.startswith("Ctrl-C"):
            os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_backtest(_config(setup), setup / "ticks.parquet", setup / "q.yaml", tmp_path / "a.parquet",
                         progress=False, note=again, replaying=lambda: os.kill(os.getpid(), signal.SIGINT))
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_the_callers_process_state_is_put_back(setup: Path, tmp_path: Path) -> None:
    """Review354 #3 and #6: the torch thread count and the oneDNN cache variables as they were; pyplot's backend
    and figures untouched (the plot is drawn on its own canvas); no tqdm monitor thread without a bar."""
    import matplotlib
    import matplotlib.pyplot as plt

    threads = torch.get_num_threads()
    text = (setup / "engine.yaml").read_text().replace("model: {", "model: {threads: 1, ") \
        if threads != 1 else (setup / "engine.yaml").read_text().replace("model: {", "model: {threads: 2, ")
    (tmp_path / "engine.yaml").write_text(text)
    config = ServiceConfig.load(tmp_path / "engine.yaml")
    assert config.model.threads not in (None, threads)
    backend = matplotlib.get_backend()
    figure = plt.figure()
    variables = {name: os.environ.get(name) for name in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")}
    monitors = {t for t in threading.enumerate() if t.name == "tqdm_monitor"}
    try:
        report = run_backtest(config, setup / "ticks.parquet", setup / "q.yaml", tmp_path / "a.parquet",
                              progress=False, max_ticks=FORM_TICKS, plot=True)
        assert torch.get_num_threads() == threads
        assert {name: os.environ.get(name) for name in variables} == variables
        assert matplotlib.get_backend() == backend and plt.get_fignums() == [figure.number]
        assert {t for t in threading.enumerate() if t.name == "tqdm_monitor"} <= monitors
        assert (tmp_path / "a.calibration.png").is_file() and report.ticks == FORM_TICKS
    finally:
        plt.close(figure)


def test_progress_is_automatic(setup: Path) -> None:
    """Review354 #10: None (the default) draws no bar where stderr is no terminal and this is no notebook (a pipe,
    pytest's capture); True always draws one."""
    replay = FileReplay(setup / "ticks.parquet")
    try:
        assert isinstance(progress_bar(None, replay, None), NoBar)
        assert isinstance(progress_bar(False, replay, None), NoBar)
        shown = progress_bar(True, replay, 100)
        assert not isinstance(shown, NoBar) and shown.total == 100
        shown.close()
    finally:
        replay.close()


def test_resume_of_a_finished_run_returns_its_report(setup: Path, tmp_path: Path) -> None:
    """Review354 #9: resume=True on a run that finished runs nothing and returns that run's report, read back."""
    out = tmp_path / "a.parquet"
    first = run_backtest(_config(setup), setup / "ticks.parquet", setup / "q.yaml", out, progress=False)
    again = run_backtest(_config(setup), setup / "ticks.parquet", setup / "q.yaml", out, progress=False, resume=True)
    assert first.already_complete is None and "already complete" in str(again.already_complete)
    assert (again.ticks, again.answers, again.rejected, again.out) == (first.ticks, first.answers, first.rejected, out)
    assert [s.to_json() for s in again.scores] == json.loads(json.dumps([s.to_json() for s in first.scores]))
    assert "dir5" in again.summary()


def test_errors_carry_their_structure(setup: Path, tmp_path: Path) -> None:
    """Review354 #13: a missing file's FileNotFoundError has its filename and errno; max_ticks <= 0 is a
    ValueError naming the argument."""
    missing = tmp_path / "none.parquet"
    with pytest.raises(FileNotFoundError) as absent:
        run_backtest(_config(setup), missing, setup / "q.yaml", tmp_path / "a.parquet", progress=False)
    assert absent.value.filename == str(missing) and absent.value.errno == 2
    assert str(absent.value).startswith("replay file not found:")
    for wrong in (0, -5, 2.5):
        with pytest.raises(ValueError, match="max_ticks"):
            run_backtest(_config(setup), setup / "ticks.parquet", setup / "q.yaml", tmp_path / "a.parquet",
                         max_ticks=wrong)


def test_an_out_the_run_could_only_destroy_or_fail_on_is_refused_before_any_work(setup: Path, tmp_path: Path) -> None:
    """review420 #1-#4: the CLI's output checks were the CLI's alone. From Python `out` given as the tick file
    replaced it with the answers' Parquet; `out="answers.csv"` wrote Parquet under a CSV name; an existing folder
    failed after the whole run, leaving OUT.tmp and OUT.parts/; checkpoint_s=nan turned checkpointing off."""
    from engine.service.output_paths import OutputOverInput, OutputPathUnusable

    ticks = tmp_path / "ticks.parquet"
    ticks.write_bytes((setup / "ticks.parquet").read_bytes())
    before = ticks.read_bytes()
    with pytest.raises(OutputOverInput, match=rf"^out {re.escape(str(ticks))} is the input {re.escape(str(ticks))}"):
        run_backtest(_config(setup), [(ticks, None)], setup / "q.yaml", ticks, progress=False)
    with pytest.raises(OutputOverInput, match="is the input"):  # the queries file too
        run_backtest(_config(setup), ticks, setup / "q.yaml", setup / "q.yaml", progress=False)
    assert ticks.read_bytes() == before
    with pytest.raises(ValueError, match=r"^out .*answers\.csv: not a Parquet file name"):
        run_backtest(_config(setup), ticks, setup / "q.yaml", tmp_path / "answers.csv", progress=False)
    with pytest.raises(OutputPathUnusable, match=r"^out "):
        run_backtest(_config(setup), ticks, setup / "q.yaml", tmp_path, progress=False)
    with pytest.raises(ValueError, match="checkpoint_s must be a number of seconds > 0, got NaN"):
        run_backtest(_config(setup), ticks, setup / "q.yaml", tmp_path / "a.parquet", checkpoint_s=float("nan"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ticks.parquet"]  # nothing written beside
    # queries given as one line of YAML text longer than a file name may be: text, no path to check (it raised
    # OSError "File name too long" from the check)
    one_line = "queries: [" + ", ".join(f"{{name: q{i}, streams: ['*'], question: direction_5, kind: choice, "
                                        f"trigger: batch}}" for i in range(6)) + "]"
    assert len(one_line) > 255 and "\n" not in one_line
    assert run_backtest(_config(setup), ticks, one_line, tmp_path / "a.parquet", max_ticks=30, progress=False,
                        plot=False).answers > 0


def test_the_configs_replay_section_reads_as_backtest_config_reads_it(setup: Path, tmp_path: Path) -> None:
    """review420 #9: run_backtest(ServiceConfig.load(...)) dropped the config's replay section without a word (its
    batch_ms, reading, streams): 159 answers where `backtest --config` gave 173. Now what an argument does not say,
    the section does; an argument given still wins."""
    import dataclasses

    base = _config(setup)
    stream = pl.read_parquet(setup / "ticks.parquet")["stream"][0]
    configured = dataclasses.replace(base, replay=dataclasses.replace(base.replay, batch_ms=37.0, streams=(stream,)))
    ticks, asked = setup / "ticks.parquet", setup / "q.yaml"
    by_config = run_backtest(configured, ticks, asked, tmp_path / "c.parquet", max_ticks=120, progress=False,
                             plot=False)
    explicit = run_backtest(base, ticks, asked, tmp_path / "e.parquet", max_ticks=120, progress=False, plot=False,
                            batch_ms=37.0, streams=[stream])
    assert by_config.answers == explicit.answers > 0
    assert _answers(tmp_path / "c.parquet").equals(_answers(tmp_path / "e.parquet"))
    assert set(_answers(tmp_path / "c.parquet")["stream"]) == {stream}
    run_backtest(configured, ticks, asked, tmp_path / "o.parquet", max_ticks=120, progress=False, plot=False,
                 batch_ms=100.0, streams=["*"])
    assert len(set(_answers(tmp_path / "o.parquet")["stream"])) > 1


def test_a_missing_queries_file_is_a_file_not_found_error_too(setup: Path, tmp_path: Path) -> None:
    """review420 #8: docs/replay.md's "a missing file is a FileNotFoundError with .filename and .errno" held for the
    tick files alone: a queries file's was a QuerySpecError only."""
    missing = tmp_path / "none.yaml"
    with pytest.raises(FileNotFoundError) as absent:
        run_backtest(_config(setup), setup / "ticks.parquet", missing, tmp_path / "a.parquet", progress=False)
    assert isinstance(absent.value, QuerySpecError) and absent.value.filename == str(missing)
    assert absent.value.errno == 2 and str(absent.value).startswith(f"{missing}: cannot read query file: ")
    import pickle  # (a process pool's worker raising it sends it back pickled)

    again = pickle.loads(pickle.dumps(absent.value))
    assert type(again) is type(absent.value) and str(again) == str(absent.value) and again.filename == str(missing)


def test_an_out_another_thread_of_this_process_writes_is_refused_without_a_kill(tmp_path: Path) -> None:
    """review420 #5: two threads of a notebook on one `out`: the second was told to `kill -TERM` the pid holding
    it, its own process (both runs' end). The holder being this process is said so, with no signal to send; a
    holder in another process is still named by its pid with the kill that stops it (test_backtest_resume.py)."""
    from engine.service.answer_parts import AnswerParts
    from engine.service.output_lock import OutputInUse

    out = tmp_path / "a.parquet"
    with AnswerParts.open(out, {"run": 1}, resume=False):  # the lock a first thread's run holds, as it writes
        with pytest.raises(OutputInUse) as refused:
            AnswerParts.open(out, {"run": 1}, resume=False)  # a second run, of another thread of this process
    said = str(refused.value)
    assert said.startswith(f"{out}.parts is in use by another backtest running in this process (a thread's "
                           f"run_backtest; pid {os.getpid()} is this process: do not kill it"), said
    assert "kill -TERM" not in said and "give another out" in said
