"""The streaming workload shared by benchmarks/flash.py and benchmarks/peers_streaming.py.

Workload: S streams of synthetic ticks (connectors.synthetic, seeded), each offered at
``rate`` ticks/s, 3 standing questions per stream (direction_20, volatility_50,
move_bps_50 of the built-in tick model), all due after every batch a stream takes
part in. Every side ("driver") runs the same drain loop:

    take every tick that has arrived -> ingest it -> answer the 3 questions of
    every stream that got new ticks -> repeat

Virtual time: arrivals follow a schedule in seconds (tick k of stream i arrives at
(k + i/S) / rate); a step starts at the virtual clock, its measured wall time is
added to the clock, and the answers of a stream are stamped at the step's start
plus the wall time at which that stream's answers were done. That is exactly what a
real-time run would record (the loop never idles while work is pending) without
sleeping through idle gaps, so a rate search costs compute time only.

Per tick, freshness = answer time - arrival time of the tick (the first answers that
include it). A rate is *sustained* when freshness p99 <= the SLO over the run (and
so every due answer is computed without a growing backlog).

Every side sees the same ticks, the same tokens (the built-in BinnedCodec, encoded
inside the timed loop on every side), the same window policy (keep the most recent
half from a tick boundary when the next ticks would pass ``window`` tokens) and the
same questions; answers are cross-checked between sides at the end of a run.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import ForeignLoad, add_data_dir_argument, say_load
from benchmarks.streaming_sides import (  # noqa: F401  (re-exported: the scripts import the sides from here)
    KEEP_FRACTION, QUESTION_ROOM, QUESTIONS, Driver, FlashtickDriver, LlamaCppApiDriver, LlamaCppDriver,
    StatelessDriver, VllmApiDriver, VllmSessionDriver, Window, last_logits,
)
from connectors.builtin import load_codec
from connectors.codec import BinnedCodec
from connectors.synthetic import StreamParams, SyntheticConfig, SyntheticMarket
from connectors.ticks import Tick
from engine.models import BUILTIN_MODEL_DIR
from engine.service.heap_memory import freeze_heap, thaw_heap

# Shape of the built-in tick model (engine/service/train_builtin.py), for a random-weight stand-in
# while it is not trained yet: same cost, meaningless answers.
BUILTIN_SHAPE = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=8,
                     num_key_value_heads=4, max_position_embeddings=512)


# -- the model and the ticks ---------------------------------------------------------------------

def model_dir(path: str | None) -> tuple[Path, str]:
    """The checkpoint to run and how to describe it; a seeded stand-in when the built-in is absent."""
    if path:
        return Path(path), path
    if (BUILTIN_MODEL_DIR / "config.json").is_file():
        return BUILTIN_MODEL_DIR, "built-in tick model"
    from transformers import LlamaConfig, LlamaForCausalLM

    directory = Path(tempfile.mkdtemp(prefix="flashtick-standin-"))
    torch.manual_seed(0)
    codec = BinnedCodec()
    LlamaForCausalLM(LlamaConfig(vocab_size=codec.vocab_size, **BUILTIN_SHAPE)).save_pretrained(directory)
    (directory / "codec.json").write_text(codec.to_json())
    return directory, "random-weight stand-in of the built-in model's shape (built-in not trained yet)"


def make_ticks(streams: int, per_stream: int, seed: int) -> dict[str, list[Tick]]:
    """``per_stream`` ticks for each of ``streams`` synthetic instruments (independent of the rate)."""
    params = tuple(StreamParams(f"SYN.S{i:02d}", 100.0 + i, 0.01) for i in range(streams))
    market = SyntheticMarket(SyntheticConfig(seed=seed, streams=params))
    out: dict[str, list[Tick]] = {p.name: [] for p in params}
    while min(len(v) for v in out.values()) < per_stream:
        tick = market.next_event()[0]
        if len(out[tick.stream]) < per_stream:
            out[tick.stream].append(tick)
    return out


@dataclass(frozen=True)
class Arrival:
    at: float  # virtual seconds
    tick: Tick


def schedule(ticks: dict[str, list[Tick]], rate: float, duration: float) -> list[Arrival]:
    """Tick k of stream i arrives at (k + i/S) / rate, for arrivals before ``duration``."""
    names = sorted(ticks)
    out = []
    for i, name in enumerate(names):
        phase = i / len(names)
        n = min(len(ticks[name]), math.ceil(duration * rate - phase))
        out += [Arrival((k + phase) / rate, ticks[name][k]) for k in range(n)]
    return sorted(out, key=lambda a: (a.at, a.tick.stream))


# -- runs -----------------------------------------------------------------------------------------

@dataclass
class Trial:
    driver: str
    streams: int
    rate: float  # per stream, ticks/s offered
    ticks: int = 0
    steps: int = 0
    busy_s: float = 0.0
    answered: int = 0  # (stream, step) answer rounds, 3 answers each
    freshness_ms: list[float] = field(default_factory=list, repr=False)
    aborted: bool = False

    def p(self, q: float) -> float:
        return float(np.percentile(self.freshness_ms, q)) if self.freshness_ms else math.inf

    def summary(self, slo_ms: float) -> dict:
        return {"driver": self.driver, "streams": self.streams, "rate_per_stream": self.rate,
                "offered_ticks_per_s": self.rate * self.streams, "ticks": self.ticks, "steps": self.steps,
                "freshness_p50_ms": self.p(50), "freshness_p99_ms": self.p(99),
                "busy_s": self.busy_s, "ingested_ticks_per_busy_s": self.ticks / self.busy_s if self.busy_s else 0.0,
                "ms_per_answer_round": 1e3 * self.busy_s / self.answered if self.answered else math.inf,
                "sustained": self.sustained(slo_ms), "aborted": self.aborted}

    def sustained(self, slo_ms: float) -> bool:
        return not self.aborted and self.p(99) <= slo_ms


def run_trial(driver: Driver, history: dict[str, list[Tick]], future: dict[str, list[Tick]], rate: float,
              duration: float, slo_ms: float) -> Trial:
    """One virtual-time run at ``rate`` ticks/s per stream for ``duration`` virtual seconds, every side with
    this process's heap frozen once it is set up, as `flashtick serve` runs (engine/service/heap_memory.py
    freeze_heap): the peers' loops are Python too, and a full collection here costs ~145 ms whoever is timed."""
    thaw_heap(True)  # the previous trial's freeze (the heap is this benchmark's own)
    driver.reset(history)
    freeze_heap()
    arrivals = schedule(future, rate, duration)
    trial = Trial(driver.name, len(future), rate)
    allowed_late = max(1, int(0.01 * len(arrivals)))  # past 1% of ticks over the SLO, p99 has failed
    late, now, i = 0, 0.0, 0
    while i < len(arrivals):
        now = max(now, arrivals[i].at)
        j = i
        while j < len(arrivals) and arrivals[j].at <= now:
            j += 1
        batch = arrivals[i:j]
        start = time.perf_counter()
        done = driver.step([a.tick for a in batch])
        wall = time.perf_counter() - start
        for a in batch:
            fresh = 1e3 * (now + done.get(a.tick.stream, wall) - a.at)
            trial.freshness_ms.append(fresh)
            late += fresh > slo_ms
        trial.ticks += len(batch)
        trial.steps += 1
        trial.answered += len(done)
        trial.busy_s += wall
        now += wall
        i = j
        if late > allowed_late:
            trial.aborted = True
            break
    return trial


