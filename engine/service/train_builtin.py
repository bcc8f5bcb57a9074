"""Train the built-in tick model: a small Llama on BinnedCodec tokens. Seeded and deterministic
for a given seed, step count and thread count (`--max-minutes` only cuts a run short).

    nice -n 10 python -m engine.service.train_builtin --steps 480 --data-dir ../shared/data \
        --log /tmp/train_tick_model.log

What the model sees matches serving exactly. A serving session holds only tick
tokens at positions 0..n-1; a question is a probe of its token(s) at positions
n.. whose next-token distribution, restricted to the answer tokens, is the answer.
Training packs one window of tick tokens (next-token loss) plus K question
tokens placed after it in the array: each question token gets the position it
would have at serving time and a 4D mask letting it see only the ticks before its
answer point (and itself); tick tokens never see question tokens. Its target is
the realised answer token (connectors/labels.py).

The loop (`optimise`, engine/service/train_loop.py) is shared with `flashtick train`
(engine/service/finetune.py), which fine-tunes on a user's files with early stopping on a validation slice.
When the loop stops (its --max-minutes clock, the validation, early stopping's best weights) is
engine/service/train_stopping.py.

Data: the synthetic market (seed 1; seed 2 is never trained on; `--wide-synthetic` adds markets
with other price scales, tick sizes, clocks and volatility) and the earlier 80% in time of each real
data set named by `--sets` in --data-dir (engine/service/datasets.py; the repository keeps them in
../shared/data). Without --data-dir: synthetic only. `--codec-version 2` trains on the
instrument-agnostic BinnedCodec (connectors/codec.py); `--window-ticks` sets the model's length.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from connectors.codec import SPEC_VERSIONS, TOKENS_PER_TICK, BinnedCodec, BinnedSpec
from engine.models import BUILTIN_MODEL_DIR
from engine.service.datasets import DEFAULT_SETS, LOADERS, data_available
from engine.service.installation import builtin_write_refusal
from engine.service.train_config import TrainConfig
from engine.service.untrained_tokens import never_trained_line
from engine.text_files import ENCODING, read_text

if TYPE_CHECKING:
    from engine.service.evaluate import EvalOptions


def train(cfg: TrainConfig, out_dir: Path, log, data_dir: Path | None = None) -> dict:
    # (torch and the model's modules imported here, not at the top: a refused --out or --help answers at once,
    # where those imports took ~5.5 s of CPU first)
    import numpy as np
    import torch

    from engine.service.train_checkpoint import new_model, save_model
    from engine.service.train_data import build_sources, question_tokens, untrained_events
    from engine.service.train_loop import optimise

    torch.set_num_threads(cfg.threads)
    rng = np.random.default_rng(cfg.seed)
    codec = BinnedCodec(BinnedSpec(version=cfg.codec_version))
    t0 = time.time()
    groups, notes = build_sources(codec, cfg, data_dir)
    weights = np.array(cfg.mix[: len(groups)], dtype=np.float64)
    weights /= weights.sum()
    log(f"data ready in {time.time() - t0:.1f}s: " + "; ".join(notes))
    model = new_model(cfg, codec.vocab_size)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params / 1e6:.2f}M parameters")

    def checkpoint(step: int) -> None:
        if step == cfg.steps // 3:
            save_model(model, codec, out_dir)  # an early usable model, overwritten at the end
            log(f"checkpoint saved at step {step}")

    stats = optimise(model, groups, weights, question_tokens(codec), cfg, log, rng, on_step=checkpoint)
    save_model(model, codec, out_dir)
    return stats | {"params": n_params, "total_seconds": round(time.time() - t0, 1), "data": notes,
                    "never_trained": untrained_events(codec, groups)}


def write_training_md(cfg: TrainConfig, stats: dict, out_dir: Path, command: str) -> None:
    import torch

    text = f"""# Built-in tick model: how it was trained

- Command: `{command}` (from the repository root)
- Seed: {cfg.seed}; deterministic for a given seed, step count and thread count ({cfg.threads} torch threads)
- Hardware: {platform.processor() or platform.machine()}, {cfg.threads} CPU threads (a 2-core shared machine,
  niced), no GPU
