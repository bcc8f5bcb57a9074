"""A backtest's report: what the run read, answered and scored, and the summary `flashtick backtest` prints.

The summary is the scores table (a row per query, and with --by-stream a row per stream under it) and the notes
that explain it: rows rejected, answers left unscored and why, queries that lose to a naive forecast. The notes'
texts are worked out by the run (unscored_notes.py, session_gaps.py); this module only lays them out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connectors.labels import NO_LABEL_DEFINED
from connectors.ticks import shown_name, utc_text
from engine.service.backtest_scores import QueryScore
from engine.service.live_scores import WORST_MIN_SCORED
from engine.service.rejections import rejected_lines
from engine.service.text_columns import name_width, padded


@dataclass
class BacktestReport:
    """What ``run_backtest`` returns: the run's counts, its scores and the notes that explain them.

    The main fields: ``ticks`` (taken from the files), ``rejected`` (rows refused, by reason; ``rejected_examples``:
    each reason's first row, located), ``answers`` (rows written), ``out`` (the answers Parquet file: read it with
    ``pl.read_parquet(report.out)``; the scores are in ``out.with_suffix(".scores.json")``, the plot in
    ``.calibration.png``, the run's record in ``.manifest.json``), ``scores`` (one QueryScore per query, each
    stream's in its ``by_stream``), ``in_sample`` (why the scores are not out of sample, where the model was scored
    on ticks it trained on: said to ``note`` too, as the CLI prints them before its table; empty when they may be).
    ``summary()`` is the table `flashtick backtest` prints. ``already_complete``:
    set by ``resume=True`` on a run that had finished (finished_backtest.AlreadyComplete: its message and counts):
    nothing was run, and this report is read back from the finished run's manifest and scores, with its counts and
    scores alone (the notes of the run are in its manifest, not here).
    """

    ticks: int
    rejected: dict[str, int]
    answers: int
    out: Path
    scores: list[QueryScore]
    rejected_examples: dict[str, str] = field(default_factory=dict)  # reason -> first rejected row, located
    resumed_at: int = 0  # replay ticks taken over from an interrupted run (0: a fresh run)
    # only answers after this fraction of each stream's ticks were scored, or from this time on (test_start.py)
    test_from: Any = None
    model_path: str | None = None  # the checkpoint that answered (None: the built-in model)
    stream_ticks: dict[str, int] = field(default_factory=dict)  # each stream's ticks in this run (what test_from cuts)
    cautions: list[str] = field(default_factory=list)  # notes on the reading said again at the end (cautions.Caution)
    unscored_why: dict[str, str] = field(default_factory=dict)  # query -> why none of its answers was scored
    # query -> why some of its answers were not scored, for a query that scored others (a subset of the labels)
    partly_scored_why: dict[str, str] = field(default_factory=dict)
    found_notes: list[str] = field(default_factory=list)  # what reading the files found on the way (FileReplay's)
    time_range: str | None = None  # the event-time range read (`--from X --to Y`), None: the whole files
    range_left_out: int = 0  # rows of the files outside it
    # stream -> its first scored answer's event time (with test_from: the first after the cut; else its first answer's)
    split_times: dict[str, int] = field(default_factory=dict)
    rejected_streams: dict[str, str] = field(default_factory=dict)  # reason -> the streams that lost rows to it
    # query -> stream -> why none of its answers on that stream was scored, for a query that scored others'
    stream_unscored_why: dict[str, dict[str, str]] = field(default_factory=dict)
    # query -> its bps-bucketed question is saturated on some of its streams (connectors/saturation.py), said so
    saturated_why: dict[str, str] = field(default_factory=dict)
    gap_notes: list[str] = field(default_factory=list)  # labels across pauses in event time (session_gaps.py)
    step_cautions: list[str] = field(default_factory=list)  # split-like price steps across such pauses
    scores_only: bool = False  # a --resume of a run stopped while it scored: its answers file scored, none computed
    split_ends: dict[str, int] = field(default_factory=dict)  # stream -> its last scored answer's event time
    test_part: bool = False  # --test-from cut the model's training streams at their test part's first tick
    resends: int = 0  # ticks left out as a sequence number's repeat (a resend: the note at the end says which)
    context: list[str] = field(default_factory=list)  # the window, its cause, the answers' context (answer_context.py)
    already_complete: Exception | None = None  # resume=True of a finished run: nothing run, this read back (above)
    # query -> its bps-bucketed question's labels are one inner bucket on some of its streams (review379 #4)
    one_class_why: dict[str, str] = field(default_factory=dict)
    # why the scores are not out of sample (backtest_in_sample.py): a note, or a Caution (a warning); [] when none
    in_sample: list[str] = field(default_factory=list)

    def summary(self, by_stream: bool = False) -> str:
        """The run, its scores table (``by_stream``: under each query, a row per stream it answered) and notes."""
        resumed = (", scored from the answers file: none computed again" if self.scores_only else
                   f", resumed after {self.resumed_at}" if self.resumed_at else "")
        test_part = (": on the streams the model was trained on, from its test part's first tick, after the gap "
                     "its training left before it, as `flashtick evaluate` scores it" if self.test_part else "")
        scored = ([f"scored: {self._scored_part()}; 'in slice' counts them){test_part}; every answer is in the file",
                   self._split_line()] if self.test_from is not None else [])
        answers = "answers" if self.test_from is None else "in slice"
        # the name column as wide as its longest name in terminal cells (a CJK stream name takes two a character)
        width = name_width([s.query for s in self.scores] + [f"  {shown_name(stream)}" for s in self.scores
                                                             for stream in (s.by_stream if by_stream else {})], 16)
        left_out = self.rejected.get("filtered_out", 0)  # a filter's choice (--streams, a keep), not an error
        skipped = f"{sum(self.rejected.values()) - left_out} rejected" + (
            f", {left_out} left out by a filter" if left_out else "") + (
            f", {self.resends} left out as resends of a sequence number" if self.resends else "")
        lines = [f"replayed {self.ticks} ticks ({skipped}{resumed}), "
                 f"{self.answers} answers -> {self.out}",
                 *rejected_lines(self.rejected, self.rejected_examples, self.ticks, self.rejected_streams),
                 *([f"  range {self.time_range}: {self.range_left_out} row(s) of the files outside it left out"]
                   if self.time_range is not None else []),
                 *self.context,
                 *scored,
                 f"{padded('query', width)}{answers:>8}{'scored':>8}{'accuracy':>10}{'brier':>8}{'freq.brier':>11}"
                 f"{'logloss':>9}{'model acc':>10}{'model brier':>12}  baseline accuracy"]
        for s in self.scores:
            lines.append(_score_row(s.query, s, width))
            lines += [_score_row(f"  {shown_name(stream)}", part, width)
                      for stream, part in (s.by_stream if by_stream else {}).items()]
        if by_stream and any(s.by_stream for s in self.scores):
            lines.append("indented: each stream's own rows of the same answers (freq.brier, majority: its own class "
                         "frequencies); weighted by scored, their accuracy, brier and freq.brier add up to the "
                         "query's row")
        unscored: dict[str, list[str]] = defaultdict(list)  # why -> the queries it holds for
        for s in self.scores:
            if s.answers and not s.scored:
                unscored[self.unscored_why.get(s.query, NO_LABEL_DEFINED)].append(s.query)
        lines += [f"note: {', '.join(queries)}: no answer scored: {why}" for why, queries in unscored.items()]
        if by_stream:  # a stream row of dashes under a query that scored on other streams: why, as a query's
            lines += unscored_stream_lines(self.stream_unscored_why)
        lines += [f"note: {s.query}: {s.scored} of {s.answers} answers scored: {self.partly_scored_why[s.query]}"
                  for s in self.scores if s.scored and s.query in self.partly_scored_why]
        if any(s.scored for s in self.scores):  # the same names as live `flashtick scores`' online baselines
            lines.append(HINDSIGHT_BASELINES)
        if any(s.model_accuracy is not None for s in self.scores):
            lines.append("accuracy, brier: the published (adapted) answers; model acc/brier: the model's own (with "
                         "the checkpoint's answer heads, if it has them), before adaptation (answers.adapt)")
        # worse by more than the printed precision: "0.000 vs 0.000" is no finding
        unskilled = [s for s in self._judged() if s.model_brier is not None and s.frequency_brier is not None
                     and s.model_brier > s.frequency_brier + 0.0005]
        if unskilled:
            worst = max(unskilled, key=lambda s: s.model_brier - s.frequency_brier)
            fit = (" A model fitted to this feed: flashtick train FILES --out DIR, then --model DIR (docs/model.md)"
                   if self.model_path is None else f" To fit this checkpoint further to this feed: flashtick train "
                   f"FILES --base {self.model_path} --out NEW_DIR (docs/model.md)")
            model, frequencies = _told_apart(worst.model_brier, worst.frequency_brier)
            lines.append(f"note: {', '.join(s.query for s in unskilled)}: the model's own answers score worse than "
                         f"the class frequencies as a constant forecast ({worst.query}: Brier {model} vs "
                         f"{frequencies}); what was published is the adapted mix.{fit}")
        lines += [f"note: {query}: {why}" for query, why in self.saturated_why.items()]
        lines += [f"note: {query}: {why}" for query, why in self.one_class_why.items()]
        lines += [f"note: {said}" for said in self.gap_notes]
        lines += [f"warning: {caution}" for caution in self.step_cautions]
        lines += self._thin_note() + self._published_verdict()
        lines += [f"note: {found}" for found in self.found_notes]
        lines += [f"warning (said above too): {caution}" for caution in self.cautions]
        return "\n".join(lines)

    def _scored_part(self) -> str:
        """Which answers --test-from scored, in words, up to the option in brackets left open: after a share of
        each stream's ticks, or from a time on."""
        if hasattr(self.test_from, "ns"):  # test_start.TestStart
            return f"the answers from {self.test_from.text()} on (--test-from, UTC event time"
        return f"the answers after the first {percent(self.test_from)} of each stream's ticks (--test-from " \
               f"{self.test_from:g}"

    def _split_line(self) -> str:
        """Where --test-from split each stream, in event time: its first scored answer's (UTC)."""
        if not self.split_times:
            return "  split: no answer after it"
        said = [f"{shown_name(stream)} {utc_text(ts)}" for stream, ts in list(self.split_times.items())[:SPLIT_SHOWN]]
        if len(self.split_times) > SPLIT_SHOWN:
            times = self.split_times.values()
            said.append(f"... {len(self.split_times)} streams, from {utc_text(min(times))} to {utc_text(max(times))}")
        return f"  split (each stream's first scored answer, UTC): {', '.join(said)}"

    def _judged(self) -> list[QueryScore]:
        """The queries with answers enough scored for a verdict against a naive forecast: as many as live `flashtick
        scores` waits for before it names a stream worse than the class frequencies (on 2 answers the hindsight
        frequencies are a point mass, Brier 0, that every forecast "loses" to: review396 #3)."""
        return [s for s in self.scores if s.scored >= WORST_MIN_SCORED]

    def _thin_note(self) -> list[str]:
        """The scored queries left out of the verdicts (``_judged``), said as such."""
        thin = [f"{s.query} ({s.scored})" for s in self.scores if 0 < s.scored < WORST_MIN_SCORED]
        if not thin:
            return []
        return [f"note: {', '.join(thin)}: too few answers scored to judge against a naive forecast (under "
                f"{WORST_MIN_SCORED}, as live `flashtick scores` names a stream from; fewer say little): no verdict"]

    def _published_verdict(self) -> list[str]:
        """What was published, against the naive forecasts a quant compares with first: the class frequencies
        (Brier) and the best of majority class and same-as-last (accuracy); said for each query judged that
        loses."""
        worse = []
        for s in self._judged():
            losses = []
            if s.brier is not None and s.frequency_brier is not None and s.brier > s.frequency_brier + 0.0005:
                losses.append("Brier {} vs the class frequencies' {}".format(*_told_apart(s.brier, s.frequency_brier)))
            if (s.accuracy is not None and s.baseline_accuracy is not None
                    and s.accuracy < s.baseline_accuracy - 0.0005):
                accuracy, baseline = _told_apart(s.accuracy, s.baseline_accuracy)
                losses.append(f"accuracy {accuracy} vs {s.baseline}'s {baseline}")
            if losses:
                worse.append(f"{s.query} ({'; '.join(losses)})")
        if not worse:
            return []
        return [f"note: the published answers do worse than a naive forecast on {', '.join(worse)}: on these ticks "
                f"they carry no edge over it"]