def max_sustained_rate(trial_at: Callable[[float], Trial], slo_ms: float, start: float, ceiling: float,
                       refine: int = 3) -> tuple[float, list[Trial]]:
    """Double the per-stream rate from ``start`` until a trial misses the SLO, then bisect ``refine``
    times; returns the highest sustained rate found (0 when even ``start`` fails) and every trial."""
    trials: list[Trial] = []
    lo, hi, rate = 0.0, None, start
    while rate <= ceiling:
        trials.append(trial_at(rate))
        if not trials[-1].sustained(slo_ms):
            hi = rate
            break
        lo, rate = rate, rate * 2
    if hi is None or lo == 0.0:
        return lo, trials
    for _ in range(refine):
        mid = (lo * hi) ** 0.5
        trials.append(trial_at(mid))
        lo, hi = (mid, hi) if trials[-1].sustained(slo_ms) else (lo, mid)
    return lo, trials


def answer_agreement(a: dict[tuple[str, str], dict], b: dict[tuple[str, str], dict]) -> float | None:
    """Largest difference between two sides' answer probabilities over the answers both hold; None when
    they hold none in common (nothing was compared, which must not read as agreement)."""
    shared = a.keys() & b.keys()
    if not shared:
        return None
    worst = 0.0
    for key in shared:
        pa, pb = a[key]["probs"], b[key]["probs"]
        worst = max(worst, max(abs(pa[k] - pb[k]) for k in pa))
    return worst


# -- the whole workload, shared by the two scripts ------------------------------------------------