- torch {torch.__version__}; wall time {stats['total_seconds']} s total, {stats['train_seconds']} s of optimisation
- Model: Llama ({cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads, {cfg.kv_heads} KV heads,
  MLP {cfg.intermediate}, max positions {cfg.max_positions}), {stats['params'] / 1e6:.2f}M parameters, fp32 safetensors
- Steps: {stats['steps_done']} x batch {cfg.batch} windows of {cfg.window_ticks} ticks
  ({cfg.window_ticks * TOKENS_PER_TICK} tokens) + {cfg.questions_per_window} question probes per window;
  AdamW lr {cfg.lr}, warmup {cfg.warmup}, cosine to 10%
- Codec: BinnedCodec spec version {cfg.codec_version}
- Data (mix {cfg.mix} synthetic / {' / '.join(cfg.real_sets)}):
{chr(10).join('  - ' + n for n in stats['data'])}
- Final losses (mean of the last 20 steps): next-token {stats['final_lm_loss']} nats,
  answer {stats['final_qa_loss']} nats
- Serving contract: a session holds tick tokens only; a question is probed at position n (number of tick
  tokens) and must stay below max positions, so keep at most {cfg.window_ticks} ticks in a session window.
{never_trained_line(stats["never_trained"])}
Full config: `{json.dumps(asdict(cfg))}`
"""
    (out_dir / "TRAINING.md").write_text(text, encoding=ENCODING)


def reproduce_command(cfg: TrainConfig, steps_done: int, data_dir: Path | None, mix_given: bool = True) -> str:
    """The command that reproduces a run of `cfg` step for step, even when the wall-clock guard cut it
    (`--stop-after`); `--out` is the caller's to add."""
    stop = f" --stop-after {steps_done}" if steps_done < cfg.steps else ""
    data = f" --data-dir {data_dir}" if data_dir is not None else ""
    extra = "".join(f" {flag}" for flag, used in (
        # a rerun on a slower machine must not be cut by a shorter default wall-clock guard
        (f"--max-minutes {cfg.max_minutes:g}", cfg.max_minutes != TrainConfig.max_minutes),
        (f"--codec-version {cfg.codec_version}", cfg.codec_version != TrainConfig.codec_version),
        (f"--window-ticks {cfg.window_ticks}", cfg.window_ticks != TrainConfig.window_ticks),
        (f"--questions-per-window {cfg.questions_per_window}",
         cfg.questions_per_window != TrainConfig.questions_per_window),
        (f"--sets {','.join(cfg.real_sets)}", cfg.real_sets != DEFAULT_SETS),
        (f"--mix {','.join(f'{w:g}' for w in cfg.mix)}", mix_given),
        ("--wide-synthetic", cfg.wide_synthetic)) if used)
    return (f"nice -n 19 python -m engine.service.train_builtin --steps {cfg.steps} --seed {cfg.seed}"
            f"{stop}{data}{extra}")


def calibrate_only(out: Path, data_dir: Path | None, log_path: Path | None = None,
                   sets: tuple[str, ...] = DEFAULT_SETS, options: EvalOptions | None = None) -> None:
    """Fit the answer calibration of the checkpoint in `out` on validation slices of its training data (the
    real `sets` it was trained on; engine/service/calibrate.py `calibrate_builtin`), write calibration.json
    and record it in TRAINING.md. The weights are not touched. ``options``: the answer points fitted on
    (None: calibrate_builtin's, as --calibrate-only runs it)."""
    import torch

    from connectors.calibration import write_calibration
    from engine.service.calibrate import calibrate_builtin, calibration_table
    from engine.service.tick_checkpoint import load_tick_model

    torch.set_num_threads(1)
    t0 = time.time()
    log = _logger(log_path)
    model, codec = load_tick_model(out)
    calibration = calibrate_builtin(model, codec, data_dir, log, options, sets)
    write_calibration(out, calibration)
    options = "".join(f" {flag}" for flag, used in (
        (f"--data-dir {data_dir}", data_dir is not None), (f"--sets {','.join(sets)}", sets != DEFAULT_SETS),
        (f"--out {out}", out != BUILTIN_MODEL_DIR)) if used)
    section = (f"## Answer calibration\n\n- Command: `nice -n 19 python -m engine.service.train_builtin "
               f"--calibrate-only{options}` (weights untouched; {time.time() - t0:.0f} s on one CPU thread)\n"
               f"- Fitted per question on {calibration.source}\n- Answers are softmax(z / temperature + bias) over "
               f"the answer logits z; NLL in nats per answer point on those slices (held out: each half in time "
               f"of every stream's points scored by the fit on the other halves; a fit that does not beat no "
               f"calibration there is not kept)\n\n"
               f"{calibration_table(calibration)}\n")
    card = out / "TRAINING.md"
    text = read_text(card) if card.is_file() else ""
    text = text.split("## Answer calibration")[0].rstrip("\n")
    card.write_text((text + "\n\n" if text else "") + section, encoding=ENCODING)
    log(f"wrote {out / 'calibration.json'}:\n{calibration_table(calibration)}")


def _logger(path: Path | None) -> Callable[[str], None]:
    log_file = path.open("a", encoding=ENCODING) if path else None

    def log(msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        if log_file:
            log_file.write(line + "\n")
            log_file.flush()

    return log


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=TrainConfig.steps)
    parser.add_argument("--seed", type=int, default=TrainConfig.seed)
    parser.add_argument("--max-minutes", type=float, default=TrainConfig.max_minutes)
    parser.add_argument("--out", type=Path, default=BUILTIN_MODEL_DIR,
                        help="checkpoint directory (default: the built-in model's, in a source checkout only)")
    parser.add_argument("--stop-after", type=int, default=None, help="steps to run; the LR schedule still spans "
                                                                     "--steps")
    parser.add_argument("--log", type=Path, default=None)
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="real market data (binance-btcusdt-spot/, dukascopy-eurusd/); omitted: synthetic only")
    parser.add_argument("--sets", default=",".join(DEFAULT_SETS),
                        help=f"real data sets to train on, comma-separated, of {','.join(LOADERS)} (default "
                             f"%(default)s)")
    parser.add_argument("--mix", default=None, help="sampling weights: synthetic, then one per --sets entry, "
                        "comma-separated (default 0.5,0.2,0.3 for the default sets, else equal)")
    parser.add_argument("--wide-synthetic", action="store_true",
                        help="add synthetic markets with other price scales, tick sizes, clocks and volatility")
    parser.add_argument("--codec-version", type=int, default=TrainConfig.codec_version, choices=SPEC_VERSIONS,
                        help="BinnedCodec spec: 1 absolute bps/ns bins, 2 relative to each stream's own scales")
    parser.add_argument("--window-ticks", type=int, default=TrainConfig.window_ticks,
                        help="ticks per training window; the model gets 4 x (this + 1) positions (default %(default)s)")
    parser.add_argument("--questions-per-window", type=int, default=TrainConfig.questions_per_window,
                        help="question probes trained per window (default %(default)s)")
    parser.add_argument("--calibrate-only", action="store_true",
                        help="do not train: fit the answer calibration of the model in --out (default: the built-in "
                        "one, in a source checkout) on validation slices of its training data (the --sets it was "
                        "trained on) and write its calibration.json")
    return parser


