"""The one training loop, `optimise`: AdamW with warmup and a cosine schedule (`lr_at`) over packed, serving-exact
batches, next-token loss on the ticks plus answer loss on the question probes (`batch_losses`), a log line every ten
steps. The built-in model's recipe (engine/service/train_builtin.py) and `flashtick train`
(engine/service/finetune.py) both train through it; what it is told is a TrainConfig (engine/service/train_config.py),
what it reads comes from engine/service/train_data.py, and when it stops (--max-minutes, validation, early stopping's
best weights) is engine/service/train_stopping.py.
"""

from __future__ import annotations

import math
import signal
import time
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from transformers import LlamaForCausalLM

from connectors.ticks import counted
from engine.service.packing import Batch
from engine.service.train_config import TrainConfig
from engine.service.train_data import Source, sample_batch
from engine.service.train_stopping import BestWeights, StepClock, Validation


def lr_at(step: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    frac = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


def batch_losses(model: LlamaForCausalLM, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(next-token loss over the tick tokens, answer loss over the question tokens) of one packed batch."""
    L = batch.ids.shape[1] - batch.qa_targets.shape[1]
    logits = model(input_ids=batch.ids, attention_mask=batch.mask, position_ids=batch.pos).logits  # (B, L + K, V)
    lm = F.cross_entropy(logits[:, : L - 1].reshape(-1, logits.shape[-1]), batch.ids[:, 1:L].reshape(-1))
    qa = F.cross_entropy(logits[:, L:].reshape(-1, logits.shape[-1]), batch.qa_targets.reshape(-1), ignore_index=-100)
    return lm, qa


def to_device(batch: Batch, device: str) -> Batch:
    return Batch(*(t.to(device) for t in batch))


@torch.no_grad()
def validation_loss(model: LlamaForCausalLM, val: Validation, cfg: TrainConfig, device: str) -> float:
    model.eval()
    losses = [sum(x.item() * w for x, w in zip(batch_losses(model, to_device(b, device)), (1.0, cfg.qa_weight)))
              for b in val.batches]
    model.train()
    return float(np.mean(losses))


def _optimizer(model: LlamaForCausalLM, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices only (not on norms and biases)."""
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr, betas=(0.9, 0.95),
    )


def _train_step(model: LlamaForCausalLM, opt: torch.optim.Optimizer, batch: Batch, step: int, cfg: TrainConfig,
                clock: StepClock) -> tuple[torch.Tensor, torch.Tensor]:
    """One update on ``batch`` at ``step``'s learning rate; its (next-token, answer) losses."""
    for g in opt.param_groups:
        g["lr"] = lr_at(step, cfg)
    lm, qa = batch_losses(model, batch)
    clock.forward_done()
    loss = lm + cfg.qa_weight * qa
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return lm, qa


def _say_step(step: int, lm: torch.Tensor, qa: torch.Tensor, hist: list[tuple[float, float]], best: BestWeights,
              cfg: TrainConfig, log: Callable[[str], None], bar: Any, started: float, now: Callable[[], float]
              ) -> None:
    """The progress bar's losses after each step, and a log line every 10 steps and at the last (with the seconds
    since ``started``: ``now`` is read only then)."""
    if bar is not None:
        bar.update(1)
        bar.set_postfix_str(f"lm {lm.item():.3f} qa {qa.item():.3f}"
                            + (f" val {best.loss:.3f}" if best.history else ""))
    if step % 10 == 9 or step == cfg.steps - 1:
        lm_avg, qa_avg = np.mean(hist[-10:], axis=0)
        log(f"step {step + 1}/{cfg.steps} lm {lm_avg:.4f} qa {qa_avg:.4f} lr {lr_at(step, cfg):.2e} "
            f"{now() - started:.0f}s" + (f" val {best.history[-1][1]:.4f}" if best.history else ""))


def _tail_said(tail_s: float, left_s: float, window_s: float | None) -> str:
    """The `budget:` line on the calibration and scoring after training, once priced; past the time left, what
    shortens them (a run of 60k swaps under --max-minutes 2 spent 90 s of its 120 scoring: review325 #10)."""
    how = "2 steps' forwards" if window_s is None else \
        f"their first chunk, timed: {window_s * 1000:.0f} ms a window, following the forwards measured from here"
    said = f"budget: the calibration and scoring after training estimated at {tail_s:.0f} s (from {how})"
    if tail_s <= left_s:
        return f"{said}; training stops in time for them"
    return (f"{said}, past the {max(left_s, 0.0):.0f} s left: the run will end past --max-minutes; fewer answer "
            f"points (--max-points) shorten them")


def optimise(model: LlamaForCausalLM, groups: list[list[Source]], weights: np.ndarray, q_tokens: np.ndarray,
             cfg: TrainConfig, log: Callable[[str], None], rng: np.random.Generator, device: str = "cpu",
             val: Validation | None = None, on_step: Callable[[int], None] | None = None, bar: Any = None,
             now: Callable[[], float] = time.time, check_start: bool = False, started: float | None = None,
             tail: tuple[float, float] = (0.0, 0.0), tail_windows: int = 0,
             time_tail: Callable[[], float | None] | None = None) -> dict:
    """The one training loop (the built-in model and `flashtick train`): AdamW, warmup + cosine, packed
    serving-exact batches, next-token + answer loss. With `val`, keeps the weights of the best validation loss;
    with ``check_start`` too, the starting weights are a candidate (step 0: one validation pass), so a fine-tune
    never returns weights worse on validation than those it started from. ``now``: the clock --max-minutes is
    measured on (seconds); ``started`` and ``tail``: when it began and what must fit after the loop (StepClock), of
    which ``tail_windows`` answer windows; ``time_tail``: the seconds of one of them, timed when called (once, after
    the second step: train_tail.first_chunk_seconds), which prices the tail from then on."""
    model.to(device).train()
    opt = _optimizer(model, cfg)
    t_train, hist, stopped, best = now(), [], "steps done", BestWeights()
    interrupted_by: int | None = None  # the signal that stopped the run: its caller exits by it (128 + it)
    clock = StepClock(cfg.max_minutes * 60, len(val.batches) if val is not None else 0, now, started, tail,
                      tail_windows)
    try:  # Ctrl-C stops training like --max-minutes: the best weights so far are kept and written
        if val is not None and check_start:  # a run interrupted at step 2 kept a loss of 7.80, the base's lower
            clock.validation_started()
            best.checked(model, 0, validation_loss(model, val, cfg, device))
            clock.validation_done()
            log(f"step 0 (the starting weights) val {best.loss:.4f}")
        for step in range(cfg.steps):
            if cfg.stop_after is not None and step >= cfg.stop_after:
                stopped = f"--stop-after {cfg.stop_after}"
                break
            if step and (why := clock.stop_reason()) is not None:
                stopped = why
                break
            clock.step_started()
            batch = to_device(sample_batch(groups, weights, q_tokens, cfg, rng), device)
            lm, qa = _train_step(model, opt, batch, step, cfg, clock)
            hist.append((lm.item(), qa.item()))
            if val is not None and ((step + 1) % val.every == 0 or step + 1 == cfg.steps):
                clock.validation_started()
                v = validation_loss(model, val, cfg, device)
                clock.validation_done()
                best.checked(model, step + 1, v)
            _say_step(step, lm, qa, hist, best, cfg, log, bar, t_train, now)
            if on_step is not None:
                on_step(step + 1)
            clock.step_done()
            if step == 1 and clock.tail_forwards:  # the first step's time is a warm-up's: priced from the second
                if time_tail is not None and (window_s := time_tail()) is not None:
                    clock.tail_measured(window_s)
                log(_tail_said(clock.tail_estimate, clock.deadline - now(), clock.tail_window_s))
            if val is not None and best.since >= val.patience:
                stopped = f"early stop: no better validation loss in {val.patience} checks"
                break
    except KeyboardInterrupt as e:  # SIGTERM too, as the CLI has it (cli_common.raise_interrupted): a scheduler's stop
        if not hist:  # no step trained: there is nothing to keep, and writing the starting weights passed them off
            raise     # as a trained run's, "no validation part" on its card (review396 #1); the caller writes nothing
        interrupted_by = getattr(e, "signum", signal.SIGINT)
        how = "Ctrl-C" if interrupted_by == signal.SIGINT else signal.Signals(interrupted_by).name
        stopped = f"interrupted ({how}) after {counted(len(hist), 'step')}"
        log(f"{stopped}: keeping the best weights so far, then calibrating, saving and scoring them ({how} "
            f"again aborts without writing)")
    if val is not None and hist and (not best.history or best.history[-1][0] != len(hist)):
        # Stopped between validations (--max-minutes, --stop-after, Ctrl-C; a short run may stop before its first):
        # the last step's weights are scored too, so the weights kept are the best of every validated step
        best.checked_last(len(hist), validation_loss(model, val, cfg, device))
    log(f"stopping at step {len(hist)}: {stopped}")
    if best.state is not None:
        model.load_state_dict(best.state)
    lm_end, qa_end = np.mean(hist[-20:], axis=0) if hist else (math.nan, math.nan)
    return {"steps_done": len(hist), "stopped": stopped, "train_seconds": round(now() - t_train, 1),
            **({"tail_estimate_seconds": round(clock.tail_estimate, 1)} if clock.tail_forwards else {}),
            **({"tail_window_seconds": round(clock.tail_window_s, 4)} if clock.tail_window_s is not None else {}),
            "final_lm_loss": round(float(lm_end), 4), "final_qa_loss": round(float(qa_end), 4),
            "best_validation_loss": round(best.loss, 4) if best.history else None,
            "best_step": best.step if best.history else None,  # 0: the starting weights (check_start)
            "validation": best.history, "interrupted_by": interrupted_by}