@dataclass(frozen=True)
class Settings:
    duration_s: float = 2.0  # virtual seconds of arrivals per trial
    history_ticks: int = 64  # per stream, ingested before each trial (256 tokens of context)...
    # ...plus i * history_spread / S for stream i of S: streams joined at different times, so each sits at
    # its own point of the window's roll cycle (~63 ticks) and rolls come at their steady pace inside any
    # trial. With one history length all streams would roll in the same round, or not at all in a 2 s
    # trial below ~30 ticks/s per stream: whether a trial passed hung on that, not on the sides' speed.
    history_spread: int = 64
    slo_ms: float = 1000.0  # freshness p99 bound that defines "sustained"
    common_rate: float = 20.0  # ticks/s per stream for the freshness comparison
    start_rate: float = 1.25  # rate search: doubles from here (5 x 2^k grid)...
    ceiling: float = 2560.0  # ...up to here, then bisects `refine` times
    refine: int = 2
    seed: int = 0
    source: str = "synthetic"  # or "replay": BTCUSDT from data_dir cut into per-stream segments
    data_dir: str | None = None  # real market data for source="replay" (a str: settings go to JSON)

    def __post_init__(self) -> None:
        if self.source not in ("synthetic", "replay"):
            raise ValueError(f"source must be 'synthetic' or 'replay', got {self.source!r}")
        if self.source == "replay" and self.data_dir is None:
            raise ValueError("source='replay' needs data_dir (the folder holding binance-btcusdt-spot/)")


def add_arguments(parser, streams: tuple[int, ...]) -> None:
    d = Settings()
    parser.add_argument("--streams", type=int, nargs="*", default=list(streams))
    parser.add_argument("--duration", type=float, default=d.duration_s, help="virtual seconds per trial")
    parser.add_argument("--slo-ms", type=float, default=d.slo_ms, help="freshness p99 that counts as sustained")
    parser.add_argument("--common-rate", type=float, default=d.common_rate, help="ticks/s per stream for freshness")
    parser.add_argument("--replay", action="store_true",
                        help="ticks from --data-dir (BTCUSDT) instead of synthetic")
    add_data_dir_argument(parser)
    parser.add_argument("--model", default=None, help="checkpoint directory (default: the built-in tick model)")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--ceiling", type=float, default=d.ceiling,
                        help="highest ticks/s per stream tried (a side sustaining it is reported as capped)")
    parser.add_argument("--refine", type=int, default=d.refine, help="bisections of the rate search")
    parser.add_argument("--history-spread", type=int, default=d.history_spread,
                        help="extra history ticks spread over the streams (0: every stream joined together)")


def settings_from(args) -> Settings:
    return Settings(duration_s=args.duration, slo_ms=args.slo_ms, common_rate=args.common_rate, seed=args.seed,
                    ceiling=args.ceiling, refine=args.refine, history_spread=args.history_spread,
                    source="replay" if args.replay else "synthetic",
                    data_dir=str(args.data_dir) if args.replay else None)