def _told_apart(worse: float, better: float) -> tuple[str, str]:
    """Two scores a note calls different, with as many decimals (3 to 5) as it takes for them to print apart: a
    difference past the notes' 0.0005 threshold read "0.486 vs 0.486" at three."""
    for digits in (3, 4):
        shown = f"{worse:.{digits}f}", f"{better:.{digits}f}"
        if shown[0] != shown[1]:
            return shown
    return f"{worse:.5f}", f"{better:.5f}"


# `freq.brier` and the majority baseline of a backtest are in hindsight; live `flashtick scores` prints columns of
# the same names that are online (engine/service/cmd_status.py), so each table says which it prints
HINDSIGHT_BASELINES = ("freq.brier, majority: in hindsight, each stream's own realised class frequencies and most "
                       "frequent class over the files, weighted by its scored answers (instruments are never pooled "
                       "into one); live `flashtick scores` prints online ones, which differ on the same answers")

SPLIT_SHOWN = 6  # streams whose split time the summary names; the others' range is said


def percent(fraction: float) -> str:
    """A share as a percentage with the digits it has (0.999: 99.9%, never a rounded 100%)."""
    return f"{fraction * 100:g}%"


def _score_row(name: str, s: QueryScore, width: int = 16) -> str:
    fmt = lambda x: f"{x:.3f}" if x is not None else "-"  # noqa: E731
    base = f"{s.baseline} {fmt(s.baseline_accuracy)}" if s.baseline else "-"
    return (f"{padded(name, width)}{s.answers:>8}{s.scored:>8}{fmt(s.accuracy):>10}{fmt(s.brier):>8}"
            f"{fmt(s.frequency_brier):>11}{fmt(s.log_loss):>9}{fmt(s.model_accuracy):>10}{fmt(s.model_brier):>12}"
            f"  {base}")


UNSCORED_STREAMS_SHOWN = 3  # streams named in a note on a query's streams none of whose answers scored


def unscored_stream_lines(stream_unscored_why: dict[str, dict[str, str]]) -> list[str]:
    """A note per reason on the streams a query scored none of the answers on (`--by-stream`'s rows of dashes):
    each query with its count of such streams and the first few, as the reject summary counts its streams; a
    sparse universe of thousands of names made one line of every name (review355 #14)."""
    by_why: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))  # why -> query -> streams
    for query, streams in stream_unscored_why.items():
        for stream, why in streams.items():
            by_why[why][query].append(shown_name(stream))
    lines = []
    for why, queries in by_why.items():
        said = []
        for query, streams in queries.items():
            first = ", ".join(streams[:UNSCORED_STREAMS_SHOWN])
            said.append(f"{query} on {first}" if len(streams) <= UNSCORED_STREAMS_SHOWN else
                        f"{query} on {len(streams):,} streams ({first} and {len(streams) - UNSCORED_STREAMS_SHOWN:,} "
                        f"others)")
        lines.append(f"note: {'; '.join(said)}: no answer scored: {why}")
    return lines