def _config(args: argparse.Namespace, sets: tuple[str, ...], parser: argparse.ArgumentParser) -> TrainConfig:
    """The run's TrainConfig from the options (``sets``: --sets parsed); one it refuses is a usage error."""
    if args.mix is not None:
        mix = tuple(float(x) for x in args.mix.split(","))
    else:
        mix = TrainConfig.mix if sets == DEFAULT_SETS else (1.0,) * (1 + len(sets))
    try:
        return TrainConfig(seed=args.seed, steps=args.steps, max_minutes=args.max_minutes, stop_after=args.stop_after,
                           real_sets=sets, mix=mix, wide_synthetic=args.wide_synthetic,
                           codec_version=args.codec_version, window_ticks=args.window_ticks,
                           questions_per_window=args.questions_per_window,
                           max_positions=(args.window_ticks + 1) * TOKENS_PER_TICK)
    except ValueError as e:
        parser.error(str(e))


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.data_dir is not None and not data_available(args.data_dir):
        parser.error(f"--data-dir {args.data_dir}: binance-btcusdt-spot/ and dukascopy-eurusd/ not found there")
    if (refusal := builtin_write_refusal(args.out, BUILTIN_MODEL_DIR, args.calibrate_only)) is not None:
        parser.error(refusal)  # before any data is read or any weights are loaded
    sets = tuple(n for n in args.sets.split(",") if n)
    if args.calibrate_only:
        if not (args.out / "config.json").is_file():  # (a traceback of the checkpoint loader's, before)
            parser.error(f"--calibrate-only: --out {args.out} holds no model (no config.json): train it first, or "
                         f"give the folder of one")
        calibrate_only(args.out, args.data_dir, args.log, sets)
        return
    cfg = _config(args, sets, parser)
    log = _logger(args.log)
    stats = train(cfg, args.out, log, args.data_dir)
    command = reproduce_command(cfg, stats["steps_done"], args.data_dir, mix_given=args.mix is not None)
    write_training_md(cfg, stats, args.out, command)
    log(f"done: {json.dumps(stats)}")


if __name__ == "__main__":
    main()