def replay_ticks(streams: int, per_stream: int, data_dir: Path) -> dict[str, list[Tick]] | None:
    """BTCUSDT cut into ``streams`` consecutive segments (one per stream), or None without the data."""
    import dataclasses

    from engine.service.datasets import load_btcusdt

    if not (data_dir / "binance-btcusdt-spot").is_dir():
        return None
    ticks = load_btcusdt(data_dir).ticks
    per_stream = min(per_stream, len(ticks) // streams)
    return {f"BTC.S{i:02d}": [dataclasses.replace(t, stream=f"BTC.S{i:02d}")
                              for t in ticks[i * per_stream : (i + 1) * per_stream]] for i in range(streams)}


def measure_side(driver: Driver, history, future, s: Settings) -> dict:
    """Max sustained rate (search), then one run at the common rate; the driver keeps that run's answers."""
    available = min(len(t) for t in future.values())
    ceiling = min(s.ceiling, available / s.duration_s)
    trial_at = lambda rate: run_trial(driver, history, future, rate, s.duration_s, s.slo_ms)  # noqa: E731
    rate, trials = max_sustained_rate(trial_at, s.slo_ms, min(s.start_rate, ceiling), ceiling, s.refine)
    common = trial_at(s.common_rate)
    best = next((t for t in reversed(trials) if t.rate == rate), None)
    return {
        "max_sustained_rate_per_stream": rate,
        "max_sustained_ticks_per_s": rate * len(future),
        "ingested_ticks_per_busy_s_at_max": best.summary(s.slo_ms)["ingested_ticks_per_busy_s"] if best else 0.0,
        "common_rate": common.summary(s.slo_ms),
        "search": [t.summary(s.slo_ms) for t in trials],
        "rate_capped_by_ceiling": rate >= ceiling,
        # 0 above means not even the lowest rate tried kept freshness p99 within the SLO: below this, not zero
        "lowest_rate_tried_ticks_per_s": min(s.start_rate, ceiling) * len(future),
    }


def run_workload(make_drivers: Callable[[int, Path, BinnedCodec, Window], list[Driver]], s: Settings,
                 stream_counts: list[int], model: str | None) -> dict:
    """Every side at every stream count; per stream count, answers cross-checked against flashtick's."""
    checkpoint, described = model_dir(model)
    codec = load_codec(checkpoint)  # answers read as serving reads them (with its calibration)
    window = window_policy(checkpoint)
    per_stream = s.history_ticks + s.history_spread + math.ceil(s.ceiling * s.duration_s) + 1
    rows = []
    for streams in stream_counts:
        if s.source == "replay":
            ticks = replay_ticks(streams, per_stream, Path(s.data_dir))
        else:
            ticks = make_ticks(streams, per_stream, s.seed)
        if ticks is None:
            raise SystemExit(f"--replay: no binance-btcusdt-spot/ in {s.data_dir} (pass --data-dir)")
        joined = {k: s.history_ticks + i * s.history_spread // streams for i, k in enumerate(sorted(ticks))}
        history = {k: v[: joined[k]] for k, v in ticks.items()}
        future = {k: v[joined[k] :] for k, v in ticks.items()}
        row = {"streams": streams, "sides": {}, "answer_max_prob_diff_vs_flashtick": {}}
        answers = {}
        for driver in make_drivers(streams, checkpoint, codec, window):
            started = time.perf_counter()
            helper = getattr(driver, "helper_cpu_s", lambda: 0.0)  # a side's own subprocesses are not "others"
            helper_before = helper()
            with ForeignLoad() as foreign:
                row["sides"][driver.name] = measure_side(driver, history, future, s)
            helper_share = (helper() - helper_before) / ((time.perf_counter() - started) * (os.cpu_count() or 1))
            row["sides"][driver.name]["kind"] = driver.kind
            row["sides"][driver.name]["foreign_cpu_share"] = max(0.0, foreign.share - helper_share)
            # the CPU a side's own subprocesses used (vLLM's engine core and frontend), as a share of the machine
            row["sides"][driver.name]["own_subprocess_cpu_share"] = helper_share
            row["sides"][driver.name]["bench_wall_s"] = time.perf_counter() - started
            if isinstance(driver, FlashtickDriver):  # the cache holds the common-rate run's answers
                row["sides"][driver.name]["cached_read"] = driver.read_latency_ns()
            if not row["sides"][driver.name]["common_rate"]["aborted"]:
                answers[driver.name] = driver.answers()
            if hasattr(driver, "logit_check"):  # a side whose answers are not comparable checks its logits itself
                row["sides"][driver.name]["max_abs_logprob_diff_vs_transformers"] = driver.logit_check()
            if hasattr(driver, "close"):  # a subprocess peer: gone before the next side is measured
                driver.close()
            print_side(streams, driver.name, row["sides"][driver.name])
        for name, theirs in answers.items():
            if name != "flashtick" and "flashtick" in answers:
                row["answer_max_prob_diff_vs_flashtick"][name] = answer_agreement(answers["flashtick"], theirs)
        rows.append(row)
    return {"model": described, "checkpoint": str(checkpoint), "window": window._asdict(),
            "settings": s.__dict__, "questions": QUESTIONS, "rows": rows}


def window_policy(checkpoint: Path) -> Window:
    """The model's positions, rolling ``QUESTION_ROOM`` before them, keeping half."""
    import json

    positions = json.loads((checkpoint / "config.json").read_text())["max_position_embeddings"]
    return Window(positions, positions - QUESTION_ROOM, int(positions * KEEP_FRACTION))


def sustained_rate_text(side: dict) -> str:
    """A side's sustained ticks/s as the line prints it: "< N" when even the lowest rate tried failed the SLO."""
    if side["max_sustained_ticks_per_s"] or "lowest_rate_tried_ticks_per_s" not in side:
        return f"{side['max_sustained_ticks_per_s']:.0f}"
    return f"< {side['lowest_rate_tried_ticks_per_s']:.0f}"


def print_side(streams: int, name: str, side: dict) -> None:
    c = side["common_rate"]
    print(f"{streams:>4} streams  {name:<24} sustained {sustained_rate_text(side):>9} ticks/s "
          f"({side['max_sustained_rate_per_stream']:.0f}/stream)  @{c['rate_per_stream']:.0f}/stream: freshness "
          f"p50 {c['freshness_p50_ms']:.1f} ms p99 {c['freshness_p99_ms']:.1f} ms, "
          f"{c['ms_per_answer_round']:.2f} ms per answer round  [{side['bench_wall_s']:.0f} s, "
          f"other processes {100 * side['foreign_cpu_share']:.0f}% CPU]", flush=True)
    say_load(side["foreign_cpu_share"])


def plot_throughput(result: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    streams = [r["streams"] for r in result["rows"]]
    for name in result["rows"][0]["sides"]:
        ax.plot(streams, [max(r["sides"][name]["max_sustained_ticks_per_s"], 0.1) for r in result["rows"]],
                marker="o", label=name)
    ax.set_xlabel("streams")
    ax.set_ylabel(f"max sustained ticks/s (freshness p99 <= {result['settings']['slo_ms']:.0f} ms)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
